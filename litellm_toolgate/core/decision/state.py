"""Every rule that changes a stream's or a call's state, as transition tables per wire.

Eight wires are read: chat-completions SSE (:attr:`Wire.CHAT`), Responses SSE
(:attr:`Wire.RESPONSES`), Anthropic Messages SSE (:attr:`Wire.ANTHROPIC`), Ollama's
newline-delimited JSON (:attr:`Wire.OLLAMA`, on the chat tables: its ``done`` line is the
finish and the end marker at once, ``wires/ollama.py``), Gemini's ``generateContent``
SSE (:attr:`Wire.GEMINI`, on the chat tables: the message with the ``finishReason`` is the
finish and the end marker at once, ``wires/gemini.py``) and Bedrock's Converse stream of
AWS event-stream frames (:attr:`Wire.BEDROCK`, on the Anthropic tables: ``messageStop`` is
the finish, ``metadata`` the end marker, ``wires/bedrock.py``) and Cohere's v2 chat SSE
(:attr:`Wire.COHERE`, on the Anthropic tables: ``message-end`` is the finish and the end
marker at once, ``tool-call-end`` a call's own stage, ``wires/cohere.py``) and watsonx.ai's
chat SSE (:attr:`Wire.WATSONX`, chat chunks on the chat tables but for one entry: it sends no
``[DONE]``, so the clean end of the body after the finish closes it, ``wires/watsonx.py``).
On a chat wire a stream (one HTTP response of one attempt) moves::

    RECEIVING --finish--> FINISHED --[DONE]--> DONE --eof--> CLOSED --conclude--> CLOSED
        --release--> RELEASED
    any fault, interruption or denial ---------------------------------------> QUARANTINED

and on a Responses wire (``[DONE]`` after the completion is tolerated, never required)::

    RECEIVING --response.completed--> COMPLETED (--[DONE]--> DONE) --eof--> CLOSED --> RELEASED

A chat tool call moves::

    ITEM_OPEN --terminal--> ITEM_TERMINAL --parse--> PARSED --schema--> SCHEMA_VALID
        --policy--> POLICY_APPROVED --release--> RELEASED
    any fault -------------------------------------------------------> QUARANTINED

A Responses function-call item must pass two more stages of its own before the response's
terminal may close it::

    ITEM_OPEN --arguments.done--> ARGUMENTS_DONE --output_item.done--> ITEM_DONE
        --response.completed--> ITEM_TERMINAL --> (as above)

An Anthropic Messages stream moves like a chat stream, ``message_delta``'s ``stop_reason``
being the finish and ``message_stop`` the end marker::

    RECEIVING --stop_reason--> FINISHED --message_stop--> DONE --eof--> CLOSED --> RELEASED

and its ``tool_use`` block passes one stage of its own, ``content_block_stop``::

    ITEM_OPEN --content_block_stop--> ITEM_DONE --message_stop, eof--> ITEM_TERMINAL --> ...

The end of the body is an input like any other (``eof``, fed by the edge when its transport
saw the body end cleanly), and so is the request for a decision (``conclude``): only CLOSED
takes it. A decision asked for in any earlier state means the body's end was never seen,
which is ``disconnected`` (nothing is assumed about bytes the gate did not read).

On the Responses call table a skipped stage (``incomplete_item``) or a stage repeated or
followed by more arguments (``event_after_terminal``) is an entry whose value is the reason.

A table entry's value is either the next state or the :class:`QuarantineReason` that the
move means. A (state, input) pair absent from a table is a bug in the caller of this module,
reported as :class:`TransitionError` naming both; QUARANTINED and RELEASED accept nothing.
Only a call in POLICY_APPROVED can move to RELEASED: that one entry is the whole guarantee
that no call skips a stage. Which input a wire event is (:func:`input_of`) and which wire a
request path speaks (:data:`WIRE_PATHS`, :func:`wire_of`) are decided here too. Everything
else a wire means is its module's :class:`~.wires.base.WireSpec` (``wires.WIRES``).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..enums import IdentityEnum
from ..errors import QuarantineReason, ToolGateError
from . import events as ev


class Wire(IdentityEnum):
    """The wire format one attempt reads, chosen from what the transport saw."""

    CHAT = "chat"
    RESPONSES = "responses"
    ANTHROPIC = "anthropic"
    OLLAMA = "ollama"
    GEMINI = "gemini"
    BEDROCK = "bedrock"
    COHERE = "cohere"
    WATSONX = "watsonx"


class StreamState(IdentityEnum):
    RECEIVING = "receiving"
    FINISHED = "finished"
    COMPLETED = "completed"
    DONE = "done"
    CLOSED = "closed"
    RELEASED = "released"
    QUARANTINED = "quarantined"


class StreamInput(IdentityEnum):
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
    ARGUMENTS_DONE = "arguments_done"
    ITEM_DONE = "item_done"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    CONCLUDE = "conclude"


class CallState(IdentityEnum):
    ITEM_OPEN = "item_open"
    ARGUMENTS_DONE = "arguments_done"
    ITEM_DONE = "item_done"
    ITEM_TERMINAL = "item_terminal"
    PARSED = "parsed"
    SCHEMA_VALID = "schema_valid"
    POLICY_APPROVED = "policy_approved"
    RELEASED = "released"
    QUARANTINED = "quarantined"


class CallInput(IdentityEnum):
    ARGUMENTS = "arguments"
    ARGUMENTS_DONE = "arguments_done"
    ITEM_DONE = "item_done"
    TERMINAL = "terminal"
    PARSED = "parsed"
    SCHEMA_VALID = "schema_valid"
    APPROVED = "approved"
    RELEASE = "release"


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
    **{(s, I.CONCLUDE): R.DISCONNECTED for s in (S.RECEIVING, S.FINISHED, S.DONE)},
    (S.CLOSED, I.CONCLUDE): S.CLOSED,
    (S.CLOSED, I.RELEASE): S.RELEASED,
}

_STAGES = (I.ARGUMENTS_DONE, I.ITEM_DONE)
RESPONSES_STREAM_TABLE: dict[tuple[StreamState, StreamInput], StreamState | QuarantineReason] = {
    **{(S.RECEIVING, i): S.RECEIVING for i in (*_CONTENT, *_STAGES, I.METADATA, I.UNKNOWN)},
    (S.RECEIVING, I.COMPLETED): S.COMPLETED,
    (S.RECEIVING, I.INCOMPLETE): R.RESPONSE_INCOMPLETE,
    (S.RECEIVING, I.ERROR): R.ERROR_EVENT,
    (S.RECEIVING, I.DONE): R.MISSING_FINISH,
    (S.RECEIVING, I.EOF): R.MISSING_FINISH,
    # response.completed is the last event: anything after it but [DONE] is a fault.
    **{
        (S.COMPLETED, i): R.EVENT_AFTER_TERMINAL
        for i in (*_CONTENT, *_STAGES, I.METADATA, I.UNKNOWN, I.ERROR, I.COMPLETED, I.INCOMPLETE)
    },
    (S.COMPLETED, I.DONE): S.DONE,
    (S.COMPLETED, I.EOF): S.CLOSED,
    **{
        (S.DONE, i): R.EVENT_AFTER_TERMINAL
        for i in (*_CONTENT, *_STAGES, I.METADATA, I.UNKNOWN, I.ERROR, I.COMPLETED, I.INCOMPLETE)
    },
    (S.DONE, I.DONE): R.EVENT_AFTER_TERMINAL,
    (S.DONE, I.EOF): S.CLOSED,
    **{(s, I.CONCLUDE): R.DISCONNECTED for s in (S.RECEIVING, S.COMPLETED, S.DONE)},
    (S.CLOSED, I.CONCLUDE): S.CLOSED,
    (S.CLOSED, I.RELEASE): S.RELEASED,
}

C, CI = CallState, CallInput
_VALIDATION: dict[tuple[CallState, CallInput], CallState | QuarantineReason] = {
    (C.ITEM_TERMINAL, CI.PARSED): C.PARSED,
    (C.PARSED, CI.SCHEMA_VALID): C.SCHEMA_VALID,
    (C.SCHEMA_VALID, CI.APPROVED): C.POLICY_APPROVED,
    (C.POLICY_APPROVED, CI.RELEASE): C.RELEASED,
}
CALL_TABLE: dict[tuple[CallState, CallInput], CallState | QuarantineReason] = {
    (C.ITEM_OPEN, CI.ARGUMENTS): C.ITEM_OPEN,
    (C.ITEM_OPEN, CI.TERMINAL): C.ITEM_TERMINAL,
    **_VALIDATION,
}
RESPONSES_CALL_TABLE: dict[tuple[CallState, CallInput], CallState | QuarantineReason] = {
    (C.ITEM_OPEN, CI.ARGUMENTS): C.ITEM_OPEN,
    (C.ITEM_OPEN, CI.ARGUMENTS_DONE): C.ARGUMENTS_DONE,
    (C.ITEM_OPEN, CI.ITEM_DONE): R.INCOMPLETE_ITEM,
    (C.ITEM_OPEN, CI.TERMINAL): R.INCOMPLETE_ITEM,
    (C.ARGUMENTS_DONE, CI.ARGUMENTS): R.EVENT_AFTER_TERMINAL,
    (C.ARGUMENTS_DONE, CI.ARGUMENTS_DONE): R.EVENT_AFTER_TERMINAL,
    (C.ARGUMENTS_DONE, CI.ITEM_DONE): C.ITEM_DONE,
    (C.ARGUMENTS_DONE, CI.TERMINAL): R.INCOMPLETE_ITEM,
    **{
        (C.ITEM_DONE, i): R.EVENT_AFTER_TERMINAL
        for i in (CI.ARGUMENTS, CI.ARGUMENTS_DONE, CI.ITEM_DONE)
    },
    (C.ITEM_DONE, CI.TERMINAL): C.ITEM_TERMINAL,
    **_VALIDATION,
}
# Anthropic: the chat table, plus a tool block's stop, legal only before the stop_reason.
ANTHROPIC_STREAM_TABLE: dict[tuple[StreamState, StreamInput], StreamState | QuarantineReason] = {
    **STREAM_TABLE,
    (S.RECEIVING, I.ITEM_DONE): S.RECEIVING,
    (S.FINISHED, I.ITEM_DONE): R.EVENT_AFTER_TERMINAL,
    (S.DONE, I.ITEM_DONE): R.EVENT_AFTER_TERMINAL,
}
ANTHROPIC_CALL_TABLE: dict[tuple[CallState, CallInput], CallState | QuarantineReason] = {
    (C.ITEM_OPEN, CI.ARGUMENTS): C.ITEM_OPEN,
    (C.ITEM_OPEN, CI.ITEM_DONE): C.ITEM_DONE,
    (C.ITEM_OPEN, CI.TERMINAL): R.INCOMPLETE_ITEM,
    (C.ITEM_DONE, CI.ARGUMENTS): R.EVENT_AFTER_TERMINAL,
    (C.ITEM_DONE, CI.ITEM_DONE): R.EVENT_AFTER_TERMINAL,
    (C.ITEM_DONE, CI.TERMINAL): C.ITEM_TERMINAL,
    **_VALIDATION,
}
# watsonx.ai: the chat table, but its native chat stream ends with no [DONE] (the body's clean
# end after the finish closes it); a [DONE], if one comes, must still be the last message.
WATSONX_STREAM_TABLE: dict[tuple[StreamState, StreamInput], StreamState | QuarantineReason] = {
    **STREAM_TABLE,
    (S.FINISHED, I.EOF): S.CLOSED,
}
STREAM_TABLES = {
    Wire.CHAT: STREAM_TABLE,
    Wire.RESPONSES: RESPONSES_STREAM_TABLE,
    Wire.ANTHROPIC: ANTHROPIC_STREAM_TABLE,
    # Ollama: the chat tables; its done line is read as the finish and the end marker at once.
    Wire.OLLAMA: STREAM_TABLE,
    # Gemini: the chat tables; the message with the finishReason is the finish and the end
    # marker at once (there is no [DONE]).
    Wire.GEMINI: STREAM_TABLE,
    # Bedrock Converse: the Anthropic tables; messageStop is the finish, metadata the end
    # marker, contentBlockStop a tool block's own stage (wires/bedrock.py).
    Wire.BEDROCK: ANTHROPIC_STREAM_TABLE,
    # Cohere v2: the Anthropic tables; message-end is the finish and the end marker at once,
    # tool-call-end a call's own stage (wires/cohere.py).
    Wire.COHERE: ANTHROPIC_STREAM_TABLE,
    Wire.WATSONX: WATSONX_STREAM_TABLE,
}
CALL_TABLES = {
    Wire.CHAT: CALL_TABLE,
    Wire.RESPONSES: RESPONSES_CALL_TABLE,
    Wire.ANTHROPIC: ANTHROPIC_CALL_TABLE,
    Wire.OLLAMA: CALL_TABLE,  # a call arrives whole: opened, then its one fragment
    Wire.GEMINI: CALL_TABLE,  # a functionCall part arrives whole, as Ollama's calls do
    Wire.BEDROCK: ANTHROPIC_CALL_TABLE,
    Wire.COHERE: ANTHROPIC_CALL_TABLE,
    Wire.WATSONX: CALL_TABLE,
}
del S, I, R, C, CI


def next_stream_state(
    state: StreamState, event: StreamInput, wire: Wire = Wire.CHAT
) -> StreamState | QuarantineReason:
    """The stream's next state, or the reason this input quarantines it."""
    try:
        return STREAM_TABLES[wire][(state, event)]
    except KeyError:
        pass
    raise TransitionError(f"stream in state {state.value} cannot take {event.value}")


def next_call_state(
    state: CallState, event: CallInput, wire: Wire = Wire.CHAT
) -> CallState | QuarantineReason:
    """The call's next state, or the reason this input quarantines its attempt.

    Any fault moves a call to QUARANTINED outside this table (the attempt drops every call).
    """
    try:
        return CALL_TABLES[wire][(state, event)]
    except KeyError:
        pass
    raise TransitionError(f"call in state {state.value} cannot take {event.value}")


EVENT_INPUTS: Mapping[type, StreamInput] = {
    ev.ResponseStarted: StreamInput.RESPONSE,
    ev.TextDelta: StreamInput.TEXT,
    ev.CallStarted: StreamInput.CALL,
    ev.ArgumentDelta: StreamInput.ARGUMENTS,
    ev.Finish: StreamInput.FINISH,
    ev.ChoiceFinish: StreamInput.METADATA,  # one choice of several: the stream goes on
    ev.DoneMarker: StreamInput.DONE,
    ev.Metadata: StreamInput.METADATA,
    ev.StreamError: StreamInput.ERROR,
    ev.Unknown: StreamInput.UNKNOWN,
    ev.ArgumentsDone: StreamInput.ARGUMENTS_DONE,
    ev.ItemDone: StreamInput.ITEM_DONE,
    ev.ResponseCompleted: StreamInput.COMPLETED,
    ev.ResponseIncomplete: StreamInput.INCOMPLETE,
    ev.BlockStop: StreamInput.ITEM_DONE,
}


def input_of(event: ev.WireEvent) -> StreamInput:
    """The stream input a wire event is."""
    return EVENT_INPUTS[type(event)]


WIRE_PATHS: tuple[tuple[str, Wire], ...] = (
    ("/v1/messages", Wire.ANTHROPIC),
    ("/chat/completions", Wire.CHAT),
    ("/responses", Wire.RESPONSES),
    ("/api/chat", Wire.OLLAMA),
    (":streamGenerateContent", Wire.GEMINI),  # Gemini: .../models/<model>:streamGenerateContent
    (":generateContent", Wire.GEMINI),
    # Bedrock's runtime: /model/{modelId}/converse-stream, and /converse for a whole result.
    ("/converse-stream", Wire.BEDROCK),
    ("/converse", Wire.BEDROCK),
    ("/v2/chat", Wire.COHERE),  # Cohere's v2 chat, streamed or whole
    # watsonx.ai: /ml/v1/text/chat_stream (and /ml/v1/deployments/<id>/text/chat_stream),
    # /text/chat for a whole result.
    ("/text/chat_stream", Wire.WATSONX),
    ("/text/chat", Wire.WATSONX),
)
"""The end of the request path each wire is served on, tried in this order."""

PUBLISHER_PATHS: tuple[tuple[str, str, Wire], ...] = (
    # Claude on Vertex AI: .../publishers/anthropic/models/<model>:streamRawPredict (and
    # :rawPredict for a whole result) carries Anthropic's Messages wire. Other publishers'
    # rawPredict (Mistral, AI21) speak other wires: only this publisher is read.
    ("anthropic", ":streamRawPredict", Wire.ANTHROPIC),
    ("anthropic", ":rawPredict", Wire.ANTHROPIC),
)
"""(publisher, method, wire) of Vertex AI's publisher-model paths,
``.../publishers/<publisher>/models/<model><method>``."""


def wire_of(path: str) -> Wire | None:
    """The wire a request's URL path speaks, or None for one this gate cannot read."""
    path = path.rstrip("/")
    for suffix, wire in WIRE_PATHS:
        if path.endswith(suffix):
            return wire
    head, _, last = path.rpartition("/")
    for publisher, method, wire in PUBLISHER_PATHS:
        if head.endswith(f"/publishers/{publisher}/models") and last.endswith(method):
            return wire
    return None
