"""The approval policy: bound to arguments, schema, version and expiry; a timeout is EXPIRED.

Journaled cases use the real SQLite journal (``sqlite:///:memory:``); the approver is a
plain function or coroutine standing in for a human.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.approval import ApprovalRequest
from litellm_toolgate.core.rules.compose import DenyReason, deny_reason
from litellm_toolgate.core.rules.journal import (
    ApprovalStatus,
    Effect,
    JournalRow,
    NewCall,
    argument_digest,
    schema_digest,
)
from litellm_toolgate.core.rules.policy import PolicyDecision, ReleasedCall, ToolCall
from litellm_toolgate.edge.judge import _arun, _run
from litellm_toolgate.policies.approval import ApprovalPolicy
from litellm_toolgate.run.journal import open_journal

CANARY = "CANARY-7f3a9c"
SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": SCHEMA}}]
ARGS = {"path": "notes.txt", "content": CANARY}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Human:
    """Answers as told, and keeps what it was shown."""

    def __init__(self, answer: Any = True) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        return self.answer


class Away:
    """A human who does not answer until released (a sync approver that blocks)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.asked = 0

    def __call__(self, request: ApprovalRequest) -> bool:
        self.asked += 1
        self.release.wait(10)
        return True


def call(arguments: dict[str, Any] | None = None, call_id: str = "call_1") -> ToolCall:
    return ToolCall("att-1", 0, call_id, "write_file", dict(arguments or ARGS))


def sync(p: ApprovalPolicy, c: ToolCall) -> PolicyDecision:
    """The policy's answer to a call, with a sync approver (the gate's own sync runner)."""
    decision = _run(p, c)
    assert decision is not None
    return decision


def policy(ask: Any, **options: Any) -> ApprovalPolicy:
    options.setdefault("version", "v1")
    return ApprovalPolicy(ask, tools=TOOLS, **options)


@pytest.fixture
def journal() -> Iterator[Any]:
    j = open_journal("sqlite:///:memory:")
    try:
        yield j
    finally:
        j.close()


def decided(journal: Any, c: ToolCall, *, run_id: str = "run-1") -> JournalRow:
    return journal.decide(  # type: ignore[no-any-return]
        NewCall(
            run_id=run_id,
            attempt_id=c.attempt_id,
            round=0,
            route="chat",
            call_id=c.call_id,
            tool=c.name,
            effect=Effect.NON_IDEMPOTENT,
            argument_digest=argument_digest(dict(c.arguments), hmac_key=None),
        )
    )


def digests(c: ToolCall) -> dict[str, str]:
    return {
        "argument_digest": argument_digest(dict(c.arguments), hmac_key=None),
        "schema_digest": schema_digest(SCHEMA),
    }


def test_an_approval_is_bound_to_digests_version_and_expiry() -> None:
    human, clock = Human(True), Clock()
    p = policy(human, ttl=60, clock=clock)
    assert p(call()) == PolicyDecision.approve()
    [request] = human.requests
    assert request.argument_digest == digests(call())["argument_digest"]
    assert request.schema_digest == digests(call())["schema_digest"]
    assert request.policy_version == "v1" and not request.again
    grant = p.grant("write_file", "call_1")
    assert grant is not None and grant.status is ApprovalStatus.APPROVED
    assert grant.expires_at == clock.now + 60
    assert (grant.argument_digest, grant.schema_digest) == tuple(digests(call()).values())


def test_the_approver_sees_no_argument_text_by_default() -> None:
    human = Human(True)
    policy(human)(call())
    [request] = human.requests
    assert request.arguments is None
    assert request.shown == "write_file(content: string[13], path: string[9])"
    for text in (request.shown, repr(request), str(request)):
        assert CANARY not in text and "notes.txt" not in text


def test_render_is_what_the_human_sees_and_arguments_need_an_opt_in() -> None:
    human = Human(True)
    policy(human, render=lambda c: f"write {c.arguments['path']}")(call())
    assert human.requests[0].shown == "write notes.txt"
    assert human.requests[0].arguments is None
    assert "notes.txt" not in repr(human.requests[0])
    opted = Human(True)
    policy(opted, show_arguments=True)(call())
    assert opted.requests[0].arguments == ARGS
    assert CANARY not in repr(opted.requests[0])


def test_the_same_arguments_are_not_asked_twice_other_arguments_are() -> None:
    human = Human(True)
    p = policy(human)
    assert sync(p, call()).approved and sync(p, call()).approved
    assert len(human.requests) == 1
    assert sync(p, call({"path": "notes.txt", "content": "changed-value"})).approved
    assert len(human.requests) == 2  # same call id, other arguments: asked again


def test_a_human_no_is_denied_and_a_timeout_is_expired_never_denied() -> None:
    no = Human(False)
    p = policy(no)
    decision = p(call())
    assert deny_reason(decision) is DenyReason.APPROVAL_DENIED
    grant = p.grant("write_file", "call_1")
    assert grant is not None and grant.status is ApprovalStatus.DENIED

    away = Away()
    late = policy(away, timeout=0.2)
    try:
        decision = late(call())
    finally:
        away.release.set()
    assert deny_reason(decision) is DenyReason.APPROVAL_EXPIRED
    grant = late.grant("write_file", "call_1")
    assert grant is not None and grant.status is ApprovalStatus.EXPIRED
    assert grant.expires_at is None


def test_an_async_approver_times_out_as_expired() -> None:
    asked: list[ApprovalRequest] = []

    async def slow(request: ApprovalRequest) -> bool:
        asked.append(request)
        await asyncio.sleep(30)
        return True

    p = policy(slow, timeout=0.2)
    answer = p(call())
    assert asyncio.iscoroutine(answer)
    answer.close()
    decision = asyncio.run(_arun(p, call()))
    assert decision is not None and deny_reason(decision) is DenyReason.APPROVAL_EXPIRED
    assert len(asked) == 1
    grant = p.grant("write_file", "call_1")
    assert grant is not None and grant.status is ApprovalStatus.EXPIRED
    # The sync gate runs an async approver to completion outside a loop.
    fast = policy(_async_yes)
    assert _run(fast, call()) == PolicyDecision.approve()


async def _async_yes(request: ApprovalRequest) -> bool:
    return True


@pytest.mark.parametrize(
    "ask",
    [
        lambda request: (_ for _ in ()).throw(ValueError(CANARY)),
        lambda request: "yes",
    ],
    ids=["raises", "nonsense"],
)
def test_a_failing_approver_denies_as_failed_and_leaks_nothing(ask: Any) -> None:
    p = policy(ask)
    decision = p(call())
    assert deny_reason(decision) is DenyReason.APPROVAL_FAILED
    assert p.grant("write_file", "call_1") is None


def test_a_failing_renderer_denies_without_asking() -> None:
    human = Human(True)
    p = policy(human, render=lambda c: c.arguments["missing"])
    assert deny_reason(p(call())) is DenyReason.APPROVAL_FAILED
    assert human.requests == []


def test_uncovered_tools_pass_and_unknown_covered_tools_are_denied() -> None:
    human = Human(True)
    p = policy(human, only={"write_file", "delete_file"})
    assert sync(p, ToolCall("a", 0, "c", "read_file", {})).approved
    decision = p(ToolCall("a", 0, "c", "delete_file", {"path": "x"}))
    assert deny_reason(decision) is DenyReason.APPROVAL_UNKNOWN_TOOL
    assert human.requests == []


def test_still_valid_checks_all_four_on_the_row(journal: Any) -> None:
    human, clock = Human(True), Clock()
    p = policy(human, ttl=60, clock=clock)
    c = call()
    assert sync(p, c).approved
    row = decided(journal, c)
    assert p.still_valid(row, **digests(c))  # the policy's own grant, before it is bound
    assert p.confirm(row, c, journal=journal).approved
    [row] = journal.calls("run-1")
    assert row.approval_status is ApprovalStatus.APPROVED
    assert row.approval_argument_digest == digests(c)["argument_digest"]
    assert row.approval_schema_digest == digests(c)["schema_digest"]
    assert row.approval_policy_version == "v1"
    assert row.approval_expires_at == clock.now + 60
    assert len(human.requests) == 1  # bound and confirmed without asking again
    changed = call({"path": "notes.txt", "content": "changed-value"})
    assert not p.still_valid(row, **digests(changed))
    assert not p.still_valid(
        row,
        argument_digest=digests(c)["argument_digest"],
        schema_digest=schema_digest({"type": "object"}),
    )
    assert not policy(human, version="v2").still_valid(row, **digests(c))
    clock.now += 61
    assert not p.still_valid(row, **digests(c))


def test_at_start_an_approval_of_other_arguments_asks_again(journal: Any) -> None:
    """The reviewed-value/changed-value case: the row is for other arguments than approved."""
    human = Human(True)
    p = policy(human)
    assert sync(p, call({"path": "notes.txt", "content": "reviewed-value"})).approved
    executed = call({"path": "notes.txt", "content": "changed-value"})
    row = decided(journal, executed)
    human.answer = False
    decision = p.confirm(row, executed, journal=journal)
    assert deny_reason(decision) is DenyReason.APPROVAL_DENIED
    assert [r.again for r in human.requests] == [False, True]
    [row] = journal.calls("run-1")
    assert row.approval_status is ApprovalStatus.DENIED
    assert row.approval_argument_digest == digests(executed)["argument_digest"]


@pytest.mark.parametrize("change", ["schema", "version", "expiry"])
def test_at_start_a_changed_schema_version_or_expiry_asks_again(journal: Any, change: str) -> None:
    human, clock = Human(True), Clock()
    p = policy(human, ttl=60, clock=clock)
    c = call()
    assert sync(p, c).approved
    row = decided(journal, c)
    assert p.confirm(row, c, journal=journal).approved
    [row] = journal.calls("run-1")
    if change == "schema":  # a process resumed with the tool's schema changed
        tools = [
            {
                "type": "function",
                "function": {
                    "name": "write_file",
                    "parameters": {**SCHEMA, "additionalProperties": False},
                },
            }
        ]
        later = ApprovalPolicy(human, tools=tools, version="v1", ttl=60, clock=clock)
    elif change == "version":
        later = policy(human, version="v2", ttl=60, clock=clock)
    else:
        later, clock.now = p, clock.now + 61
    human.answer = True
    assert later.confirm(row, c, journal=journal).approved
    assert [r.again for r in human.requests] == [False, True]
    [row] = journal.calls("run-1")
    assert row.approval_policy_version == ("v2" if change == "version" else "v1")
    assert row.approval_expires_at == clock.now + 60


def test_at_start_a_timeout_is_recorded_expired_in_the_journal(journal: Any) -> None:
    away = Away()
    p = policy(away, timeout=0.2)
    c = call()
    row = decided(journal, c)  # never approved at gate time (another process, say)
    try:
        decision = asyncio.run(
            p.aconfirm(row, ReleasedCall(0, "call_1", "write_file", "{}", ARGS), journal=journal)
        )
    finally:
        away.release.set()
    assert deny_reason(decision) is DenyReason.APPROVAL_EXPIRED
    [row] = journal.calls("run-1")
    assert row.approval_status is ApprovalStatus.EXPIRED
    assert row.approval_expires_at is None


def test_async_confirm_with_an_async_approver(journal: Any) -> None:
    p = policy(_async_yes)
    c = call()
    row = decided(journal, c)

    async def inside_a_loop() -> None:
        with pytest.raises(GateConfigError):
            p.confirm(row, c, journal=journal)  # the sync face cannot wait inside a loop

    asyncio.run(inside_a_loop())
    assert asyncio.run(p.aconfirm(row, c, journal=journal)).approved
    [row] = journal.calls("run-1")
    assert row.approval_status is ApprovalStatus.APPROVED


@pytest.mark.parametrize(
    "options",
    [
        {"version": ""},
        {"timeout": 0},
        {"timeout": float("inf")},
        {"ttl": -1},
        {"ttl": True},
        {"render": "text"},
        {"show_arguments": "yes"},
        {"hmac_key": b""},
        {"only": "write_file"},
    ],
)
def test_bad_settings_fail_at_construction(options: dict[str, Any]) -> None:
    with pytest.raises(GateConfigError):
        policy(Human(), **options)
    with pytest.raises(GateConfigError):
        ApprovalPolicy("ask", tools=TOOLS, version="v1")  # type: ignore[arg-type]


def test_the_loop_s_helpers_find_approvals_and_scopes_in_a_composition(
    journal: Any, tmp_path: Any
) -> None:
    from litellm_toolgate.policies import (
        PathScope,
        aconfirm_at_start,
        confirm_at_start,
        members,
        tool_arguments,
    )

    (tmp_path / "notes.txt").write_text("n")
    human = Human(True)
    scope = PathScope(tmp_path, paths={"write_file": ("path",)})
    approval = policy(human)
    composed = scope & (lambda c: True) & approval
    assert [type(m).__name__ for m in members(composed)][::2] == ["PathScope", "ApprovalPolicy"]
    c = call()
    assert sync(approval, c).approved
    row = decided(journal, c)
    assert confirm_at_start(composed, row, c, journal=journal).approved
    assert len(human.requests) == 1  # the gate-time approval holds: bound, not asked again
    changed = call({"path": "notes.txt", "content": "changed-value"})
    other = decided(journal, changed, run_id="run-2")
    human.answer = False
    decision = asyncio.run(aconfirm_at_start(composed, other, changed, journal=journal))
    assert deny_reason(decision) is DenyReason.APPROVAL_DENIED
    assert confirm_at_start(lambda c: True, row, c).approved  # no approval in it: approve
    assert tool_arguments(composed, c) == {
        "path": str(tmp_path.resolve() / "notes.txt"),
        "content": CANARY,
    }
    assert tool_arguments(None, c) == ARGS
