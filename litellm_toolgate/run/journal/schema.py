"""The journal's schema, as versioned migrations shared by every store.

``journal_schema_version`` holds one row per applied migration; a store applies the
migrations it has not seen, in order, in one transaction, when it opens. A version on disk
newer than :data:`LATEST` is refused (:class:`JournalVersionError`): this code never writes
to a schema it does not know.

Templates name tables through ``{calls}``, ``{version}``, ``{counter}``, ``{fencing}`` and
``{by_step}`` (qualified by the store) and column types through ``{real}`` and ``{bigint}``.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True, slots=True)
class Migration:
    version: int
    common: tuple[str, ...]
    sqlite: tuple[str, ...] = ()
    postgres: tuple[str, ...] = ()

    def statements(self, dialect: str) -> tuple[str, ...]:
        return self.common + (self.sqlite if dialect == "sqlite" else self.postgres)


VERSION_TABLE = (
    "CREATE TABLE IF NOT EXISTS {version} (version INTEGER PRIMARY KEY, applied_at {real} NOT NULL)"
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        common=(
            """CREATE TABLE {calls} (
                idempotency_key TEXT PRIMARY KEY,
                run_id TEXT NOT NULL,
                attempt_id TEXT NOT NULL,
                round INTEGER NOT NULL,
                route TEXT NOT NULL,
                call_id TEXT NOT NULL,
                tool TEXT NOT NULL,
                effect TEXT NOT NULL,
                argument_digest TEXT NOT NULL,
                step TEXT NOT NULL,
                outcome TEXT,
                error_class TEXT,
                result_size {bigint},
                result_digest TEXT,
                decided_at {real} NOT NULL,
                started_at {real},
                finished_at {real},
                fencing_token {bigint},
                lease_expires_at {real},
                approval_status TEXT,
                approval_argument_digest TEXT,
                approval_schema_digest TEXT,
                approval_policy_version TEXT,
                approval_expires_at {real},
                skipped_reason TEXT,
                reconciled_reason TEXT,
                reconciled_at {real},
                UNIQUE (run_id, call_id)
            )""",
            "CREATE INDEX {by_step} ON {calls} (step, run_id)",
        ),
        sqlite=(
            "CREATE TABLE {counter} (name TEXT PRIMARY KEY, value INTEGER NOT NULL)",
            "INSERT INTO {counter} (name, value) VALUES ('fencing', 0)",
        ),
        postgres=("CREATE SEQUENCE {fencing} AS BIGINT START 1",),
    ),
)

LATEST = MIGRATIONS[-1].version
