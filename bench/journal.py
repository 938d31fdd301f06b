"""The run journal's cost: each transition against the floor of one bare durable write.

A call costs the journal three committed transitions (decide, claim, finish). The floor is
what no journal can beat with the same durability settings: one bare ``INSERT`` (for
decide) and two bare ``UPDATE`` s (for claim and finish), each its own committed
transaction, on the same database file (SQLite, WAL, ``synchronous=FULL``) or server
(PostgreSQL, the same connection settings), measured in the same run. The two run in
interleaved pairs over fresh keys; the figure is the median per-pair ratio of wall time
(the journal's cost is waiting for commits, so wall time is what it costs), with min and
max. Claims per second is one worker claiming in a loop (commit-bound).

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
from litellm_toolgate.core.journal import Effect, NewCall, Outcome, argument_digest
from litellm_toolgate.edge.journal import open_journal

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
    insert, update, close = floor
    journal = open_journal(url)
    ratios: list[float] = []
    journal_us: list[float] = []
    floor_us: list[float] = []
    per_step: dict[str, list[float]] = {"decide": [], "claim": [], "finish": []}
    claims_per_s: list[float] = []
    try:
        for pair in range(pairs + 1):  # the first pair warms caches and is not counted
            keys = [f"{pair}-{n}-{uuid.uuid4().hex}" for n in range(calls)]
            t0 = time.perf_counter()
            for key in keys:
                insert(key)
            for key in keys:
                update(key)
            for key in keys:
                update(key)
            floor_s = time.perf_counter() - t0
            new = [
                NewCall("bench", "a", pair, "openai", k, "tool", Effect.NON_IDEMPOTENT, DIGEST)
                for k in keys
            ]
            t1 = time.perf_counter()
            for c in new:
                journal.decide(c)
            t2 = time.perf_counter()
            claims = [journal.claim(c.idempotency_key, lease_seconds=60) for c in new]
            t3 = time.perf_counter()
            for claim in claims:
                journal.finish(claim, Outcome.SUCCEEDED, result_size=1)
            t4 = time.perf_counter()
            if pair == 0:
                continue
            ratios.append((t4 - t1) / floor_s)
            journal_us.append((t4 - t1) / (3 * calls) * 1e6)
            floor_us.append(floor_s / (3 * calls) * 1e6)
            per_step["decide"].append((t2 - t1) / calls * 1e6)
            per_step["claim"].append((t3 - t2) / calls * 1e6)
            per_step["finish"].append((t4 - t3) / calls * 1e6)
            claims_per_s.append(calls / (t3 - t2))
    finally:
        journal.close()
        close()
    row: Row = {
        "section": "journal",
        "name": name,
        "calls": calls,
        "ratio_wall": summary(ratios),
        "us": summary(journal_us),
        "floor_us": summary(floor_us),
        "step_us": {k: statistics.median(v) for k, v in per_step.items()},
        "claims_per_second": summary(claims_per_s),
        "budget_ratio": BUDGET,
        "met": statistics.median(ratios) <= BUDGET,
    }
    log(row)
    return row
