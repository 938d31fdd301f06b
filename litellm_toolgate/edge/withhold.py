"""Withholding on the wire itself, for ``litellm.acompletion(stream=True)`` under a callback.

When the gate is only a callback (``litellm.callbacks = [gate]``), litellm hands its own
stream to the caller and no hook can hold a chunk back: the only place the gate stands
between the upstream and the caller is the HTTP client it injects before the request. So the
client's transport does the withholding, on SSE messages rather than litellm chunks.

Every piece of body goes to the attempt first (exactly as :mod:`transport` does), and through
a second, framing-only :class:`SSEDecoder` that cuts it into messages. A message that carries
only text, role or usage is passed on at once; from the first message that carries a tool
call, a finish reason, ``[DONE]`` or anything not plainly text, every message is held. On a
Responses wire (``litellm.aresponses`` on a native route) the same holds per event: text,
reasoning and lifecycle events pass, and from the first event of a function-call item (or
of any other tool item), the final event or anything unknown, every event is held. Through
litellm's bridge (``cometapi/...``) the wire is chat, so the chat rule applies. When
the body has ended cleanly the attempt concludes, the policy runs (awaited right here, on the
caller's loop), and only then are the held messages let through. A non-streamed body is
held whole and let through once it ended cleanly (the callback then checks litellm's
response against it). On any fault the stream
raises the attempt's :class:`ToolCallQuarantined` instead; litellm turns that into its own
exception with the quarantine as ``__cause__`` (find it with :func:`find_quarantine`).

Messages are passed on re-encoded, one ``data:`` line each, as ASCII-only JSON of the same
value. Argument strings come out identical, and litellm's line-based parser can no longer
lose a message split over two ``data:`` lines or cut at a raw U+2028. There is no carrier
cross-check in this mode (litellm assembles the calls after the gate let them go), which is
why litellm is handed this unambiguous form. Comments and ``id`` fields carry nothing litellm
reads and are dropped, and so are the ``event:`` names: on a chat wire litellm reads only
unnamed messages (others are dropped here too), and on a Responses wire it reads each
event's ``type`` from its data.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx

from ..core.attempt import ChatAttempt
from ..core.errors import QuarantineReason, ToolCallQuarantined
from ..core.policy import Policy
from ..core.sse import SSEDecoder, SSEMessage
from ..core.state import Wire
from .logs import emit_records
from .policy import ajudge
from .transport import AsyncTapTransport, WireTap

R = QuarantineReason

_TEXT_DELTA = frozenset({"role", "content", "refusal", "reasoning_content"})
# Responses events that carry only text, reasoning or lifecycle (by type prefix).
_LIVE_EVENTS = (
    "response.created",
    "response.in_progress",
    "response.queued",
    "response.output_text.",
    "response.content_part.",
    "response.reasoning",
    "response.refusal.",
)
_LIVE_ITEMS = frozenset({"message", "reasoning"})


def find_quarantine(error: BaseException | None) -> ToolCallQuarantined | None:
    """The gate's quarantine behind an exception litellm raised, if there is one."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ToolCallQuarantined):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _passes_live(message: SSEMessage, wire: Wire) -> bool:
    """Whether a message holds nothing the gate withholds: text, role or usage only."""
    if message.data == "[DONE]":
        return False
    try:
        chunk = json.loads(message.data)
    except ValueError:
        return False
    if not isinstance(chunk, dict):
        return False
    if wire is Wire.RESPONSES:
        return _event_passes_live(chunk)
    for choice in chunk.get("choices") or []:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return False
        if choice.get("finish_reason") is not None:
            return False
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return False
        if any(value is not None for key, value in delta.items() if key not in _TEXT_DELTA):
            return False
    return True


def _event_passes_live(event: dict[str, Any]) -> bool:
    kind = event.get("type")
    if not isinstance(kind, str):
        return False
    if kind in ("response.output_item.added", "response.output_item.done"):
        item = event.get("item")
        return isinstance(item, dict) and item.get("type") in _LIVE_ITEMS
    return kind.startswith(_LIVE_EVENTS)


def _encode(message: SSEMessage) -> bytes:
    if message.data == "[DONE]":
        return b"data: [DONE]\n\n"
    value: Any = json.loads(message.data)
    return b"data: " + json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n\n"


class _WithholdingStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, tap: WireTap, gate: Withholding) -> None:
        self._inner = inner
        self._tap = tap
        self._gate = gate
        self._framer = SSEDecoder(max_event_bytes=tap.attempt.limits.max_event_bytes)
        self._held: list[bytes] = []
        self._decided = False

    def _hold(self, piece: bytes) -> list[bytes]:
        """What may go out now; the rest is held. A whole body is always held to its end."""
        if not self._tap.streamed:
            self._held.append(piece)
            return []
        live: list[bytes] = []
        wire = self._tap.attempt.wire
        for message in self._framer.feed(piece):
            if wire is Wire.CHAT and message.event not in ("", "message"):
                continue
            if not self._held and _passes_live(message, wire):
                live.append(_encode(message))
            else:
                self._held.append(_encode(message))
        return live

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self._decided:
            # Read once only: the OpenAI SDK reads a body again to drain it after [DONE].
            return
        error: httpx.TransportError | None = None
        try:
            async for piece in self._inner:
                if not self._tap.feed(piece):
                    break
                for out in self._hold(piece):
                    yield out
            else:
                self._tap.eof()
        except httpx.TransportError as exc:
            error = exc
        if error is not None:
            self._tap.fail(error)
        if await self._decide():
            for out in self._held:
                yield out
        self._held = []
        fault = self._tap.attempt.quarantined
        if fault is not None:
            # Raised outside every except block: litellm chains its own error to this one,
            # never the other way round.
            raise fault

    async def _decide(self) -> bool:
        """Conclude a stream here; a whole body is concluded later, against litellm's result."""
        self._decided = True
        attempt = self._tap.attempt
        if attempt.quarantined is not None:
            self._gate.decided(attempt)
            return False
        if not self._tap.streamed:
            return True
        released = False
        try:
            calls = attempt.conclude()
            if await ajudge(attempt, calls, self._gate.policy):
                attempt.release()
                released = True
        except ToolCallQuarantined:
            pass
        self._gate.decided(attempt)
        return released

    async def aclose(self) -> None:
        if not self._decided:
            # The reader stopped before the gate decided: nothing held goes out.
            self._decided = True
            self._held = []
            if self._tap.attempt.interrupt(R.CANCELLED) is not None:
                self._gate.decided(self._tap.attempt)
        await self._inner.aclose()


class Withholding:
    """What a withholding transport needs from its owner: the policy, and whom to tell."""

    def __init__(
        self, policy: Policy | None, on_decided: Callable[[ChatAttempt], None] | None = None
    ) -> None:
        self.policy = policy
        self._on_decided = on_decided

    def decided(self, attempt: ChatAttempt) -> None:
        emit_records(attempt)
        if self._on_decided is not None:
            self._on_decided(attempt)


class WithholdingTransport(AsyncTapTransport):
    """An async transport whose bodies reach litellm only as far as the gate allows.

    ``inner`` is shared across calls and stays open when this transport is closed.
    """

    def __init__(self, inner: httpx.AsyncBaseTransport, tap: WireTap, gate: Withholding):
        super().__init__(inner, tap)
        self.gate = gate

    def _body(self, stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
        return _WithholdingStream(stream, self.tap, self.gate)
