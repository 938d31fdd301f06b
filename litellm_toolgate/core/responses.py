"""Responses wire → the gate's event vocabulary.

Input is one decoded SSE message of a streamed Responses call (``event: <type>`` +
``data: {...}``), or a whole ``stream=False`` response body; output is a list of
:mod:`events`. Output items are keyed by ``output_index``; this module pins, per index, the
item's type and, for a function call, its ``id``, ``call_id`` and ``name``. It checks what
the *shape* of the protocol guarantees:

* Every data line is a JSON object whose ``type`` names the event (and equals the SSE
  ``event`` field when one is given). ``data: [DONE]`` is the optional end marker; an SSE
  ``event: error`` is an error whatever its data.
* ``output_item.added`` opens an index once. A ``function_call`` item must carry a non-empty
  ``id``, ``call_id`` and ``name`` (``missing_call_identity``); neither its id nor its call id
  may already belong to another item. ``message`` and ``reasoning`` items pass (reasoning,
  ``encrypted_content`` included, is never looked into); any other item type is a tool the
  gate cannot gate (``unsupported_tool_type``).
* ``function_call_arguments.delta`` / ``.done`` and ``output_item.done`` must name an index
  this stream opened as a function call, with the same item id; ``output_item.done`` must
  repeat the pinned ``id``, ``call_id`` and ``name``. Anything else is an unknown or changed
  item (``identity_conflict``).
* ``error`` and ``response.failed`` are in-stream errors; ``response.incomplete``, or a
  final response whose status is not ``completed``, is an incomplete response; refusal
  events and refusal content parts are refusals. A later event naming another response id
  is a spliced response.

What this module cannot know (whether ``.done`` repeats the accumulated arguments, whether
``response.completed`` lists exactly the streamed calls) the ledger checks against its
accumulators. Faults are raised as :class:`WireFault`: a reason, never message text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .chat import WireFault, load_object
from .errors import QuarantineReason
from .events import (
    ArgumentDelta,
    ArgumentsDone,
    CallStarted,
    CompletedCall,
    DoneMarker,
    ItemDone,
    Metadata,
    ResponseCompleted,
    ResponseIncomplete,
    ResponseStarted,
    StreamError,
    TextDelta,
    Unknown,
    WireEvent,
)
from .sse import SSEMessage

R = QuarantineReason

_PASSING_ITEMS = frozenset({"message", "reasoning"})
_REFUSALS = frozenset({"response.refusal.delta", "response.refusal.done"})
_ANNOUNCE = frozenset({"response.created", "response.in_progress", "response.queued"})
# Events about text and reasoning that carry nothing the gate acts on.
_QUIET = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    }
)


def _text(value: object) -> str | None:
    """A string field, or None when absent; any other type is malformed."""
    if value is None or isinstance(value, str):
        return value
    raise WireFault(R.MALFORMED_EVENT)


def _check_message(item: Mapping[str, Any]) -> None:
    content = item.get("content") or []
    if not isinstance(content, list):
        raise WireFault(R.MALFORMED_EVENT)
    if any(isinstance(part, dict) and part.get("type") == "refusal" for part in content):
        raise WireFault(R.REFUSAL)


class ResponsesNormalizer:
    """Normalizes one Responses response; keeps the pinned item identities."""

    def __init__(self) -> None:
        self._kinds: dict[int, str] = {}
        self._identity: dict[int, tuple[str, str, str]] = {}
        self._taken: set[str] = set()
        self._response_id: str | None = None

    @property
    def response_id(self) -> str | None:
        return self._response_id

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one SSE message of a streamed response."""
        if message.event == "error":
            # An upstream error is an error whatever its data looks like, even ``[DONE]``:
            # read as the end marker, it would end a completed stream cleanly.
            return [StreamError("error")]
        if message.data == "[DONE]":
            return [DoneMarker()]
        obj = load_object(message.data)
        kind = obj.get("type")
        if not isinstance(kind, str) or message.event not in ("", "message", kind):
            raise WireFault(R.MALFORMED_EVENT)
        return self._event(kind, obj)

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole non-streamed response body: every stage is in the one object."""
        obj = load_object(data)
        if obj.get("error") is not None:
            return [StreamError("error")]
        events = self._response(obj)
        output = obj.get("output")
        if not isinstance(output, list):
            raise WireFault(R.MALFORMED_EVENT)
        for index, item in enumerate(output):
            events.extend(self._added(index, item))
            if self._kinds[index] == "function_call":
                # A whole body has no deltas: its item's arguments are all there is.
                arguments = item.get("arguments")
                if not isinstance(arguments, str):
                    raise WireFault(R.MALFORMED_EVENT, index)
                events.append(ArgumentsDone(index, arguments))
            events.extend(self._item_done(index, item))
        return [*events, self._final(obj)]

    # ---- events ----------------------------------------------------------------------------
    def _event(self, kind: str, obj: Mapping[str, Any]) -> list[WireEvent]:
        if kind in _ANNOUNCE:
            return self._response(obj.get("response"))
        if kind == "response.output_item.added":
            return self._added(self._index(obj), obj.get("item"))
        if kind == "response.function_call_arguments.delta":
            index = self._call_index(obj)
            return [ArgumentDelta(0, index, _text(obj.get("delta")) or "")]
        if kind == "response.function_call_arguments.done":
            index = self._call_index(obj)
            return [ArgumentsDone(index, _text(obj.get("arguments")) or "")]
        if kind == "response.output_item.done":
            return self._item_done(self._index(obj), obj.get("item"))
        if kind == "response.output_text.delta":
            text = _text(obj.get("delta"))
            return [TextDelta(0, text)] if text else [Metadata()]
        if kind == "response.completed":
            response = obj.get("response")
            return [*self._response(response), self._final(response)]
        if kind == "response.incomplete":
            return [*self._response(obj.get("response")), ResponseIncomplete("incomplete")]
        if kind in ("error", "response.failed"):
            return [StreamError(kind)]
        if kind in _REFUSALS:
            raise WireFault(R.REFUSAL)
        if kind in _QUIET:
            return [Metadata()]
        return [Unknown(kind[:64])]

    def _response(self, response: object) -> list[WireEvent]:
        if not isinstance(response, dict):
            raise WireFault(R.MALFORMED_EVENT)
        response_id = _text(response.get("id"))
        if not response_id:
            return [Metadata()]
        if self._response_id is None:
            self._response_id = response_id
            return [ResponseStarted(response_id)]
        if response_id != self._response_id:
            raise WireFault(R.SPLICED_RESPONSE)
        return [Metadata()]

    def _final(self, response: Any) -> WireEvent:
        # ``response`` passed :meth:`_response`: it is a JSON object.
        status = response.get("status")
        if status != "completed":
            return ResponseIncomplete(str(status)[:32])
        output = response.get("output")
        if not isinstance(output, list):
            raise WireFault(R.MALFORMED_EVENT)
        calls: list[CompletedCall] = []
        for item in output:
            kind = self._item_kind(item)
            if kind == "function_call":
                calls.append(
                    CompletedCall(
                        _text(item.get("id")),
                        _text(item.get("call_id")),
                        _text(item.get("name")),
                        _text(item.get("arguments")),
                    )
                )
        return ResponseCompleted(tuple(calls))

    # ---- items -----------------------------------------------------------------------------
    @staticmethod
    def _index(obj: Mapping[str, Any]) -> int:
        index = obj.get("output_index")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise WireFault(R.INVALID_CALL_INDEX)
        return index

    @staticmethod
    def _item_kind(item: object) -> str:
        """The item's type; refusals and tools the gate cannot gate are faults."""
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise WireFault(R.MALFORMED_EVENT)
        kind: str = item["type"]
        if kind == "message":
            _check_message(item)
        elif kind != "function_call" and kind not in _PASSING_ITEMS:
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE)
        return kind

    def _added(self, index: int, item: object) -> list[WireEvent]:
        kind = self._item_kind(item)
        assert isinstance(item, dict)
        if index in self._kinds:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._kinds[index] = kind
        if kind != "function_call":
            return [Metadata()]
        item_id, call_id, name = (_text(item.get(k)) for k in ("id", "call_id", "name"))
        if not item_id or not call_id or not name:
            raise WireFault(R.MISSING_CALL_IDENTITY, index)
        if item_id in self._taken or call_id in self._taken:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._taken.update((item_id, call_id))
        self._identity[index] = (item_id, call_id, name)
        events: list[WireEvent] = [CallStarted(0, index, call_id, name, item_id)]
        arguments = _text(item.get("arguments"))
        if arguments:
            events.append(ArgumentDelta(0, index, arguments))
        return events

    def _call_index(self, obj: Mapping[str, Any]) -> int:
        """The index of the function-call item an arguments event names, checked."""
        index = self._index(obj)
        pinned = self._identity.get(index)
        if pinned is None or obj.get("item_id") != pinned[0]:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        return index

    def _item_done(self, index: int, item: object) -> list[WireEvent]:
        kind = self._item_kind(item)
        assert isinstance(item, dict)
        if self._kinds.get(index) != kind:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        if kind != "function_call":
            return [Metadata()]
        if item.get("status") not in (None, "completed"):
            raise WireFault(R.INCOMPLETE_ITEM, index)
        identity = tuple(_text(item.get(k)) for k in ("id", "call_id", "name"))
        if identity != self._identity[index]:
            raise WireFault(R.ITEM_MISMATCH, index)
        return [ItemDone(index, _text(item.get("arguments")))]
