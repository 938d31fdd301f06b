"""Property tests of the attempt machine over generated chat streams, judged by an oracle.

``chatgen`` writes streams, well-formed or damaged in every way it knows (see its
docstring); ``oracle`` decides, from the specification and sharing no code with the gate,
which calls must be released. For every generated stream:

* the attempt only ever raises ToolCallQuarantined (anything else fails the test);
* it releases exactly what the oracle releases: the same calls, ids and names, arguments
  byte-identical to the wire, the same parsed values; and where the oracle says quarantine,
  nothing at all (released only if the terminal was on the wire and parse, schema and
  policy all passed);
* the outcome is the same however the bytes were split (random cuts, sometimes one byte
  at a time).

Each CI run tries at least 10,000 streams (``tally`` counts them); ``TOOLGATE_ATTACK_SCALE=20``
makes it 210,000.
"""

from __future__ import annotations

import json

import tally
from chatgen import (
    BATCH,
    SCHEMAS,
    Call,
    Knobs,
    Msg,
    Stream,
    batch,
    chunk,
    continuing,
    encode,
    knobs,
    opening,
    policy,
    scaled,
)
from drive import Result, agree, pieces_of, replay
from hypothesis import HealthCheck, event, given, note, settings
from oracle import judge, strict_object

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def check(stream: Stream) -> Result:
    """Replay whole and split, compare with the oracle, count; return the whole outcome."""
    whole = replay([stream.body])
    split = replay(pieces_of(stream.body, stream.cuts))
    assert split == whole, "the outcome must not depend on how the bytes were split"
    expected = judge(stream.body, SCHEMAS, policy)
    tally.count("streams")
    agree(whole, expected)
    outcome = "released" if whole.reason is None else whole.reason.value
    event(f"{'+'.join(stream.mutations) or 'intact'}: {outcome}")
    return whole


@settings(FAST, max_examples=scaled(2000 // BATCH))
@given(knobs(hostile=False))
def test_well_formed_streams_release_exactly_their_calls(k: Knobs) -> None:
    for knob, stream in batch(k, hostile=False):
        note(f"{knob} -> {stream.body!r}")
        whole = check(stream)
        should_release = bool(stream.calls) == (stream.finish == "tool_calls")
        assert (whole.reason is None) == should_release
        if should_release:
            assert whole.released == tuple(
                (c.index, c.call_id, c.name, c.arguments) for c in stream.calls
            )


@settings(FAST, max_examples=scaled(8500 // BATCH + 1))
@given(knobs())
def test_damaged_streams_match_the_oracle(k: Knobs) -> None:
    for knob, stream in batch(k):
        note(f"{knob} -> {stream.body!r}")
        check(stream)


def test_the_generator_is_not_trivial() -> None:
    """A fixed example of what the strategy writes, released exactly as generated."""
    call = Call(1, "call_0_1", "anything", ('{"k"', ': [1, "é"', "]}"))
    other = Call(0, "call_1_0", "multiply", ("", '{"a": 2, "b": 3}'))
    messages = [
        Msg(chunk({"role": "assistant", "content": ""})),
        Msg(opening(1, call.call_id, call.name, call.fragments[0])),
        Msg(chunk({"content": "hi "})),
        Msg(opening(0, other.call_id, other.name, "")),
        Msg(continuing(1, call.fragments[1])),
        Msg(continuing(0, other.fragments[1])),
        Msg(continuing(1, call.fragments[2])),
        Msg(chunk(finish="tool_calls")),
        Msg("[DONE]"),
    ]
    body = encode(messages, ensure_ascii=False, eol="\r\n", split_lines=True, space=False)
    result = replay([body])
    assert result.released == (
        (0, other.call_id, "multiply", other.arguments),
        (1, call.call_id, "anything", call.arguments),
    )
    expected = judge(body, SCHEMAS, policy)
    assert expected is not None
    assert [e[:4] for e in expected] == list(result.released)
    # The oracle is not a yes-machine: each of these must be refused.
    stop = body.replace(b'"finish_reason": "tool_calls"', b'"finish_reason": "stop"')
    for bad in (body[:-3], stop, b"\xff" + body):
        assert judge(bad, SCHEMAS, policy) is None and replay([bad]).reason is not None


def test_the_oracle_s_strict_parse() -> None:
    for good in ('{"a": [1, 2.5e3, -0, "\\ud83d\\ude00"]}', ' {"a": {"b": null}}\n', "{}"):
        assert strict_object(good) == json.loads(good)
    for bad in (
        '{"a": NaN}',
        '{"a": 1, "a": 2}',
        '{"a": 9007199254740992}',
        '{"a": 1e999}',
        '{"a": "\\ud800"}',
        "[1]",
        '{"a": 1} 2',
        '{"a": ' + "[" * 64 + "]" * 64 + "}",
        "\ufeff{}",
        '{"a": "\x01"}',
    ):
        try:
            strict_object(bad)
        except Exception as refusal:
            assert type(refusal).__name__ == "Reject"
        else:
            raise AssertionError(f"the oracle took {bad!r}")
