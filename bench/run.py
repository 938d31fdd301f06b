"""Measure what the gate costs, against baselines measured in the same run.

Theory of operation
-------------------
Every comparison is made in pairs: the baseline and the gated variant run back to back on
the same body, the pair is repeated, and the reported figure is the median (with min and
max) of the per-pair ratios. Pairing matters on a shared 2-core machine: a burst of load
from elsewhere hits both halves of a pair, so the ratio stays readable while the absolute
times wander. Wall time and CPU time (``time.process_time``, the whole process) are both
recorded; ratios are given on both.

Sections (each row of the output names its section):

* ``e2e``: litellm iterating a stream from :class:`FakeUpstream` over loopback, plain vs
  gated, sync and async, text-only and tool-call bodies of 200 / 2,000 / 20,000 events and
  four interleaved calls of 16 KB. The plain baseline gets a client built the way the gate
  builds its own (a fresh litellm handler around one shared httpx transport), so the ratio
  is the gate's cost, not a difference between HTTP stacks. The OpenAI SDK's
  ``chat.completions.stream()`` helper and its plain ``create(stream=True)`` are reference
  rows (ratio against plain litellm on the same body).
* ``core``: the gate core alone fed the raw body in 64 KiB pieces, vs the floor: a bare SSE
  line split plus ``json.loads`` of every data line over the same pieces, written here.
* ``decision``: parse + schema + policy for one call at 2 KB, 16 KB and 1 MB, for a document
  of many small objects (the schema's worst case) and one long string (a file's content).
* ``ttft``: time to the first text chunk, plain vs gated.
* ``memory``: tracemalloc peak over the withheld argument bytes, core only.
* ``loop``: an async gated stream with a 1 MB call in asyncio debug mode
  (``slow_callback_duration = 5 ms``): slow callbacks, and every gate section that ran on
  the loop's thread for longer than 5 ms.

Budgets are printed next to the figures; they are never asserted here (timing belongs to
this report, not to tests).
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import contextlib
import gc
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx
import litellm
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, HTTPHandler

from bench.bodies import (
    TOOLS,
    count_events,
    file_arguments,
    interleaved_body,
    rows_arguments,
    text_body,
    tool_body,
)
from litellm_toolgate import PolicyDecision, ToolGate
from litellm_toolgate.core.attempt import ChatAttempt
from litellm_toolgate.core.registry import ToolRegistry
from litellm_toolgate.edge import carrier as carrier_mod
from litellm_toolgate.edge import transport as transport_mod

litellm.suppress_debug_info = True
HERE = Path(__file__).resolve().parent
PIECE = 65_536

Row = dict[str, Any]


# ---- small statistics ------------------------------------------------------------------------
def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


class Timer:
    """Wall and CPU time of one run."""

    def __enter__(self) -> Timer:
        self.wall0 = time.perf_counter()
        self.cpu0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


# ---- the upstream -----------------------------------------------------------------------------
class Upstream:
    """FakeUpstream in a child process (bench/serve.py), serving the current body."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="toolgate-bench-")
        self._names: dict[bytes, str] = {}
        self.name = ""
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    @property
    def body(self) -> bytes:
        return (Path(self._folder.name) / self.name).read_bytes()

    @body.setter
    def body(self, data: bytes) -> None:
        name = self._names.get(data)
        if name is None:
            name = self._names[data] = f"body-{len(self._names)}.sse"
            (Path(self._folder.name) / name).write_bytes(data)
        self.name = name

    def __enter__(self) -> Upstream:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.serve", self._folder.name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        port = int(self._process.stdout.readline())
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(10)
        self._folder.cleanup()

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.name}]

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        return {
            "model": "cometapi/gpt-4o-mini",
            "messages": self.messages(),
            "api_base": self.base_url,
            "api_key": "sk-bench",
            "stream": True,
            "num_retries": 0,
            "tools": TOOLS,
            **extra,
        }


# ---- end to end -------------------------------------------------------------------------------
RETRIED: list[str] = []


def once_more(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run again once if the loopback connection failed (seen rarely under heavy load);
    every retry is listed in the results."""

    def sync(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            RETRIED.append(f"{fn.__name__}: {type(exc).__name__}")
        return fn(*args)

    async def asynchronous(*args: Any) -> Any:
        try:
            return await fn(*args)
        except Exception as exc:
            RETRIED.append(f"{fn.__name__}: {type(exc).__name__}")
        return await fn(*args)

    return asynchronous if asyncio.iscoroutinefunction(fn) else sync


class EndToEnd:
    def __init__(self, upstream: Upstream) -> None:
        self.up = upstream
        self.gate = ToolGate(TOOLS)
        self.sync_transport = httpx.HTTPTransport()
        self.async_transport: httpx.AsyncHTTPTransport | None = None

    @once_more
    def plain_sync(self) -> tuple[Timer, int]:
        with Timer() as t:
            client = HTTPHandler(client=httpx.Client(transport=self.sync_transport))
            n = sum(1 for _ in litellm.completion(**self.up.kwargs(client=client)))
        return t, n

    @once_more
    def gated_sync(self) -> tuple[Timer, int]:
        with Timer() as t:
            n = sum(1 for _ in self.gate.completion(**self.up.kwargs()))
        return t, n

    @once_more
    async def plain_async(self) -> tuple[Timer, int]:
        if self.async_transport is None:
            self.async_transport = httpx.AsyncHTTPTransport()
        with Timer() as t:
            client = AsyncHTTPHandler(transport=self.async_transport)
            n = 0
            async for _ in await litellm.acompletion(**self.up.kwargs(client=client)):
                n += 1
        return t, n

    @once_more
    async def gated_async(self) -> tuple[Timer, int]:
        with Timer() as t:
            n = 0
            async for _ in await self.gate.acompletion(**self.up.kwargs()):
                n += 1
        return t, n


def pair_rows(  # noqa: PLR0917
    section: str,
    name: str,
    base: list[Timer],
    other: list[Timer],
    events: int,
    budget: float | None,
    extra: dict[str, Any] | None = None,
) -> Row:
    wall = [o.wall / b.wall for b, o in zip(base, other, strict=True)]
    cpu = [o.cpu / b.cpu for b, o in zip(base, other, strict=True)]
    base_us = [b.wall / events * 1e6 for b in base]
    other_us = [o.wall / events * 1e6 for o in other]
    row: Row = {
        "section": section,
        "name": name,
        "events": events,
        "ratio_wall": summary(wall),
        "ratio_cpu": summary(cpu),
        "baseline_us_per_event": summary(base_us),
        "measured_us_per_event": summary(other_us),
        "budget_ratio": budget,
    }
    if budget is not None:
        # Judged on CPU time: the gate adds work, not waiting, and CPU time is far less
        # disturbed by other processes on a shared machine than wall time is. (End-to-end
        # rows are judged again by attributed() on the gate's own CPU time.)
        row["met"] = statistics.median(cpu) <= budget
    row.update(extra or {})
    return row


def failed_row(section: str, name: str, exc: Exception) -> Row:
    # The exception's type and the first words of its message (litellm's, about the
    # connection); the bodies are the bench's own, nothing secret.
    return {"section": section, "name": name, "error": f"{type(exc).__name__}: {exc}"[:160]}


def attributed(row: Row, base: list[Timer], gate_cpu_ms: list[float]) -> None:
    """The gate's own CPU time in each gated run, over the paired plain run's CPU time.

    On a shared machine the ratio of two whole runs wanders by more than the 3 % the budget
    allows; this figure wanders far less, because it counts only the CPU time spent inside
    the gate's entry points (the wire tap, the carrier, the decision, the release), timed
    in the gated runs themselves. It leaves out what happens between them (the gated
    iterator's own frames, one more httpx client per call), so it is read together with
    the paired ratio, which includes everything (and the timing wrappers' own cost).
    """
    ratios = [1 + g / (b.cpu * 1000) for g, b in zip(gate_cpu_ms, base, strict=True)]
    row["gate_cpu_ms"] = statistics.median(gate_cpu_ms)
    row["plain_cpu_ms"] = statistics.median(b.cpu for b in base) * 1000
    row["attributed_ratio"] = summary(ratios)
    row["met"] = statistics.median(ratios) <= 1.03


def e2e_section(up: Upstream, shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    e2e = EndToEnd(up)
    rows: list[Row] = []
    # Warm both paths once (imports, connection set-up, litellm's lazy tables).
    up.body = shapes[0][1]
    e2e.plain_sync()
    e2e.gated_sync()
    for label, body, repeats in shapes:
        up.body = body
        events = count_events(body)
        base: list[Timer] = []
        gated: list[Timer] = []
        gate_cpu: list[float] = []

        def gated_run(gate_cpu: list[float] = gate_cpu) -> tuple[Timer, int]:
            sections: list[tuple[str, float, float]] = []
            with gate_sections(None, sections):
                result = e2e.gated_sync()
            gate_cpu.append(sum(cpu for _, _, cpu in sections))
            return result

        try:
            for i in range(repeats):
                if i % 2 == 0:
                    base.append(e2e.plain_sync()[0])
                    gated.append(gated_run()[0])
                else:
                    gated.append(gated_run()[0])
                    base.append(e2e.plain_sync()[0])
        except Exception as exc:  # recorded, not hidden: the row says what failed
            rows.append(failed_row("e2e", f"sync {label}", exc))
            log(rows[-1])
            continue
        rows.append(pair_rows("e2e", f"sync {label}", base, gated, events, 1.03))
        attributed(rows[-1], base, gate_cpu)
        log(rows[-1])

    async def run_async() -> None:
        up.body = shapes[0][1]
        await e2e.plain_async()
        await e2e.gated_async()
        for label, body, repeats in shapes:
            up.body = body
            events = count_events(body)
            base: list[Timer] = []
            gated: list[Timer] = []
            gate_cpu: list[float] = []

            async def gated_run(gate_cpu: list[float] = gate_cpu) -> Timer:
                sections: list[tuple[str, float, float]] = []
                with gate_sections(None, sections):
                    timer = (await e2e.gated_async())[0]
                gate_cpu.append(sum(cpu for _, _, cpu in sections))
                return timer

            try:
                for i in range(repeats):
                    if i % 2 == 0:
                        base.append((await e2e.plain_async())[0])
                        gated.append(await gated_run())
                    else:
                        gated.append(await gated_run())
                        base.append((await e2e.plain_async())[0])
            except Exception as exc:  # recorded, not hidden: the row says what failed
                rows.append(failed_row("e2e", f"async {label}", exc))
                log(rows[-1])
                continue
            rows.append(pair_rows("e2e", f"async {label}", base, gated, events, 1.03))
            attributed(rows[-1], base, gate_cpu)
            log(rows[-1])

    asyncio.run(run_async())
    return rows


def sdk_section(up: Upstream, shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    """The OpenAI SDK's stream helper and plain create(stream=True), against plain litellm."""
    import openai

    e2e = EndToEnd(up)
    client = openai.OpenAI(base_url=up.base_url, api_key="sk-bench", max_retries=0)

    def request() -> dict[str, Any]:
        return {"model": "gpt-4o-mini", "messages": up.messages(), "tools": TOOLS}

    def helper() -> tuple[Timer, int]:
        with Timer() as t, client.chat.completions.stream(**request()) as stream:
            n = sum(1 for _ in stream)
        return t, n

    def create() -> tuple[Timer, int]:
        with Timer() as t:
            n = sum(1 for _ in client.chat.completions.create(stream=True, **request()))
        return t, n

    rows: list[Row] = []
    for label, body, repeats in shapes:
        up.body = body
        events = count_events(body)
        helper()
        for name, fn in (("stream() helper", helper), ("create(stream=True)", create)):
            base: list[Timer] = []
            other: list[Timer] = []
            for _ in range(repeats):
                base.append(e2e.plain_sync()[0])
                other.append(fn()[0])
            rows.append(
                pair_rows(
                    "reference", f"OpenAI SDK {name}, sync {label}", base, other, events, None
                )
            )
            log(rows[-1])
    return rows


# ---- the core alone ---------------------------------------------------------------------------
def floor_decode(pieces: list[bytes]) -> int:
    """The floor: incremental UTF-8, a line split, json.loads of every data line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    rest = ""
    n = 0
    for piece in pieces:
        lines = (rest + decoder.decode(piece)).split("\n")
        rest = lines.pop()
        for line in lines:
            if line.startswith("data:"):
                data = line[5:].lstrip(" ")
                if data != "[DONE]":
                    json.loads(data)
                n += 1
    return n


def core_stream(registry: ToolRegistry, pieces: list[bytes]) -> ChatAttempt:
    attempt = ChatAttempt(registry)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    for piece in pieces:
        attempt.receive_bytes(piece)
    attempt.receive_eof()
    return attempt


def core_whole(registry: ToolRegistry, pieces: list[bytes]) -> None:
    attempt = core_stream(registry, pieces)
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    attempt.release()


def split(body: bytes, size: int = PIECE) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def core_section(shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    registry = ToolRegistry.from_tools(TOOLS)
    rows: list[Row] = []
    for label, body, repeats in shapes:
        pieces = split(body)
        events = count_events(body)
        assert floor_decode(pieces) == events
        floor_decode(pieces)
        core_whole(registry, pieces)
        base: list[Timer] = []
        stream: list[Timer] = []
        whole: list[Timer] = []
        for _ in range(repeats):
            with Timer() as t:
                floor_decode(pieces)
            base.append(t)
            with Timer() as t:
                core_stream(registry, pieces)
            stream.append(t)
            with Timer() as t:
                core_whole(registry, pieces)
            whole.append(t)
        rows.append(pair_rows("core", f"stream {label}", base, stream, events, 2.0))
        log(rows[-1])
        rows.append(pair_rows("core", f"stream + decision {label}", base, whole, events, None))
        log(rows[-1])
    return rows


# ---- decision latency -------------------------------------------------------------------------
def prepared(registry: ToolRegistry, name: str, arguments: str) -> ChatAttempt:
    fragments = max(1, len(arguments) // 64)
    body, _ = tool_body(fragments + 5, arguments=arguments, name=name)
    return core_stream(registry, split(body))


def decision_section(sizes: list[tuple[str, int, int]]) -> list[Row]:
    registry = ToolRegistry.from_tools(TOOLS)
    budgets = {2_048: 50.0, 16_384: 200.0, 1_048_576: 10_000.0}
    rows: list[Row] = []
    for shape, tool, make in (
        ("many small objects", "record_rows", rows_arguments),
        ("one long string", "write_file", file_arguments),
    ):
        for label, size, repeats in sizes:
            arguments = make(size)
            attempts = [prepared(registry, tool, arguments) for _ in range(repeats + 1)]
            times: list[float] = []
            for i, attempt in enumerate(attempts):
                started = time.perf_counter()
                for call in attempt.conclude():
                    attempt.decide(call.index, PolicyDecision.approve())
                elapsed = time.perf_counter() - started
                attempt.release()
                if i:  # the first one warms the validator cache
                    times.append(elapsed * 1e6)
            budget = budgets.get(size)
            row: Row = {
                "section": "decision",
                "name": f"{label} {shape}",
                "bytes": len(arguments),
                "us": summary(times),
                "budget_us": budget,
            }
            if budget is not None:
                row["met"] = statistics.median(times) <= budget
            rows.append(row)
            log(row)
    return rows


# ---- time to first text ----------------------------------------------------------------------
def ttft_section(up: Upstream, body: bytes, repeats: int) -> list[Row]:
    e2e = EndToEnd(up)
    up.body = body

    def first_sync(gated: bool) -> float:
        started = time.perf_counter()
        if gated:
            stream = e2e.gate.completion(**up.kwargs())
        else:
            client = HTTPHandler(client=httpx.Client(transport=e2e.sync_transport))
            stream = litellm.completion(**up.kwargs(client=client))
        first = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        assert first is not None
        return first * 1000

    async def first_async(gated: bool) -> float:
        if e2e.async_transport is None:
            e2e.async_transport = httpx.AsyncHTTPTransport()
        started = time.perf_counter()
        if gated:
            stream = await e2e.gate.acompletion(**up.kwargs())
        else:
            client = AsyncHTTPHandler(transport=e2e.async_transport)
            stream = await litellm.acompletion(**up.kwargs(client=client))
        first = None
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        assert first is not None
        return first * 1000

    def row(mode: str, plain: list[float], gated: list[float]) -> Row:
        diffs = [g - p for p, g in zip(plain, gated, strict=True)]
        spread = statistics.median([abs(a - b) for a, b in pairwise(plain)] or [0.0])
        out: Row = {
            "section": "ttft",
            "name": f"{mode} first text chunk",
            "plain_ms": summary(plain),
            "gated_ms": summary(gated),
            "diff_ms": summary(diffs),
            "noise_ms": spread,
        }
        # No measurable delay: the gated stream is not later than the plain one by more than
        # the plain runs differ from each other.
        out["met"] = statistics.median(diffs) <= spread
        return out

    first_sync(False)
    first_sync(True)
    plain = []
    gated = []
    for i in range(repeats):
        if i % 2:
            gated.append(first_sync(True))
            plain.append(first_sync(False))
        else:
            plain.append(first_sync(False))
            gated.append(first_sync(True))
    rows = [row("sync", plain, gated)]
    log(rows[-1])

    async def run() -> tuple[list[float], list[float]]:
        await first_async(False)
        await first_async(True)
        p: list[float] = []
        g: list[float] = []
        for i in range(repeats):
            if i % 2:
                g.append(await first_async(True))
                p.append(await first_async(False))
            else:
                p.append(await first_async(False))
                g.append(await first_async(True))
        return p, g

    rows.append(row("async", *asyncio.run(run())))
    log(rows[-1])
    return rows


# ---- memory -----------------------------------------------------------------------------------
def memory_section(size: int, fragment_sizes: list[int]) -> list[Row]:
    registry = ToolRegistry.from_tools(TOOLS)
    arguments = file_arguments(size)
    withheld = len(arguments.encode())
    rows: list[Row] = []
    for fragment in fragment_sizes:
        body, _ = tool_body(max(6, withheld // fragment + 5), arguments=arguments)
        pieces = split(body)
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            attempt = core_stream(registry, pieces)
            streamed_peak = tracemalloc.get_traced_memory()[1] - start
            held = tracemalloc.get_traced_memory()[0] - start
            tracemalloc.reset_peak()
            for call in attempt.conclude():
                attempt.decide(call.index, PolicyDecision.approve())
            released = attempt.release()
            decided_peak = tracemalloc.get_traced_memory()[1] - start
            assert released and released[0].arguments == arguments
            del attempt, released
        finally:
            tracemalloc.stop()
        row: Row = {
            "section": "memory",
            "name": f"{withheld // 1024} KiB withheld, {fragment}-byte fragments",
            "withheld_bytes": withheld,
            "streaming_peak_ratio": streamed_peak / withheld,
            "held_at_terminal_ratio": held / withheld,
            "decision_peak_ratio": decided_peak / withheld,
            "budget_ratio": 1.5,
            "met": streamed_peak / withheld <= 1.5,
        }
        rows.append(row)
        log(row)
    return rows


# ---- the event loop ---------------------------------------------------------------------------
class _SlowCallbacks(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.worst = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("Executing") and " took " in message:
            self.count += 1
            seconds = message.rsplit(" took ", 1)[1].split(" ")[0]
            with contextlib.suppress(ValueError):
                self.worst = max(self.worst, float(seconds) * 1000)


@contextmanager
def gate_sections(
    loop_thread: threading.Thread | None, out: list[tuple[str, float, float]]
) -> Iterator[None]:
    """Time every gate entry point that runs on the loop's thread (the bench's own wrapper).

    Both wall time and the thread's own CPU time are kept: wall time also counts waiting for
    the GIL while other threads (litellm's logging pool, the decision worker) run, CPU time
    only what the gate itself did on the loop.
    """
    targets: list[tuple[Any, str]] = [
        (transport_mod.WireTap, "feed"),
        (transport_mod.WireTap, "eof"),
        (carrier_mod.CarrierChunks, "admit"),
        (carrier_mod.CarrierChunks, "release"),
        (ChatAttempt, "conclude"),
        (ChatAttempt, "decide"),
        (ChatAttempt, "release"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name in targets]

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if loop_thread is not None and threading.current_thread() is not loop_thread:
                return fn(*args, **kwargs)
            started = time.perf_counter()
            cpu = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall_ms = (time.perf_counter() - started) * 1000
                out.append((label, wall_ms, (time.thread_time() - cpu) * 1000))

        return timed

    for owner, name, fn in saved:
        setattr(owner, name, wrap(f"{owner.__name__}.{name}", fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)


def loop_section(up: Upstream, size: int) -> list[Row]:
    arguments = rows_arguments(size)
    body, _ = tool_body(max(6, len(arguments) // 64 + 5), arguments=arguments, name="record_rows")
    up.body = body
    e2e = EndToEnd(up)
    rows: list[Row] = []
    logger = logging.getLogger("asyncio")
    for gated in (False, True):
        handler = _SlowCallbacks()
        logger.addHandler(handler)
        sections: list[tuple[str, float, float]] = []

        async def main(
            gated: bool = gated, sections: list[tuple[str, float, float]] = sections
        ) -> None:
            loop = asyncio.get_running_loop()
            loop.slow_callback_duration = 0.005
            with gate_sections(threading.current_thread(), sections):
                await (e2e.gated_async() if gated else e2e.plain_async())

        try:
            asyncio.run(main(), debug=True)
        finally:
            logger.removeHandler(handler)
        over = [name for name, _, cpu in sections if cpu > 5.0]
        over_wall = [name for name, wall, _ in sections if wall > 5.0]
        worst: dict[str, float] = {}
        worst_cpu: dict[str, float] = {}
        for name, wall, cpu in sections:
            worst[name] = max(worst.get(name, 0.0), wall)
            worst_cpu[name] = max(worst_cpu.get(name, 0.0), cpu)
        row: Row = {
            "section": "loop",
            "name": f"async {'gated' if gated else 'plain'}, {len(arguments) // 1024} KiB call",
            "slow_callbacks": handler.count,
            "worst_callback_ms": handler.worst,
            "gate_sections": len(sections),
            "gate_sections_over_5ms": len(over),
            "worst_gate_section_ms": max(worst_cpu.values(), default=0.0),
            "gate_sections_over_5ms_wall": len(over_wall),
            "worst_gate_section_wall_ms": max(worst.values(), default=0.0),
            "worst_cpu_by_section_ms": worst_cpu,
            "worst_wall_by_section_ms": worst,
        }
        if gated:
            row["met"] = not over
        rows.append(row)
        log(row)
    return rows


# ---- output -----------------------------------------------------------------------------------
def log(row: Row) -> None:
    print(f"  {row['section']:9} {row['name']}: {brief(row)}", file=sys.stderr, flush=True)


def fmt_range(s: dict[str, float], digits: int = 3) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def brief(row: Row) -> str:
    section = row["section"]
    if "error" in row:
        return f"run failed: {row['error']}"
    if section == "e2e":
        return (
            f"paired ×{fmt_range(row['ratio_wall'])} wall, ×{fmt_range(row['ratio_cpu'])} cpu; "
            f"gate's own CPU ×{fmt_range(row['attributed_ratio'])} ({row['gate_cpu_ms']:.1f} of "
            f"{row['plain_cpu_ms']:.0f} ms); plain litellm "
            f"{row['baseline_us_per_event']['median']:.0f} µs/event"
        )
    if section in ("core", "reference"):
        return (
            f"×{fmt_range(row['ratio_wall'])} wall, ×{fmt_range(row['ratio_cpu'])} cpu; "
            f"baseline {row['baseline_us_per_event']['median']:.1f} µs/event, "
            f"measured {row['measured_us_per_event']['median']:.1f} µs/event"
        )
    if section == "decision":
        return f"{fmt_range(row['us'], 1)} µs ({row['bytes']} bytes)"
    if section == "ttft":
        return (
            f"plain {fmt_range(row['plain_ms'], 2)} ms, gated {fmt_range(row['gated_ms'], 2)} ms, "
            f"diff {fmt_range(row['diff_ms'], 2)} ms, noise {row['noise_ms']:.2f} ms"
        )
    if section == "memory":
        return (
            f"streaming peak ×{row['streaming_peak_ratio']:.2f}, held at terminal "
            f"×{row['held_at_terminal_ratio']:.2f}, "
            f"through the decision ×{row['decision_peak_ratio']:.2f}"
        )
    if section == "loop":
        return (
            f"{row['slow_callbacks']} slow callbacks (worst {row['worst_callback_ms']:.1f} ms); "
            f"gate sections on the loop over 5 ms of CPU: {row['gate_sections_over_5ms']} of "
            f"{row['gate_sections']} (worst {row['worst_gate_section_ms']:.2f} ms CPU, "
            f"{row['worst_gate_section_wall_ms']:.2f} ms wall)"
        )
    return ""


def markdown(results: dict[str, Any]) -> str:
    dates = sorted(set(results.get("sections_when", {}).values())) or [results["when"]]
    lines = [
        f"Measured {' and '.join(dates)} on {results['machine']}, litellm {results['litellm']}, "
        f"{'quick run' if results['quick'] else 'full run'}. "
        "Ratios: gated ÷ baseline, median (min–max) over interleaved pairs; "
        "ratio budgets are judged on CPU time.",
        "",
        "| section | row | figure | budget | met |",
        "|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        budget = ""
        if row.get("budget_ratio") is not None:
            budget = f"≤ ×{row['budget_ratio']}"
        elif row.get("budget_us") is not None:
            budget = f"≤ {row['budget_us']:g} µs"
        elif row["section"] == "ttft":
            budget = "within noise"
        elif row["section"] == "loop" and "met" in row:
            budget = "no gate section > 5 ms CPU"
        met = {True: "yes", False: "**no**"}.get(row.get("met"), "")  # type: ignore[arg-type]
        lines.append(f"| {row['section']} | {row['name']} | {brief(row)} | {budget} | {met} |")
    return "\n".join(lines) + "\n"


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "e2e": [
                ("text 20 events", text_body(20), 1),
                ("tool-call 20 events", tool_body(20)[0], 1),
                ("4 interleaved calls of 1 KB", interleaved_body(4, 1024)[0], 1),
            ],
            "sdk": [("tool-call 20 events", tool_body(20)[0], 1)],
            "core": [
                ("text 20 events", text_body(20), 2),
                ("tool-call 20 events", tool_body(20)[0], 2),
            ],
            "decision": [("2 KB", 2_048, 2)],
            "ttft": (text_body(20), 2),
            "memory": (16_384, [16]),
            "loop": 16_384,
        }
    return {
        "e2e": [
            ("text 200 events", text_body(200), 5),
            ("tool-call 200 events", tool_body(200)[0], 5),
            ("text 2,000 events", text_body(2_000), 3),
            ("tool-call 2,000 events", tool_body(2_000)[0], 3),
            ("text 20,000 events", text_body(20_000), 1),
            ("tool-call 20,000 events", tool_body(20_000)[0], 1),
            ("4 interleaved calls of 16 KB", interleaved_body(4, 16_384)[0], 3),
        ],
        "sdk": [("tool-call 2,000 events", tool_body(2_000)[0], 3)],
        "core": [
            ("text 2,000 events", text_body(2_000), 15),
            ("tool-call 2,000 events", tool_body(2_000)[0], 15),
            ("text 20,000 events", text_body(20_000), 5),
            ("4 interleaved calls of 16 KB", interleaved_body(4, 16_384)[0], 15),
        ],
        "decision": [("2 KB", 2_048, 50), ("16 KB", 16_384, 20), ("1 MB", 1_048_576, 3)],
        "ttft": (text_body(200), 15),
        "memory": (1_048_576, [8, 64, 1024]),
        "loop": 1_048_576,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one or two repeats")
    parser.add_argument("--out", type=Path, help="JSON results (default bench/results.json)")
    parser.add_argument("--md", type=Path, help="markdown table (default bench/results.md)")
    parser.add_argument(
        "--only",
        action="append",
        help="run only these sections (core, decision, memory, ttft, loop, e2e, sdk); the "
        "other sections' rows are kept from the existing output file",
    )
    args = parser.parse_args(argv)
    out = args.out or HERE / ("results-quick.json" if args.quick else "results.json")
    md = args.md or out.with_suffix(".md")
    chosen = plan(args.quick)
    wanted = set(args.only or chosen)
    started = time.perf_counter()
    rows: list[Row] = []
    with Upstream() as up:
        steps: list[tuple[str, Callable[[], list[Row]]]] = [
            ("core", lambda: core_section(chosen["core"])),
            ("decision", lambda: decision_section(chosen["decision"])),
            ("memory", lambda: memory_section(*chosen["memory"])),
            ("ttft", lambda: ttft_section(up, *chosen["ttft"])),
            ("loop", lambda: loop_section(up, chosen["loop"])),
            ("e2e", lambda: e2e_section(up, chosen["e2e"])),
            ("sdk", lambda: sdk_section(up, chosen["sdk"])),
        ]
        for name, step in steps:
            if name in wanted:
                print(f"== {name}", file=sys.stderr, flush=True)
                rows.extend(step())
    if args.quick:
        # One or two repeats at toy sizes: a smoke run, not a measurement to judge.
        for row in rows:
            row.pop("met", None)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ran = {_SECTION_OF.get(row["section"], row["section"]) for row in rows}
    when = dict.fromkeys(ran, now)
    if args.only and out.exists():
        previous = json.loads(out.read_text())
        if previous.get("quick") == args.quick:
            kept = [
                r
                for r in previous["rows"]
                if _SECTION_OF.get(r["section"], r["section"]) not in ran
            ]
            rows = kept + rows
            when = {**previous.get("sections_when", {}), **when}
    order = ["core", "decision", "memory", "ttft", "loop", "e2e", "reference"]
    rows.sort(key=lambda r: order.index(r["section"]))
    results = {
        "when": now,
        "sections_when": when,
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "litellm": _version("litellm"),
        "openai": _version("openai"),
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "rows": rows,
        "retried_runs": RETRIED,
    }
    out.write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results)
    md.write_text(table)
    print(table)
    return 0


_SECTION_OF = {"reference": "sdk"}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)
