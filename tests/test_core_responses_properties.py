"""Property tests of the attempt machine over generated Responses streams, judged by an oracle.

``respgen`` writes native Responses SSE streams, well-formed or damaged in every way it
knows (see its docstring); ``oracle_responses`` decides, from the README's Responses rules
and sharing no code with the gate, which calls must be released. For every stream, bound
to a Responses attempt (request path ``/v1/responses``):

* the attempt only ever raises ToolCallQuarantined (anything else fails the test);
* it releases exactly what the oracle releases: the same calls, call ids and names,
  arguments byte-identical to the wire, the same parsed values; where the oracle says
  quarantine, nothing at all;
* the outcome is the same however the bytes were split (random cuts; about one stream in
  150 one byte at a time, counted as ``responses_bytewise``).

Each CI run tries at least 5,000 streams (``tally`` counts them under ``responses_*``);
``TOOLGATE_ATTACK_SCALE=20`` makes it over 100,000.
"""

from __future__ import annotations

import tally
from chatgen import BATCH, SCHEMAS, Knobs, knobs, policy, scaled
from drive import RESPONSES_PATH, Result, agree, pieces_of, replay
from hypothesis import HealthCheck, event, given, note, settings
from oracle_responses import judge
from respgen import MUTATIONS, batch, wire

from litellm_toolgate.core import QuarantineReason

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
R = QuarantineReason


def check(stream_body: bytes, cuts: list[int], mutations: list[str]) -> Result:
    """Replay whole and split, compare with the oracle, count; return the whole outcome."""
    whole = replay([stream_body], RESPONSES_PATH)
    split = replay(pieces_of(stream_body, cuts), RESPONSES_PATH)
    assert split == whole, "the outcome must not depend on how the bytes were split"
    expected = judge(stream_body, SCHEMAS, policy)
    tally.count("responses_streams")
    if len(cuts) > 1 and len(cuts) == len(stream_body) - 1:
        tally.count("responses_bytewise")
    agree(whole, expected, "responses_")
    outcome = "released" if whole.reason is None else whole.reason.value
    event(f"{'+'.join(mutations) or 'intact'}: {outcome}")
    return whole


@settings(FAST, max_examples=scaled(1000 // BATCH))
@given(knobs(hostile=False, kinds=MUTATIONS))
def test_well_formed_responses_streams_release_exactly_their_calls(k: Knobs) -> None:
    for knob, stream in batch(k, hostile=False):
        note(f"{knob} -> {stream.body!r}")
        whole = check(stream.body, stream.cuts, stream.mutations)
        assert whole.reason is None, f"a well-formed stream was quarantined: {whole.reason}"
        assert whole.released == tuple(
            (c.index, c.call_id, c.name, c.arguments) for c in stream.calls
        )


@settings(FAST, max_examples=scaled(4000 // BATCH + 1))
@given(knobs(kinds=MUTATIONS))
def test_damaged_responses_streams_match_the_oracle(k: Knobs) -> None:
    for knob, stream in batch(k):
        note(f"{knob} -> {stream.body!r}")
        check(stream.body, stream.cuts, stream.mutations)


def test_the_responses_generator_and_oracle_are_not_trivial() -> None:
    """A fixed stream with calls is released as generated, and each damage is refused."""
    seed = next(
        s for s in range(1000) if len(wire(Knobs(s, (), None, "\n", False), False).calls) >= 2
    )
    stream = wire(Knobs(seed, (), None, "\n", False), hostile=False)
    body = stream.body
    expected = judge(body, SCHEMAS, policy)
    assert expected is not None and len(expected) == len(stream.calls) >= 2
    assert replay([body], RESPONSES_PATH).released == tuple(e[:4] for e in expected)
    completed = body.rfind(b"event: response.completed")
    # The oracle is not a yes-machine: each of these must be refused, by both.
    for bad in (
        body[:completed],  # no completion
        body.replace(b'"status": "completed", "output"', b'"status": "incomplete", "output"'),
        body + b"event: response.output_text.delta\ndata: {}\n\n",  # after the completion
        body.replace(
            b"response.function_call_arguments.done", b"response.function_call_arguments.dome"
        ),
        b"\xff" + body,
    ):
        assert bad != body
        assert judge(bad, SCHEMAS, policy) is None
        assert replay([bad], RESPONSES_PATH).reason is not None
    # The same bytes on the chat wire are not a chat stream: nothing is released.
    assert replay([body]).reason is not None
