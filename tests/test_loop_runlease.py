"""``gate.run`` and the run lease, in one process: a held run is refused before anything is
sent (``RunBusy``), or waited for (``wait_for_run``); the lease is released when the run
ends (completed or raised); a conversation older than the journal is refused
(``ConversationBehind``); a stalled driver whose run was taken asks the model nothing.
The multi-process proofs are tests/test_loop_one_driver.py."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from litellm_toolgate import ConversationBehind, RunBusy, RunLeaseLost, ToolGate
from litellm_toolgate.core.rules.journal import Step
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, recording
from litellm_toolgate.run.journal import open_journal
from litellm_toolgate.run.tools import Tool

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
USER = [{"role": "user", "content": "What is 7 times 8? Use multiply."}]


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as up:
        yield up


@pytest.fixture
def journal(tmp_path: Path) -> Iterator[Any]:
    j = open_journal(f"sqlite:///{tmp_path}/journal.db")
    yield j
    j.close()


def options(up: FakeUpstream, journal: Any, **more: Any) -> dict[str, Any]:
    return {
        "messages": list(USER),
        "tools": [MULTIPLY],
        "executors": {"multiply": Tool(lambda a: {"value": a["a"] * a["b"]}, effect="read_only")},
        "journal": journal,
        "run_id": "run-1",
        "model": "cometapi/gpt-4o-mini",
        "api_base": up.base_url,
        "api_key": "sk-lease",
        **more,
    }


def two_rounds(up: FakeUpstream) -> None:
    up.enqueue(
        Scripted(recording("round1_multiply.sse")),
        Scripted(answer_stream("7 times 8 is 56.")),
    )


def test_a_held_run_is_refused_before_anything_is_sent(
    upstream: FakeUpstream, journal: Any, tmp_path: Path
) -> None:
    with open_journal(f"sqlite:///{tmp_path}/journal.db") as other:
        held = other.acquire_run("run-1", lease_seconds=600)
        with pytest.raises(RunBusy) as busy:
            ToolGate([MULTIPLY]).run(**options(upstream, journal))
        assert busy.value.run_id == "run-1" and busy.value.__traceback__ is not None
        assert upstream.requests == [] and journal.calls("run-1") == []
        assert other.check_run(held)  # the refused driver did not touch it
        with pytest.raises(RunBusy):
            asyncio.run(ToolGate([MULTIPLY]).arun(**options(upstream, journal)))
        assert upstream.requests == []


def test_a_waiting_driver_goes_on_once_the_lease_is_released(
    upstream: FakeUpstream, journal: Any, tmp_path: Path
) -> None:
    two_rounds(upstream)
    with open_journal(f"sqlite:///{tmp_path}/journal.db") as other:
        held = other.acquire_run("run-1", lease_seconds=600)
        # Released by the other driver a little later, from another thread.
        timer = threading.Timer(0.5, other.release_run, [held])
        timer.start()
        try:
            result = ToolGate([MULTIPLY]).run(**options(upstream, journal, wait_for_run=120))
        finally:
            timer.join()
    assert result.text == "7 times 8 is 56." and [r.step for r in result.rows] == [Step.FINISHED]
    holder = journal.run_holder("run-1")
    assert holder is not None and holder[1] > held.token  # a lease of its own


def test_the_lease_is_released_when_the_run_ends(upstream: FakeUpstream, journal: Any) -> None:
    two_rounds(upstream)
    ToolGate([MULTIPLY]).run(**options(upstream, journal))
    lease = journal.acquire_run("run-1", lease_seconds=30)  # free at once
    journal.release_run(lease)
    # Also when the run raises: the conversation is behind the journal here.
    with pytest.raises(ConversationBehind) as behind:
        ToolGate([MULTIPLY]).run(**options(upstream, journal))
    assert behind.value.call_ids == (journal.calls("run-1")[0].call_id,)
    assert "7" not in str(behind.value).replace("run-1", "")  # ids and counts only
    assert len(upstream.requests) == 2  # the old conversation was not asked again
    journal.release_run(journal.acquire_run("run-1", lease_seconds=30))


def test_a_driver_whose_run_was_taken_asks_the_model_nothing(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    two_rounds(upstream)
    took: list[Any] = []
    offset = [0.0]
    url = f"sqlite:///{tmp_path}/journal.db"

    def stall(index: int) -> None:
        if index == 1:  # between rounds this process stalls past its lease, and meanwhile
            offset[0] = 60.0  # (its clock moves on: the heartbeat did not run)
            with sqlite3.connect(tmp_path / "journal.db") as db:  # another takes the run
                db.execute("UPDATE journal_runs SET lease_expires_at = 0")
            with open_journal(url) as other:
                took.append(other.acquire_run("run-1", lease_seconds=600))

    with open_journal(url, clock=lambda: time.time() + offset[0]) as journal:
        with pytest.raises(RunLeaseLost) as lost:
            ToolGate([MULTIPLY]).run(
                **options(upstream, journal, before_round=stall, run_lease_seconds=30)
            )
        holder = journal.run_holder("run-1")
    assert lost.value.run_id == "run-1"
    assert len(upstream.requests) == 1  # round two was never asked
    assert holder is not None and holder[1] == took[0].token  # the taker's lease stands
