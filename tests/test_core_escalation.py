"""The escalation window's arithmetic and the metrics' outcome, sans-I/O, with a fake clock.

Table-driven: each row is a sequence of (time, fault) attempts on one route and the
transitions the rule must answer after each, then the same with time moving on alone.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from conftest import RecordingObserver

from litellm_toolgate.core import Attempt, PolicyDecision, ToolRegistry
from litellm_toolgate.core.decision.state import TransitionError, Wire
from litellm_toolgate.core.errors import Party, QuarantineReason, ToolCallQuarantined
from litellm_toolgate.core.records.metrics import (
    OVERFLOW,
    WIDTH,
    AttemptOutcome,
    DecidedBatch,
    Observers,
    RouteLabels,
)
from litellm_toolgate.core.rules.escalation import BucketWindow, Escalation, Rule, Transition

T, R = Transition.TRIPPED, Transition.RECOVERED
RULE = Rule(window=10.0, buckets=5, min_attempts=4, trip_rate=0.5, recover_rate=0.25)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"window": 0}, "window"),
        ({"window": float("inf")}, "window"),
        ({"buckets": 0}, "buckets"),
        ({"min_attempts": 0}, "min_attempts"),
        ({"trip_rate": 0}, "trip_rate"),
        ({"trip_rate": 1.5}, "trip_rate"),
        ({"trip_rate": 0.5, "recover_rate": 0.5}, "recover_rate"),
        ({"recover_rate": -0.1}, "recover_rate"),
    ],
)
def test_a_rule_that_cannot_work_is_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Rule(**kwargs)


@pytest.mark.parametrize(
    ("tripped", "attempts", "faults", "expected"),
    [
        (False, 0, 0, None),
        (False, 3, 3, None),  # below min_attempts: never trips, however bad
        (False, 4, 1, None),
        (False, 4, 2, T),  # exactly the trip rate
        (False, 10, 4, None),
        (False, 10, 10, T),
        (True, 10, 5, None),  # still bad
        (True, 10, 3, None),  # between the thresholds: hysteresis holds it tripped
        (True, 8, 2, R),  # exactly the recovery rate
        (True, 0, 0, R),  # the window drained: nothing left against the route
        (True, 2, 0, R),
        (True, 2, 2, None),  # few attempts, all faults: stays out
    ],
)
def test_the_rule_table(tripped: bool, attempts: int, faults: int, expected: Any) -> None:
    assert RULE.judge(tripped, attempts, faults) is expected


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # (time, fault) per attempt; the transition expected after each step.
        ([(0, True), (1, True), (2, True), (3, True)], [None, None, None, T]),
        ([(0, True), (1, False), (2, True), (3, False)], [None, None, None, T]),
        ([(0, True), (1, False), (2, False), (3, False)], [None, None, None, None]),
        # Faults older than the window do not count: 4 faults, then 4 clean ones 20 s later.
        ([(0, True)] * 3 + [(20, False)] * 4, [None, None, None, None, None, None, None]),
        # Tripped, then clean traffic brings the rate down to the recovery rate.
        (
            [(0, True)] * 4 + [(1, False)] * 12,
            [None, None, None, T] + [None] * 11 + [R],
        ),
    ],
)
def test_the_window_table(steps: list[tuple[float, bool]], expected: list[Any]) -> None:
    window, escalation = BucketWindow(RULE), Escalation(RULE)
    seen = []
    for now, fault in steps:
        window.add("r", now, fault=fault)
        seen.append(escalation.judge("r", *window.totals("r", now)))
    assert seen == expected


def test_a_tripped_route_recovers_when_its_faults_age_out() -> None:
    window, escalation = BucketWindow(RULE), Escalation(RULE)
    for _ in range(5):
        window.add("bad", 100.0, fault=True)
    assert escalation.judge("bad", *window.totals("bad", 100.0)) is T
    assert escalation.tripped == {"bad"}
    # Out of routing: no traffic. Within the window it stays out...
    for now in (101.0, 105.0, 109.9):
        assert window.totals("bad", now) == (5, 5)
        assert escalation.judge("bad", *window.totals("bad", now)) is None
    # ...and once the window has moved past its bucket it comes back, once.
    assert window.totals("bad", 110.0) == (0, 0)
    assert escalation.judge("bad", *window.totals("bad", 110.0)) is R
    assert escalation.judge("bad", *window.totals("bad", 111.0)) is None
    assert escalation.tripped == frozenset()


def test_routes_are_counted_apart_and_buckets_expire() -> None:
    window = BucketWindow(RULE)
    for now in range(0, 50):
        window.add("a", float(now), fault=now % 2 == 0)
    window.add("b", 49.0, fault=True)
    # The window is 10 s: buckets of 2 s, the current (48-49) and four before (40-47).
    assert window.totals("a", 49.0) == (10, 5)
    assert window.totals("b", 49.0) == (1, 1)
    assert window.totals("c", 49.0) == (0, 0)
    assert len(window._counts["a"]) <= RULE.buckets  # old buckets are dropped


def test_bucket_names_agree_across_processes() -> None:
    # Buckets are named by the clock alone, so two windows on one clock share the names.
    assert RULE.bucket(0.0) == 0 and RULE.bucket(1.99) == 0 and RULE.bucket(2.0) == 1
    assert list(RULE.live(9.0)) == [0, 1, 2, 3, 4]
    assert list(RULE.live(10.0)) == [1, 2, 3, 4, 5]


# ---- route labels ------------------------------------------------------------------------------
def test_route_labels_stay_bounded_under_many_distinct_models() -> None:
    labels = RouteLabels(["cometapi/gpt-4o"], cap=5)
    values = {labels(f"openai/model-{i}") for i in range(10_000)}
    values.add(labels("cometapi/gpt-4o"))
    assert len(values) == 7  # the named one, five others, and the overflow value
    assert OVERFLOW in values and "cometapi/gpt-4o" in values
    assert labels("openai/model-3") == "openai/model-3"  # a kept one stays itself
    assert labels("openai/model-9999") == OVERFLOW


# ---- the outcome of an attempt -----------------------------------------------------------------
MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "c", "choices": [choice]}).encode() + b"\n\n"


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


OBSERVERS = Observers()
SEEN = RecordingObserver()
OBSERVERS.add(SEEN)


@pytest.fixture(autouse=True)
def _nothing_queued() -> None:
    OBSERVERS.drain()
    SEEN.outcomes.clear()


def _attempt(clock: Clock, *, done: bool) -> Attempt:
    attempt = Attempt(
        ToolRegistry.from_tools([MULTIPLY]), route="cometapi/x", clock=clock, observers=OBSERVERS
    )
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    opened = {"index": 0, "id": "call-1", "type": "function", "function": {"name": "multiply"}}
    attempt.receive_bytes(_chunk({"tool_calls": [opened]}))
    clock.now += 2.0
    args = {"index": 0, "function": {"arguments": '{"a": 2, "b": 3}'}}
    attempt.receive_bytes(_chunk({"tool_calls": [args]}) + _chunk({}, "tool_calls"))
    if done:
        attempt.receive_bytes(b"data: [DONE]\n\n")
    with contextlib.suppress(ToolCallQuarantined):
        attempt.receive_eof()
    return attempt


def _counted(attempt: Attempt) -> AttemptOutcome:
    """The one outcome the attempt queued as it was decided: deciding it again (a late
    cancellation) and draining again add nothing."""
    attempt.interrupt(QuarantineReason.CANCELLED)
    OBSERVERS.drain()
    OBSERVERS.drain()
    assert len(SEEN.outcomes) == 1
    return SEEN.outcomes[0]


def test_the_outcome_of_a_release() -> None:
    clock = Clock()
    attempt = _attempt(clock, done=True)
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    clock.now += 0.5
    attempt.release()
    outcome = _counted(attempt)
    assert outcome.released and outcome.reason is None and outcome.party is None
    assert (outcome.route, outcome.wire, outcome.calls) == ("cometapi/x", Wire.CHAT, 1)
    assert outcome.withheld_bytes == len('{"a": 2, "b": 3}')
    assert outcome.release_delay_seconds == pytest.approx(2.5)
    assert outcome.decision_seconds >= 0


def test_a_released_attempt_takes_no_later_decision() -> None:
    """A release is final: a denial (or a failed policy) asked for afterwards is refused and
    neither turns the attempt into a quarantine nor counts it again."""
    attempt = _attempt(Clock(), done=True)
    calls = attempt.conclude()
    for call in calls:
        attempt.decide(call.index, PolicyDecision.approve())
    attempt.release()
    for late in (PolicyDecision.deny("too late"), None):
        with pytest.raises(TransitionError, match="released attempt"):
            attempt.decide(calls[0].index, late)
    assert attempt.decided and attempt.quarantined is None
    assert [record.execution_state for record in attempt.records()] == ["released"]
    assert _counted(attempt).released


def test_a_clock_that_stepped_back_gives_a_delay_of_zero() -> None:
    clock = Clock()
    attempt = _attempt(clock, done=True)
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    clock.now = 50.0  # before the call opened, at 100
    attempt.release()
    assert _counted(attempt).release_delay_seconds == 0.0


def test_a_clock_that_stepped_back_before_a_quarantine_gives_a_delay_of_zero() -> None:
    clock = Clock()
    attempt = _attempt(clock, done=True)
    clock.now = 50.0  # before the call opened, at 100
    attempt.interrupt(QuarantineReason.CANCELLED)
    outcome = _counted(attempt)
    assert outcome.reason is QuarantineReason.CANCELLED
    assert outcome.release_delay_seconds == 0.0


def test_the_outcome_of_a_remote_fault_and_counting_once() -> None:
    clock = Clock()
    attempt = _attempt(clock, done=False)  # no [DONE]: the upstream broke its contract
    outcome = _counted(attempt)
    assert not outcome.released
    assert (outcome.reason, outcome.party) == (QuarantineReason.MISSING_DONE, Party.REMOTE)
    assert outcome.remote_fault
    seen: list[Any] = []

    class Counting:
        batch = 256

        def attempts_decided(self, outcomes: list[Any]) -> None:
            seen.extend(outcomes)

        def stream_started(self, route: str) -> None: ...

        def stream_ended(self, route: str) -> None: ...

    class Broken(Counting):
        batch = 2

        def attempts_decided(self, outcomes: list[Any]) -> None:
            raise RuntimeError("an observer's own failure")

    observers = Observers()
    observers.add(Broken())
    observers.add(Counting())
    assert observers.every == 2 * WIDTH  # the most impatient listener's batch, in values
    attempt = Attempt(
        ToolRegistry.from_tools([MULTIPLY]), route="cometapi/x", clock=clock, observers=observers
    )
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    with pytest.raises(ToolCallQuarantined):
        attempt.receive_eof()  # an empty body: no terminal
    assert not observers.due()
    attempt.interrupt(QuarantineReason.CANCELLED)  # a second report
    observers.drain()
    fault = attempt.quarantined
    assert fault is not None and [o.reason for o in seen] == [fault.reason]
    observers.drain()
    assert len(seen) == 1


def test_a_decided_batch_reads_as_outcomes_and_as_columns() -> None:
    released = AttemptOutcome("r", Wire.CHAT, None, 1, 10, 0.001, 0.01)
    faulted = released._replace(
        route="s", reason=QuarantineReason.MISSING_DONE, release_delay_seconds=None
    )
    batch = DecidedBatch.of([released, faulted])
    assert len(batch) == 2 and list(batch) == [released, faulted]
    assert [type(o) for o in batch] == [AttemptOutcome, AttemptOutcome]
    assert batch.column("route") == ["r", "s"] and batch.column("reason")[1].party is Party.REMOTE
    assert batch.column("release_delay_seconds") == [0.01, None]
    assert batch.columns() == [list(values) for values in zip(released, faulted, strict=True)]
    with pytest.raises(ValueError, match="values per outcome"):
        DecidedBatch(["r", Wire.CHAT, None])


def test_nobody_listening_queues_nothing() -> None:
    """An attempt decided while nobody listens is never counted, later listeners included."""
    observers = Observers()
    attempt = Attempt(ToolRegistry.from_tools([MULTIPLY]), route="cometapi/x", observers=observers)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    with pytest.raises(ToolCallQuarantined):
        attempt.receive_eof()
    assert observers.decided == [] and not observers
    late = RecordingObserver()
    observers.add(late)
    observers.drain()
    assert late.outcomes == []
    observers.remove(late)
    assert not observers and observers.every == WIDTH


def test_a_policy_denial_is_local() -> None:
    clock = Clock()
    attempt = _attempt(clock, done=True)
    for call in attempt.conclude():
        with pytest.raises(ToolCallQuarantined):
            attempt.decide(call.index, PolicyDecision.deny("no"))
    outcome = _counted(attempt)
    assert (outcome.reason, outcome.party, outcome.remote_fault) == (
        QuarantineReason.POLICY_DENIED,
        Party.LOCAL,
        False,
    )


def test_the_outcome_reads_the_timings_the_attempt_kept() -> None:
    """Two calls, a clock that steps back between their openings, a repeated decision: the
    first opening, the deciding time and the delay are what the calls' own records say."""
    clock = Clock()
    attempt = Attempt(
        ToolRegistry.from_tools([MULTIPLY]), route="cometapi/x", clock=clock, observers=OBSERVERS
    )
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    for index, at in ((0, 100.0), (1, 99.0), (2, 99.5)):  # the second opens "earlier"
        clock.now = at
        opened = {
            "index": index,
            "id": f"call-{index}",
            "type": "function",
            "function": {"name": "multiply", "arguments": '{"a": 2, "b": 3}'},
        }
        attempt.receive_bytes(_chunk({"tool_calls": [opened]}))
    attempt.receive_bytes(_chunk({}, "tool_calls") + b"data: [DONE]\n\n")
    attempt.receive_eof()
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve(), elapsed=0.25 * (call.index + 1))
    with pytest.raises(Exception, match="policy_approved"):
        attempt.decide(0, PolicyDecision.approve(), elapsed=0.5)  # the call is decided
    clock.now = 101.0
    attempt.release()
    records = attempt.records()
    spent = sum(r.validation_ms + r.policy_ms for r in records) / 1000
    assert attempt.timings() == (99.0, pytest.approx(spent, abs=1e-5))
    assert attempt.timings()[1] == pytest.approx(0.5 + 0.5 + 0.75, abs=1e-5)  # as recorded
    outcome = _counted(attempt)
    assert (outcome.calls, outcome.release_delay_seconds) == (3, 2.0)
    assert outcome.decision_seconds == attempt.timings()[1]


def test_an_attempt_without_calls_has_no_delay() -> None:
    clock = Clock()
    attempt = Attempt(
        ToolRegistry.from_tools([MULTIPLY]), route="cometapi/x", clock=clock, observers=OBSERVERS
    )
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    attempt.receive_bytes(_chunk({"content": "hi"}, "stop") + b"data: [DONE]\n\n")
    attempt.receive_eof()
    assert attempt.conclude() == []
    OBSERVERS.drain()
    assert SEEN.outcomes == []  # not decided yet: counted when it is
    attempt.release()
    assert attempt.timings() == (None, 0.0)
    outcome = _counted(attempt)
    assert (outcome.calls, outcome.release_delay_seconds, outcome.released) == (0, None, True)
