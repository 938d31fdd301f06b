"""The journal's stores (edge/journalstores), one suite run on SQLite and on a real PostgreSQL.

Every move commits before it returns: the checks read the rows back through a second,
independent journal on the same URL. The PostgreSQL cases need ``TOOLGATE_TEST_POSTGRES_URL``
(tests/journal_stores.py says what happens without it).
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_stores import STORES, pg_query, store_url

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.journal import (
    AlreadyClaimed,
    ApprovalStatus,
    CallIdReused,
    Claim,
    Effect,
    IllegalTransition,
    JournalRow,
    JournalVersionError,
    NewCall,
    Outcome,
    StaleClaim,
    Step,
    UnknownCall,
    argument_digest,
    schema_digest,
)
from litellm_toolgate.run.journal import Journal, open_journal

CANARY = "CANARY-7d1e-ARGUMENT"
RESULT_CANARY = "CANARY-9b2c-RESULT"


class Clock:
    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def journal(url: str, clock: Clock) -> Iterator[Any]:
    j = open_journal(url, clock=clock)
    yield j
    j.close()


def call(n: int = 0, *, run_id: str = "run-1", round_: int = 0, **over: Any) -> NewCall:
    fields: dict[str, Any] = {
        "run_id": run_id,
        "attempt_id": "att-1",
        "round": round_,
        "route": "openai",
        "call_id": f"call_{n}",
        "tool": "write_file",
        "effect": Effect.NON_IDEMPOTENT,
        "argument_digest": argument_digest({"path": f"/tmp/{n}", "text": CANARY}, hmac_key=b"k"),
    }
    fields.update(over)
    return NewCall(**fields)


def test_a_store_is_a_journal(journal: Any) -> None:
    assert isinstance(journal, Journal)


def test_decide_inserts_once_and_returns_the_same_row_again(journal: Any, url: str) -> None:
    row = journal.decide(call())
    assert row.step is Step.DECIDED and row.decided_at == 1_000.0
    assert row.effect is Effect.NON_IDEMPOTENT and row.fencing_token is None
    assert journal.decide(call(attempt_id="att-2")) == row
    with open_journal(url) as other:
        assert other.get(row.idempotency_key) == row


def test_a_call_id_reused_in_the_run_is_refused(journal: Any) -> None:
    journal.decide(call())
    for other in (call(round_=1), call(tool="rm"), call(argument_digest="sha256:" + "0" * 64)):
        with pytest.raises(CallIdReused):
            journal.decide(other)
    # The same call id in another run is another call.
    assert journal.decide(call(run_id="run-2")).run_id == "run-2"
    assert len(journal.calls("run-1")) == 1


def test_claim_then_finish_with_growing_fencing_tokens(journal: Any, url: str) -> None:
    tokens = []
    for n in range(3):
        key = journal.decide(call(n)).idempotency_key
        claim = journal.claim(key, lease_seconds=30)
        assert claim == Claim(key, claim.fencing_token, 1_030.0)
        assert journal.check_token(key, claim.fencing_token)
        assert not journal.check_token(key, claim.fencing_token + 1)
        with open_journal(url) as other:
            started = other.get(key)
        assert started.step is Step.STARTED and started.started_at == 1_000.0
        done = journal.finish(
            claim,
            Outcome.SUCCEEDED,
            result_size=42,
            result_digest=argument_digest("{}", hmac_key=None),
        )
        assert done.step is Step.FINISHED and done.outcome is Outcome.SUCCEEDED
        assert done.result_size == 42 and done.finished_at == 1_000.0
        assert not journal.check_token(key, claim.fencing_token)
        tokens.append(claim.fencing_token)
    assert tokens == sorted(tokens) and len(set(tokens)) == 3
    assert not journal.check_token("0" * 64, tokens[0])


def test_a_live_lease_keeps_a_second_claim_out(journal: Any, url: str, clock: Clock) -> None:
    key = journal.decide(call()).idempotency_key
    journal.claim(key, lease_seconds=30)
    clock.now += 29
    with open_journal(url, clock=clock) as other:
        for retry in (False, True):
            with pytest.raises(AlreadyClaimed) as raised:
                other.claim(key, lease_seconds=30, retry_expired=retry)
            assert raised.value.lease_live


def test_an_expired_lease_is_reclaimed_only_when_allowed(journal: Any, clock: Clock) -> None:
    key = journal.decide(call()).idempotency_key
    first = journal.claim(key, lease_seconds=5)
    clock.now += 10
    with pytest.raises(AlreadyClaimed) as raised:
        journal.claim(key, lease_seconds=5)
    assert not raised.value.lease_live
    second = journal.claim(key, lease_seconds=5, retry_expired=True)
    assert second.fencing_token > first.fencing_token
    assert not journal.check_token(key, first.fencing_token)
    assert journal.check_token(key, second.fencing_token)
    with pytest.raises(StaleClaim) as stale:
        journal.finish(first, Outcome.SUCCEEDED)
    assert (stale.value.token, stale.value.current) == (first.fencing_token, second.fencing_token)
    assert journal.finish(second, Outcome.FAILED, error_class="TimeoutError").outcome is (
        Outcome.FAILED
    )
    # A failed claim draws no token that a later claim skips past in a way that matters:
    # the next claim anywhere is still greater than every one before.
    third = journal.claim(journal.decide(call(1)).idempotency_key, lease_seconds=5)
    assert third.fencing_token > second.fencing_token


@pytest.mark.parametrize("end", ["finish", "skip", "reconcile"])
def test_no_claim_after_a_terminal_step(journal: Any, end: str) -> None:
    key = journal.decide(call()).idempotency_key
    if end == "finish":
        journal.finish(journal.claim(key, lease_seconds=1), Outcome.SUCCEEDED)
    elif end == "skip":
        journal.skip(key, reason="approval denied")
    else:
        journal.reconcile(key, reason="checked by hand")
    with pytest.raises(AlreadyClaimed):
        journal.claim(key, lease_seconds=1, retry_expired=True)
    with pytest.raises(UnknownCall):
        journal.claim("f" * 64, lease_seconds=1)


def test_finish_refuses_what_it_cannot_record(journal: Any) -> None:
    key = journal.decide(call()).idempotency_key
    with pytest.raises(StaleClaim):  # never claimed: no token is current
        journal.finish(Claim(key, 1, 0.0), Outcome.SUCCEEDED)
    claim = journal.claim(key, lease_seconds=1)
    with pytest.raises(GateConfigError):
        journal.finish(claim, Outcome.SKIPPED)
    with pytest.raises(GateConfigError):
        journal.finish(claim, Outcome.FAILED, error_class=f"ValueError: {CANARY}")
    with pytest.raises(GateConfigError):
        journal.finish(claim, Outcome.SUCCEEDED, result_digest=RESULT_CANARY)
    journal.finish(claim, Outcome.AMBIGUOUS)
    with pytest.raises(IllegalTransition):
        journal.finish(claim, Outcome.SUCCEEDED)
    with pytest.raises(UnknownCall):
        journal.finish(Claim("e" * 64, 1, 0.0), Outcome.SUCCEEDED)


def test_skip_and_reconcile(journal: Any) -> None:
    a, b, c = (journal.decide(call(n)).idempotency_key for n in range(3))
    skipped = journal.skip(a, reason="approval expired")
    assert (skipped.step, skipped.outcome, skipped.skipped_reason) == (
        Step.FINISHED,
        Outcome.SKIPPED,
        "approval expired",
    )
    journal.claim(b, lease_seconds=1)
    with pytest.raises(IllegalTransition):
        journal.skip(b, reason="too late")
    started = journal.reconcile(b, reason="the file exists: it ran")
    assert (started.step, started.outcome) == (Step.RECONCILED, Outcome.AMBIGUOUS)
    assert started.reconciled_reason == "the file exists: it ran"
    decided = journal.reconcile(c, reason="never ran")
    assert (decided.step, decided.outcome) == (Step.RECONCILED, Outcome.SKIPPED)
    with pytest.raises(IllegalTransition):
        journal.reconcile(a, reason="again")
    with pytest.raises(UnknownCall):
        journal.reconcile("d" * 64, reason="nothing")
    with pytest.raises(UnknownCall):
        journal.skip("d" * 64, reason="nothing")
    with pytest.raises(GateConfigError):
        journal.reconcile(c, reason=" ")


def test_an_approval_is_bound_to_digests_and_version(journal: Any) -> None:
    key = journal.decide(call()).idempotency_key
    schema = schema_digest({"type": "object"})
    row = journal.record_approval(
        key,
        status=ApprovalStatus.APPROVED,
        argument_digest=call().argument_digest,
        schema_digest=schema,
        policy_version="v3",
        expires_at=2_000.0,
    )
    assert row.step is Step.DECIDED and row.approval_status is ApprovalStatus.APPROVED
    assert (row.approval_schema_digest, row.approval_policy_version) == (schema, "v3")
    assert row.approval_argument_digest == call().argument_digest
    assert row.approval_expires_at == 2_000.0
    journal.claim(key, lease_seconds=1)
    with pytest.raises(IllegalTransition):
        journal.record_approval(
            key,
            status=ApprovalStatus.EXPIRED,
            argument_digest=call().argument_digest,
            schema_digest=schema,
            policy_version="v3",
            expires_at=None,
        )


def test_listing_calls_unfinished_ambiguous_and_runs(journal: Any, clock: Clock) -> None:
    keys = [journal.decide(call(n, round_=n)).idempotency_key for n in range(3)]
    clock.now += 1
    journal.finish(journal.claim(keys[0], lease_seconds=1), Outcome.SUCCEEDED)
    journal.claim(keys[1], lease_seconds=1)
    clock.now += 1
    journal.decide(call(0, run_id="run-2"))
    assert [r.call_id for r in journal.calls("run-1")] == ["call_0", "call_1", "call_2"]
    assert [(r.call_id, r.step) for r in journal.unfinished("run-1")] == [
        ("call_1", Step.STARTED),
        ("call_2", Step.DECIDED),
    ]
    assert [r.call_id for r in journal.ambiguous("run-1")] == ["call_1"]
    assert [r.run_id for r in journal.ambiguous()] == ["run-1"]
    assert journal.ambiguous("run-2") == []
    runs = journal.runs()
    assert [(r.run_id, r.calls, r.unfinished, r.ambiguous) for r in runs] == [
        ("run-1", 3, 2, 1),
        ("run-2", 1, 1, 0),
    ]
    assert (runs[0].first_decided_at, runs[0].last_change_at) == (1_000.0, 1_001.0)
    assert journal.calls("nope") == []


def test_the_observer_runs_after_each_commit(url: str, clock: Clock) -> None:
    seen: list[tuple[str, Step, Step]] = []

    def observer(move: str, row: JournalRow) -> None:
        # Another connection already sees the move: it was committed.
        with open_journal(url) as other:
            seen.append((move, row.step, other.get(row.idempotency_key).step))

    with open_journal(url, observer=observer, clock=clock) as j:
        a = j.decide(call(0)).idempotency_key
        j.decide(call(0))  # the same call again moves nothing
        j.record_approval(
            a,
            status=ApprovalStatus.APPROVED,
            argument_digest=call(0).argument_digest,
            schema_digest=schema_digest({}),
            policy_version="1",
            expires_at=None,
        )
        j.finish(j.claim(a, lease_seconds=1), Outcome.SUCCEEDED)
        b = j.decide(call(1)).idempotency_key
        j.skip(b, reason="denied")
        c = j.decide(call(2)).idempotency_key
        j.reconcile(c, reason="checked")
    assert seen == [
        ("decided", Step.DECIDED, Step.DECIDED),
        ("approval", Step.DECIDED, Step.DECIDED),
        ("started", Step.STARTED, Step.STARTED),
        ("finished", Step.FINISHED, Step.FINISHED),
        ("decided", Step.DECIDED, Step.DECIDED),
        ("skipped", Step.FINISHED, Step.FINISHED),
        ("decided", Step.DECIDED, Step.DECIDED),
        ("reconciled", Step.RECONCILED, Step.RECONCILED),
    ]


def test_threads_racing_for_one_call_claim_it_once(journal: Any) -> None:
    key = journal.decide(call()).idempotency_key
    won: list[int] = []
    lost: list[int] = []
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait(timeout=60)
        try:
            won.append(journal.claim(key, lease_seconds=60).fencing_token)
        except AlreadyClaimed:
            lost.append(1)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(won) == 1 and len(lost) == 7


def test_rows_hold_digests_never_argument_or_result_text(url: str, tmp_path: Path) -> None:
    arguments = f'{{"path": "/etc/{CANARY}", "text": "{CANARY}"}}'
    result = f"wrote {RESULT_CANARY}".encode()
    digest = argument_digest(arguments, hmac_key=None)
    with open_journal(url) as j:
        key = j.decide(call(argument_digest=digest)).idempotency_key
        claim = j.claim(key, lease_seconds=5)
        j.finish(
            claim,
            Outcome.SUCCEEDED,
            result_size=len(result),
            result_digest=argument_digest({"result": result.decode()}, hmac_key=None),
        )
        assert j.get(key).argument_digest == digest
        assert CANARY not in repr(j.calls("run-1"))
    if url.startswith("sqlite"):
        stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
        assert digest.encode() in stored  # the digest is there, so the bytes were read
    else:
        rows = pg_query(url, "SELECT t::text FROM {schema}.journal_calls t")
        stored = "\n".join(str(r[0]) for r in rows).encode()
        assert digest.encode() in stored
    assert CANARY.encode() not in stored and RESULT_CANARY.encode() not in stored


def test_reopening_keeps_rows_and_applies_no_migration_twice(url: str) -> None:
    with open_journal(url) as j:
        row = j.decide(call())
    with open_journal(url) as j:
        assert j.get(row.idempotency_key) == row
    versions = schema_versions(url)
    assert versions == [1, 2]  # each migration once, in order


def schema_versions(url: str) -> list[int]:
    if url.startswith("sqlite"):
        import sqlite3

        path = url.removeprefix("sqlite:///")
        with sqlite3.connect(path) as c:
            return [r[0] for r in c.execute("SELECT version FROM journal_schema_version")]
    return [
        int(str(r[0])) for r in pg_query(url, "SELECT version FROM {schema}.journal_schema_version")
    ]


def test_a_newer_schema_on_disk_is_refused(url: str) -> None:
    open_journal(url).close()
    sql = "INSERT INTO {t} (version, applied_at) VALUES (99, 0)"
    if url.startswith("sqlite"):
        import sqlite3

        with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
            c.execute(sql.format(t="journal_schema_version"))
    else:
        pg_query(url, sql.format(t="{schema}.journal_schema_version") + " RETURNING version")
    with pytest.raises(JournalVersionError) as raised:
        open_journal(url)
    assert (raised.value.found, raised.value.known) == (99, 2)


def test_a_closed_journal_refuses_work(url: str) -> None:
    j = open_journal(url)
    j.close()
    j.close()
    with pytest.raises(GateConfigError, match="closed"):
        j.calls("run-1")


def test_memory_journal() -> None:
    with open_journal("sqlite:///:memory:") as j:
        key = j.decide(call()).idempotency_key
        j.finish(j.claim(key, lease_seconds=1), Outcome.SUCCEEDED)
        assert j.get(key).step is Step.FINISHED


@pytest.mark.parametrize(
    "bad",
    [
        "mysql://u@h/db",
        "sqlite:/x.db",
        "journal.db",
        "sqlite://",
        "sqlite:///",
        "sqlite:///x.db?timout=3",
        "sqlite:///x.db?timeout=0",
        "sqlite:///x.db?timeout=soon",
        "sqlite:///x.db?synchronous=off",
        "sqlite:///x.db?timeout=1&timeout=2",
        "sqlite:///x.db?=&&",
        "postgresql://u:s3cret@127.0.0.1:1/db?sslmdoe=require",
        "postgresql://u:s3cret@127.0.0.1:1/db?schema=Bad-Name",
        "postgres://u:s3cret@127.0.0.1:1/db?schema=a&schema=b",
    ],
)
def test_a_bad_url_is_refused_at_open(bad: str, tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(GateConfigError) as raised:
        open_journal(bad)
    assert "s3cret" not in str(raised.value)
    assert raised.value.__cause__ is None
    assert list(tmp_path.iterdir()) == []  # nothing was created


def test_a_non_string_url_is_refused() -> None:
    with pytest.raises(GateConfigError):
        open_journal(b"sqlite:///:memory:")  # type: ignore[arg-type]


def test_a_relative_sqlite_path(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    with open_journal("sqlite:///rel%20dir.db?timeout=5&synchronous=normal") as j:
        j.decide(call())
    assert (tmp_path / "rel dir.db").exists()


def test_a_libpq_option_passes_through(tmp_path: Path) -> None:
    with store_url("postgres", tmp_path) as u:
        parts = urllib.parse.urlsplit(u)
        with_option = urllib.parse.urlunsplit(
            parts._replace(query=parts.query + "&application_name=toolgate_test")
        )
        with open_journal(with_option) as j:
            assert j.decide(call()).step is Step.DECIDED


def test_postgresql_without_psycopg_says_how_to_install_it(monkeypatch: Any) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.setitem(sys.modules, "psycopg.conninfo", None)
    with pytest.raises(GateConfigError, match=r"litellm-toolgate\[postgres\]"):
        open_journal("postgresql://u:s3cret@127.0.0.1:1/db")


def test_migrations_apply_in_order_once_and_old_code_refuses_the_new_schema(
    url: str, monkeypatch: Any
) -> None:
    from litellm_toolgate.run.journal import schema, store

    with open_journal(url) as j:
        key = j.decide(call()).idempotency_key
    n = schema.LATEST
    second = schema.Migration(n + 1, common=("ALTER TABLE {calls} ADD COLUMN note TEXT",))
    third = schema.Migration(n + 2, common=("UPDATE {calls} SET note = 'from v3'",))
    monkeypatch.setattr(store, "MIGRATIONS", (*schema.MIGRATIONS, second, third))
    monkeypatch.setattr(store, "LATEST", n + 2)
    with open_journal(url) as j:
        assert j.get(key).step is Step.DECIDED  # the rows survive
    with open_journal(url) as j:  # nothing is applied twice (ADD COLUMN would fail)
        pass
    assert schema_versions(url) == list(range(1, n + 3))
    notes = (
        _sqlite_rows(url, "SELECT note FROM journal_calls")
        if url.startswith("sqlite")
        else pg_query(url, "SELECT note FROM {schema}.journal_calls")
    )
    assert [tuple(r) for r in notes] == [("from v3",)]
    monkeypatch.undo()
    with pytest.raises(JournalVersionError) as raised:
        open_journal(url)
    assert (raised.value.found, raised.value.known) == (n + 2, n)


def _sqlite_rows(url: str, sql: str) -> list[tuple[object, ...]]:
    import sqlite3

    with sqlite3.connect(url.removeprefix("sqlite:///")) as c:
        return list(c.execute(sql))


def test_an_unusable_sqlite_path_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(GateConfigError, match="cannot open"):
        open_journal(f"sqlite:///{tmp_path}/no/such/dir/journal.db")
