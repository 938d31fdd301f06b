"""When a route's remote faults become a route problem: a sliding window and a hysteresis rule.

The specification asks that repeated contract mismatches be escalated as a route problem,
never answered by relaxing a check. This module is the arithmetic of that, sans-I/O, with
the clock passed in:

* :class:`BucketWindow` counts attempts and *remote* quarantines (the upstream broke its
  contract: :class:`~.errors.Party` ``REMOTE``) per route in ``buckets`` buckets spanning
  ``window`` seconds. A bucket is named by its index on the clock
  (``floor(now / width)``), so processes that share a clock (wall time) and a store agree on
  the names: the edge keeps the same buckets in Redis for a fleet.
* :class:`Rule` says when a route trips (at least ``min_attempts`` attempts in the window and
  a remote-fault rate at or above ``trip_rate``) and when a tripped route recovers (its rate
  at or below ``recover_rate``, lower than ``trip_rate``, or no attempt left in the window:
  a route out of routing gets no traffic, and its old faults age out).
  :meth:`Rule.judge` is a pure function of the state and the counts.
* :class:`Escalation` keeps which routes are tripped and answers the transitions.

Policy denials, limits, cancellations and the gate's own refusals are local: they count as
attempts (they are traffic) but never as faults.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass


class Transition(enum.Enum):
    TRIPPED = "tripped"
    RECOVERED = "recovered"


@dataclass(frozen=True, slots=True)
class Rule:
    """When a route trips and when it recovers (see the module's text)."""

    window: float = 60.0
    buckets: int = 12
    min_attempts: int = 20
    trip_rate: float = 0.5
    recover_rate: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.window) and self.window > 0):
            raise ValueError("window must be a positive number of seconds")
        if self.buckets < 1:
            raise ValueError("buckets must be at least 1")
        if self.min_attempts < 1:
            raise ValueError("min_attempts must be at least 1")
        if not 0 < self.trip_rate <= 1:
            raise ValueError("trip_rate must be in (0, 1]")
        if not 0 <= self.recover_rate < self.trip_rate:
            raise ValueError("recover_rate must be at least 0 and below trip_rate")

    @property
    def width(self) -> float:
        return self.window / self.buckets

    def bucket(self, now: float) -> int:
        """The index of the bucket ``now`` falls in."""
        return math.floor(now / self.width)

    def live(self, now: float) -> range:
        """The bucket indexes the window covers at ``now`` (the current one and those before)."""
        current = self.bucket(now)
        return range(current - self.buckets + 1, current + 1)

    def judge(self, tripped: bool, attempts: int, faults: int) -> Transition | None:
        """The transition the counts call for, or None."""
        if not tripped:
            if attempts >= self.min_attempts and faults >= self.trip_rate * attempts:
                return Transition.TRIPPED
            return None
        if attempts == 0 or faults <= self.recover_rate * attempts:
            return Transition.RECOVERED
        return None


class BucketWindow:
    """Attempts and remote faults per route in the window's buckets (one process's share)."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self._counts: dict[str, dict[int, list[int]]] = {}

    def add(self, route: str, now: float, *, fault: bool) -> None:
        buckets = self._counts.setdefault(route, {})
        index = self.rule.bucket(now)
        counts = buckets.get(index)
        if counts is None:
            counts = buckets[index] = [0, 0]
            self._expire(buckets, now)
        counts[0] += 1
        counts[1] += fault

    def totals(self, route: str, now: float) -> tuple[int, int]:
        """(attempts, remote faults) of ``route`` in the window at ``now``."""
        buckets = self._counts.get(route)
        if not buckets:
            return 0, 0
        self._expire(buckets, now)
        live = self.rule.live(now)
        attempts = faults = 0
        for index, (a, f) in buckets.items():
            if index in live:
                attempts += a
                faults += f
        return attempts, faults

    def routes(self) -> list[str]:
        return list(self._counts)

    def _expire(self, buckets: dict[int, list[int]], now: float) -> None:
        oldest = self.rule.live(now).start
        for index in [i for i in buckets if i < oldest]:
            del buckets[index]


class Escalation:
    """Which routes are tripped, and the transitions new counts call for."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self._tripped: frozenset[str] = frozenset()

    @property
    def tripped(self) -> frozenset[str]:
        return self._tripped

    def judge(self, route: str, attempts: int, faults: int) -> Transition | None:
        transition = self.rule.judge(route in self._tripped, attempts, faults)
        if transition is Transition.TRIPPED:
            self._tripped = self._tripped | {route}
        elif transition is Transition.RECOVERED:
            self._tripped = self._tripped - {route}
        return transition


__all__ = ["BucketWindow", "Escalation", "Rule", "Transition"]
