"""The least a gate can do on a litellm stream, written plainly: the end-to-end rows' floor.

A gate that withholds tool calls until the wire's terminal event, checks that what litellm
assembled is what the wire said, and checks the arguments against the tool's schema, must
at the least:

* **read the wire**: decode every SSE event of the body as it passes (an incremental UTF-8
  decode, a line split and ``json.loads`` of every data line) and keep each call's id, name
  and argument fragments and the finish reason (:meth:`LeastGate.feed`, called with each
  piece the transport reads);
* **read each chunk** litellm yields, through litellm's public attributes, for its tool-call
  fragments and finish reason, and hold the chunks that carry them (:meth:`LeastGate.admit`);
* **decide**: see the terminal event, compare litellm's calls with the wire's, parse each
  call's arguments with jiter (duplicate keys refused) and validate them with jsonschema-rs
  (:meth:`LeastGate.decide`), then hand the held chunks out as they are.

It checks nothing else (no limits, no strict number or surrogate rules, no state machine,
no records, no release of the whole call) and is correct only for the bench's own bodies.
In the end-to-end section it runs interleaved with the plain and gated runs, on the same
body, and its three steps are timed the way the gate's entry points are (see
``bench.e2e.Sections``): its cost over plain litellm is the row's floor, what a gate doing
this work in Python costs in the same stream on this machine.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import jiter
import jsonschema_rs

from bench.bodies import TOOLS

VALIDATORS = {
    tool["function"]["name"]: jsonschema_rs.validator_for(tool["function"]["parameters"])
    for tool in TOOLS
}


class _Call:
    __slots__ = ("call_id", "fragments", "name")

    def __init__(self) -> None:
        self.call_id: str | None = None
        self.name: str | None = None
        self.fragments: list[str] = []

    def same(self, other: _Call) -> bool:
        return (self.call_id, self.name, "".join(self.fragments)) == (
            other.call_id,
            other.name,
            "".join(other.fragments),
        )


class LeastGate:
    """One stream's floor gate (see the module's text)."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._rest = ""
        self.terminal = False
        self.wire: dict[int, _Call] = {}
        self.wire_finish: str | None = None
        self.calls: dict[int, _Call] = {}
        self.finish: str | None = None
        self.held: list[Any] = []

    def feed(self, piece: bytes) -> None:
        lines = (self._rest + self._decoder.decode(piece)).split("\n")
        self._rest = lines.pop()
        for line in lines:
            if not line.startswith("data:"):
                continue
            data = line[5:].lstrip(" ")
            if data == "[DONE]":
                self.terminal = True
                continue
            choices = json.loads(data).get("choices")
            if not choices:
                continue
            choice = choices[0]
            for fragment in (choice.get("delta") or {}).get("tool_calls") or ():
                call = self.wire.get(fragment["index"])
                if call is None:
                    call = self.wire[fragment["index"]] = _Call()
                call.call_id = call.call_id or fragment.get("id")
                function = fragment.get("function") or {}
                call.name = call.name or function.get("name")
                if function.get("arguments"):
                    call.fragments.append(function["arguments"])
            self.wire_finish = choice.get("finish_reason") or self.wire_finish

    def admit(self, chunk: Any) -> Any | None:
        """The chunk to pass on now, or None when it is held."""
        choices = chunk.choices
        choice = choices[0] if choices else None
        tool_calls = choice.delta.tool_calls if choice is not None else None
        if choice is not None and choice.finish_reason:
            self.finish = choice.finish_reason
        if not tool_calls and not self.held and not self.finish:
            return chunk
        for fragment in tool_calls or ():
            call = self.calls.get(fragment.index)
            if call is None:
                call = self.calls[fragment.index] = _Call()
            call.call_id = call.call_id or fragment.id
            function = fragment.function
            call.name = call.name or function.name
            if function.arguments:
                call.fragments.append(function.arguments)
        self.held.append(chunk)
        return None

    def decide(self) -> bool:
        if not self.terminal or self.finish != self.wire_finish:
            return False
        if (self.finish == "tool_calls") != bool(
            self.wire
        ) or self.wire.keys() != self.calls.keys():
            return False
        for index, call in self.wire.items():
            if not call.same(self.calls[index]) or call.name is None:
                return False
            value = jiter.from_json(
                "".join(call.fragments).encode(), allow_inf_nan=False, catch_duplicate_keys=True
            )
            if not VALIDATORS[call.name].is_valid(value):
                return False
        return True


class _Tapped(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, inner: Any, gate: LeastGate) -> None:
        self._inner = inner
        self._gate = gate

    def __iter__(self) -> Iterator[bytes]:
        for piece in self._inner:
            self._gate.feed(piece)
            yield piece

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for piece in self._inner:
            self._gate.feed(piece)
            yield piece

    def close(self) -> None:
        self._inner.close()

    async def aclose(self) -> None:
        await self._inner.aclose()


def _tapped(response: httpx.Response, gate: LeastGate, request: httpx.Request) -> httpx.Response:
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=_Tapped(response.stream, gate),
        extensions=response.extensions,
        request=request,
    )


class LeastSyncTransport(httpx.BaseTransport):
    """The shared transport, each response's body fed to ``gate`` as it is read; closing it
    leaves the shared transport open."""

    def __init__(self, inner: httpx.BaseTransport, gate: LeastGate) -> None:
        self._inner = inner
        self._gate = gate

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        return _tapped(self._inner.handle_request(request), self._gate, request)

    def close(self) -> None:
        pass


class LeastAsyncTransport(httpx.AsyncBaseTransport):
    """:class:`LeastSyncTransport` for async clients."""

    def __init__(self, inner: httpx.AsyncBaseTransport, gate: LeastGate) -> None:
        self._inner = inner
        self._gate = gate

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return _tapped(await self._inner.handle_async_request(request), self._gate, request)

    async def aclose(self) -> None:
        pass
