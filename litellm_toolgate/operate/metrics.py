"""The gate's Prometheus metrics: an observer of decided attempts and gated streams.

Needs the ``metrics`` extra (``prometheus-client``). Every decided attempt's
:class:`~..core.metrics.AttemptOutcome` reaches the observers registered in :mod:`logs`; this
exporter keeps the series below and hands them to ``prometheus_client`` as a collector, in
its process-global registry by default: a LiteLLM proxy whose ``callbacks`` include
``prometheus`` serves that registry on its own ``/metrics``, so the gate's series appear
there. ``port`` in the settings starts a scrape endpoint of its own (on ``127.0.0.1``
unless ``host`` says otherwise), for a proxy without litellm's Prometheus logger and for
code using the gate directly.

Why a collector and not ``Counter``/``Histogram`` objects: an attempt is counted on the
decision's path, and five of those objects cost about 5 µs an attempt (each takes a lock);
plain integers under one lock cost a fraction of that, and the families are built only
when scraped (:meth:`PrometheusExporter.collect`). The decision's path only queues the
attempt's outcome (``core/records/metrics.py``); outcomes are binned in batches and at every scrape
(which drains the queue first), so a scrape always sees every attempt decided before it.

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
from bisect import bisect_left, bisect_right
from collections import Counter
from collections.abc import Iterator
from itertools import compress
from typing import TYPE_CHECKING, Any

from ..core.decision.state import Wire
from ..core.errors import GateConfigError, QuarantineReason
from ..core.records.metrics import WIDTH, DecidedBatch, RouteLabels, take_queued
from ..edge.config import MetricsSettings
from ..edge.logs import observers

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

# Seconds: the decision is CPU work (sub-millisecond to tens of ms); the release delay is
# the stream's length from the first call fragment (milliseconds to minutes).
DECISION_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5)
DELAY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# Decided attempts queued before they are binned (see PrometheusExporter.attempts_decided).
FOLD_EVERY = 256
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

_HISTOGRAMS = {
    "toolgate_decision_seconds": (
        "Parse, schema and policy time of an attempt's calls.",
        DECISION_BUCKETS,
    ),
    "toolgate_release_delay_seconds": (
        "From the first call fragment on the wire to the release.",
        DELAY_BUCKETS,
    ),
    "toolgate_withheld_bytes": ("Argument bytes an attempt withheld.", BYTES_BUCKETS),
}


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise GateConfigError(
            "toolgate 'metrics' needs prometheus-client: pip install 'litellm-toolgate[metrics]'"
        ) from None
    return prometheus_client


class _Histogram:
    """One histogram series: per-bucket counts (the last is +Inf) and the sum. A value goes
    to the first bound it is less than or equal to (``le``), ``bisect_left(bounds, value)``."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def add(self, values: list[Any]) -> None:
        """Observe ``values`` (a list this sorts): the sum in their order, then the counts
        from the sort, in one step when all fall in one bucket (the usual batch)."""
        if not values:
            return
        self.sum = sum(values, self.sum)
        values.sort()
        bounds, counts = self.bounds, self.counts
        low = bisect_left(bounds, values[0])
        if low == len(bounds) or values[-1] <= bounds[low]:
            counts[low] += len(values)
            return
        below = 0
        for i, bound in enumerate(bounds):
            # bisect_left(bounds, v) == i  <=>  bounds[i-1] < v <= bounds[i]
            upto = bisect_right(values, bound, below)
            counts[i] += upto - below
            below = upto
        counts[-1] += len(values) - below

    def buckets(self) -> list[tuple[str, float]]:
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


class PrometheusExporter:
    """The observer that keeps the gate's series, and their collector (see the module)."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        routes: list[str] | tuple[str, ...] = (),
        max_routes: int = 20,
    ) -> None:
        prom = _require()
        from prometheus_client import core

        self._families = core
        self.registry = prom.REGISTRY if registry is None else registry
        self.route_label = RouteLabels(routes, max_routes)
        self._lock = threading.Lock()
        # (route, wire, reason) -> [count, histograms..., (route label, wire, reason,
        # family, party)]; reason None: released. Routes past the cap share a label.
        self._cells: dict[tuple[str, Wire, QuarantineReason | None], list[Any]] = {}
        self._queue: list[Any] = []  # flat, as core.metrics.DecidedBatch
        self._histograms: dict[tuple[str, str], _Histogram] = {}
        self._in_flight = 0
        self._escalated: dict[str, int] = {}
        self._transitions: dict[tuple[str, str], int] = {}
        self.registry.register(self)

    # ---- observer ------------------------------------------------------------------------------
    batch = FOLD_EVERY

    def attempts_decided(self, outcomes: DecidedBatch) -> None:
        # Off the decision's path: the attempts queued their outcomes as they were decided
        # (``core/records/metrics.py``) and come here in batches; kept until FOLD_EVERY wait
        # (a batch
        # of one when the route escalation listens too), binned then and at every scrape
        # (:meth:`fold`), so an attempt costs an extend and a share of a few slices
        # instead of a locked update each.
        queue = self._queue
        queue.extend(outcomes.flat)
        if len(queue) >= FOLD_EVERY * WIDTH:
            self.fold()

    def fold(self) -> None:
        """Bin every queued outcome into its series now (at most FOLD_EVERY wait between
        scrapes; a scrape folds first).

        The queue is taken whole (:func:`~..core.metrics.take_queued`; only this method
        takes, under the lock): an outcome queued meanwhile is binned by the next fold. A
        batch is binned in bulk, by columns (each field of every outcome one slice of the
        flat queue): the counts in one step when the batch is one cell (one route, wire and
        reason: the usual batch), else by one ``Counter`` over the cells' keys; a cell's
        labels are made when it is first seen; each histogram takes a column at once
        (:meth:`_Histogram.add`).
        """
        cells, histograms = self._cells, self._histograms
        with self._lock:
            flat = take_queued(self._queue)
            if not flat:
                return
            batch = DecidedBatch(flat)
            taken = len(batch)
            routes, wires, reasons, calls, withheld, deciding, delays = batch.columns()
            first_wire = wires[0]
            one_wire = wires.count(first_wire) == taken
            if one_wire and routes.count(routes[0]) == taken and reasons.count(reasons[0]) == taken:
                counted: dict[tuple[Any, ...], int] = {(routes[0], first_wire, reasons[0]): taken}
            else:
                counted = Counter(zip(routes, wires, reasons, strict=True))
            for key, count in counted.items():
                cell = cells.get(key)
                if cell is None:
                    cell = cells[key] = self._make(*key)
                cell[0] += count
            columns: tuple[list[Any], ...] = (calls, withheld, deciding, reasons, delays)
            for wire in (first_wire,) if one_wire else set(wires):
                of_wire = columns
                if not one_wire:
                    mask = [w is wire for w in wires]
                    of_wire = tuple(list(compress(column, mask)) for column in columns)
                # Only an attempt with calls is observed (its first call opened: a delay).
                if 0 in of_wire[0]:
                    of_wire = tuple(list(compress(column, of_wire[0])) for column in of_wire)
                    if not of_wire[0]:
                        continue
                _, of_withheld, of_deciding, of_reasons, of_delays = of_wire
                if of_reasons.count(None) != len(of_reasons):  # the delay is a release's
                    of_delays = [d for d, r in zip(of_delays, of_reasons, strict=True) if r is None]
                label = wire.value
                histograms["toolgate_decision_seconds", label].add(of_deciding)
                histograms["toolgate_withheld_bytes", label].add(of_withheld)
                delay = histograms["toolgate_release_delay_seconds", label]
                try:
                    delay.add(of_delays)
                except TypeError:
                    # A call without a delay: an outcome made by hand (an attempt's delay is
                    # None only without calls). Its sum failed first, so nothing was added.
                    delay.add([d for d in of_delays if d is not None])

    def _make(self, route: str, wire: Wire, reason: QuarantineReason | None) -> list[Any]:
        """A new cell: [count, decision, delay and withheld histograms, the series labels]."""
        label = wire.value
        histograms = []
        for name in _HISTOGRAMS:
            made = self._histograms.get((name, label))
            if made is None:
                made = self._histograms[name, label] = _Histogram(_HISTOGRAMS[name][1])
            histograms.append(made)
        labels: tuple[str | None, ...] = (None, None, None)
        if reason is not None:
            labels = (reason.value, reason.family.__name__, reason.party.value)
        series = (self.route_label(route or "unknown"), label, *labels)
        return [0, *histograms, series]

    def stream_started(self, route: str) -> None:
        with self._lock:
            self._in_flight += 1

    def stream_ended(self, route: str) -> None:
        with self._lock:
            self._in_flight -= 1

    def route_transition(self, route: str, transition: str) -> None:
        label = self.route_label(route or "unknown")
        with self._lock:
            key = (label, transition)
            self._transitions[key] = self._transitions.get(key, 0) + 1
            self._escalated[label] = 1 if transition == "tripped" else 0

    # ---- collector -------------------------------------------------------------------------------
    def describe(self) -> list[Any]:
        return []  # the families are made at each scrape; nothing to check in advance

    def collect(self) -> Iterator[Any]:
        core = self._families
        observers.drain()  # every attempt decided before the scrape reaches the queue
        self.fold()
        with self._lock:
            outcomes: dict[tuple[Any, ...], int] = {}
            for cell in self._cells.values():
                outcomes[cell[4]] = outcomes.get(cell[4], 0) + cell[0]
            histograms = {k: (h.buckets(), h.sum) for k, h in self._histograms.items()}
            in_flight = self._in_flight
            escalated = dict(self._escalated)
            transitions = dict(self._transitions)
        attempts = core.CounterMetricFamily(
            "toolgate_attempts", "Decided attempts.", labels=["route", "wire", "outcome"]
        )
        releases = core.CounterMetricFamily(
            "toolgate_releases", "Released attempts.", labels=["route", "wire"]
        )
        quarantines = core.CounterMetricFamily(
            "toolgate_quarantines",
            "Quarantined attempts, by reason, exception family and party at fault.",
            labels=list(METRIC_LABELS["toolgate_quarantines_total"]),
        )
        totals: dict[tuple[str, str, str], int] = {}
        for (route, wire, reason, family, party), count in sorted(
            outcomes.items(), key=lambda item: tuple(str(part) for part in item[0])
        ):
            outcome = "released" if reason is None else "quarantined"
            totals[route, wire, outcome] = totals.get((route, wire, outcome), 0) + count
            if reason is None:
                releases.add_metric([route, wire], count)
            else:
                quarantines.add_metric([route, wire, reason, str(family), str(party)], count)
        for labels, count in totals.items():
            attempts.add_metric(list(labels), count)
        yield attempts
        yield releases
        yield quarantines
        for name, (documentation, _) in _HISTOGRAMS.items():
            family = core.HistogramMetricFamily(name, documentation, labels=["wire"])
            for (of, wire), (buckets, total) in sorted(histograms.items()):
                if of == name:
                    family.add_metric([wire], buckets, total)
            yield family
        yield core.GaugeMetricFamily(
            "toolgate_streams_in_flight", "Gated proxy streams open now.", value=in_flight
        )
        escalation = core.GaugeMetricFamily(
            "toolgate_route_escalated",
            "1 while the route's remote faults keep it escalated.",
            labels=["route"],
        )
        for route, value in sorted(escalated.items()):
            escalation.add_metric([route], value)
        yield escalation
        changes = core.CounterMetricFamily(
            "toolgate_escalations", "Route escalation transitions.", labels=["route", "transition"]
        )
        for (route, transition), count in sorted(transitions.items()):
            changes.add_metric([route, transition], count)
        yield changes


_lock = threading.Lock()
_exporters: dict[str, PrometheusExporter] = {}  # the process's one, under "global"
_served: set[tuple[str, int]] = set()


def enable_metrics(settings: MetricsSettings) -> PrometheusExporter:
    """The process's exporter (made once, in the global registry) registered as an observer,
    and the settings' port served. Several gates in one process share it."""
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
