"""What the policy sees and what it answers.

The policy runs after the schema: it gets each validated call (the parsed value included,
since path scope and command rules need it) and answers approve or deny with a reason. The
reason goes into the decision record and the logs, so it must not quote argument values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call that passed terminal, parse and schema. ``arguments`` is kept out of ``repr``.

    ``type`` is the Responses item type the call came as (``function_call`` for every chat
    tool call and Responses function call; ``custom_tool_call``, ``shell_call``,
    ``apply_patch_call``... or a hosted tool's report such as ``web_search_call``), and
    ``executor`` who runs it: ``client`` (the caller, once released) or ``server`` (the
    upstream already did; the item is a report, never released to run). A policy can
    allow ``web_search_call`` and deny ``shell_call``. For a structured item
    ``arguments`` is its action or operation; for a custom tool ``{"input": text}``.
    """

    attempt_id: str
    index: int
    call_id: str
    name: str
    arguments: Mapping[str, Any] = field(repr=False)
    type: str = "function_call"
    executor: str = "client"


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    approved: bool
    reason: str | None = None

    @classmethod
    def approve(cls, reason: str | None = None) -> PolicyDecision:
        return cls(True, reason)

    @classmethod
    def deny(cls, reason: str) -> PolicyDecision:
        return cls(False, reason)


PolicyResult = PolicyDecision | bool
Policy = Callable[[ToolCall], PolicyResult | Awaitable[PolicyResult]]
"""A sync or async callable; ``True``/``False`` are shorthands for approve/deny."""


def as_decision(result: object) -> PolicyDecision | None:
    """Normalize a policy's answer; None when the answer is not one the gate understands."""
    if isinstance(result, PolicyDecision):
        return result
    if isinstance(result, bool):
        return PolicyDecision(result)
    return None


@dataclass(frozen=True, slots=True)
class ReleasedCall:
    """A call released to the caller: ``arguments`` is the wire's text, byte for byte."""

    index: int
    call_id: str
    name: str
    arguments: str = field(repr=False)
    value: Mapping[str, Any] = field(repr=False)
