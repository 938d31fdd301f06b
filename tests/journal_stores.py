"""The journal's stores, for tests: a fresh URL per test, on SQLite and on PostgreSQL.

PostgreSQL is found through ``TOOLGATE_TEST_POSTGRES_URL`` (``scripts/test.sh`` sets it to
the machine's server). Each test gets its own schema, dropped afterwards, so parallel runs
never collide. With the variable unset, the PostgreSQL cases FAIL when ``CI`` is set (a
missing server must not pass CI) and are otherwise skipped with a reason that says they did
not run.
"""

from __future__ import annotations

import contextlib
import os
import urllib.parse
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_ENV = "TOOLGATE_TEST_POSTGRES_URL"
STORES = ("sqlite", "postgres")


def postgres_base() -> str:
    url = os.environ.get(PG_ENV, "")
    if not url:
        if os.environ.get("CI"):
            pytest.fail(
                f"{PG_ENV} is not set in CI: the PostgreSQL journal tests must run there",
                pytrace=False,
            )
        pytest.skip(
            f"NOT RUN: the PostgreSQL journal tests need a server; set {PG_ENV} "
            "(e.g. postgresql://postgres@127.0.0.1:5432/test)"
        )
    return url


def with_schema(base: str, schema: str) -> str:
    parts = urllib.parse.urlsplit(base)
    query = urllib.parse.parse_qsl(parts.query)
    query.append(("schema", schema))
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    parts = urllib.parse.urlsplit(base)
    with psycopg.connect(urllib.parse.urlunsplit(parts._replace(query="")), autocommit=True) as c:
        c.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@contextlib.contextmanager
def store_url(kind: str, tmp_path: Path) -> Iterator[str]:
    """A URL for a journal no other test uses."""
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path}/journal.db"
        return
    base = postgres_base()
    schema = f"tg_test_{uuid.uuid4().hex[:16]}"
    try:
        yield with_schema(base, schema)
    finally:
        drop_schema(base, schema)


def pg_query(url: str, sql: str) -> list[tuple[object, ...]]:
    """Run ``sql`` on the schema of a PostgreSQL journal URL ({schema} is filled in)."""
    import psycopg

    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    schema = query.pop("schema")
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))
    with psycopg.connect(conninfo, autocommit=True) as c:
        return list(c.execute(sql.format(schema=f'"{schema}"')).fetchall())
