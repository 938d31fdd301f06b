"""litellm-toolgate: streamed tool calls withheld until the wire, the JSON, the schema and
your policy all agree.

The core (``litellm_toolgate.core``) is sans-I/O and imports no litellm; the litellm edge
(``litellm_toolgate.edge``) is imported lazily, so ``import litellm_toolgate.core`` works
without litellm installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .core import (
    ArgumentsRejected,
    CarrierMismatch,
    DecisionRecord,
    DuplicateCallId,
    GateConfigError,
    Interrupted,
    LimitExceeded,
    Limits,
    LoopLimitExceeded,
    Party,
    PolicyDecision,
    PolicyDenied,
    QuarantineReason,
    RouteNotGated,
    SchemaRejected,
    StreamFault,
    ToolCall,
    ToolCallQuarantined,
    ToolGateError,
    WireNotObservable,
    WireUnread,
    find_quarantine,
)
from .core.journal import ConversationBehind, RunBusy, RunLeaseLost

if TYPE_CHECKING:
    from .edge.callback import (
        GuardrailConfigError,
        SyncCallStopped,
        ToolGateGuardrail,
        UngatedCallRefused,
    )
    from .edge.gate import ToolGate
    from .edge.journalstores import open_journal
    from .edge.stream import AsyncGatedStream, GatedStream
    from .edge.tools import Tool, ToolContext

__version__ = "0.1.0"

_EDGE = {
    "ToolGate": "gate",
    "GatedStream": "stream",
    "AsyncGatedStream": "stream",
    "ToolGateGuardrail": "callback",
    "GuardrailConfigError": "callback",
    "UngatedCallRefused": "callback",
    "SyncCallStopped": "callback",
    "Tool": "tools",
    "ToolContext": "tools",
    "open_journal": "journalstores",
}


def __getattr__(name: str) -> Any:
    if name in _EDGE:
        import importlib

        module = importlib.import_module(f".edge.{_EDGE[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ArgumentsRejected",
    "AsyncGatedStream",
    "DuplicateCallId",
    "CarrierMismatch",
    "ConversationBehind",
    "DecisionRecord",
    "GateConfigError",
    "GatedStream",
    "GuardrailConfigError",
    "Interrupted",
    "LimitExceeded",
    "LoopLimitExceeded",
    "Limits",
    "Party",
    "PolicyDecision",
    "PolicyDenied",
    "QuarantineReason",
    "SchemaRejected",
    "StreamFault",
    "SyncCallStopped",
    "ToolCall",
    "Tool",
    "ToolCallQuarantined",
    "ToolContext",
    "ToolGate",
    "ToolGateError",
    "ToolGateGuardrail",
    "UngatedCallRefused",
    "RouteNotGated",
    "RunBusy",
    "RunLeaseLost",
    "WireNotObservable",
    "WireUnread",
    "find_quarantine",
    "open_journal",
]
