"""Switch on what the settings ask for operating the gate: metrics and route escalation."""

from __future__ import annotations

from ..edge.config import GateSettings
from ..edge.logs import observers
from .escalation import RouteEscalation
from .metrics import enable_metrics


def start_observing(settings: GateSettings) -> RouteEscalation | None:
    """Register the metrics exporter and the escalation observer the settings name; the
    escalation (None when off), for the proxy's deployment filter."""
    if settings.metrics is not None:
        enable_metrics(settings.metrics)
    if settings.escalation is None:
        return None
    escalation = RouteEscalation(settings.escalation, hook=settings.escalation.load_hook())
    observers.add(escalation)
    return escalation


__all__ = ["start_observing"]
