"""Decision records out through the ``litellm_toolgate`` logger, as structured data.

Each record goes out as one log record: a short message with ids and outcome only, and the
whole sanitized record in ``extra["toolgate"]`` (a JSON-ready dict) for handlers that ship
structured logs. Released calls log at INFO, quarantined ones at WARNING.
"""

from __future__ import annotations

import logging

from ..core.attempt import Attempt

logger = logging.getLogger("litellm_toolgate")


def emit_records(attempt: Attempt) -> None:
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
