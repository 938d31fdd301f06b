"""The bounded tool loop (``gate.run`` / ``gate.arun``) over the real litellm and the loopback
fake upstream: rounds, results matched by id, the journal's rows, the bounds, failures and
resume after a (simulated) crash."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest

from litellm_toolgate import (
    DuplicateCallId,
    GateConfigError,
    LoopLimitExceeded,
    QuarantineReason,
    StreamFault,
    ToolGate,
)
from litellm_toolgate.core.rules.journal import AmbiguousCalls, Effect, JournalRow, Outcome, Step
from litellm_toolgate.core.rules.loop import LoopLimits
from litellm_toolgate.demo.responses import answer_events
from litellm_toolgate.loopback.upstream import (
    FakeUpstream,
    Scripted,
    answer_stream,
    calls_stream,
    recording,
    responses_calls_stream,
)
from litellm_toolgate.run.journal import open_journal
from litellm_toolgate.run.loop import NOT_APPROVED, NOT_AVAILABLE, NOT_JOURNALED, TOOL_ERROR
from litellm_toolgate.run.tools import Tool, ToolContext

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two finite numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
R_MULTIPLY: dict[str, Any] = {
    "type": "function",
    "name": "multiply",
    "description": "Multiply two finite numbers.",
    "parameters": MULTIPLY["function"]["parameters"],  # type: ignore[index]
}
ARGS = '{"a": 7, "b": 8}'
USER = [{"role": "user", "content": "What is 7 times 8? Use multiply."}]


class Crash(BaseException):
    """Stands in for the process dying: not an Exception, so nothing catches it."""


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def journal() -> Iterator[Any]:
    j = open_journal("sqlite:///:memory:")
    yield j
    j.close()


def chat_route(up: FakeUpstream) -> dict[str, Any]:
    return {"model": "cometapi/gpt-4o-mini", "api_base": up.base_url, "api_key": "sk-loop"}


def responses_route(up: FakeUpstream) -> dict[str, Any]:
    return {"model": "openai/gpt-4o-mini", "api_base": up.base_url, "api_key": "sk-loop"}


def multiply(arguments: dict[str, Any]) -> dict[str, float]:
    return {"value": arguments["a"] * arguments["b"]}


def _count(ran: list[int]) -> int:
    ran.append(1)
    return len(ran)


def tools(**overrides: Any) -> dict[str, Tool]:
    return {"multiply": Tool(overrides.pop("fn", multiply), effect="read_only", **overrides)}


# ---- chat and Responses, end to end ----------------------------------------------------
def test_chat_runs_the_call_once_and_answers_with_its_id(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(
        Scripted(recording("round1_multiply.sse"), chunk_sizes=[7, 64, 3]),
        Scripted(answer_stream("7 times 8 is 56."), chunk_sizes=[5]),
    )
    texts: list[str] = []
    saved: list[list[Any]] = []
    result = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        tools=[MULTIPLY],
        executors=tools(),
        journal=journal,
        run_id="run-chat",
        on_text=texts.append,
        checkpoint=saved.append,
        **chat_route(upstream),
    )
    assert result.text == "7 times 8 is 56." and result.rounds == 2
    assert "".join(texts) == "Let me multiply those." + "7 times 8 is 56."
    (row,) = result.rows
    assert (row.step, row.outcome, row.tool, row.round) == (
        Step.FINISHED,
        Outcome.SUCCEEDED,
        "multiply",
        0,
    )
    assert row.result_size == len('{"value":56}') and str(row.result_digest).startswith("sha256:")
    # Round two carried the assistant turn (its tool_calls) and then the result, by id.
    sent = upstream.requests[1]["messages"]
    assistant, tool = sent[-2], sent[-1]
    call_id = assistant["tool_calls"][0]["id"]
    assert call_id == row.call_id and tool == {
        "role": "tool",
        "tool_call_id": call_id,
        "content": '{"value":56}',
    }
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"a": 7, "b": 8}'
    # Checkpoints: the model turn first, then with its result; the last is the conversation.
    assert saved[0][-1]["role"] == "assistant" and saved[1][-1]["role"] == "tool"
    assert result.conversation == saved[-1] and len(upstream.requests) == 2


def test_responses_replays_the_output_items_then_the_outputs(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(
        Scripted(responses_calls_stream([("call_r1", "multiply", ARGS)])),
        Scripted(answer_events("7 times 8 is 56.")),
    )
    texts: list[str] = []
    result = ToolGate([R_MULTIPLY]).run(
        api="responses",
        input=list(USER),
        tools=[R_MULTIPLY],
        executors=tools(),
        journal=journal,
        run_id="run-responses",
        on_text=texts.append,
        **responses_route(upstream),
    )
    assert result.text == "7 times 8 is 56." and "".join(texts) == result.text
    sent = upstream.requests[1]["input"]
    kinds = [item.get("type") for item in sent[1:]]
    assert kinds == ["reasoning", "function_call", "function_call_output"]
    assert sent[1]["encrypted_content"] == "enc-reasoning-1"
    assert sent[2]["call_id"] == "call_r1" and sent[2]["arguments"] == ARGS
    assert sent[3] == {
        "type": "function_call_output",
        "call_id": "call_r1",
        "output": '{"value":56}',
    }
    assert [r.call_id for r in result.rows] == ["call_r1"]


def test_arun_awaits_async_tools_and_runs_sync_ones(upstream: FakeUpstream, journal: Any) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS), ("c2", "add", '{"a": 1, "b": 2}')])),
        Scripted(answer_stream("done")),
    )
    add_tool = {
        "type": "function",
        "function": {**MULTIPLY["function"], "name": "add"},  # type: ignore[dict-item]
    }
    seen: list[ToolContext] = []
    current: list[bool] = []

    async def add(arguments: dict[str, Any], context: ToolContext) -> int:
        seen.append(context)
        current.append(await asyncio.to_thread(context.still_current))
        return int(arguments["a"] + arguments["b"])

    async def text(piece: str) -> None:
        await asyncio.sleep(0)

    async def main() -> Any:
        gate = ToolGate([MULTIPLY, add_tool])
        return await gate.arun(
            messages=list(USER),
            tools=[MULTIPLY, add_tool],
            executors={**tools(), "add": Tool(add, effect="non_idempotent")},
            journal=journal,
            run_id="run-async",
            on_text=text,
            **chat_route(upstream),
        )

    result = asyncio.run(main())
    assert result.text == "done"
    assert [(r.call_id, r.outcome) for r in result.rows] == [
        ("c1", Outcome.SUCCEEDED),
        ("c2", Outcome.SUCCEEDED),
    ]
    sent = upstream.requests[1]["messages"]
    assert [m.get("tool_call_id") for m in sent[-2:]] == ["c1", "c2"]
    assert [m["content"] for m in sent[-2:]] == ['{"value":56}', "3"]
    (context,) = seen
    row = result.rows[1]
    assert (context.idempotency_key, context.call_id, context.round) == (
        row.idempotency_key,
        "c2",
        0,
    )
    assert context.fencing_token == row.fencing_token and current == [True]
    assert not context.still_current()  # finished: the token is no longer a live claim
    assert "{" not in repr(context)


def test_a_failing_tool_gives_a_failed_row_and_no_error_text(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("no"))
    )

    def broken(arguments: dict[str, Any]) -> Any:
        raise ValueError(f"secret {arguments}")

    result = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(fn=broken),
        journal=journal,
        run_id="run-fail",
        **chat_route(upstream),
    )
    (row,) = result.rows
    assert (row.outcome, row.error_class) == (Outcome.FAILED, "ValueError")
    assert upstream.requests[1]["messages"][-1]["content"] == TOOL_ERROR
    assert "secret" not in json.dumps(upstream.requests[1])


def test_the_caller_controls_the_failed_tool_message(upstream: FakeUpstream, journal: Any) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("no"))
    )

    def broken(arguments: dict[str, Any]) -> Any:
        raise KeyError("x")

    ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(fn=broken),
        journal=journal,
        run_id="run-fail-2",
        tool_error=lambda name, exc: f"{name} failed: {type(exc).__name__}",
        **chat_route(upstream),
    )
    assert upstream.requests[1]["messages"][-1]["content"] == "multiply failed: KeyError"


# ---- bounds and call ids: the round runs nothing ----------------------------------------
def _one_call_each_round(up: FakeUpstream, ids: list[str]) -> None:
    up.enqueue(*(Scripted(calls_stream([(i, "multiply", ARGS)])) for i in ids))


def test_a_third_round_with_calls_is_refused_and_runs_nothing(
    upstream: FakeUpstream, journal: Any
) -> None:
    _one_call_each_round(upstream, ["c1", "c2", "c3"])
    ran: list[int] = []
    with pytest.raises(LoopLimitExceeded) as caught:
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(fn=lambda a: _count(ran) or 1),
            journal=journal,
            run_id="run-rounds",
            **chat_route(upstream),
        )
    assert caught.value.reason is QuarantineReason.TOO_MANY_ROUNDS
    assert [r.call_id for r in journal.calls("run-rounds")] == ["c1", "c2"] and len(ran) == 2


@pytest.mark.parametrize(
    ("ids", "limits", "reason", "family"),
    [
        (
            ["a", "b", "c", "d", "e"],
            None,
            QuarantineReason.TOO_MANY_CALLS_IN_ROUND,
            LoopLimitExceeded,
        ),
        (
            ["a", "b", "c"],
            LoopLimits(max_calls=2),
            QuarantineReason.TOO_MANY_CALLS_IN_RUN,
            LoopLimitExceeded,
        ),
    ],
    ids=["calls-in-round", "calls-in-run"],
)
def test_a_round_past_its_bounds_is_refused_whole(  # noqa: PLR0917
    upstream: FakeUpstream,
    journal: Any,
    ids: list[str],
    limits: LoopLimits | None,
    reason: QuarantineReason,
    family: type[Exception],
) -> None:
    upstream.enqueue(Scripted(calls_stream([(i, "multiply", ARGS) for i in ids])))
    with pytest.raises(family) as caught:
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(fn=lambda a: pytest.fail("ran")),
            journal=journal,
            run_id="run-bounds",
            limits=limits,
            **chat_route(upstream),
        )
    assert caught.value.reason is reason  # type: ignore[attr-defined]
    assert journal.calls("run-bounds") == []


def test_a_call_id_reused_in_a_later_round_is_refused_before_it_runs(
    upstream: FakeUpstream, journal: Any
) -> None:
    _one_call_each_round(upstream, ["same", "same"])
    ran: list[int] = []
    with pytest.raises(DuplicateCallId):
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(fn=lambda a: _count(ran) or 1),
            journal=journal,
            run_id="run-reuse",
            **chat_route(upstream),
        )
    assert len(ran) == 1 and len(journal.calls("run-reuse")) == 1


def test_a_quarantined_stream_stops_the_run_with_nothing_journaled(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(Scripted(recording("broken_truncated.sse")))
    with pytest.raises(StreamFault):
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(),
            journal=journal,
            run_id="run-broken",
            **chat_route(upstream),
        )
    assert journal.calls("run-broken") == []


# ---- resume after a crash ----------------------------------------------------------------
def _crash_in_tool(upstream: FakeUpstream, journal: Any, run_id: str) -> list[Any]:
    """Round one's call starts, then the 'process dies' inside the tool: the row stays at
    started. Returns the last checkpointed conversation."""
    upstream.enqueue(Scripted(calls_stream([("c1", "multiply", ARGS)])))
    saved: list[list[Any]] = []

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    with pytest.raises(Crash):
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(fn=dies),
            journal=journal,
            run_id=run_id,
            checkpoint=saved.append,
            lease_seconds=0.2,
            **chat_route(upstream),
        )
    (row,) = journal.unfinished(run_id)
    assert row.step is Step.STARTED
    return saved[-1]


def _resume(
    upstream: FakeUpstream, journal: Any, run_id: str, conversation: list[Any], **tool: Any
) -> Any:
    upstream.enqueue(Scripted(answer_stream("7 times 8 is 56.")))
    return ToolGate([MULTIPLY]).run(
        messages=conversation,
        executors=tools(**tool),
        journal=journal,
        run_id=run_id,
        lease_seconds=0.2,
        **chat_route(upstream),
    )


def test_resume_with_fail_reports_the_started_row_and_runs_nothing(
    upstream: FakeUpstream, journal: Any
) -> None:
    conversation = _crash_in_tool(upstream, journal, "r-fail")
    ran: list[int] = []
    with pytest.raises(AmbiguousCalls) as caught:
        _resume(upstream, journal, "r-fail", conversation, fn=lambda a: _count(ran))
    (row,) = caught.value.rows
    assert (row.call_id, row.tool, row.step) == ("c1", "multiply", Step.STARTED)
    assert "7" not in str(caught.value).replace("r-fail", "") and not ran
    # Reconciled by an operator: the resume goes on, the call is not run again.
    journal.reconcile(row.idempotency_key, reason="checked the target: it ran")
    result = _resume(upstream, journal, "r-fail", conversation, fn=lambda a: _count(ran))
    assert not ran and result.text == "7 times 8 is 56."
    assert upstream.requests[-1]["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": NOT_AVAILABLE,
    }


def test_resume_with_retry_with_key_runs_again_under_the_same_key(
    upstream: FakeUpstream, journal: Any
) -> None:
    conversation = _crash_in_tool(upstream, journal, "r-retry")
    (before,) = journal.unfinished("r-retry")
    keys: list[tuple[str, int]] = []

    def again(arguments: dict[str, Any], context: ToolContext) -> int:
        keys.append((context.idempotency_key, context.fencing_token))
        return 56

    result = _resume(
        upstream, journal, "r-retry", conversation, fn=again, on_ambiguous="retry_with_key"
    )
    assert keys[0][0] == before.idempotency_key and keys[0][1] > (before.fencing_token or 0)
    (row,) = result.rows
    assert (
        row.outcome is Outcome.SUCCEEDED
        and upstream.requests[-1]["messages"][-1]["content"] == "56"
    )


@pytest.mark.parametrize("answer", [True, False])
def test_resume_with_ask_runs_again_only_if_told(
    upstream: FakeUpstream, journal: Any, answer: bool
) -> None:
    conversation = _crash_in_tool(upstream, journal, f"r-ask-{answer}")
    asked: list[JournalRow] = []
    ran: list[int] = []

    async def ask(row: JournalRow) -> bool:
        asked.append(row)
        return answer

    result = _resume(
        upstream,
        journal,
        f"r-ask-{answer}",
        conversation,
        fn=lambda a: _count(ran) or 56,
        on_ambiguous="ask",
        ask=ask,
    )
    assert [r.call_id for r in asked] == ["c1"] and len(ran) == int(answer)
    (row,) = result.rows
    assert row.step is (Step.FINISHED if answer else Step.RECONCILED)


@pytest.mark.parametrize("it_ran", [True, False])
def test_resume_with_verify_asks_the_target_system(
    upstream: FakeUpstream, journal: Any, it_ran: bool
) -> None:
    conversation = _crash_in_tool(upstream, journal, f"r-verify-{it_ran}")
    ran: list[int] = []
    checked: list[ToolContext] = []

    def verify(context: ToolContext) -> bool:
        checked.append(context)
        return it_ran

    result = _resume(
        upstream,
        journal,
        f"r-verify-{it_ran}",
        conversation,
        fn=lambda a: _count(ran) or 56,
        on_ambiguous=verify,
    )
    assert len(checked) == 1 and checked[0].call_id == "c1" and len(ran) == int(not it_ran)
    (row,) = result.rows
    assert row.step is (Step.RECONCILED if it_ran else Step.FINISHED)


def test_resume_asks_again_for_a_turn_none_of_whose_calls_was_journaled(
    upstream: FakeUpstream, journal: Any
) -> None:
    # Round one ran c1; the process then died between checkpointing round two's model turn
    # and deciding its first call: nothing of that turn ran, so it is dropped and re-asked.
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("a"))
    )
    first = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(),
        journal=journal,
        run_id="r-again",
        **chat_route(upstream),
    )
    call = {"id": "c9", "type": "function", "function": {"name": "multiply", "arguments": ARGS}}
    conversation = [
        *first.conversation,
        {"role": "assistant", "content": None, "tool_calls": [call]},
    ]
    ran: list[int] = []
    result = _resume(upstream, journal, "r-again", conversation, fn=lambda a: _count(ran))
    assert not ran and result.text == "7 times 8 is 56."
    assert "c9" not in json.dumps(upstream.requests[-1]["messages"])
    assert [r.call_id for r in result.rows] == ["c1"]


def test_check_round_refuses_an_id_twice_in_one_round() -> None:
    # The gate itself refuses a response whose calls share an id (identity_conflict); the
    # loop's own rule holds as well, for any carrier.
    from litellm_toolgate.core.rules.loop import check_round

    limits = LoopLimits()
    assert check_round(limits, 0, ["a", "a"], (), 0) is QuarantineReason.CALL_ID_REUSED
    assert check_round(limits, 0, ["a"], ("a",), 1) is QuarantineReason.CALL_ID_REUSED
    assert check_round(limits, 0, ["a", "b"], ("c",), 1) is None
    assert check_round(limits, 2, [], (), 0) is None


def test_resume_refuses_a_conversation_whose_arguments_changed(
    upstream: FakeUpstream, journal: Any
) -> None:
    conversation = _crash_in_tool(upstream, journal, "r-changed")
    changed = json.loads(json.dumps(conversation))
    changed[-1]["tool_calls"][0]["function"]["arguments"] = '{"a": 7, "b": 9}'
    with pytest.raises(AmbiguousCalls):
        _resume(upstream, journal, "r-changed", changed, on_ambiguous="retry_with_key")


def test_resume_after_decide_reports_the_decided_row(upstream: FakeUpstream) -> None:
    armed = [True]

    def observer(move: str, row: JournalRow) -> None:
        if move == "decided" and armed[0]:
            raise Crash

    journal = open_journal("sqlite:///:memory:", observer=observer)
    upstream.enqueue(Scripted(calls_stream([("c1", "multiply", ARGS)])))
    saved: list[list[Any]] = []
    with pytest.raises(Crash):
        ToolGate([MULTIPLY]).run(
            messages=list(USER),
            executors=tools(),
            journal=journal,
            run_id="r-decided",
            checkpoint=saved.append,
            **chat_route(upstream),
        )
    (row,) = journal.unfinished("r-decided")
    assert row.step is Step.DECIDED
    armed[0] = False
    with pytest.raises(AmbiguousCalls) as caught:
        _resume(upstream, journal, "r-decided", saved[-1])
    assert [r.step for r in caught.value.rows] == [Step.DECIDED]
    result = _resume(upstream, journal, "r-decided", saved[-1], on_ambiguous="retry_with_key")
    assert result.rows[0].outcome is Outcome.SUCCEEDED
    journal.close()


# ---- set-up errors: refused before anything is sent -------------------------------------
@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"executors": {}}, "executors"),
        ({"executors": {"multiply": multiply}}, "executors"),
        ({"executors": {"other": Tool(multiply, effect="read_only")}}, "no executor"),
        ({"journal": None}, "journal="),
        ({"journal": object()}, "run leases"),
        ({"run_id": ""}, "run_id="),
        ({"api": "messages"}, "api must be"),
        ({"stream": True}, "stream="),
        ({"messages": "hi"}, "messages="),
        ({"limits": 3}, "LoopLimits"),
        ({"on_text": "print"}, "on_text"),
        ({"lease_seconds": 0}, "lease_seconds"),
        ({"lease_seconds": "60"}, "lease_seconds"),
        ({"run_lease_seconds": 0}, "run_lease_seconds"),
        ({"run_lease_seconds": float("inf")}, "run_lease_seconds"),
        ({"wait_for_run": -1}, "wait_for_run"),
        ({"wait_for_run": float("nan")}, "wait_for_run"),
        ({"wait_for_run": "5"}, "wait_for_run"),
        ({"wait_for_run": True}, "wait_for_run"),
        ({"wait_for_run": 86_400}, "wait_for_run"),
    ],
)
def test_bad_settings_are_refused(
    upstream: FakeUpstream, journal: Any, change: dict[str, Any], words: str
) -> None:
    options: dict[str, Any] = {
        "messages": list(USER),
        "executors": tools(),
        "journal": journal,
        "run_id": "r-bad",
        **chat_route(upstream),
        **change,
    }
    with pytest.raises(GateConfigError, match=words):
        ToolGate([MULTIPLY]).run(**options)
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"effect": "sometimes"}, "effect"),
        ({"effect": "read_only", "on_ambiguous": "maybe"}, "on_ambiguous"),
        ({"effect": "read_only", "on_ambiguous": "ask"}, "ask="),
        ({"effect": "read_only", "ask": print}, "ask="),
    ],
)
def test_bad_tools_are_refused(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(GateConfigError, match=words):
        Tool(multiply, **kwargs)
    with pytest.raises(GateConfigError):
        Tool("multiply", effect="read_only")  # type: ignore[arg-type]


def test_limits_are_checked() -> None:
    for bad in (0, -1, 1.5, True):
        with pytest.raises(GateConfigError):
            LoopLimits(max_rounds=bad)  # type: ignore[arg-type]
    assert LoopLimits() == LoopLimits(max_rounds=3, max_calls_per_round=4, max_calls=8)
    assert repr(Tool(multiply, effect=Effect.IDEMPOTENT)) == (
        "Tool(effect='idempotent', on_ambiguous='fail')"
    )


# ---- at started: the approval is confirmed again, the paths resolved again -------------
def test_an_approval_that_no_longer_holds_at_start_asks_again_and_a_no_runs_nothing(
    upstream: FakeUpstream, journal: Any
) -> None:
    from litellm_toolgate.policies import ApprovalPolicy

    now = [1000.0]
    answers = iter([True, False])  # yes at the gate; no when asked again at started
    asked: list[str] = []

    def ask(request: Any) -> bool:
        asked.append(request.call_id)
        return next(answers)

    policy = ApprovalPolicy(ask, tools=[MULTIPLY], version="v1", ttl=10.0, clock=lambda: now[0])
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("ok"))
    )
    ran: list[int] = []
    result = ToolGate([MULTIPLY], policy=policy).run(
        messages=list(USER),
        executors=tools(fn=lambda a: _count(ran)),
        journal=journal,
        run_id="r-approval",
        # Between the gate's approval and the call's start, the grant's ttl runs out.
        checkpoint=lambda conversation: now.__setitem__(0, now[0] + 100.0),
        **chat_route(upstream),
    )
    assert asked == ["c1", "c1"] and not ran
    (row,) = result.rows
    assert (row.step, row.outcome) == (Step.FINISHED, Outcome.SKIPPED)
    assert upstream.requests[-1]["messages"][-1]["content"] == NOT_APPROVED


def test_a_still_valid_approval_runs_without_asking_again(
    upstream: FakeUpstream, journal: Any
) -> None:
    from litellm_toolgate.policies import ApprovalPolicy

    asked: list[str] = []

    async def ask(request: Any) -> bool:
        asked.append(request.call_id)
        return True

    policy = ApprovalPolicy(ask, tools=[MULTIPLY], version="v1")
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("ok"))
    )

    async def main() -> Any:
        return await ToolGate([MULTIPLY], policy=policy).arun(
            messages=list(USER),
            executors=tools(),
            journal=journal,
            run_id="r-approval-ok",
            **chat_route(upstream),
        )

    result = asyncio.run(main())
    (row,) = result.rows
    assert asked == ["c1"] and row.outcome is Outcome.SUCCEEDED
    status = row.approval_status
    assert status is not None and (status.value, row.approval_policy_version) == ("approved", "v1")


def test_the_tool_gets_the_path_scope_s_resolved_paths(
    upstream: FakeUpstream, journal: Any, tmp_path: Any
) -> None:
    from litellm_toolgate.policies import PathScope

    write = {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
    (tmp_path / "notes").mkdir()
    scope = PathScope(str(tmp_path), paths={"write_file": ("path",)})
    upstream.enqueue(
        Scripted(calls_stream([("c1", "write_file", '{"path": "notes/a.md"}')])),
        Scripted(answer_stream("ok")),
    )
    given: list[str] = []

    def write_file(arguments: dict[str, Any]) -> str:
        given.append(arguments["path"])
        return "ok"

    ToolGate([write], policy=scope).run(
        messages=list(USER),
        executors={"write_file": Tool(write_file, effect="idempotent")},
        journal=journal,
        run_id="r-paths",
        **chat_route(upstream),
    )
    assert given == [str((tmp_path / "notes" / "a.md").resolve())]


# ---- the async twin of resume, Responses resume, and the remaining branches -------------
def _go(asynchronous: bool, gate: ToolGate, **options: Any) -> Any:
    if not asynchronous:
        return gate.run(**options)

    async def main() -> Any:
        return await gate.arun(**options)

    return asyncio.run(main())


def _options(
    up: FakeUpstream, journal: Any, run_id: str, conversation: list[Any], **tool: Any
) -> dict[str, Any]:
    return {
        "messages": conversation,
        "executors": tools(**tool),
        "journal": journal,
        "run_id": run_id,
        "lease_seconds": 0.2,
        **chat_route(up),
    }


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("rule", "step", "runs"),
    [
        ({"on_ambiguous": "retry_with_key"}, Step.FINISHED, 1),
        ({"on_ambiguous": "ask", "ask": lambda row: False}, Step.RECONCILED, 0),
        ({"on_ambiguous": "ask", "ask": lambda row: True}, Step.FINISHED, 1),
        ({"on_ambiguous": lambda context: True}, Step.RECONCILED, 0),
        ({"on_ambiguous": lambda context: False}, Step.FINISHED, 1),
    ],
    ids=["retry", "ask-no", "ask-yes", "verify-ran", "verify-not"],
)
def test_every_rule_sync_and_async(  # noqa: PLR0917
    upstream: FakeUpstream,
    journal: Any,
    asynchronous: bool,
    rule: dict[str, Any],
    step: Step,
    runs: int,
) -> None:
    run_id = f"r-{asynchronous}-{step.value}-{runs}-{len(rule)}"
    conversation = _crash_in_tool(upstream, journal, run_id)
    upstream.enqueue(Scripted(answer_stream("done")))
    ran: list[int] = []

    async def tool(arguments: dict[str, Any]) -> int:
        return _count(ran)

    result = _go(
        asynchronous,
        ToolGate([MULTIPLY]),
        **_options(upstream, journal, run_id, conversation, fn=tool, **rule),
        before_round=lambda index: None,
    )
    (row,) = result.rows
    assert row.step is step and len(ran) == runs and result.text == "done"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_fail_row_is_reported_sync_and_async(
    upstream: FakeUpstream, journal: Any, asynchronous: bool
) -> None:
    conversation = _crash_in_tool(upstream, journal, f"r-f-{asynchronous}")
    with pytest.raises(AmbiguousCalls):
        _go(
            asynchronous,
            ToolGate([MULTIPLY]),
            **_options(upstream, journal, f"r-f-{asynchronous}", conversation),
        )


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_resume_does_not_run_a_finished_call_or_an_unjournaled_sibling(
    upstream: FakeUpstream, journal: Any, asynchronous: bool
) -> None:
    # c1 finished but its result never reached the conversation; c2 of the same turn was
    # never decided: neither runs; the model is told each was not run / not available.
    run_id = f"r-lost-{asynchronous}"
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("a"))
    )
    first = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(),
        journal=journal,
        run_id=run_id,
        **chat_route(upstream),
    )
    turn = json.loads(json.dumps(first.conversation[:2]))
    turn[1]["tool_calls"].append(
        {"id": "c2", "type": "function", "function": {"name": "multiply", "arguments": ARGS}}
    )
    upstream.enqueue(Scripted(answer_stream("b")))
    ran: list[int] = []
    result = _go(
        asynchronous,
        ToolGate([MULTIPLY]),
        **_options(upstream, journal, run_id, turn, fn=lambda a: _count(ran)),
    )
    assert not ran and result.text == "b"
    sent = upstream.requests[-1]["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[-2:]] == [
        ("c1", NOT_AVAILABLE),
        ("c2", NOT_JOURNALED),
    ]


def test_a_run_resumed_past_its_last_round_is_refused(upstream: FakeUpstream, journal: Any) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("a"))
    )
    first = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(),
        journal=journal,
        run_id="r-past",
        **chat_route(upstream),
    )
    for asynchronous in (False, True):
        with pytest.raises(LoopLimitExceeded) as caught:
            _go(
                asynchronous,
                ToolGate([MULTIPLY]),
                **_options(upstream, journal, "r-past", first.conversation),
                limits=LoopLimits(max_rounds=1),
            )
        assert caught.value.reason is QuarantineReason.TOO_MANY_ROUNDS


@pytest.mark.parametrize(
    ("arguments", "name", "error"),
    [("{not json", "multiply", AmbiguousCalls), (ARGS, "divide", GateConfigError)],
)
def test_resume_refuses_a_turn_it_cannot_run(
    upstream: FakeUpstream, journal: Any, arguments: str, name: str, error: type[Exception]
) -> None:
    conversation = _crash_in_tool(upstream, journal, f"r-bad-{name}")
    changed = json.loads(json.dumps(conversation))
    changed[-1]["tool_calls"][0]["function"].update(arguments=arguments, name=name)
    with pytest.raises(error):
        _resume(upstream, journal, f"r-bad-{name}", changed)


def test_responses_resume_retries_under_the_same_key(upstream: FakeUpstream, journal: Any) -> None:
    upstream.enqueue(Scripted(responses_calls_stream([("call_r1", "multiply", ARGS)])))
    saved: list[list[Any]] = []

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    options: dict[str, Any] = {
        "api": "responses",
        "tools": [R_MULTIPLY],
        "journal": journal,
        "run_id": "r-resp",
        "checkpoint": saved.append,
        "lease_seconds": 0.2,
        **responses_route(upstream),
    }
    with pytest.raises(Crash):
        ToolGate([R_MULTIPLY]).run(input=list(USER), executors=tools(fn=dies), **options)
    conversation = saved[-1]
    assert [_kind_of(i) for i in conversation[1:]] == ["reasoning", "function_call"]
    upstream.enqueue(Scripted(answer_events("7 times 8 is 56.")))
    result = ToolGate([R_MULTIPLY]).run(
        input=conversation, executors=tools(on_ambiguous="retry_with_key"), **options
    )
    assert result.text == "7 times 8 is 56." and result.rows[0].outcome is Outcome.SUCCEEDED
    sent = upstream.requests[-1]["input"]
    assert sent[-1] == {
        "type": "function_call_output",
        "call_id": "call_r1",
        "output": '{"value":56}',
    }


def test_responses_resume_asks_again_for_an_unjournaled_turn(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(
        Scripted(responses_calls_stream([("call_r1", "multiply", ARGS)])),
        Scripted(answer_events("first")),
    )
    options: dict[str, Any] = {"api": "responses", "journal": journal, "run_id": "r-resp-2"}
    first = ToolGate([R_MULTIPLY]).run(
        input=list(USER), executors=tools(), **options, **responses_route(upstream)
    )
    extra = {"type": "function_call", "call_id": "call_x", "name": "multiply", "arguments": ARGS}
    user = {"role": "user", "content": "again"}
    conversation = [
        *first.conversation,
        user,
        {"type": "reasoning", "id": "rs_9", "summary": []},
        extra,
    ]
    upstream.enqueue(Scripted(answer_events("second")))
    result = ToolGate([R_MULTIPLY]).run(
        input=conversation, executors=tools(), **options, **responses_route(upstream)
    )
    assert result.text == "second"
    assert upstream.requests[-1]["input"][-1] == user


def _kind_of(item: Any) -> str:
    return str(item.get("type"))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_journal_url_is_opened_and_closed_by_the_run(
    upstream: FakeUpstream, tmp_path: Any, asynchronous: bool
) -> None:
    url = f"sqlite:///{tmp_path / 'j.db'}"
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("ok"))
    )

    async def multiply_async(arguments: dict[str, Any]) -> dict[str, Any]:
        return multiply(arguments)

    result = _go(
        asynchronous,
        ToolGate([MULTIPLY]),
        messages=list(USER),
        executors=tools(fn=multiply_async),  # a sync run runs an async tool to completion
        journal=url,
        run_id="r-url",
        **chat_route(upstream),
    )
    assert result.rows[0].outcome is Outcome.SUCCEEDED
    with open_journal(url) as again:
        assert [r.call_id for r in again.calls("r-url")] == ["c1"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_path_that_no_longer_resolves_at_start_skips_the_call(
    upstream: FakeUpstream, journal: Any, tmp_path: Any, asynchronous: bool
) -> None:
    import os

    from litellm_toolgate.policies import PathScope

    write = {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": False,
            },
        },
    }
    (tmp_path / "notes").mkdir()
    scope = PathScope(str(tmp_path), paths={"write_file": ("path",)})
    upstream.enqueue(
        Scripted(calls_stream([("c1", "write_file", '{"path": "notes/a.md"}')])),
        Scripted(answer_stream("ok")),
    )

    def swap(conversation: list[Any]) -> None:
        # After the gate approved and before the call starts: notes becomes a link out.
        if (tmp_path / "notes").is_dir() and not (tmp_path / "notes").is_symlink():
            (tmp_path / "notes").rmdir()
            os.symlink("/etc", tmp_path / "notes")

    ran: list[int] = []
    result = _go(
        asynchronous,
        ToolGate([write], policy=scope),
        messages=list(USER),
        executors={"write_file": Tool(lambda a: _count(ran), effect="non_idempotent")},
        journal=journal,
        run_id=f"r-swap-{asynchronous}",
        checkpoint=swap,
        **chat_route(upstream),
    )
    (row,) = result.rows
    assert not ran and row.outcome is Outcome.SKIPPED
    assert upstream.requests[-1]["messages"][-1]["content"] == NOT_APPROVED


def test_arun_skips_a_call_whose_approval_is_refused_at_start(
    upstream: FakeUpstream, journal: Any
) -> None:
    from litellm_toolgate.policies import ApprovalPolicy

    now = [1000.0]
    answers = iter([True, False])  # yes at the gate; no when asked again at started
    policy = ApprovalPolicy(
        lambda request: next(answers),
        tools=[MULTIPLY],
        version="v1",
        ttl=10.0,
        clock=lambda: now[0],
    )
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("ok"))
    )
    ran: list[int] = []

    async def main() -> Any:
        return await ToolGate([MULTIPLY], policy=policy).arun(
            messages=list(USER),
            executors=tools(fn=lambda a: _count(ran)),
            journal=journal,
            run_id="r-async-no",
            checkpoint=lambda c: now.__setitem__(0, now[0] + 100.0),
            **chat_route(upstream),
        )

    result = asyncio.run(main())
    (row,) = result.rows
    assert not ran and row.outcome is Outcome.SKIPPED
    assert upstream.requests[-1]["messages"][-1]["content"] == NOT_APPROVED


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_failing_tool_sync_and_async(
    upstream: FakeUpstream, journal: Any, asynchronous: bool
) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("ok"))
    )

    async def broken(arguments: dict[str, Any]) -> Any:
        raise RuntimeError("secret text")

    result = _go(
        asynchronous,
        ToolGate([MULTIPLY]),
        messages=list(USER),
        executors=tools(fn=broken),
        journal=journal,
        run_id=f"r-broken-{asynchronous}",
        tool_error=lambda name, exc: "custom",
        **chat_route(upstream),
    )
    assert (result.rows[0].outcome, result.rows[0].error_class) == (Outcome.FAILED, "RuntimeError")
    assert upstream.requests[-1]["messages"][-1]["content"] == "custom"


def test_core_loop_helpers() -> None:
    from litellm_toolgate.core.rules.loop import pending_calls, result_digest, result_text

    assert result_text("x") == "x" and result_text({"a": [1]}) == '{"a":[1]}'
    with pytest.raises(ValueError):
        result_text(float("nan"))
    assert result_digest("x", hmac_key=b"k" * 16).startswith("hmac-sha256:")
    assert pending_calls([{"role": "user", "content": "hi"}], api="chat") == []
    items = [
        {"role": "user", "content": "q"},
        {"type": "message", "role": "assistant", "content": []},
        {"type": "function_call", "call_id": "a", "name": "t", "arguments": "{}"},
    ]
    assert [p.call_id for p in pending_calls(items, api="responses")] == ["a"]
    assert "{}" not in repr(pending_calls(items, api="responses")[0])


def test_arun_on_the_bridged_responses_route(upstream: FakeUpstream, journal: Any) -> None:
    # cometapi/ has no native Responses route: litellm bridges it to chat completions.
    upstream.enqueue(
        Scripted(calls_stream([("call_b1", "multiply", ARGS)], text="Let me.")),
        Scripted(answer_stream("7 times 8 is 56.")),
    )
    texts: list[str] = []

    async def main() -> Any:
        return await ToolGate([R_MULTIPLY]).arun(
            api="responses",
            input=list(USER),
            tools=[R_MULTIPLY],
            executors=tools(),
            journal=journal,
            run_id="r-bridged",
            on_text=texts.append,
            **chat_route(upstream),
        )

    result = asyncio.run(main())
    assert result.text == "7 times 8 is 56." and "".join(texts) == "Let me." + result.text
    sent = upstream.requests[1]["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_b1", "content": '{"value":56}'}
    assert result.rows[0].call_id == "call_b1"


def test_tool_odd_callables() -> None:
    with pytest.raises(GateConfigError, match="ask="):
        Tool(multiply, effect="read_only", on_ambiguous="ask", ask="yes")  # type: ignore[arg-type]
    assert Tool(max, effect="read_only").wants_context is False  # no signature to read


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_resumed_call_whose_approval_no_longer_holds_is_reconciled_not_run(
    upstream: FakeUpstream, journal: Any, asynchronous: bool
) -> None:
    from litellm_toolgate.policies import ApprovalPolicy

    run_id = f"r-reapprove-{asynchronous}"
    upstream.enqueue(Scripted(calls_stream([("c1", "multiply", ARGS)])))
    saved: list[list[Any]] = []

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    yes = ApprovalPolicy(lambda request: True, tools=[MULTIPLY], version="v1")
    with pytest.raises(Crash):
        ToolGate([MULTIPLY], policy=yes).run(
            messages=list(USER),
            executors=tools(fn=dies, on_ambiguous="retry_with_key"),
            journal=journal,
            run_id=run_id,
            checkpoint=saved.append,
            lease_seconds=0.2,
            **chat_route(upstream),
        )
    # The rules changed (a new version): the grant in the row no longer holds; asked again, no.
    no = ApprovalPolicy(lambda request: False, tools=[MULTIPLY], version="v2")
    upstream.enqueue(Scripted(answer_stream("ok")))
    ran: list[int] = []
    result = _go(
        asynchronous,
        ToolGate([MULTIPLY], policy=no),
        **_options(
            upstream,
            journal,
            run_id,
            saved[-1],
            fn=lambda a: _count(ran),
            on_ambiguous="retry_with_key",
        ),
    )
    (row,) = result.rows
    assert not ran and row.step is Step.RECONCILED
    assert upstream.requests[-1]["messages"][-1]["content"] == NOT_APPROVED


def test_an_unjournaled_turn_with_a_partial_answer_is_dropped_whole(
    upstream: FakeUpstream, journal: Any
) -> None:
    upstream.enqueue(
        Scripted(calls_stream([("c1", "multiply", ARGS)])), Scripted(answer_stream("a"))
    )
    first = ToolGate([MULTIPLY]).run(
        messages=list(USER),
        executors=tools(),
        journal=journal,
        run_id="r-drop",
        **chat_route(upstream),
    )
    calls = [
        {"id": i, "type": "function", "function": {"name": "multiply", "arguments": ARGS}}
        for i in ("c8", "c9")
    ]
    conversation = [
        *first.conversation,
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c8", "content": "?"},
    ]
    result = _resume(upstream, journal, "r-drop", conversation)
    assert result.text == "7 times 8 is 56."
    assert "c8" not in json.dumps(upstream.requests[-1]["messages"])
    assert "_Call" not in repr(result) and "RunResult(rounds=1" in repr(result)


# ---- no argument text in what the loop raises ------------------------------------------
SEND = {
    "type": "function",
    "function": {
        "name": "send",
        "parameters": {
            "type": "object",
            "properties": {"to": {"type": "string"}},
            "required": ["to"],
            "additionalProperties": False,
        },
    },
}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_what_the_loop_raises_holds_no_argument_text(
    upstream: FakeUpstream, journal: Any, asynchronous: bool
) -> None:
    from conftest import CANARY
    from leakcheck import assert_clean_exception

    arguments = json.dumps({"to": CANARY})
    upstream.enqueue(*(Scripted(calls_stream([(f"s{i}", "send", arguments)])) for i in range(3)))
    executors = {"send": Tool(lambda a: "sent", effect="non_idempotent")}
    options: dict[str, Any] = {
        "messages": list(USER),
        "executors": executors,
        "journal": journal,
        "run_id": f"r-leak-{asynchronous}",
        **chat_route(upstream),
    }
    with pytest.raises(LoopLimitExceeded) as limit:
        _go(asynchronous, ToolGate([SEND]), **options)
    assert_clean_exception(limit.value)
    # A resume that refuses: the conversation holds the text, the error does not.
    saved: list[list[Any]] = []
    upstream.enqueue(Scripted(calls_stream([("t1", "send", arguments)])))

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    with pytest.raises(Crash):
        ToolGate([SEND]).run(
            **{
                **options,
                "run_id": f"r-leak2-{asynchronous}",
                "checkpoint": saved.append,
                "executors": {"send": Tool(dies, effect="non_idempotent")},
            }
        )
    with pytest.raises(AmbiguousCalls) as ambiguous:
        _go(
            asynchronous,
            ToolGate([SEND]),
            **{**options, "run_id": f"r-leak2-{asynchronous}", "messages": saved[-1]},
        )
    assert_clean_exception(ambiguous.value)
