"""The journal's schema, as versioned migrations shared by every store.

``journal_schema_version`` holds one row per applied migration; a store applies the
migrations it has not seen, in order, in one transaction, when it opens. A version on disk
newer than :data:`LATEST` is refused (:class:`JournalVersionError`): this code never writes
to a schema it does not know.

Templates name tables through ``{calls}``, ``{version}``, ``{counter}``, ``{fencing}``,
``{runs}``, ``{by_step}`` and the SQLite triggers' names (qualified by the store) and column types
through ``{real}`` and ``{bigint}``.

Versions:

1. ``journal_calls`` (one row per released call), its indexes, the fencing sequence
   (a counter row on SQLite, a ``SEQUENCE`` on PostgreSQL).
2. ``journal_runs``: one row per run, the run's lease (holder, fencing token, expiry), so a
   run has one driver at a time (on SQLite ``WITHOUT ROWID``: one B-tree to write). A
   lease's token is one more than the run's last (per run, like the resource it fences).
   On SQLite, a trigger moves the fencing counter when a claim writes its token, so a
   claim is one statement (its own transaction) there too.
   The index on (step, run_id) is dropped: every step change paid for it, and it served only
   the listing of started calls across all runs (an operator's command; a run's own rows
   are found through its ``(run_id, call_id)`` key). A version-1 journal is migrated in
   place when it is opened: its rows are kept, and the counter goes on from where it was.
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
    Migration(
        2,
        common=(
            # Every step change paid for this index; it served only the listing of started
            # calls across all runs (an operator's command), which now reads the table.
            "DROP INDEX {by_step_qualified}",
            """CREATE TABLE {runs} (
                run_id TEXT PRIMARY KEY,
                holder TEXT NOT NULL,
                lease_token {bigint} NOT NULL,
                lease_expires_at {real} NOT NULL,
                acquired_at {real} NOT NULL
            ){without_rowid}""",
        ),
        sqlite=(
            # A claim sets fencing_token to the counter + 1 in its one UPDATE; this moves the
            # counter in the same statement (so, the same transaction).
            """CREATE TRIGGER {claim_trigger} AFTER UPDATE OF fencing_token ON {calls}
            WHEN NEW.fencing_token IS NOT NULL BEGIN
                UPDATE {counter} SET value = NEW.fencing_token
                WHERE name = 'fencing' AND value < NEW.fencing_token;
            END""",
        ),
    ),
)

LATEST = MIGRATIONS[-1].version
