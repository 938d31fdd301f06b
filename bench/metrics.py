"""The cost of the gate's metrics: the gate's own CPU per attempt, metrics on vs off.

Each turn takes two batches of attempts through the gate's own work, without litellm or a
socket (the core fed the raw body, the decision, the release), then hands each batch to
``emit_records``, the one place a decided attempt goes out and the observers are told: one
batch with no observer ("off"), the other with the Prometheus exporter on a private registry
("on", the same series as on a proxy), the first of the two alternating from turn to turn.
The figure per turn is the gate's CPU per
attempt with metrics on over the same with them off, where the attempt work is the turn's
median and only the emitting is timed apart: on a shared machine a ratio of two whole runs
wanders by more than the 1 % budget, the emitting alone far less. The metrics cost a
constant per attempt, so a short stream is their worst case, and this core-only baseline
(no litellm, no HTTP) is the smallest the gate's CPU can be: through litellm the same
cost is a smaller share still.
"""

from __future__ import annotations

import gc
import statistics
import time

from bench.bodies import TOOLS, count_events
from bench.common import Row, summary
from bench.core import core_stream, split
from bench.report import log
from litellm_toolgate import PolicyDecision
from litellm_toolgate.core.attempt import Attempt
from litellm_toolgate.core.registry import ToolRegistry
from litellm_toolgate.edge.logs import emit_records, observers


def _attempts(registry: ToolRegistry, pieces: list[bytes], count: int) -> list[Attempt]:
    made = []
    for _ in range(count):
        attempt = core_stream(registry, pieces)
        for call in attempt.conclude():
            attempt.decide(call.index, PolicyDecision.approve())
        attempt.release()
        made.append(attempt)
    return made


def _emit(attempts: list[Attempt]) -> float:
    started = time.thread_time()
    for attempt in attempts:
        emit_records(attempt)
    return time.thread_time() - started


def metrics_section(shapes: list[tuple[str, bytes, int, int]]) -> list[Row]:
    """Rows ``metrics on vs off``: (label, body, attempts per batch, turns) per shape."""
    try:
        from prometheus_client import CollectorRegistry

        from litellm_toolgate.edge.prometheus import PrometheusExporter
    except ImportError:
        return [{"section": "metrics", "name": "metrics", "error": "prometheus-client missing"}]
    registry = ToolRegistry.from_tools(TOOLS)
    exporter = PrometheusExporter(CollectorRegistry(), ["bench"], 20)
    rows: list[Row] = []
    for label, body, per_batch, turns in shapes:
        pieces = split(body)
        work: list[float] = []
        off: list[float] = []
        on: list[float] = []
        for turn in range(turns + 1):
            gc.collect()
            # Which of the two goes first alternates, so neither always follows the other.
            for metrics_on in (False, True) if turn % 2 else (True, False):
                started = time.thread_time()
                batch = _attempts(registry, pieces, per_batch)
                if not metrics_on:
                    work.append(time.thread_time() - started)
                    off.append(_emit(batch))
                    continue
                observers.add(exporter)
                try:
                    on.append(_emit(batch))
                finally:
                    observers.remove(exporter)
        work, off, on = work[1:], off[1:], on[1:]  # the first turn warms both paths
        gate_us = (statistics.median(work) + statistics.median(off)) / per_batch * 1e6
        added_us = [(n - f) / per_batch * 1e6 for n, f in zip(on, off, strict=True)]
        ratios = [1 + a / gate_us for a in added_us]
        row: Row = {
            "section": "metrics",
            "name": f"metrics on vs off, {label}",
            "events": count_events(body),
            "ratio_cpu": summary(ratios),
            "gate_us_per_attempt": gate_us,
            "added_us_per_attempt": summary(added_us),
            "budget_ratio": 1.01,
            "met": statistics.median(ratios) <= 1.01,
        }
        rows.append(row)
        log(row)
    return rows


__all__ = ["metrics_section"]
