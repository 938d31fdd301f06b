"""Running the caller's policy, sync or async, so that a failure is a decision, not a crash.

A policy that raises, or answers something other than a bool or a PolicyDecision, yields
None: the attempt records ``policy_error`` and quarantines. The exception itself is dropped
(a policy may well quote the arguments in it).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable

from ..core.policy import Policy, PolicyDecision, ToolCall, as_decision

PolicyRunner = Callable[[ToolCall], PolicyDecision | None]


def sync_policy(policy: Policy | None) -> PolicyRunner:
    def run(call: ToolCall) -> PolicyDecision | None:
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

    return run


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


async def async_policy(policy: Policy | None, call: ToolCall) -> PolicyDecision | None:
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
