"""What one decided attempt counts for, as data, and who is told: the metrics' sans-I/O half.

The edge decides every attempt in one place (``edge/logs.py::emit_records``); there it hands
the attempt to :func:`outcome_of`, which reads what a metric needs and nothing the model
wrote: the route, the wire, released or the quarantine's reason, family and party, the time
the gate spent deciding, the time from the first call fragment on the wire to the release,
and the argument bytes it withheld. :class:`Observers` passes the outcome (and the start and
end of every gated stream) to whatever is registered: the Prometheus exporter and the route
escalation live at the edge; the core imports neither.

Label values must stay bounded whatever the callers send: :class:`RouteLabels` keeps the
routes an operator named plus the first ``cap`` others seen, and answers :data:`OVERFLOW`
for every route past that. Reasons, families, parties and wires are closed enums already.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple, Protocol

from .attempt import Attempt
from .errors import QuarantineReason
from .state import Wire

OVERFLOW = "other"
"""The route label of every route past the cap."""


class AttemptOutcome(NamedTuple):
    """What one decided attempt counts for. Holds ids, enums and numbers only.

    A named tuple: it is made once per attempt, on the decision's path, and a tuple is the
    cheapest record Python makes."""

    route: str
    wire: str
    released: bool
    reason: str | None
    """The :class:`~.errors.QuarantineReason` value, None when released."""
    family: str | None
    """The quarantine's exception class name (``StreamFault``, ``PolicyDenied``...)."""
    party: str | None
    """``remote`` (the upstream broke its contract) or ``local``."""
    calls: int
    withheld_bytes: int
    decision_seconds: float
    """Parse, schema and policy time of the attempt's calls."""
    release_delay_seconds: float | None
    """From the first call fragment on the wire to the decision; None without a call."""

    @property
    def remote_fault(self) -> bool:
        return self.party == "remote"


# Per reason, its labels: read once here, not through the enum's properties per attempt.
_REASON_LABELS = {
    reason: (reason.value, reason.family.__name__, reason.party.value)
    for reason in QuarantineReason
}
_WIRE_LABELS = {wire: wire.value for wire in Wire}
_new: Callable[[type[AttemptOutcome], tuple[Any, ...]], AttemptOutcome] = tuple.__new__


def outcome_of(attempt: Attempt) -> AttemptOutcome:
    """The outcome of a decided attempt (released, or quarantined)."""
    route, wire, fault, calls, argument_bytes, first, deciding, now = attempt.metric_fields()
    if fault is None:
        reason = family = party = None
    else:
        reason, family, party = _REASON_LABELS[fault]  # the quarantine's reason
    delay = None
    if first is not None:
        delay = now - first
        if delay < 0.0:  # a clock that stepped back  # noqa: PLR1730 (no builtin call here)
            delay = 0.0
    # tuple.__new__ straight: a named tuple's own __new__ is Python code, and this runs on
    # every decided attempt.
    fields = (
        route,
        _WIRE_LABELS[wire],
        fault is None,
        reason,
        family,
        party,
        calls,
        argument_bytes,
        deciding,
        delay,
    )
    return _new(AttemptOutcome, fields)


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
        if not observers or not attempt.count_once():
            return
        outcome = outcome_of(attempt)
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


__all__ = ["OVERFLOW", "AttemptOutcome", "Observer", "Observers", "RouteLabels", "outcome_of"]
