"""litellm-toolgate: streamed tool calls withheld until the wire, the JSON, the schema and
your policy all agree.

The front door of a house of rooms (docs/architecture.md): ``core`` (sans-I/O, no litellm),
``edge`` (litellm's integration), ``policies``, ``run`` (the tool loop and its journal),
``operate`` (probe, record, verify, metrics, escalation), ``loopback`` and ``demo``. The
rooms are imported lazily, so ``import litellm_toolgate.core`` works without litellm
installed. Here the rooms above the edge are plugged into it (:mod:`.core.plugs`), and the
import paths of modules that moved keep working (:mod:`.moved`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import moved
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
    plugs,
)
from .core.rules.journal import ConversationBehind, RunBusy, RunLeaseLost
from .version import __version__ as __version__

if TYPE_CHECKING:
    from .edge.gate import ToolGate
    from .edge.guardrail.callback import (
        AsyncCallStopped,
        GuardrailConfigError,
        SyncCallStopped,
        ToolGateGuardrail,
        UngatedCallRefused,
    )
    from .edge.stream import AsyncGatedStream, GatedStream
    from .run.journal import open_journal
    from .run.tools import Tool, ToolContext


_LAZY = {
    "ToolGate": "edge.gate",
    "GatedStream": "edge.stream",
    "AsyncGatedStream": "edge.stream",
    "ToolGateGuardrail": "edge.guardrail.callback",
    "GuardrailConfigError": "edge.guardrail.callback",
    "UngatedCallRefused": "edge.guardrail.callback",
    "SyncCallStopped": "edge.guardrail.callback",
    "AsyncCallStopped": "edge.guardrail.callback",
    "Tool": "run.tools",
    "ToolContext": "run.tools",
    "open_journal": "run.journal",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module = importlib.import_module(f".{_LAZY[name]}", __name__)
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _run_loop(gate: Any, options: dict[str, Any]) -> Any:
    from .run.loop import run

    return run(gate, options)


async def _arun_loop(gate: Any, options: dict[str, Any]) -> Any:
    from .run.loop import arun

    return await arun(gate, options)


def _instruments(settings: Any) -> Any:
    from .operate.instruments import start_observing

    return start_observing(settings)


plugs.plug(run_loop=_run_loop, arun_loop=_arun_loop, instruments=_instruments)
moved.install()


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
    "AsyncCallStopped",
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
