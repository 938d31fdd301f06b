"""The sans-I/O core: bytes and events in, decisions out. Imports no litellm, does no I/O.

Layers, bottom up: ``sse`` (bytes → SSE messages), ``wires`` (``wires.chat``,
``wires.responses`` and ``wires.anthropic``: messages → wire events, one module per wire, on
``wires.loads``, which reads a message's JSON, and ``wires.responses_items``, the Responses
item taxonomy), ``state`` (the transition tables, per wire),
``strictjson`` and ``registry`` (parse and schema), ``call`` and ``ledger`` (each call's
accumulator and stages), ``attempt`` (one response's calls from first fragment to release or
quarantine).
"""

from .decision.attempt import Attempt, Carrier, CarrierCall
from .decision.limits import Limits
from .decision.state import Wire
from .errors import (
    ArgumentsRejected,
    CarrierMismatch,
    DuplicateCallId,
    GateConfigError,
    Interrupted,
    LimitExceeded,
    LoopLimitExceeded,
    Party,
    PolicyDenied,
    QuarantineReason,
    RouteNotGated,
    SchemaRejected,
    StreamFault,
    ToolCallQuarantined,
    ToolGateError,
    WireNotObservable,
    WireUnread,
    find_quarantine,
)
from .records.record import DecisionRecord
from .rules.policy import Policy, PolicyDecision, ReleasedCall, ToolCall
from .values.registry import ToolRegistry

__all__ = [
    "ArgumentsRejected",
    "Attempt",
    "Carrier",
    "CarrierCall",
    "DuplicateCallId",
    "CarrierMismatch",
    "DecisionRecord",
    "GateConfigError",
    "Interrupted",
    "LimitExceeded",
    "LoopLimitExceeded",
    "Limits",
    "Party",
    "Policy",
    "PolicyDecision",
    "PolicyDenied",
    "QuarantineReason",
    "ReleasedCall",
    "SchemaRejected",
    "StreamFault",
    "ToolCall",
    "ToolCallQuarantined",
    "ToolGateError",
    "ToolRegistry",
    "Wire",
    "RouteNotGated",
    "WireNotObservable",
    "WireUnread",
    "find_quarantine",
]
