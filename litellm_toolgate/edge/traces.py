"""Each decided attempt as one OpenTelemetry span, when OpenTelemetry is installed.

litellm's own OpenTelemetry callback turns the gate's standard logging (its
``guardrail_information``, see ``guardrail/decisionlog.py``) into a ``guardrail`` span whose
``guardrail_status`` says ``success`` or ``guardrail_intervened`` and whose
``guardrail_response`` is the attempt's summary as one JSON string. That span exists only
on the callback and proxy paths (the ``ToolGate`` wrapper reports to no standard logging),
and a trace backend cannot filter on what is inside the JSON. So every decided attempt,
whatever path decided it, also goes out here (from ``logs.emit_records``, where every
decision goes out) as a span ``toolgate.decision`` with flat attributes: the outcome, the
reason, its family and party, the route, the wire, the tool names, and one event per call
with its states. Never argument text, never the policy's own reason (a policy may quote the
arguments in it), never a schema path or a digest: ids, names, enums and counts only.

The span uses the global tracer provider (``opentelemetry.trace.get_tracer``): litellm's
``OpenTelemetry`` callback sets or reuses that one, so the gate's spans land beside
litellm's. Its parent is the caller's current span, or the span given (the proxy passes its
request's span). It starts at the first call fragment the wire opened (so its length is what
withholding cost) and ends at the decision. Without ``opentelemetry`` installed nothing is
imported and nothing happens; with the API but no SDK provider, spans are non-recording and
no attribute is built.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from ..core.decision.attempt import Attempt

TRACER_NAME = "litellm_toolgate"
DECISION_SPAN = "toolgate.decision"

_state: dict[str, Any] = {}


def tracer() -> Any:
    """The package's tracer on the global provider, or None without OpenTelemetry."""
    found = _state.get("tracer", False)
    if found is not False:
        return found
    try:
        from opentelemetry import trace
    except ImportError:
        _state["tracer"] = None
        return None
    from ..version import __version__

    # A proxy tracer: it follows the global provider, also one set after this call.
    _state["tracer"] = trace.get_tracer(TRACER_NAME, __version__)
    return _state["tracer"]


def meter() -> Any:
    """The package's meter on the global meter provider, or None without OpenTelemetry."""
    found = _state.get("meter", False)
    if found is not False:
        return found
    try:
        from opentelemetry import metrics
    except ImportError:
        _state["meter"] = None
        return None
    from ..version import __version__

    _state["meter"] = metrics.get_meter(TRACER_NAME, __version__)
    return _state["meter"]


def parent_context(parent: Any) -> Any:
    """An OpenTelemetry context holding ``parent`` (a span), or None for the current one."""
    if parent is None:
        return None
    from opentelemetry import trace

    if not isinstance(parent, trace.Span):
        return None
    return trace.set_span_in_context(parent)


def trace_decision(attempt: Attempt, parent: Any = None) -> None:
    """One ``toolgate.decision`` span for the decided ``attempt`` (see the module docstring).
    Tracing never decides: any failure here is swallowed."""
    found = tracer()
    if found is None:
        return
    with contextlib.suppress(Exception):  # a broken exporter must not touch the decision
        _span(found, attempt, parent)


def _span(found: Any, attempt: Attempt, parent: Any) -> None:
    from opentelemetry.trace import SpanKind, Status, StatusCode

    now_ns = time.time_ns()
    first, _ = attempt.timings()
    start_ns = now_ns
    if first is not None:
        waited = attempt.now() - first
        if waited > 0:
            start_ns = now_ns - int(waited * 1e9)
    span = found.start_span(
        DECISION_SPAN, context=parent_context(parent), kind=SpanKind.INTERNAL, start_time=start_ns
    )
    if not span.is_recording():
        span.end(end_time=now_ns)
        return
    fault = attempt.quarantined
    records = attempt.records()
    names = sorted({r.tool_name for r in records if r.tool_name is not None})
    attributes: dict[str, Any] = {
        "toolgate.outcome": "released" if fault is None else "quarantined",
        "toolgate.attempt_id": attempt.attempt_id,
        "toolgate.route": attempt.route,
        "toolgate.wire": attempt.wire.value,
        "toolgate.response_seen": attempt.observed,
        "toolgate.calls": len(records),
        "toolgate.withheld_bytes": attempt.argument_bytes,
        "toolgate.tool_names": names,
    }
    if fault is not None:
        attributes.update(
            {
                "toolgate.reason": fault.reason.value,
                "toolgate.family": fault.reason.family.__name__,
                "toolgate.party": fault.reason.party.value,
                "error.type": fault.reason.family.__name__,
            }
        )
    span.set_attributes(attributes)
    for record in records:
        event: dict[str, Any] = {
            "toolgate.state": record.execution_state,
            "toolgate.json_status": record.json_status,
            "toolgate.schema_status": record.schema_status,
            "toolgate.policy_status": record.policy_status,
            "toolgate.argument_bytes": record.buffer_bytes,
        }
        if record.tool_name is not None:
            event["gen_ai.tool.name"] = record.tool_name
        if record.call_id is not None:
            event["gen_ai.tool.call.id"] = record.call_id
        if record.error_class is not None:
            event["toolgate.reason"] = record.error_class
        span.add_event("toolgate.call", event, timestamp=now_ns)
    if fault is not None:
        span.set_status(Status(StatusCode.ERROR, fault.reason.value))
    span.end(end_time=now_ns)


__all__ = ["DECISION_SPAN", "TRACER_NAME", "meter", "parent_context", "trace_decision", "tracer"]
