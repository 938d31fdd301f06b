"""The sanitized decision record kept for every tool call, released or not.

A record is enough to reconstruct why the gate decided as it did, and holds nothing the
model wrote: ids are opaque and content-independent, sizes are byte counts, schema failures
are a keyword and a JSON Pointer whose model-chosen keys are redacted. ``content_hmac`` is
filled only when the gate was given a key (a full-length keyed HMAC-SHA256, for workflows
that must correlate by content); a plain digest is never stored.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

JsonStatus = Literal["valid", "invalid", "not_parsed"]
SchemaStatus = Literal["valid", "invalid", "unknown_tool", "not_checked"]
PolicyStatus = Literal["approved", "denied", "error", "not_checked"]
ExecutionState = Literal["released", "quarantined", "withheld"]


class DecisionRecord(BaseModel):
    """One tool call's path through the gate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    observed_at: datetime
    run_id: str
    attempt_id: str
    response_id: str | None
    item_id: str
    call_id: str | None
    model_route: str
    stream_event: str
    """The last wire event that touched this call (``argument_delta``, ``finish``, ...)."""
    tool_name: str | None
    """The registered name, its configured category, or None for an unregistered name."""
    buffer_bytes: int
    terminal_seen: bool
    json_status: JsonStatus
    trailing_data: bool | None
    schema_status: SchemaStatus
    schema_keyword: str | None
    schema_path: str | None
    policy_status: PolicyStatus
    policy_reason: str | None
    execution_state: ExecutionState
    error_class: str | None
    """The :class:`QuarantineReason` value that stopped this call (or its attempt)."""
    stream_ms: float
    """From the call's first fragment to the stream's terminal (or the fault)."""
    validation_ms: float
    policy_ms: float
    content_hmac: str | None = None
    item_type: str = "function_call"
    """The Responses item type the call came as (``web_search_call``, ``shell_call``...); a
    chat tool call is a ``function_call``."""
    executor: Literal["client", "server"] = "client"
    """Who runs it: ``client`` (released to the caller) or ``server`` (a hosted tool's
    report, never released as a call)."""
