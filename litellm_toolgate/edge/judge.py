"""Running the caller's policy, sync or async, so that a failure is a decision, not a crash.

A policy that raises, or answers something other than a bool or a PolicyDecision, yields
None: the attempt records ``policy_error`` and quarantines. The exception itself is dropped
(a policy may well quote the arguments in it). :func:`judge` and :func:`ajudge` take every
validated call of an attempt through the policy, in index order, and stop at the first no.
:func:`approve_whole` and :func:`aapprove_whole` are the whole decision on a non-streamed
result: conclude against what litellm assembled, then the policy.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.decision.attempt import Attempt, Carrier
from ..core.errors import ToolCallQuarantined
from ..core.rules.policy import Policy, PolicyDecision, ToolCall, as_decision
from .offload import decide_off_loop


def judge(attempt: Attempt, calls: list[ToolCall], policy: Policy | None) -> bool:
    """Record the policy's answer for every call; False once the attempt is quarantined."""
    for call in calls:
        started = time.monotonic()
        decision = _run(policy, call)
        if not _record(attempt, call, decision, started):
            return False
    return True


async def ajudge(attempt: Attempt, calls: list[ToolCall], policy: Policy | None) -> bool:
    """Async twin of :func:`judge`: an async policy is awaited on the caller's loop."""
    for call in calls:
        started = time.monotonic()
        decision = await _arun(policy, call)
        if not _record(attempt, call, decision, started):
            return False
    return True


def approve_whole(attempt: Attempt, carrier: Carrier, policy: Policy | None) -> bool:
    """Conclude a whole result's attempt and run the policy; False once it is quarantined."""
    calls = _conclude(attempt, carrier)
    return calls is not None and judge(attempt, calls, policy)


async def aapprove_whole(
    attempt: Attempt, carrier_of: Callable[[Any], Carrier], result: Any, policy: Policy | None
) -> bool:
    """Async twin of :func:`approve_whole`; the conclusion follows the offload rule."""
    calls = await decide_off_loop(attempt, lambda: _conclude(attempt, carrier_of(result)))
    return calls is not None and await ajudge(attempt, calls, policy)


def _conclude(attempt: Attempt, carrier: Carrier) -> list[ToolCall] | None:
    try:
        return attempt.conclude(carrier)
    except ToolCallQuarantined:
        return None


def _record(
    attempt: Attempt, call: ToolCall, decision: PolicyDecision | None, started: float
) -> bool:
    try:
        attempt.decide(call.index, decision, time.monotonic() - started, choice=call.choice)
    except ToolCallQuarantined:
        return False
    return True


def _run(policy: Policy | None, call: ToolCall) -> PolicyDecision | None:
    if policy is None:
        return PolicyDecision.approve()
    failed = False
    result: object = None
    try:
        result = policy(call)
        if inspect.isawaitable(result):
            result = _run_awaitable(result)
    except Exception:
        failed = True
    return None if failed else as_decision(result)


def _run_awaitable(awaitable: Awaitable[object]) -> object:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> object:
            return await awaitable

        return asyncio.run(wait())
    # An async policy cannot be awaited from sync code running inside an event loop.
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    raise RuntimeError("async policy called from a running event loop; use acompletion")


async def _arun(policy: Policy | None, call: ToolCall) -> PolicyDecision | None:
    if policy is None:
        return PolicyDecision.approve()
    failed = False
    result: object = None
    try:
        result = policy(call)
        if inspect.isawaitable(result):
            result = await result
    except Exception:
        failed = True
    return None if failed else as_decision(result)
