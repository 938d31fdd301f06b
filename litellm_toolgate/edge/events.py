"""What the caller of ``gate.responses()`` is handed: litellm's Responses events, calls withheld.

litellm yields Responses event objects on both routes (bridged from a chat wire, or parsed
from a native Responses wire). Here they are the carrier: text, reasoning (its
``encrypted_content`` included) and lifecycle events pass through as litellm made them;
every event of a function-call item (``output_item.added``, the argument deltas and
``.done``, ``output_item.done``) is withheld, and the final response event
(``response.completed``, ``.incomplete``, ``.failed``, ``error``) and anything after it is
held. While withholding, :class:`CarrierEvents` assembles each call as the carrier shows it,
keyed by ``output_index``, and notes whether the carrier contradicts itself (deltas that do
not add up to ``.done``, an item that changes, a completed output that differs from the
items). The attempt compares that assembly with the wire.

After the attempt released, the withheld events go out in their original order, then the
held ones: the caller sees each released call's whole lifecycle right before
``response.completed``. The events are litellm's own objects, unchanged: their ids, names
and arguments were just found equal to the wire's. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litellm.responses.streaming_iterator import BaseResponsesAPIStreamingIterator
from litellm.types.llms.openai import ResponsesAPIResponse

from ..core.attempt import Carrier, CarrierCall
from ..core.policy import ReleasedCall
from .carrier import response_carrier

_CALL_EVENTS = frozenset(
    {"response.function_call_arguments.delta", "response.function_call_arguments.done"}
)
_ITEM_EVENTS = frozenset({"response.output_item.added", "response.output_item.done"})
_FINAL = {
    "response.completed": None,
    "response.incomplete": "incomplete",
    "response.failed": "failed",
    "error": "error",
}
_PASSING_ITEMS = frozenset({"message", "reasoning"})


def _get(obj: Any, name: str) -> Any:
    """A field of a litellm object or of a plain dict (litellm uses both for items)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _kind(event: Any) -> str:
    kind = _get(event, "type")
    return str(getattr(kind, "value", kind))


@dataclass
class _Assembled:
    item_id: str | None
    call_id: str | None
    name: str | None
    fragments: list[str] = field(default_factory=list)
    done: bool = False

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)

    def same(self, item: Any) -> bool:
        return (
            _get(item, "id"),
            _get(item, "call_id"),
            _get(item, "name"),
            _get(item, "arguments"),
        ) == (self.item_id, self.call_id, self.name, self.arguments)


def call_of(item: Any) -> CarrierCall:
    return CarrierCall(
        _get(item, "call_id"),
        _get(item, "name"),
        _get(item, "arguments") or "",
        item_id=_get(item, "id"),
    )


def carrier_of_response(response: Any) -> Carrier:
    """The carrier of a non-streamed Responses result: its function calls and its status."""
    output = _get(response, "output") or []
    calls: dict[int, CarrierCall] = {}
    foreign = False
    for position, item in enumerate(output):
        kind = _get(item, "type")
        if kind == "function_call":
            calls[position] = call_of(item)
        elif kind not in _PASSING_ITEMS:
            foreign = True
    return Carrier(calls, _get(response, "status"), foreign=foreign, kind="responses")


class CarrierEvents:
    """Withholds function-call events and the final event; builds the release. No I/O."""

    def __init__(self) -> None:
        self.calls: dict[int, _Assembled] = {}
        self.withheld: list[Any] = []
        self.held: list[Any] = []
        self.status: str | None = None
        self.foreign = False

    def admit(self, event: Any) -> Any | None:
        """The event to pass on now, or None when it is withheld or held."""
        kind = _kind(event)
        if _get(event, "type") is None:
            # Not a Responses event at all: nothing the gate can map goes out.
            self.foreign = True
            self.held.append(event)
            return None
        if self.held or kind in _FINAL:
            self._final(kind, event)
            return None
        if kind in _CALL_EVENTS:
            self._arguments(kind, event)
        elif kind in _ITEM_EVENTS:
            item = _get(event, "item")
            item_kind = _get(item, "type")
            if item_kind in _PASSING_ITEMS:
                return event
            if item_kind != "function_call":
                # A tool the gate cannot gate (the wire check refuses it as well).
                self.foreign = True
            elif kind == "response.output_item.added":
                self._added(_get(event, "output_index"), item)
            else:
                self._item_done(_get(event, "output_index"), item)
        else:
            return event
        self.withheld.append(event)
        return None

    def _final(self, kind: str, event: Any) -> None:
        self.held.append(event)
        if self.status is not None or len(self.held) > 1:
            self.status = "<after the final event>"
            return
        status = _FINAL.get(kind)
        if status is None:
            response = _get(event, "response")
            status = _get(response, "status")
            listed = [
                item
                for item in (_get(response, "output") or [])
                if _get(item, "type") not in _PASSING_ITEMS
            ]
            ordered = [self.calls[i] for i in sorted(self.calls)]
            if len(listed) != len(ordered) or not all(
                a.done and a.same(item) for a, item in zip(ordered, listed, strict=False)
            ):
                self.foreign = True
        self.status = status

    def _added(self, index: Any, item: Any) -> None:
        if not isinstance(index, int) or index in self.calls:
            self.foreign = True
            return
        assembled = _Assembled(_get(item, "id"), _get(item, "call_id"), _get(item, "name"))
        if _get(item, "arguments"):
            assembled.fragments.append(_get(item, "arguments"))
        self.calls[index] = assembled

    def _call(self, index: Any) -> _Assembled | None:
        return self.calls.get(index) if isinstance(index, int) else None

    def _arguments(self, kind: str, event: Any) -> None:
        call = self._call(_get(event, "output_index"))
        if call is None or call.done or _get(event, "item_id") != call.item_id:
            self.foreign = True
        elif kind.endswith(".delta"):
            call.fragments.append(_get(event, "delta") or "")
        elif _get(event, "arguments") != call.arguments:
            self.foreign = True

    def _item_done(self, index: Any, item: Any) -> None:
        call = self._call(index)
        if call is None or call.done or not call.same(item):
            self.foreign = True
        else:
            call.done = True

    def carrier(self) -> Carrier:
        return Carrier(
            {
                i: CarrierCall(c.call_id, c.name, c.arguments, item_id=c.item_id)
                for i, c in self.calls.items()
            },
            self.status,
            foreign=self.foreign or not all(c.done for c in self.calls.values()),
            kind="responses",
        )

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        # The withheld events are the released calls' whole lifecycle (the attempt found
        # them equal to the wire), then the final event.
        return [*self.withheld, *self.held]


def carrier_events(stream: Any) -> CarrierEvents | None:
    """The carrier adapter a litellm stream needs: Responses events, or chat chunks (None)."""
    return CarrierEvents() if isinstance(stream, BaseResponsesAPIStreamingIterator) else None


def carrier_of_result(response: Any) -> Carrier:
    """What litellm made of a whole response, chat or Responses."""
    if isinstance(response, ResponsesAPIResponse):
        return carrier_of_response(response)
    return response_carrier(response)
