"""Where the rooms above the edge plug into it, so that the edge never imports them.

``ToolGate.run`` drives the run's tool loop, and the callback starts the operator's metrics
and route escalation when its settings name them; both live in rooms that import the edge
(``litellm_toolgate.run``, ``litellm_toolgate.operate``). The package's front door
(``litellm_toolgate/__init__.py``), which runs before any module of the package, plugs them
in here, each importing its room only when first used. Nothing here does I/O or imports
litellm; a plug left empty is a :class:`~.errors.GateConfigError`, never a silent no-op.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from .errors import GateConfigError
from .rules.loop import RunResult

RunLoop = Callable[[Any, dict[str, Any]], RunResult]
AsyncRunLoop = Callable[[Any, dict[str, Any]], Awaitable[RunResult]]
Instruments = Callable[[Any], Any]
"""Takes the callback's settings; starts what they name and answers the route filter (an
object with ``filter(deployments) -> deployments``), or None when escalation is off."""


class _Plugs:
    __slots__ = ("arun_loop", "instruments", "run_loop")

    def __init__(self) -> None:
        self.run_loop: RunLoop | None = None
        self.arun_loop: AsyncRunLoop | None = None
        self.instruments: Instruments | None = None


PLUGS = _Plugs()


def plug(
    *,
    run_loop: RunLoop,
    arun_loop: AsyncRunLoop,
    instruments: Instruments,
) -> None:
    """Fill every plug (the front door does, once, at import)."""
    PLUGS.run_loop, PLUGS.arun_loop, PLUGS.instruments = run_loop, arun_loop, instruments


def _unplugged(what: str) -> GateConfigError:
    return GateConfigError(
        f"{what} is not plugged in: import litellm_toolgate (the package) before using it"
    )


def run_loop() -> RunLoop:
    if PLUGS.run_loop is None:
        raise _unplugged("the tool loop")
    return PLUGS.run_loop


def arun_loop() -> AsyncRunLoop:
    if PLUGS.arun_loop is None:
        raise _unplugged("the tool loop")
    return PLUGS.arun_loop


def instruments() -> Instruments:
    if PLUGS.instruments is None:
        raise _unplugged("metrics and route escalation")
    return PLUGS.instruments


__all__ = ["PLUGS", "arun_loop", "instruments", "plug", "run_loop"]
