"""What one decided attempt counts for, as data, and who is told: the metrics' sans-I/O half.

An attempt made with an :class:`Observers` (the edge passes its own) queues its
:class:`AttemptOutcome` in :attr:`Observers.decided` at the moment it is decided, released
or quarantined, while somebody listens: the outcome holds what a metric needs and nothing the
model wrote: the route, the wire, the quarantine's reason (None: released), the calls, the
argument bytes withheld, the time the gate spent deciding, and the time from the first call
fragment to the decision (the release delay). It is queued there because that is where the
attempt's values are still in the cache: read later, as the attempt went out, handing them
over cost about twice as much (docs/performance.md). The queue is flat, the outcome's
values one after another (:data:`QUEUED`, :class:`DecidedBatch`): an attempt adds them with
one ``extend`` and leaves no object of its own behind, and an observer that bins takes each
field of a whole batch as one slice. The release delay is queued as its two clock readings
and subtracted in the batch: what runs once per attempt is kept to loads and one call.

:meth:`Observers.drain` hands the queued outcomes to every observer, in batches: the edge
drains where a decided attempt goes out (``edge/logs.py::emit_records``) once as many are
queued as the most impatient observer lets wait (:attr:`Observer.batch`: the Prometheus
exporter bins 256 at a time, the route escalation hears of each at once), and a scrape
drains first. The start and end of every gated stream are passed on as they happen. The
Prometheus exporter and the route escalation live at the edge; the core imports neither.

The outcome keeps the enums as they are (the labels are theirs: ``wire.value``,
``reason.value``, ``reason.family``, ``reason.party``): an observer that bins many outcomes
makes each series' labels once, not once per attempt.

Label values must stay bounded whatever the callers send: :class:`RouteLabels` keeps the
routes an operator named plus the first ``cap`` others seen, and answers :data:`OVERFLOW`
for every route past that. Reasons, families, parties and wires are closed enums already.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple, Protocol, TypeVar

from ..decision.state import Wire
from ..errors import Party, QuarantineReason

_T = TypeVar("_T")

OVERFLOW = "other"
"""The route label of every route past the cap."""


class AttemptOutcome(NamedTuple):
    """What one decided attempt counts for. Holds ids, enums and numbers only."""

    route: str
    wire: Wire
    reason: QuarantineReason | None
    """Why the attempt was quarantined; None when it was released."""
    calls: int
    withheld_bytes: int
    decision_seconds: float
    """Parse, schema and policy time of the attempt's calls."""
    release_delay_seconds: float | None
    """From the first call fragment on the wire to the decision (the release, or the
    quarantine); None without a call. A clock that stepped back gives 0."""

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


QUEUED = (*AttemptOutcome._fields[:-1], "first_opened", "decided_at")
"""What a decided attempt queues (:attr:`Observers.decided`), in this order: the
outcome's fields, but the release delay as its two clock readings (the first call's
opening, None without a call; the decision's), subtracted when the outcome is read: the
decision's path then stores two readings instead of computing a delay."""

WIDTH = len(QUEUED)
"""Values per outcome in a flat queue."""


def queued(outcome: AttemptOutcome) -> tuple[Any, ...]:
    """The values ``outcome`` takes in a flat queue: what an attempt queues, for an
    outcome made by hand (a test's, an observer's own producer)."""
    delay = outcome.release_delay_seconds
    return (*outcome[:-1], None if delay is None else 0.0, 0.0 if delay is None else delay)


def _delays(firsts: list[Any], decided: list[float]) -> list[float | None]:
    """Each outcome's release delay from its two readings; a clock that stepped back gives 0."""
    return [
        None if first is None else (delay if (delay := at - first) > 0.0 else 0.0)
        for first, at in zip(firsts, decided, strict=True)
    ]


class DecidedBatch:
    """Outcomes of decided attempts as one flat list, :data:`WIDTH` values each in the
    order of :data:`QUEUED`: what :meth:`Observers.drain` hands every observer, shared,
    so read-only. Iterating makes each :class:`AttemptOutcome`; an observer that bins many
    reads :meth:`columns` instead (a slice per field, no per-outcome object)."""

    __slots__ = ("flat",)

    def __init__(self, flat: list[Any]) -> None:
        if len(flat) % WIDTH:
            raise ValueError(f"a flat batch holds {WIDTH} values per outcome")
        self.flat = flat

    @classmethod
    def of(cls, outcomes: Iterable[AttemptOutcome]) -> DecidedBatch:
        """A batch of outcomes made one by one (a test's, an observer's own producer)."""
        flat: list[Any] = []
        for outcome in outcomes:
            flat.extend(queued(outcome))
        return cls(flat)

    def __len__(self) -> int:
        return len(self.flat) // WIDTH

    def __iter__(self) -> Iterator[AttemptOutcome]:
        return map(AttemptOutcome._make, zip(*self.columns(), strict=True))

    def column(self, field: str) -> list[Any]:
        """One field of :class:`AttemptOutcome`, of every outcome, in order."""
        if field == "release_delay_seconds":
            return self._delay_column()
        return self.flat[QUEUED.index(field) :: WIDTH]

    def columns(self) -> list[list[Any]]:
        """Every field of :class:`AttemptOutcome`, a list each, in the order of its fields."""
        flat = self.flat
        columns = [flat[field::WIDTH] for field in range(WIDTH - 2)]
        columns.append(self._delay_column())
        return columns

    def _delay_column(self) -> list[float | None]:
        """The release delays, from the last two values of each outcome."""
        flat = self.flat
        return _delays(flat[WIDTH - 2 :: WIDTH], flat[WIDTH - 1 :: WIDTH])


def take_queued(queue: list[_T]) -> list[_T]:
    """Every item in ``queue`` now, taken out of it: the first ``len`` items copied, then
    deleted, each an atomic list operation, so an item another thread appends meanwhile lands
    past them and stays for the next take, never lost. Call it under the lock of the one
    taker; appenders need none. An appender's one ``extend`` with a tuple is atomic too: the
    take holds all of its values or none."""
    taken = len(queue)
    batch = queue[:taken]
    del queue[:taken]
    return batch


class Observer(Protocol):
    """Told of decided attempts, in batches, and of every gated stream's start and end."""

    batch: int
    """How many decided attempts may be queued before this observer hears of them (1: each
    as soon as it goes out). A scrape of its own drains the queue first."""

    def attempts_decided(self, outcomes: DecidedBatch) -> None: ...

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
        self.decided: list[Any] = []
        """Outcomes of decided attempts not yet handed to the observers, flat (:data:`WIDTH`
        values each, see :class:`DecidedBatch`). An attempt extends it with one tuple (an
        atomic list operation that leaves no object behind); only :meth:`drain` takes."""
        self.every = WIDTH
        """Drain once this many values are queued: the smallest batch of the listeners,
        in outcomes, times :data:`WIDTH`."""
        # Reentrant: an observer told under it (the escalation's hook, say) may add or remove.
        self._lock = threading.RLock()

    def __bool__(self) -> bool:
        return bool(self.listening)

    def add(self, observer: Observer) -> None:
        with self._lock:
            if observer not in self.listening:
                self.listening = (*self.listening, observer)
                self.every = min(o.batch for o in self.listening) * WIDTH

    def remove(self, observer: Observer) -> None:
        """Stop telling ``observer``, after handing it every outcome queued while it listened."""
        self.drain()
        with self._lock:
            self.listening = tuple(o for o in self.listening if o is not observer)
            self.every = min((o.batch for o in self.listening), default=1) * WIDTH

    def due(self) -> bool:
        """Whether enough outcomes are queued to drain now."""
        return len(self.decided) >= self.every

    def drain(self) -> None:
        """Hand every queued outcome (:func:`take_queued`) to every observer, in arrival
        order. The observers are told under the lock, so a drain that returns (a scrape's,
        say) has seen every outcome queued before it began handed over.
        """
        with self._lock:
            flat = take_queued(self.decided)
            if not flat:
                return
            batch = DecidedBatch(flat)
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


__all__ = [
    "OVERFLOW",
    "WIDTH",
    "AttemptOutcome",
    "DecidedBatch",
    "Observer",
    "Observers",
    "RouteLabels",
    "take_queued",
]
