"""Cohere's v2 chat wire (``POST /v2/chat``): a stream of typed SSE events, or one whole body.

Sources, each rule below cites one: Cohere's API reference ("Chat", v2) and its guides
"Streaming responses" and "Streaming for tool use"; the Python SDK's v2 types
(``StreamedChatResponseV2``: ``ChatMessageStartEvent``, ``ChatContentStartEvent``,
``ChatContentDeltaEvent``, ``ChatContentEndEvent``, ``ChatToolPlanDeltaEvent``,
``ChatToolCallStartEvent``, ``ChatToolCallDeltaEvent``, ``ChatToolCallEndEvent``,
``CitationStartEvent``, ``CitationEndEvent``, ``ChatMessageEndEvent``; ``ChatFinishReason``;
``V2ChatResponse``, ``ToolCallV2``), whose client reads the stream as server-sent events; and
litellm's ``llms/cohere/chat/v2_transformation.py`` (1.108.7, 1.110.2) for what the client
makes of a whole body.

A streamed body is SSE: every message's data is one JSON object whose ``type`` names it (and
equals the SSE ``event`` name when one is given). Rules:

* ``message-start`` comes first and once (a second one is a spliced response); its
  ``delta.message`` starts empty: a call there would be one no event announced
  (``malformed_event``). Its ``id``, when given, names the response.
* Text: ``content-start`` opens a content item at its ``index`` (its ``delta.message.content``
  is ``{"type": "text" | "thinking", ...}``), ``content-delta`` feeds it
  (``delta.message.content.text`` or ``.thinking``), ``content-end`` closes it. A content item
  of another type is refused (``unsupported_tool_type``): the gate cannot tell it is no call.
  ``tool-plan-delta`` (``delta.message.tool_plan``) is the model's plan, visible text.
  ``citation-start`` / ``citation-end`` carry citations only.
* Calls: ``tool-call-start`` opens call ``index`` (a non-negative integer,
  ``invalid_call_index``; once in the stream, ``identity_conflict``) with
  ``delta.message.tool_calls``: ``{"id", "type": "function", "function": {"name",
  "arguments"}}``; a non-empty string ``id`` (never used twice) and ``name``
  (``missing_call_identity``); a ``type`` other than ``function`` is
  ``unsupported_tool_type``. ``tool-call-delta`` adds ``function.arguments`` text to the call
  it names, which must be the open one; ``tool-call-end`` closes it. Cohere streams one call
  at a time: a call's event while another is open, or for a call that is closed or was never
  opened, is ``identity_conflict``. The arguments are the concatenated strings (the start's
  included); a call that streamed none has ``{}``, as litellm hands it over.
* The terminal: ``message-end`` with ``delta.finish_reason`` (``ChatFinishReason``:
  ``COMPLETE``, ``STOP_SEQUENCE``, ``MAX_TOKENS``, ``TOOL_CALL``, ``ERROR``, ``TIMEOUT``) is
  the finish and the end marker at once (the Anthropic tables, ``state.ANTHROPIC_STREAM_TABLE``:
  a call must have seen its ``tool-call-end`` first, ``incomplete_item``), then a clean end of
  the body. Anything after it is ``event_after_terminal``; a body that ends before it,
  ``missing_finish``. Calls are released only under ``TOOL_CALL``, and ``TOOL_CALL`` without a
  call is a contradiction too (:func:`finish_fault`: ``finish_reason_mismatch``).
* A whole body (``stream: false``, ``V2ChatResponse``) is one object: ``id``,
  ``finish_reason``, ``message`` (``content`` items, ``tool_plan``, ``tool_calls``), ``usage``.
  Its calls are read as above, each whole (its ``arguments`` a string, read as sent), in
  order; a body without ``finish_reason`` is ``missing_finish``.

litellm keeps each call's id, name and argument text as the wire gives them (a whole body:
``{**tool_call, "index": position}``), so its chunks are matched to the wire by position, id,
name and the exact text (:func:`carrier_matches`). Its finish reason is its mapping of the
wire's (``map_finish_reason``: ``TOOL_CALL`` is ``tool_calls``, ``MAX_TOKENS`` is ``length``;
1.110.2), or ``stop`` whatever the wire said (1.108.7 sets none on a whole result).

Faults are raised as :class:`WireFault`: a reason, never body text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..decision.carrier import Carrier
from ..decision.events import (
    ArgumentDelta,
    BlockStop,
    CallStarted,
    DoneMarker,
    Finish,
    Metadata,
    ResponseStarted,
    TextDelta,
    Unknown,
    WireEvent,
)
from ..decision.profiles import Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.sse import SSEMessage
from .base import (
    LedgerView,
    LiveRule,
    WireSpec,
    bridged_responses_fault,
    holds,
    stateless,
    verdict,
)
from .loads import WireFault, load_object, load_strict

R = QuarantineReason

TOOL_CALL = "TOOL_CALL"
"""The finish reason that releases calls."""

TEXT_KINDS = frozenset({"text", "thinking"})
"""Content item types that carry only what the caller reads."""

LIVE_TYPES = frozenset(
    {
        "content-start",
        "content-delta",
        "content-end",
        "tool-plan-delta",
        "citation-start",
        "citation-end",
    }
)
"""Event types that may reach the caller before the decision (``message-start`` too, while
it carries no call); the call events, ``message-end`` and anything unknown are held."""

COMPLETE_FINISHES = frozenset({"COMPLETE", "STOP_SEQUENCE", TOOL_CALL})
"""Cohere's finishes that end a whole response (a bridged Responses result is
``completed``); any other is an incomplete response."""

CHAT_FINISH = {
    "COMPLETE": "stop",
    "STOP_SEQUENCE": "stop",
    TOOL_CALL: "tool_calls",
    "MAX_TOKENS": "length",
    "ERROR": "stop",
    "ERROR_TOXIC": "content_filter",
}
"""The chat finish reason litellm gives each of Cohere's (its ``map_finish_reason``; any
other is ``stop``)."""


def passes_live(value: Mapping[str, Any]) -> bool:
    """Whether an event holds nothing the gate withholds."""
    kind = value.get("type")
    if kind in LIVE_TYPES:
        return kind != "content-start" or _content_kind(value) in TEXT_KINDS
    return kind == "message-start" and not _start_calls(value)


def _content_kind(value: Mapping[str, Any]) -> object:
    content = _path(value, "delta", "message", "content")
    return content.get("type") if isinstance(content, dict) else None


def _start_calls(value: Mapping[str, Any]) -> bool:
    message = _path(value, "delta", "message")
    return not isinstance(message, dict) or bool(message.get("tool_calls"))


def _path(value: object, *keys: str) -> Any:
    """``value[k1][k2]...``, or None where a level is missing or no object."""
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def _string(value: object, index: int | None = None) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireFault(R.MALFORMED_EVENT, index)
    return value


def finish_fault(finish_reason: str | None, calls: bool) -> QuarantineReason | None:
    """Calls are released only under ``TOOL_CALL``, which needs a call."""
    if calls != (finish_reason == TOOL_CALL):
        return R.FINISH_REASON_MISMATCH
    return None


class CohereNormalizer:
    """Normalizes one ``/v2/chat`` response; keeps the calls' identities."""

    def __init__(self, profile: Profile | None = None) -> None:
        self._started = False
        self._response_id: str | None = None
        self._content: dict[int, bool] = {}  # content index -> still open
        self._calls: set[int] = set()
        self._ids: set[str] = set()
        self._open: int | None = None
        self._fed: set[int] = set()  # calls whose arguments carried text

    @property
    def response_id(self) -> str | None:
        return self._response_id

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one SSE message of a streamed response."""
        obj = load_object(message.data)
        kind = obj.get("type")
        if not isinstance(kind, str) or message.event not in ("", "message", kind):
            raise WireFault(R.MALFORMED_EVENT)
        if kind == "message-start":
            return self._message_start(obj)
        if not self._started:
            raise WireFault(R.MALFORMED_EVENT)  # an event before message-start
        if kind in ("tool-call-start", "tool-call-delta", "tool-call-end"):
            index = _index(obj)
            if kind == "tool-call-start":
                return self._call_start(index, _path(obj, "delta", "message", "tool_calls"))
            if index != self._open:
                raise WireFault(R.IDENTITY_CONFLICT, index)
            if kind == "tool-call-delta":
                return self._call_delta(index, _path(obj, "delta", "message", "tool_calls"))
            return self._call_end(index)
        if kind in ("content-start", "content-delta", "content-end"):
            return self._content_event(kind, obj)
        if kind == "tool-plan-delta":
            plan = _string(_path(obj, "delta", "message", "tool_plan"))
            return [TextDelta(0, plan)] if plan else [Metadata()]
        if kind == "message-end":
            return self._message_end(obj)
        if kind in ("citation-start", "citation-end", "debug"):
            return [Metadata()]
        return [Unknown(kind[:64])]

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole ``stream: false`` body (``V2ChatResponse``)."""
        obj = load_strict(data)
        message = obj.get("message")
        if not isinstance(message, dict):
            raise WireFault(R.MALFORMED_EVENT)
        events: list[WireEvent] = [self._named(obj.get("id"))]
        self._started = True
        content = message.get("content")
        if content is not None:
            if not isinstance(content, list):
                raise WireFault(R.MALFORMED_EVENT)
            for item in content:
                if not isinstance(item, dict) or item.get("type") not in TEXT_KINDS:
                    raise WireFault(R.UNSUPPORTED_TOOL_TYPE)
                text = _string(item.get(item["type"]))
                if text:
                    events.append(TextDelta(0, text))
        plan = _string(message.get("tool_plan"))
        if plan:
            events.append(TextDelta(0, plan))
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise WireFault(R.MALFORMED_EVENT)
            for index, call in enumerate(calls):
                events.extend(self._call_start(index, call, whole=True))
                events.extend(self._call_end(index))
        reason = obj.get("finish_reason")
        if reason is not None:
            events.append(_finish(reason))
        # Without a finish_reason the end marker finds no finish: missing_finish.
        return [*events, DoneMarker()]

    # ---- the message -----------------------------------------------------------------------
    def _named(self, response_id: object) -> WireEvent:
        if response_id is None:
            return Metadata()
        if not isinstance(response_id, str) or not response_id:
            raise WireFault(R.MALFORMED_EVENT)
        self._response_id = response_id
        return ResponseStarted(response_id)

    def _message_start(self, obj: Mapping[str, Any]) -> list[WireEvent]:
        if self._started:
            raise WireFault(R.SPLICED_RESPONSE)
        message = _path(obj, "delta", "message")
        if message is not None and not isinstance(message, dict):
            raise WireFault(R.MALFORMED_EVENT)
        if isinstance(message, dict) and (message.get("tool_calls") or message.get("content")):
            raise WireFault(R.MALFORMED_EVENT)  # a call (or text) no event announced
        self._started = True
        return [self._named(obj.get("id"))]

    def _message_end(self, obj: Mapping[str, Any]) -> list[WireEvent]:
        if self._open is not None:
            raise WireFault(R.INCOMPLETE_ITEM, self._open)
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            raise WireFault(R.MALFORMED_EVENT)
        reason = delta.get("finish_reason")
        if reason is None:
            raise WireFault(R.MISSING_FINISH)
        return [_finish(reason), DoneMarker()]

    # ---- content ---------------------------------------------------------------------------
    def _content_event(self, kind: str, obj: Mapping[str, Any]) -> list[WireEvent]:
        index = obj.get("index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise WireFault(R.MALFORMED_EVENT)
        if kind == "content-start":
            if index in self._content:
                raise WireFault(R.IDENTITY_CONFLICT)
            content = _path(obj, "delta", "message", "content")
            if not isinstance(content, dict) or content.get("type") not in TEXT_KINDS:
                raise WireFault(R.UNSUPPORTED_TOOL_TYPE)
            self._content[index] = True
        elif not self._content.get(index):
            raise WireFault(R.IDENTITY_CONFLICT)  # an item never opened, or closed
        if kind == "content-end":
            self._content[index] = False
            return [Metadata()]
        content = _path(obj, "delta", "message", "content")
        if content is None:
            return [Metadata()]
        if not isinstance(content, dict):
            raise WireFault(R.MALFORMED_EVENT)
        text = _string(content.get("text")) + _string(content.get("thinking"))
        return [TextDelta(0, text)] if text else [Metadata()]

    # ---- calls -----------------------------------------------------------------------------
    def _call_start(self, index: int, call: object, *, whole: bool = False) -> list[WireEvent]:
        if self._open is not None or index in self._calls:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        if not isinstance(call, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        kind = call.get("type", "function")
        if kind != "function":
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        function = call.get("function")
        if not isinstance(function, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        call_id, name = call.get("id"), function.get("name")
        for field in (call_id, name):
            if field is not None and not isinstance(field, str):
                raise WireFault(R.MALFORMED_EVENT, index)
        if not call_id or not name:
            raise WireFault(R.MISSING_CALL_IDENTITY, index)
        if call_id in self._ids:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        arguments = _string(function.get("arguments"), index)
        self._ids.add(call_id)
        self._calls.add(index)
        self._open = index
        events: list[WireEvent] = [CallStarted(0, index, call_id, name)]
        if arguments or whole:
            self._fed.add(index)
            events.append(ArgumentDelta(0, index, arguments))
        return events

    def _call_delta(self, index: int, call: object) -> list[WireEvent]:
        if not isinstance(call, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        # A delta carries arguments only: an id or a name here renames the call.
        if call.get("id") is not None or _path(call, "function", "name") is not None:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        fragment = _string(_path(call, "function", "arguments"), index)
        if not fragment:
            return [Metadata()]
        self._fed.add(index)
        return [ArgumentDelta(0, index, fragment)]

    def _call_end(self, index: int) -> list[WireEvent]:
        self._open = None
        if index in self._fed:
            return [BlockStop(index, from_start=False)]
        # No argument text at all: the call's arguments are {} (as litellm hands it over).
        return [ArgumentDelta(0, index, "{}"), BlockStop(index, from_start=True)]


def _index(obj: Mapping[str, Any]) -> int:
    index = obj.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise WireFault(R.INVALID_CALL_INDEX)
    return index


def _finish(reason: object) -> Finish:
    if not isinstance(reason, str) or not reason:
        raise WireFault(R.MALFORMED_EVENT)
    return Finish(0, reason[:32])


# ---- the wire's answers to the core ----------------------------------------------------------
class CohereWire(WireSpec):
    """Cohere's v2 chat wire (see :class:`~.base.WireSpec` and the module docstring)."""

    named = True

    def normalizer(self, profile: Profile) -> CohereNormalizer:
        return CohereNormalizer(profile)

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        return finish_fault(finish_reason, calls)

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "responses":
            # The Responses API, bridged by litellm to chat over this wire: it keeps each
            # call's id as its function-call item's call_id.
            return bridged_responses_fault(ledger, carrier, COMPLETE_FINISHES)
        return verdict(carrier_matches(ledger, carrier))

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


def carrier_matches(ledger: LedgerView, carrier: Carrier) -> bool:
    """litellm's chat chunks against a Cohere wire: the same calls in the same order, by id,
    name and argument text, and a finish reason litellm gives for the wire's (see the module
    text)."""
    if carrier.kind != "chat" or carrier.foreign:
        return False
    wire_finish = ledger.finish_reason
    mapped = CHAT_FINISH.get(wire_finish or "", "stop")
    if carrier.finish_reason not in (mapped, "stop"):
        return False
    calls = ledger.ordered()
    theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    if len(theirs) != len(calls):
        return False
    for ours, their in zip(calls, theirs, strict=True):
        if (their.call_id, their.name) != (ours.call_id, ours.name):
            return False
        if not holds(ours, their.arguments):
            return False
    for ours, their in zip(calls, theirs, strict=True):
        ours.adopt(their.arguments)  # equal texts: litellm's copy is what its chunk shows
    return True


WIRE = CohereWire(Wire.COHERE)
