"""A gated stream of a carrier's items: what is handed out now, what waits, and the decision.

The caller iterates what a client library made of the wire (chat chunks, Responses events,
Anthropic events): the *carrier*. The gate reads the wire itself (the attempt is fed the raw
bytes before the library sees them), and the carrier only carries. A
:class:`CarrierAdapter` says, item by item, what may be handed out at once (text) and what is
withheld (a call's fragments, the finish); it assembles what it withheld into a
:class:`~.ledger.Carrier` for the attempt's cross-check, and makes the released items of the
approved calls.

:class:`GatedItems` is that for one attempt, sans-I/O. The edge's sync and async streams are
thin loops over it: :meth:`~GatedItems.ready` says what to hand out next (an item,
:data:`MORE` to read the next one from the library, :data:`END`, or :data:`FAULT`), and
:meth:`~GatedItems.take` what one item read becomes; once the library's stream ended, the
edge concludes, runs the policy and hands :meth:`~GatedItems.decide` the answer: only an
approved attempt's calls are queued, in one item before the withheld rest. After a fault
nothing withheld is kept: the adapter is replaced by one that holds and takes nothing.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ..errors import QuarantineReason, ToolCallQuarantined
from ..rules.policy import ReleasedCall, ToolCall
from .attempt import Attempt
from .carrier import Carrier

R = QuarantineReason

MORE = object()
"""Nothing is ready: read the next item from the library."""
END = object()
"""The stream is over."""
FAULT = object()
"""The attempt is quarantined: raise it."""


class CarrierAdapter(Protocol):
    """What a gated stream needs from its carrier: admit, assemble, release."""

    def admit(self, item: Any) -> Any | None:
        """The item to hand out now (possibly a copy without its withheld parts), or None."""
        ...

    def carrier(self) -> Carrier:
        """What the library assembled of the calls, for the attempt's cross-check."""
        ...

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        """The items that hand out the released calls, then the withheld rest."""
        ...


class _Dropped:
    """The carrier of a quarantined stream: it holds nothing and takes nothing."""

    def admit(self, item: Any) -> Any | None:
        return None

    def carrier(self) -> Carrier:
        return Carrier({}, None)

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        return []


class GatedItems:
    """One attempt's gated stream of carrier items (see the module's text).

    ``on_decided`` is told once, when the attempt's fate is settled: released, refused or
    cancelled.
    """

    def __init__(
        self,
        attempt: Attempt,
        carrier: CarrierAdapter,
        on_decided: Callable[[Attempt], None] | None = None,
    ) -> None:
        self.attempt = attempt
        self._carrier = carrier
        self._on_decided = on_decided
        self._out: deque[Any] = deque()
        self.released: list[ReleasedCall] = []
        """The calls this attempt released (set once, by an approving :meth:`decide`)."""
        self.done = False
        self._told = False

    def ready(self) -> Any:
        """An item to hand out, or :data:`FAULT`, :data:`END` or :data:`MORE`."""
        if self._out:
            return self._out.popleft()
        if self.attempt.quarantined is not None:
            self.drop()
            return FAULT
        return END if self.done else MORE

    def take(self, item: Any) -> Any:
        """What one item read from the library becomes: an item to hand out, or :data:`MORE`
        (withheld), or :data:`FAULT`."""
        admitted = self._carrier.admit(item)
        if self.attempt.quarantined is not None:
            return FAULT
        return MORE if admitted is None else admitted

    def drop(self) -> ToolCallQuarantined | None:
        """Nothing withheld is kept any more; the attempt's quarantine, if it has one."""
        self.done = True
        self._out.clear()
        self._carrier = _Dropped()
        self._tell()
        return self.attempt.quarantined

    def carrier_failed(self) -> None:
        """The library gave up on a stream the wire did not fault: they disagree."""
        if self.attempt.quarantined is None:
            self.attempt.interrupt(R.CARRIER_MISMATCH)

    def conclude(self) -> list[ToolCall] | None:
        """Conclude the attempt against what the carrier assembled; None once quarantined."""
        try:
            return self.attempt.conclude(self._carrier.carrier())
        except ToolCallQuarantined:
            return None

    def decide(self, approved: bool) -> None:
        """The stream is over: the policy's answer releases the calls, or nothing."""
        if approved:
            released = self.released = self.attempt.release()
            self._out.extend(self._carrier.release(released))
            self._tell()
        self.done = True

    def cancel(self) -> bool:
        """The reader stopped before the end: nothing withheld goes out. False when the
        stream was already over."""
        if self.done:
            return False
        self.attempt.interrupt(R.CANCELLED)
        self.drop()
        return True

    def _tell(self) -> None:
        if not self._told:
            self._told = True
            if self._on_decided is not None:
                self._on_decided(self.attempt)
