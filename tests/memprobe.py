"""Measure what a hostile upstream costs the gate: run one scenario, print one JSON line.

Run as ``python tests/memprobe.py SCENARIO... [--no-trace]``; ``test_attack_memory.py``
runs every scenario in one subprocess (tracemalloc's peak is reset between scenarios, and
so is the peak RSS, through ``/proc/self/clear_refs``; RSS is the coarser figure, since
memory a previous scenario freed may be reused without growing it).

A raw loopback HTTP server in this process streams the scenario's body, generated lazily
piece by piece (a 1 GiB body is never held anywhere), and counts what it managed to send
before the client went away. The gate reads it through the real litellm (or, for the
``core_*`` scenarios, the sans-I/O core is fed the same pieces directly). Reported:

* ``reason``: the quarantine reason (or null), ``released``: tool calls handed over;
* ``sent``: body bytes the server got out before the connection closed (the gate must stop
  reading at its limit, so this stays near the limit plus the sockets' buffers);
* ``traced_peak``: tracemalloc's peak during the attack, above what was traced before it;
* ``hwm_growth``: growth of the process's peak RSS (VmHWM) during the attack;
* ``seconds``: wall time of the attack.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from litellm_toolgate import Limits, ToolCallQuarantined, ToolGate
from litellm_toolgate.core import Attempt, ToolRegistry

KIB, MIB, GIB = 1024, 1024**2, 1024**3
TOOLS = [{"type": "function", "function": {"name": "write_file"}}]
HEAD = b'data: {"id":"chatcmpl-m","object":"chat.completion.chunk","choices":[{"index":0,"delta":'


def event(delta: bytes) -> bytes:
    return HEAD + delta + b',"finish_reason":null}]}\n\n'


def opening(index: int) -> bytes:
    return event(
        b'{"tool_calls":[{"index":%d,"id":"call_%d","type":"function",'
        b'"function":{"name":"write_file","arguments":""}}]}' % (index, index)
    )


def huge_arguments() -> Iterator[bytes]:
    """One call whose arguments run to 1 GiB in 64 KiB fragments."""
    yield opening(0)
    piece = event(b'{"tool_calls":[{"index":0,"function":{"arguments":"' + b"A" * 65536 + b'"}}]}')
    for _ in range(GIB // 65536):
        yield piece


def huge_line() -> Iterator[bytes]:
    """1 GiB of one data line that never ends."""
    yield b'data: {"choices":[{"index":0,"delta":{"content":"'
    block = b"B" * (256 * KIB)
    for _ in range(GIB // len(block)):
        yield block


def many_events() -> Iterator[bytes]:
    """A million one-character text events."""
    piece = event(b'{"content":"x"}') * 64
    for _ in range(1_000_000 // 64):
        yield piece


def many_indexes() -> Iterator[bytes]:
    """A million parallel calls, one new tool index per event."""
    for start in range(0, 1_000_000, 64):
        yield b"".join(opening(i) for i in range(start, start + 64))


def many_indexes_one_event() -> Iterator[bytes]:
    """Parallel calls in one event: a tool_calls list as long as the event limit allows."""
    yield HEAD + b'{"tool_calls":['
    fragment = b'{"index":%d,"id":"c%d","function":{"name":"w"}},'
    for start in range(0, 1_000_000, 1024):
        yield b"".join(fragment % (i, i) for i in range(start, start + 1024))


def huge_ids() -> Iterator[bytes]:
    """Parallel calls whose ids are nearly as large as an event may be."""
    for index in range(64):
        call_id = b"%d-" % index + b"I" * (4 * MIB - 400)
        yield event(
            b'{"tool_calls":[{"index":%d,"id":"%s","type":"function",'
            b'"function":{"name":"write_file","arguments":""}}]}' % (index, call_id)
        )


SCENARIOS: dict[str, tuple[Callable[[], Iterator[bytes]], Limits]] = {
    "huge_arguments": (huge_arguments, Limits()),
    "huge_line": (huge_line, Limits()),
    "many_events": (many_events, Limits(max_events=10_000)),
    "many_indexes": (many_indexes, Limits()),
    "many_indexes_one_event": (many_indexes_one_event, Limits()),
    "core_huge_ids": (huge_ids, Limits()),
    "core_many_events": (many_events, Limits(max_events=10_000)),
    "core_huge_arguments": (huge_arguments, Limits()),
}


class LazyServer:
    """Answers every POST with a chunked event stream drawn from ``body()`` as it goes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.body: Callable[[], Iterator[bytes]] = lambda: iter(())
        self.sent = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(65536)
        head, _, rest = data.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
        while len(rest) < length:
            rest += conn.recv(65536)
        conn.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        self.sent = 0
        try:
            for piece in self.body():
                conn.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.sent += len(piece)
            conn.sendall(b"0\r\n\r\n")
        except OSError:
            return  # the client went away: what the test wants


def vm(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)


def through_litellm(server: LazyServer, limits: Limits) -> tuple[str | None, int]:
    gate = ToolGate(TOOLS, limits=limits)
    chunks: list[Any] = []
    try:
        for chunk in gate.completion(
            model="cometapi/gpt-4o-mini",
            messages=[{"role": "user", "content": "go"}],
            api_base=f"http://127.0.0.1:{server.port}/v1",
            api_key="sk-test",
            stream=True,
            num_retries=0,
        ):
            chunks.append(chunk)
    except ToolCallQuarantined as fault:
        return fault.reason.value, 0
    calls = [tc for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])]
    return None, len(calls)


def through_core(
    body: Callable[[], Iterator[bytes]], limits: Limits, server: LazyServer
) -> tuple[str | None, int]:
    attempt = Attempt(ToolRegistry.from_tools(TOOLS), limits)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    server.sent = 0
    try:
        for piece in body():
            attempt.receive_bytes(piece)
            server.sent += len(piece)
        attempt.receive_eof()
        return None, len(attempt.conclude())
    except ToolCallQuarantined as fault:
        return fault.reason.value, 0


def measure(name: str, server: LazyServer, trace: bool) -> dict[str, Any]:
    body, limits = SCENARIOS[name]
    server.body = body
    gc.collect()
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets the peak RSS (VmHWM) to the current RSS
    hwm_before = vm("VmHWM")
    if trace:
        tracemalloc.start()
    traced_before = tracemalloc.get_traced_memory()[0] if trace else 0
    started = time.monotonic()
    if name.startswith("core_"):
        reason, released = through_core(body, limits, server)
    else:
        reason, released = through_litellm(server, limits)
    seconds = time.monotonic() - started
    traced_peak = tracemalloc.get_traced_memory()[1] - traced_before if trace else None
    tracemalloc.stop()
    return {
        "scenario": name,
        "reason": reason,
        "released": released,
        "sent": server.sent,
        "traced_peak": traced_peak,
        "hwm_growth": vm("VmHWM") - hwm_before,
        "seconds": round(seconds, 3),
        "limits": {
            "max_argument_bytes": limits.max_argument_bytes,
            "max_total_argument_bytes": limits.max_total_argument_bytes,
            "max_event_bytes": limits.max_event_bytes,
            "max_events": limits.max_events,
            "max_calls": limits.max_calls,
        },
    }


def main() -> None:
    names = [a for a in sys.argv[1:] if not a.startswith("--")] or list(SCENARIOS)
    trace = "--no-trace" not in sys.argv
    server = LazyServer()
    # Warm up: the first request imports and caches most of litellm.
    finish = HEAD + b'{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    server.body = lambda: iter([event(b'{"content":"hi"}'), finish])
    through_litellm(server, Limits())
    for name in names:
        print(json.dumps(measure(name, server, trace)), flush=True)


if __name__ == "__main__":
    main()
