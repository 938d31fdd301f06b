"""The wire observer (``core/records/observe.py``) on whole calls and event-stream frames.

Each wire's facts from the project's own fixture bodies (Gemini SSE, Ollama NDJSON, Bedrock
event-stream frames, read through the wire's own framing decoder): the terminal, the end
marker, identity, fragments and usage; the same facts however the body is split; none of the
body's text in the facts or the observer's repr; and no exception on a malformed body.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from conftest import CANARY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.records.observe import WireFacts, WireObserver

ROOT = Path(__file__).resolve().parent.parent / "fixtures"


def observe(wire: Wire, body: bytes, size: int | None = None) -> WireObserver:
    observer = WireObserver(wire, started=0.0)
    step = size or len(body) or 1
    for at in range(0, len(body), step):
        observer.feed(body[at : at + step], 0.001 * at)
    observer.end(1.0, clean=True)
    return observer


def facts(wire: str, name: str, size: int | None = None) -> WireFacts:
    return observe(Wire(wire), (ROOT / wire / name).read_bytes(), size).facts()


def summary(f: WireFacts) -> tuple[object, ...]:
    return (
        f.calls,
        f.fragments,
        f.fragment_bytes_min,
        f.fragment_bytes_max,
        f.identity,
        f.arguments_in,
        f.terminal,
        f.end_marker,
        f.after_end,
        f.usage,
        f.undecodable,
    )


# (fixture, (calls, fragments, min, max, identity, arguments in, terminal, end, after end,
#  usage, undecodable))
CASES = {
    "gemini": {
        # A call without an id, its args an object: one fragment of '{"a": 7, "b": 8}'.
        "multiply_basic.sse": (1, 1, 16, 16, "missing", "object", "STOP", True, 0, True, 0),
        "call_with_id.sse": (1, 1, 16, 16, "whole", "object", "STOP", True, 0, True, 0),
        "two_calls_one_message.sse": (2, 2, 16, 90, "missing", "object", "STOP", True, 0, True, 0),
        "usage_after_finish.sse": (1, 1, 16, 16, "missing", "object", "STOP", True, 1, True, 0),
        "eof_before_finish.sse": (1, 1, 16, 16, "missing", "object", None, False, 0, False, 0),
        "malformed_message.sse": (1, 1, 16, 16, "missing", "object", "STOP", True, 0, True, 1),
    },
    "ollama": {
        "multiply_basic.ndjson": (1, 1, 16, 16, "whole", "object", "stop", True, 0, True, 0),
        "multiply_without_id.ndjson": (1, 1, 16, 16, "missing", "object", "stop", True, 0, True, 0),
        "length_after_call.ndjson": (1, 1, 16, 16, "whole", "object", "length", True, 0, True, 0),
        "eof_before_done.ndjson": (1, 1, 16, 16, "whole", "object", None, False, 0, False, 0),
    },
    "bedrock": {
        # '{"a": 7, "b": 8}' in fragments of 5, 9 and 2 bytes.
        "multiply_basic.eventstream": (1, 3, 2, 9, "block", "deltas", "tool_use", True, 0, True, 0),
        "two_calls.eventstream": (2, 9, 1, 37, "block", "deltas", "tool_use", True, 0, True, 0),
        "no_metadata.eventstream": (1, 3, 2, 9, "block", "deltas", "tool_use", False, 0, False, 0),
        # The second fragment's frame has a bad checksum: nothing from it on is read (a frame
        # stream has no boundary to find again).
        "bad_message_crc.eventstream": (1, 1, 5, 5, "block", "deltas", None, False, 0, False, 1),
    },
}


@pytest.mark.parametrize(
    ("wire", "name"), [(wire, name) for wire, names in CASES.items() for name in names]
)
def test_each_wire_facts_from_its_fixtures(wire: str, name: str) -> None:
    whole = facts(wire, name)
    assert summary(whole) == CASES[wire][name]
    assert whole.wire == wire and whole.ended == "eof" and whole.indexed is None
    if whole.calls:
        assert whole.first_call_ms is not None
    # The same facts however the body is split (one byte at a time: every boundary).
    assert summary(facts(wire, name, 1)) == summary(whole)


def test_the_times_are_those_of_the_pieces_that_carried_them() -> None:
    body = (ROOT / "bedrock" / "multiply_basic.eventstream").read_bytes()
    observer = observe(Wire.BEDROCK, body, 1)
    f = observer.facts()
    assert f.pieces == len(body)
    assert f.first_call_ms is not None and f.terminal_ms is not None
    assert 0 < f.first_call_ms < f.terminal_ms <= f.last_byte_ms == 0.001 * (len(body) - 1) * 1000


@pytest.mark.parametrize(
    ("wire", "name"),
    [
        ("gemini", "thought_then_call.sse"),
        ("ollama", "thinking_then_call.ndjson"),
        ("bedrock", "arguments_cut.eventstream"),
    ],
)
def test_the_facts_hold_no_text_of_the_body(wire: str, name: str) -> None:
    body = (ROOT / wire / name).read_bytes()
    assert CANARY.encode() in body
    observer = observe(Wire(wire), body)
    f = observer.facts()
    assert f.calls == 1
    text = repr(f) + repr(f.as_dict()) + repr(observer)
    for value in (CANARY, "workspace", "notes.txt"):
        assert value not in text


# ---- never raises --------------------------------------------------------------------------
SAMPLES = {
    Wire.GEMINI: (ROOT / "gemini" / "thought_then_call.sse").read_bytes(),
    Wire.OLLAMA: (ROOT / "ollama" / "thinking_then_call.ndjson").read_bytes(),
    Wire.BEDROCK: (ROOT / "bedrock" / "two_calls.eventstream").read_bytes(),
}
ODD_MESSAGES = [
    b'{"candidates":[{"content":{"parts":[{"functionCall":{"name":["x"],"args":[1]}}]},'
    b'"finishReason":7}],"usageMetadata":[]}',
    b'{"candidates":{"a":1}}',
    b'{"candidates":[{"content":{"parts":{"x":1}}}]}',
    b'{"message":{"tool_calls":{"id":1}},"done":"yes"}',
    b'{"message":{"tool_calls":[{"id":[1],"function":{"arguments":"text"}}]},"done":true,'
    b'"done_reason":[]}',
    b'{"message":[],"done":true}',
    b"[" * 5000 + b"]" * 5000,
    b'{"a":' * 3000 + b"1" + b"}" * 3000,
    b"\xff\xfe",
]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    wire=st.sampled_from(list(SAMPLES)),
    cuts=st.lists(st.integers(0, 10_000), max_size=6),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=4),
)
def test_a_damaged_body_never_raises(
    wire: Wire, cuts: list[int], flips: list[tuple[int, int]]
) -> None:
    body = bytearray(SAMPLES[wire])
    for at, value in flips:
        body[at % len(body)] = value
    observer = WireObserver(wire, started=0.0)
    points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
    for a, b in itertools.pairwise(points):
        observer.feed(bytes(body[a:b]), 0.0)
    observer.end(0.0, clean=False)
    f = observer.facts()
    assert f.bytes == len(body) and f.ended == "error"


@pytest.mark.parametrize("wire", [Wire.GEMINI, Wire.OLLAMA, Wire.CHAT, Wire.ANTHROPIC])
def test_odd_shapes_are_counted_not_raised(wire: Wire) -> None:
    observer = WireObserver(wire, started=0.0)
    sent = 0
    for message in ODD_MESSAGES:
        framed = message + b"\n" if wire is Wire.OLLAMA else b"data: " + message + b"\n\n"
        observer.feed(framed, 0.0)
        sent += len(framed)
    f = observer.facts()
    assert f.undecodable >= 3  # the deep ones and the byte that is no UTF-8 at least
    assert (f.bytes, f.pieces, f.events) == (sent, len(ODD_MESSAGES), len(ODD_MESSAGES) - 1)


def test_odd_bedrock_frames_are_counted_not_raised() -> None:
    from litellm_toolgate.core.framing.eventstream import encode_frame

    headers = [(":event-type", "contentBlockStart"), (":message-type", "event")]
    observer = WireObserver(Wire.BEDROCK, started=0.0)
    for payload in (
        b'{"contentBlockIndex":[1],"start":{"toolUse":{"toolUseId":1}}}',
        b'{"contentBlockIndex":{},"delta":{"toolUse":{"input":5}}}',
        b'{"start":[]}',
        b"[" * 5000,
    ):
        observer.feed(encode_frame(headers, payload), 0.0)
    observer.feed(encode_frame([(":message-type", "exception")], b"{}"), 0.0)
    observer.feed(encode_frame(headers, b"{}"), 0.0)  # after a fault: not read
    f = observer.facts()
    assert (f.events, f.undecodable, f.calls) == (4, 2, 1)
