"""The sans-I/O core: bytes and events in, decisions out. Imports no litellm, does no I/O.

Layers, bottom up: ``sse`` (bytes → SSE messages), ``chat`` (messages → wire events),
``state`` (the transition tables), ``strictjson`` and ``registry`` (parse and schema),
``attempt`` (one response's calls from first fragment to release or quarantine).
"""

from .attempt import Carrier, CarrierCall, ChatAttempt
from .errors import (
    ArgumentsRejected,
    CarrierMismatch,
    GateConfigError,
    Interrupted,
    LimitExceeded,
    Party,
    PolicyDenied,
    QuarantineReason,
    SchemaRejected,
    StreamFault,
    ToolCallQuarantined,
    ToolGateError,
    WireNotObservable,
)
from .limits import Limits
from .policy import Policy, PolicyDecision, ReleasedCall, ToolCall
from .records import DecisionRecord
from .registry import ToolRegistry

__all__ = [
    "ArgumentsRejected",
    "Carrier",
    "CarrierCall",
    "CarrierMismatch",
    "ChatAttempt",
    "DecisionRecord",
    "GateConfigError",
    "Interrupted",
    "LimitExceeded",
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
    "WireNotObservable",
]
