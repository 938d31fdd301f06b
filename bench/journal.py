"""The run journal's cost: each transition against the floor of one bare durable write.

A call costs the journal three committed transitions (decide, claim, finish). The floor is
what no journal can beat with the same durability settings: one bare ``INSERT`` (for
decide) and two bare ``UPDATE`` s (for claim and finish), each its own committed
transaction, on the same database file (SQLite, WAL, ``synchronous=FULL``) or server
(PostgreSQL, the same connection settings), measured in the same run. The two run in
lock step over fresh keys: each transition is timed right after its floor write, so load
from elsewhere falls on both. Figures are wall time (the journal's cost is waiting for
commits): per pair of ``calls`` calls, the median transition over the median floor write
(median, min, max over pairs); per transition, its median over its floor write's median,
which is what the budget (1.5) is judged on, the worst of the three. Claims per second is
one worker claiming, each claim a commit.

Each store is measured twice: the moves as the journal's own API makes them (no run
lease), and as ``gate.run`` makes them, under a run lease (``run=``: the move also checks
the lease's token in its statement, and renews the lease in its transaction when due).

The loop's journal time per call (``loop`` rows): ``gate.run`` of two rounds (one call,
then a text answer) with its journal wrapped so that every journal method the loop calls
is recorded and timed: ``begin_run`` (the run lease and the run's rows), decide, claim,
finish, ``release_run``. Judged: those same calls, in that order (the bench asserts the
run made exactly these), replayed on the same store once the runs are over, each move right
after the bare commit it stands for, as the transition rows are timed: one ``INSERT`` and
two ``UPDATE`` s, each its own durable transaction, for the call's three moves, and for the
run lease's take and release (which the journal commits without waiting for the disk) one
bare ``UPDATE`` committed the same way (SQLite ``synchronous=NORMAL`` for that statement,
PostgreSQL ``synchronous_commit = off``); same file or server. Per run, the calls' time
over those five bare commits' time; the budget (1.5) is judged on the median. Beside it,
not judged: the same calls over the three durable commits alone (the measure before the
run lease existed: the lease's two round trips then count as overhead), and the ratio
inside the run (each move bracketed by its floor, before and after it), for reference
only, because there the first writes after a stream meet litellm's own threads (they hold
the GIL when a commit returns) and the ratio of one run ranges from 0.2 to 10 or more, so
its median moves with the machine's load.

PostgreSQL runs when ``TOOLGATE_BENCH_POSTGRES_URL`` or ``TOOLGATE_TEST_POSTGRES_URL``
names a server; its row says it did not run otherwise. Each run uses a schema of its own,
dropped at the end.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
import tempfile
import time
import urllib.parse
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from bench.bodies import TOOLS, text_body, tool_body
from bench.common import Row, Upstream, summary
from bench.report import log
from litellm_toolgate.core.rules.journal import Effect, NewCall, Outcome, argument_digest
from litellm_toolgate.run.journal import open_journal

BUDGET = 1.5
DIGEST = argument_digest({"path": "/tmp/x", "n": 1}, hmac_key=None)


def journal_section(up: Upstream, calls: int, pairs: int, loop_runs: int) -> list[Row]:
    rows: list[Row] = []
    sqlite_name = "SQLite file (WAL, synchronous=FULL)"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.db"
        url = f"sqlite:///{path}"
        for leased in (False, True):
            rows.append(_measure(sqlite_name, url, _sqlite_floor(path), calls, pairs, leased))
        rows.append(_loop(up, sqlite_name, url, _sqlite_floor(path), loop_runs))
    base = os.environ.get("TOOLGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "TOOLGATE_TEST_POSTGRES_URL"
    )
    name = "PostgreSQL (loopback, synchronous_commit default)"
    if not base:
        for kind in ("", ", under a run lease", ", the loop's journal time per call"):
            rows.append(
                {
                    "section": "journal",
                    "name": name + kind,
                    "error": "not run: set TOOLGATE_BENCH_POSTGRES_URL or "
                    "TOOLGATE_TEST_POSTGRES_URL",
                }
            )
            log(rows[-1])
        return rows
    schema = f"tg_bench_{uuid.uuid4().hex[:12]}"
    try:
        url = _with_schema(base, schema)
        floor = _pg_floor(base, schema)
        for leased in (False, True):
            rows.append(_measure(name, url, floor, calls, pairs, leased, close_floor=False))
        rows.append(_loop(up, name, url, floor, loop_runs))
    finally:
        _pg_drop(base, schema)
    return rows


class Floor(NamedTuple):
    """The bare writes a journal move is measured against, on the same file or server."""

    insert: Callable[[str], None]  # one bare durable INSERT, its own transaction
    update: Callable[[str], None]  # one bare durable UPDATE, its own transaction
    lax: Callable[[str], None]  # one bare UPDATE committed without waiting for the disk
    close: Callable[[], None]


def _sqlite_floor(path: Path) -> Floor:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (k TEXT PRIMARY KEY, v INTEGER)")

    def insert(key: str) -> None:
        conn.execute("INSERT INTO bench_floor (k, v) VALUES (?, 0)", (key,))

    def update(key: str) -> None:
        conn.execute("UPDATE bench_floor SET v = v + 1 WHERE k = ?", (key,))

    def lax(key: str) -> None:  # as the journal's lease moves do it: that statement only
        conn.execute("PRAGMA synchronous = NORMAL")
        try:
            update(key)
        finally:
            conn.execute("PRAGMA synchronous = FULL")

    return Floor(insert, update, lax, conn.close)


def _with_schema(base: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(base)
    query = [*urllib.parse.parse_qsl(parts.query), ("schema", schema)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _pg_floor(base: str, schema: str) -> Floor:
    import psycopg

    conn: Any = psycopg.connect(base, autocommit=True)
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    table = f'"{schema}".bench_floor'
    conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (k TEXT PRIMARY KEY, v INTEGER)")

    def insert(key: str) -> None:
        conn.execute(f"INSERT INTO {table} (k, v) VALUES (%s, 0)", (key,))

    def update(key: str) -> None:
        conn.execute(f"UPDATE {table} SET v = v + 1 WHERE k = %s", (key,))

    def lax(key: str) -> None:  # as the journal's lease moves do it: inside the statement
        conn.execute(
            "WITH lax AS (SELECT set_config('synchronous_commit', 'off', true)) "
            f"UPDATE {table} SET v = v + 1 FROM lax WHERE k = %s",
            (key,),
        )

    return Floor(insert, update, lax, conn.close)


def _pg_drop(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _measure(  # noqa: PLR0917
    name: str,
    url: str,
    floor: Floor,
    calls: int,
    pairs: int,
    leased: bool,
    *,
    close_floor: bool = True,
) -> Row:
    """Each transition timed right beside its floor write: a burst of load from elsewhere
    hits both. A pair is ``calls`` calls; its ratio is the median journal transition over
    the median floor write of that pair. ``leased``: every move under a run lease, as the
    loop makes them."""
    insert, update, _, close = floor
    journal = open_journal(url)
    run_id = f"bench-{uuid.uuid4().hex[:8]}"
    lease = journal.acquire_run(run_id, lease_seconds=600) if leased else None
    ratios: list[float] = []
    journal_us: list[float] = []
    floor_us: list[float] = []
    steps: dict[str, list[float]] = {"decide": [], "claim": [], "finish": []}
    floors: dict[str, list[float]] = {"decide": [], "claim": [], "finish": []}
    claims_per_s: list[float] = []
    clock = time.perf_counter
    try:
        for pair in range(pairs + 1):  # the first pair warms caches and is not counted
            mine: list[float] = []
            theirs: list[float] = []
            claiming = 0.0
            for n in range(calls):
                key = f"{pair}-{n}-{uuid.uuid4().hex}"
                c = NewCall(run_id, "a", pair, "openai", key, "tool", Effect.NON_IDEMPOTENT, DIGEST)
                t0 = clock()
                insert(key)
                t1 = clock()
                journal.decide(c, run=lease)
                t2 = clock()
                update(key)
                t3 = clock()
                claim = journal.claim(c.idempotency_key, lease_seconds=60, run=lease)
                t4 = clock()
                update(key)
                t5 = clock()
                journal.finish(claim, Outcome.SUCCEEDED, result_size=1, run=lease)
                t6 = clock()
                claiming += t4 - t3
                if pair:
                    for step, j, f in (
                        ("decide", t2 - t1, t1 - t0),
                        ("claim", t4 - t3, t3 - t2),
                        ("finish", t6 - t5, t5 - t4),
                    ):
                        steps[step].append(j * 1e6)
                        floors[step].append(f * 1e6)
                        mine.append(j * 1e6)
                        theirs.append(f * 1e6)
            if pair == 0:
                continue
            ratios.append(statistics.median(mine) / statistics.median(theirs))
            journal_us.append(statistics.median(mine))
            floor_us.append(statistics.median(theirs))
            claims_per_s.append(calls / claiming)
    finally:
        journal.close()
        if close_floor:
            close()
    by_step = {k: statistics.median(v) / statistics.median(floors[k]) for k, v in steps.items()}
    row: Row = {
        "section": "journal",
        "name": f"{name}, under a run lease" if leased else name,
        "calls": calls,
        "ratio_wall": summary(ratios),
        "us": summary(journal_us),
        "floor_us": summary(floor_us),
        "step_us": {k: statistics.median(v) for k, v in steps.items()},
        "step_ratio": by_step,
        "claims_per_second": summary(claims_per_s),
        "budget_ratio": BUDGET,
        "met": max(by_step.values()) <= BUDGET,
    }
    log(row)
    return row


class _Timed:
    """A journal whose every method call adds its wall time to ``spent`` (and to
    ``by_method``): what the loop spends in the journal, whatever it calls. Each of a
    call's three transitions is bracketed by its bare durable commit (``INSERT`` around
    decide, ``UPDATE`` around claim and finish), and the run lease's take and release by a
    bare commit that does not wait for the disk, timed right before and right after it; the
    mean of the two goes into ``bare``. So the floor meets the same moment of the run as
    the move: the first write after a stream meets litellm's own threads (they hold the GIL
    when a commit returns), and that weight falls off over the next few writes."""

    def __init__(self, journal: Any, floor: Floor) -> None:
        self._journal = journal
        self._floor = floor
        self._keys = (uuid.uuid4().hex, uuid.uuid4().hex)
        self.spent = 0.0
        self.bare = 0.0
        self.by_method: dict[str, float] = {}
        self.sequence: list[str] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._journal, name)
        if not callable(method) or name == "clock":
            return method
        insert, update, lax, _ = self._floor
        bare = {
            "begin_run": lax,
            "decide": insert,
            "claim": update,
            "finish": update,
            "release_run": lax,
        }.get(name)

        def floor(key: str) -> None:
            if bare is not None:
                t0 = time.perf_counter()
                bare(key)
                self.bare += (time.perf_counter() - t0) / 2

        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sequence.append(name)
            floor(self._keys[0])
            t0 = time.perf_counter()
            try:
                return method(*args, **kwargs)
            finally:
                spent = time.perf_counter() - t0
                self.spent += spent
                self.by_method[name] = self.by_method.get(name, 0.0) + spent
                floor(self._keys[1])

        return timed


LOOP_BUDGET = 1.5


def _loop(up: Upstream, name: str, url: str, floor: Floor, runs: int) -> Row:
    """The loop's journal time per call against the bare commits a one-call run needs:
    judged on the loop's journal calls replayed beside their floor, with the in-run figure beside it
    (see the module's text)."""
    from litellm_toolgate import ToolGate
    from litellm_toolgate.run.tools import Tool

    insert, update, lax, close = floor
    up.body = text_body(20)
    answer = up.name  # the bench upstream serves the body its last message names
    up.body = tool_body(20)[0]
    ask = up.name
    gate = ToolGate(TOOLS)
    executors = {
        str(tool["function"]["name"]): Tool(lambda arguments: answer, effect="idempotent")
        for tool in TOOLS
    }
    in_run: list[float] = []
    methods: dict[str, list[float]] = {}
    sequence: list[str] = []
    replayed: list[float] = []
    replayed_durable: list[float] = []
    spent_us: list[float] = []
    floor_us: list[float] = []
    journal = open_journal(url)
    clock = time.perf_counter
    try:
        for n in range(runs + 1):  # the first run warms caches and is not counted
            # In a run: every journal call gate.run makes, each move bracketed by its floor.
            timed = _Timed(journal, floor)
            kwargs = up.kwargs()
            del kwargs["stream"]
            kwargs["messages"] = [{"role": "user", "content": ask}]
            result = gate.run(executors=executors, journal=timed, run_id=uuid.uuid4().hex, **kwargs)
            assert result.rounds == 2 and len(result.rows) == 1
            sequence = timed.sequence
            if n:
                in_run.append(timed.spent / timed.bare)
                for method, seconds in timed.by_method.items():
                    methods.setdefault(method, []).append(seconds * 1e6)
        time.sleep(1.0)  # litellm's threads of the last run finish
        for n in range(runs + 1):
            # Replayed: the same journal calls, in the same order, each move right after its
            # bare commit (the way the transition rows above are timed).
            run_id, key = uuid.uuid4().hex, uuid.uuid4().hex
            c = NewCall(run_id, "a", 0, "openai", key, "tool", Effect.IDEMPOTENT, DIGEST)
            t0 = clock()
            lax(key)
            t1 = clock()
            lease, _ = journal.begin_run(run_id, lease_seconds=30)
            t2 = clock()
            insert(key)
            t3 = clock()
            journal.decide(c, run=lease)
            t4 = clock()
            update(key)
            t5 = clock()
            claim = journal.claim(c.idempotency_key, lease_seconds=60, run=lease)
            t6 = clock()
            update(key)
            t7 = clock()
            journal.finish(claim, Outcome.SUCCEEDED, result_size=1, result_digest=DIGEST, run=lease)
            t8 = clock()
            lax(key)
            t9 = clock()
            journal.release_run(lease)
            t10 = clock()
            if n:
                mine = (t2 - t1) + (t4 - t3) + (t6 - t5) + (t8 - t7) + (t10 - t9)
                durable = (t3 - t2) + (t5 - t4) + (t7 - t6)
                bare = durable + (t1 - t0) + (t9 - t8)
                replayed.append(mine / bare)
                replayed_durable.append(mine / durable)
                spent_us.append(mine * 1e6)
                floor_us.append(bare * 1e6)
    finally:
        journal.close()
        close()
        gate.close()
    # The replay is what the loop does: the run's own calls, in order.
    assert sequence == ["begin_run", "decide", "claim", "finish", "release_run"], sequence
    row: Row = {
        "section": "journal",
        "name": f"{name}, the loop's journal time per call",
        "loop": True,
        "runs": runs,
        "calls": sequence,
        "ratio_wall": summary(replayed),
        "ratio_wall_durable": summary(replayed_durable),
        "us": summary(spent_us),
        "floor_us": summary(floor_us),
        "in_run_ratio": summary(in_run),
        "method_us": {k: statistics.median(v) for k, v in sorted(methods.items())},
        "budget_ratio": LOOP_BUDGET,
        "met": statistics.median(replayed) <= LOOP_BUDGET,
    }
    log(row)
    return row
