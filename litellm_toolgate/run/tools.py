"""Executors of the tool loop: a plain callable per tool, its effect and its ambiguous-row rule.

``Tool(fn, effect="non_idempotent")`` registers ``fn`` (sync or async) for one tool name in
``gate.run(executors={"name": Tool(...)})``. ``fn`` is called with the call's validated
arguments (one ``dict``); if it has a parameter named ``context`` it also gets a
:class:`ToolContext` (``context=``): the call's idempotency key, to pass downstream so the
target system can drop a repeat, and the claim's fencing token, to refuse a worker whose
claim was taken over.

``on_ambiguous`` says what a resumed run does with this tool's call that a crash left
decided or started but not finished (the tool may have run, or not):

- ``"fail"`` (default): nothing runs; the run raises ``AmbiguousCalls`` listing the rows,
  until an operator reconciles them (``toolgate journal reconcile``).
- ``"retry_with_key"``: run it again with the same idempotency key (once the old claim's
  lease expired), for tools whose target system deduplicates by that key.
- ``"ask"``: ``ask(row)`` (sync or async) decides: true runs it again, false does not (the
  row is reconciled as not run again).
- a callable: ``verify(context)`` (sync or async) inspects the target system and says
  whether the call ran: true reconciles the row as having run, false runs it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..core.errors import GateConfigError
from ..core.rules.journal import Effect, JournalRow

Rule = Literal["fail", "retry_with_key", "ask"]
_RULES = ("fail", "retry_with_key", "ask")


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool may want besides its arguments. No argument text."""

    run_id: str
    round: int
    call_id: str
    tool: str
    idempotency_key: str
    fencing_token: int
    check_token: Callable[[str, int], bool]

    def still_current(self) -> bool:
        """Is this claim's fencing token still the call's current one (a newer claim by
        another worker makes it stale)?"""
        return self.check_token(self.idempotency_key, self.fencing_token)

    def __repr__(self) -> str:
        return (
            f"ToolContext(run_id={self.run_id!r}, round={self.round}, call_id={self.call_id!r}, "
            f"tool={self.tool!r}, fencing_token={self.fencing_token})"
        )


class Tool:
    """One tool's executor (see the module's text)."""

    __slots__ = ("ask", "effect", "fn", "on_ambiguous", "verify", "wants_context")

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        effect: Effect | str,
        on_ambiguous: Rule | Callable[[ToolContext], Any] = "fail",
        ask: Callable[[JournalRow], Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise GateConfigError("Tool needs a callable (sync or async)")
        try:
            self.effect = Effect(effect.value if isinstance(effect, Effect) else effect)
        except ValueError:
            raise GateConfigError(
                "Tool effect must be 'read_only', 'idempotent' or 'non_idempotent'"
            ) from None
        self.verify: Callable[[ToolContext], Any] | None = None
        if callable(on_ambiguous):
            self.verify = on_ambiguous
            self.on_ambiguous = "verify"
        elif on_ambiguous in _RULES:
            self.on_ambiguous = on_ambiguous
        else:
            raise GateConfigError(
                "Tool on_ambiguous must be 'fail', 'retry_with_key', 'ask' or a verify callable"
            )
        if (self.on_ambiguous == "ask") != (ask is not None):
            raise GateConfigError("Tool(on_ambiguous='ask') needs ask=, and only it takes one")
        if ask is not None and not callable(ask):
            raise GateConfigError("Tool ask= must be a callable (sync or async)")
        self.fn = fn
        self.ask = ask
        self.wants_context = _takes_context(fn)

    def __repr__(self) -> str:
        return f"Tool(effect={self.effect.value!r}, on_ambiguous={self.on_ambiguous!r})"


def _takes_context(fn: Callable[..., Any]) -> bool:
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    context = parameters.get("context")
    return context is not None and context.kind in (
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.KEYWORD_ONLY,
    )


def check_executors(executors: Any) -> dict[str, Tool]:
    """The run's executors, checked: a mapping of tool names to :class:`Tool`."""
    if not isinstance(executors, dict) or not executors:
        raise GateConfigError("executors must map each tool name to a Tool(...)")
    for name, tool in executors.items():
        if not isinstance(name, str) or not name or not isinstance(tool, Tool):
            raise GateConfigError("executors must map each tool name to a Tool(...)")
    return dict(executors)


__all__ = ["Rule", "Tool", "ToolContext", "check_executors"]
