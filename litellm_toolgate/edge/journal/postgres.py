"""The fleet store: PostgreSQL through psycopg 3 (the optional extra ``postgres``).

One connection per journal in autocommit mode, shared by its threads under the journal's
lock; each method runs in one explicit transaction. The fencing token is ``nextval`` of a
``SEQUENCE``: strictly increasing across every claim of every worker. A claim is the
conditional ``UPDATE`` alone (its row lock lasts the statement's transaction, never the
tool's run). Tables live in one schema (``?schema=NAME``, default ``public``), created on
first open; concurrent first opens serialize on an advisory lock.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator
from typing import Any

from .store import Clock, Cursor, Observer, SqlJournal


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
            with self._tx() as cur:
                # One migrator at a time per schema, even across processes.
                cur.execute("SELECT pg_advisory_xact_lock(%s)", [zlib.crc32(schema.encode())])
                cur.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
                self._migrate(cur)
        except BaseException:
            self._conn.close()
            raise

    def _placeholder(self, sql: str) -> str:
        return sql.replace("?", "%s")

    @contextlib.contextmanager
    def _begin(self) -> Iterator[Cursor]:
        with self._conn.transaction(), self._conn.cursor() as cur:
            yield cur

    def _next_token(self, cur: Cursor) -> int:
        cur.execute(self._q("SELECT nextval('{fencing}')"))
        value: Any = cur.fetchone()[0]
        return int(value)

    def _disconnect(self) -> None:
        self._conn.close()
