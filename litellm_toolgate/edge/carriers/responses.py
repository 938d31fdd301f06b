"""What the caller of ``gate.responses()`` is handed: litellm's Responses events, calls withheld.

litellm yields Responses event objects on both routes (bridged from a chat wire, or parsed
from a native Responses wire). Here they are the carrier: what passes live and what is
withheld is the core's one answer (``core/wires/responses.passes_live``): text, reasoning
(its ``encrypted_content`` included), items that are no tool and lifecycle events with
nothing hidden in them pass through as litellm made them; every event of a gated item (a
client call of any type, a hosted tool's report), unknown events, and the final response
event
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

from ...core.decision.attempt import Carrier, CarrierCall
from ...core.rules.policy import ReleasedCall
from ...core.wires import responses as wire
from ...core.wires.responses import Kind
from ...core.wires.responses_items import GATED_ITEMS, ITEMS, PASSING_ITEMS, Executor, Input
from ..seam.symbols import BaseResponsesAPIStreamingIterator, ResponsesAPIResponse
from .chat import response_carrier

_TEXT_INPUTS = (Input.JSON_ARGUMENTS, Input.FREE_TEXT)


def _get(obj: Any, name: str) -> Any:
    """A field of a litellm object or of a plain dict (litellm uses both for items)."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _kind(event: Any) -> str:
    kind = _get(event, "type")
    return str(getattr(kind, "value", kind))


def _identity(item: Any) -> tuple[Any, Any, Any]:
    """(item id, call id, name) of a gated item, as the core derives them."""
    rule = ITEMS[wire.item_type(item) or ""]
    item_id = _get(item, "id")
    call_id = _get(item, "call_id") if rule.executor is Executor.CLIENT else item_id
    name = _get(item, "name") if rule.input in _TEXT_INPUTS else rule.tool
    return item_id, call_id, name


def _input_text(item: Any) -> str:
    """A text-input item's input; structured items are compared by identity only."""
    rule = ITEMS[wire.item_type(item) or ""]
    return (_get(item, rule.field or "") or "") if rule.input in _TEXT_INPUTS else ""


@dataclass
class _Assembled:
    item_id: str | None
    call_id: str | None
    name: str | None
    fragments: list[str] = field(default_factory=list)
    done: bool = False
    text_input: bool = True

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)

    def same(self, item: Any) -> bool:
        mine = (self.item_id, self.call_id, self.name, self.arguments)
        return (*_identity(item), _input_text(item)) == mine


def call_of(item: Any) -> CarrierCall:
    call_id, name = _identity(item)[1:]
    return CarrierCall(call_id, name, _input_text(item), item_id=_get(item, "id"))


def carrier_of_response(response: Any) -> Carrier:
    """The carrier of a non-streamed Responses result: its gated items and its status."""
    output = _get(response, "output") or []
    calls: dict[int, CarrierCall] = {}
    foreign = False
    for position, item in enumerate(output):
        kind = wire.item_type(item)
        if kind in GATED_ITEMS:
            calls[position] = call_of(item)
        elif kind not in PASSING_ITEMS:
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
        what = wire.classify(kind)
        if self.held or what in wire.FINAL_KINDS:
            self._final(what, event)
            return None
        if wire.passes_live(event):
            return event
        if what in (Kind.ARGUMENTS, Kind.ARGUMENTS_DONE):
            self._arguments(kind, event)
        elif what in (Kind.ITEM_ADDED, Kind.ITEM_DONE):
            item = _get(event, "item")
            if wire.item_type(item) not in GATED_ITEMS:
                # A tool the gate cannot gate (the wire check refuses it as well).
                self.foreign = True
            elif what is Kind.ITEM_ADDED:
                self._added(_get(event, "output_index"), item)
            else:
                self._item_done(_get(event, "output_index"), item)
        # Anything else not passed live (a hosted tool's progress, an unknown event, an
        # event with an item hidden in it) is withheld: the wire check judges it.
        self.withheld.append(event)
        return None

    def _final(self, what: Kind, event: Any) -> None:
        self.held.append(event)
        if self.status is not None or len(self.held) > 1:
            self.status = "<after the final event>"
            return
        # Only a completed response's own status can be "completed"; the other final
        # events are named by their kind ("incomplete", "error").
        status: Any = what.value
        if what is Kind.COMPLETED:
            response = _get(event, "response")
            status = _get(response, "status")
            listed = [
                item
                for item in (_get(response, "output") or [])
                if wire.item_type(item) not in PASSING_ITEMS
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
        assembled = _Assembled(*_identity(item))
        if _input_text(item):
            assembled.fragments.append(_input_text(item))
        self.calls[index] = assembled

    def _call(self, index: Any) -> _Assembled | None:
        return self.calls.get(index) if isinstance(index, int) else None

    def _arguments(self, kind: str, event: Any) -> None:
        call = self._call(_get(event, "output_index"))
        if call is None or call.done or _get(event, "item_id") != call.item_id:
            self.foreign = True
        elif kind.endswith(".delta"):
            call.fragments.append(_get(event, "delta") or "")
        else:
            done = _get(event, "input" if "custom_tool_call" in kind else "arguments") or ""
            if not call.fragments and done:
                # Nothing streamed before ``.done``: what litellm shows is that text. Whether
                # the route may send that is the wire check's (and its profile's) answer.
                call.fragments.append(done)
            elif done != call.arguments:
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
        ordered = [self.calls[i].call_id for i in sorted(self.calls)]
        shown = wire_ids(ordered, released)
        if shown:
            for event in [*self.withheld, *self.held]:
                show_wire_ids(shown, [_get(event, "item")])
                show_wire_ids(shown, _get(_get(event, "response"), "output") or [])
        return [*self.withheld, *self.held]


def wire_ids(carried: list[Any], released: list[ReleasedCall]) -> dict[str, str]:
    """litellm's call id of each released call where litellm's bridge replaced the wire's
    (Gemini's calls sent without an id, every streamed Ollama call: the wire's rule matched
    those items to the wire by position, ``core/wires/whole.py``): the wire's identity, which
    the release shows as it does on those wires' chat chunks, so that the records, the
    journal and the caller name each call alike. Empty where the items carry the wire's own
    ids (every other route) or do not line up one to one with the released calls."""
    if len(carried) != len(released):
        return {}
    if all(c == r.call_id for c, r in zip(carried, released, strict=True)):
        return {}
    return {c: r.call_id for c, r in zip(carried, released, strict=True) if isinstance(c, str)}


def show_wire_ids(shown: dict[str, str], items: Any) -> None:
    """The function-call items among ``items`` (litellm's objects or dicts) renamed to the
    wire's call ids (:func:`wire_ids`)."""
    for item in items if isinstance(items, list) else []:
        call_id = _get(item, "call_id")
        if wire.item_type(item) != "function_call" or call_id not in shown:
            continue
        if isinstance(item, dict):
            item["call_id"] = shown[call_id]
        else:
            item.call_id = shown[call_id]


def carrier_events(stream: Any) -> CarrierEvents | None:
    """The carrier adapter a litellm stream needs: Responses events, or chat chunks (None)."""
    return CarrierEvents() if isinstance(stream, BaseResponsesAPIStreamingIterator) else None


def carrier_of_result(response: Any) -> Carrier:
    """What litellm made of a whole response, chat or Responses."""
    if isinstance(response, ResponsesAPIResponse):
        return carrier_of_response(response)
    return response_carrier(response)
