"""One attempt: one HTTP response read from the wire, and the fate of every call it opens.

Theory of operation. The edge hands this machine the raw bytes it sees on the wire
(:meth:`ChatAttempt.receive_bytes`, then :meth:`receive_eof`), or a whole body for a
non-streamed call. Bytes go through the SSE decoder, then the chat normalizer, and each event
moves the stream's state (``state.STREAM_TABLE``) and feeds exactly one call's accumulator,
keyed by (choice, tool index). Argument fragments stay opaque text until the stream is
CLOSED, i.e. the upstream sent its own ``finish_reason``, then ``[DONE]``, then the body
ended cleanly. ``[DONE]`` is required: every OpenAI-compatible server sends it, and a body
that stops before it may have lost more than the usage chunk.

Then :meth:`conclude` checks the finish reason against the calls, cross-checks what the
carrier (litellm) assembled, and takes every call through parse and schema;
:meth:`decide` records the policy's answer; :meth:`release` hands back the calls, and only
calls that reached POLICY_APPROVED can be handed back. The first fault anywhere quarantines
the whole attempt: its buffers are dropped, later input is refused, and every later call
raises the same :class:`ToolCallQuarantined`. A retry is a new attempt, never more bytes
appended to this one.

The machine does no I/O and imports no litellm; time comes from an injected clock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .call import CallAccumulator
from .chat import ChatNormalizer, WireFault
from .errors import QuarantineReason, ToolCallQuarantined, quarantine
from .events import (
    ArgumentDelta,
    CallStarted,
    DoneMarker,
    Finish,
    Metadata,
    ResponseStarted,
    StreamError,
    TextDelta,
    Unknown,
    WireEvent,
)
from .limits import Limits
from .policy import PolicyDecision, ReleasedCall, ToolCall
from .records import DecisionRecord, ExecutionState
from .registry import ToolRegistry
from .sse import SSEDecodeError, SSEDecoder
from .state import (
    STREAM_TABLE,
    CallInput,
    CallState,
    StreamInput,
    StreamState,
    TransitionError,
    next_call_state,
    next_stream_state,
)

R = QuarantineReason

_INPUT: dict[type, StreamInput] = {
    ResponseStarted: StreamInput.RESPONSE,
    TextDelta: StreamInput.TEXT,
    CallStarted: StreamInput.CALL,
    ArgumentDelta: StreamInput.ARGUMENTS,
    Finish: StreamInput.FINISH,
    DoneMarker: StreamInput.DONE,
    Metadata: StreamInput.METADATA,
    StreamError: StreamInput.ERROR,
    Unknown: StreamInput.UNKNOWN,
}


@dataclass(frozen=True, slots=True)
class CarrierCall:
    """A call as the carrier (litellm's chunks) assembled it, for the cross-check."""

    call_id: str | None
    name: str | None
    arguments: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class Carrier:
    """What the carrier handed over for choice 0: its calls by tool index, its finish."""

    calls: Mapping[int, CarrierCall]
    finish_reason: str | None
    foreign: bool = False
    """The carrier handed over something the wire check cannot map (another choice, a
    legacy function call): a mismatch whatever the calls say."""


class ChatAttempt:
    """The gate's state for one chat-completions attempt. See the module docstring."""

    def __init__(
        self,
        registry: ToolRegistry,
        limits: Limits | None = None,
        *,
        attempt_id: str | None = None,
        run_id: str | None = None,
        route: str = "",
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = registry
        self.limits = limits or Limits()
        self.attempt_id = attempt_id or f"att-{uuid.uuid4().hex}"
        self.run_id = run_id or self.attempt_id
        self.route = route
        self._categories = dict(tool_categories or {})
        self._hmac_key = hmac_key
        self._clock = clock
        self._decoder = SSEDecoder(max_event_bytes=self.limits.max_event_bytes)
        self._normalizer = ChatNormalizer()
        self._calls: dict[int, CallAccumulator] = {}
        self._state = StreamState.RECEIVING
        self._bound = False
        self._fault: ToolCallQuarantined | None = None
        self._reason: QuarantineReason | None = None
        self._terminal = False
        self._finish_reason: str | None = None
        self.events = 0
        self.unknown_events = 0
        self.text_bytes = 0
        self.argument_bytes = 0

    # ---- introspection -------------------------------------------------------------------
    @property
    def state(self) -> StreamState:
        return self._state

    @property
    def quarantined(self) -> ToolCallQuarantined | None:
        return self._fault

    @property
    def observed(self) -> bool:
        """Whether a response was bound to this attempt (the wire was seen at all)."""
        return self._bound

    @property
    def finish_reason(self) -> str | None:
        return self._finish_reason

    @property
    def response_id(self) -> str | None:
        return self._normalizer.response_id

    @property
    def bytes_seen(self) -> int:
        return self._decoder.bytes_seen

    @property
    def open_calls(self) -> int:
        return len(self._calls)

    # ---- wire input ----------------------------------------------------------------------
    def bind_response(self, *, content_type: str, streamed: bool) -> None:
        """Attach the one successful HTTP response this attempt reads.

        A second response is a retry spliced onto this attempt; a body that is not the
        expected media type is a wire this adapter cannot read.
        """
        self._raise_if_faulted()
        if self._bound:
            raise self._quarantine(R.SPLICED_RESPONSE)
        self._bound = True
        media = content_type.split(";", 1)[0].strip().lower()
        if media != ("text/event-stream" if streamed else "application/json"):
            raise self._quarantine(R.UNSUPPORTED_WIRE)

    def receive_bytes(self, data: bytes) -> list[WireEvent]:
        """Feed raw wire bytes; returns the events they completed."""
        self._raise_if_faulted()
        if self._state in (StreamState.CLOSED, StreamState.RELEASED):
            raise TransitionError(f"stream in state {self._state.value} cannot take bytes")
        reason: QuarantineReason | None = None
        index: int | None = None
        events: list[WireEvent] = []
        try:
            for message in self._decoder.feed(data):
                self.events += 1
                if self.events > self.limits.max_events:
                    raise WireFault(R.TOO_MANY_EVENTS)
                for event in self._normalizer.message(message):
                    self._apply(event)
                    events.append(event)
            reason = self._decoder.error
        except WireFault as fault:
            reason, index = fault.reason, fault.index
        if reason is not None:
            raise self._quarantine(reason, index)
        return events

    def receive_eof(self) -> None:
        """The body ended cleanly (the transport saw its end, not an error)."""
        self._raise_if_faulted()
        reason: QuarantineReason | None = None
        try:
            self._decoder.flush()
        except SSEDecodeError as fault:
            reason = fault.reason
        if reason is not None:
            raise self._quarantine(reason)
        self._end_stream()

    def receive_body(self, body: bytes) -> None:
        """Feed a whole non-streamed response body; it is its own terminal."""
        self._raise_if_faulted()
        if len(body) > self.limits.max_body_bytes:
            raise self._quarantine(R.BODY_TOO_LARGE)
        reason: QuarantineReason | None = None
        index: int | None = None
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            reason = R.INVALID_UTF8
        if reason is None:
            try:
                for event in self._normalizer.body(text):
                    self._apply(event)
            except WireFault as fault:
                reason, index = fault.reason, fault.index
        if reason is not None:
            raise self._quarantine(reason, index)
        self._end_stream()

    def interrupt(self, reason: QuarantineReason) -> ToolCallQuarantined | None:
        """The stream stopped (disconnect, stall, cancellation) before the gate released.

        Returns the attempt's quarantine (the first fault wins if there was one already), or
        None when the calls were already released: a release is never taken back.
        """
        if self._fault is not None:
            return self._fault
        if self._state is StreamState.RELEASED:
            return None
        return self._quarantine(reason)

    # ---- decision ------------------------------------------------------------------------
    def conclude(self, carrier: Carrier | None = None) -> list[ToolCall]:
        """Check the terminal, the carrier and every call's parse and schema.

        Returns the calls awaiting the policy (in index order), or raises the quarantine.
        ``carrier`` is what litellm assembled; it must equal the wire exactly.
        """
        self._raise_if_faulted()
        if not self._bound:
            raise self._quarantine(R.WIRE_NOT_OBSERVED)
        if self._state is not StreamState.CLOSED:
            # The edge reads every body to its end; where it could not, the end is here.
            self.receive_eof()
        has_calls = bool(self._calls)
        if has_calls != (self._finish_reason == "tool_calls"):
            raise self._quarantine(R.FINISH_REASON_MISMATCH)
        if carrier is not None and not self._carrier_matches(carrier):
            raise self._quarantine(R.CARRIER_MISMATCH)
        first: CallAccumulator | None = None
        for call in self._ordered():
            call.move(CallInput.TERMINAL)
            call.last_event = "terminal"
            call.validate(self.registry, self.limits.max_json_depth, self._hmac_key, self._clock)
            if call.error is not None and first is None:
                first = call
        if first is not None and first.error is not None:
            raise self._quarantine(first.error, first.index)
        return [
            ToolCall(self.attempt_id, c.index, c.call_id, c.name, c.value or {})
            for c in self._ordered()
        ]

    def decide(self, index: int, decision: PolicyDecision | None, elapsed: float = 0.0) -> None:
        """Record the policy's answer for one call; None means the policy failed."""
        self._raise_if_faulted()
        call = self._calls.get(index)
        if call is None:
            raise TransitionError(f"no call at tool index {index} to decide")
        call.policy_ms = elapsed * 1000
        call.policy_reason = None if decision is None else _short(decision.reason)
        if decision is None:
            call.policy_status = "error"
            raise self._quarantine(R.POLICY_ERROR, index)
        if not decision.approved:
            call.policy_status = "denied"
            raise self._quarantine(R.POLICY_DENIED, index)
        call.policy_status = "approved"
        call.move(CallInput.APPROVED)

    def release(self) -> list[ReleasedCall]:
        """Hand back every call; each must be POLICY_APPROVED (the table refuses otherwise)."""
        self._raise_if_faulted()
        calls = self._ordered()
        # Every move is checked before any is made: all calls go out, or none.
        states = [next_call_state(c.state, CallInput.RELEASE) for c in calls]
        stream = next_stream_state(self._state, StreamInput.RELEASE)
        released: list[ReleasedCall] = []
        for call, state in zip(calls, states, strict=True):
            call.state = state
            assert call.arguments is not None and call.value is not None
            released.append(
                ReleasedCall(call.index, call.call_id, call.name, call.arguments, call.value)
            )
        assert isinstance(stream, StreamState)
        self._state = stream
        return released

    def records(self) -> list[DecisionRecord]:
        """One sanitized record per call the wire opened, in index order."""
        now = datetime.now(UTC)
        execution: ExecutionState = (
            "released"
            if self._state is StreamState.RELEASED
            else "quarantined"
            if self._reason is not None
            else "withheld"
        )
        error = None if self._reason is None else self._reason.value
        return [
            DecisionRecord(
                observed_at=now,
                run_id=self.run_id,
                attempt_id=self.attempt_id,
                response_id=self.response_id,
                item_id=f"{self.attempt_id}.0.{c.index}",
                call_id=c.call_id,
                model_route=self.route,
                stream_event=c.last_event,
                tool_name=self._categories.get(c.name, c.name) if c.name in self.registry else None,
                buffer_bytes=c.nbytes,
                terminal_seen=self._terminal,
                json_status=c.json_status,
                trailing_data=c.trailing,
                schema_status=c.schema_status,
                schema_keyword=c.keyword,
                schema_path=c.path,
                policy_status=c.policy_status,
                policy_reason=c.policy_reason,
                execution_state=execution,
                error_class=(c.error.value if c.error else error),
                stream_ms=round(c.stream_ms, 3),
                validation_ms=round(c.validation_ms, 3),
                policy_ms=round(c.policy_ms, 3),
                content_hmac=c.digest,
            )
            for c in self._ordered()
        ]

    # ---- internals -----------------------------------------------------------------------
    def _ordered(self) -> list[CallAccumulator]:
        return [self._calls[i] for i in sorted(self._calls)]

    def _raise_if_faulted(self) -> None:
        if self._fault is not None:
            raise self._fault

    def _stream_move(self, event: StreamInput) -> StreamState:
        outcome = next_stream_state(self._state, event)
        if isinstance(outcome, QuarantineReason):
            raise WireFault(outcome)
        return outcome

    def _end_stream(self) -> None:
        reason: QuarantineReason | None = None
        try:
            self._state = self._stream_move(StreamInput.EOF)
        except WireFault as fault:
            reason = fault.reason
        if reason is not None:
            raise self._quarantine(reason)
        self._terminal = True
        ended_at = self._clock()
        for call in self._calls.values():
            call.stream_ms = (ended_at - call.opened_at) * 1000

    def _apply(self, event: WireEvent) -> None:
        # Once per wire event: a table hit that names a state is the whole move; anything
        # else (a quarantine reason, a missing entry) goes through _stream_move to raise.
        moved = STREAM_TABLE.get((self._state, _INPUT[type(event)]))
        self._state = (
            moved if type(moved) is StreamState else self._stream_move(_INPUT[type(event)])
        )
        if isinstance(event, TextDelta):
            text = event.text
            # isascii() is O(1): the common case needs no encoding to be counted.
            size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
            self.text_bytes += size
            if self.text_bytes > self.limits.max_text_bytes:
                raise WireFault(R.TEXT_TOO_LARGE)
        elif isinstance(event, ArgumentDelta):
            call = self._calls[event.index]  # the normalizer opens every call first
            encoded = event.fragment.encode("utf-8", "surrogatepass")
            size = len(encoded)
            call.nbytes += size
            self.argument_bytes += size
            if call.nbytes > self.limits.max_argument_bytes:
                raise WireFault(R.ARGUMENTS_TOO_LARGE, event.index)
            if self.argument_bytes > self.limits.max_total_argument_bytes:
                raise WireFault(R.TOTAL_ARGUMENTS_TOO_LARGE, event.index)
            if call.state is not CallState.ITEM_OPEN:  # (ITEM_OPEN, ARGUMENTS) stays put
                call.move(CallInput.ARGUMENTS)
            call.buffer += encoded
            call.last_event = "argument_delta"
        elif isinstance(event, CallStarted):
            if len(self._calls) >= self.limits.max_calls:
                raise WireFault(R.TOO_MANY_CALLS, event.index)
            self._calls[event.index] = CallAccumulator(
                event.index, event.call_id, event.name, self._clock()
            )
        elif isinstance(event, Finish):
            self._finish_reason = event.finish_reason
            for c in self._calls.values():
                c.last_event = "finish"
        elif isinstance(event, Unknown):
            self.unknown_events += 1

    def _carrier_matches(self, carrier: Carrier) -> bool:
        if (
            carrier.foreign
            or carrier.finish_reason != self._finish_reason
            or set(carrier.calls) != set(self._calls)
        ):
            return False
        for index, theirs in carrier.calls.items():
            ours = self._calls[index]
            if (theirs.call_id, theirs.name) != (ours.call_id, ours.name):
                return False
            if theirs.arguments != ours.join():
                return False
        return True

    def _quarantine(
        self, reason: QuarantineReason, index: int | None = None
    ) -> ToolCallQuarantined:
        """Enter QUARANTINED: drop every buffer, mark every call, build the one exception.

        Every public entry raises the stored fault first, so this runs once per attempt.
        """
        now = self._clock()
        for call in self._calls.values():
            call.discard(now)
        if index is not None and index in self._calls and self._calls[index].error is None:
            self._calls[index].error = reason
        self._state = StreamState.QUARANTINED
        self._reason = reason
        self._fault = quarantine(reason, self.attempt_id, self.records(), call_index=index)
        return self._fault


def _short(reason: str | None) -> str | None:
    return None if reason is None else reason[:200]
