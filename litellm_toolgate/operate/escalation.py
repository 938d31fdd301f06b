"""Route escalation: repeated remote faults on a route become one alert, not relaxed checks.

An observer of decided attempts (see :mod:`logs`). Every attempt counts on its route
(litellm's model string of the deployment, e.g. ``cometapi/gpt-4o-mini``); an attempt the
*remote* party spoiled (:class:`~..core.errors.Party`: a broken stream, an interruption,
arguments or a schema the upstream got wrong, a carrier mismatch) also counts as a fault.
Policy denials, limits, cancellations and the gate's own refusals are local and never do.
The core's :class:`~..core.escalation.Rule` decides when a route trips and when it recovers
(a minimum of attempts, a trip rate, a lower recovery rate: no flapping).

On a transition the gate logs one structured record on the ``litellm_toolgate`` logger
(``extra["toolgate_alert"]``: route, transition, counts, rate, window; never a request's
content), calls the optional ``hook`` with the same dict, and updates
``toolgate_route_escalated`` when metrics are on. With ``take_out_of_routing`` a LiteLLM
proxy's router leaves a tripped route's deployments out (the gate's
``async_filter_deployments``, litellm's deployment filter hook, called by the router on
every async routing decision on 1.108.7 and 1.110.2) until it recovers.

**A fleet.** When litellm's cache settings name a Redis (``litellm.cache`` is a Redis
cache) the window lives there, keyed by wall-clock bucket: every proxy adds its counts and
judges the fleet's totals, so all of them trip and recover together. A background thread
sends the counts every ``sync_seconds`` and reads the totals back. Without a Redis each
process counts on its own; if Redis fails, the process judges its own counts until it
answers again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..core.records.metrics import OVERFLOW, AttemptOutcome, DecidedBatch, RouteLabels
from ..core.rules.escalation import BucketWindow, Escalation, Transition
from ..edge.config import EscalationSettings, Hook
from ..edge.seam import privates

logger = logging.getLogger("litellm_toolgate")


def litellm_redis() -> Any | None:
    """The sync Redis client of litellm's configured cache, or None when it names none."""
    return privates.cache_redis_client()


def deployment_route(deployment: Any) -> str | None:
    """A router deployment's route: its ``litellm_params.model``."""
    if not isinstance(deployment, Mapping):
        return None
    params = deployment.get("litellm_params")
    model = params.get("model") if isinstance(params, Mapping) else None
    return model if isinstance(model, str) else None


class RouteEscalation:
    """The escalation observer (see the module's text).

    ``redis`` is a sync Redis client, ``"auto"`` (litellm's cache's, looked up at first use)
    or None (this process alone). ``clock`` is wall time: buckets must agree across a fleet.
    """

    def __init__(
        self,
        settings: EscalationSettings,
        *,
        hook: Hook | None = None,
        redis: Any = "auto",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.rule = settings.rule()
        self.hook = hook
        self._clock = clock
        self._routes = RouteLabels((), settings.max_routes)
        self._local = BucketWindow(self.rule)
        self._escalation = Escalation(self.rule)
        self._lock = threading.Lock()
        # Alerts judged under _lock, told in that order under _announcing (reentrant: a hook
        # may judge again, through refresh()).
        self._unannounced: list[dict[str, Any]] = []
        self._announcing = threading.RLock()
        self._redis_choice = redis if settings.shared == "auto" else None
        self._redis: Any = None
        self._pending: dict[tuple[str, int], list[int]] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._redis_failing = False
        self.alerts: list[dict[str, Any]] = []  # the last few alerts, for an operator's view
        if self._redis_choice is not None:
            # Started now, not at the first attempt: a proxy that routes nothing to a route
            # must still hear that the fleet took it out. litellm's cache may be set up after
            # the gate (the proxy reads its settings in turn), so it is looked up each turn
            # until found.
            self._thread = threading.Thread(
                target=self._run, name="toolgate-escalation", daemon=True
            )
            self._thread.start()

    # ---- what the proxy asks -----------------------------------------------------------------
    @property
    def tripped(self) -> frozenset[str]:
        return self._escalation.tripped

    @property
    def shared(self) -> bool:
        self._resolve()
        return self._redis is not None

    def filter(self, deployments: list[Any]) -> list[Any]:
        """The deployments whose route is not tripped (all when nothing is taken out)."""
        if not self.settings.take_out_of_routing:
            return deployments
        self.refresh()
        tripped = self.tripped
        if not tripped:
            return deployments
        return [d for d in deployments if deployment_route(d) not in tripped]

    def refresh(self) -> None:
        """Judge the tripped routes again now (their faults age out without traffic)."""
        self._resolve()
        if self._redis is not None and not self._redis_failing:
            return  # the sync thread judges the fleet's totals
        now = self._clock()
        with self._lock:
            for route in self.tripped:
                self._judge(route, *self._local.totals(route, now))
        self._announce()

    # ---- observer ----------------------------------------------------------------------------
    batch = 1
    """Told of each decided attempt as it goes out: the window is judged as attempts come."""

    def attempts_decided(self, outcomes: DecidedBatch) -> None:
        for outcome in outcomes:
            self._decided(outcome)

    def _decided(self, outcome: AttemptOutcome) -> None:
        route = self._routes(outcome.route)
        if not route or route == OVERFLOW:
            return
        self._resolve()
        now = self._clock()
        fault = outcome.remote_fault
        with self._lock:
            self._local.add(route, now, fault=fault)
            if self._redis is not None:
                counts = self._pending.setdefault((route, self.rule.bucket(now)), [0, 0])
                counts[0] += 1
                counts[1] += fault
                if not self._redis_failing:
                    return
            self._judge(route, *self._local.totals(route, now))
        self._announce()

    def stream_started(self, route: str) -> None:
        pass

    def stream_ended(self, route: str) -> None:
        pass

    # ---- the fleet's window ------------------------------------------------------------------
    def _resolve(self) -> None:
        if self._redis is not None or self._redis_choice is None:
            return
        choice = self._redis_choice
        self._redis = litellm_redis() if choice == "auto" else choice

    def _key(self, route: str, bucket: int) -> str:
        return f"{self.settings.key_prefix}:{route}:{bucket}"

    def _run(self) -> None:
        while not self._stop.wait(self.settings.sync_seconds):
            self._resolve()
            self.sync()

    def sync(self) -> None:
        """Send this process's counts, read the fleet's totals, judge every route."""
        redis = self._redis
        if redis is None:
            return
        with self._lock:
            pending, self._pending = self._pending, {}
        ttl = int(self.rule.window * 2) + 1
        routes_key = f"{self.settings.key_prefix}:routes"
        try:
            pipe = redis.pipeline(transaction=False)
            for (route, bucket), (attempts, faults) in pending.items():
                key = self._key(route, bucket)
                pipe.hincrby(key, "a", attempts)
                pipe.hincrby(key, "f", faults)
                pipe.expire(key, ttl)
            if pending:
                pipe.sadd(routes_key, *{route for route, _ in pending})
                pipe.expire(routes_key, ttl)
            pipe.smembers(routes_key)
            members = pipe.execute()[-1]
            routes = sorted(m.decode() if isinstance(m, bytes) else str(m) for m in members)
            routes = routes[: self.settings.max_routes]
            live = self.rule.live(self._clock())
            pipe = redis.pipeline(transaction=False)
            for route in routes:
                for bucket in live:
                    pipe.hmget(self._key(route, bucket), "a", "f")
            answers = pipe.execute()
        except Exception as exc:
            if not self._redis_failing:
                logger.warning(
                    "toolgate escalation: Redis failed (%s); judging this process's counts",
                    type(exc).__name__,
                )
            self._redis_failing = True
            return
        self._redis_failing = False
        with self._lock:
            for n, route in enumerate(routes):
                attempts = faults = 0
                for a, f in answers[n * len(live) : (n + 1) * len(live)]:
                    attempts += int(a or 0)
                    faults += int(f or 0)
                self._judge(route, attempts, faults)
        self._announce()

    def close(self) -> None:
        """Stop the sync thread (after one last send)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        with contextlib.suppress(Exception):
            self.sync()

    # ---- transitions -------------------------------------------------------------------------
    def _judge(self, route: str, attempts: int, faults: int) -> None:
        """Judge the route under the lock; a transition's alert is kept (:attr:`alerts`) and
        queued for :meth:`_announce`, never announced here."""
        transition = self._escalation.judge(route, attempts, faults)
        if transition is None:
            return
        rule = self.rule
        alert: dict[str, Any] = {
            "event": "toolgate_route_escalation",
            "route": route,
            "transition": transition.value,
            "attempts": attempts,
            "remote_faults": faults,
            "rate": round(faults / attempts, 4) if attempts else 0.0,
            "window_seconds": rule.window,
            "trip_rate": rule.trip_rate,
            "recover_rate": rule.recover_rate,
            "min_attempts": rule.min_attempts,
            "out_of_routing": self.settings.take_out_of_routing
            and transition is Transition.TRIPPED,
            "shared": self._redis is not None,
        }
        self.alerts = [*self.alerts[-99:], alert]
        self._unannounced.append(alert)

    def _announce(self) -> None:
        """Log each queued alert, update the metric, call the hook, in the order judged:
        outside the judging lock, so a hook may ask the escalation anything (or add and
        remove observers) and a slow one holds up no other attempt's count. It runs on
        the thread that judged: the one that decided the attempt, or the sync thread with
        a shared window; another thread with an alert of its own waits its turn."""
        if not self._unannounced:
            return
        with self._announcing:
            with self._lock:
                alerts, self._unannounced = self._unannounced, []
            for alert in alerts:
                self._tell(alert)

    def _tell(self, alert: dict[str, Any]) -> None:
        route, transition = alert["route"], alert["transition"]
        tripped = transition == Transition.TRIPPED.value
        logger.log(
            logging.WARNING if tripped else logging.INFO,
            "toolgate route %s %s: %d remote faults in %d attempts",
            route,
            transition,
            alert["remote_faults"],
            alert["attempts"],
            extra={"toolgate_alert": alert},
        )
        from .metrics import exporter

        metrics = exporter()
        if metrics is not None:
            with contextlib.suppress(Exception):
                metrics.route_transition(route, transition)
        if self.hook is not None:
            try:
                self.hook(dict(alert))
            except Exception as exc:  # the hook's failure never stops the gate
                logger.warning("toolgate escalation hook failed: %s", type(exc).__name__)


__all__ = ["EscalationSettings", "RouteEscalation", "deployment_route", "litellm_redis"]
