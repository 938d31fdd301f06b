"""The Anthropic Messages wire: what each block and event is, what may pass live, and the
normalizer that reads the wire's events into the gate's.

A message is a sequence of content blocks, each opened by ``content_block_start`` (which
names the block's type), fed by ``content_block_delta`` events and closed by
``content_block_stop``; ``message_delta`` carries the stop reason and ``message_stop`` ends
the message. The tables here say, once, for the normalizer (:class:`AnthropicNormalizer`,
below), the withholding client and the ``/v1/messages`` carrier alike:

* which block types are text that may reach the caller before the decision
  (:data:`PASSING_BLOCKS`); ``tool_use`` is the one block type the gate gates; every other
  type (server tools, unknown blocks) is refused by the normalizer and held by the carriers;
* which delta type belongs to which block type (:data:`DELTA_OWNERS`);
* what kind each event is (:class:`EventClassifier`), and so what may pass live
  (:data:`LIVE_KINDS`): lifecycle events and the events of a text block. A call, the
  terminal events and anything unknown are held;
* when the stop reason contradicts the blocks streamed (:func:`stop_reason_fault`).

Calls hide on this wire only in blocks: a block whose start the classifier did not see as
text is held, whatever its type, so a call in a block the gate does not know cannot pass.

The normalizer's input is one decoded SSE message of a streamed ``/v1/messages`` call
(``event: <type>`` + ``data: {...}``), or a whole ``stream=False`` message body; its output
is a list of :mod:`events`. Content blocks are keyed by their ``index``; the normalizer
tracks, per index, the block's type and whether it is open, and pins a ``tool_use`` block's
``id`` and ``name`` at its ``content_block_start``. It checks what the *shape* of the
protocol guarantees:

* Every data line is a JSON object whose ``type`` names the event (and equals the SSE
  ``event`` field when one is given); an SSE ``event: error`` is an error whatever its data.
  ``message_start`` comes first and once (a second one is a spliced response); its message
  carries no content yet (content there would be a call no delta announced).
* ``content_block_start`` opens an index once (a reused index, or a ``tool_use`` id already
  seen, is ``identity_conflict``). ``text``, ``thinking`` and ``redacted_thinking`` blocks
  pass (thinking and signatures are never looked into). A ``tool_use`` block must carry a
  non-empty ``id`` and ``name`` (``missing_call_identity``) and an object ``input``. Every
  other block type is refused as ``unsupported_tool_type``: the server-tool blocks
  (``server_tool_use``, ``web_search_tool_result``, ``mcp_tool_use``, ...) are not the
  caller's to execute, yet litellm's chat translation hands ``server_tool_use`` to the caller
  as an ordinary tool call; an unknown block type may be a tool the gate cannot read.
* ``content_block_delta`` and ``content_block_stop`` must name an open block: a delta for a
  block that was never opened or is already stopped is ``identity_conflict``. Each delta
  type belongs to one block type (``text_delta``/``citations_delta`` to text,
  ``thinking_delta``/``signature_delta`` to thinking, ``input_json_delta`` to tool_use); a
  delta on the wrong block, or an unknown delta on a tool block, is ``malformed_event``. An
  unknown delta on a text or thinking block is counted and passes.
* A tool block's arguments are the concatenation of its ``partial_json`` strings when any
  of them carried text. When none did (the API streams a tool with no arguments as one
  empty ``partial_json``, or none at all), they are the start block's ``input``: ``{}``.
  A streamed start ``input`` that is not empty is refused (``item_mismatch``), with or
  without deltas: the API documents neither it nor, with deltas, which source wins, and
  litellm's chat translation drops it, so its caller would run a call other than the one
  checked. In a whole (``stream=False``) body the ``input`` object is the arguments.
* ``message_delta`` may carry the ``stop_reason`` (the wire's own finish); it must find
  every block stopped (``incomplete_item``). ``message_stop`` is the end marker.

The terminal (:mod:`state`, ``ANTHROPIC_STREAM_TABLE``, and :func:`stop_reason_fault`):
every tool block's ``content_block_stop``, then ``message_delta`` with ``stop_reason``
``tool_use``, then ``message_stop``, then a clean end of the body. Faults are raised as
:class:`WireFault` (``core/wires/loads.py``): a reason, never message text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..decision.carrier import Carrier
from ..decision.events import (
    ArgumentDelta,
    BlockStop,
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
    same_json,
    verdict,
)
from .loads import WireFault, load_object, load_strict

R = QuarantineReason

TOOL_USE = "tool_use"
"""The block type of a call the caller runs, and the stop reason that releases calls."""

PASSING_BLOCKS = frozenset({"text", "thinking", "redacted_thinking"})
"""Block types that carry only what the caller reads (thinking is never looked into)."""

DELTA_OWNERS = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": TOOL_USE,
}
"""The block type each delta type belongs to."""

COMPLETE_STOPS = frozenset({TOOL_USE, "end_turn", "stop_sequence"})
"""Stop reasons that end a whole response: under any other (``max_tokens``, ``refusal``,
``pause_turn``, ...) litellm's Responses bridge makes an incomplete response."""

BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})
CONTENT_EVENTS = BLOCK_EVENTS | {"message_delta"}
LIFECYCLE_EVENTS = frozenset({"message_start", "ping"})
TERMINAL_EVENTS = frozenset({"message_delta", "message_stop", "error"})

Kind = Literal["lifecycle", "text", "call", "terminal", "unknown"]
LIVE_KINDS: frozenset[Kind] = frozenset({"lifecycle", "text"})
"""The kinds of event that may reach the caller before the decision."""


def stop_reason_fault(stop_reason: str | None, calls: bool) -> QuarantineReason | None:
    """Whether the wire's ``stop_reason`` contradicts the tool blocks it streamed.

    Tool blocks are released only under ``tool_use``; ``tool_use`` without a tool block is
    a contradiction too. A ``refusal`` stop with tool blocks is a refusal.
    """
    if calls == (stop_reason == TOOL_USE):
        return None
    return (
        QuarantineReason.REFUSAL
        if stop_reason == "refusal"
        else (QuarantineReason.FINISH_REASON_MISMATCH)
    )


class EventClassifier:
    """What kind each event of one Anthropic stream is, for a carrier that withholds.

    ``"lifecycle"`` (``message_start``, ``ping``) and ``"text"`` (every event of a block of
    :data:`PASSING_BLOCKS`) may pass; ``"call"`` (every event of any other block:
    ``tool_use``, server tools, unknown types, or a block this classifier never saw start),
    ``"terminal"`` (``message_delta``, ``message_stop``, ``error``) and ``"unknown"`` events
    are held. Stateful: a block's type is learnt from its ``content_block_start``.
    """

    def __init__(self) -> None:
        self._text_blocks: set[int] = set()

    def classify(self, obj: Mapping[str, Any]) -> Kind:
        kind = obj.get("type")
        if kind in LIFECYCLE_EVENTS:
            return "lifecycle"
        if kind in TERMINAL_EVENTS:
            return "terminal"
        index = obj.get("index")
        if kind == "content_block_start":
            block = obj.get("content_block")
            block_type = block.get("type") if isinstance(block, dict) else None
            if block_type in PASSING_BLOCKS and isinstance(index, int):
                self._text_blocks.add(index)
                return "text"
            return "call"
        if kind in BLOCK_EVENTS:
            return "text" if index in self._text_blocks else "call"
        return "unknown"

    def passes_live(self, obj: Mapping[str, Any]) -> bool:
        """Whether this event may reach the caller before the decision."""
        return self.classify(obj) in LIVE_KINDS


# ---- the normalizer --------------------------------------------------------------------------
def _serialize(value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except ValueError:  # only a circular value, which json.loads cannot build
        raise WireFault(R.MALFORMED_EVENT) from None


def _index(obj: Mapping[str, Any]) -> int:
    index = obj.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise WireFault(R.INVALID_CALL_INDEX)
    return index


def _block(obj: Mapping[str, Any], key: str) -> dict[str, Any]:
    block = obj.get(key)
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise WireFault(R.MALFORMED_EVENT)
    return block


class AnthropicNormalizer:
    """Normalizes one Anthropic message; keeps the pinned block identities."""

    def __init__(self) -> None:
        self._kinds: dict[int, str] = {}
        self._open: set[int] = set()
        self._ids: set[str] = set()
        self._start_input: dict[int, str] = {}
        self._streamed: set[int] = set()
        self._response_id: str | None = None
        self._stopped = False  # a stop_reason was seen: no block may start or change

    @property
    def response_id(self) -> str | None:
        return self._response_id

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one SSE message of a streamed message."""
        if message.event == "error":
            return [StreamError("error")]
        obj = load_object(message.data)
        kind = obj.get("type")
        if not isinstance(kind, str) or message.event not in ("", "message", kind):
            raise WireFault(R.MALFORMED_EVENT)
        if kind in CONTENT_EVENTS and self._response_id is None:
            raise WireFault(R.MALFORMED_EVENT)  # content before message_start
        if kind in BLOCK_EVENTS and self._stopped:
            raise WireFault(R.EVENT_AFTER_TERMINAL)  # a block after the stop_reason
        if kind == "content_block_delta":
            return self._delta(_index(obj), _block(obj, "delta"))
        if kind == "content_block_start":
            return self._start(_index(obj), _block(obj, "content_block"), streamed=True)
        if kind == "content_block_stop":
            return self._stop(_index(obj))
        if kind == "message_delta":
            return self._message_delta(obj)
        if kind == "message_stop":
            if self._response_id is None:
                raise WireFault(R.MALFORMED_EVENT)
            return [DoneMarker()]
        if kind == "message_start":
            return self._message_start(obj.get("message"), streamed=True)
        if kind == "ping":
            return [Metadata()]
        if kind == "error":
            return [StreamError(_error_type(obj))]
        return [Unknown(kind[:64])]

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole non-streamed message body: every stage is in the one object."""
        obj = load_strict(data)
        if obj.get("type") == "error" or obj.get("error") is not None:
            return [StreamError(_error_type(obj))]
        if obj.get("type") != "message":
            raise WireFault(R.MALFORMED_EVENT)
        events = self._message_start(obj, streamed=False)
        content = obj.get("content")
        if not isinstance(content, list):
            raise WireFault(R.MALFORMED_EVENT)
        for index, block in enumerate(content):
            if not isinstance(block, dict) or not isinstance(block.get("type"), str):
                raise WireFault(R.MALFORMED_EVENT)
            events.extend(self._start(index, block, streamed=False))
            events.extend(self._stop(index))
        stop_reason = obj.get("stop_reason")
        if stop_reason is not None:
            events.append(self._finish(stop_reason))
        # Without a stop_reason the end marker below finds no finish: missing_finish.
        return [*events, DoneMarker()]

    # ---- message ---------------------------------------------------------------------------
    def _message_start(self, message: object, *, streamed: bool) -> list[WireEvent]:
        if not isinstance(message, dict):
            raise WireFault(R.MALFORMED_EVENT)
        if self._response_id is not None:
            raise WireFault(R.SPLICED_RESPONSE)
        message_id = message.get("id")
        if not isinstance(message_id, str) or not message_id:
            raise WireFault(R.MALFORMED_EVENT)
        # A streamed message starts empty: content here is a block no event announced.
        if streamed and message.get("content") not in (None, []):
            raise WireFault(R.MALFORMED_EVENT)
        self._response_id = message_id
        return [ResponseStarted(message_id)]

    def _message_delta(self, obj: Mapping[str, Any]) -> list[WireEvent]:
        if self._open:
            raise WireFault(R.INCOMPLETE_ITEM, min(self._open))
        delta = obj.get("delta")
        if not isinstance(delta, dict):
            raise WireFault(R.MALFORMED_EVENT)
        stop_reason = delta.get("stop_reason")
        if stop_reason is None:
            return [Metadata()]  # usage only
        self._stopped = True
        return [self._finish(stop_reason)]

    @staticmethod
    def _finish(stop_reason: object) -> Finish:
        if not isinstance(stop_reason, str) or not stop_reason:
            raise WireFault(R.MALFORMED_EVENT)
        return Finish(0, stop_reason[:32])

    # ---- blocks ----------------------------------------------------------------------------
    def _start(self, index: int, block: Mapping[str, Any], *, streamed: bool) -> list[WireEvent]:
        if index in self._kinds:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        kind: str = block["type"]
        if kind != TOOL_USE and kind not in PASSING_BLOCKS:
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        self._kinds[index] = kind
        self._open.add(index)
        if kind == "text":
            text = block.get("text")
            if text is not None and not isinstance(text, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            return [TextDelta(0, text)] if text else [Metadata()]
        if kind != TOOL_USE:
            return [Metadata()]
        call_id, name, value = block.get("id"), block.get("name"), block.get("input")
        for field in (call_id, name):
            if field is not None and not isinstance(field, str):
                raise WireFault(R.MALFORMED_EVENT, index)
        if not call_id or not name:
            raise WireFault(R.MISSING_CALL_IDENTITY, index)
        if call_id in self._ids:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        if not isinstance(value, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        if value and streamed:
            # The API streams a tool's input as deltas and starts it as {}. A start input
            # is a second source the API does not document, and litellm's chat translation
            # drops it (its caller would run a call other than the one checked): refused.
            raise WireFault(R.ITEM_MISMATCH, index)
        self._ids.add(call_id)
        self._start_input[index] = _serialize(value) if value else "{}"
        return [CallStarted(0, index, call_id, name)]

    def _delta(self, index: int, delta: Mapping[str, Any]) -> list[WireEvent]:
        if index not in self._open:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        block_kind = self._kinds[index]
        delta_kind: str = delta["type"]
        owner = DELTA_OWNERS.get(delta_kind)
        if owner is None:
            if block_kind == TOOL_USE:
                raise WireFault(R.MALFORMED_EVENT, index)
            return [Unknown(delta_kind[:64])]
        # redacted_thinking takes no delta at all.
        if owner != block_kind:
            raise WireFault(R.MALFORMED_EVENT, index)
        if delta_kind == "input_json_delta":
            fragment = delta.get("partial_json")
            if not isinstance(fragment, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            if not fragment:
                return [Metadata()]
            self._streamed.add(index)
            return [ArgumentDelta(0, index, fragment)]
        if delta_kind == "text_delta":
            text = delta.get("text")
            if not isinstance(text, str):
                raise WireFault(R.MALFORMED_EVENT, index)
            return [TextDelta(0, text)] if text else [Metadata()]
        return [Metadata()]

    def _stop(self, index: int) -> list[WireEvent]:
        if index not in self._open:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._open.discard(index)
        if self._kinds[index] != TOOL_USE:
            return [Metadata()]
        if index in self._streamed:
            return [BlockStop(index, from_start=False)]
        # No delta carried text: the arguments are the start block's input.
        return [ArgumentDelta(0, index, self._start_input[index]), BlockStop(index, True)]


def _error_type(obj: Mapping[str, Any]) -> str:
    error = obj.get("error")
    kind = error.get("type") if isinstance(error, dict) else None
    return kind[:64] if isinstance(kind, str) and kind else "error"


# ---- the wire's answers to the core ----------------------------------------------------------
class AnthropicWire(WireSpec):
    """The Anthropic Messages wire (see :class:`~.base.WireSpec`): read by event name, its
    live rule learns each block's type from its start, its finish is :func:`stop_reason_fault`.
    """

    named = True

    def normalizer(self, profile: Profile) -> AnthropicNormalizer:
        return AnthropicNormalizer()

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        return stop_reason_fault(finish_reason, calls)

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "responses":
            # The Responses API, bridged by litellm to chat over this wire (Claude on
            # vertex_ai/): it keeps each block's id as its function-call item's call_id.
            return bridged_responses_fault(ledger, carrier, COMPLETE_STOPS)
        return verdict(_carrier_matches(ledger, carrier))

    def live_rule(self) -> LiveRule:
        # Stateful: a block's type is learnt from its start, seen only while nothing is held.
        return EventClassifier()


def _carrier_matches(ledger: LedgerView, carrier: Carrier) -> bool:
    """litellm's chat chunks (or its Anthropic events) against an Anthropic wire.

    Chat chunks number the tool calls 0, 1, ... in block order and say ``tool_calls``;
    Anthropic events keep the block indices and the ``stop_reason``. A call whose
    arguments were its start block's ``input`` shows no argument text in litellm's
    chunks (it drops the start input), or the same object re-serialized.
    """
    calls = ledger.ordered()
    if carrier.kind == "chat":
        if (carrier.finish_reason == "tool_calls") != bool(calls):
            return False
        theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    elif carrier.kind == "anthropic":
        if carrier.finish_reason != ledger.finish_reason or set(carrier.calls) != set(ledger.calls):
            return False
        theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    else:
        return False  # Responses events are another rule's (AnthropicWire.carrier_fault)
    if carrier.foreign or len(theirs) != len(calls):
        return False
    for ours, their in zip(calls, theirs, strict=True):
        if (their.call_id, their.name) != (ours.call_id, ours.name):
            return False
        if holds(ours, their.arguments):
            if carrier.kind == "chat":
                ours.adopt(their.arguments)  # litellm's copy: what its chunk will show
            continue
        shown_none = their.arguments == "" and carrier.kind == "chat"
        if ours.index not in ledger.from_start or not (
            shown_none or same_json(their.arguments, ours.join())
        ):
            return False
    return True


WIRE = AnthropicWire(Wire.ANTHROPIC)
