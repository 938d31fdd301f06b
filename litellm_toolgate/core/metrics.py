"""What one decided attempt counts for, as data, and who is told: the metrics' sans-I/O half.

The edge decides every attempt in one place (``edge/logs.py::emit_records``); there it asks
the attempt for its :class:`AttemptOutcome` (:meth:`~.attempt.Attempt.count_once`), which
holds what a metric needs and nothing the model wrote: the route, the wire, the quarantine's
reason (None: released), the calls, the argument bytes withheld, the time the gate spent
deciding, and when the first call opened and the attempt was decided (their difference is
the release delay). :class:`Observers` passes the outcome (and the start and end of every
gated stream) to whatever is registered: the Prometheus exporter and the route escalation
live at the edge; the core imports neither.

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
from typing import TYPE_CHECKING, NamedTuple, Protocol

from .errors import Party, QuarantineReason
from .state import Wire

if TYPE_CHECKING:
    from .attempt import Attempt

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


class Observer(Protocol):
    """Told of every decided attempt and of every gated stream's start and end."""

    def attempt_decided(self, outcome: AttemptOutcome) -> None: ...

    def stream_started(self, route: str) -> None: ...

    def stream_ended(self, route: str) -> None: ...


class Observers:
    """The registered observers; an observer that raises never changes a decision."""

    def __init__(self) -> None:
        self.listening: tuple[Observer, ...] = ()
        """The observers registered now (empty: nobody listens). Read per decided attempt
        as a plain attribute (``emit_records``), not through a Python-level ``__bool__``."""
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self.listening)

    def add(self, observer: Observer) -> None:
        with self._lock:
            if observer not in self.listening:
                self.listening = (*self.listening, observer)

    def remove(self, observer: Observer) -> None:
        with self._lock:
            self.listening = tuple(o for o in self.listening if o is not observer)

    def attempt_decided(self, attempt: Attempt) -> None:
        """Count a decided attempt once, however many paths report it."""
        observers = self.listening
        if not observers:
            return
        outcome = attempt.count_once()
        if outcome is None:
            return
        for observer in observers:
            try:
                observer.attempt_decided(outcome)
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


__all__ = ["OVERFLOW", "AttemptOutcome", "Observer", "Observers", "RouteLabels"]
