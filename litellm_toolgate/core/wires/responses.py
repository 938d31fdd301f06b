"""The Responses wire: what each event is, where calls hide, and the normalizer that reads
the wire's events into the gate's.

The item taxonomy (what each output item type is, who runs it, what its input must be)
is ``core/wires/responses_items.py``; this module reads the events that carry the items.

:func:`classify` is the one classification of a Responses event, used by the normalizer
(:class:`ResponsesNormalizer`, below), the withholding client and the Responses carrier
alike, and :func:`passes_live` is the one rule for what may reach the caller before the
decision. :func:`hidden_items` names every place outside ``output_item.added``/``.done`` and
the completed listing where an item can appear (a lifecycle event's ``response`` snapshot,
an unknown event's ``item`` or ``response``): a tool item there is a fault.

The normalizer's input is one decoded SSE message of a streamed Responses call
(``event: <type>`` + ``data: {...}``), or a whole ``stream=False`` response body; its output
is a list of :mod:`events`. Output items are keyed by ``output_index``; the normalizer pins,
per index, the item's type and, for a function call, its ``id``, ``call_id`` and ``name``.
It checks what the *shape* of the protocol guarantees:

* Every data line is a JSON object whose ``type`` names the event (and equals the SSE
  ``event`` field when one is given). ``data: [DONE]`` is the optional end marker; an SSE
  ``event: error`` is an error whatever its data.
* ``output_item.added`` opens an index once. What an item is comes from the one taxonomy
  (:data:`ITEMS`): a client item (``function_call``, ``custom_tool_call``, the shell, patch
  and computer calls) must carry a non-empty ``id``, ``call_id`` and name
  (``missing_call_identity``), a server report (a hosted tool the upstream ran) its ``id``;
  no id may already belong to another item. Items that are no tool (``message``,
  ``reasoning``, ``compaction``...) pass, never looked into; an item type the taxonomy does
  not know is ``unsupported_tool_type``.
* Argument (or custom input) deltas and ``.done`` and ``output_item.done`` must name an
  index this stream opened as that kind of item, with the same item id;
  ``output_item.done`` must repeat the pinned ids and name. Anything else is an unknown or
  changed item (``identity_conflict``). A structured item (shell, patch, computer, or a
  server report) has no deltas: its ``output_item.done`` carries its whole input, which the
  completed listing must repeat exactly.
* Every stage's own status must agree: a client item that is not ``completed`` at
  ``output_item.done`` or in the completed listing is ``incomplete_item``.
* Calls hide nowhere else: a tool item inside a lifecycle event's ``response`` snapshot or
  inside an unknown event is ``item_mismatch`` (:func:`hidden_items`).
* Programmatic tool calling is the protocol's own (openai-python
  ``types/responses/response_function_tool_call.py``: ``caller`` is ``{"type": "program",
  "caller_id": ...}``; ``response_output_item.py``: ``program`` and ``program_output``): a
  call a program made may be ``in_progress`` at ``output_item.done``, because the program that
  waits on it has not ended; ``response.completed`` is its terminal and must list it
  ``completed``, or ``in_progress`` while the listed program that made it has no
  ``program_output``. On every route: the item says who made it, the route does not.
* What a route really sends, where it departs from the above, is its profile's business
  (``core/decision/profiles.py``): arguments only in ``.done``, a rotating response id.
* ``error`` and ``response.failed`` are in-stream errors; ``response.incomplete``, or a
  final response whose status is not ``completed``, is an incomplete response; refusal
  events and refusal content parts are refusals. A later event naming another response id
  is a spliced response.

What the normalizer cannot know (whether ``.done`` repeats the accumulated arguments,
whether ``response.completed`` lists exactly the streamed calls) the ledger checks against
its accumulators. Faults are raised as :class:`WireFault` (``core/wires/loads.py``): a
reason, never message text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..decision.carrier import Carrier
from ..decision.events import (
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
from ..decision.profiles import STRICT, Deviation, Profile
from ..decision.state import Wire
from ..enums import IdentityEnum
from ..errors import QuarantineReason
from ..framing.sse import SSEMessage
from ..values.strictjson import ArgumentsError, parse_arguments
from .base import (
    LedgerView,
    LiveRule,
    WireSpec,
    bridged_anthropic_matches,
    chat_carrier_matches,
    holds,
    stateless,
    verdict,
)
from .loads import WireFault, load_object
from .responses_items import (
    INPUT_FIELDS,
    ITEMS,
    PASSING_ITEMS,
    SERVER_EXECUTION,
    Executor,
    Input,
    ItemRule,
)

if TYPE_CHECKING:
    from ..decision.call import CallAccumulator

R = QuarantineReason


# ---- events ----------------------------------------------------------------------------------
class Kind(IdentityEnum):
    """What a Responses event is, for everyone who reads the wire."""

    LIFECYCLE = "lifecycle"  # created, in_progress, queued: a snapshot of the response
    TEXT = "text"  # output_text.delta
    QUIET = "quiet"  # text and reasoning parts: nothing the gate acts on
    ITEM_ADDED = "item_added"
    ITEM_DONE = "item_done"
    ARGUMENTS = "arguments"  # function_call_arguments.delta / custom_tool_call_input.delta
    ARGUMENTS_DONE = "arguments_done"  # their .done
    PROGRESS = "progress"  # another event of a gated item (a hosted tool's progress)
    REFUSAL = "refusal"
    COMPLETED = "completed"
    INCOMPLETE = "incomplete"
    ERROR = "error"  # error, response.failed
    UNKNOWN = "unknown"


LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.queued"})
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
_FIXED: Mapping[str, Kind] = {
    **dict.fromkeys(LIFECYCLE, Kind.LIFECYCLE),
    **dict.fromkeys(_QUIET, Kind.QUIET),
    "response.output_text.delta": Kind.TEXT,
    "response.output_item.added": Kind.ITEM_ADDED,
    "response.output_item.done": Kind.ITEM_DONE,
    "response.function_call_arguments.delta": Kind.ARGUMENTS,
    "response.function_call_arguments.done": Kind.ARGUMENTS_DONE,
    "response.custom_tool_call_input.delta": Kind.ARGUMENTS,
    "response.custom_tool_call_input.done": Kind.ARGUMENTS_DONE,
    "response.refusal.delta": Kind.REFUSAL,
    "response.refusal.done": Kind.REFUSAL,
    "response.completed": Kind.COMPLETED,
    "response.incomplete": Kind.INCOMPLETE,
    "response.failed": Kind.ERROR,
    "error": Kind.ERROR,
}
_PROGRESS = tuple(p for r in ITEMS.values() for p in r.events)

FINAL_KINDS = frozenset({Kind.COMPLETED, Kind.INCOMPLETE, Kind.ERROR})
"""The kinds of event that end a response: it and everything after it is held."""


def classify(kind: str) -> Kind:
    """The one answer to what an event of this ``type`` is."""
    fixed = _FIXED.get(kind)
    if fixed is not None:
        return fixed
    if kind.startswith(_PROGRESS):
        return Kind.PROGRESS
    return Kind.UNKNOWN


def item_type(item: object) -> str | None:
    """An item's ``type`` (a dict or a litellm object), or None."""
    kind = item.get("type") if isinstance(item, Mapping) else getattr(item, "type", None)
    kind = getattr(kind, "value", kind)
    return kind if isinstance(kind, str) else None


def _field(obj: object, name: str) -> Any:
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def hidden_items(event: object) -> list[object]:
    """Items an event carries outside the places the gate reads them from.

    ``output_item.added``/``.done`` carry their ``item`` and ``response.completed`` its
    listing: those are read and checked. Every other event's ``item`` and ``response.output``
    (lifecycle snapshots, unknown events, ``response.incomplete``/``.failed``) are places
    where litellm would find an item too, so they are returned here to be checked.
    """
    kind = _field(event, "type")
    kind = getattr(kind, "value", kind)
    if kind in ("response.output_item.added", "response.output_item.done", "response.completed"):
        return []
    found: list[object] = []
    item = _field(event, "item")
    if item is not None:
        found.append(item)
    response = _field(event, "response")
    output = _field(response, "output") if response is not None else None
    if isinstance(output, list | tuple):
        found.extend(output)
    return found


def hides_a_call(event: object) -> bool:
    """Whether an event carries, in a hiding place, any item that is not a plain passing one."""
    return any(item_type(item) not in PASSING_ITEMS for item in hidden_items(event))


def passes_live(event: object) -> bool:
    """Whether an event may reach the caller before the gate decided (text, lifecycle, quiet).

    Everything else (a gated item's events, refusals, the terminal, unknown events, and any
    event with an item hidden in it) is held until the decision.
    """
    kind = _field(event, "type")
    kind = getattr(kind, "value", kind)
    if not isinstance(kind, str):
        return False
    what = classify(kind)
    if what in (Kind.ITEM_ADDED, Kind.ITEM_DONE):
        return item_type(_field(event, "item")) in PASSING_ITEMS
    if what not in (Kind.LIFECYCLE, Kind.TEXT, Kind.QUIET):
        return False
    return not hides_a_call(event)


# ---- the normalizer --------------------------------------------------------------------------
_TEXT_INPUTS = (Input.JSON_ARGUMENTS, Input.FREE_TEXT)
# The delta/.done events of each text-input item type.
_INPUT_EVENTS = {
    "function_call": "response.function_call_arguments.",
    "custom_tool_call": "response.custom_tool_call_input.",
}


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


def _canonical(value: object) -> str:
    """One text for a structured input, so every stage can be compared byte for byte."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# How deep a report's JSON text may nest (the gate's default ``max_json_depth``).
_REPORT_DEPTH = 64


def _payload(kind: str, item: Mapping[str, Any], index: int | None = None) -> str:
    """The input text of an item without deltas: its input field, or a report's own fields.

    A report whose rule names a ``field`` (``mcp_approval_request.arguments``) holds JSON
    text the client's decision is about: it must be exactly one strict JSON object
    (``core/values/strictjson.py``, its reason otherwise), and the payload holds it parsed.
    """
    rule = ITEMS[kind]
    if rule.executor is Executor.SERVER:
        fields = {k: v for k, v in item.items() if k != "status"}
        if rule.field is not None:
            fields[rule.field] = _strict_object(item.get(rule.field), index)
        return _canonical(fields)
    if rule.field is None:
        return _canonical({k: item[k] for k in INPUT_FIELDS[kind] if k in item})
    return _canonical(item.get(rule.field))


def _strict_object(text: object, index: int | None) -> dict[str, Any]:
    if not isinstance(text, str):
        raise WireFault(R.MALFORMED_EVENT, index)
    reason: QuarantineReason | None = None
    try:
        value = parse_arguments(text, max_depth=_REPORT_DEPTH)
    except ArgumentsError as err:
        reason = err.reason  # raised outside the handler: no chain to the text
    if reason is not None:
        raise WireFault(reason, index)
    return value


def _caller_id(item: Mapping[str, Any]) -> str | None:
    """The program call id a call made by a program names (``caller.caller_id``)."""
    caller = item.get("caller")
    if isinstance(caller, dict) and caller.get("type") == "program":
        found = caller.get("caller_id")
        return found if isinstance(found, str) and found else None
    return None


def _waiting_programs(output: list[Any]) -> frozenset[str]:
    """The call ids of the ``program`` items a listing holds that have not ended: no
    ``program_output`` with that call id is listed, and the program's own status (when it
    has one) is ``in_progress``. Programmatic tool calling: a program's function calls stay
    ``in_progress`` until the program ends, which is after the client answered them, in a
    later response (openai-python ``response_input_item.py``: ``program`` has ``call_id``,
    ``program_output`` the ``call_id`` of its program; a call's ``caller`` is
    ``{"type": "program", "caller_id": <that call id>}``)."""
    programs: set[str] = set()
    ended: set[str] = set()
    for item in output:
        if not isinstance(item, dict):
            continue
        call_id = item.get("call_id")
        if not isinstance(call_id, str) or not call_id:
            continue
        if item.get("type") == "program" and item.get("status") in (None, "in_progress"):
            programs.add(call_id)
        elif item.get("type") in ("program", "program_output"):
            ended.add(call_id)
    return frozenset(programs - ended)


def _status(rule: ItemRule, item: Mapping[str, Any]) -> Any:
    """An item's status as its type knows it: a type without a status (a custom tool call,
    openai-python ``response_custom_tool_call.py``) is finished by its events, so an
    ``in_progress`` it carries anyway counts as none."""
    status = item.get("status")
    return None if status == "in_progress" and not rule.has_status else status


def _by_program(item: Mapping[str, Any]) -> bool:
    caller = item.get("caller")
    return isinstance(caller, dict) and caller.get("type") == "program"


class ResponsesNormalizer:
    """Normalizes one Responses response; keeps the pinned item identities."""

    def __init__(self, profile: Profile = STRICT) -> None:
        self._profile = profile
        self._kinds: dict[int, str] = {}
        self._identity: dict[int, tuple[str, str, str]] = {}
        self._taken: set[str] = set()
        self._streamed: set[int] = set()
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
            rule = ITEMS[self._kinds[index]]
            if rule.input in _TEXT_INPUTS:
                # A whole body has no deltas: its item's input is all there is.
                text = item.get(rule.field)
                if not isinstance(text, str):
                    raise WireFault(R.MALFORMED_EVENT, index)
                events.append(ArgumentsDone(index, text))
            events.extend(self._item_done(index, item))
        return [*events, self._final(obj)]

    # ---- events ----------------------------------------------------------------------------
    def _event(self, kind: str, obj: Mapping[str, Any]) -> list[WireEvent]:
        what = classify(kind)
        if what not in (Kind.INCOMPLETE, Kind.ERROR) and hides_a_call(obj):
            # A tool item where the gate does not read items (a lifecycle snapshot, an
            # unknown event): litellm would hand it to the caller, so it is a fault.
            raise WireFault(R.ITEM_MISMATCH)
        if what is Kind.LIFECYCLE:
            return self._response(obj.get("response"))
        if what is Kind.ITEM_ADDED:
            return self._added(self._index(obj), obj.get("item"))
        if what is Kind.ARGUMENTS:
            index = self._input_index(kind, obj)
            self._streamed.add(index)
            return [ArgumentDelta(0, index, _text(obj.get("delta")) or "")]
        if what is Kind.ARGUMENTS_DONE:
            return self._input_done(kind, obj)
        if what is Kind.ITEM_DONE:
            return self._item_done(self._index(obj), obj.get("item"))
        if what is Kind.TEXT:
            text = _text(obj.get("delta"))
            return [TextDelta(0, text)] if text else [Metadata()]
        if what is Kind.COMPLETED:
            response = obj.get("response")
            return [*self._response(response), self._final(response)]
        if what is Kind.INCOMPLETE:
            return [*self._response(obj.get("response")), ResponseIncomplete("incomplete")]
        if what is Kind.ERROR:
            return [StreamError(kind)]
        if what is Kind.REFUSAL:
            raise WireFault(R.REFUSAL)
        if what in (Kind.QUIET, Kind.PROGRESS):
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
        if response_id != self._response_id and not self._profile.accepts(
            Deviation.ROTATING_RESPONSE_ID
        ):
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
        waiting = _waiting_programs(output)
        for item in output:
            kind = self._item_kind(item)
            rule = ITEMS[kind]
            if rule.executor is Executor.NOBODY:
                continue
            item_status = _status(rule, item)
            if (
                rule.executor is Executor.CLIENT
                and item_status not in (None, "completed")
                and not (item_status == "in_progress" and _caller_id(item) in waiting)
            ):
                # A completed response cannot list a call that did not complete, unless it
                # is a call its listed program still waits on (programmatic tool calling).
                raise WireFault(R.INCOMPLETE_ITEM)
            if rule.settled and item_status != "completed":
                raise WireFault(R.INCOMPLETE_ITEM)
            if rule.input in _TEXT_INPUTS:
                text = _text(item.get(rule.field))
            else:
                text = _payload(kind, item)
            item_id, call_id, name = self._identity_of(kind, item)
            calls.append(CompletedCall(item_id, call_id, name, text, item_status))
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
        """The item's type; refusals and item types the taxonomy does not know are faults."""
        if not isinstance(item, dict) or not isinstance(item.get("type"), str):
            raise WireFault(R.MALFORMED_EVENT)
        kind: str = item["type"]
        if kind == "message":
            _check_message(item)
        elif kind not in ITEMS or (kind in SERVER_EXECUTION and item.get("execution") != "server"):
            # A type the taxonomy does not know, or a tool search the client is to run.
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE)
        return kind

    @staticmethod
    def _identity_of(kind: str, item: Mapping[str, Any]) -> tuple[str | None, ...]:
        """(item id, call id, name) as this kind of item carries them."""
        rule = ITEMS[kind]
        item_id = _text(item.get("id"))
        call_id = _text(item.get("call_id")) if rule.executor is Executor.CLIENT else item_id
        name = _text(item.get("name")) if rule.input in _TEXT_INPUTS else rule.tool
        return item_id, call_id, name

    def _added(self, index: int, item: object) -> list[WireEvent]:
        kind = self._item_kind(item)
        assert isinstance(item, dict)
        if index in self._kinds:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._kinds[index] = kind
        rule = ITEMS[kind]
        if rule.executor is Executor.NOBODY:
            return [Metadata()]
        item_id, call_id, name = self._identity_of(kind, item)
        if not item_id or not call_id or not name:
            raise WireFault(R.MISSING_CALL_IDENTITY, index)
        if item_id in self._taken or call_id in self._taken:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        self._taken.update((item_id, call_id))
        self._identity[index] = (item_id, call_id, name)
        events: list[WireEvent] = [CallStarted(0, index, call_id, name, item_id, kind)]
        if rule.input in _TEXT_INPUTS:
            initial = _text(item.get(rule.field))
            if initial:
                self._streamed.add(index)
                events.append(ArgumentDelta(0, index, initial))
        return events

    def _input_index(self, event_kind: str, obj: Mapping[str, Any]) -> int:
        """The index of the item an input event names, checked against its pinned kind."""
        index = self._index(obj)
        pinned = self._identity.get(index)
        family = _INPUT_EVENTS.get(self._kinds.get(index, ""))
        if (
            pinned is None
            or family is None
            or not event_kind.startswith(family)
            or obj.get("item_id") != pinned[0]
        ):
            raise WireFault(R.IDENTITY_CONFLICT, index)
        return index

    def _input_done(self, event_kind: str, obj: Mapping[str, Any]) -> list[WireEvent]:
        index = self._input_index(event_kind, obj)
        field = ITEMS[self._kinds[index]].field or ""
        text = _text(obj.get(field)) or ""
        events: list[WireEvent] = []
        if (
            index not in self._streamed
            and text
            and self._profile.accepts(Deviation.ARGUMENTS_ONLY_IN_DONE)
        ):
            # The route sends no deltas: ``.done`` is where the arguments first appear, and
            # every later stage must still repeat them exactly.
            self._streamed.add(index)
            events.append(ArgumentDelta(0, index, text))
        events.append(ArgumentsDone(index, text))
        return events

    def _item_done(self, index: int, item: object) -> list[WireEvent]:
        kind = self._item_kind(item)
        assert isinstance(item, dict)
        if self._kinds.get(index) != kind:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        rule = ITEMS[kind]
        if rule.executor is Executor.NOBODY:
            return [Metadata()]
        status = _status(rule, item)
        # Programmatic tool calling: a call a program made stays ``in_progress`` at its
        # ``output_item.done`` (the program has not ended); the completed listing settles it,
        # and must say ``completed``, or ``in_progress`` while its program waits.
        if (
            rule.executor is Executor.CLIENT
            and status not in (None, "completed")
            and not (status == "in_progress" and _by_program(item))
        ):
            raise WireFault(R.INCOMPLETE_ITEM, index)
        if self._identity_of(kind, item) != self._identity[index]:
            raise WireFault(R.ITEM_MISMATCH, index)
        if rule.input in _TEXT_INPUTS:
            return [ItemDone(index, _text(item.get(rule.field)))]
        # No deltas: the done item holds the whole input, taken through the same stages.
        payload = _payload(kind, item, index)
        return [
            ArgumentDelta(0, index, payload),
            ArgumentsDone(index, payload),
            ItemDone(index, payload),
        ]


# ---- the wire's answers to the core ----------------------------------------------------------
def _carried(call: CallAccumulator, text: object) -> bool:
    """Whether ``text`` is the call's input as a Responses carrier shows it (a text input's
    text; ``""`` for any other input)."""
    if ITEMS[call.kind].input in _TEXT_INPUTS:
        return holds(call, text)
    return text == ""


class ResponsesWire(WireSpec):
    """The Responses wire (see :class:`~.base.WireSpec`).

    Its terminal is ``response.completed`` listing exactly the streamed items (checked by the
    ledger as the event arrives), so the finish adds nothing here. A Responses carrier over
    it shows the same items in ``output_index`` order with the same ids; structured items and
    reports carry no text input a carrier can rebuild byte for byte, so they are matched by
    their ids and name.
    """

    # litellm passes each event's items on under their own ``output_index`` and ids; every
    # event is first asked of the route's event parser (edge/parsers.py).
    reparsed = False

    def normalizer(self, profile: Profile) -> ResponsesNormalizer:
        return ResponsesNormalizer(profile)

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "anthropic":
            return verdict(bridged_anthropic_matches(ledger, carrier))
        if carrier.kind == "chat":
            return verdict(chat_carrier_matches(ledger, carrier))
        if carrier.foreign or carrier.finish_reason != "completed":
            return R.CARRIER_MISMATCH
        ours = ledger.ordered()
        theirs = [c for _, c in sorted(carrier.calls.items())]
        same = len(ours) == len(theirs) and all(
            (their.item_id, their.call_id, their.name) == (our.item_id, our.call_id, our.name)
            and _carried(our, their.arguments)
            for our, their in zip(ours, theirs, strict=True)
        )
        return verdict(same)

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


WIRE = ResponsesWire(Wire.RESPONSES)
