"""all_of / & : sync stays sync, an async member makes one coroutine, the first no wins."""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.compose import (
    AllOf,
    DenyReason,
    GatePolicy,
    PolicyAnswerInvalid,
    all_of,
    deny,
    deny_reason,
)
from litellm_toolgate.core.rules.policy import PolicyDecision, ToolCall
from litellm_toolgate.edge.judge import _arun, _run

CALL = ToolCall("att", 0, "call_1", "write_file", {"path": "CANARY-7f3a9c"})


class Recorder:
    def __init__(self) -> None:
        self.asked: list[str] = []

    def sync(self, name: str, answer: Any) -> Any:
        def policy(call: ToolCall) -> Any:
            self.asked.append(name)
            return answer

        return policy

    def asynchronous(self, name: str, answer: Any) -> Any:
        async def policy(call: ToolCall) -> Any:
            await asyncio.sleep(0)
            self.asked.append(name)
            return answer

        return policy


def settle(answer: Any) -> Any:
    if inspect.isawaitable(answer):
        return asyncio.run(_await(answer))
    return answer


async def _await(answer: Any) -> Any:
    return await answer


def test_all_sync_members_answer_synchronously_and_stop_at_the_first_no() -> None:
    r = Recorder()
    policy = all_of(r.sync("a", True), r.sync("b", deny(DenyReason.PATH_HOME)), r.sync("c", True))
    answer = policy(CALL)
    assert isinstance(answer, PolicyDecision)
    assert deny_reason(answer) is DenyReason.PATH_HOME
    assert r.asked == ["a", "b"]


def test_an_async_member_turns_the_rest_into_one_coroutine() -> None:
    r = Recorder()
    policy = all_of(r.sync("a", True), r.asynchronous("b", True), r.sync("c", False))
    answer = policy(CALL)
    assert inspect.isawaitable(answer)
    assert r.asked == ["a"]  # nothing after the async member ran before it was awaited
    decision = settle(answer)
    assert decision == PolicyDecision(False) and r.asked == ["a", "b", "c"]


@pytest.mark.parametrize("first_async", [False, True])
@pytest.mark.parametrize("second_async", [False, True])
def test_every_mix_approves_only_when_all_do(first_async: bool, second_async: bool) -> None:
    for answers in ((True, True), (True, False), (False, True), (False, False)):
        r = Recorder()
        members = [
            (r.asynchronous if is_async else r.sync)(str(i), answer)
            for i, (is_async, answer) in enumerate(
                zip((first_async, second_async), answers, strict=True)
            )
        ]
        decision = settle(all_of(*members)(CALL))
        assert decision.approved == all(answers)
        assert r.asked == (["0"] if not answers[0] else ["0", "1"])


def test_the_gate_runners_take_a_composed_policy_sync_and_async() -> None:
    r = Recorder()
    policy = r.sync("a", True) & GateTrue() & r.asynchronous("b", deny(DenyReason.COMMAND_NUL))
    assert isinstance(policy, AllOf) and len(policy.members) == 3  # flattened
    sync_decision = _run(policy, CALL)
    assert sync_decision is not None and deny_reason(sync_decision) is DenyReason.COMMAND_NUL
    async_decision = asyncio.run(_arun(policy, CALL))
    assert async_decision is not None and deny_reason(async_decision) is DenyReason.COMMAND_NUL


class GateTrue(GatePolicy):
    def __call__(self, call: ToolCall) -> PolicyDecision:
        return PolicyDecision.approve()


def test_a_member_answering_nonsense_is_a_policy_error() -> None:
    r = Recorder()
    policy = all_of(r.sync("a", True), r.sync("b", "yes"))
    with pytest.raises(PolicyAnswerInvalid) as invalid:
        policy(CALL)
    assert "CANARY" not in str(invalid.value)
    assert _run(policy, CALL) is None  # the gate records policy_error
    async_policy = all_of(r.asynchronous("c", True), r.sync("d", None))
    assert asyncio.run(_arun(async_policy, CALL)) is None


def test_a_raising_member_is_a_policy_error_and_stops_the_rest() -> None:
    r = Recorder()

    def boom(call: ToolCall) -> bool:
        raise ValueError(call.arguments["path"])

    policy = all_of(boom, r.sync("after", True))
    assert _run(policy, CALL) is None and r.asked == []


@pytest.mark.parametrize("build", [all_of, lambda: all_of(True)])  # type: ignore[arg-type]
def test_bad_compositions_fail_at_construction(build: Any) -> None:
    with pytest.raises(GateConfigError):
        build()


def test_the_policies_load_where_litellm_cannot() -> None:
    """``litellm_toolgate.policies`` is usable by a tool runner that has no litellm."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import importlib.abc, sys

        class NoLitellm(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name == "litellm" or name.startswith("litellm."):
                    raise ImportError("blocked")
                return None

        sys.meta_path.insert(0, NoLitellm())
        from litellm_toolgate.core.rules.policy import ToolCall
        from litellm_toolgate.policies import Allow, CommandAllowList, deny_reason
        rules = CommandAllowList([Allow("git", args=("status",))], tools={"run": "argv"})
        print(deny_reason(rules(ToolCall("a", 0, "c", "run", {"argv": ["sh"]}))).value)
        print(any(m.startswith("litellm.") or m == "litellm" for m in sys.modules))
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["command_interpreter", "False"]
