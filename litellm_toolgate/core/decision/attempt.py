"""One attempt: one HTTP response read from the wire, and the fate of every call it opens.

Theory of operation. The edge binds the one HTTP response it saw (:meth:`Attempt.bind_response`:
its request path picks the wire, ``/chat/completions``, ``/responses`` or ``/v1/messages``
(Anthropic), and its content type must be the one that wire streams), then hands this machine
the raw bytes (:meth:`Attempt.receive_bytes`, then :meth:`receive_eof`), or a whole body for
a non-streamed call. Bytes go through the SSE decoder, then the wire's normalizer
(``wires/chat.py``, ``wires/responses.py`` or ``wires/anthropic.py``); each event moves the
stream's state (``state.STREAM_TABLES``) and feeds the ledger (``ledger.py``), where exactly
one call's accumulator takes it. Argument text stays opaque until the stream is CLOSED. On a chat
wire that means the upstream sent its own ``finish_reason``, then ``[DONE]``, then the body
ended cleanly (``[DONE]`` is required: every OpenAI-compatible server sends it, and a body
that stops before it may have lost more than the usage chunk). On a Responses wire it means
every function-call item passed its ``arguments.done`` and ``output_item.done`` stages, then
``response.completed`` (status ``completed``) listed exactly those calls, then the body
ended cleanly. On an Anthropic wire it means every ``tool_use`` block passed its
``content_block_stop``, then ``message_delta`` said ``stop_reason: tool_use``, then
``message_stop``, then the body ended cleanly.

Then :meth:`conclude` (only once the body's end was fed: the tables refuse a decision in any
earlier state as ``disconnected``) checks a chat finish reason (or an Anthropic stop reason)
against the calls, cross-checks what the carrier (litellm) assembled, and takes every call
through parse and schema; :meth:`decide` records the policy's answer; :meth:`release` hands
back the calls, and only calls that reached POLICY_APPROVED can be handed back. The first
fault anywhere quarantines the whole attempt: its buffers are dropped, later input is
refused, and every later call raises the same :class:`ToolCallQuarantined`. A retry is a new
attempt, never more bytes appended to this one. Every raise goes through
:func:`~.errors.raise_clean` from a frame that no longer holds the bytes, body or carrier it
was handed, so an error tracker that reads the frames of the traceback finds no argument
text there.

An attempt made with ``observers`` (``metrics.py``) queues what it counts for there, once,
at the moment it is released or quarantined, while somebody listens; telling the observers
is the edge's.

The machine does no I/O and imports no litellm; time comes from an injected clock.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from ..errors import Fault, QuarantineReason, ToolCallQuarantined, quarantine, raise_clean
from ..framing.decoder import FramingDecoder
from ..framing.sse import SSEDecoder
from ..records.metrics import Observers
from ..records.record import DecisionRecord, ExecutionState
from ..rules.policy import PolicyDecision, ReleasedCall, ToolCall
from ..values.registry import ToolRegistry
from ..wires import WIRES
from ..wires.base import Normalizer
from ..wires.responses_items import Executor
from .call import CallAccumulator
from .carrier import Carrier, CarrierCall
from .events import ArgumentDelta, TextDelta, WireEvent, slot
from .ledger import Ledger
from .limits import Limits
from .profiles import profile_for, stop_with_calls_accepted
from .state import (
    EVENT_INPUTS,
    STREAM_TABLES,
    CallInput,
    CallState,
    StreamInput,
    StreamState,
    TransitionError,
    Wire,
    input_of,
    next_call_state,
    next_stream_state,
    wire_of,
)

__all__ = ["Attempt", "Carrier", "CarrierCall"]

R = QuarantineReason

# Enum members the decision reads once per attempt or call, read once here (a read from
# the class costs about 70 ns on CPython 3.11).
_CONCLUDE, _RELEASE = StreamInput.CONCLUDE, StreamInput.RELEASE
_TEXT, _ARGUMENTS = StreamInput.TEXT, StreamInput.ARGUMENTS
_APPROVED, _RELEASE_CALL, _CLIENT = CallInput.APPROVED, CallInput.RELEASE, Executor.CLIENT


_ID_LETTERS = str.maketrans("0123456789", "ghijklmnop")
"""An attempt id is 32 letters (a uuid's hex digits moved to g-p): no run of digits, so error
text naming an attempt never reads as an HTTP status to code that greps for one (smolagents
waits minutes before retrying a call whose error mentions ``429``)."""


class Attempt:
    """The gate's state for one attempt (on any wire of ``wires.WIRES``). See the module
    docstring."""

    def __init__(
        self,
        registry: ToolRegistry,
        limits: Limits | None = None,
        *,
        attempt_id: str | None = None,
        run_id: str | None = None,
        route: str = "",
        route_profiles: Mapping[str, str] | None = None,
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        clock: Callable[[], float] = time.monotonic,
        observers: Observers | None = None,
    ) -> None:
        self.registry = registry
        self.limits = limits or Limits()
        self.attempt_id = attempt_id or "att-" + uuid.uuid4().hex.translate(_ID_LETTERS)
        self.run_id = run_id or self.attempt_id
        self.route = route
        self.profile = profile_for(route, route_profiles)
        self._tool_choice: object = None
        self._categories = dict(tool_categories or {})
        self._hmac_key = hmac_key
        self._clock = clock
        self._decoder: FramingDecoder = SSEDecoder(max_event_bytes=self.limits.max_event_bytes)
        self._spec = WIRES[Wire.CHAT]  # until a response of another wire is bound
        self._normalizer: Normalizer = self._spec.normalizer(self.profile)
        self._ledger = Ledger(self.limits, clock)
        self._calls: dict[int, CallAccumulator] = self._ledger.calls
        self._state = StreamState.RECEIVING
        self._bound = False
        self._fault: ToolCallQuarantined | None = None
        self._reason: QuarantineReason | None = None
        self._response_id: str | None = None  # kept when the normalizer is dropped
        self._terminal = False
        self._observers = observers
        """Where the attempt's outcome goes when it is decided (``core/records/metrics.py``)."""
        self._deciding_ms = 0.0
        """Every call's validation plus policy time, summed as they are timed (what the
        metrics read of a decided attempt, not recomputed from its calls)."""
        self.events = 0

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
    def wire(self) -> Wire:
        """The wire this attempt reads (chat until a Responses response is bound)."""
        return self._ledger.wire

    @property
    def finish_reason(self) -> str | None:
        """The chat ``finish_reason``, or ``completed`` once a Responses stream completed."""
        return self._ledger.finish_reason

    @property
    def unknown_events(self) -> int:
        return self._ledger.unknown_events

    @property
    def text_bytes(self) -> int:
        return self._ledger.text_bytes

    @property
    def argument_bytes(self) -> int:
        return self._ledger.argument_bytes

    @property
    def response_id(self) -> str | None:
        return self._response_id or self._normalizer.response_id

    @property
    def bytes_seen(self) -> int:
        return self._decoder.bytes_seen

    @property
    def open_calls(self) -> int:
        return len(self._calls)

    def now(self) -> float:
        """The attempt's clock now (the injected one)."""
        return self._clock()

    def timings(self) -> tuple[float | None, float]:
        """When the wire opened the first call (on the clock; None: no call), and the seconds
        the gate spent deciding: parse, schema and policy of every call. Both are kept as
        the attempt goes (the calls' opening by the ledger, each call's validation and
        policy time as it is timed), so reading them scans nothing."""
        return self._ledger.first_opened, self._deciding_ms / 1000

    @property
    def decided(self) -> bool:
        """Released or quarantined: the attempt's fate is settled."""
        return self._fault is not None or self._state is StreamState.RELEASED

    # ---- wire input ----------------------------------------------------------------------
    def bind_request(
        self, path: str, fields: Mapping[str, object], *, choices_gated: bool = True
    ) -> None:
        """What the request asked for, before it is sent (the edge reads its body).

        ``fields`` are the request body's top-level fields the gate needs: ``n`` (a chat
        request for several choices is read choice by choice; an ``n`` the gate cannot
        count is refused here, unsent) and ``tool_choice`` (a route profile may accept
        ``finish_reason: "stop"`` with calls when a tool was forced).
        ``choices_gated``: False where the edge knows that the client does not keep several
        choices apart (a route on another wire): a request for ``n > 1`` is then
        refused here, unsent (``unsupported_request``).
        """
        self._raise_if_faulted()
        self._tool_choice = fields.get("tool_choice")
        wire = wire_of(path)
        if wire is None:
            return
        spec = WIRES[wire]
        reason = spec.request_fault(fields)
        choices = spec.choices(fields)
        if reason is None and not choices_gated and choices != 1:
            reason = R.UNSUPPORTED_REQUEST
        if reason is not None:
            raise self._quarantine(reason)
        if spec is self._spec and not self._bound and choices != self._ledger.choices:
            self._ledger.choices = choices
            self._normalizer = spec.choices_normalizer(self.profile, choices)

    @property
    def choices(self) -> int:
        """How many chat choices the request asked for (``n``; one unless it said more)."""
        return self._ledger.choices

    @property
    def first_finish(self) -> str | None:
        """With several choices: the first ``finish_reason`` the wire sent, whichever
        choice's (None with one choice, or before any)."""
        return self._ledger.first_finish

    def bind_response(
        self, *, content_type: str, streamed: bool, path: str = "/chat/completions"
    ) -> None:
        """Attach the one successful HTTP response this attempt reads.

        ``path`` is the request's URL path: it picks the wire (chat completions or
        Responses). A second response is a retry spliced onto this attempt; another path is a
        wire this gate does not read (local), a body that is not the media type the wire
        uses one the upstream should not have sent.
        """
        self._raise_if_faulted()
        if self._bound:
            raise_clean(self._quarantine(R.SPLICED_RESPONSE))
        self._bound = True
        wire = wire_of(path)
        media = content_type.split(";", 1)[0].strip().lower()
        if wire is None:
            # A path this gate does not read: its own limitation, not the upstream's fault.
            raise_clean(self._quarantine(R.ROUTE_NOT_GATED))
        spec = WIRES[wire]
        if media != spec.media[streamed]:
            raise_clean(self._quarantine(R.UNSUPPORTED_WIRE))
        if spec is not self._spec:
            self._spec = spec
            self._normalizer = spec.normalizer(self.profile)
            self._ledger.choices = 1  # several choices are read on a chat wire only
            self._decoder = spec.decoder(self.limits.max_event_bytes)
            self._ledger.wire = wire

    def receive_bytes(self, data: bytes) -> list[WireEvent]:
        """Feed raw wire bytes; returns the events they completed."""
        events: list[WireEvent] = []
        fault = self._receive(data, events)
        if fault is not None:
            del data, events  # wire bytes and argument text: not in a frame of the raise
            raise_clean(fault)
        return events

    def take_bytes(self, data: bytes) -> ToolCallQuarantined | None:
        """:meth:`receive_bytes`, building no events and raising nothing: what the edge feeds
        a stream through (it reads the attempt, never the events). Returns the quarantine, if
        any. Not raised, so that the stored quarantine's traceback never takes in the
        caller's frame, which holds the piece of wire (argument text)."""
        return self._receive(data, None)

    def _receive(self, data: bytes, events: list[WireEvent] | None) -> ToolCallQuarantined | None:
        """Feed ``data``; the quarantine to raise (the caller raises it, holding no bytes)."""
        if self._fault is not None:
            return self._fault
        if self._state in (StreamState.CLOSED, StreamState.RELEASED):
            raise TransitionError(f"stream in state {self._state.value} cannot take bytes")
        reason, index = self._feed(data, events)
        if reason is not None:
            return self._quarantine(reason, index)
        return None

    def _feed(
        self, data: bytes, events: list[WireEvent] | None
    ) -> tuple[QuarantineReason | None, int | None]:
        """Decode, normalize and apply ``data``; the fault found, if any (never raised)."""
        try:
            messages = self._decoder.feed_fields(data)
            if messages:
                self._take(messages, events)
        except Fault as fault:
            return fault.reason, fault.index
        return self._decoder.error, None

    def _take(
        self, messages: list[tuple[str, str, str | None]], events: list[WireEvent] | None
    ) -> None:
        """Normalize and apply decoded messages: the loop every wire event goes through.

        What :meth:`_apply` does, with what it looks up once per event read once per call.
        A line the wire's fast path knows (:meth:`.wires.base.WireSpec.readers`; on a chat
        wire nearly every line of a long stream, :meth:`.chat.ChatNormalizer.known`) is
        applied without building its event (built only when ``events`` collects them): the
        same state move, the same ledger step as the event would make.
        """
        normalize, known = self._spec.readers(self._normalizer)
        # The event limit, counted once per batch: the messages within it are applied in
        # order (a fault among them comes first), and the one past it is the fault.
        room = self.limits.max_events - self.events
        over = len(messages) > room
        if over:
            messages = messages[: max(room, 0)]
        self.events += len(messages)
        inputs = EVENT_INPUTS
        table = STREAM_TABLES[self._ledger.wire]
        ledger = self._ledger
        apply = ledger.apply
        for event_type, data, last_id in messages:
            if known is not None and not event_type:
                hit = known(data)
                if hit is not None:
                    index, value = hit
                    step = _TEXT if index is None else _ARGUMENTS
                    moved = table.get((self._state, step))
                    self._state = moved if type(moved) is StreamState else self._stream_move(step)
                    if index is None:
                        ledger.text(value)
                        if events is not None:
                            events.append(TextDelta(0, value))
                    else:
                        ledger.fragment(index, value)
                        if events is not None:
                            events.append(ArgumentDelta(0, index, value))
                    continue
            for event in normalize(event_type, data, last_id):
                step = inputs[type(event)]
                moved = table.get((self._state, step))
                self._state = moved if type(moved) is StreamState else self._stream_move(step)
                apply(event)
                if events is not None:
                    events.append(event)
        if over:
            self.events += 1
            raise Fault(R.TOO_MANY_EVENTS)

    def receive_eof(self) -> None:
        """The body ended cleanly (the transport saw its end, not an error)."""
        self._raise_if_faulted()
        reason: QuarantineReason | None = None
        try:
            self._decoder.flush()
        except Fault as fault:
            reason = fault.reason
        if reason is not None:
            raise_clean(self._quarantine(reason))
        self._end_stream()

    def receive_body(self, body: bytes) -> None:
        """Feed a whole non-streamed response body; it is its own terminal."""
        if self._fault is None and len(body) > self.limits.max_body_bytes:
            self._quarantine(R.BODY_TOO_LARGE)
        if self._fault is not None:
            del body
            raise_clean(self._fault)
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
            except Fault as fault:
                reason, index = fault.reason, fault.index
        del body
        text = ""  # neither the body nor its text stays in this frame
        if reason is not None:
            raise_clean(self._quarantine(reason, index))
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
        mismatch = self._checked_terminal(carrier)
        del carrier  # litellm's assembled arguments: not in this frame if it raises
        if mismatch is not None:
            self._quarantine(mismatch)
        if self._fault is not None:
            raise_clean(self._fault)
        calls = self._ledger.terminal()
        registry, depth, key, clock = (
            self.registry,
            self.limits.max_json_depth,
            self._hmac_key,
            self._clock,
        )
        first: CallAccumulator | None = None
        deciding = self._deciding_ms
        for call in calls:
            timed = call.validation_ms
            call.validate(registry, depth, key, clock)
            deciding += call.validation_ms - timed
            if call.error is not None and first is None:
                first = call
        self._deciding_ms = deciding
        if first is not None and first.error is not None:
            # Quarantine drops every call's buffers, these locals' included.
            at = first.index if first.key is None else first.key
            raise_clean(self._quarantine(first.error, at))
        attempt_id = self.attempt_id
        concluded: list[ToolCall] = []
        for c in calls:
            executor = c.executor.value
            concluded.append(
                ToolCall(
                    attempt_id,
                    c.index,
                    c.call_id,
                    c.name,
                    c.value or {},
                    c.kind,
                    executor,
                    c.choice,
                )
            )
        return concluded

    def _checked_terminal(self, carrier: Carrier | None) -> QuarantineReason | None:
        """The first fault of the terminal and the carrier; faults of the body are kept."""
        if self._fault is not None:
            return None
        if not self._bound:
            return R.WIRE_NOT_OBSERVED
        wire = self._ledger.wire
        # The end of the body is an input the edge feeds (receive_eof); a decision asked
        # for before it was seen is a move of the table like any other, never an end made up.
        outcome = STREAM_TABLES[wire].get((self._state, _CONCLUDE))
        if type(outcome) is not StreamState:
            outcome = next_stream_state(self._state, _CONCLUDE, wire)
            if isinstance(outcome, QuarantineReason):
                return outcome
        ledger = self._ledger
        if ledger.choices == 1:
            finish = self._spec.terminal_fault(
                self.finish_reason, bool(self._calls), self._stop_accepted
            )
            if finish is not None:
                return finish
        else:
            # Each choice's own terminal against its own calls: one bad choice is enough.
            for choice in range(ledger.choices):
                finish = self._spec.terminal_fault(
                    ledger.finishes.get(choice), ledger.choice_calls(choice), self._stop_accepted
                )
                if finish is not None:
                    return finish
        if (
            carrier is not None
            and carrier.kind == "chat"
            and carrier.finish_reason == "tool_calls"
            and self._stop_with_calls()
        ):
            # litellm 1.110 rewrites this route's ``stop`` to ``tool_calls``; 1.108 keeps it.
            carrier = Carrier(carrier.calls, "stop", carrier.foreign, carrier.kind)
        return None if carrier is None else self._ledger.carrier_fault(carrier)

    def decide(
        self,
        index: int,
        decision: PolicyDecision | None,
        elapsed: float = 0.0,
        *,
        choice: int = 0,
    ) -> None:
        """Record the policy's answer for one call (tool ``index`` of ``choice``); None
        means the policy failed."""
        self._raise_if_faulted()
        if self._state is StreamState.RELEASED:
            raise TransitionError("a released attempt takes no decision: a release is final")
        index = slot(choice, index, self._ledger.choices)
        call = self._calls.get(index)
        if call is None or call.choice != choice:
            raise TransitionError(f"no call at tool index {index} to decide")
        policy_ms = elapsed * 1000
        self._deciding_ms += policy_ms - call.policy_ms
        call.policy_ms = policy_ms
        reason = None if decision is None else decision.reason
        call.policy_reason = None if reason is None else reason[:200]
        if decision is None:
            call.policy_status = "error"
            raise_clean(self._quarantine(R.POLICY_ERROR, index))
        if not decision.approved:
            call.policy_status = "denied"
            raise_clean(self._quarantine(R.POLICY_DENIED, index))
        call.policy_status = "approved"
        call.move(_APPROVED)

    def release(self) -> list[ReleasedCall]:
        """Hand back every call; each must be POLICY_APPROVED (the table refuses otherwise)."""
        self._raise_if_faulted()
        calls = self._ordered()
        # Every move is checked before any is made: all calls go out, or none.
        wire = self._ledger.wire
        states = [next_call_state(c.state, _RELEASE_CALL, wire) for c in calls]
        stream = next_stream_state(self._state, _RELEASE, wire)
        released: list[ReleasedCall] = []
        for call, state in zip(calls, states, strict=True):
            assert isinstance(state, CallState)
            call.state = state
            assert call.data is not None and call.value is not None
            if call.executor is _CLIENT:
                # The text if one was made (or lent by the carrier), else the withheld bytes:
                # the released call decodes them only if its text is read.
                text = call.data if call.arguments is None else call.arguments
                released.append(
                    ReleasedCall(
                        call.index, call.call_id, call.name, text, call.value, choice=call.choice
                    )
                )
            # (A server's report goes out with the response, never as a call.) The attempt
            # keeps no text or value of its own past the release: the released call holds
            # what the caller needs, and an attempt that outlives its stream (in a cycle of
            # litellm's, until the collector's pass) keeps only its counts and statuses.
            call.hand_over()
        assert isinstance(stream, StreamState)
        self._state = stream
        observers = self._observers
        if observers is not None and observers.listening:
            # What _count queues, inline on the common decision: a method called once an
            # attempt runs cold, as does all of this, so it is loads, one clock reading and
            # one extend (the delay is subtracted where a batch is read, core/records/metrics.py).
            ledger = self._ledger
            observers.decided.extend(
                (
                    self.route,
                    ledger.wire,
                    None,
                    len(self._calls),
                    ledger.argument_bytes,
                    self._deciding_ms / 1000,
                    ledger.first_opened,
                    self._clock(),
                )
            )
        return released

    def records(self) -> list[DecisionRecord]:
        """One sanitized record per call the wire opened, in index order."""
        execution: ExecutionState = (
            "released"
            if self._state is StreamState.RELEASED
            else "quarantined"
            if self._reason is not None
            else "withheld"
        )
        error = None if self._reason is None else self._reason.value
        common = {
            "observed_at": datetime.now(UTC),
            "run_id": self.run_id,
            "attempt_id": self.attempt_id,
            "response_id": self.response_id,
            "model_route": self.route,
            "terminal_seen": self._terminal,
            "execution_state": execution,
        }
        return [
            c.record(
                common,
                item_id=f"{self.attempt_id}.{c.choice}.{c.index}",
                tool_name=self._categories.get(c.name, c.name) if self._known(c) else None,
                error=error,
            )
            for c in self._ordered()
        ]

    def summary(self) -> dict[str, Any]:
        """The attempt's outcome and its records as JSON-ready data, for a host's own logging
        (the LiteLLM proxy's guardrail information): as sanitized as the records themselves."""
        fault = self.quarantined
        return {
            "attempt_id": self.attempt_id,
            "outcome": "released" if fault is None else "quarantined",
            "reason": None if fault is None else fault.reason.value,
            "records": [r.model_dump(mode="json") for r in self.records()],
        }

    # ---- internals -----------------------------------------------------------------------
    def _stop_accepted(self) -> bool:
        """The route's profile takes ``stop`` with calls as the terminal for this request."""
        return stop_with_calls_accepted(self.profile, self._tool_choice)

    def _stop_with_calls(self) -> bool:
        """``stop`` with calls (choice 0's), taken as this request's terminal."""
        calls = bool(self._calls) if self._ledger.choices == 1 else self._ledger.choice_calls(0)
        return self.finish_reason == "stop" and calls and self._stop_accepted()

    def _known(self, call: CallAccumulator) -> bool:
        """Whether a call's name is not the model's own text (a declared tool, a fixed name)."""
        if call.kind == "function_call":
            return call.name in self.registry
        if call.kind == "custom_tool_call":
            return f"custom:{call.name}" in self.registry.declared
        return True  # shell, apply_patch, web_search...: names from the taxonomy

    def _ordered(self) -> list[CallAccumulator]:
        return self._ledger.ordered()

    def _raise_if_faulted(self) -> None:
        if self._fault is not None:
            raise_clean(self._fault)

    def _stream_move(self, event: StreamInput) -> StreamState:
        outcome = next_stream_state(self._state, event, self.wire)
        if isinstance(outcome, QuarantineReason):
            raise Fault(outcome)
        return outcome

    def _end_stream(self) -> None:
        reason: QuarantineReason | None = None
        try:
            self._state = self._stream_move(StreamInput.EOF)
        except Fault as fault:
            reason = fault.reason
        if reason is not None:
            raise_clean(self._quarantine(reason))
        self._terminal = True
        ended_at = self._clock()
        for call in self._calls.values():
            call.stream_ms = (ended_at - call.opened_at) * 1000

    def _apply(self, event: WireEvent) -> None:
        # Once per wire event: a table hit that names a state is the whole move; anything
        # else (a quarantine reason, a missing entry) goes through _stream_move to raise.
        step = input_of(event)
        moved = STREAM_TABLES[self._ledger.wire].get((self._state, step))
        self._state = moved if type(moved) is StreamState else self._stream_move(step)
        self._ledger.apply(event)

    def _quarantine(
        self, reason: QuarantineReason, index: int | None = None
    ) -> ToolCallQuarantined:
        """Enter QUARANTINED: drop every buffer, mark every call, build the one exception.

        Every public entry raises the stored fault first, so this runs once per attempt.
        """
        now = self._clock()
        for call in self._calls.values():
            call.discard(now)
        self._decoder.discard()  # the line and message under assembly
        # A name the registry does not know is the model's text, never logged: let it go,
        # with the normalizer's copy (the response id stays for the records).
        for call in self._calls.values():
            if call.name is not None and call.name not in self.registry:
                call.name = ""
        self._response_id = self._normalizer.response_id
        self._normalizer = type(self._normalizer)()
        if index is not None and index in self._calls and self._calls[index].error is None:
            self._calls[index].error = reason
        self._state = StreamState.QUARANTINED
        self._reason = reason
        if index is not None and index in self._calls:
            index = self._calls[index].index  # the tool index (its key differs for n > 1)
        self._fault = quarantine(reason, self.attempt_id, self.records(), call_index=index)
        observers = self._observers
        if observers is not None and observers.listening:
            self._count(observers, reason, now)
        return self._fault

    def _count(self, observers: Observers, reason: QuarantineReason, now: float) -> None:
        """Queue what a quarantined attempt counts for (``core/records/metrics.py``), while its
        values are still in the cache; ``now`` is the quarantine's clock reading. A release
        queues the same, inline (:meth:`release`). Each runs once an attempt, and never
        both: every entry refuses a released attempt or raises its stored fault first."""
        ledger = self._ledger
        observers.decided.extend(
            (
                self.route,
                ledger.wire,
                reason,
                len(self._calls),
                ledger.argument_bytes,
                self._deciding_ms / 1000,
                ledger.first_opened,
                now,
            )
        )
