"""Every recorded chat fixture replayed through the sans-I/O core (``Attempt``), no litellm.

The manifest states the wire's truth for each body: release (with the exact calls) or
quarantine (with the reason). Each body is fed whole, one byte at a time and, for the small
ones, cut in two at every possible offset; every way of feeding must give the same outcome
and the same decision records (timing fields aside).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from conftest import CASES, MANIFEST, body_of, split

from litellm_toolgate.core import (
    Attempt,
    DecisionRecord,
    PolicyDecision,
    QuarantineReason,
    StreamFault,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.decision.events import TextDelta
from litellm_toolgate.core.decision.state import StreamState

REGISTRY = ToolRegistry.from_tools(MANIFEST["tools"])
TIMING = frozenset({"observed_at", "stream_ms", "validation_ms", "policy_ms"})
TRANSPORT = {
    "disconnect_after": QuarantineReason.DISCONNECTED,
    "stall_after": QuarantineReason.STALLED,
}
ALL = sorted(CASES)
SMALL = sorted(name for name, case in CASES.items() if case.get("small"))


@dataclass(frozen=True)
class Outcome:
    """Everything about one replay that must not depend on how the bytes were split."""

    expect: str
    reason: str | None
    family: type[Exception] | None
    call_index: int | None
    calls: tuple[dict[str, Any], ...]
    records: tuple[dict[str, Any], ...]
    text: str
    finish_reason: str | None


def served(case: dict[str, Any]) -> tuple[bytes, QuarantineReason | None]:
    """The bytes the client got, and the interruption that ended them (if any)."""
    body = body_of(case)
    for key, reason in TRANSPORT.items():
        cut = (case.get("transport") or {}).get(key)
        if cut is not None:
            return body[:cut], reason
    return body, None


def without_timing(records: Iterable[DecisionRecord]) -> tuple[dict[str, Any], ...]:
    # vars() of a pydantic model is its field values: much cheaper than model_dump in the
    # exhaustive loops, and just as exact.
    return tuple({k: v for k, v in vars(r).items() if k not in TIMING} for r in records)


def sanitized(attempt: Attempt) -> tuple[dict[str, Any], ...]:
    return without_timing(attempt.records())


def replay(
    pieces: list[bytes], interruption: QuarantineReason | None = None, *, thorough: bool = True
) -> Outcome:
    """Feed ``pieces`` to a fresh attempt, approve every call the policy is asked about.

    ``thorough`` also checks that a quarantined attempt refuses everything afterwards (the
    exhaustive split loops leave that to the whole-body replay, to save time).
    """
    attempt = Attempt(REGISTRY, attempt_id="att-fixture", clock=lambda: 0.0)
    text: list[str] = []
    released: list[dict[str, Any]] = []
    fault: ToolCallQuarantined | None = None
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True)
        for piece in pieces:
            for event in attempt.receive_bytes(piece):
                if isinstance(event, TextDelta):
                    text.append(event.text)
        if interruption is not None:
            fault = attempt.interrupt(interruption)
        else:
            attempt.receive_eof()
            for call in attempt.conclude():
                attempt.decide(call.index, PolicyDecision.approve())
            released = [
                {"index": c.index, "id": c.call_id, "name": c.name, "arguments": c.arguments}
                for c in attempt.release()
            ]
    except ToolCallQuarantined as exc:
        fault = exc

    if fault is None:
        assert attempt.state is StreamState.RELEASED
        assert attempt.quarantined is None
        return Outcome(
            "release", None, None, None, tuple(released), sanitized(attempt),
            "".join(text), attempt.finish_reason,
        )  # fmt: skip

    # A quarantined attempt: nothing released, the same exception forever after.
    assert not released
    assert attempt.state is StreamState.QUARANTINED
    assert attempt.quarantined is fault
    records = sanitized(attempt)
    if not thorough:
        return Outcome(
            "quarantine", fault.reason.value, type(fault), fault.call_index, (), records, "",
            attempt.finish_reason,
        )  # fmt: skip
    for later in (
        lambda: attempt.receive_bytes(b"data: [DONE]\n\n"),
        attempt.receive_eof,
        attempt.conclude,
        attempt.release,
        lambda: attempt.decide(0, PolicyDecision.approve()),
        lambda: attempt.bind_response(content_type="text/event-stream", streamed=True),
    ):
        with pytest.raises(ToolCallQuarantined) as again:
            later()
        assert again.value is fault
    assert attempt.interrupt(QuarantineReason.CANCELLED) is fault
    # The records the exception carries are the attempt's records at the fault.
    carried = without_timing(fault.records)
    assert carried == records
    # The text of the piece that faulted is never handed out, so how much text was seen
    # before the fault depends on the split; it is left out of the comparison.
    return Outcome(
        "quarantine", fault.reason.value, type(fault), fault.call_index, (),
        sanitized(attempt), "", attempt.finish_reason,
    )  # fmt: skip


def check_against_manifest(case: dict[str, Any], outcome: Outcome) -> None:
    assert outcome.expect == case["expect"], case["name"]
    assert outcome.reason == case.get("reason")
    assert list(outcome.calls) == case.get("calls", [])
    if outcome.expect == "release":
        assert outcome.family is None
        assert outcome.text == case["text"]
        assert outcome.finish_reason == case["finish_reason"]
        assert [r["call_id"] for r in outcome.records] == [c["id"] for c in case["calls"]]
        assert all(r["execution_state"] == "released" for r in outcome.records)
        assert all(r["error_class"] is None for r in outcome.records)
        assert all(r["policy_status"] == "approved" for r in outcome.records)
    else:
        reason = QuarantineReason(case["reason"])
        assert outcome.family is reason.family
        assert all(r["execution_state"] == "quarantined" for r in outcome.records)
        assert all(r["error_class"] is not None for r in outcome.records)
        assert all(r["policy_status"] == "not_checked" for r in outcome.records)


def test_manifest_covers_both_outcomes() -> None:
    expects = {case["expect"] for case in CASES.values()}
    assert expects == {"release", "quarantine"}
    assert SMALL, "some cases must be small enough for the exhaustive split"


@pytest.mark.parametrize("name", ALL)
def test_fixture_whole_body(name: str) -> None:
    case = CASES[name]
    body, interruption = served(case)
    check_against_manifest(case, replay([body], interruption))


@pytest.mark.parametrize("name", ALL)
def test_fixture_one_byte_at_a_time_and_random_splits(name: str) -> None:
    case = CASES[name]
    body, interruption = served(case)
    reference = replay([body], interruption)
    assert replay(split(body, "bytewise"), interruption) == reference
    for seed in range(3):
        assert replay(split(body, "random", seed), interruption) == reference


@pytest.mark.slow
@pytest.mark.parametrize("name", SMALL)
def test_fixture_every_two_piece_split(name: str) -> None:
    case = CASES[name]
    body, interruption = served(case)
    reference = replay([body], interruption)
    check_against_manifest(case, reference)
    for i in range(len(body) + 1):
        got = replay([body[:i], body[i:]], interruption, thorough=False)
        assert got == reference, f"{name}: split at byte {i}"


@pytest.mark.parametrize("name", sorted(n for n, c in CASES.items() if c.get("transport")))
def test_interrupted_fixture_whole_body_would_release(name: str) -> None:
    """The cut bodies are good streams: only the transport fault makes them quarantine."""
    case = CASES[name]
    full = replay([body_of(case)])
    assert full.expect == "release"
    cut, interruption = served(case)
    assert interruption is not None
    assert replay([cut], interruption).reason == interruption.value
    # The stream is not complete at the cut: a clean end of body there is a missing finish.
    assert replay([cut]).reason == QuarantineReason.MISSING_FINISH.value


def test_disconnect_then_fresh_attempt() -> None:
    """A retry is a new attempt: the follow-up case of a disconnect releases on its own."""
    case = CASES["disconnect_mid_arguments"]
    follow = CASES[case["then"]]
    cut, interruption = served(case)
    assert replay([cut], interruption).reason == "disconnected"
    check_against_manifest(follow, replay([body_of(follow)]))


def test_invalid_utf8_keeps_what_came_before_the_bad_byte() -> None:
    """Regression: the call the wire opened before the bad byte has its record whether the
    bad byte arrives in the same piece or later (it used to vanish when fed whole)."""
    body, _ = served(CASES["invalid_utf8"])
    bad = body.index(b"\xe9")
    for pieces in ([body], split(body, "bytewise"), [body[:bad], body[bad:]]):
        got = replay(pieces)
        assert (got.reason, got.family) == ("invalid_utf8", StreamFault)
        assert [r["call_id"] for r in got.records] == ["call_9a42fa35127372d319d132bb"]
