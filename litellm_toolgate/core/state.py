"""Every rule that changes a stream's or a call's state, as two transition tables.

A stream (one HTTP response of one attempt) moves::

    RECEIVING --finish--> FINISHED --[DONE]--> DONE --eof--> CLOSED --> RELEASED
        any fault, interruption or denial -----------------------------> QUARANTINED

A tool call moves::

    ITEM_OPEN --terminal--> ITEM_TERMINAL --parse--> PARSED --schema--> SCHEMA_VALID
        --policy--> POLICY_APPROVED --release--> RELEASED
    any fault -------------------------------------------------------> QUARANTINED

A table entry's value is either the next state or the :class:`QuarantineReason` that the
move means. A (state, input) pair absent from a table is a bug in the caller of this module,
reported as :class:`TransitionError` naming both; QUARANTINED and RELEASED accept nothing.
Only a call in POLICY_APPROVED can move to RELEASED: that one entry is the whole guarantee
that no call skips a stage.
"""

from __future__ import annotations

import enum

from .errors import QuarantineReason, ToolGateError


class StreamState(enum.Enum):
    RECEIVING = "receiving"
    FINISHED = "finished"
    DONE = "done"
    CLOSED = "closed"
    RELEASED = "released"
    QUARANTINED = "quarantined"


class StreamInput(enum.Enum):
    RESPONSE = "response"
    TEXT = "text"
    CALL = "call"
    ARGUMENTS = "arguments"
    FINISH = "finish"
    DONE = "done"
    METADATA = "metadata"
    UNKNOWN = "unknown"
    ERROR = "error"
    EOF = "eof"
    RELEASE = "release"


class CallState(enum.Enum):
    ITEM_OPEN = "item_open"
    ITEM_TERMINAL = "item_terminal"
    PARSED = "parsed"
    SCHEMA_VALID = "schema_valid"
    POLICY_APPROVED = "policy_approved"
    RELEASED = "released"
    QUARANTINED = "quarantined"


class CallInput(enum.Enum):
    ARGUMENTS = "arguments"
    TERMINAL = "terminal"
    PARSED = "parsed"
    SCHEMA_VALID = "schema_valid"
    APPROVED = "approved"
    RELEASE = "release"


# The tables below are looked up once per wire event. Enum's own ``__hash__`` is a Python
# function (it hashes the member's name); members are singletons compared by identity, so
# the identity hash is equivalent and costs no Python frame.
for _enum in (StreamState, StreamInput, CallState, CallInput):
    _enum.__hash__ = object.__hash__  # type: ignore[method-assign]
del _enum


class TransitionError(ToolGateError):
    """A move the tables do not define: a bug in the gate, never a property of the input."""


S, I = StreamState, StreamInput  # noqa: E741
R = QuarantineReason
_CONTENT = (I.RESPONSE, I.TEXT, I.CALL, I.ARGUMENTS)

STREAM_TABLE: dict[tuple[StreamState, StreamInput], StreamState | QuarantineReason] = {
    **{(S.RECEIVING, i): S.RECEIVING for i in (*_CONTENT, I.METADATA, I.UNKNOWN)},
    (S.RECEIVING, I.FINISH): S.FINISHED,
    (S.RECEIVING, I.DONE): R.MISSING_FINISH,
    (S.RECEIVING, I.EOF): R.MISSING_FINISH,
    (S.RECEIVING, I.ERROR): R.ERROR_EVENT,
    # After the finish only content-free messages (usage) may come, then [DONE].
    **{(S.FINISHED, i): R.EVENT_AFTER_TERMINAL for i in (*_CONTENT, I.FINISH)},
    (S.FINISHED, I.METADATA): S.FINISHED,
    (S.FINISHED, I.UNKNOWN): S.FINISHED,
    (S.FINISHED, I.DONE): S.DONE,
    (S.FINISHED, I.EOF): R.MISSING_DONE,
    (S.FINISHED, I.ERROR): R.ERROR_EVENT,
    # [DONE] is the last message: anything but the end of the body is a fault.
    **{
        (S.DONE, i): R.EVENT_AFTER_TERMINAL
        for i in (*_CONTENT, I.FINISH, I.DONE, I.METADATA, I.UNKNOWN, I.ERROR)
    },
    (S.DONE, I.EOF): S.CLOSED,
    (S.CLOSED, I.RELEASE): S.RELEASED,
}

C, CI = CallState, CallInput
CALL_TABLE: dict[tuple[CallState, CallInput], CallState] = {
    (C.ITEM_OPEN, CI.ARGUMENTS): C.ITEM_OPEN,
    (C.ITEM_OPEN, CI.TERMINAL): C.ITEM_TERMINAL,
    (C.ITEM_TERMINAL, CI.PARSED): C.PARSED,
    (C.PARSED, CI.SCHEMA_VALID): C.SCHEMA_VALID,
    (C.SCHEMA_VALID, CI.APPROVED): C.POLICY_APPROVED,
    (C.POLICY_APPROVED, CI.RELEASE): C.RELEASED,
}
del S, I, R, C, CI


def next_stream_state(state: StreamState, event: StreamInput) -> StreamState | QuarantineReason:
    """The stream's next state, or the reason this input quarantines it."""
    try:
        return STREAM_TABLE[(state, event)]
    except KeyError:
        pass
    raise TransitionError(f"stream in state {state.value} cannot take {event.value}")


def next_call_state(state: CallState, event: CallInput) -> CallState:
    """The call's next state; any fault moves a call to QUARANTINED outside this table."""
    try:
        return CALL_TABLE[(state, event)]
    except KeyError:
        pass
    raise TransitionError(f"call in state {state.value} cannot take {event.value}")
