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
from typing import Any

from bench.common import Row, summary
from bench.report import log
from litellm_toolgate.core.rules.journal import Effect, NewCall, Outcome, argument_digest
from litellm_toolgate.run.journal import open_journal

BUDGET = 1.5
DIGEST = argument_digest({"path": "/tmp/x", "n": 1}, hmac_key=None)


def journal_section(calls: int, pairs: int) -> list[Row]:
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "journal.db"
        rows.append(_measure("SQLite file (WAL, synchronous=FULL)", f"sqlite:///{path}",
                             _sqlite_floor(path), calls, pairs))  # fmt: skip
    base = os.environ.get("TOOLGATE_BENCH_POSTGRES_URL") or os.environ.get(
        "TOOLGATE_TEST_POSTGRES_URL"
    )
    name = "PostgreSQL (loopback, synchronous_commit default)"
    if not base:
        rows.append(
            {
                "section": "journal",
                "name": name,
                "error": "not run: set TOOLGATE_BENCH_POSTGRES_URL or TOOLGATE_TEST_POSTGRES_URL",
            }
        )
        log(rows[-1])
        return rows
    schema = f"tg_bench_{uuid.uuid4().hex[:12]}"
    try:
        rows.append(
            _measure(name, _with_schema(base, schema), _pg_floor(base, schema), calls, pairs)
        )
    finally:
        _pg_drop(base, schema)
    return rows


Floor = tuple[Callable[[str], None], Callable[[str], None], Callable[[], None]]


def _sqlite_floor(path: Path) -> Floor:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS bench_floor (k TEXT PRIMARY KEY, v INTEGER)")

    def insert(key: str) -> None:
        conn.execute("INSERT INTO bench_floor (k, v) VALUES (?, 0)", (key,))

    def update(key: str) -> None:
        conn.execute("UPDATE bench_floor SET v = v + 1 WHERE k = ?", (key,))

    return insert, update, conn.close


def _with_schema(base: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(base)
    query = [*urllib.parse.parse_qsl(parts.query), ("schema", schema)]
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _pg_floor(base: str, schema: str) -> Floor:
    import psycopg

    conn: Any = psycopg.connect(base, autocommit=True)
    conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    table = f'"{schema}".bench_floor'
    conn.execute(f"CREATE TABLE {table} (k TEXT PRIMARY KEY, v INTEGER)")

    def insert(key: str) -> None:
        conn.execute(f"INSERT INTO {table} (k, v) VALUES (%s, 0)", (key,))

    def update(key: str) -> None:
        conn.execute(f"UPDATE {table} SET v = v + 1 WHERE k = %s", (key,))

    return insert, update, conn.close


def _pg_drop(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _measure(name: str, url: str, floor: Floor, calls: int, pairs: int) -> Row:
    """Each transition timed right beside its floor write: a burst of load from elsewhere
    hits both. A pair is ``calls`` calls; its ratio is the median journal transition over
    the median floor write of that pair."""
    insert, update, close = floor
    journal = open_journal(url)
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
                c = NewCall(
                    "bench", "a", pair, "openai", key, "tool", Effect.NON_IDEMPOTENT, DIGEST
                )
                t0 = clock()
                insert(key)
                t1 = clock()
                journal.decide(c)
                t2 = clock()
                update(key)
                t3 = clock()
                claim = journal.claim(c.idempotency_key, lease_seconds=60)
                t4 = clock()
                update(key)
                t5 = clock()
                journal.finish(claim, Outcome.SUCCEEDED, result_size=1)
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
        close()
    by_step = {k: statistics.median(v) / statistics.median(floors[k]) for k, v in steps.items()}
    row: Row = {
        "section": "journal",
        "name": name,
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
