"""Withholding on the wire itself, for ``litellm.acompletion(stream=True)`` under a callback.

When the gate is only a callback (``litellm.callbacks = [gate]``), litellm hands its own
stream to the caller and no hook can hold a chunk back: the only place the gate stands
between the upstream and the caller is the HTTP client it injects before the request. So the
client's transport does the withholding, on SSE messages rather than litellm chunks.

Every piece of body goes to the attempt first (exactly as :mod:`transport` does), then to the
core's :class:`~..core.withhold.Withholder`, which passes on at once what may pass live,
holds the rest, and re-encodes each message in a form litellm cannot misread (the rule, and
why, is there). Through litellm's bridge (``cometapi/...``) the wire is chat, so the chat
rule applies. Before a message goes out it is given to litellm's own parser for the route
(:mod:`.parsers`). When the body has ended cleanly the attempt concludes, the policy runs
(awaited right here, on the caller's loop), and only then are the held messages let through.
A non-streamed body is held whole and let through once it ended cleanly (the callback then
checks litellm's response against it). On any fault the stream raises the attempt's
:class:`ToolCallQuarantined` instead; litellm turns that into its own exception with the
quarantine as ``__cause__`` (find it with :func:`~litellm_toolgate.find_quarantine`).

litellm assembles the calls only after the gate let them go, and no hook of litellm's sees
its chunks before the caller does (its streaming deployment hook runs on the last chunk only,
and swallows what a hook raises), which is why litellm is handed the unambiguous form. Where
litellm may still hand over calls shaped otherwise than the wire (``WireSpec.reparsed``:
Ollama, Anthropic), the owner passes ``parse``: litellm's own parser of the route, run over
the body held here at the decision, whose calls are cross-checked with the wire by the wire's
carrier rule before anything held goes out (:func:`.parsers.litellm_parse`). Behind
litellm's Messages entry point on a bridged model the owner passes ``carrier_of`` instead:
litellm's own bridge, run over the held body the same way (see :mod:`.bridges`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar

import httpx

from ..core.decision.attempt import Attempt, Carrier
from ..core.decision.state import Wire
from ..core.decision.withhold import Parse, Withholder
from ..core.errors import (
    Interrupted,
    Party,
    StreamFault,
    ToolCallQuarantined,
    cleaned,
    raise_clean,
)
from ..core.rules.policy import Policy
from .guardrailerrors import as_intervention
from .judge import ajudge, judge
from .logs import emit_records
from .offload import decide_off_loop
from .parsers import ChunkCheck, chat_body_parses
from .transport import AsyncTapTransport, RequestRefused, WireTap, _wrap

_Inner = TypeVar("_Inner", bound=httpx.SyncByteStream | httpx.AsyncByteStream)


class _Faces(Generic[_Inner]):
    """What the sync and async faces share: the tap, the core's withholder, the raise.

    Closing a stream is the end of its part in the call: it lets go of the tap (and so of
    the attempt), of the withholder and what it holds, of the owner's :class:`Withholding`
    and of the inner stream (the attempt's quarantine, if any, is kept past the close for
    :class:`HeldResponse`). litellm keeps the httpx response that holds the stream in
    reference cycles of its own after a call (as it does a tap body's, see
    :mod:`.transport`), so a stream that kept them would keep the call's reading state
    until the next collection. A fresh read of a closed stream is refused
    (``httpx.StreamClosed``); a reader that was inside it when it closed goes on with what
    it took at its start (the close cancelled the attempt: nothing held goes out).
    """

    def __init__(
        self, inner: _Inner, tap: WireTap, gate: Withholding, *, defer: bool = False
    ) -> None:
        self._inner: _Inner | None = inner
        self._tap: WireTap | None = tap
        self._gate: Withholding | None = gate
        # The core's rule, asking litellm's parsers for the route before anything goes out.
        self._holder: Withholder | None = Withholder(
            tap.attempt,
            streamed=tap.streamed,
            whole_here=gate.whole_here,
            checks={
                Wire.CHAT: gate.chunk_check,
                Wire.WATSONX: gate.chunk_check,
                Wire.RESPONSES: gate.event_check,
            },
            body_check=lambda body: chat_body_parses(body, bridged=tap.responses_api),
            on_decided=gate.decided,
            carrier_of=gate.carrier_of,
            parse=gate.parse,
            identify=gate.identify,
        )
        # A whole body is read inside litellm's request call, which turns any exception into
        # its own; there the quarantine is raised later, by the response (see sync.claiming).
        self._defer = defer
        self._closed = False
        self._fault_at_close: ToolCallQuarantined | None = None

    def _opening(self) -> tuple[_Inner, WireTap, Withholding, Withholder]:
        """What a read works with, taken as it starts; refused once the stream is closed."""
        inner, tap, gate, holder = self._inner, self._tap, self._gate, self._holder
        if inner is None or tap is None or gate is None or holder is None:
            raise httpx.StreamClosed()
        return inner, tap, gate, holder

    def _let_go(self) -> tuple[_Inner | None, WireTap | None, Withholder | None]:
        """The first close: the inner stream, the tap and the withholder, for the close to
        finish with; the stream keeps nothing of the call from here (see the class)."""
        if self._closed:
            return None, None, None
        self._closed = True
        inner, tap, holder = self._inner, self._tap, self._holder
        self._inner = self._tap = self._gate = self._holder = None
        return inner, tap, holder

    def _cancel(self, tap: WireTap | None, holder: Withholder | None) -> None:
        """Closed: nothing held goes out unless the decision was taken; the quarantine kept."""
        if holder is not None:
            holder.cancel()
        fault = None if tap is None else tap.attempt.quarantined
        if fault is not None:
            self._fault_at_close = cleaned(fault)

    def quarantine(self) -> ToolCallQuarantined | None:
        """The attempt's quarantine, if any, open or closed."""
        tap = self._tap
        return self._fault_at_close if tap is None else tap.attempt.quarantined

    def _raise_if_quarantined(self, tap: WireTap, gate: Withholding, holder: Withholder) -> None:
        fault = tap.attempt.quarantined
        if fault is not None and not self._defer:
            # Raised outside every except block: litellm chains its own error to this one,
            # never the other way round.
            # A whole body (read here only where litellm parses it inside its request code,
            # see sync.claiming) is never a stream litellm may retry.
            first = tap.streamed and not holder.passed_live
            raise_clean(gate.typed(fault, before_first_chunk=first))


class _WithholdingStream(_Faces[httpx.AsyncByteStream], httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        inner, tap, gate, holder = self._opening()
        if holder.decided:
            # Read once only: the OpenAI SDK reads a body again to drain it after [DONE].
            return
        error: httpx.TransportError | None = None
        try:
            async for piece in inner:
                if not tap.feed(piece):
                    break
                for out in holder.feed(piece):
                    yield out
            else:
                tap.eof()
        except httpx.TransportError as exc:
            error = exc
        # The upstream's stream (its connection's buffer may hold unread wire bytes): not in
        # this frame's locals when the fault is raised.
        del inner
        if error is not None:
            tap.fail(error)
        holder.begin_decision()
        attempt = tap.attempt
        calls = await decide_off_loop(attempt, holder.conclude)
        approved = calls is not None and await ajudge(attempt, calls, gate.policy)
        calls = None
        if not tap.streamed:  # only a whole body has anything for check_whole to parse
            await decide_off_loop(attempt, lambda: holder.check_whole(approved))
        for out in holder.release(approved):
            yield out
        piece = out = b""  # wire bytes: not in this frame's locals when the fault is raised
        self._raise_if_quarantined(tap, gate, holder)

    async def aclose(self) -> None:
        inner, tap, holder = self._let_go()
        try:
            self._cancel(tap, holder)
        finally:
            if inner is not None:
                await inner.aclose()


class SyncWithholdingStream(_Faces[httpx.SyncByteStream], httpx.SyncByteStream):
    """The sync face: the same rule, the policy run on the caller's thread."""

    def __iter__(self) -> Iterator[bytes]:
        inner, tap, gate, holder = self._opening()
        error: httpx.TransportError | None = None
        try:
            for piece in inner:
                if not tap.feed(piece):
                    break
                yield from holder.feed(piece)
            else:
                tap.eof()
        except httpx.TransportError as exc:
            error = exc
        del inner  # as in the async face
        if error is not None:
            tap.fail(error)
        holder.begin_decision()
        calls = holder.conclude()
        approved = calls is not None and judge(tap.attempt, calls, gate.policy)
        calls = None
        holder.check_whole(approved)
        yield from holder.release(approved)
        piece = b""  # wire bytes: not in this frame's locals when the fault is raised
        self._raise_if_quarantined(tap, gate, holder)

    def close(self) -> None:
        inner, tap, holder = self._let_go()
        try:
            self._cancel(tap, holder)
        finally:
            if inner is not None:
                inner.close()


class HeldResponse(httpx.Response):
    """A whole body, held and judged while litellm's request call reads it.

    litellm turns anything raised inside its request call into an error of its own (its
    message, not the gate's class), so a quarantined body reads as empty there, and the
    quarantine is raised the first time litellm looks at the content: when it builds its
    result, where a guardrail's exception reaches the caller as it is. It asks the stream
    for the quarantine (kept past the stream's close, which lets go of the attempt).
    """

    def __init__(
        self,
        response: httpx.Response,
        stream: SyncWithholdingStream | _WithholdingStream,
        request: httpx.Request,
        gate: Withholding,
    ) -> None:
        super().__init__(
            status_code=response.status_code,
            headers=response.headers,
            stream=stream,
            extensions=response.extensions,
            request=request,
        )
        self._held = stream
        self._gate = gate

    @property
    def content(self) -> bytes:
        fault = self._held.quarantine()
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
        carrier_of: Callable[[list[Any]], Carrier] | None = None,
        parse: Parse | None = None,
        in_read: Callable[[str], bool] | None = None,
        identify: bool = False,
    ) -> None:
        self.policy = policy
        # Whether calls the wire sent without an id are released under the gate's identity
        # of them (litellm's Responses bridge hands the ids to the caller; the core's
        # ``Withholder``, on a wire that has identities to write: Gemini's).
        self.identify = identify
        # Whether a whole body from a request URL is judged while litellm's request reads
        # it (an async whole call, see WithholdingTransport), not held for a later read.
        self.in_read = in_read
        # What litellm's bridge will make of the body (``/v1/messages`` on a bridged model,
        # where no hook sees litellm's output before the caller): cross-checked with the wire
        # before anything held goes out (see bridges).
        self.carrier_of = carrier_of
        # litellm's own parser of the call's route, run over the held body at the decision
        # on a wire litellm may re-shape (``WireSpec.reparsed``) and cross-checked with the
        # wire before anything held goes out (parsers.litellm_parse).
        self.parse = parse
        # litellm's parsers for the route, asked before a chat message or a Responses event
        # goes out (parsers).
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
        # Told once, then let go: the owner's callback holds litellm's call arguments, which
        # hold the client whose transport holds this, a cycle that would keep the decided
        # call's arguments (text, bytes and value) alive until the garbage collector ran.
        on_decided, self._on_decided = self._on_decided, None
        if on_decided is not None:
            on_decided(attempt)


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
        if self.tap.refused:  # as the streamed path: a request the gate cannot gate stays unsent
            raise RequestRefused(self.tap.attempt.quarantined)
        response = await self.inner.handle_async_request(request)
        if not self.tap.bind(response, request):
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        if self.gate.in_read is not None and self.gate.in_read(str(request.url)):
            # A whole body litellm parses inside a catch-all of its own (Gemini's
            # generateContent), which would make its own error of a quarantine raised at a
            # later read: judged while litellm's request reads it, the quarantine raised
            # right there, where litellm lets it through as it is (as the sync claim does).
            body = _WithholdingStream(response.stream, self.tap, self.gate)
            return _wrap(response, body, request)
        held = _WithholdingStream(response.stream, self.tap, self.gate, defer=True)
        return HeldResponse(response, held, request, self.gate)

    def _body(self, stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
        return _WithholdingStream(stream, self.tap, self.gate)
