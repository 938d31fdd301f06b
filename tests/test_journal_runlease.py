"""The run lease in the stores: one driver per run, fenced like the call claims.

On SQLite and on a real PostgreSQL (``TOOLGATE_TEST_POSTGRES_URL``, see
tests/journal_stores.py). A lease is acquired once per driver; a second acquire while it is
live is ``RunBusy``; once it expired another driver takes the run with a greater token, and
every move made under the old lease is refused (``RunLeaseLost``) with nothing committed.
Also: a version-1 SQLite journal (before the run lease) opens, migrates and keeps its rows.
"""

from __future__ import annotations

import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_stores import STORES, store_url

from litellm_toolgate import ConversationBehind, RunBusy, RunLeaseLost
from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.journal import (
    Effect,
    JournalError,
    NewCall,
    Outcome,
    RunLease,
    Step,
    argument_digest,
)
from litellm_toolgate.run.journal import open_journal, schema, sqlite
from litellm_toolgate.run.journal.store import holder_gone, local_holder

CANARY = "CANARY-41f0-ARGUMENT"


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


def call(n: int, *, run_id: str = "run-1", round_: int = 0) -> NewCall:
    return NewCall(
        run_id=run_id,
        attempt_id="att",
        round=round_,
        route="openai",
        call_id=f"call_{n}",
        tool="send",
        effect=Effect.NON_IDEMPOTENT,
        argument_digest=argument_digest({"text": CANARY, "n": n}, hmac_key=None),
    )


def test_one_driver_at_a_time_and_a_second_gets_run_busy(url: str) -> None:
    clock = Clock()
    with open_journal(url, clock=clock) as a, open_journal(url, clock=clock) as b:
        first = a.acquire_run("run-1", lease_seconds=30)
        with pytest.raises(RunBusy) as busy:
            b.acquire_run("run-1", lease_seconds=30)
        assert busy.value.run_id == "run-1" and busy.value.expires_at == 1_030.0
        assert b.acquire_run("run-2", lease_seconds=30).token == first.token == 1  # per run
        clock.now = 1_029.0
        with pytest.raises(RunBusy):  # still live a second before its end
            b.acquire_run("run-1", lease_seconds=30)
        a.release_run(first)  # released: free at once
        second = b.acquire_run("run-1", lease_seconds=30)
        assert second.token > first.token
        assert not a.check_run(first) and b.check_run(second)


def test_a_stale_driver_commits_nothing_after_a_takeover(url: str) -> None:
    clock = Clock()
    with open_journal(url, clock=clock) as a, open_journal(url, clock=clock) as b:
        old = a.acquire_run("run-1", lease_seconds=30)
        key = a.decide(call(0), run=old).idempotency_key
        claim = a.claim(key, lease_seconds=600, run=old)
        a.decide(call(1), run=old)
        clock.now += 31  # the lease ran out (the driver stalled): another takes the run
        new = b.acquire_run("run-1", lease_seconds=30)
        assert new.token > old.token
        refused: list[JournalError] = []
        for move in (
            lambda: a.decide(call(2), run=old),
            lambda: a.finish(claim, Outcome.SUCCEEDED, run=old),
            lambda: a.claim(call(1).idempotency_key, lease_seconds=60, run=old),
            lambda: a.skip(call(1).idempotency_key, reason="stale", run=old),
            lambda: a.reconcile(key, reason="stale", run=old),
            lambda: a.renew_run(old),
            lambda: a.calls("run-1", run=old),
        ):
            with pytest.raises(RunLeaseLost) as lost:
                move()
            refused.append(lost.value)
        assert all(
            (e.run_id, e.token, e.current) == ("run-1", old.token, new.token) for e in refused
        )
        rows = {r.call_id: r for r in b.calls("run-1")}
        assert set(rows) == {"call_0", "call_1"}  # call_2 was never written
        assert rows["call_0"].step is Step.STARTED and rows["call_1"].step is Step.DECIDED
        # The new driver goes on; the stale one's release does not touch its lease.
        a.release_run(old)
        assert b.check_run(new)
        b.finish(claim, Outcome.SUCCEEDED, run=new)
        assert b.get(key).step is Step.FINISHED


def test_a_move_renews_the_lease_once_a_third_of_it_passed(url: str) -> None:
    clock = Clock()
    with open_journal(url, clock=clock) as j, open_journal(url, clock=clock) as other:
        lease = j.acquire_run("run-1", lease_seconds=30)
        clock.now += 5  # not due: checked, not written
        j.decide(call(0), run=lease)
        assert lease.expires_at == 1_030.0 and other.run_holder("run-1")[2] == 1_030.0  # type: ignore[index]
        clock.now += 6  # 11 s of 30: due
        j.decide(call(1), run=lease)
        assert lease.expires_at == 1_041.0 and other.run_holder("run-1")[2] == 1_041.0  # type: ignore[index]
        clock.now = 1_040.0
        with pytest.raises(RunBusy):
            other.acquire_run("run-1", lease_seconds=30)
        j.renew_run(lease)  # the heartbeat's renewal, between moves
        assert other.run_holder("run-1")[2] == 1_070.0  # type: ignore[index]


def test_a_lease_whose_holder_process_is_gone_is_taken_at_once(url: str) -> None:
    gone = subprocess.run(
        [sys.executable, "-c", "from litellm_toolgate.run.journal.store import "
         "local_holder; print(local_holder())"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert holder_gone(gone)  # that process has exited
    assert not holder_gone(local_holder())  # this one is alive
    assert not holder_gone("elsewhere:1:2:3") and not holder_gone("garbage")
    with open_journal(url) as j:
        dead = j.acquire_run("run-1", lease_seconds=600, holder=gone)
        taken = j.acquire_run("run-1", lease_seconds=600)
        assert taken.token > dead.token
        with pytest.raises(RunBusy):  # a live holder is never taken over early
            j.acquire_run("run-1", lease_seconds=600)


def test_bad_run_lease_values_are_refused(url: str) -> None:
    with open_journal(url) as j:
        for bad in (0, -1, float("nan"), float("inf"), "30"):
            with pytest.raises(GateConfigError):
                j.acquire_run("run-1", lease_seconds=bad)
        with pytest.raises(GateConfigError):
            j.acquire_run("", lease_seconds=30)


def test_the_new_errors_say_ids_only_and_pickle() -> None:
    errors = [
        RunBusy("run-1", 12.0),
        RunLeaseLost("run-1", 3, 4),
        ConversationBehind("run-1", ["call_9"]),
    ]
    for error in errors:
        assert isinstance(error, JournalError)
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert "run-1" in str(error) and CANARY not in repr(error)
    assert "RunLease(" in repr(RunLease("run-1", 1, 30, 0.0))


def test_a_version_1_sqlite_journal_opens_and_migrates(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    names = dict(sqlite.NAMES)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(schema.VERSION_TABLE.format(**names))
    for statement in schema.MIGRATIONS[0].statements("sqlite"):  # what version 1 created
        conn.execute(statement.format(**names))
    conn.execute("INSERT INTO journal_schema_version (version, applied_at) VALUES (1, 0)")
    old = call(0)
    conn.execute(
        "INSERT INTO journal_calls (idempotency_key, run_id, attempt_id, round, route, "
        "call_id, tool, effect, argument_digest, step, decided_at, started_at, fencing_token, "
        "lease_expires_at) VALUES (?, 'run-1', 'att', 0, 'openai', 'call_0', 'send', "
        "'non_idempotent', ?, 'started', 1.0, 2.0, 41, 3.0)",
        (old.idempotency_key, old.argument_digest),
    )
    conn.execute("UPDATE journal_counter SET value = 41 WHERE name = 'fencing'")
    conn.close()
    with open_journal(f"sqlite:///{path}") as j:
        row = j.get(old.idempotency_key)
        assert (row.step, row.fencing_token) == (Step.STARTED, 41)
        lease = j.acquire_run("run-1", lease_seconds=30)
        assert lease.token == 1  # the run's first lease
        new = j.decide(call(1), run=lease)
        claim = j.claim(new.idempotency_key, lease_seconds=30, run=lease)
        assert claim.fencing_token == 42  # the counter goes on from where version 1 left it
        claim = j.claim(old.idempotency_key, lease_seconds=30, retry_expired=True, run=lease)
        assert claim.fencing_token == 43
        j.finish(claim, Outcome.SUCCEEDED, run=lease)
    with sqlite3.connect(path) as c:
        versions = [r[0] for r in c.execute("SELECT version FROM journal_schema_version")]
        indexes = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type='index'")]
    assert versions == [1, 2]
    assert "journal_calls_by_step" not in indexes


def test_moves_without_a_run_lease_work_as_before(url: str) -> None:
    """The journal's own API stays usable without a run lease (an operator, a tool)."""
    with open_journal(url) as j:
        lease = j.acquire_run("run-1", lease_seconds=30)
        key = j.decide(call(0)).idempotency_key
        j.finish(j.claim(key, lease_seconds=30), Outcome.SUCCEEDED)
        assert j.get(key).step is Step.FINISHED and j.check_run(lease)
