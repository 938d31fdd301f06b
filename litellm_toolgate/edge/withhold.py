"""Withholding on the wire itself, for ``litellm.acompletion(stream=True)`` under a callback.

When the gate is only a callback (``litellm.callbacks = [gate]``), litellm hands its own
stream to the caller and no hook can hold a chunk back: the only place the gate stands
between the upstream and the caller is the HTTP client it injects before the request. So the
client's transport does the withholding, on SSE messages rather than litellm chunks.

Every piece of body goes to the attempt first (exactly as :mod:`transport` does), and through
a second, framing-only :class:`SSEDecoder` that cuts it into messages. A message that the core's
classification of its wire (``core/wires``) says may pass live (chat: text, role or usage
only; Responses: text, reasoning, items that are no tool, lifecycle events with nothing
hidden in them) is passed on at once; from the first message that may not, every message is
held. Through
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
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import httpx

from ..core.attempt import Attempt
from ..core.errors import (
    Interrupted,
    Party,
    QuarantineReason,
    StreamFault,
    ToolCallQuarantined,
    raise_clean,
)
from ..core.policy import Policy, ToolCall
from ..core.sse import SSEDecoder, SSEMessage
from ..core.state import Wire
from ..core.wires import anthropic as anthropic_wire
from ..core.wires import chat as chat_wire
from ..core.wires import responses as responses_wire
from .intervention import as_intervention
from .logs import emit_records
from .offload import decide_off_loop
from .policy import ajudge, judge
from .preflight import ChunkCheck, chat_body_parses
from .transport import AsyncTapTransport, WireTap

R = QuarantineReason


def find_quarantine(error: BaseException | None) -> ToolCallQuarantined | None:
    """The gate's quarantine behind an exception litellm raised, if there is one."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ToolCallQuarantined):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


def _passes_live(
    message: SSEMessage, wire: Wire, classifier: anthropic_wire.EventClassifier
) -> bool:
    """Whether a message may go out before the decision: the core's one answer per wire."""
    if message.data == "[DONE]" or message.event == "error":
        return False
    try:
        value = json.loads(message.data)
    except ValueError:
        return False
    if not isinstance(value, dict):
        return False
    if wire is Wire.ANTHROPIC:
        # Text and lifecycle pass; from the first tool block, terminal or unknown event on,
        # everything is held.
        return classifier.passes_live(value)
    if wire is Wire.RESPONSES:
        return responses_wire.passes_live(value)
    return chat_wire.passes_live(value)


def _encode(message: SSEMessage, *, named: bool) -> bytes:
    """One message as ASCII JSON on one ``data:`` line; ``named`` keeps its ``event:`` name
    (the Anthropic wire, whose events litellm reads by name)."""
    if message.data == "[DONE]":
        return b"data: [DONE]\n\n"
    value: Any = json.loads(message.data) if message.data else None
    data = b"data: " + json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n\n"
    if named and message.event:
        return b"event: " + message.event.encode("ascii", "replace") + b"\n" + data
    return data


class _Held:
    """What the sync and async faces share: the framing, the held messages, the decision."""

    def __init__(self, tap: WireTap, gate: Withholding) -> None:
        self._tap = tap
        self._gate = gate
        self._framer = SSEDecoder(max_event_bytes=tap.attempt.limits.max_event_bytes)
        self._held: list[bytes] = []
        self._decided = False
        self._passed_live = False  # whether any message went out before the decision
        self._classifier = anthropic_wire.EventClassifier()

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
            if not self._carried(message, wire):
                # litellm could not parse it: nothing more goes out, the attempt is refused.
                self._tap.attempt.interrupt(R.CARRIER_MISMATCH)
                self._held = []
                return live
            out = _encode(message, named=wire is Wire.ANTHROPIC)
            if not self._held and _passes_live(message, wire, self._classifier):
                live.append(out)
                self._passed_live = True
            else:
                self._held.append(out)
        return live

    def _carried(self, message: SSEMessage, wire: Wire) -> bool:
        """Whether litellm's own parser for the route takes this message (chat, Responses)."""
        check = self._gate.chunk_check if wire is Wire.CHAT else None
        if wire is Wire.RESPONSES:
            check = self._gate.event_check
        if check is None or message.data == "[DONE]":
            return True
        try:
            value = json.loads(message.data)
        except ValueError:
            return True  # the attempt itself judges malformed messages
        return not isinstance(value, dict) or check(value)

    def _concludes_here(self) -> bool | None:
        """Whether the attempt is concluded here: None after a fault, False for a whole body
        the callback judges later against litellm's result."""
        self._decided = True
        if self._tap.attempt.quarantined is not None:
            return None
        return self._tap.streamed or self._gate.whole_here

    def _calls(self) -> list[ToolCall] | None:
        """The calls awaiting the policy; None when there is nothing to judge."""
        here = self._concludes_here()
        if not here:
            return None if here is None else []
        try:
            return self._tap.attempt.conclude()
        except ToolCallQuarantined:
            return None

    async def _acalls(self) -> list[ToolCall] | None:
        """:meth:`_calls` with the parse and schema off the event loop (one offload rule)."""
        here = self._concludes_here()
        if not here:
            return None if here is None else []
        attempt = self._tap.attempt
        try:
            return await decide_off_loop(attempt, attempt.conclude)
        except ToolCallQuarantined:
            return None

    def _whole_carried(self) -> bool:
        """Whether litellm's converter takes the held whole chat body (see preflight)."""
        if self._tap.streamed or self._tap.attempt.wire is not Wire.CHAT:
            return True
        try:
            value = json.loads(b"".join(self._held))
        except ValueError:
            return True  # the attempt itself judges a body that is no JSON
        return not isinstance(value, dict) or chat_body_parses(
            value, bridged=self._tap.responses_api
        )

    def _check_whole(self, approved: bool) -> None:
        """An approved whole body litellm would fail on (with an error of its own, quoting
        it) is refused, typed, before litellm sees a byte of it (the async face runs this
        by the one offload rule: a large body takes milliseconds)."""
        attempt = self._tap.attempt
        if approved and attempt.quarantined is None and not self._whole_carried():
            self._held = []
            attempt.interrupt(R.CARRIER_MISMATCH)

    def _finish(self, approved: bool) -> list[bytes]:
        """The held messages if the gate released them (and tell the owner either way)."""
        attempt = self._tap.attempt
        if approved and attempt.quarantined is None:
            if self._tap.streamed or self._gate.whole_here:
                attempt.release()
                self._gate.decided(attempt)
            out = self._held
        else:
            self._gate.decided(attempt)
            out = []
        self._held = []
        return out

    def _raise_if_quarantined(self) -> None:
        fault = self._tap.attempt.quarantined
        if fault is not None:
            # Raised outside every except block: litellm chains its own error to this one,
            # never the other way round.
            raise_clean(self._gate.typed(fault, before_first_chunk=not self._passed_live))

    def _cancel(self) -> None:
        if not self._decided:
            # The reader stopped before the gate decided: nothing held goes out.
            self._decided = True
            self._held = []
            if self._tap.attempt.interrupt(R.CANCELLED) is not None:
                self._gate.decided(self._tap.attempt)


class _WithholdingStream(_Held, httpx.AsyncByteStream):
    def __init__(
        self, inner: httpx.AsyncByteStream, tap: WireTap, gate: Withholding, *, defer: bool = False
    ) -> None:
        super().__init__(tap, gate)
        self._inner = inner
        self._defer = defer  # see SyncWithholdingStream

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
        calls = await self._acalls()
        approved = calls is not None and await ajudge(self._tap.attempt, calls, self._gate.policy)
        calls = None
        await decide_off_loop(self._tap.attempt, lambda: self._check_whole(approved))
        for out in self._finish(approved):
            yield out
        if not self._defer:
            piece = out = b""  # wire bytes: not in this frame's locals when the fault is raised
            self._raise_if_quarantined()

    async def aclose(self) -> None:
        self._cancel()
        await self._inner.aclose()


class SyncWithholdingStream(_Held, httpx.SyncByteStream):
    """The sync face: the same rule, the policy run on the caller's thread."""

    def __init__(
        self, inner: httpx.SyncByteStream, tap: WireTap, gate: Withholding, *, defer: bool = False
    ) -> None:
        super().__init__(tap, gate)
        self._inner = inner
        # A whole body is read inside litellm's request call, which turns any exception into
        # its own; there the quarantine is raised later, by the response (see synccall).
        self._defer = defer

    def __iter__(self) -> Iterator[bytes]:
        error: httpx.TransportError | None = None
        try:
            for piece in self._inner:
                if not self._tap.feed(piece):
                    break
                yield from self._hold(piece)
            else:
                self._tap.eof()
        except httpx.TransportError as exc:
            error = exc
        if error is not None:
            self._tap.fail(error)
        calls = self._calls()
        approved = calls is not None and judge(self._tap.attempt, calls, self._gate.policy)
        calls = None
        self._check_whole(approved)
        yield from self._finish(approved)
        if not self._defer:
            piece = b""  # wire bytes: not in this frame's locals when the fault is raised
            self._raise_if_quarantined()

    def close(self) -> None:
        self._cancel()
        self._inner.close()


class HeldResponse(httpx.Response):
    """A whole body, held and judged while litellm's request call reads it.

    litellm turns anything raised inside its request call into an error of its own (its
    message, not the gate's class), so a quarantined body reads as empty there, and the
    quarantine is raised the first time litellm looks at the content: when it builds its
    result, where a guardrail's exception reaches the caller as it is.
    """

    def __init__(
        self,
        response: httpx.Response,
        stream: httpx.SyncByteStream | httpx.AsyncByteStream,
        request: httpx.Request,
        tap: WireTap,
        gate: Withholding,
    ) -> None:
        super().__init__(
            status_code=response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )
        self._tap = tap
        self._gate = gate

    @property
    def content(self) -> bytes:
        fault = self._tap.attempt.quarantined
        if fault is not None:
            raise self._gate.typed(fault)
        return super().content


class Withholding:
    """What a withholding transport needs from its owner: the policy, and whom to tell."""

    def __init__(
        self,
        policy: Policy | None,
        on_decided: Callable[[Attempt], None] | None = None,
        *,
        intervene: bool = True,
        whole_here: bool = False,
        retry_stream_faults: bool = False,
        chunk_check: ChunkCheck | None = None,
        event_check: ChunkCheck | None = None,
    ) -> None:
        self.policy = policy
        # litellm's parsers for the route, asked before a chat message or a Responses event
        # goes out (preflight).
        self.chunk_check = chunk_check
        self.event_check = event_check
        # A whole body is judged here (on the wire alone) when no later hook can raise: the
        # sync callback path. Otherwise it is only held, and the callback judges it against
        # litellm's result.
        self.whole_here = whole_here
        self._on_decided = on_decided
        # Through litellm to the caller: as a guardrail intervention, which litellm passes on
        # unchanged and never retries. The proxy keeps the core's classes (and statuses).
        self._intervene = intervene
        self._retry_stream_faults = retry_stream_faults

    def typed(
        self, fault: ToolCallQuarantined, *, before_first_chunk: bool = False
    ) -> ToolCallQuarantined:
        """The exception to raise for ``fault`` (a fresh one, chained to nothing).

        With ``retry_stream_faults``, a remote fault of the stream itself (a broken protocol
        or an interruption, never arguments, schema, policy or limits) found before anything
        went out is raised as the core's class instead: litellm then treats it as a failed
        stream it may retry, or send to a fallback, as a new request gated afresh.
        """
        if (
            self._retry_stream_faults
            and before_first_chunk
            and isinstance(fault, (StreamFault, Interrupted))
            and fault.party is Party.REMOTE
        ):
            return fault
        return as_intervention(fault) if self._intervene else fault

    def decided(self, attempt: Attempt) -> None:
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

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.tap.streamed:
            return await super().handle_async_request(request)
        self.tap.prepare(request)
        response = await self.inner.handle_async_request(request)
        if not self.tap.bind(response, request):
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        held = _WithholdingStream(response.stream, self.tap, self.gate, defer=True)
        return HeldResponse(response, held, request, self.tap, self.gate)

    def _body(self, stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
        return _WithholdingStream(stream, self.tap, self.gate)
