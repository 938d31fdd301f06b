"""The run journal's rules: one row per released call, its steps, and who may move it.

Theory of operation
-------------------
A released tool call is written down *before* it runs, and every step after that is a
committed compare-and-set, so that after a crash or a retry the journal answers the one
question a retry needs: *was this call already executed?* The rows live in a store at the
run room (``run/journal``: SQLite or PostgreSQL); this module holds everything that is not I/O:
the names, the one transition table, the keys and digests, the row types and the errors.

A row moves (the table is :data:`TRANSITIONS`; a move it does not hold raises
:class:`IllegalTransition` naming the step and the move)::

    (none) --decide--> DECIDED --claim--> STARTED --finish--> FINISHED
                        |  ^ approve         |  ^ reclaim (an expired lease, only for a
                        |  |                 |  |   tool that allows running again)
                        +--skip--> FINISHED  |
                        +--------reconcile---+---> RECONCILED (an operator, with a reason)

``claim`` hands out a **fencing token**: a number drawn from one sequence per store, so it
is strictly greater than every token handed out before it, for any call. A tool that is
given the token can ask the store whether it is still current (``check_token``) or compare
it with the highest it has seen, and so refuse a worker whose lease expired and whose call
was claimed again by another. ``finish`` succeeds only with the current token
(:class:`StaleClaim` otherwise).

A row found at STARTED when a run resumes is *ambiguous*: the tool may or may not have run,
and the absence of a finished row does not prove that no side effect occurred. It is never
run again silently; what happens to it is the caller's rule for that tool.

What a row never holds: the arguments or the result. It keeps the tool's name, an argument
digest (:func:`argument_digest`: a keyed HMAC where a key is set, a plain SHA-256 otherwise,
of the canonical JSON, full length), the result's size and an optional digest.

Errors (all :class:`~litellm_toolgate.core.errors.ToolGateError`)::

    JournalError                 the journal refused a move
    ├── IllegalTransition        a move the table does not hold from the row's step
    │   └── AlreadyClaimed       a claim on a row not at DECIDED (or with a live lease)
    ├── StaleClaim               a finish with a fencing token that is no longer current
    ├── AmbiguousCalls           unfinished rows found on resume (ids, tools, steps)
    ├── CallIdReused             a call id already journaled in the run for another call
    ├── UnknownCall              no row holds that idempotency key
    ├── JournalVersionError      the store's schema is newer than this code knows
    ├── RunBusy                  another driver holds the run's lease (live)
    ├── RunLeaseLost             this driver's run lease was taken over: nothing more commits
    └── ConversationBehind       the journal holds calls of the run the conversation lacks

One driver per run. A run is driven by at most one process at a time: the driver holds the
run's **lease** (a row per run: holder, fencing token, expiry), acquired before it asks the
model anything (:class:`RunBusy` when another driver's lease is live). Every row the driver
writes carries the lease (:class:`RunLease`): the store checks in the same transaction that
the lease's token is still the run's current one, so a driver whose lease expired and was
taken over commits nothing more (:class:`RunLeaseLost`). A run lease's token is one more
than the run's last one: strictly greater than any lease of that run before it.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import hmac
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import GateConfigError, ToolGateError

_CLASS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*){0,15}")
_DIGEST = re.compile(r"(sha256|hmac-sha256):[0-9a-f]{64}")
KEY_DOMAIN = b"litellm-toolgate/journal/key/v1"
MAX_REASON_CHARS = 1_000


class Effect(enum.Enum):
    """What running a tool again would do to the world."""

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    NON_IDEMPOTENT = "non_idempotent"


class Step(enum.Enum):
    """Where a row is. FINISHED and RECONCILED are terminal."""

    DECIDED = "decided"
    STARTED = "started"
    FINISHED = "finished"
    RECONCILED = "reconciled"


class Outcome(enum.Enum):
    """How a call ended (set at FINISHED, and at RECONCILED)."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    AMBIGUOUS = "ambiguous"


class ApprovalStatus(enum.Enum):
    """A recorded approval. EXPIRED is a timeout, never a human's denial."""

    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"


class Move(enum.Enum):
    """What a store is asked to do to a row. The value names the committed transition:
    the name a store's observer is called with (a RECLAIM is reported as ``"started"``)."""

    DECIDE = "decided"
    APPROVE = "approval"
    CLAIM = "started"
    RECLAIM = "restarted"
    FINISH = "finished"
    SKIP = "skipped"
    RECONCILE = "reconciled"


# The one table: (step before, move) -> step after. ``None`` is "no row yet".
TRANSITIONS: Mapping[tuple[Step | None, Move], Step] = {
    (None, Move.DECIDE): Step.DECIDED,
    (Step.DECIDED, Move.APPROVE): Step.DECIDED,
    (Step.DECIDED, Move.CLAIM): Step.STARTED,
    (Step.STARTED, Move.RECLAIM): Step.STARTED,
    (Step.STARTED, Move.FINISH): Step.FINISHED,
    (Step.DECIDED, Move.SKIP): Step.FINISHED,
    (Step.DECIDED, Move.RECONCILE): Step.RECONCILED,
    (Step.STARTED, Move.RECONCILE): Step.RECONCILED,
}

# The outcomes a FINISH may record (SKIPPED belongs to SKIP, which never ran the tool).
FINISH_OUTCOMES = frozenset({Outcome.SUCCEEDED, Outcome.FAILED, Outcome.AMBIGUOUS})


def next_step(step: Step | None, move: Move, *, key: str = "") -> Step:
    """The step after ``move`` from ``step``; :class:`IllegalTransition` if the table has none."""
    after = TRANSITIONS.get((step, move))
    if after is None:
        raise IllegalTransition(key, step, move)
    return after


def sources(move: Move) -> tuple[Step, ...]:
    """The steps ``move`` may start from, in table order (a store's ``WHERE step IN``)."""
    return tuple(s for (s, m) in TRANSITIONS if m is move and s is not None)


# -- errors -------------------------------------------------------------------------------


class JournalError(ToolGateError):
    """The run journal refused a move. Messages hold keys, ids, steps and counts only."""


class IllegalTransition(JournalError):
    """A move the transition table does not hold from the row's step."""

    def __init__(self, key: str, step: Step | None, move: Move) -> None:
        self.key = key
        self.step = step
        self.move = move
        at = "no row" if step is None else f"step {step.value!r}"
        super().__init__(f"journal row {key or '?'}: cannot {move.name.lower()} from {at}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.key, self.step, self.move))


class AlreadyClaimed(IllegalTransition):
    """A claim on a row that is not at DECIDED: finished, reconciled, or started under a
    lease that is still live (or whose tool does not allow running again)."""

    def __init__(
        self, key: str, step: Step | None, move: Move = Move.CLAIM, *, lease_live: bool = False
    ) -> None:
        self.lease_live = lease_live
        super().__init__(key, step, move)
        if lease_live:
            self.args = (f"journal row {key}: claimed by another worker, lease still live",)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_claimed, (self.key, self.step, self.move, self.lease_live))


def _rebuild_claimed(key: str, step: Step | None, move: Move, live: bool) -> AlreadyClaimed:
    return AlreadyClaimed(key, step, move, lease_live=live)


class StaleClaim(JournalError):
    """A finish with a fencing token that is no longer the row's current one."""

    def __init__(self, key: str, token: int, current: int | None) -> None:
        self.key = key
        self.token = token
        self.current = current
        super().__init__(f"journal row {key}: fencing token {token} is stale (current: {current})")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.key, self.token, self.current))


class AmbiguousCalls(JournalError):
    """Rows left decided or started but not finished, found when a run resumed.

    ``rows`` are the journal rows themselves: ids, tool names and steps; never arguments."""

    def __init__(self, run_id: str, rows: Sequence[JournalRow]) -> None:
        self.run_id = run_id
        self.rows = tuple(rows)
        listed = ", ".join(f"{r.call_id} ({r.tool}, {r.step.value})" for r in self.rows)
        super().__init__(
            f"run {run_id}: {len(self.rows)} call(s) not finished, not run again until "
            f"reconciled: {listed}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.rows))


class CallIdReused(JournalError):
    """A call id already journaled in this run for another call: another round, or the
    same round with another tool or argument digest."""

    def __init__(self, run_id: str, call_id: str, round_: int, earlier_round: int) -> None:
        self.run_id = run_id
        self.call_id = call_id
        self.round = round_
        self.earlier_round = earlier_round
        super().__init__(
            f"run {run_id}: call id {call_id!r} in round {round_} was already journaled "
            f"in round {earlier_round} for another call"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.call_id, self.round, self.earlier_round))


class UnknownCall(JournalError):
    """No journal row holds this idempotency key."""

    def __init__(self, key: str) -> None:
        self.key = key
        super().__init__(f"no journal row has key {key}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.key,))


class JournalVersionError(JournalError):
    """The store's schema version is newer than this code knows: refused, never downgraded."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the journal's schema is version {found}; this code knows up to {known}: "
            "upgrade litellm-toolgate to open it"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.found, self.known))


class RunBusy(JournalError):
    """Another driver holds this run's lease and it is live: the run is not driven twice.

    Names the run id and when the lease ends (``expires_at``, epoch seconds); never a tool's
    arguments. Ask again later, or pass ``wait_for_run=seconds`` to ``gate.run``."""

    def __init__(self, run_id: str, expires_at: float | None) -> None:
        self.run_id = run_id
        self.expires_at = expires_at
        super().__init__(
            f"run {run_id}: another driver holds the run's lease; it is not driven twice"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.expires_at))


class RunLeaseLost(JournalError):
    """This driver's run lease is no longer the run's current one (it expired and another
    driver took the run over, or it was released): the write was refused, nothing of it
    committed, and nothing more will."""

    def __init__(self, run_id: str, token: int, current: int | None) -> None:
        self.run_id = run_id
        self.token = token
        self.current = current
        super().__init__(
            f"run {run_id}: run lease token {token} is stale (current: {current}); "
            "another driver has the run"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.token, self.current))


class ConversationBehind(JournalError):
    """The journal holds calls of the run that the given conversation never mentions: it is
    older than the run (another driver went on with it). Resume from the last checkpoint;
    the model is not asked again from an old conversation."""

    def __init__(self, run_id: str, call_ids: Sequence[str]) -> None:
        self.run_id = run_id
        self.call_ids = tuple(call_ids)
        super().__init__(
            f"run {run_id}: the journal holds {len(self.call_ids)} call(s) the conversation "
            "does not; resume with the run's last checkpointed conversation"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.run_id, self.call_ids))


# -- keys and digests ------------------------------------------------------------------------


def idempotency_key(run_id: str, round_: int, call_id: str) -> str:
    """The call's key: SHA-256 (hex, full length) of run id, round and call id, each
    length-prefixed so no two triples encode alike. Never a function of the arguments."""
    if not run_id or not call_id:
        raise GateConfigError("a journal key needs a non-empty run id and call id")
    if isinstance(round_, bool) or not isinstance(round_, int) or round_ < 0:
        raise GateConfigError("a journal round is an integer >= 0")
    h = hashlib.sha256(KEY_DOMAIN)
    for part in (run_id.encode("utf-8"), str(round_).encode("ascii"), call_id.encode("utf-8")):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces, non-ASCII kept, UTF-8. Refuses NaN and infinities."""
    try:
        text = json.dumps(
            value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        )
    except (TypeError, ValueError):
        # The message of either can quote a value: drop it.
        raise GateConfigError("value is not canonical JSON (a non-JSON type or NaN)") from None
    return text.encode("utf-8")


def argument_digest(arguments: str | Mapping[str, Any], *, hmac_key: bytes | None) -> str:
    """The digest a row keeps instead of the arguments.

    ``arguments`` is the released call's JSON text (or the object it parsed to); the digest
    is over its canonical JSON, so two texts of the same object agree. With ``hmac_key``:
    ``"hmac-sha256:<hex>"`` (a low-entropy argument cannot be guessed offline without the
    key); without: ``"sha256:<hex>"``. Full length always. Errors never quote the text.
    """
    if isinstance(arguments, str):
        try:
            value = json.loads(arguments, parse_constant=_no_constant)
        except ValueError:
            # JSONDecodeError.doc is the raw text: nothing of it may travel on.
            raise GateConfigError("arguments are not JSON: no digest") from None
    else:
        value = arguments
    body = canonical_json(value)
    if hmac_key is None:
        return "sha256:" + hashlib.sha256(body).hexdigest()
    if not hmac_key:
        raise GateConfigError("hmac_key is empty: give a secret key, or None for a plain digest")
    return "hmac-sha256:" + hmac.new(hmac_key, body, hashlib.sha256).hexdigest()


def _no_constant(name: str) -> Any:
    raise ValueError("NaN and infinities are not JSON")


def schema_digest(schema: Mapping[str, Any]) -> str:
    """``"sha256:<hex>"`` of a tool schema's canonical JSON (an approval is bound to it)."""
    return "sha256:" + hashlib.sha256(canonical_json(schema)).hexdigest()


def reason_text(reason: str) -> str:
    """An operator's or the loop's reason, checked: non-empty, at most 1,000 characters."""
    text = reason.strip() if isinstance(reason, str) else ""
    if not text or len(text) > MAX_REASON_CHARS:
        raise GateConfigError(f"a reason is 1 to {MAX_REASON_CHARS} characters of text")
    return text


# -- rows -----------------------------------------------------------------------------------


def _check_time(name: str, value: float | None) -> None:
    if value is not None and not math.isfinite(value):
        raise GateConfigError(f"journal {name} is not a finite time")


@dataclasses.dataclass(frozen=True, slots=True)
class NewCall:
    """A released call about to be journaled at DECIDED. Its key derives from run, round
    and call id; ``argument_digest`` comes from :func:`argument_digest`."""

    run_id: str
    attempt_id: str
    round: int
    route: str
    call_id: str
    tool: str
    effect: Effect
    argument_digest: str

    def __post_init__(self) -> None:
        if not isinstance(self.effect, Effect):
            raise GateConfigError("NewCall.effect is an Effect")
        if not _DIGEST.fullmatch(self.argument_digest):
            raise GateConfigError("NewCall.argument_digest is a digest from argument_digest()")
        if not self.tool:
            raise GateConfigError("NewCall.tool is empty")
        self.idempotency_key  # noqa: B018 (checks run id, round and call id)

    @property
    def idempotency_key(self) -> str:
        return idempotency_key(self.run_id, self.round, self.call_id)


@dataclasses.dataclass(frozen=True, slots=True)
class JournalRow:
    """One journal row, as stored. Holds digests, sizes, ids and times; never arguments or
    results (there is no field for them)."""

    run_id: str
    attempt_id: str
    round: int
    route: str
    call_id: str
    tool: str
    effect: Effect
    idempotency_key: str
    argument_digest: str
    step: Step
    decided_at: float
    outcome: Outcome | None = None
    error_class: str | None = None
    result_size: int | None = None
    result_digest: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    fencing_token: int | None = None
    lease_expires_at: float | None = None
    approval_status: ApprovalStatus | None = None
    approval_argument_digest: str | None = None
    approval_schema_digest: str | None = None
    approval_policy_version: str | None = None
    approval_expires_at: float | None = None
    skipped_reason: str | None = None
    reconciled_reason: str | None = None
    reconciled_at: float | None = None

    def __post_init__(self) -> None:
        for name in ("decided_at", "started_at", "finished_at", "lease_expires_at"):
            _check_time(name, getattr(self, name))

    @property
    def finished(self) -> bool:
        """FINISHED or RECONCILED: nothing more will happen to this row."""
        return self.step in (Step.FINISHED, Step.RECONCILED)

    @property
    def ambiguous(self) -> bool:
        """Left at STARTED: the tool may or may not have run."""
        return self.step is Step.STARTED

    def lease_live(self, now: float) -> bool:
        """Started, and its lease has not expired at ``now``."""
        return (
            self.step is Step.STARTED
            and self.lease_expires_at is not None
            and now < self.lease_expires_at
        )

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> JournalRow:
        """A row from a store's column mapping (enum columns as their string values)."""
        return cls.from_values([record[name] for name in COLUMNS])

    @classmethod
    def from_values(cls, values: Sequence[Any]) -> JournalRow:
        """A row from a store's values in :data:`COLUMNS` order (enums as string values):
        what a store decodes each returned row with, without a mapping in between."""
        try:
            v = list(values)
            v[_EFFECT_AT] = _EFFECTS[v[_EFFECT_AT]]
            v[_STEP_AT] = _STEPS[v[_STEP_AT]]
            if v[_OUTCOME_AT] is not None:
                v[_OUTCOME_AT] = _OUTCOMES[v[_OUTCOME_AT]]
            if v[_APPROVAL_AT] is not None:
                v[_APPROVAL_AT] = _APPROVALS[v[_APPROVAL_AT]]
        except (KeyError, IndexError):
            raise GateConfigError("a journal row holds a value this code does not know") from None
        return cls(*v)

    @classmethod
    def decided(cls, call: NewCall, *, now: float) -> JournalRow:
        """The row :meth:`Journal.decide` inserts for ``call``."""
        return cls(
            run_id=call.run_id,
            attempt_id=call.attempt_id,
            round=call.round,
            route=call.route,
            call_id=call.call_id,
            tool=call.tool,
            effect=call.effect,
            idempotency_key=call.idempotency_key,
            argument_digest=call.argument_digest,
            step=next_step(None, Move.DECIDE),
            decided_at=now,
        )

    def to_record(self) -> dict[str, Any]:
        """Column name -> value, enums as their string values (what a store writes)."""
        out: dict[str, Any] = {}
        for name in COLUMNS:
            value = getattr(self, name)
            out[name] = value.value if isinstance(value, enum.Enum) else value
        return out


COLUMNS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(JournalRow))
DECIDED_COLUMNS: tuple[str, ...] = (
    "idempotency_key", "run_id", "attempt_id", "round", "route", "call_id", "tool", "effect",
    "argument_digest", "step", "decided_at",
)  # fmt: skip
"""What a DECIDE writes (every other column starts NULL)."""
_EFFECT_AT, _STEP_AT = COLUMNS.index("effect"), COLUMNS.index("step")
_OUTCOME_AT, _APPROVAL_AT = COLUMNS.index("outcome"), COLUMNS.index("approval_status")
_EFFECTS = {e.value: e for e in Effect}
_STEPS = {e.value: e for e in Step}
_OUTCOMES = {e.value: e for e in Outcome}
_APPROVALS = {e.value: e for e in ApprovalStatus}


def decided_values(row: JournalRow) -> list[Any]:
    """The values of :data:`DECIDED_COLUMNS` of a row just decided."""
    return [
        row.idempotency_key, row.run_id, row.attempt_id, row.round, row.route,
        row.call_id, row.tool, row.effect.value, row.argument_digest,
        row.step.value, row.decided_at,
    ]  # fmt: skip


@dataclasses.dataclass(frozen=True, slots=True)
class Claim:
    """A worker's claim on a call: handed to ``finish``; the token goes to the tool."""

    idempotency_key: str
    fencing_token: int
    lease_expires_at: float


class RunLease:
    """A driver's hold on a run: the run id, the lease's fencing token (one more than the
    run's last: greater than any lease of the run before it) and its length. Passed to
    every move the driver makes (``run=``): the store commits the move only while
    ``token`` is the run's current one, and renews the lease in the same transaction when
    a third of it has passed (``expires_at`` is the end of the lease as last written, kept
    by the store).

    Mutable on purpose (the expiry moves with each renewal); a store changes it under its
    lock. Holds ids and times only."""

    __slots__ = ("expires_at", "holder", "lease_seconds", "run_id", "token")

    def __init__(
        self, run_id: str, token: int, lease_seconds: float, expires_at: float, holder: str = ""
    ) -> None:
        self.run_id = run_id
        self.token = token
        self.lease_seconds = check_lease(lease_seconds)
        self.expires_at = expires_at
        self.holder = holder

    def renewal_due(self, now: float) -> bool:
        """A third of the lease has passed since it was last written."""
        return now >= self.expires_at - self.lease_seconds * (2.0 / 3.0)

    def __repr__(self) -> str:
        return f"RunLease(run_id={self.run_id!r}, token={self.token}, expires_at={self.expires_at})"


def check_run_id(run_id: str) -> str:
    """A run id is non-empty text."""
    if not isinstance(run_id, str) or not run_id:
        raise GateConfigError("a run id is a non-empty string")
    return run_id


@dataclasses.dataclass(frozen=True, slots=True)
class RunSummary:
    """One run, as ``Journal.runs`` lists it."""

    run_id: str
    calls: int
    unfinished: int
    ambiguous: int
    first_decided_at: float
    last_change_at: float


# -- the checks a store makes around its compare-and-set ---------------------------------


def check_redecide(existing: JournalRow, call: NewCall) -> JournalRow:
    """A DECIDE whose (run id, call id) is already journaled: the same call again returns
    the row unchanged; another round, tool or argument digest is :class:`CallIdReused`."""
    same = (
        existing.idempotency_key == call.idempotency_key
        and existing.tool == call.tool
        and existing.argument_digest == call.argument_digest
    )
    if not same:
        raise CallIdReused(call.run_id, call.call_id, call.round, existing.round)
    return existing


def claimable(row: JournalRow, *, now: float, retry_expired: bool) -> Move:
    """The move a claim makes on ``row`` (CLAIM or RECLAIM), or the error why it cannot.

    A store's conditional UPDATE holds the same predicate; this explains a refusal."""
    if row.step is Step.DECIDED:
        return Move.CLAIM
    if row.step is Step.STARTED and retry_expired and not row.lease_live(now):
        return Move.RECLAIM
    raise AlreadyClaimed(row.idempotency_key, row.step, lease_live=row.lease_live(now))


def finish_outcome(outcome: Outcome) -> Outcome:
    """The outcome a finish may record: succeeded, failed or ambiguous (a skip is SKIP's)."""
    outcome = Outcome(outcome)
    if outcome not in FINISH_OUTCOMES:
        raise GateConfigError(f"finish records succeeded, failed or ambiguous, not {outcome.value}")
    return outcome


def check_finish(row: JournalRow, claim: Claim) -> None:
    """Why a finish with ``claim`` cannot commit on ``row``: a stale fencing token
    (:class:`StaleClaim`) or a step the table has no finish from."""
    if row.fencing_token != claim.fencing_token:
        raise StaleClaim(row.idempotency_key, claim.fencing_token, row.fencing_token)
    next_step(row.step, Move.FINISH, key=row.idempotency_key)


def check_result(
    error_class: str | None, result_size: int | None, result_digest: str | None
) -> None:
    """What a finish may record about a result: an exception's class name (a dotted
    identifier, never its message), a size in bytes, a digest (never the result)."""
    if error_class is not None and not _CLASS_NAME.fullmatch(error_class):
        raise GateConfigError("error_class is an exception class name (a dotted identifier)")
    if result_size is not None and (
        isinstance(result_size, bool) or not isinstance(result_size, int) or result_size < 0
    ):
        raise GateConfigError("result_size is a number of bytes >= 0")
    if result_digest is not None and not _DIGEST.fullmatch(result_digest):
        raise GateConfigError("result_digest is 'sha256:<hex>' or 'hmac-sha256:<hex>'")


def check_lease(lease_seconds: float) -> float:
    """A lease is a positive, finite number of seconds."""
    if not (isinstance(lease_seconds, int | float) and 0 < lease_seconds < math.inf):
        raise GateConfigError("lease_seconds is a positive number of seconds")
    return float(lease_seconds)


def reconciled_outcome(step: Step, *, key: str = "") -> Outcome:
    """What a reconciled row records: a call never started was SKIPPED; one started has an
    AMBIGUOUS outcome (the operator's reason says what they found)."""
    next_step(step, Move.RECONCILE, key=key)
    return Outcome.SKIPPED if step is Step.DECIDED else Outcome.AMBIGUOUS
