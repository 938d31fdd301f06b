"""The crash kit on the project's own loop: SIGKILL at every step boundary, on SQLite and on
PostgreSQL (``TOOLGATE_TEST_POSTGRES_URL``; without it the PostgreSQL case fails in CI and
says plainly that it did not run elsewhere, see tests/journal_stores.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from journal_stores import drop_schema, postgres_base, with_schema

from litellm_toolgate.testing import BOUNDARIES, CrashKit, crash_kit

__all__ = ["crash_kit"]  # the kit's fixture, used below

SCENARIO = "crash_scenarios:scenario"


@pytest.fixture
def postgres_schemas() -> Iterator[tuple[str, list[str]]]:
    base = postgres_base()
    made: list[str] = []
    yield base, made
    for schema in made:
        drop_schema(base, schema)


def _check(kit: CrashKit, url_of: object) -> None:
    report = kit.check(SCENARIO, journal_url=url_of)  # type: ignore[arg-type]
    # The uninterrupted run passes every boundary: two calls decided, started, run and
    # finished, then the next round.
    assert report.points.count("decided") == 2 and report.points.count("round") == 1
    assert {c.point for c in report.cases} == set(BOUNDARIES)
    assert len(report.cases) == 9
    for case in report.cases:
        sends = [k for k in case.runs if k.startswith("non_idempotent send")]
        assert all(case.runs[k] <= 1 for k in sends), case
        # A kill after `send` started and before it finished leaves it unfinished, and
        # then it is reported, never run again silently.
        if case.unfinished:
            assert case.reported or all(case.runs.values()), case
    started = [c for c in report.cases if c.point == "started" and c.occurrence == 1]
    assert started[0].reported and len(started[0].reported) == 1


def test_crash_kit_on_sqlite(crash_kit: CrashKit) -> None:
    _check(crash_kit, lambda workdir: f"sqlite:///{Path(workdir) / 'journal.db'}")


def test_crash_kit_on_postgres(
    crash_kit: CrashKit, postgres_schemas: tuple[str, list[str]]
) -> None:
    base, made = postgres_schemas

    def url(workdir: Path) -> str:
        schema = f"tg_crash_{uuid.uuid4().hex[:16]}"
        made.append(schema)
        return with_schema(base, schema)

    _check(crash_kit, url)
