"""The fleet store: PostgreSQL through psycopg 3 (the optional extra ``postgres``).

One connection per journal in autocommit mode, shared by its threads under the journal's
lock; each move is one statement (its own transaction: one round trip), and so is each of
the run lease's own moves (committed with ``synchronous_commit = off``, set inside the
statement; a run's first lease and its rows are one statement); a migration and a move that
renews the run lease are one explicit transaction. A move under a run lease checks the
lease with ``FOR SHARE`` on the run's row: a takeover waits for the move to commit, and a
move after a takeover sees it. The fencing token is ``nextval`` of a ``SEQUENCE``, drawn by
the claim's conditional ``UPDATE`` itself: strictly increasing across every claim of every
worker. The row lock of that ``UPDATE`` lasts its statement, never the tool's run.
Tables live in one schema (``?schema=NAME``, default ``public``), created on first open;
concurrent first opens serialize on an advisory lock.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator, Sequence
from typing import Any

from .store import _ACQUIRE, _SELECT, Clock, Cursor, Kind, Observer, SqlJournal

_BEGIN = (
    "{lax_with}, acq AS ("
    + _ACQUIRE.removeprefix("{lax_with}").replace(
        "RETURNING lease_token", "RETURNING lease_token, (r.xmax = 0) AS fresh"
    )
    + ") SELECT acq.lease_token, acq.fresh, "
    + ", ".join(f"c.{name}" for name in _SELECT.split(", "))
    + " FROM acq LEFT JOIN {calls} c ON c.run_id = ? "
    "ORDER BY c.round, c.decided_at, c.call_id"
)


class PostgresJournal(SqlJournal):
    """A journal in a PostgreSQL schema."""

    dialect = "postgres"

    def __init__(
        self,
        conninfo: str,
        *,
        schema: str = "public",
        connect_timeout: float = 30.0,
        clock: Clock,
        observer: Observer | None = None,
    ) -> None:
        import psycopg

        q = f'"{schema}".'
        super().__init__(
            {
                "calls": q + "journal_calls",
                "version": q + "journal_schema_version",
                "counter": "",
                "fencing": q + "journal_fencing",
                "by_step": "journal_calls_by_step",
                "runs": q + "journal_runs",
                "by_step_qualified": q + "journal_calls_by_step",
                "claim_trigger": "",
                "without_rowid": "",
                "claim_token": f"nextval('{q}journal_fencing')",
                # set_config(..., true) lasts to the end of the statement's own transaction,
                # whose commit then does not wait for the WAL flush.
                "lax_with": "WITH lax AS (SELECT set_config('synchronous_commit', 'off', true))",
                "lax_from": " FROM lax",
                "real": "DOUBLE PRECISION",
                "bigint": "BIGINT",
            },
            clock=clock,
            observer=observer,
        )
        self.schema = schema
        self._conn: Any = psycopg.connect(
            conninfo, autocommit=True, connect_timeout=max(1, int(connect_timeout))
        )
        try:
            with self._tx("many") as cur:
                # One migrator at a time per schema, even across processes.
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(schema.encode())])
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                self._migrate(cur)
        except BaseException:
            self._conn.close()
            raise

    def _placeholder(self, sql: str) -> str:
        return sql.replace("?", "%s")

    guard = " AND EXISTS (SELECT 1 FROM {runs} WHERE run_id = ? AND lease_token = ? FOR SHARE)"

    @contextlib.contextmanager
    def _begin(self, kind: Kind) -> Iterator[Cursor]:
        if kind == "many":
            with self._conn.transaction(), self._conn.cursor() as cur:
                yield cur
        else:
            # One statement on an autocommit connection is its own transaction.
            with self._conn.cursor() as cur:
                yield cur

    def _execute_one(self, sql: str, params: Sequence[Any]) -> Any:
        # One statement on an autocommit connection is its own transaction: one round
        # trip. (A move's explaining read, when its write matched nothing, is a second
        # statement; the refusal was decided by the write.)
        return self._conn.execute(sql, params).fetchone()

    def _execute_lax(self, sql: str, params: Sequence[Any]) -> Any:
        # The statement sets synchronous_commit = off for its own transaction ({lax_with}).
        return self._conn.execute(sql, params).fetchone()

    def _acquire_and_read(self, params: list[Any], run_id: str) -> tuple[Any, Any]:
        # One statement: the lease's upsert (lax) and, when it inserted the run's first
        # lease row (no driver before it, so no former driver's move can be in flight), the
        # run's rows from the same snapshot. A lease taken from a former driver is read
        # again by a statement of its own (its snapshot follows the upsert, which waited for
        # any move of the former driver that held the run's row).
        found = self._execute_many(self._q(_BEGIN), [*params, run_id])
        if not found or found[0][0] is None:
            return None, None
        token, fresh = found[0][0], found[0][1]
        if not fresh:
            return (token,), None
        return (token,), [(*r[2:], token) for r in found if r[2] is not None]

    def _execute_many(self, sql: str, params: list[Any]) -> list[Any]:
        rows: list[Any] = self._conn.execute(sql, params).fetchall()
        return rows

    def _disconnect(self) -> None:
        self._conn.close()
