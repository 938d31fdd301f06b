"""Policies built from policies: :func:`all_of` and the ``&`` of :class:`GatePolicy`.

A gate policy is any callable taking a :class:`~.policy.ToolCall` and answering a bool or a
:class:`~.policy.PolicyDecision`, directly or through an awaitable. :func:`all_of` asks its
members in order and stops at the first no, whose decision (and reason) it hands on
unchanged. It stays synchronous for as long as its members answer synchronously: the first
member that answers with an awaitable turns the rest of the evaluation into one coroutine,
which the gate awaits (async calls) or runs to completion (sync calls), exactly as it does
for a policy that is async itself. So ``all_of(path_scope, my_async_check)`` works under
``gate.completion`` and ``gate.acompletion`` alike, and a chain of sync members never
touches an event loop.

A member that answers something that is not a decision makes the whole answer invalid: the
composition raises :class:`PolicyAnswerInvalid` (no text of the call in it), which the gate
records as ``policy_error``, as it would for that member alone.

The built-in policies deny with a :class:`DenyReason`: the decision's ``reason`` is the
reason's stable value (a code, never an argument value), and :func:`deny_reason` reads it
back from a decision or a decision record.
"""

from __future__ import annotations

import enum
import inspect
from collections.abc import Awaitable, Generator, Sequence
from typing import Any

from ..errors import GateConfigError, ToolGateError
from .policy import Policy, PolicyDecision, PolicyResult, ToolCall, as_decision

__all__ = [
    "AllOf",
    "DenyReason",
    "GatePolicy",
    "PolicyAnswerInvalid",
    "all_of",
    "deny",
    "deny_reason",
]


class DenyReason(enum.Enum):
    """Why a built-in policy said no. The value is what the decision record carries."""

    # Path scope.
    PATH_NOT_TEXT = "path_not_text"
    """A declared path argument is not a non-empty string."""
    PATH_NUL = "path_nul"
    """A NUL byte: the OS would cut the path there, so what is checked is not what is opened."""
    PATH_HOME = "path_home"
    """A leading ``~``: a shell or ``expanduser`` would make it someone's home directory."""
    PATH_PARENT = "path_parent"
    """A ``..`` component, refused outright wherever it appears."""
    PATH_OUTSIDE_ROOT = "path_outside_root"
    """An absolute path outside the root, or one a symlink leads out of it."""
    PATH_SYMLINK_LOOP = "path_symlink_loop"
    """Resolving took more symlink hops than the OS allows (a loop, or a chain that long)."""
    PATH_UNRESOLVABLE = "path_unresolvable"
    """A component could not be examined (permission, a file where a folder must be, ...)."""
    # Command allow-list.
    COMMAND_NOT_ARGV = "command_not_argv"
    """Not a non-empty list of strings: a shell string is refused, never split."""
    COMMAND_NUL = "command_nul"
    """A NUL byte in the program or an argument."""
    COMMAND_ENV_ASSIGNMENT = "command_env_assignment"
    """``NAME=value cmd``: an environment assignment in front of the program."""
    COMMAND_SHELL_BUILTIN = "command_shell_builtin"
    """``cd``, ``export``, ``source``, ``eval``, ``exec``, ``alias``...: only a shell runs them."""
    COMMAND_PROGRAM = "command_program"
    """The program is not on the allow-list (by name or by exact path)."""
    COMMAND_INTERPRETER = "command_interpreter"
    """A shell or language interpreter: it runs arbitrary code."""
    COMMAND_WRAPPER = "command_wrapper"
    """A program that runs another command (``env``, ``sudo``, ``xargs``, ``timeout``...)."""
    COMMAND_PROJECT_SCRIPTS = "command_project_scripts"
    """A program that runs the project's own scripts (``npm``, ``make``...)."""
    COMMAND_EXEC_OPTION = "command_exec_option"
    """An option or subcommand known to make the program run other code or config."""
    COMMAND_ARGUMENT = "command_argument"
    """An argument that none of the rule's argument patterns allows."""
    COMMAND_NO_GRAMMAR = "command_no_grammar"
    """The program has no option grammar and its rule does not say ``any_arguments_unsafe``."""
    COMMAND_UNKNOWN_OPTION = "command_unknown_option"
    """An option or subcommand the program's grammar does not list (an abbreviation too)."""
    COMMAND_UNSAFE_VALUE = "command_unsafe_value"
    """A value, script or operand outside the program's safe subset (``sed 1e``, ``file://``)."""
    # Approval.
    APPROVAL_DENIED = "approval_denied"
    """A human said no."""
    APPROVAL_EXPIRED = "approval_expired"
    """Nobody answered in time: recorded as expired, never as a human's no."""
    APPROVAL_FAILED = "approval_failed"
    """The approver (or the renderer) raised, or answered something that is not an answer."""
    APPROVAL_UNKNOWN_TOOL = "approval_unknown_tool"
    """The tool is not among the approval policy's tools, so its schema cannot be bound."""


_BY_VALUE = {reason.value: reason for reason in DenyReason}


def deny(reason: DenyReason) -> PolicyDecision:
    """A denial whose reason is ``reason``'s stable value."""
    return PolicyDecision.deny(reason.value)


def deny_reason(decision: object) -> DenyReason | None:
    """The :class:`DenyReason` of a decision (or of a decision record's ``policy_reason``)."""
    reason = getattr(decision, "reason", None)
    if reason is None:
        reason = getattr(decision, "policy_reason", None)
    return _BY_VALUE.get(reason) if isinstance(reason, str) else None


class PolicyAnswerInvalid(ToolGateError):
    """A composed policy's member answered something other than a bool or a decision."""

    def __init__(self, position: int) -> None:
        super().__init__(f"member {position} of a composed policy gave no decision")
        self.position = position


class GatePolicy:
    """Base of the built-in policies: ``a & b`` is :func:`all_of(a, b) <all_of>`.

    The operator works with plain functions on either side (``my_check & scope``).
    """

    def __call__(self, call: ToolCall) -> PolicyResult | Awaitable[PolicyResult]:
        raise NotImplementedError

    def __and__(self, other: Policy) -> AllOf:
        return all_of(self, other)

    def __rand__(self, other: Policy) -> AllOf:
        return all_of(other, self)


class AllOf(GatePolicy):
    """Every member must approve, asked in order; the first no is the answer."""

    __slots__ = ("members",)

    def __init__(self, members: Sequence[Policy]) -> None:
        self.members = tuple(members)

    def __call__(self, call: ToolCall) -> PolicyDecision | Awaitable[PolicyDecision]:
        steps = self._steps(call)
        # Sync until a member answers with an awaitable; from then on, one coroutine.
        for position, answer in steps:
            if inspect.isawaitable(answer):
                return self._finish(steps, position, answer)
            decision = _checked(position, answer)
            if not decision.approved:
                steps.close()
                return decision
        return PolicyDecision.approve()

    def _steps(self, call: ToolCall) -> Generator[tuple[int, Any], None, None]:
        for position, member in enumerate(self.members):
            yield position, member(call)

    async def _finish(
        self, steps: Generator[tuple[int, Any], None, None], position: int, pending: Awaitable[Any]
    ) -> PolicyDecision:
        decision = _checked(position, await pending)
        if not decision.approved:
            return decision
        for later, answer in steps:
            settled = await answer if inspect.isawaitable(answer) else answer
            decision = _checked(later, settled)
            if not decision.approved:
                return decision
        return PolicyDecision.approve()

    def __repr__(self) -> str:
        return f"AllOf({len(self.members)} policies)"


def _checked(position: int, answer: object) -> PolicyDecision:
    decision = as_decision(answer)
    if decision is None:
        raise PolicyAnswerInvalid(position)
    return decision


def all_of(*policies: Policy) -> AllOf:
    """A policy that approves a call only when every one of ``policies`` does.

    Members are asked in the order given (put cheap, local checks before a human), sync or
    async; nested compositions are flattened.
    """
    members: list[Policy] = []
    for policy in policies:
        if not callable(policy):
            raise GateConfigError("every member of all_of() must be a callable policy")
        members.extend(policy.members if isinstance(policy, AllOf) else (policy,))
    if not members:
        raise GateConfigError("all_of() needs at least one policy")
    return AllOf(members)
