"""The embedded store: stdlib ``sqlite3``, one file in WAL mode (or ``:memory:``).

One connection per journal, shared by its threads under the journal's lock. A move is one
statement in autocommit mode: a DML statement's transaction is a write transaction from its
first step (the write lock is taken when it begins, waiting on the busy timeout, so two
processes racing for a claim serialize there instead of failing on upgrade), and it commits
when the statement ends: one commit, no ``BEGIN`` / ``COMMIT`` round of its own. A claim
writes the ``fencing`` counter + 1 as its token and a trigger moves the counter in the same
statement. Several statements (a migration, a move that renews the run lease) run in
``BEGIN IMMEDIATE``. A read is one ``SELECT``, its own read transaction (WAL readers
do not wait for the writer). ``synchronous=FULL`` by default: a commit is on disk when the
method returns (the run lease's own moves excepted: ``NORMAL`` for that statement, see
``store.py``).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any

from ...core.errors import GateConfigError
from .store import Clock, Cursor, Kind, Observer, SqlJournal

MIN_SQLITE = (3, 35, 0)  # RETURNING

NAMES = {
    "calls": "journal_calls",
    "version": "journal_schema_version",
    "counter": "journal_counter",
    "fencing": "",
    "by_step": "journal_calls_by_step",
    "runs": "journal_runs",
    "by_step_qualified": "journal_calls_by_step",
    "claim_trigger": "journal_claim_moves_counter",
    "without_rowid": " WITHOUT ROWID",
    "claim_token": "(SELECT value + 1 FROM journal_counter WHERE name = 'fencing')",
    "lax_with": "",
    "lax_from": "",
    "real": "REAL",
    "bigint": "INTEGER",
}


class SqliteJournal(SqlJournal):
    """A journal in one SQLite file (``path``), or in memory (``":memory:"``)."""

    dialect = "sqlite"

    def __init__(
        self,
        path: str,
        *,
        timeout: float = 30.0,
        synchronous: str = "FULL",
        clock: Clock,
        observer: Observer | None = None,
    ) -> None:
        if sqlite3.sqlite_version_info < MIN_SQLITE:  # pragma: no cover - old platforms
            raise GateConfigError("the SQLite journal needs SQLite 3.35 or newer (RETURNING)")
        super().__init__(dict(NAMES), clock=clock, observer=observer)
        self.path = path
        self._synchronous = synchronous
        try:
            self._conn = sqlite3.connect(
                path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        except sqlite3.Error as e:
            # A directory that does not exist, a file that is not a database: the set-up.
            raise GateConfigError(f"cannot open the SQLite journal: {e}") from None
        try:
            if path != ":memory:":
                self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute(f"PRAGMA synchronous = {synchronous}")
            with self._tx("many") as cur:
                self._migrate(cur)
        except BaseException:
            self._conn.close()
            raise

    @contextlib.contextmanager
    def _begin(self, kind: Kind) -> Iterator[Cursor]:
        cur = self._conn.cursor()
        if kind == "read":  # one SELECT: its own read transaction, no write lock
            try:
                yield cur
            finally:
                cur.close()
            return
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()

    def _execute_one(self, sql: str, params: Sequence[Any]) -> Any:
        # Autocommit: the statement is its transaction. Reading every row it returns steps
        # it to its end, where it commits (a RETURNING statement not stepped to the end
        # would keep the write lock).
        found = self._conn.execute(sql, params).fetchall()
        return found[0] if found else None

    def _execute_lax(self, sql: str, params: Sequence[Any]) -> Any:
        if self._synchronous == "NORMAL":
            return self._execute_one(sql, params)
        # A connection setting, read when a transaction commits: this statement's only.
        self._conn.execute("PRAGMA synchronous = NORMAL")
        try:
            return self._execute_one(sql, params)
        finally:
            self._conn.execute(f"PRAGMA synchronous = {self._synchronous}")

    def _disconnect(self) -> None:
        self._conn.close()
