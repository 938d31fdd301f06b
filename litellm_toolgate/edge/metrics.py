"""The gate's Prometheus metrics: an observer of decided attempts and gated streams.

Needs the ``metrics`` extra (``prometheus-client``). The core hands every decided attempt's
:class:`~..core.metrics.AttemptOutcome` to the observers registered in :mod:`logs`; this
exporter turns it into the series below, in ``prometheus_client``'s process-global registry
by default: a LiteLLM proxy whose ``callbacks`` include ``prometheus`` serves that registry
on its own ``/metrics``, so the gate's series appear there. ``port`` in the settings starts
a scrape endpoint of its own (on ``127.0.0.1`` unless ``host`` says otherwise), for a proxy
without litellm's Prometheus logger and for code using the gate directly.

Series (``route`` is bounded, see :class:`~..core.metrics.RouteLabels`):

* ``toolgate_attempts_total{route,wire,outcome}``: decided attempts, ``released`` or
  ``quarantined``.
* ``toolgate_releases_total{route,wire}``
* ``toolgate_quarantines_total{route,wire,reason,family,party}``
* ``toolgate_decision_seconds{wire}``: parse, schema and policy time of an attempt's calls.
* ``toolgate_release_delay_seconds{wire}``: first call fragment on the wire to the release.
* ``toolgate_withheld_bytes{wire}``: argument bytes an attempt withheld.
* ``toolgate_streams_in_flight``: gated proxy streams open now.
* ``toolgate_route_escalated{route}`` and ``toolgate_escalations_total{route,transition}``:
  see :mod:`escalation`.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from ..core.errors import GateConfigError
from ..core.metrics import AttemptOutcome, RouteLabels

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Seconds: the decision is CPU work (sub-millisecond to tens of ms); the release delay is
# the stream's length from the first call fragment (milliseconds to minutes).
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
BYTES_BUCKETS = (0, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)

METRIC_LABELS: dict[str, tuple[str, ...]] = {
    "toolgate_attempts_total": ("route", "wire", "outcome"),
    "toolgate_releases_total": ("route", "wire"),
    "toolgate_quarantines_total": ("route", "wire", "reason", "family", "party"),
    "toolgate_decision_seconds": ("wire",),
    "toolgate_release_delay_seconds": ("wire",),
    "toolgate_withheld_bytes": ("wire",),
    "toolgate_streams_in_flight": (),
    "toolgate_route_escalated": ("route",),
    "toolgate_escalations_total": ("route", "transition"),
}
"""Every series the gate exports and its labels (histograms add ``_bucket``, ``_sum``,
``_count`` and the ``le`` label). The dashboard test checks its queries against this."""


class MetricsSettings(BaseModel):
    """``metrics:`` in the gate's settings. Present means on."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    port: int | None = Field(default=None, ge=1, le=65535)
    """Serve ``/metrics`` on this port too (the proxy's own ``/metrics`` needs litellm's
    ``prometheus`` callback)."""
    host: str = "127.0.0.1"
    routes: list[str] = []
    """Route label values always kept (the deployments' ``litellm_params.model``)."""
    max_routes: int = Field(default=20, ge=0, le=1000)
    """Other routes kept as their own label value; past them, ``other``."""


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise GateConfigError(
            "toolgate 'metrics' needs prometheus-client: pip install 'litellm-toolgate[metrics]'"
        ) from None
    return prometheus_client


class PrometheusExporter:
    """The observer that keeps the gate's series (see the module's text)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        routes: list[str] | tuple[str, ...] = (),
        max_routes: int = 20,
    ) -> None:
        prom = _require()
        self.registry = prom.REGISTRY if registry is None else registry
        self.route_label = RouteLabels(routes, max_routes)
        reg = self.registry
        self.attempts = prom.Counter(
            "toolgate_attempts", "Decided attempts.", METRIC_LABELS["toolgate_attempts_total"],
            registry=reg,
        )  # fmt: skip
        self.releases = prom.Counter(
            "toolgate_releases", "Released attempts.", METRIC_LABELS["toolgate_releases_total"],
            registry=reg,
        )  # fmt: skip
        self.quarantines = prom.Counter(
            "toolgate_quarantines",
            "Quarantined attempts, by reason, exception family and party at fault.",
            METRIC_LABELS["toolgate_quarantines_total"],
            registry=reg,
        )
        self.decision = prom.Histogram(
            "toolgate_decision_seconds",
            "Parse, schema and policy time of an attempt's calls.",
            ("wire",), buckets=DECISION_BUCKETS, registry=reg,
        )  # fmt: skip
        self.delay = prom.Histogram(
            "toolgate_release_delay_seconds",
            "From the first call fragment on the wire to the release.",
            ("wire",), buckets=DELAY_BUCKETS, registry=reg,
        )  # fmt: skip
        self.withheld = prom.Histogram(
            "toolgate_withheld_bytes", "Argument bytes an attempt withheld.",
            ("wire",), buckets=BYTES_BUCKETS, registry=reg,
        )  # fmt: skip
        self.in_flight = prom.Gauge(
            "toolgate_streams_in_flight", "Gated proxy streams open now.", registry=reg
        )
        self.escalated = prom.Gauge(
            "toolgate_route_escalated",
            "1 while the route's remote faults keep it escalated.",
            ("route",), registry=reg,
        )  # fmt: skip
        self.escalations = prom.Counter(
            "toolgate_escalations", "Route escalation transitions.",
            ("route", "transition"), registry=reg,
        )  # fmt: skip
        self._children: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def attempt_decided(self, outcome: AttemptOutcome) -> None:
        key = (outcome.route, outcome.wire, outcome.reason)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = self._make(outcome)
        count, outcome_child, decision, delay, withheld = children
        count.inc()
        outcome_child.inc()
        if outcome.calls:
            decision.observe(outcome.decision_seconds)
            withheld.observe(outcome.withheld_bytes)
            if outcome.released and outcome.release_delay_seconds is not None:
                delay.observe(outcome.release_delay_seconds)

    def _make(self, outcome: AttemptOutcome) -> tuple[Any, ...]:
        route, wire = self.route_label(outcome.route or "unknown"), outcome.wire
        if outcome.released:
            done = self.releases.labels(route, wire)
        else:
            done = self.quarantines.labels(
                route, wire, outcome.reason, outcome.family, outcome.party
            )
        return (
            self.attempts.labels(route, wire, "released" if outcome.released else "quarantined"),
            done,
            self.decision.labels(wire),
            self.delay.labels(wire),
            self.withheld.labels(wire),
        )

    def stream_started(self, route: str) -> None:
        self.in_flight.inc()

    def stream_ended(self, route: str) -> None:
        self.in_flight.dec()

    def route_transition(self, route: str, transition: str) -> None:
        label = self.route_label(route or "unknown")
        self.escalations.labels(label, transition).inc()
        self.escalated.labels(label).set(1 if transition == "tripped" else 0)


_lock = threading.Lock()
_exporters: dict[str, PrometheusExporter] = {}  # the process's one, under "global"
_served: set[tuple[str, int]] = set()


def enable_metrics(settings: MetricsSettings) -> PrometheusExporter:
    """The process's exporter (made once, in the global registry) registered as an observer,
    and the settings' port served. Several gates in one process share it."""
    from .logs import observers

    prom = _require()
    with _lock:
        made = _exporters.get("global")
        if made is None:
            made = _exporters["global"] = PrometheusExporter(
                None, settings.routes, settings.max_routes
            )
        else:
            for route in settings.routes:
                made.route_label.name(route)
        observers.add(made)
        if settings.port is not None and (settings.host, settings.port) not in _served:
            try:
                prom.start_http_server(settings.port, addr=settings.host)
            except OSError as exc:
                raise GateConfigError(
                    f"metrics port {settings.host}:{settings.port} cannot be served: "
                    f"{type(exc).__name__}"
                ) from None
            _served.add((settings.host, settings.port))
        return made


def exporter() -> PrometheusExporter | None:
    """The process's exporter, once metrics are on."""
    return _exporters.get("global")


__all__ = ["METRIC_LABELS", "MetricsSettings", "PrometheusExporter", "enable_metrics", "exporter"]
