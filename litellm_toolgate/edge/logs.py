"""Decision records out through the ``litellm_toolgate`` logger, as structured data.

Each record goes out as one log record: a short message with ids and outcome only, and the
whole sanitized record in ``extra["toolgate"]`` (a JSON-ready dict) for handlers that ship
structured logs. Released calls log at INFO, quarantined ones at WARNING.

It is also where the observers (the metrics exporter, the route escalation) are told of
decided attempts, whatever the logging level: each attempt queued its outcome in
:data:`observers` as it was decided, and the queue is drained here once as many are
queued as the most impatient observer lets wait (``core/records/metrics.py``). And it is
where each decided attempt becomes an OpenTelemetry span, when OpenTelemetry is installed
(``traces.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from ..core.decision.attempt import Attempt
from ..core.records.metrics import Observers
from .traces import trace_decision

logger = logging.getLogger("litellm_toolgate")

observers = Observers()
"""Told of every decided attempt and every gated proxy stream (see ``core/records/metrics.py``)."""


def emit_records(attempt: Attempt, parent: Any = None) -> None:
    """Tell the observers, trace the decision (``traces.py``; ``parent``: the span to trace
    it under instead of the current one) and log the attempt's records."""
    if observers.due():
        observers.drain()
    trace_decision(attempt, parent)
    fault = attempt.quarantined
    level = logging.INFO if fault is None else logging.WARNING
    if not logger.isEnabledFor(level):
        return
    records = attempt.records()
    if not records:
        logger.log(
            level,
            "toolgate attempt %s: %s, no tool calls",
            attempt.attempt_id,
            "quarantined: " + fault.reason.value if fault else "released",
            extra={
                "toolgate": {
                    "attempt_id": attempt.attempt_id,
                    "error_class": fault.reason.value if fault else None,
                }
            },
        )
    for record in records:
        logger.log(
            level,
            "toolgate call %s: %s (%s)",
            record.item_id,
            record.execution_state,
            record.error_class or "ok",
            extra={"toolgate": record.model_dump(mode="json")},
        )
