"""The calls of one attempt: wire events in, per-call accumulators and stage checks out.

The attempt moves the stream's state; the ledger does everything else an event means. Each
call has its own :class:`CallAccumulator`, keyed by its tool index (chat) or ``output_index``
(Responses), and every size limit is counted here as the bytes arrive.

On a Responses wire the ledger holds each function-call item to the protocol's own stages,
each checked against what was accumulated (the transitions are
``state.RESPONSES_CALL_TABLE``):

1. ``function_call_arguments.done`` must repeat exactly the arguments accumulated from the
   item's first ``arguments`` and its deltas (with no deltas, the accumulated text is the
   added item's, usually ``""``: arguments that appear only in ``.done`` were never streamed
   and do not match);
2. ``output_item.done`` must come after it and carry the same arguments (its ids and name
   were checked by the normalizer);
3. ``response.completed`` must find every call at that stage and list in its ``output``
   exactly the streamed calls, in ``output_index`` order, with the same item id, call id,
   name and arguments: none lost, none added, none changed.

Only then is a call ITEM_TERMINAL. On an Anthropic wire a ``tool_use`` block's
``content_block_stop`` is its one stage (``state.ANTHROPIC_CALL_TABLE``); the stream's
terminal then makes it ITEM_TERMINAL. A disagreement is ``item_mismatch``; a skipped stage
``incomplete_item``. The ledger also compares what the carrier (litellm's chunks or
Responses events) assembled with the wire: :meth:`Ledger.carrier_fault`, by the wire's own
rule (its module's :meth:`~.wires.base.WireSpec.carrier_fault`).
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import QuarantineReason
from ..wires import WIRES
from ..wires.base import holds as _holds
from ..wires.loads import WireFault
from .call import CallAccumulator
from .carrier import Carrier
from .events import (
    ArgumentDelta,
    ArgumentsDone,
    BlockStop,
    CallStarted,
    ChoiceFinish,
    Finish,
    ItemDone,
    ResponseCompleted,
    TextDelta,
    Unknown,
    WireEvent,
    slot,
)
from .limits import Limits
from .state import CallInput, CallState, Wire

# Enum members read once (a read from the class costs about 70 ns on CPython 3.11).
_ITEM_OPEN, _ITEM_TERMINAL = CallState.ITEM_OPEN, CallState.ITEM_TERMINAL
_ARGUMENTS, _TERMINAL = CallInput.ARGUMENTS, CallInput.TERMINAL

R = QuarantineReason


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


class Ledger:
    """Every call one attempt opened, and the counts its limits are checked against."""

    def __init__(self, limits: Limits, clock: Callable[[], float]) -> None:
        self.limits = limits
        self.wire = Wire.CHAT
        self.calls: dict[int, CallAccumulator] = {}
        self.finish_reason: str | None = None
        self.unknown_events = 0
        self.text_bytes = 0
        self.argument_bytes = 0
        self.identity_bytes = 0
        self.first_opened: float | None = None
        """When the earliest call opened, on the clock (None: no call yet). Kept as calls
        open, so that a decided attempt's metrics read it instead of scanning its calls."""
        self.from_start: set[int] = set()
        """Anthropic tool blocks whose arguments are their start block's ``input``."""
        self.choices = 1
        """How many chat choices the request asked for; with more than one, calls are keyed
        by :func:`slot` and ``finish_reason`` is choice 0's."""
        self.finishes: dict[int, str] = {}
        """Each choice's own ``finish_reason`` (kept only with several choices)."""
        self.first_finish: str | None = None
        """With several choices: the first ``finish_reason`` on the wire, whichever choice's."""
        self._clock = clock

    def ordered(self) -> list[CallAccumulator]:
        calls = self.calls
        if len(calls) < 2:  # most responses open one call
            return list(calls.values())
        if self.choices != 1:  # choice by choice, each in tool index order
            return sorted(calls.values(), key=lambda c: (c.choice, c.index))
        return [calls[i] for i in sorted(calls)]

    def choice_calls(self, choice: int) -> bool:
        """Whether ``choice`` opened a call."""
        return any(c.choice == choice for c in self.calls.values())

    def apply(self, event: WireEvent) -> None:
        """Feed one event the stream's state already accepted; raises :class:`WireFault`."""
        # The two events of nearly every chunk come first.
        if isinstance(event, ArgumentDelta):
            choices = self.choices
            key = event.index if choices == 1 else event.index * choices + event.choice
            self.fragment(key, event.fragment)
        elif isinstance(event, TextDelta):
            self.text(event.text)
        elif isinstance(event, CallStarted):
            key = slot(event.choice, event.index, self.choices)
            if len(self.calls) >= self.limits.max_calls:
                raise WireFault(R.TOO_MANY_CALLS, key)
            # Ids and names are held to the end too, so they count against the total:
            # otherwise max_calls ids of max_event_bytes each could be pinned.
            self.identity_bytes += _size(event.call_id) + _size(event.name)
            self.identity_bytes += _size(event.item_id or "")
            self._check_total(key)
            opened = self._clock()
            first = self.first_opened
            if first is None or opened < first:
                self.first_opened = opened
            self.calls[key] = CallAccumulator(
                event.index,
                event.call_id,
                event.name,
                opened,
                wire=self.wire,
                item_id=event.item_id,
                kind=event.kind,
                choice=event.choice,
                key=None if key == event.index else key,
            )
        elif isinstance(event, ArgumentsDone):
            self._stage(event.index, CallInput.ARGUMENTS_DONE, event.arguments)
        elif isinstance(event, ItemDone):
            self._stage(event.index, CallInput.ITEM_DONE, event.arguments)
        elif isinstance(event, BlockStop):
            call = self.calls[event.index]
            call.move(CallInput.ITEM_DONE)
            call.last_event = "content_block_stop"
            if event.from_start:
                self.from_start.add(event.index)
        elif isinstance(event, ResponseCompleted):
            self._completed(event)
        elif isinstance(event, Finish):
            if self.choices != 1:
                self._choice_finish(event.choice, event.finish_reason)
            else:
                self.finish_reason = event.finish_reason
            for c in self.calls.values():
                c.last_event = "finish"
        elif isinstance(event, ChoiceFinish):
            self._choice_finish(event.choice, event.finish_reason)
        elif isinstance(event, Unknown):
            self.unknown_events += 1

    def _choice_finish(self, choice: int, finish_reason: str) -> None:
        if not self.finishes:
            self.first_finish = finish_reason
        self.finishes[choice] = finish_reason
        if choice == 0:
            self.finish_reason = finish_reason

    def text(self, text: str) -> None:
        """:meth:`apply` of a :class:`TextDelta` of ``text``."""
        # isascii() is O(1): the common case needs no encoding to be counted.
        self.text_bytes += len(text) if text.isascii() else _size(text)
        if self.text_bytes > self.limits.max_text_bytes:
            raise WireFault(R.TEXT_TOO_LARGE)

    def fragment(self, index: int, fragment: str) -> None:
        """:meth:`apply` of an :class:`ArgumentDelta` of call ``index``."""
        call = self.calls[index]  # the normalizer opens every call first
        encoded = fragment.encode("utf-8", "surrogatepass")
        size = len(encoded)
        call.nbytes += size
        self.argument_bytes += size
        limits = self.limits
        if call.nbytes > limits.max_argument_bytes:
            raise WireFault(R.ARGUMENTS_TOO_LARGE, index)
        if self.argument_bytes + self.identity_bytes > limits.max_total_argument_bytes:
            raise WireFault(R.TOTAL_ARGUMENTS_TOO_LARGE, index)  # as _check_total, inlined
        if call.state is not _ITEM_OPEN:  # (ITEM_OPEN, ARGUMENTS) stays put
            call.move(_ARGUMENTS)
        buffer = call.buffer
        assert buffer is not None  # taken only at the terminal, after which no delta moves
        buffer.write(encoded)
        call.last_event = "argument_delta"

    def _check_total(self, index: int) -> None:
        if self.argument_bytes + self.identity_bytes > self.limits.max_total_argument_bytes:
            raise WireFault(R.TOTAL_ARGUMENTS_TOO_LARGE, index)

    def _stage(self, index: int, stage: CallInput, arguments: str | None) -> None:
        call = self.calls[index]
        call.move(stage)
        call.last_event = stage.value
        if not _holds(call, arguments):
            raise WireFault(R.ITEM_MISMATCH, index)

    def _completed(self, event: ResponseCompleted) -> None:
        self.finish_reason = "completed"
        calls = self.ordered()
        for call in calls:
            call.move(CallInput.TERMINAL)
            call.last_event = "completed"
        listed = event.calls
        if len(listed) != len(calls) or not all(
            (theirs.item_id, theirs.call_id, theirs.name) == (ours.item_id, ours.call_id, ours.name)
            and _holds(ours, theirs.arguments)
            for ours, theirs in zip(calls, listed, strict=True)
        ):
            raise WireFault(R.ITEM_MISMATCH)

    # ---- the carrier ---------------------------------------------------------------------
    def carrier_fault(self, carrier: Carrier) -> QuarantineReason | None:
        """Why the carrier disagrees with the wire, or None when it matches exactly: the
        wire's own rule (:meth:`.wires.base.WireSpec.carrier_fault`)."""
        return WIRES[self.wire].carrier_fault(self, carrier)

    def terminal(self) -> list[CallAccumulator]:
        """Move every call that is not terminal yet (chat: all of them) to ITEM_TERMINAL;
        every call, in index order."""
        calls = self.ordered()
        for call in calls:
            if call.state is not _ITEM_TERMINAL:
                call.move(_TERMINAL)
                call.last_event = "terminal"
        return calls
