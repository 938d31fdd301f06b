"""What one decided attempt counts for, as data, and who is told: the metrics' sans-I/O half.

An attempt made with an :class:`Observers` (the edge passes its own) puts its
:class:`AttemptOutcome` in :attr:`Observers.decided` at the moment it is decided, released
or quarantined, while somebody listens: the outcome holds what a metric needs and nothing the
model wrote: the route, the wire, the quarantine's reason (None: released), the calls, the
argument bytes withheld, the time the gate spent deciding, and when the first call opened
and the attempt was decided (their difference is the release delay). It is made there
because that is where the attempt's values are still in the cache: read later, as the
attempt went out, handing them over cost about twice as much (docs/performance.md).

:meth:`Observers.drain` hands the queued outcomes to every observer, in batches: the edge
drains where a decided attempt goes out (``edge/logs.py::emit_records``) once as many are
queued as the most impatient observer lets wait (:attr:`Observer.batch`: the Prometheus
exporter bins 256 at a time, the route escalation hears of each at once), and a scrape
drains first. The start and end of every gated stream are passed on as they happen. The
Prometheus exporter and the route escalation live at the edge; the core imports neither.

The outcome keeps the enums as they are (the labels are theirs: ``wire.value``,
``reason.value``, ``reason.family``, ``reason.party``) and the release delay as its two
clock readings: made once per attempt on the decision's path, it costs one tuple, and an
observer that bins many outcomes makes each series' labels once, not once per attempt.

Label values must stay bounded whatever the callers send: :class:`RouteLabels` keeps the
routes an operator named plus the first ``cap`` others seen, and answers :data:`OVERFLOW`
for every route past that. Reasons, families, parties and wires are closed enums already.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import NamedTuple, Protocol, TypeVar

from .errors import Party, QuarantineReason
from .state import Wire

_T = TypeVar("_T")

OVERFLOW = "other"
"""The route label of every route past the cap."""


class AttemptOutcome(NamedTuple):
    """What one decided attempt counts for. Holds ids, enums and numbers only.

    A named tuple: it is made once per attempt, on the decision's path, and a tuple is the
    cheapest record Python makes."""

    route: str
    wire: Wire
    reason: QuarantineReason | None
    """Why the attempt was quarantined; None when it was released."""
    calls: int
    withheld_bytes: int
    decision_seconds: float
    """Parse, schema and policy time of the attempt's calls."""
    first_opened: float | None
    """When the wire opened the first call, on the attempt's clock; None without a call."""
    decided_at: float
    """When the attempt was decided, on the same clock (read only when a call opened)."""

    @property
    def released(self) -> bool:
        return self.reason is None

    @property
    def party(self) -> Party | None:
        """Who is at fault; None when released."""
        return None if self.reason is None else self.reason.party

    @property
    def remote_fault(self) -> bool:
        return self.reason is not None and self.reason.party is Party.REMOTE

    @property
    def release_delay_seconds(self) -> float | None:
        """From the first call fragment on the wire to the decision; None without a call.
        A clock that stepped back gives 0."""
        if self.first_opened is None:
            return None
        return max(0.0, self.decided_at - self.first_opened)


def take_queued(queue: list[_T]) -> list[_T]:
    """Every item in ``queue`` now, taken out of it: the first ``len`` items copied, then
    deleted, each an atomic list operation, so an item another thread appends meanwhile lands
    past them and stays for the next take, never lost. Call it under the lock of the one
    taker; appenders need none."""
    taken = len(queue)
    batch = queue[:taken]
    del queue[:taken]
    return batch


class Observer(Protocol):
    """Told of decided attempts, in batches, and of every gated stream's start and end."""

    batch: int
    """How many decided attempts may be queued before this observer hears of them (1: each
    as soon as it goes out). A scrape of its own drains the queue first."""

    def attempts_decided(self, outcomes: list[AttemptOutcome]) -> None: ...

    def stream_started(self, route: str) -> None: ...

    def stream_ended(self, route: str) -> None: ...


class Observers:
    """The registered observers and the outcomes queued for them; an observer that raises
    never changes a decision."""

    def __init__(self) -> None:
        self.listening: tuple[Observer, ...] = ()
        """The observers registered now (empty: nobody listens, and attempts queue nothing).
        Read per decided attempt as a plain attribute, not through a Python-level
        ``__bool__``."""
        self.decided: list[AttemptOutcome] = []
        """Outcomes of decided attempts not yet handed to the observers. Attempts append to
        it (an atomic list operation); only :meth:`drain` takes from it."""
        self.every = 1
        """Drain once this many outcomes are queued: the smallest batch of the listeners."""
        # Reentrant: an observer told under it (the escalation's hook, say) may add or remove.
        self._lock = threading.RLock()

    def __bool__(self) -> bool:
        return bool(self.listening)

    def add(self, observer: Observer) -> None:
        with self._lock:
            if observer not in self.listening:
                self.listening = (*self.listening, observer)
                self.every = min(o.batch for o in self.listening)

    def remove(self, observer: Observer) -> None:
        """Stop telling ``observer``, after handing it every outcome queued while it listened."""
        self.drain()
        with self._lock:
            self.listening = tuple(o for o in self.listening if o is not observer)
            self.every = min((o.batch for o in self.listening), default=1)

    def due(self) -> bool:
        """Whether enough outcomes are queued to drain now."""
        return len(self.decided) >= self.every

    def drain(self) -> None:
        """Hand every queued outcome (:func:`take_queued`) to every observer, in arrival
        order. The observers are told under the lock, so a drain that returns (a scrape's,
        say) has seen every outcome queued before it began handed over.
        """
        with self._lock:
            batch = take_queued(self.decided)
            if not batch:
                return
            for observer in self.listening:
                try:
                    observer.attempts_decided(batch)
                except Exception:  # observing must never decide
                    continue

    def stream_started(self, route: str) -> None:
        for observer in self.listening:
            try:
                observer.stream_started(route)
            except Exception:
                continue

    def stream_ended(self, route: str) -> None:
        for observer in self.listening:
            try:
                observer.stream_ended(route)
            except Exception:
                continue


class RouteLabels:
    """Bounded route label values: the named routes, then the first ``cap`` others seen, then
    :data:`OVERFLOW`. Thread-safe; never grows past ``len(named) + cap`` values."""

    def __init__(self, named: Iterable[str] = (), cap: int = 50) -> None:
        if cap < 0:
            raise ValueError("cap must not be negative")
        self._known: set[str] = set(named)
        self._extra = 0
        self._cap = cap
        self._lock = threading.Lock()

    def __call__(self, route: str) -> str:
        if route in self._known:
            return route
        with self._lock:
            if route in self._known:
                return route
            if self._extra >= self._cap:
                return OVERFLOW
            self._extra += 1
            self._known.add(route)
            return route

    def name(self, route: str) -> None:
        """Keep ``route`` as its own value from now on, outside the cap."""
        with self._lock:
            self._known.add(route)

    def __len__(self) -> int:
        return len(self._known)


__all__ = ["OVERFLOW", "AttemptOutcome", "Observer", "Observers", "RouteLabels", "take_queued"]
