"""What the callback tells litellm of each decision, and how it refuses a call.

Every decision goes into litellm's standard logging through
``add_standard_logging_guardrail_information_to_request_data`` (:func:`report`): the
sanitized records, never argument text. A quarantined whole response is also taken out of
what litellm's own logging keeps of the call (:func:`sanitize_logged_response`). A refusal
(:func:`refuse`) is recorded and reported like any decision, then raised: as the proxy's
error inside the proxy, as its guardrail-intervention twin (:mod:`intervention`) elsewhere.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Mapping
from typing import Any, NoReturn

from ...core.decision.attempt import Attempt
from ...core.errors import ToolCallQuarantined, raise_clean
from ..gate import ToolGate
from ..guardrailerrors import as_intervention
from ..logs import emit_records
from ..seam.symbols import CustomGuardrail, GuardrailEventHooks


def report(
    guardrail: CustomGuardrail, request: dict[str, Any], attempt: Attempt, started: float
) -> None:
    """The attempt's sanitized records into litellm's standard logging for this request."""
    fault = attempt.quarantined
    summary = attempt.summary()
    ended = time.time()
    # Logging must never decide: the decision stands as made whatever logging does.
    with contextlib.suppress(Exception):
        guardrail.add_standard_logging_guardrail_information_to_request_data(
            guardrail_json_response=summary,
            request_data=request,
            guardrail_status="success" if fault is None else "guardrail_intervened",
            start_time=started,
            end_time=ended,
            duration=ended - started,
            guardrail_provider="litellm_toolgate",
            event_type=GuardrailEventHooks.post_call,
        )


def sanitize_logged_response(request: Mapping[str, Any], attempt: Attempt) -> None:
    """Put the attempt's sanitized record where litellm keeps the raw answer it read.

    litellm's logging object holds the upstream's body as ``original_response`` (its
    ``post_call`` stores it once the body was read) and hands it to every failure logger
    (``log_failure_event``, ``async_log_failure_event``, its integrations) when the call
    fails: for a quarantined whole response, the very argument text the gate withheld.
    """
    logging_obj = request.get("litellm_logging_obj")
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    record = json.dumps(attempt.summary(), separators=(",", ":"), default=str)
    details["original_response"] = record
    if "response" in details:
        details["response"] = None


def refuse(
    guardrail: CustomGuardrail,
    request: dict[str, Any],
    attempt: Attempt,
    started: float,
    *,
    in_proxy: bool,
) -> NoReturn:
    """Record and report a quarantined ``attempt``, then raise its quarantine."""
    emit_records(attempt)
    report(guardrail, request, attempt, started)
    fault = attempt.quarantined
    assert fault is not None
    raise_clean(fault if in_proxy else as_intervention(fault))


def refuse_unobserved(
    guardrail: CustomGuardrail,
    gate: ToolGate,
    request: dict[str, Any],
    started: float,
    *,
    in_proxy: bool = True,
) -> NoReturn:
    """Refuse a result whose wire the gate did not read (no tap, or a tap of the other kind)."""
    attempt = gate.new_attempt()
    with contextlib.suppress(ToolCallQuarantined):
        attempt.conclude()
    refuse(guardrail, request, attempt, started, in_proxy=in_proxy)


__all__ = ["refuse", "refuse_unobserved", "report", "sanitize_logged_response"]
