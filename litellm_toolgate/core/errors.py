"""Every error the gate raises, and the reasons a stream is quarantined.

The tree::

    ToolGateError                       base of everything raised to the caller
    ├── GateConfigError (ValueError)    the caller's set-up is wrong (tools, limits, options)
    ├── WireNotObservable               the gate cannot see the raw wire of this call (local)
    │   └── RouteNotGated               a litellm route (provider, API) the gate does not
    │                                   gate: refused before anything is sent
    ├── JournalError                    the run journal refused a move (core/rules/journal.py)
    │   ├── IllegalTransition           a move its transition table does not hold
    │   │   └── AlreadyClaimed          a claim on a call not at DECIDED, or leased
    │   ├── StaleClaim                  a finish with a fencing token no longer current
    │   ├── AmbiguousCalls              unfinished rows on resume (ids, tools, steps)
    │   ├── CallIdReused                a call id journaled in the run for another call
    │   ├── UnknownCall                 no row holds that idempotency key
    │   ├── JournalVersionError         the store's schema is newer than this code
    │   ├── RunBusy                     another driver holds the run's lease (gate.run)
    │   ├── RunLeaseLost                this driver's run lease was taken over
    │   └── ConversationBehind          the journal holds calls the conversation lacks
    └── ToolCallQuarantined             an attempt was quarantined; nothing was released
        ├── StreamFault                 the upstream broke the protocol (remote), including
        │                               a Responses item that skipped or contradicts a stage
        ├── Interrupted                 the stream stopped: disconnect, stall, cancellation
        ├── ArgumentsRejected           the arguments are not exactly one strict JSON object
        ├── SchemaRejected              unknown tool, or the value fails the tool's schema
        ├── PolicyDenied                the policy said no (or failed)
        ├── LimitExceeded               a configured limit was reached (local)
        │   └── LoopLimitExceeded       the tool loop's rounds or calls ran out (local)
        ├── DuplicateCallId             a call id seen before in the same run (remote)
        └── CarrierMismatch             litellm's chunks disagree with the wire

    (The journal's errors live with its rules in core/journal.py, which imports this
    module; RunBusy, RunLeaseLost and ConversationBehind are exported by the package.)

    Fault (an Exception, not a ToolGateError)
                                        internal: a reason found by the decoder, normalizer
                                        or parser; the attempt turns it into its quarantine,
                                        and it never reaches the caller

Each quarantine carries a :class:`QuarantineReason` that code can branch on, the opaque
attempt id and the sanitized per-call decision records. None of them ever holds argument
text: messages are built from ids, counts and reason codes only, and the core raises them
outside ``except`` blocks so that no decoder error (whose ``doc`` is the raw text) ends up
in ``__cause__`` or ``__context__``.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from .records.record import DecisionRecord


class Party(enum.Enum):
    """Who misbehaved: the upstream (remote) or this side (local: caller, policy, limits)."""

    REMOTE = "remote"
    LOCAL = "local"


class QuarantineReason(enum.Enum):
    """Why an attempt was quarantined. The value is the stable string used in records."""

    # The wire itself.
    INVALID_UTF8 = "invalid_utf8"
    MALFORMED_EVENT = "malformed_event"
    ERROR_EVENT = "error_event"
    MISSING_FINISH = "missing_finish"
    MISSING_DONE = "missing_done"
    EVENT_AFTER_TERMINAL = "event_after_terminal"
    FINISH_REASON_MISMATCH = "finish_reason_mismatch"
    UNEXPECTED_CHOICE = "unexpected_choice"
    REFUSAL = "refusal"
    LEGACY_FUNCTION_CALL = "legacy_function_call"
    INVALID_CALL_INDEX = "invalid_call_index"
    MISSING_CALL_IDENTITY = "missing_call_identity"
    IDENTITY_CONFLICT = "identity_conflict"
    UNSUPPORTED_TOOL_TYPE = "unsupported_tool_type"
    SPLICED_RESPONSE = "spliced_response"
    UNSUPPORTED_WIRE = "unsupported_wire"  # the body is not the wire's media type
    # The gate's own limitation: a request path it does not read, a response it never saw.
    ROUTE_NOT_GATED = "route_not_gated"
    WIRE_NOT_OBSERVED = "wire_not_observed"
    UNSUPPORTED_REQUEST = "unsupported_request"
    """The request asks for what the gate cannot gate (chat ``n > 1``): refused unsent."""
    # Responses stages: an item skipped one, a stage disagrees, the response did not complete.
    INCOMPLETE_ITEM = "incomplete_item"
    ITEM_MISMATCH = "item_mismatch"
    RESPONSE_INCOMPLETE = "response_incomplete"
    # The stream stopped.
    DISCONNECTED = "disconnected"
    STALLED = "stalled"
    CANCELLED = "cancelled"
    # One call's arguments.
    INVALID_JSON = "invalid_json"
    TRAILING_DATA = "trailing_data"
    NOT_AN_OBJECT = "not_an_object"
    DUPLICATE_KEY = "duplicate_key"
    NUMBER_OUT_OF_RANGE = "number_out_of_range"
    INVALID_STRING = "invalid_string"
    DEPTH_EXCEEDED = "depth_exceeded"
    # Registry and schema.
    UNKNOWN_TOOL = "unknown_tool"
    SCHEMA_INVALID = "schema_invalid"
    # Policy.
    POLICY_DENIED = "policy_denied"
    POLICY_ERROR = "policy_error"
    # Limits.
    TOO_MANY_CALLS = "too_many_calls"
    ARGUMENTS_TOO_LARGE = "arguments_too_large"
    TOTAL_ARGUMENTS_TOO_LARGE = "total_arguments_too_large"
    TOO_MANY_EVENTS = "too_many_events"
    EVENT_TOO_LARGE = "event_too_large"
    TEXT_TOO_LARGE = "text_too_large"
    BODY_TOO_LARGE = "body_too_large"
    # The carrier (litellm's chunks) against the wire.
    CARRIER_MISMATCH = "carrier_mismatch"
    # The tool loop (gate.run): its bounds, and call ids unique across the whole run.
    TOO_MANY_ROUNDS = "too_many_rounds"
    TOO_MANY_CALLS_IN_ROUND = "too_many_calls_in_round"
    TOO_MANY_CALLS_IN_RUN = "too_many_calls_in_run"
    CALL_ID_REUSED = "call_id_reused"

    @property
    def family(self) -> type[ToolCallQuarantined]:
        """The exception class raised for this reason."""
        return _FAMILY[self]

    @property
    def party(self) -> Party:
        """Who is at fault for this reason."""
        return Party.LOCAL if self in _LOCAL else Party.REMOTE


class ToolGateError(Exception):
    """Base of every error this library raises."""


class Fault(Exception):
    """A fault found inside the core, before it becomes the attempt's quarantine.

    Internal, so deliberately not a :class:`ToolGateError`: code that catches the library's
    public errors never sees one, and a ``Fault`` that escaped would be a bug, not a verdict.

    Carries a reason and, where one call is to blame, its tool index; its message, ``args``
    and ``repr`` are the reason alone, so it can never carry wire or argument text.
    """

    def __init__(self, reason: QuarantineReason, index: int | None = None) -> None:
        self.reason = reason
        self.index = index
        super().__init__(reason.value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.reason.value!r})"

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.reason, self.index))


class GateConfigError(ToolGateError, ValueError):
    """The gate was configured wrongly: a bad tool schema, limit or option."""


class WireNotObservable(ToolGateError):
    """The gate cannot observe the raw wire of this call, so it refuses to gate it blind.

    A limitation of this side (``party`` is local), never the upstream's fault; an HTTP layer
    answers it with ``status_code`` 501.
    """

    status_code = 501

    @property
    def party(self) -> Party:
        return Party.LOCAL


class RouteNotGated(WireNotObservable):
    """A litellm route the gate does not gate, refused before any request was sent.

    ``route`` is litellm's provider prefix (``"bedrock"``, or the model string when litellm
    could not tell its provider), ``api`` is ``"chat"`` or ``"responses"`` and ``reason``
    says why, in words (see ``toolgate routes``).
    """

    def __init__(self, route: str, api: str, reason: str) -> None:
        self.route = route
        self.api = api
        self.reason = reason
        super().__init__(
            f"route {route!r} ({api}) is not gated: {reason}; the request was not sent "
            "(see `toolgate routes` for the routes the gate reads)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.route, self.api, self.reason))


class ToolCallQuarantined(ToolGateError):
    """An attempt was quarantined: no tool call of it was released.

    ``reason`` is the first fault seen; ``records`` holds one sanitized decision record per
    tool call the wire opened (possibly none). ``status_code`` lets an HTTP layer (the
    proxy) turn it into a response status.
    """

    status_code = 422

    def __init__(
        self,
        reason: QuarantineReason,
        attempt_id: str,
        records: Sequence[DecisionRecord] = (),
        *,
        call_index: int | None = None,
    ) -> None:
        self.reason = reason
        self.attempt_id = attempt_id
        self.records = tuple(records)
        self.call_index = call_index
        where = "" if call_index is None else f", tool index {call_index}"
        super().__init__(
            f"attempt {attempt_id} quarantined: {reason.value} ({reason.party.value}{where}); "
            f"{len(self.records)} tool call(s) withheld, none released"
        )

    @property
    def party(self) -> Party:
        return self.reason.party

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(reason={self.reason.value!r}, "
            f"attempt_id={self.attempt_id!r}, records={len(self.records)})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild,
            (self.reason, self.attempt_id, self.records, self.call_index),
        )


def _rebuild(
    reason: QuarantineReason,
    attempt_id: str,
    records: Sequence[DecisionRecord],
    call_index: int | None,
) -> ToolCallQuarantined:
    return quarantine(reason, attempt_id, records, call_index=call_index)


class StreamFault(ToolCallQuarantined):
    """The upstream broke the streaming protocol."""

    status_code = 502


class Interrupted(ToolCallQuarantined):
    """The stream stopped before its terminal: a disconnect, a stall or a cancellation."""

    status_code = 504


class ArgumentsRejected(ToolCallQuarantined):
    """A call's arguments are not exactly one strict JSON object."""


class SchemaRejected(ToolCallQuarantined):
    """A call names an unregistered tool, or its arguments fail the tool's schema."""


class PolicyDenied(ToolCallQuarantined):
    """The policy denied a call, or failed while deciding."""

    status_code = 403


class LimitExceeded(ToolCallQuarantined):
    """A configured limit was reached while streaming."""

    status_code = 413


class LoopLimitExceeded(LimitExceeded):
    """The tool loop reached its bound on rounds, calls in a round or calls in the run: the
    round that went past it runs nothing."""


class DuplicateCallId(ToolCallQuarantined):
    """A released call's id was already used earlier in the same run (``gate.run``): the
    round runs nothing, so no result can be matched to the wrong call."""

    status_code = 502


class CarrierMismatch(ToolCallQuarantined):
    """litellm's assembled tool calls differ from what the wire carried."""

    status_code = 502


class WireUnread(ToolCallQuarantined):
    """The gate did not read this attempt's wire: a request path it does not read, a request
    it cannot gate (refused before it was sent), or no response seen at all. A limitation of
    this side, not the upstream's fault."""

    status_code = 501


def quarantine(
    reason: QuarantineReason,
    attempt_id: str,
    records: Sequence[DecisionRecord] = (),
    *,
    call_index: int | None = None,
) -> ToolCallQuarantined:
    """Build the exception of the right family for ``reason``."""
    return reason.family(reason, attempt_id, records, call_index=call_index)


def raise_clean(fault: ToolCallQuarantined) -> NoReturn:
    """Raise ``fault`` (an attempt's quarantine) with no history: the one way the gate raises it.

    An attempt keeps its one quarantine and raises it again on every later call. Raising an
    exception object adds to its ``__traceback__``, whose frames keep their local variables
    (wire bytes, argument text) alive for any error tracker that reads them, and a raise
    made while another exception is handled (say, litellm's own, which quotes a raw chunk)
    sets ``__context__`` to that exception. So every raise starts from a clean object:
    no traceback, no cause, no context. Call it outside every ``except`` block, from a frame
    that holds no wire bytes or argument text (this function's own frame holds ``fault``
    only); the traceback then holds the frames it passes through from here, and nothing else.
    """
    raise cleaned(fault)


def cleaned(fault: ToolCallQuarantined) -> ToolCallQuarantined:
    """``fault`` with no history (no traceback, cause or context), for :func:`raise_clean` or
    for one who keeps it past its attempt: the frames of a raise the core caught keep their
    locals, the attempt among them."""
    fault.__traceback__ = None
    fault.__cause__ = None
    fault.__context__ = None
    fault.__suppress_context__ = False
    return fault


def find_quarantine(error: BaseException | None) -> ToolCallQuarantined | None:
    """The gate's quarantine behind an exception another layer raised (litellm wraps it as
    the ``__cause__`` or ``__context__`` of its own), if there is one."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ToolCallQuarantined):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


R = QuarantineReason
_FAMILY: dict[QuarantineReason, type[ToolCallQuarantined]] = {
    **dict.fromkeys(
        (
            R.INVALID_UTF8,
            R.MALFORMED_EVENT,
            R.ERROR_EVENT,
            R.MISSING_FINISH,
            R.MISSING_DONE,
            R.EVENT_AFTER_TERMINAL,
            R.FINISH_REASON_MISMATCH,
            R.UNEXPECTED_CHOICE,
            R.REFUSAL,
            R.LEGACY_FUNCTION_CALL,
            R.INVALID_CALL_INDEX,
            R.MISSING_CALL_IDENTITY,
            R.IDENTITY_CONFLICT,
            R.UNSUPPORTED_TOOL_TYPE,
            R.SPLICED_RESPONSE,
            R.UNSUPPORTED_WIRE,
            R.INCOMPLETE_ITEM,
            R.ITEM_MISMATCH,
            R.RESPONSE_INCOMPLETE,
        ),
        StreamFault,
    ),
    **dict.fromkeys((R.DISCONNECTED, R.STALLED, R.CANCELLED), Interrupted),
    **dict.fromkeys(
        (
            R.INVALID_JSON,
            R.TRAILING_DATA,
            R.NOT_AN_OBJECT,
            R.DUPLICATE_KEY,
            R.NUMBER_OUT_OF_RANGE,
            R.INVALID_STRING,
            R.DEPTH_EXCEEDED,
        ),
        ArgumentsRejected,
    ),
    **dict.fromkeys((R.UNKNOWN_TOOL, R.SCHEMA_INVALID), SchemaRejected),
    **dict.fromkeys((R.POLICY_DENIED, R.POLICY_ERROR), PolicyDenied),
    **dict.fromkeys(
        (
            R.TOO_MANY_CALLS,
            R.ARGUMENTS_TOO_LARGE,
            R.TOTAL_ARGUMENTS_TOO_LARGE,
            R.TOO_MANY_EVENTS,
            R.EVENT_TOO_LARGE,
            R.TEXT_TOO_LARGE,
            R.BODY_TOO_LARGE,
        ),
        LimitExceeded,
    ),
    R.CARRIER_MISMATCH: CarrierMismatch,
    **dict.fromkeys(
        (R.TOO_MANY_ROUNDS, R.TOO_MANY_CALLS_IN_ROUND, R.TOO_MANY_CALLS_IN_RUN), LoopLimitExceeded
    ),
    R.CALL_ID_REUSED: DuplicateCallId,
    **dict.fromkeys((R.ROUTE_NOT_GATED, R.WIRE_NOT_OBSERVED, R.UNSUPPORTED_REQUEST), WireUnread),
}
_LOCAL = frozenset(
    {R.CANCELLED, R.POLICY_DENIED, R.POLICY_ERROR, R.ROUTE_NOT_GATED, R.WIRE_NOT_OBSERVED}
    | {R.UNSUPPORTED_REQUEST}
    | {r for r, fam in _FAMILY.items() if issubclass(fam, LimitExceeded)}
)
assert set(_FAMILY) == set(QuarantineReason), "every reason needs a family"
del R
