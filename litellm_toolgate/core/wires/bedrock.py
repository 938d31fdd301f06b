"""The Bedrock Converse wire: ``ConverseStream`` events in AWS event-stream frames, and the
whole ``Converse`` response.

Sources, each rule below cites one: the Amazon Bedrock API reference
(https://docs.aws.amazon.com/bedrock/latest/APIReference/): ``API_runtime_ConverseStream``,
``API_runtime_ConverseStreamOutput`` (the events and the in-stream exceptions),
``API_runtime_MessageStartEvent``, ``API_runtime_ContentBlockStartEvent``,
``API_runtime_ContentBlockStart`` / ``API_runtime_ToolUseBlockStart`` (``toolUseId``,
``name``), ``API_runtime_ContentBlockDeltaEvent``, ``API_runtime_ContentBlockDelta`` (a
union: ``text``, ``toolUse``, ``reasoningContent``, ``citation``, ...),
``API_runtime_ToolUseBlockDelta`` (``input``: a string), ``API_runtime_ContentBlockStopEvent``,
``API_runtime_MessageStopEvent`` (``stopReason``: ``end_turn | tool_use | max_tokens |
stop_sequence | guardrail_intervened | content_filtered | ...``),
``API_runtime_ConverseStreamMetadataEvent``, ``API_runtime_Converse`` (the whole response)
and ``API_runtime_ToolUseBlock`` (``input``: a JSON document); the framing is
:mod:`..eventstream`. litellm's ``llms/bedrock/chat/invoke_handler.py``
(``AWSEventStreamDecoder.converse_chunk_parser``; 1.110.2 and 1.108.7 alike) for what the
client makes of it.

A streamed body is a sequence of frames, each an event named by its ``:event-type`` header
whose payload is the event's JSON object (:mod:`..eventstream` reports it as a message
``(event type, payload)``). Rules:

* ``messageStart`` (``{"role": "assistant"}``) comes first and once: content before it is
  ``malformed_event``, a second one a ``spliced_response``.
* Content blocks are keyed by ``contentBlockIndex`` (a non-negative integer,
  ``invalid_call_index``). A tool block is opened by ``contentBlockStart`` whose ``start``
  holds ``toolUse`` ``{toolUseId, name}``: both non-empty strings
  (``missing_call_identity``), the id never reused in the response and the index never
  reused (``identity_conflict``). A ``toolUse`` start whose ``type`` names anything but a
  plain tool (a server tool) and a start of any kind the gate does not know are refused
  (``unsupported_tool_type``); a ``reasoningContent`` start (redacted reasoning) passes.
  Text and reasoning blocks have no start event: their first delta opens them.
* ``contentBlockDelta``'s ``delta`` is a union, exactly one member (``malformed_event``
  otherwise): ``text`` and ``reasoningContent.text`` are visible text; ``toolUse.input`` is
  a string fragment of the call's arguments, legal only on an open tool block (a fragment
  for a block never started, or already stopped, is ``identity_conflict``; any other delta
  on a tool block ``malformed_event``); reasoning signatures, redacted reasoning and
  citations pass uncounted; an unknown member on a text block is counted and passes.
* ``contentBlockStop`` closes an open block (``identity_conflict`` otherwise). A tool
  block's arguments are the concatenation of its fragments; a tool block with no fragment
  text has the arguments ``{}`` (litellm hands over ``{}`` then).
* ``messageStop`` carries ``stopReason``, a non-empty string; it must find every block
  stopped (``incomplete_item``), and no block may start or change after it
  (``event_after_terminal``). It is the wire's finish (``Finish``).
* ``metadata`` (usage, metrics, trace) is the last event of a ConverseStream response: it
  is the end marker (``DoneMarker``), legal only after ``messageStop``.
* The terminal: every tool block's ``contentBlockStop``, then ``messageStop`` with
  ``stopReason`` ``tool_use``, then ``metadata``, then a clean end of the body. Calls are
  released only under ``tool_use``, and ``tool_use`` without a call is a contradiction
  (``finish_reason_mismatch``; a ``guardrail_intervened`` or ``content_filtered`` stop with
  calls is a ``refusal``). A body that ends before ``messageStop`` is ``missing_finish``,
  one that ends after it without ``metadata`` ``missing_done``; an exception frame is
  ``error_event`` and a frame cut short or with a bad checksum ``malformed_event``
  (:mod:`..eventstream`). These are the Anthropic tables (``state.ANTHROPIC_STREAM_TABLE``,
  ``ANTHROPIC_CALL_TABLE``): the block stop is the call's own stage.
* Unknown event types are counted (``Unknown``); members of an event the rules do not name
  (Bedrock pads each event with a ``p`` member) are not read.
* A whole body (``/converse``) is one object: ``output.message.content`` (blocks ``text``,
  ``reasoningContent`` or ``toolUse`` ``{toolUseId, name, input}``, ``input`` an object;
  any other block is ``unsupported_tool_type``) and ``stopReason``; it is read by the
  duplicate-refusing loader, and a call's arguments are its ``input`` re-serialized.

Identity: the ``toolUseId``; litellm hands it over as the call's id, numbering calls 0, 1,
... in start order, so its chunks are matched to the wire by order, id, name and argument
text (:meth:`BedrockWire.carrier_fault`). On the Responses API litellm bridges to chat over
this wire and keeps the ``toolUseId`` as each function-call item's ``call_id``: the items are
matched the same way (:func:`~.base.bridged_responses_fault`), and a stop other than
:data:`COMPLETE_STOPS` is an incomplete response (``response_incomplete``).

Faults are raised as :class:`WireFault`: a reason, never body text.
"""

from __future__ import annotations

import json
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
    TextDelta,
    Unknown,
    WireEvent,
)
from ..decision.profiles import Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.eventstream import EventStreamDecoder, encode_frame
from ..framing.sse import SSEMessage
from .base import LedgerView, WireSpec, bridged_responses_fault, holds, same_json, verdict
from .loads import WireFault, load_strict

R = QuarantineReason

TOOL_USE = "tool_use"
"""The stop reason that releases calls."""
REFUSING_STOPS = frozenset({"guardrail_intervened", "content_filtered"})
"""Stop reasons that say the response was blocked: calls under them are a refusal."""
COMPLETE_STOPS = frozenset({TOOL_USE, "end_turn", "stop_sequence"})
"""Stop reasons that end a whole response: under any other (``max_tokens``, a blocked
response, ...) litellm's Responses bridge makes an incomplete response."""
MEDIA = "application/vnd.amazon.eventstream"

_TEXT, _REASONING, _TOOL, _OTHER = "text", "reasoning", "tool", "other"
_PASSING_DELTAS = frozenset({"citation"})
"""Delta members that carry nothing the gate counts or withholds."""


def stop_reason_fault(stop_reason: str | None, calls: bool) -> QuarantineReason | None:
    """Whether ``stopReason`` contradicts the tool blocks streamed (see the module docstring)."""
    if calls == (stop_reason == TOOL_USE):
        return None
    return R.REFUSAL if calls and stop_reason in REFUSING_STOPS else R.FINISH_REASON_MISMATCH


def _index(obj: Mapping[str, Any]) -> int:
    index = obj.get("contentBlockIndex")
    if type(index) is not int or index < 0:  # bool is not int here
        raise WireFault(R.INVALID_CALL_INDEX)
    return index


def _member(union: object) -> tuple[str, Any]:
    """The one member of a union object (``delta``, ``start``, a content block)."""
    if not isinstance(union, dict) or len(union) != 1:
        raise WireFault(R.MALFORMED_EVENT)
    ((key, value),) = union.items()
    return key, value


def _identity(obj: object, index: int) -> tuple[str, str]:
    if not isinstance(obj, dict):
        raise WireFault(R.MALFORMED_EVENT, index)
    kind = obj.get("type")
    if kind is not None and kind != TOOL_USE:
        raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)  # a server tool: not the caller's
    call_id, name = obj.get("toolUseId"), obj.get("name")
    for field in (call_id, name):
        if field is not None and not isinstance(field, str):
            raise WireFault(R.MALFORMED_EVENT, index)
    if not call_id or not name:
        raise WireFault(R.MISSING_CALL_IDENTITY, index)
    return call_id, name


def _serialize(value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except ValueError:  # only a circular value, which json.loads cannot build
        raise WireFault(R.MALFORMED_EVENT) from None


class BedrockNormalizer:
    """Normalizes one Converse response; keeps the blocks' kinds and the calls' ids."""

    def __init__(self) -> None:
        self._kinds: dict[int, str] = {}
        self._open: set[int] = set()
        self._ids: set[str] = set()
        self._streamed: set[int] = set()
        self._started = False
        self._stopped = False  # messageStop was seen: no block may start or change

    @property
    def response_id(self) -> str | None:
        return None  # the wire names no response

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one event frame (its ``:event-type`` and JSON payload)."""
        kind = message.event
        obj = load_strict(message.data)
        if kind == "messageStart":
            if self._started:
                raise WireFault(R.SPLICED_RESPONSE)
            if obj.get("role") != "assistant":
                raise WireFault(R.MALFORMED_EVENT)
            self._started = True
            return [Metadata()]
        if kind not in ("contentBlockStart", "contentBlockDelta", "contentBlockStop"):
            if kind == "messageStop":
                return [self._message_stop(obj)]
            if kind == "metadata":
                if not self._started:
                    raise WireFault(R.MALFORMED_EVENT)
                return [DoneMarker()]
            return [Unknown(kind[:64])]
        if not self._started:
            raise WireFault(R.MALFORMED_EVENT)  # content before messageStart
        if self._stopped:
            raise WireFault(R.EVENT_AFTER_TERMINAL)  # a block after the stopReason
        index = _index(obj)
        if kind == "contentBlockDelta":
            return self._delta(index, obj.get("delta"))
        if kind == "contentBlockStart":
            return self._start(index, obj.get("start"))
        return self._stop(index)

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole ``Converse`` response body."""
        obj = load_strict(data)
        output = obj.get("output")
        message = output.get("message") if isinstance(output, dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            raise WireFault(R.MALFORMED_EVENT)
        events: list[WireEvent] = []
        for index, block in enumerate(content):
            key, value = _member(block)
            if key == "text":
                if not isinstance(value, str):
                    raise WireFault(R.MALFORMED_EVENT, index)
                events.append(TextDelta(0, value) if value else Metadata())
            elif key == "reasoningContent":
                events.append(Metadata())
            elif key == "toolUse":
                call_id, name = _identity(value, index)
                if call_id in self._ids:
                    raise WireFault(R.IDENTITY_CONFLICT, index)
                self._ids.add(call_id)
                arguments = value.get("input")
                if not isinstance(arguments, dict):
                    raise WireFault(R.MALFORMED_EVENT, index)
                events.append(CallStarted(0, index, call_id, name))
                events.append(ArgumentDelta(0, index, _serialize(arguments)))
                events.append(BlockStop(index, from_start=True))
            else:
                raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        stop_reason = obj.get("stopReason")
        if stop_reason is not None:
            events.append(_finish(stop_reason))
        # Without a stopReason the end marker below finds no finish: missing_finish.
        return [*events, DoneMarker()]

    # ---- message ---------------------------------------------------------------------------
    def _message_stop(self, obj: Mapping[str, Any]) -> Finish:
        if not self._started or self._stopped:
            raise WireFault(R.MALFORMED_EVENT if not self._started else R.EVENT_AFTER_TERMINAL)
        if self._open:
            raise WireFault(R.INCOMPLETE_ITEM, min(self._open))
        self._stopped = True
        return _finish(obj.get("stopReason"))

    # ---- blocks ----------------------------------------------------------------------------
    def _start(self, index: int, start: object) -> list[WireEvent]:
        if index in self._kinds:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        key, value = _member(start)
        if key == "reasoningContent":
            self._kinds[index] = _REASONING
            self._open.add(index)
            return [Metadata()]
        if key != "toolUse":
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        call_id, name = _identity(value, index)
        if call_id in self._ids:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._ids.add(call_id)
        self._kinds[index] = _TOOL
        self._open.add(index)
        return [CallStarted(0, index, call_id, name)]

    def _delta(self, index: int, delta: object) -> list[WireEvent]:
        key, value = _member(delta)
        kind = self._kinds.get(index)
        if kind is None:
            if key == "toolUse":
                raise WireFault(R.IDENTITY_CONFLICT, index)  # a call no start announced
            # A text or reasoning block opens with its first delta.
            kind = self._kinds[index] = _REASONING if key == "reasoningContent" else _TEXT
            self._open.add(index)
        elif index not in self._open:
            raise WireFault(R.IDENTITY_CONFLICT, index)  # a delta after the block's stop
        if kind == _TOOL:
            if key != "toolUse" or not isinstance(value, dict):
                raise WireFault(R.MALFORMED_EVENT, index)
            fragment = value.get("input")
            if not isinstance(fragment, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            if not fragment:
                return [Metadata()]
            self._streamed.add(index)
            return [ArgumentDelta(0, index, fragment)]
        if key == "toolUse":
            raise WireFault(R.MALFORMED_EVENT, index)  # a fragment on a text block
        if key == "text":
            if kind != _TEXT or not isinstance(value, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            return [TextDelta(0, value)] if value else [Metadata()]
        if key == "reasoningContent":
            if kind != _REASONING or not isinstance(value, dict):
                raise WireFault(R.MALFORMED_EVENT, index)
            text = value.get("text")
            if text is not None and not isinstance(text, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            return [TextDelta(0, text)] if text else [Metadata()]
        if key in _PASSING_DELTAS:
            return [Metadata()]
        return [Unknown(key[:64])]

    def _stop(self, index: int) -> list[WireEvent]:
        if index not in self._open:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._open.discard(index)
        if self._kinds[index] != _TOOL:
            return [Metadata()]
        if index in self._streamed:
            return [BlockStop(index, from_start=False)]
        # No fragment carried text: the arguments are the empty object.
        return [ArgumentDelta(0, index, "{}"), BlockStop(index, from_start=True)]


def _finish(stop_reason: object) -> Finish:
    if not isinstance(stop_reason, str) or not stop_reason:
        raise WireFault(R.MALFORMED_EVENT)
    return Finish(0, stop_reason[:32])


# ---- the wire's answers to the core ----------------------------------------------------------
class BedrockWire(WireSpec):
    """The Bedrock Converse wire (see :class:`~.base.WireSpec` and the module docstring):
    AWS event-stream frames, read by event name; nothing passes live."""

    framing = "AWS event-stream"
    media: Mapping[bool, str] = {True: MEDIA, False: "application/json"}
    named = True

    def normalizer(self, profile: Profile) -> BedrockNormalizer:
        return BedrockNormalizer()

    def decoder(self, max_event_bytes: int) -> EventStreamDecoder:
        return EventStreamDecoder(max_event_bytes=max_event_bytes)

    def encode(self, message: SSEMessage, value: Any) -> bytes:
        # One event frame, as the service writes it: its three headers and the JSON payload.
        payload = json.dumps(value, separators=(",", ":")).encode("ascii")
        headers = [
            (":event-type", message.event),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ]
        return encode_frame(headers, payload)

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        return stop_reason_fault(finish_reason, calls)

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "responses":
            # The Responses API, bridged by litellm to chat over this wire.
            return bridged_responses_fault(ledger, carrier, COMPLETE_STOPS)
        return verdict(_carrier_matches(ledger, carrier))


def _carrier_matches(ledger: LedgerView, carrier: Carrier) -> bool:
    """litellm's chat chunks against the Converse wire: litellm numbers the calls 0, 1, ...
    in start order and keeps each ``toolUseId`` and name; it says ``tool_calls`` exactly when
    the wire stopped on ``tool_use`` with calls. A fragment's text must be held byte for
    byte; a call with no fragments (``{}``), or a whole body's ``input``, which litellm
    serializes again, must hold the same JSON value."""
    if carrier.kind != "chat" or carrier.foreign:
        return False
    calls = ledger.ordered()
    if (carrier.finish_reason == "tool_calls") != bool(calls):
        return False
    theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    if len(theirs) != len(calls):
        return False
    for ours, their in zip(calls, theirs, strict=True):
        if (their.call_id, their.name) != (ours.call_id, ours.name):
            return False
        if holds(ours, their.arguments):
            ours.adopt(their.arguments)  # litellm's copy: what its chunk will show
            continue
        if ours.index not in ledger.from_start or not same_json(their.arguments, ours.join()):
            return False
    return True


WIRE = BedrockWire(Wire.BEDROCK)
