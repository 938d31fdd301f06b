"""What the tool loop asks a gate's policy at ``started``, whatever it is composed of.

A gate's policy may be one policy or an :func:`~litellm_toolgate.core.rules.compose.all_of` of
several. At the start of a journaled call the loop needs two things from it:

- :func:`confirm_at_start` (sync) / :func:`aconfirm_at_start` (async): every
  :class:`~.approval.ApprovalPolicy` in the policy confirms the call against the journal row
  (bound to the row, all four checked again, the human asked again when the approval no
  longer holds). The first no is the answer; with no approval policy, approve.
- :func:`tool_arguments`: the arguments the tool is given: the released value with every
  :class:`~.paths.PathScope`'s declared paths resolved (checked again now). Raises
  :class:`~.paths.PathRefused` when one no longer resolves inside its root.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..core.rules.compose import AllOf
from ..core.rules.journal import JournalRow
from ..core.rules.policy import PolicyDecision, ReleasedCall, ToolCall
from .approval import ApprovalJournal, ApprovalPolicy
from .paths import PathScope

__all__ = ["aconfirm_at_start", "confirm_at_start", "members", "tool_arguments"]


def members(policy: Any) -> Iterator[Any]:
    """Every policy inside ``policy`` (itself when it is not a composition), in order."""
    if isinstance(policy, AllOf):
        for member in policy.members:
            yield from members(member)
    elif policy is not None:
        yield policy


def confirm_at_start(
    policy: Any,
    row: JournalRow,
    call: ToolCall | ReleasedCall,
    *,
    journal: ApprovalJournal | None = None,
) -> PolicyDecision:
    """Each approval in ``policy`` confirms ``call`` at ``started``; the first no wins."""
    for member in members(policy):
        if isinstance(member, ApprovalPolicy):
            decision = member.confirm(row, call, journal=journal)
            if not decision.approved:
                return decision
    return PolicyDecision.approve()


async def aconfirm_at_start(
    policy: Any,
    row: JournalRow,
    call: ToolCall | ReleasedCall,
    *,
    journal: ApprovalJournal | None = None,
) -> PolicyDecision:
    """Async twin of :func:`confirm_at_start` (the journal is written off the loop)."""
    for member in members(policy):
        if isinstance(member, ApprovalPolicy):
            decision = await member.aconfirm(row, call, journal=journal)
            if not decision.approved:
                return decision
    return PolicyDecision.approve()


def tool_arguments(policy: Any, call: ToolCall | ReleasedCall) -> dict[str, Any]:
    """The call's arguments for the tool: every path scope's declared paths resolved."""
    scopes = [m for m in members(policy) if isinstance(m, PathScope)]
    if not scopes:
        value = call.value if isinstance(call, ReleasedCall) else call.arguments
        return dict(value)
    name = call.name
    index, call_id = call.index, call.call_id
    arguments = scopes[0].resolve_paths(call)
    del call
    for scope in scopes[1:]:
        arguments = scope.resolve_paths(ToolCall("", index, call_id, name, arguments))
    return arguments
