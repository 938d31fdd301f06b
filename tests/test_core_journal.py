"""The run journal's rules (core/rules/journal.py), table-driven, with no store and no I/O.

Every (step, move) pair is tried against the one transition table; keys and digests are
checked against values computed here by hand; every error pickles and names no argument
text. The stores (tests/test_journal_store.py) run the same moves against real databases.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import itertools
import json
import math
import pickle
from typing import Any

import pytest

from litellm_toolgate.core.errors import GateConfigError, ToolGateError
from litellm_toolgate.core.rules.journal import (
    COLUMNS,
    FINISH_OUTCOMES,
    TRANSITIONS,
    AlreadyClaimed,
    AmbiguousCalls,
    ApprovalStatus,
    CallIdReused,
    Claim,
    Effect,
    IllegalTransition,
    JournalError,
    JournalRow,
    JournalVersionError,
    Move,
    NewCall,
    Outcome,
    RunSummary,
    StaleClaim,
    Step,
    UnknownCall,
    argument_digest,
    canonical_json,
    check_finish,
    check_lease,
    check_redecide,
    check_result,
    claimable,
    finish_outcome,
    idempotency_key,
    next_step,
    reason_text,
    reconciled_outcome,
    schema_digest,
    sources,
)

CANARY = "CANARY-ARGUMENT-7f3a"
DIGEST = argument_digest({"path": CANARY}, hmac_key=None)

# The table as the specification states it, written out independently of the module.
EXPECTED = {
    (None, Move.DECIDE): Step.DECIDED,
    (Step.DECIDED, Move.APPROVE): Step.DECIDED,
    (Step.DECIDED, Move.CLAIM): Step.STARTED,
    (Step.STARTED, Move.RECLAIM): Step.STARTED,
    (Step.STARTED, Move.FINISH): Step.FINISHED,
    (Step.DECIDED, Move.SKIP): Step.FINISHED,
    (Step.DECIDED, Move.RECONCILE): Step.RECONCILED,
    (Step.STARTED, Move.RECONCILE): Step.RECONCILED,
}


def new_call(**over: Any) -> NewCall:
    fields: dict[str, Any] = {
        "run_id": "run-1",
        "attempt_id": "att-1",
        "round": 0,
        "route": "openai",
        "call_id": "call_a",
        "tool": "write_file",
        "effect": Effect.NON_IDEMPOTENT,
        "argument_digest": DIGEST,
    }
    fields.update(over)
    return NewCall(**fields)


def row_at(step: Step, **over: Any) -> JournalRow:
    row = JournalRow.decided(new_call(), now=100.0)
    return dataclasses.replace(row, step=step, **over)


@pytest.mark.parametrize(
    ("step", "move"), list(itertools.product([None, *Step], list(Move))), ids=str
)
def test_every_step_and_move_against_the_table(step: Step | None, move: Move) -> None:
    expected = EXPECTED.get((step, move))
    if expected is None:
        with pytest.raises(IllegalTransition) as raised:
            next_step(step, move, key="k1")
        assert raised.value.step is step and raised.value.move is move
        assert move.name.lower() in str(raised.value)
        assert ("no row" if step is None else repr(step.value)) in str(raised.value)
    else:
        assert next_step(step, move) is expected
    assert dict(TRANSITIONS) == EXPECTED


@pytest.mark.parametrize(
    ("move", "steps"),
    [
        (Move.DECIDE, ()),
        (Move.APPROVE, (Step.DECIDED,)),
        (Move.CLAIM, (Step.DECIDED,)),
        (Move.RECLAIM, (Step.STARTED,)),
        (Move.FINISH, (Step.STARTED,)),
        (Move.SKIP, (Step.DECIDED,)),
        (Move.RECONCILE, (Step.DECIDED, Step.STARTED)),
    ],
)
def test_sources_are_read_from_the_table(move: Move, steps: tuple[Step, ...]) -> None:
    assert sources(move) == steps


def test_terminal_steps_have_no_way_out() -> None:
    for step in (Step.FINISHED, Step.RECONCILED):
        assert not [m for (s, m) in TRANSITIONS if s is step]
        assert row_at(step).finished and not row_at(step).ambiguous
    assert row_at(Step.STARTED).ambiguous and not row_at(Step.STARTED).finished
    assert not row_at(Step.DECIDED).finished


# -- keys -----------------------------------------------------------------------------------


def test_idempotency_key_is_a_length_prefixed_sha256_of_run_round_call() -> None:
    h = hashlib.sha256(b"litellm-toolgate/journal/key/v1")
    for part in (b"run-1", b"3", b"call_a"):
        h.update(len(part).to_bytes(8, "big") + part)
    assert idempotency_key("run-1", 3, "call_a") == h.hexdigest()
    assert len(idempotency_key("r", 0, "c")) == 64


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (("ab", 1, "c"), ("a", 1, "bc")),
        (("a", 12, "c"), ("a", 1, "2c")),
        (("run", 0, "call"), ("run", 1, "call")),
        (("run", 0, "call"), ("run2", 0, "call")),
    ],
)
def test_idempotency_keys_of_different_triples_differ(
    a: tuple[str, int, str], b: tuple[str, int, str]
) -> None:
    assert idempotency_key(*a) != idempotency_key(*b)


@pytest.mark.parametrize(
    ("run_id", "round_", "call_id"),
    [("", 0, "c"), ("r", 0, ""), ("r", -1, "c"), ("r", True, "c"), ("r", 1.0, "c")],
)
def test_idempotency_key_refuses_empty_ids_and_bad_rounds(
    run_id: str, round_: Any, call_id: str
) -> None:
    with pytest.raises(GateConfigError):
        idempotency_key(run_id, round_, call_id)


# -- digests ------------------------------------------------------------------------------


def test_argument_digest_is_over_canonical_json_plain_or_keyed() -> None:
    text = '{ "b": [1, 2.5, "é"], "a": {"y": null, "x": true} }'
    canonical = '{"a":{"x":true,"y":null},"b":[1,2.5,"é"]}'.encode()
    assert canonical_json(json.loads(text)) == canonical
    plain = "sha256:" + hashlib.sha256(canonical).hexdigest()
    keyed = "hmac-sha256:" + hmac.new(b"k3y", canonical, hashlib.sha256).hexdigest()
    assert argument_digest(text, hmac_key=None) == plain
    assert argument_digest(json.loads(text), hmac_key=None) == plain
    assert argument_digest(text, hmac_key=b"k3y") == keyed
    assert argument_digest(text, hmac_key=b"other") != keyed
    # Full length: 64 hex digits after the prefix, never shortened.
    assert len(plain.split(":")[1]) == len(keyed.split(":")[1]) == 64


@pytest.mark.parametrize(
    "arguments",
    [f'{{"p": "{CANARY}"', f'{{"p": NaN, "q": "{CANARY}"}}', f'["{CANARY}", Infinity]'],
)
def test_argument_digest_refuses_non_json_without_quoting_it(arguments: str) -> None:
    with pytest.raises(GateConfigError) as raised:
        argument_digest(arguments, hmac_key=None)
    assert CANARY not in str(raised.value) and CANARY not in repr(raised.value.args)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_argument_digest_refuses_an_empty_key_and_non_json_values() -> None:
    with pytest.raises(GateConfigError, match="empty"):
        argument_digest("{}", hmac_key=b"")
    with pytest.raises(GateConfigError):
        argument_digest({"p": {CANARY}}, hmac_key=None)
    with pytest.raises(GateConfigError):
        argument_digest({"p": math.nan}, hmac_key=None)


def test_schema_digest_ignores_key_order() -> None:
    a = {"type": "object", "properties": {"x": {"type": "string"}}}
    b = {"properties": {"x": {"type": "string"}}, "type": "object"}
    assert schema_digest(a) == schema_digest(b)
    assert schema_digest(a) == "sha256:" + hashlib.sha256(canonical_json(a)).hexdigest()
    assert schema_digest(a) != schema_digest({**a, "required": ["x"]})


# -- rows -----------------------------------------------------------------------------------


def test_new_call_and_its_decided_row() -> None:
    call = new_call(round=2)
    assert call.idempotency_key == idempotency_key("run-1", 2, "call_a")
    row = JournalRow.decided(call, now=5.0)
    assert row.step is Step.DECIDED and row.decided_at == 5.0 and row.outcome is None
    assert row.idempotency_key == call.idempotency_key
    assert JournalRow.from_record(row.to_record()) == row
    assert tuple(row.to_record()) == COLUMNS
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.step = Step.FINISHED  # type: ignore[misc]


@pytest.mark.parametrize(
    "over",
    [
        {"effect": "non_idempotent"},
        {"argument_digest": CANARY},
        {"argument_digest": "sha256:abc"},
        {"tool": ""},
        {"run_id": ""},
        {"round": -1},
    ],
)
def test_new_call_checks_its_fields(over: dict[str, Any]) -> None:
    with pytest.raises(GateConfigError):
        new_call(**over)


def test_row_round_trips_every_enum_column() -> None:
    row = row_at(
        Step.FINISHED,
        outcome=Outcome.FAILED,
        approval_status=ApprovalStatus.EXPIRED,
        fencing_token=4,
        finished_at=101.0,
    )
    record = row.to_record()
    assert record["outcome"] == "failed" and record["approval_status"] == "expired"
    assert JournalRow.from_record(record) == row


@pytest.mark.parametrize("name", ["decided_at", "started_at", "finished_at", "lease_expires_at"])
def test_row_times_are_finite(name: str) -> None:
    with pytest.raises(GateConfigError):
        row_at(Step.DECIDED, **{name: math.inf})


@pytest.mark.parametrize(
    ("step", "lease", "now", "live"),
    [
        (Step.STARTED, 10.0, 9.0, True),
        (Step.STARTED, 10.0, 10.0, False),
        (Step.STARTED, None, 0.0, False),
        (Step.DECIDED, 10.0, 0.0, False),
        (Step.FINISHED, 10.0, 0.0, False),
    ],
)
def test_lease_live(step: Step, lease: float | None, now: float, live: bool) -> None:
    assert row_at(step, lease_expires_at=lease).lease_live(now) is live


# -- the checks around a store's compare-and-set ------------------------------------------


def test_redecide_returns_the_same_call_and_refuses_another() -> None:
    existing = JournalRow.decided(new_call(), now=1.0)
    assert check_redecide(existing, new_call(attempt_id="att-2")) is existing
    for other in (
        new_call(round=1),
        new_call(tool="delete_file"),
        new_call(argument_digest=argument_digest("{}", hmac_key=None)),
    ):
        with pytest.raises(CallIdReused) as raised:
            check_redecide(existing, other)
        assert raised.value.earlier_round == 0 and raised.value.round == other.round


@pytest.mark.parametrize(
    ("step", "lease", "retry", "expected"),
    [
        (Step.DECIDED, None, False, Move.CLAIM),
        (Step.DECIDED, None, True, Move.CLAIM),
        (Step.STARTED, 50.0, True, Move.RECLAIM),  # expired at now=100
        (Step.STARTED, None, True, Move.RECLAIM),
        (Step.STARTED, 500.0, True, "live"),
        (Step.STARTED, 50.0, False, "refused"),
        (Step.FINISHED, None, True, "refused"),
        (Step.RECONCILED, None, False, "refused"),
    ],
)
def test_claimable(step: Step, lease: float | None, retry: bool, expected: Any) -> None:
    row = row_at(step, lease_expires_at=lease)
    if isinstance(expected, Move):
        assert claimable(row, now=100.0, retry_expired=retry) is expected
        return
    with pytest.raises(AlreadyClaimed) as raised:
        claimable(row, now=100.0, retry_expired=retry)
    assert raised.value.lease_live is (expected == "live")
    assert raised.value.step is step and isinstance(raised.value, IllegalTransition)
    assert ("lease still live" in str(raised.value)) is (expected == "live")


@pytest.mark.parametrize(
    ("step", "row_token", "claim_token", "error"),
    [
        (Step.STARTED, 7, 7, None),
        (Step.STARTED, 8, 7, StaleClaim),
        (Step.FINISHED, 7, 7, IllegalTransition),
        (Step.RECONCILED, 7, 6, StaleClaim),
    ],
)
def test_check_finish(
    step: Step, row_token: int, claim_token: int, error: type[Exception] | None
) -> None:
    row = row_at(step, fencing_token=row_token)
    claim = Claim(row.idempotency_key, claim_token, 200.0)
    if error is None:
        check_finish(row, claim)
        return
    with pytest.raises(error) as raised:
        check_finish(row, claim)
    if error is StaleClaim:
        assert isinstance(raised.value, StaleClaim)
        assert (raised.value.token, raised.value.current) == (claim_token, row_token)


@pytest.mark.parametrize("outcome", list(Outcome))
def test_finish_outcomes(outcome: Outcome) -> None:
    if outcome in FINISH_OUTCOMES:
        assert finish_outcome(outcome.value) is outcome  # type: ignore[arg-type]
    else:
        with pytest.raises(GateConfigError, match="skipped"):
            finish_outcome(outcome)


@pytest.mark.parametrize(
    ("error_class", "size", "digest", "ok"),
    [
        (None, None, None, True),
        ("TimeoutError", 0, DIGEST, True),
        ("my.pkg.ToolFailed", 12, "hmac-sha256:" + "a" * 64, True),
        (f"ValueError: {CANARY}", None, None, False),
        ("", None, None, False),
        (None, -1, None, False),
        (None, True, None, False),
        (None, 1.5, None, False),
        (None, None, CANARY, False),
        (None, None, "sha256:" + "A" * 64, False),
    ],
)
def test_check_result(error_class: str | None, size: Any, digest: str | None, ok: bool) -> None:
    if ok:
        check_result(error_class, size, digest)
    else:
        with pytest.raises(GateConfigError) as raised:
            check_result(error_class, size, digest)
        assert CANARY not in str(raised.value)


@pytest.mark.parametrize(
    ("lease", "ok"), [(0.5, True), (30, True), (0, False), (-1, False), (math.inf, False)]
)
def test_check_lease(lease: float, ok: bool) -> None:
    if ok:
        assert check_lease(lease) == float(lease)
    else:
        with pytest.raises(GateConfigError):
            check_lease(lease)


@pytest.mark.parametrize(
    ("reason", "ok"), [("  checked the bank  ", True), ("", False), ("   ", False), (None, False)]
)
def test_reason_text(reason: Any, ok: bool) -> None:
    if ok:
        assert reason_text(reason) == "checked the bank"
    else:
        with pytest.raises(GateConfigError):
            reason_text(reason)
    with pytest.raises(GateConfigError):
        reason_text("x" * 1_001)


@pytest.mark.parametrize(
    ("step", "outcome"),
    [(Step.DECIDED, Outcome.SKIPPED), (Step.STARTED, Outcome.AMBIGUOUS), (Step.FINISHED, None)],
)
def test_reconciled_outcome(step: Step, outcome: Outcome | None) -> None:
    if outcome is None:
        with pytest.raises(IllegalTransition):
            reconciled_outcome(step, key="k")
    else:
        assert reconciled_outcome(step) is outcome


# -- errors -------------------------------------------------------------------------------


def errors() -> list[JournalError]:
    rows = [row_at(Step.STARTED, fencing_token=3), row_at(Step.DECIDED)]
    return [
        IllegalTransition("k", Step.FINISHED, Move.CLAIM),
        IllegalTransition("", None, Move.FINISH),
        AlreadyClaimed("k", Step.STARTED, lease_live=True),
        AlreadyClaimed("k", Step.FINISHED),
        StaleClaim("k", 3, 4),
        AmbiguousCalls("run-1", rows),
        CallIdReused("run-1", "call_a", 2, 0),
        UnknownCall("k"),
        JournalVersionError(9, 1),
    ]


@pytest.mark.parametrize("error", errors(), ids=lambda e: type(e).__name__)
def test_errors_pickle_and_name_no_argument_text(error: JournalError) -> None:
    assert isinstance(error, ToolGateError)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is type(error) and str(back) == str(error)
    assert CANARY not in str(error) and CANARY not in repr(error)


def test_ambiguous_calls_lists_ids_tools_and_steps() -> None:
    rows = [row_at(Step.STARTED), dataclasses.replace(row_at(Step.DECIDED), call_id="call_b")]
    error = AmbiguousCalls("run-1", rows)
    assert error.rows == tuple(rows)
    assert "2 call(s)" in str(error)
    assert "call_a (write_file, started)" in str(error)
    assert "call_b (write_file, decided)" in str(error)


def test_run_summary_is_frozen() -> None:
    summary = RunSummary("r", 2, 1, 1, 1.0, 2.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        summary.calls = 3  # type: ignore[misc]
