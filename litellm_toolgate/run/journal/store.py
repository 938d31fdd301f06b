"""What every journal store does, written once over a DB-API connection.

Each public method is one committed transaction. Every move is a conditional ``UPDATE``
whose ``WHERE`` holds the step(s) the core's transition table allows it from (and, for a
finish, the fencing token); when it matches no row, the row is read back and the core says
why (:func:`~litellm_toolgate.core.rules.journal.claimable`, ``check_finish``, ...). Nothing is
held locked across a tool's run: a claim commits before the tool starts, and the lease and
the fencing token are what keep a second worker out.

The two stores differ in three places only: how a transaction begins (SQLite takes the
write lock up front with ``BEGIN IMMEDIATE``), how a claim draws its fencing token (a
counter row updated in the claim's transaction; a PostgreSQL ``SEQUENCE``), and parameter
style.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol

from ...core.errors import GateConfigError
from ...core.rules.journal import (
    COLUMNS,
    ApprovalStatus,
    Claim,
    IllegalTransition,
    JournalRow,
    JournalVersionError,
    Move,
    NewCall,
    Outcome,
    RunSummary,
    Step,
    UnknownCall,
    check_finish,
    check_lease,
    check_redecide,
    check_result,
    claimable,
    finish_outcome,
    reason_text,
    reconciled_outcome,
    sources,
)
from .schema import LATEST, MIGRATIONS, VERSION_TABLE

Observer = Callable[[str, JournalRow], None]
Kind = Literal["read", "one", "many"]
Clock = Callable[[], float]

_SELECT = ", ".join(COLUMNS)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, params: Sequence[Any] = ..., /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlJournal:
    """A journal over one connection, guarded by a lock (so it is thread-safe)."""

    dialect = ""

    def __init__(self, names: dict[str, str], *, clock: Clock, observer: Observer | None) -> None:
        self._names = names
        self._clock = clock
        self._observer = observer
        self._lock = threading.RLock()
        self._sql: dict[str, str] = {}
        self._closed = False

    # -- what a dialect supplies --------------------------------------------------------

    def _begin(self, kind: Kind) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for ``kind`` of work: ``"read"`` (one consistent read), ``"one"`` (one
        conditional write and, when it matches nothing, a read that explains why) or
        ``"many"`` (several statements in one transaction)."""
        raise NotImplementedError  # pragma: no cover

    def _token(self, cur: Cursor) -> tuple[str, list[Any]]:
        """The SQL expression (and its parameters) of a claim's new fencing token."""
        raise NotImplementedError  # pragma: no cover

    def _placeholder(self, sql: str) -> str:
        return sql

    # -- plumbing -----------------------------------------------------------------------

    def _q(self, template: str) -> str:
        sql = self._sql.get(template)
        if sql is None:
            sql = self._placeholder(template.format(**self._names))
            self._sql[template] = sql
        return sql

    @contextlib.contextmanager
    def _tx(self, kind: Kind) -> Iterator[Cursor]:
        with self._lock:
            if self._closed:
                raise GateConfigError("this journal is closed")
            with self._begin(kind) as cur:
                yield cur

    def _notify(self, move: Move, row: JournalRow) -> None:
        if self._observer is not None:
            self._observer(move.value, row)

    def _row(self, cur: Cursor, key: str) -> JournalRow:
        cur.execute(self._q(f"SELECT {_SELECT} FROM {{calls}} WHERE idempotency_key = ?"), [key])
        found = cur.fetchone()
        if found is None:
            raise UnknownCall(key)
        return _decode(found)

    def _rows(self, cur: Cursor, where: str, params: Sequence[Any]) -> list[JournalRow]:
        cur.execute(
            self._q(
                f"SELECT {_SELECT} FROM {{calls}} WHERE {where} "
                "ORDER BY run_id, round, decided_at, call_id"
            ),
            params,
        )
        return [_decode(r) for r in cur.fetchall()]

    def _move(
        self,
        cur: Cursor,
        move: Move,
        key: str,
        sets: str,
        params: Sequence[Any],
        *,
        token: int | None = None,
    ) -> JournalRow | None:
        """The conditional UPDATE of ``move``: from the table's source steps only."""
        steps = sources(move)
        marks = ", ".join("?" for _ in steps)
        extra = "" if token is None else " AND fencing_token = ?"
        cur.execute(
            self._q(
                f"UPDATE {{calls}} SET {sets} WHERE idempotency_key = ? "
                f"AND step IN ({marks}){extra} RETURNING {_SELECT}"
            ),
            [*params, key, *(s.value for s in steps), *([] if token is None else [token])],
        )
        found = cur.fetchone()
        return None if found is None else _decode(found)

    def _migrate(self, cur: Cursor) -> None:
        cur.execute(self._q(VERSION_TABLE))
        cur.execute(self._q("SELECT MAX(version) FROM {version}"))
        current = cur.fetchone()[0] or 0
        if current > LATEST:
            raise JournalVersionError(current, LATEST)
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            for statement in migration.statements(self.dialect):
                cur.execute(self._q(statement))
            cur.execute(
                self._q("INSERT INTO {version} (version, applied_at) VALUES (?, ?)"),
                [migration.version, self._clock()],
            )

    # -- the Journal API ---------------------------------------------------------------------

    def decide(self, call: NewCall) -> JournalRow:
        """Journal ``call`` at DECIDED. The same call again returns its row unchanged; its
        call id already used in the run for another call raises ``CallIdReused``."""
        row = JournalRow.decided(call, now=self._clock())
        record = row.to_record()
        with self._tx("one") as cur:
            cur.execute(
                self._q(
                    f"INSERT INTO {{calls}} ({_SELECT}) VALUES "
                    f"({', '.join('?' for _ in COLUMNS)}) ON CONFLICT DO NOTHING"
                ),
                [record[c] for c in COLUMNS],
            )
            inserted = cur.rowcount == 1
            if not inserted:
                existing = self._rows(
                    cur, "run_id = ? AND call_id = ?", [call.run_id, call.call_id]
                )
        if inserted:
            self._notify(Move.DECIDE, row)
            return row
        if not existing:  # pragma: no cover - a unique key conflicted, yet nothing is there
            raise UnknownCall(call.idempotency_key)
        return check_redecide(existing[0], call)

    def record_approval(
        self,
        key: str,
        *,
        status: ApprovalStatus,
        argument_digest: str,
        schema_digest: str,
        policy_version: str,
        expires_at: float | None,
    ) -> JournalRow:
        """Bind an approval (or a denial, or a timeout) to what was approved."""
        status = ApprovalStatus(status)
        with self._tx("one") as cur:
            row = self._move(
                cur,
                Move.APPROVE,
                key,
                "approval_status = ?, approval_argument_digest = ?, approval_schema_digest = ?, "
                "approval_policy_version = ?, approval_expires_at = ?",
                [status.value, argument_digest, schema_digest, policy_version, expires_at],
            )
            if row is None:
                raise IllegalTransition(key, self._row(cur, key).step, Move.APPROVE)
        self._notify(Move.APPROVE, row)
        return row

    def claim(self, key: str, *, lease_seconds: float, retry_expired: bool = False) -> Claim:
        """Move the call to STARTED under a lease, with a new fencing token.

        From DECIDED; or, with ``retry_expired=True`` (for a tool that may run again), from
        STARTED once the earlier claim's lease has expired. ``AlreadyClaimed`` otherwise."""
        lease = check_lease(lease_seconds)
        now = self._clock()
        with self._tx("one") as cur:
            token, token_params = self._token(cur)
            cur.execute(
                self._q(
                    f"UPDATE {{calls}} SET step = ?, fencing_token = {token}, "
                    "lease_expires_at = ?, "
                    "started_at = ? WHERE idempotency_key = ? AND (step = ? OR (? = 1 AND "
                    "step = ? AND (lease_expires_at IS NULL OR lease_expires_at <= ?))) "
                    f"RETURNING {_SELECT}"
                ),
                [
                    Step.STARTED.value,
                    *token_params,
                    now + lease,
                    now,
                    key,
                    *(s.value for s in sources(Move.CLAIM)),
                    1 if retry_expired else 0,
                    *(s.value for s in sources(Move.RECLAIM)),
                    now,
                ],
            )
            found = cur.fetchone()
            if found is None:
                move = claimable(self._row(cur, key), now=now, retry_expired=retry_expired)
                raise IllegalTransition(key, Step.STARTED, move)  # pragma: no cover - raced
        row = _decode(found)
        self._notify(Move.CLAIM, row)
        assert row.fencing_token is not None and row.lease_expires_at is not None
        return Claim(key, row.fencing_token, row.lease_expires_at)

    def check_token(self, key: str, token: int) -> bool:
        """For a tool: is ``token`` the current claim on this call (at STARTED)? False for a
        stale token, a finished call or an unknown key."""
        with self._tx("read") as cur:
            cur.execute(
                self._q("SELECT step, fencing_token FROM {calls} WHERE idempotency_key = ?"),
                [key],
            )
            found = cur.fetchone()
        return found is not None and found[0] == Step.STARTED.value and found[1] == token

    def finish(
        self,
        claim: Claim,
        outcome: Outcome,
        *,
        error_class: str | None = None,
        result_size: int | None = None,
        result_digest: str | None = None,
    ) -> JournalRow:
        """Move the call to FINISHED, with the claim's token only (``StaleClaim`` else)."""
        outcome = finish_outcome(outcome)
        check_result(error_class, result_size, result_digest)
        key = claim.idempotency_key
        with self._tx("one") as cur:
            row = self._move(
                cur,
                Move.FINISH,
                key,
                "step = ?, outcome = ?, error_class = ?, result_size = ?, result_digest = ?, "
                "finished_at = ?",
                [
                    Step.FINISHED.value,
                    outcome.value,
                    error_class,
                    result_size,
                    result_digest,
                    self._clock(),
                ],
                token=claim.fencing_token,
            )
            if row is None:
                check_finish(self._row(cur, key), claim)
                raise IllegalTransition(key, Step.STARTED, Move.FINISH)  # pragma: no cover
        self._notify(Move.FINISH, row)
        return row

    def skip(self, key: str, *, reason: str) -> JournalRow:
        """DECIDED -> FINISHED with outcome SKIPPED: the tool never ran (denied, expired)."""
        text = reason_text(reason)
        with self._tx("one") as cur:
            row = self._move(
                cur,
                Move.SKIP,
                key,
                "step = ?, outcome = ?, skipped_reason = ?, finished_at = ?",
                [Step.FINISHED.value, Outcome.SKIPPED.value, text, self._clock()],
            )
            if row is None:
                raise IllegalTransition(key, self._row(cur, key).step, Move.SKIP)
        self._notify(Move.SKIP, row)
        return row

    def reconcile(self, key: str, *, reason: str) -> JournalRow:
        """An operator's mark on an unfinished row, with the reason (what they found)."""
        text = reason_text(reason)
        now = self._clock()
        with self._tx("many") as cur:
            before = self._row(cur, key)
            outcome = reconciled_outcome(before.step, key=key)
            row = self._move(
                cur,
                Move.RECONCILE,
                key,
                "step = ?, outcome = ?, reconciled_reason = ?, reconciled_at = ?",
                [Step.RECONCILED.value, outcome.value, text, now],
            )
            assert row is not None  # the row was read in this transaction
        self._notify(Move.RECONCILE, row)
        return row

    def get(self, key: str) -> JournalRow:
        """The row with this key (``UnknownCall`` if none)."""
        with self._tx("read") as cur:
            return self._row(cur, key)

    def calls(self, run_id: str) -> list[JournalRow]:
        """Every row of a run, by round."""
        with self._tx("read") as cur:
            return self._rows(cur, "run_id = ?", [run_id])

    def unfinished(self, run_id: str) -> list[JournalRow]:
        """The run's rows at DECIDED or STARTED (what a resume must deal with first)."""
        with self._tx("read") as cur:
            return self._rows(
                cur,
                "run_id = ? AND step IN (?, ?)",
                [run_id, Step.DECIDED.value, Step.STARTED.value],
            )

    def ambiguous(self, run_id: str | None = None) -> list[JournalRow]:
        """Rows left at STARTED (in one run, or in all)."""
        with self._tx("read") as cur:
            if run_id is None:
                return self._rows(cur, "step = ?", [Step.STARTED.value])
            return self._rows(cur, "step = ? AND run_id = ?", [Step.STARTED.value, run_id])

    def runs(self) -> list[RunSummary]:
        """One summary per run, oldest first."""
        unfinished = "CASE WHEN step IN ('decided', 'started') THEN 1 ELSE 0 END"
        started = "CASE WHEN step = 'started' THEN 1 ELSE 0 END"
        changed = "COALESCE(reconciled_at, finished_at, started_at, decided_at)"
        with self._tx("read") as cur:
            cur.execute(
                self._q(
                    f"SELECT run_id, COUNT(*), SUM({unfinished}), SUM({started}), "
                    f"MIN(decided_at), MAX({changed}) FROM {{calls}} GROUP BY run_id "
                    "ORDER BY MIN(decided_at), run_id"
                )
            )
            found = cur.fetchall()
        return [
            RunSummary(r[0], int(r[1]), int(r[2]), int(r[3]), float(r[4]), float(r[5]))
            for r in found
        ]

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._disconnect()

    def _disconnect(self) -> None:  # pragma: no cover
        raise NotImplementedError

    def __enter__(self) -> SqlJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _decode(found: Sequence[Any]) -> JournalRow:
    return JournalRow.from_record(dict(zip(COLUMNS, found, strict=True)))
