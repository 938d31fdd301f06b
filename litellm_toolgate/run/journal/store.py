"""What every journal store does, written once over a DB-API connection.

Each public method is one committed transaction. Every move is a conditional write whose
``WHERE`` holds the step(s) the core's transition table allows it from (and, for a finish,
the fencing token); when it matches no row, the row is read back and the core says why
(:func:`~litellm_toolgate.core.rules.journal.claimable`, ``check_finish``, ...). Nothing is held
locked across a tool's run: a claim commits before the tool starts, and the lease and the
fencing token are what keep a second worker out.

A move is **one statement, its own transaction** (one commit, one round trip on
PostgreSQL): on SQLite an autocommit statement takes the write lock when it starts (a DML
statement's transaction is a write transaction from its first step, waiting on the busy
timeout like ``BEGIN IMMEDIATE``), and a claim's fencing token is the counter + 1, the
counter moved by a trigger in the same statement; on PostgreSQL the claim draws ``nextval``.

A move made with ``run=`` (a :class:`~litellm_toolgate.core.rules.journal.RunLease`: the loop
passes its run lease to every move) also holds, in the same statement, that the lease's
token is still the run's current one (``EXISTS (SELECT ... FROM journal_runs ...)``; on
PostgreSQL ``FOR SHARE``, so a takeover waits for the move's commit or the move sees the
takeover); a stale lease commits nothing and raises ``RunLeaseLost``. When a third of the
lease has passed, the move renews it: the renewal and the move are one transaction, one
commit. Acquiring, renewing on its own (the loop's heartbeat, during long tool calls and
model rounds) and releasing a run lease commit without waiting for the disk (SQLite
``synchronous=NORMAL`` for that statement, PostgreSQL ``synchronous_commit = off``): a
lease lost in a power cut fails closed (the holder's next durable move finds its token gone,
or another driver waits out the expiry), and the log is a prefix, so a later durable commit
makes every earlier one durable too.

The two stores differ in four places only: how a transaction begins (SQLite takes the
write lock up front with ``BEGIN IMMEDIATE``), how a claim draws its fencing token, how a
transaction is made non-durable, and parameter style.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal, Protocol

from ...core.errors import GateConfigError
from ...core.rules.journal import (
    COLUMNS,
    DECIDED_COLUMNS,
    ApprovalStatus,
    Claim,
    IllegalTransition,
    JournalRow,
    JournalVersionError,
    Move,
    NewCall,
    Outcome,
    RunBusy,
    RunLease,
    RunLeaseLost,
    RunSummary,
    Step,
    UnknownCall,
    check_finish,
    check_lease,
    check_redecide,
    check_result,
    check_run_id,
    claimable,
    decided_values,
    finish_outcome,
    reason_text,
    reconciled_outcome,
    sources,
)
from .schema import LATEST, MIGRATIONS, VERSION_TABLE

Observer = Callable[[str, JournalRow], None]
Kind = Literal["read", "many"]
Clock = Callable[[], float]

_SELECT = ", ".join(COLUMNS)
_GUARD = "%GUARD%"
_STEP_IN = {
    move: ", ".join(f"'{s.value}'" for s in sources(move)) for move in Move if sources(move)
}

_DECIDE = (
    f"INSERT INTO {{calls}} ({', '.join(DECIDED_COLUMNS)}) "
    f"SELECT {', '.join('?' for _ in DECIDED_COLUMNS)} WHERE 1 = 1{_GUARD} "
    "ON CONFLICT DO NOTHING RETURNING idempotency_key"
)
_CLAIM = (
    "UPDATE {calls} SET step = 'started', fencing_token = {claim_token}, "
    "lease_expires_at = ?, started_at = ? WHERE idempotency_key = ? AND (step = 'decided' "
    "OR (? = 1 AND step = 'started' AND (lease_expires_at IS NULL OR lease_expires_at <= ?)))"
    f"{_GUARD} RETURNING %RETURNING%"
)
_CLAIM_ROW = _CLAIM.replace("%RETURNING%", _SELECT)
_CLAIM_LEAN = _CLAIM.replace("%RETURNING%", "fencing_token, lease_expires_at")
_FINISH = (
    "UPDATE {calls} SET step = 'finished', outcome = ?, error_class = ?, result_size = ?, "
    f"result_digest = ?, finished_at = ? WHERE idempotency_key = ? AND step IN "
    f"({_STEP_IN[Move.FINISH]}) AND fencing_token = ?{_GUARD} RETURNING {_SELECT}"
)
_SKIP = (
    "UPDATE {calls} SET step = 'finished', outcome = 'skipped', skipped_reason = ?, "
    f"finished_at = ? WHERE idempotency_key = ? AND step IN ({_STEP_IN[Move.SKIP]})"
    f"{_GUARD} RETURNING {_SELECT}"
)
_APPROVE = (
    "UPDATE {calls} SET approval_status = ?, approval_argument_digest = ?, "
    "approval_schema_digest = ?, approval_policy_version = ?, approval_expires_at = ? "
    f"WHERE idempotency_key = ? AND step IN ({_STEP_IN[Move.APPROVE]}){_GUARD} "
    f"RETURNING {_SELECT}"
)
_RECONCILE = (
    "UPDATE {calls} SET step = 'reconciled', outcome = ?, reconciled_reason = ?, "
    f"reconciled_at = ? WHERE idempotency_key = ? AND step = ?{_GUARD} RETURNING {_SELECT}"
)
_RENEW = (
    "UPDATE {runs} SET lease_expires_at = ? WHERE run_id = ? AND lease_token = ? "
    "RETURNING lease_token"
)
# The run lease's own moves, each one statement committed without waiting for the disk
# ({lax_with} / {lax_from}: how a dialect says so inside the statement, if it can).
_RENEW_LAX = (
    "{lax_with} UPDATE {runs} SET lease_expires_at = ?{lax_from} WHERE run_id = ? "
    "AND lease_token = ? RETURNING lease_token"
)
_ACQUIRE = (  # a run's first lease has token 1; each later one, one more than the last
    "{lax_with} INSERT INTO {runs} AS r (run_id, holder, lease_token, lease_expires_at, "
    "acquired_at) SELECT ?, ?, 1, ?, ?{lax_from} WHERE 1 = 1 "
    "ON CONFLICT (run_id) DO UPDATE SET holder = excluded.holder, "
    "lease_token = r.lease_token + 1, lease_expires_at = excluded.lease_expires_at, "
    "acquired_at = excluded.acquired_at "
    "WHERE r.lease_expires_at <= ? OR r.lease_token = ? RETURNING lease_token"
)
_RUN_ROW = "SELECT holder, lease_token, lease_expires_at FROM {runs} WHERE run_id = ?"
_RUN_ROWS = (  # a run's rows, each with the run's current lease token
    f"SELECT {_SELECT}, (SELECT lease_token FROM {{runs}} WHERE run_id = ?) FROM {{calls}} "
    "WHERE run_id = ? ORDER BY run_id, round, decided_at, call_id"
)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, params: Sequence[Any] = ..., /) -> Any: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> list[Any]: ...


class SqlJournal:
    """A journal over one connection, guarded by a lock (so it is thread-safe)."""

    dialect = ""
    guard = " AND EXISTS (SELECT 1 FROM {runs} WHERE run_id = ? AND lease_token = ?)"
    """What a move made under a run lease adds to its ``WHERE`` (a dialect may lock)."""

    def __init__(self, names: dict[str, str], *, clock: Clock, observer: Observer | None) -> None:
        self._names = names
        self._clock = clock
        self._observer = observer
        self._lock = threading.RLock()
        self._sql: dict[tuple[str, bool], str] = {}
        self._closed = False

    @property
    def clock(self) -> Clock:
        """The clock leases are written and compared with."""
        return self._clock

    # -- what a dialect supplies --------------------------------------------------------

    def _begin(self, kind: Kind) -> contextlib.AbstractContextManager[Cursor]:
        """A cursor for ``kind`` of work: ``"read"`` (one consistent read) or ``"many"``
        (several statements in one durable transaction)."""
        raise NotImplementedError  # pragma: no cover

    def _execute_one(self, sql: str, params: Sequence[Any]) -> Any:
        """One write statement as its own committed transaction; its first returned row
        (None when it returned none). Called under the journal's lock."""
        raise NotImplementedError  # pragma: no cover

    def _execute_lax(self, sql: str, params: Sequence[Any]) -> Any:
        """Like :meth:`_execute_one`, committed without waiting for the disk."""
        raise NotImplementedError  # pragma: no cover

    def _placeholder(self, sql: str) -> str:
        return sql

    # -- plumbing -----------------------------------------------------------------------

    def _q(self, template: str, guarded: bool = False) -> str:
        sql = self._sql.get((template, guarded))
        if sql is None:
            text = template.replace(_GUARD, self.guard if guarded else "")
            sql = self._placeholder(text.format(**self._names))
            self._sql[(template, guarded)] = sql
        return sql

    @contextlib.contextmanager
    def _tx(self, kind: Kind) -> Iterator[Cursor]:
        with self._lock:
            if self._closed:
                raise GateConfigError("this journal is closed")
            with self._begin(kind) as cur:
                yield cur

    def _one(self, template: str, params: list[Any], run: RunLease | None) -> Any:
        """The move's one statement, committed; under ``run``, only while the run lease is
        current (renewed in the same transaction when due). Its returned row, or None."""
        with self._lock:
            if self._closed:
                raise GateConfigError("this journal is closed")
            if run is None:
                return self._execute_one(self._q(template), params)
            now = self._clock()
            if not run.renewal_due(now):
                found = self._execute_one(self._q(template, True), [*params, run.run_id, run.token])
                if found is None:
                    self._check_current(run)
                return found
            expires = now + run.lease_seconds
            with self._begin("many") as cur:
                self._renew_in(cur, run, expires)
                cur.execute(self._q(template), params)
                found = cur.fetchone()
            run.expires_at = expires
            return found

    def _renew_in(self, cur: Cursor, run: RunLease, expires: float) -> None:
        cur.execute(self._q(_RENEW), [expires, run.run_id, run.token])
        if cur.fetchone() is None:
            cur.execute(self._q(_RUN_ROW), [run.run_id])
            found = cur.fetchone()
            raise RunLeaseLost(run.run_id, run.token, None if found is None else int(found[1]))

    def _check_current(self, run: RunLease) -> None:
        """Raise ``RunLeaseLost`` when ``run`` is no longer the run's current lease."""
        with self._begin("read") as cur:
            cur.execute(self._q(_RUN_ROW), [run.run_id])
            found = cur.fetchone()
        if found is None or int(found[1]) != run.token:
            raise RunLeaseLost(run.run_id, run.token, None if found is None else int(found[1]))

    def _notify(self, move: Move, row: JournalRow) -> None:
        if self._observer is not None:
            self._observer(move.value, row)

    def _row(self, cur: Cursor, key: str) -> JournalRow:
        cur.execute(self._q(f"SELECT {_SELECT} FROM {{calls}} WHERE idempotency_key = ?"), [key])
        found = cur.fetchone()
        if found is None:
            raise UnknownCall(key)
        return _decode(found)

    def _read_row(self, key: str) -> JournalRow:
        with self._tx("read") as cur:
            return self._row(cur, key)

    def _rows(self, cur: Cursor, where: str, params: Sequence[Any]) -> list[JournalRow]:
        cur.execute(
            self._q(
                f"SELECT {_SELECT} FROM {{calls}} WHERE {where} "
                "ORDER BY run_id, round, decided_at, call_id"
            ),
            params,
        )
        return [_decode(r) for r in cur.fetchall()]

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

    def decide(self, call: NewCall, *, run: RunLease | None = None) -> JournalRow:
        """Journal ``call`` at DECIDED. The same call again returns its row unchanged; its
        call id already used in the run for another call raises ``CallIdReused``."""
        row = JournalRow.decided(call, now=self._clock())
        if self._one(_DECIDE, decided_values(row), run) is not None:
            self._notify(Move.DECIDE, row)
            return row
        with self._tx("read") as cur:
            existing = self._rows(cur, "run_id = ? AND call_id = ?", [call.run_id, call.call_id])
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
        run: RunLease | None = None,
    ) -> JournalRow:
        """Bind an approval (or a denial, or a timeout) to what was approved."""
        status = ApprovalStatus(status)
        found = self._one(
            _APPROVE,
            [status.value, argument_digest, schema_digest, policy_version, expires_at, key],
            run,
        )
        if found is None:
            raise IllegalTransition(key, self._read_row(key).step, Move.APPROVE)
        row = _decode(found)
        self._notify(Move.APPROVE, row)
        return row

    def claim(
        self,
        key: str,
        *,
        lease_seconds: float,
        retry_expired: bool = False,
        run: RunLease | None = None,
    ) -> Claim:
        """Move the call to STARTED under a lease, with a new fencing token.

        From DECIDED; or, with ``retry_expired=True`` (for a tool that may run again), from
        STARTED once the earlier claim's lease has expired. ``AlreadyClaimed`` otherwise."""
        lease = check_lease(lease_seconds)
        now = self._clock()
        # The row itself is returned only for an observer; a claim needs its token.
        sql = _CLAIM_LEAN if self._observer is None else _CLAIM_ROW
        found = self._one(sql, [now + lease, now, key, 1 if retry_expired else 0, now], run)
        if found is None:
            move = claimable(self._read_row(key), now=now, retry_expired=retry_expired)
            raise IllegalTransition(key, Step.STARTED, move)  # pragma: no cover - raced
        if self._observer is None:
            return Claim(key, int(found[0]), float(found[1]))
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
        run: RunLease | None = None,
    ) -> JournalRow:
        """Move the call to FINISHED, with the claim's token only (``StaleClaim`` else)."""
        outcome = finish_outcome(outcome)
        check_result(error_class, result_size, result_digest)
        key = claim.idempotency_key
        found = self._one(
            _FINISH,
            [
                outcome.value,
                error_class,
                result_size,
                result_digest,
                self._clock(),
                key,
                claim.fencing_token,
            ],
            run,
        )
        if found is None:
            check_finish(self._read_row(key), claim)
            raise IllegalTransition(key, Step.STARTED, Move.FINISH)  # pragma: no cover
        row = _decode(found)
        self._notify(Move.FINISH, row)
        return row

    def skip(self, key: str, *, reason: str, run: RunLease | None = None) -> JournalRow:
        """DECIDED -> FINISHED with outcome SKIPPED: the tool never ran (denied, expired)."""
        text = reason_text(reason)
        found = self._one(_SKIP, [text, self._clock(), key], run)
        if found is None:
            raise IllegalTransition(key, self._read_row(key).step, Move.SKIP)
        row = _decode(found)
        self._notify(Move.SKIP, row)
        return row

    def reconcile(self, key: str, *, reason: str, run: RunLease | None = None) -> JournalRow:
        """An operator's mark on an unfinished row, with the reason (what they found)."""
        text = reason_text(reason)
        before = self._read_row(key)
        outcome = reconciled_outcome(before.step, key=key)
        found = self._one(
            _RECONCILE, [outcome.value, text, self._clock(), key, before.step.value], run
        )
        if found is None:  # moved since it was read: say why from where it is now
            after = self._read_row(key)
            reconciled_outcome(after.step, key=key)
            raise IllegalTransition(key, after.step, Move.RECONCILE)  # pragma: no cover
        row = _decode(found)
        self._notify(Move.RECONCILE, row)
        return row

    # -- the run lease ------------------------------------------------------------------------

    def acquire_run(
        self, run_id: str, *, lease_seconds: float, holder: str | None = None
    ) -> RunLease:
        """Take the run's lease for one driver, with a new fencing token: when no driver
        holds it, its lease expired, or its holder is a process of this machine that is
        gone (:func:`holder_gone`). ``RunBusy`` otherwise. Committed without waiting for the
        disk (see the module's text)."""
        return self._take(run_id, lease_seconds, holder, read=False)[0]

    def begin_run(
        self, run_id: str, *, lease_seconds: float, holder: str | None = None
    ) -> tuple[RunLease, list[JournalRow]]:
        """:meth:`acquire_run`, then the run's rows as the journal holds them once the lease
        is taken (read after the lease committed, so a move of a former driver that the
        taking waited for is among them), each row with the run's current lease token."""
        lease, rows = self._take(run_id, lease_seconds, holder, read=True)
        assert rows is not None
        return lease, rows

    def _take(
        self, run_id: str, lease_seconds: float, holder: str | None, *, read: bool
    ) -> tuple[RunLease, list[JournalRow] | None]:
        check_run_id(run_id)
        lease = check_lease(lease_seconds)
        holder = local_holder() if holder is None else holder
        dead_token = -1
        for _ in range(2):
            now = self._clock()
            with self._lock:
                if self._closed:
                    raise GateConfigError("this journal is closed")
                params = [run_id, holder, now + lease, now, now, dead_token]
                if read:
                    found, raw = self._acquire_and_read(params, run_id)
                else:
                    found, raw = self._execute_lax(self._q(_ACQUIRE), params), []
            if found is not None:
                taken = RunLease(run_id, int(found[0]), lease, now + lease, holder)
                if not read:
                    return taken, None
                if raw and (raw[0][-1] is None or int(raw[0][-1]) != taken.token):
                    raw = None  # pragma: no cover - taken over in between: read again
                rows = self.calls(run_id, run=taken) if raw is None else _decode_run(raw)
                return taken, rows
            current = self.run_holder(run_id)
            if current is None or dead_token != -1 or not holder_gone(current[0]):
                break
            dead_token = current[1]  # its holder is gone: take it from that token only
        raise RunBusy(run_id, None if current is None else current[2])

    def _acquire_and_read(self, params: list[Any], run_id: str) -> tuple[Any, Any]:
        """The lease's upsert (committed lax), then the run's rows each with the run's
        current lease token. Under the journal's lock."""
        found = self._execute_lax(self._q(_ACQUIRE), params)
        if found is None:
            return None, None
        with self._begin("read") as cur:
            cur.execute(self._q(_RUN_ROWS), [run_id, run_id])
            return found, cur.fetchall()

    def renew_run(self, run: RunLease) -> None:
        """Push the lease's end to now + its length (``RunLeaseLost`` if it is no longer
        the run's current one). Committed without waiting for the disk."""
        expires = self._clock() + run.lease_seconds
        with self._lock:
            if self._closed:
                raise GateConfigError("this journal is closed")
            found = self._execute_lax(self._q(_RENEW_LAX), [expires, run.run_id, run.token])
            if found is not None:
                run.expires_at = expires
                return
        self._check_current(run)
        raise RunLeaseLost(run.run_id, run.token, run.token)  # pragma: no cover - raced

    def release_run(self, run: RunLease) -> None:
        """End the lease now, if it is still the run's current one (else nothing).
        Committed without waiting for the disk."""
        now = self._clock()
        with self._lock:
            if self._closed:
                raise GateConfigError("this journal is closed")
            self._execute_lax(self._q(_RENEW_LAX), [now, run.run_id, run.token])
            run.expires_at = now

    def check_run(self, run: RunLease) -> bool:
        """Is ``run`` still the run's current lease (whatever its clock says)?"""
        with self._tx("read") as cur:
            cur.execute(self._q(_RUN_ROW), [run.run_id])
            found = cur.fetchone()
        return found is not None and int(found[1]) == run.token

    def run_holder(self, run_id: str) -> tuple[str, int, float] | None:
        """The run's lease as stored: holder, token, expiry (None if never driven)."""
        with self._tx("read") as cur:
            cur.execute(self._q(_RUN_ROW), [run_id])
            found = cur.fetchone()
        return None if found is None else (str(found[0]), int(found[1]), float(found[2]))

    def get(self, key: str) -> JournalRow:
        """The row with this key (``UnknownCall`` if none)."""
        with self._tx("read") as cur:
            return self._row(cur, key)

    def calls(self, run_id: str, *, run: RunLease | None = None) -> list[JournalRow]:
        """Every row of a run, by round. With ``run``: and ``RunLeaseLost`` if that lease
        is no longer the run's current one (read in the same statement as the rows)."""
        if run is None:
            with self._tx("read") as cur:
                return self._rows(cur, "run_id = ?", [run_id])
        with self._tx("read") as cur:
            cur.execute(self._q(_RUN_ROWS), [run_id, run_id])
            found = cur.fetchall()
        if not found:
            self._check_current(run)
            return []
        current = found[0][-1]
        if current is None or int(current) != run.token:
            raise RunLeaseLost(run.run_id, run.token, None if current is None else int(current))
        return _decode_run(found)

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
    return JournalRow.from_values(found)


def _decode_run(found: Sequence[Sequence[Any]]) -> list[JournalRow]:
    """Rows of ``_RUN_ROWS``: each row's values, less the lease token at its end."""
    return [JournalRow.from_values(r[:-1]) for r in found]


# -- who holds a run lease ------------------------------------------------------------------


def _machine() -> str:
    """This machine and PID namespace, as far as Linux says (``"-"`` elsewhere): two
    processes compare PIDs only when this is the same for both."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return "-"
    return hashlib.sha256(f"{boot}/{namespace}".encode()).hexdigest()[:16]


def _started(pid: int) -> str | None:
    """The process's start time (clock ticks after boot), or None if it is gone (or a
    zombie: killed, not yet reaped)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if not fields or fields[0] in ("Z", "X"):
        return None
    return fields[19] if len(fields) > 19 else None


_MACHINE = _machine()


_ME: dict[int, str] = {}  # this process's "machine:pid:start", by PID (a fork differs)


def local_holder() -> str:
    """A new driver's holder id: machine, PID and start time of this process, and a random
    part (two drivers of one process differ)."""
    pid = os.getpid()
    me = _ME.get(pid)
    if me is None:
        me = _ME[pid] = f"{_MACHINE}:{pid}:{_started(pid) or '-'}"
    return f"{me}:{uuid.uuid4().hex[:12]}"


def holder_gone(holder: str) -> bool:
    """Is the process that holds a lease certainly gone? Only for a holder of this machine
    and PID namespace whose process no longer exists (or is another process now): any
    doubt (another machine, a stopped process, no /proc) is a live holder."""
    parts = holder.split(":")
    if len(parts) != 4 or _MACHINE == "-" or parts[0] != _MACHINE or parts[2] == "-":
        return False
    try:
        pid = int(parts[1])
    except ValueError:
        return False
    return _started(pid) != parts[2]
