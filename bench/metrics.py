"""The cost of the gate's metrics: the gate's own CPU per attempt, metrics on vs off.

Each turn takes two batches of attempts through the gate's own work, without litellm or a
socket, in the order the gate does it: for each attempt in turn, the core fed the raw body,
the decision and the release (where the attempt queues its outcome while somebody listens),
then ``emit_records`` (the one place a decided attempt goes out and the observers are
told). The attempts are made with the edge's observers, as the gate makes them. One batch
runs with no observer ("off"), the other with the Prometheus exporter on a private
registry ("on", the same series as on a proxy); which goes first alternates from turn to
turn. Each batch is timed whole (the thread's CPU time), so
the figure includes what the metrics cost the gate's own work around them (the caches they
take from it), and the many turns' median per-attempt difference is the metrics' cost.

Each batch's time ends with the hand-over and the binning of every outcome it queued, so
no part of the metrics' work is left for the untimed moments between batches: a batch of
the exporter's ``FOLD_EVERY`` attempts (the 20-event row's) bins where the gate does, at
the last attempt's emit, and leaves nothing; a smaller batch's final fold is counted whole
(its fixed cost shared by fewer attempts: an overcount, far under those rows' margin).
Until 3 December 2026 the batches stopped at the last emit, and the 20-event row's 200
attempts never reached the exporter's 256: its binning ran when the exporter was removed,
untimed.

An earlier version timed the emitting alone, after deciding a whole batch: that read about
half of what the metrics cost in this order (the exporter's code stayed hot across 500
emits in a row, and what it took from the caches was paid by nobody timed).

The metrics cost a constant per attempt, so a short stream is their worst case, and this
core-only baseline (no litellm, no HTTP) is the smallest the gate's CPU can be: through
litellm the same cost is a smaller share.
"""

from __future__ import annotations

import gc
import statistics
import time
from typing import TYPE_CHECKING

from bench.bodies import TOOLS, count_events
from bench.common import Row, summary
from bench.core import core_stream, split
from bench.report import log
from litellm_toolgate import PolicyDecision
from litellm_toolgate.core.values.registry import ToolRegistry
from litellm_toolgate.edge.logs import emit_records, observers

if TYPE_CHECKING:
    from litellm_toolgate.operate.metrics import PrometheusExporter

GC_EVERY = 20
"""Turns between two full collections (outside the timed batches)."""


def _batch(
    registry: ToolRegistry, pieces: list[bytes], count: int, exporter: PrometheusExporter | None
) -> float:
    """The thread's CPU seconds for ``count`` attempts, each decided, released and emitted,
    then every outcome they queued handed over and binned (``exporter``: metrics on)."""
    started = time.thread_time()
    for _ in range(count):
        attempt = core_stream(registry, pieces, observers)
        for call in attempt.conclude():
            attempt.decide(call.index, PolicyDecision.approve())
        attempt.release()
        emit_records(attempt)
    observers.drain()
    if exporter is not None:
        exporter.fold()
    return time.thread_time() - started


def metrics_section(shapes: list[tuple[str, bytes, int, int]]) -> list[Row]:
    """Rows ``metrics on vs off``: (label, body, attempts per batch, turns) per shape."""
    try:
        from prometheus_client import CollectorRegistry

        from litellm_toolgate.operate.metrics import PrometheusExporter
    except ImportError:
        return [{"section": "metrics", "name": "metrics", "error": "prometheus-client missing"}]
    registry = ToolRegistry.from_tools(TOOLS)
    exporter = PrometheusExporter(CollectorRegistry(), ["bench"], 20)
    rows: list[Row] = []
    for label, body, per_batch, turns in shapes:
        pieces = split(body)
        off: list[float] = []
        on: list[float] = []
        for turn in range(turns + 1):
            if turn % GC_EVERY == 0:
                gc.collect()
            # Which of the two goes first alternates, so neither always follows the other.
            for metrics_on in (False, True) if turn % 2 else (True, False):
                if not metrics_on:
                    off.append(_batch(registry, pieces, per_batch, None))
                    continue
                observers.add(exporter)
                try:
                    on.append(_batch(registry, pieces, per_batch, exporter))
                finally:
                    observers.remove(exporter)
        off, on = off[1:], on[1:]  # the first turn warms both paths
        gate_us = statistics.median(off) / per_batch * 1e6
        added_us = [(n - f) / per_batch * 1e6 for n, f in zip(on, off, strict=True)]
        added = statistics.median(added_us)
        quartiles = statistics.quantiles(added_us, n=4)
        ratio = 1 + added / gate_us
        row: Row = {
            "section": "metrics",
            "name": f"metrics on vs off, {label}",
            "events": count_events(body),
            # The median of the turns' differences over the median attempt: one figure; the
            # spread is the differences' quartiles (a single turn's difference is noisy).
            "ratio_cpu": {
                "median": ratio,
                "min": 1 + quartiles[0] / gate_us,
                "max": 1 + quartiles[2] / gate_us,
                "n": len(added_us),
            },
            "gate_us_per_attempt": gate_us,
            "added_us_per_attempt": summary(added_us) | {"q1": quartiles[0], "q3": quartiles[2]},
            "budget_ratio": 1.01,
            "met": ratio <= 1.01,
        }
        rows.append(row)
        log(row)
    return rows


__all__ = ["metrics_section"]
