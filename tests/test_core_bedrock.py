"""The Bedrock Converse wire through the sans-I/O core: every fixture whole, at every byte
split and one byte at a time; whole (``/converse``) bodies; the event-stream frame decoder
(both CRCs, every header type, the size bound, cut bodies), held to botocore's decoder on
the good fixtures; the terminal, identity and carrier rules. No litellm."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from conftest import CANARY, split
from wirecases import CoreWire

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    CarrierCall,
    QuarantineReason,
    ToolCallQuarantined,
)
from litellm_toolgate.core.decision.state import Wire, wire_of
from litellm_toolgate.core.errors import Fault
from litellm_toolgate.core.framing.eventstream import (
    EventStreamDecodeError,
    EventStreamDecoder,
    encode_frame,
)
from litellm_toolgate.core.wires import bedrock

R = QuarantineReason
PATH = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
MEDIA = "application/vnd.amazon.eventstream"
WHOLE_PATH = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse"
BEDROCK = CoreWire(
    "bedrock",
    wire=Wire.BEDROCK,
    path=PATH,
    whole_path=WHOLE_PATH,
    content_type=MEDIA,
    attempt_id="att-b",
)
FIXTURES, CASES, REGISTRY = BEDROCK.folder, BEDROCK.cases, BEDROCK.registry
STREAMED, WHOLE = BEDROCK.streamed, BEDROCK.whole
body, replay, check = BEDROCK.body, BEDROCK.replay, BEDROCK.check


EVERY_SPLIT = {"multiply_basic", "exception_frame", "invalid_utf8", "cut_mid_frame"}


def _frame_splits(data: bytes) -> list[int]:
    """Every cut within 14 bytes of a frame's start (its prelude and first header) and the
    two bytes before it (the last frame's CRC), frames found by their total lengths."""
    cuts: set[int] = set()
    start = 0
    while start < len(data):
        cuts.update(range(start - 2, start + 14))
        total = int.from_bytes(data[start : start + 4], "big")
        if total < 16:
            break
        start += total
    return sorted(c for c in cuts if 0 < c < len(data))


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_at_every_split(name: str) -> None:
    """Every byte split of a few fixtures; of the rest, every split near a frame boundary
    (one byte at a time, below, covers every decoder state of every fixture)."""
    data = body(name)
    check(name, [data])
    cuts = range(1, len(data)) if name in EVERY_SPLIT else _frame_splits(data)
    for cut in cuts:
        check(name, [data[:cut], data[cut:]])
    for seed in range(2):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_one_byte_at_a_time(name: str) -> None:
    check(name, split(body(name), "bytewise"))


@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_body(name: str) -> None:
    check(name)


def test_the_manifest_covers_the_wire_rules() -> None:
    reasons = {c["reason"] for c in CASES.values() if c["expect"] == "quarantine"}
    assert {
        "malformed_event",
        "error_event",
        "missing_finish",
        "missing_done",
        "event_after_terminal",
        "finish_reason_mismatch",
        "refusal",
        "incomplete_item",
        "identity_conflict",
        "missing_call_identity",
        "invalid_call_index",
        "unsupported_tool_type",
        "spliced_response",
        "duplicate_key",
        "schema_invalid",
        "unknown_tool",
        "invalid_json",
        "invalid_utf8",
    } <= reasons
    assert any(CANARY in json.dumps(c.get("calls", [])) for c in CASES.values())


def test_the_generator_reproduces_every_file(tmp_path: Path) -> None:
    BEDROCK.check_generator(tmp_path)


def test_the_paths_pick_the_bedrock_wire() -> None:
    assert wire_of(PATH) is Wire.BEDROCK
    assert wire_of(WHOLE_PATH) is Wire.BEDROCK
    assert wire_of("/model/x/invoke-with-response-stream") is None
    assert wire_of("/model/x/invoke") is None


def test_an_sse_body_on_the_bedrock_path_is_refused() -> None:
    attempt = Attempt(REGISTRY)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.bind_response(content_type="text/event-stream", streamed=True, path=PATH)
    assert info.value.reason is R.UNSUPPORTED_WIRE


def test_calls_are_released_only_under_tool_use() -> None:
    spec = bedrock.WIRE
    for reason in ("end_turn", "max_tokens", "stop_sequence", "malformed_tool_use", None):
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
    for reason in ("guardrail_intervened", "content_filtered"):
        assert spec.terminal_fault(reason, True, lambda: True) is R.REFUSAL
        assert spec.terminal_fault(reason, False, lambda: True) is None
    assert spec.terminal_fault("tool_use", True, lambda: False) is None
    assert spec.terminal_fault("tool_use", False, lambda: True) is R.FINISH_REASON_MISMATCH
    assert spec.terminal_fault("end_turn", False, lambda: True) is None


# ---- the frame decoder -----------------------------------------------------------------------
def _frames(data: bytes) -> list[tuple[str, str]]:
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    out = [(m.event, m.data) for m in decoder.feed(data)]
    decoder.flush()
    return out


@pytest.mark.parametrize("name", ["multiply_basic", "two_calls", "every_header_type"])
def test_the_decoder_agrees_with_botocore_on_good_frames(name: str) -> None:
    from botocore.eventstream import EventStreamBuffer  # litellm's decoder, in both venvs

    buffer = EventStreamBuffer()
    buffer.add_data(body(name))
    theirs = [
        (m.headers[":event-type"], m.payload.decode("utf-8"))
        for m in buffer
        if m.headers.get(":message-type") == "event"
    ]
    assert _frames(body(name)) == theirs
    assert len(theirs) > 5


def test_every_fault_of_the_decoder_is_typed_and_holds_no_body_text() -> None:
    good = encode_frame([(":event-type", "x"), (":message-type", "event")], CANARY.encode())
    broken = bytearray(good)
    broken[-1] ^= 1
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert decoder.feed(bytes(broken)) == []
    assert decoder.error is R.MALFORMED_EVENT
    with pytest.raises(EventStreamDecodeError) as info:
        decoder.feed(b"")
    assert isinstance(info.value, Fault)
    for rendered in (str(info.value), repr(info.value), repr(info.value.args)):
        assert CANARY not in rendered
    assert info.value.__context__ is None


def test_frames_before_a_fault_are_returned_and_the_fault_kept() -> None:
    one = encode_frame([(":event-type", "a"), (":message-type", "event")], b"{}")
    bad = encode_frame([(":message-type", "exception"), (":exception-type", "x")], b"{}")
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert [m.event for m in decoder.feed(one + bad + one)] == ["a"]
    assert decoder.error is R.ERROR_EVENT


def test_the_size_bound_is_decided_on_the_prelude_at_any_split() -> None:
    frame = encode_frame([(":event-type", "a"), (":message-type", "event")], b"x" * 100)
    for limit, expected in ((len(frame), None), (len(frame) - 1, R.EVENT_TOO_LARGE)):
        for cut in range(1, len(frame)):
            decoder = EventStreamDecoder(max_event_bytes=limit)
            decoder.feed(frame[:cut])
            if decoder.error is None:
                decoder.feed(frame[cut:])
            assert decoder.error is expected


def test_a_prelude_that_lies_is_refused_before_its_lengths_are_used() -> None:
    # A total length below the 16-byte minimum, and headers longer than the frame, each
    # with a correct prelude CRC: malformed, never read past.
    for total, headers in ((15, 0), (40, 30), (0xFFFFFFFF, 0)):
        prelude = struct.pack(">II", total, headers)
        data = prelude + struct.pack(">I", zlib.crc32(prelude))
        decoder = EventStreamDecoder(max_event_bytes=1 << 30)
        decoder.feed(data)
        assert decoder.error in (R.MALFORMED_EVENT, R.EVENT_TOO_LARGE)


def test_a_cut_body_is_malformed_at_the_end_and_a_clean_one_is_not() -> None:
    frame = encode_frame([(":event-type", "a"), (":message-type", "event")], b"{}")
    for cut in range(1, len(frame)):
        decoder = EventStreamDecoder(max_event_bytes=1 << 20)
        assert decoder.feed(frame[:cut]) == []
        assert decoder.pending
        with pytest.raises(EventStreamDecodeError) as info:
            decoder.flush()
        assert info.value.reason is R.MALFORMED_EVENT
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert len(decoder.feed(frame)) == 1
    assert decoder.flush() == []
    assert decoder.flush() == []
    assert decoder.bytes_seen == len(frame)


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ([(":message-type", "event")], R.MALFORMED_EVENT),  # no :event-type
        ([(":event-type", "")], R.MALFORMED_EVENT),  # no :message-type
        ([(":event-type", ""), (":message-type", "event")], R.MALFORMED_EVENT),
        ([(":event-type", "a"), (":message-type", "other")], R.MALFORMED_EVENT),
        ([(":message-type", "error"), (":error-code", "x")], R.ERROR_EVENT),
        ([(":message-type", "exception")], R.ERROR_EVENT),
        (
            [(":event-type", "a"), (":message-type", "event"), (":content-type", "x")],
            R.MALFORMED_EVENT,
        ),
    ],
)
def test_the_typed_headers(headers: list[tuple[str, str]], reason: QuarantineReason) -> None:
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert decoder.feed(encode_frame(headers, b"{}")) == []
    assert decoder.error is reason


def _raw_frame(section: bytes, payload: bytes = b"{}") -> bytes:
    prelude = struct.pack(">II", 16 + len(section) + len(payload), len(section))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + section + payload
    return head + struct.pack(">I", zlib.crc32(head))


EVENT = b"\x0b:event-type\x07\x00\x01a\x0d:message-type\x07\x00\x05event"


@pytest.mark.parametrize(
    "extra",
    [
        b"\x00\x07\x00\x00",  # an empty name
        b"\x01x\x0a",  # value type 10
        b"\x01x\x04\x00\x00",  # an integer cut short
        b"\x01x\x07\x00\x09abc",  # a string that runs past the section
        b"\x01x\x07\x00\x02\xff\xfe",  # a string that is not UTF-8
        b"\x02\xff\xfe\x00",  # a name that is not UTF-8
        b"\x0b:event-type\x07\x00\x01b",  # a header given twice
        b"\x0b:event-type",  # a name with no type
        b"\x0d:content-type\x06\x00\x02ab",  # a typed header that is not a string
    ],
)
def test_a_malformed_header_is_refused(extra: bytes) -> None:
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    decoder.feed(_raw_frame(EVENT + extra))
    assert decoder.error is R.MALFORMED_EVENT
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert [m.event for m in decoder.feed(_raw_frame(EVENT))] == ["a"]


def test_every_header_value_type_is_read() -> None:
    values = [
        b"\x01t\x00",
        b"\x01f\x01",
        b"\x01b\x02\x07",
        b"\x01s\x03\x00\x07",
        b"\x01i\x04\x00\x00\x00\x07",
        b"\x01l\x05" + bytes(8),
        b"\x01a\x06\x00\x01\xff",
        b"\x01z\x07\x00\x01z",
        b"\x02ts\x08" + bytes(8),
        b"\x01u\x09" + bytes(16),
    ]
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    assert [m.event for m in decoder.feed(_raw_frame(EVENT + b"".join(values)))] == ["a"]
    for value in values:  # each cut by one byte is malformed
        decoder = EventStreamDecoder(max_event_bytes=1 << 20)
        decoder.feed(_raw_frame(EVENT + value[:-1]))
        assert decoder.error is R.MALFORMED_EVENT


def test_the_payload_must_be_utf8() -> None:
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    decoder.feed(_raw_frame(EVENT, b'{"x": "\xff"}'))
    assert decoder.error is R.INVALID_UTF8


def test_feeding_after_flush_is_a_programming_error() -> None:
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    decoder.flush()
    with pytest.raises(RuntimeError):
        decoder.feed(b"x")


def test_encode_writes_a_frame_the_decoder_reads_back() -> None:
    from litellm_toolgate.core.framing.sse import SSEMessage

    frame = bedrock.WIRE.encode(SSEMessage("contentBlockStop", "", None), {"contentBlockIndex": 0})
    assert _frames(frame) == [("contentBlockStop", '{"contentBlockIndex":0}')]


@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_calls", "every_header_type", "padded_events"]
)
def test_what_the_withholder_writes_again_botocore_reads_as_the_wire(name: str) -> None:
    """The callback passes each frame on written again by the wire (``WIRE.encode``: its
    three string headers, the payload as ASCII JSON, both CRCs computed): botocore's buffer,
    which litellm's decoder reads with, checks both CRCs and finds each event with the same
    name and the same JSON value as on the wire (argument fragments the same strings)."""
    from botocore.eventstream import EventStreamBuffer

    from litellm_toolgate.core.framing.sse import SSEMessage

    wire = _frames(body(name))
    written = b"".join(
        bedrock.WIRE.encode(SSEMessage(event, data, None), json.loads(data)) for event, data in wire
    )
    buffer = EventStreamBuffer()
    buffer.add_data(written)
    read = [
        (
            m.headers[":event-type"],
            m.headers[":message-type"],
            m.headers[":content-type"],
            m.payload,
        )
        for m in buffer
    ]
    assert [(e, json.loads(p)) for e, _, _, p in read] == [(e, json.loads(d)) for e, d in wire]
    assert {(t, c) for _, t, c, _ in read} == {("event", "application/json")}
    assert all(p.isascii() for _, _, _, p in read)


# ---- the carrier: litellm's chat chunks ------------------------------------------------------
def _carrier(*calls: tuple[str, str, str], finish: str = "tool_calls") -> Carrier:
    return Carrier(
        {i: CarrierCall(call_id, name, args) for i, (call_id, name, args) in enumerate(calls)},
        finish,
    )


def _concluded(name: str, carrier: Carrier) -> QuarantineReason | None:
    _, _, fault, _ = replay([body(name)], carrier=carrier)
    return None if fault is None else fault.reason


def test_the_carrier_must_equal_the_wire() -> None:
    case = CASES["two_calls"]
    calls = [(c["call_id"], c["name"], c["arguments"]) for c in case["calls"]]
    assert _concluded("two_calls", _carrier(*calls)) is None
    wrong_id = [("other", *calls[0][1:]), calls[1]]
    wrong_text = [calls[0], (*calls[1][:2], calls[1][2].replace(" ", ""))]
    for bad in (
        _carrier(*wrong_id),
        _carrier(*wrong_text),
        _carrier(calls[1], calls[0]),
        _carrier(calls[0]),
        _carrier(*calls, finish="stop"),
        Carrier({}, "tool_calls", foreign=True),
        Carrier(dict(enumerate(CarrierCall(*c) for c in calls)), "tool_calls", kind="anthropic"),
    ):
        assert _concluded("two_calls", bad) is R.CARRIER_MISMATCH
    # Text only: litellm says stop (end_turn) or length (max_tokens), never tool_calls.
    assert _concluded("text_only", _carrier(finish="stop")) is None
    assert _concluded("text_only", _carrier(finish="tool_calls")) is R.CARRIER_MISMATCH


def test_a_whole_body_carrier_matches_by_json_value() -> None:
    case = CASES["whole_two_calls"]
    calls = [(c["call_id"], c["name"], c["arguments"]) for c in case["calls"]]
    compact = [(i, n, json.dumps(json.loads(a), separators=(",", ":"))) for i, n, a in calls]
    _, _, fault, _ = replay(whole=body("whole_two_calls"), carrier=_carrier(*compact))
    assert fault is None
    other = [compact[0], (*compact[1][:2], '{"path": "x", "content": "y"}')]
    _, _, fault, _ = replay(whole=body("whole_two_calls"), carrier=_carrier(*other))
    assert fault is not None and fault.reason is R.CARRIER_MISMATCH


# ---- the carrier: litellm's Responses events, bridged from chat ------------------------------
def _items(*calls: tuple[str, str, str], status: str | None = "completed") -> Carrier:
    """Function-call items keyed by output index, after a text item at 0 (as the bridge
    numbers them)."""
    return Carrier(
        {i + 1: CarrierCall(*c, item_id=f"fc_{i}") for i, c in enumerate(calls)},
        status,
        kind="responses",
    )


def test_a_responses_carrier_matches_the_wire_in_order() -> None:
    calls = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["two_calls"]["calls"]]
    assert _concluded("two_calls", _items(*calls)) is None
    assert _concluded("text_only", _items()) is None
    json_alike = (*calls[1][:2], json.dumps(json.loads(calls[1][2])))  # ASCII escapes
    for bad in (
        _items(("other", *calls[0][1:]), calls[1]),  # another call id
        _items((calls[0][0], "other", calls[0][2]), calls[1]),  # another name
        _items(calls[1], calls[0]),  # out of order
        _items(calls[0]),  # a call missing
        _items(*calls, calls[0]),  # a call too many
        _items(calls[0], json_alike),  # a streamed text other than the wire's
        _items(*calls, status="incomplete"),  # a finish the wire does not have
        _items(*calls, status=None),  # no final event
        Carrier(_items(*calls).calls, "completed", foreign=True, kind="responses"),
    ):
        assert _concluded("two_calls", bad) is R.CARRIER_MISMATCH
    assert _concluded("text_only", _items(status="incomplete")) is R.CARRIER_MISMATCH


def test_a_responses_carrier_over_text_cut_short_is_an_incomplete_response() -> None:
    assert CASES["text_cut_by_max_tokens"]["expect"] == "release"  # chat lets it through
    for status in ("completed", "incomplete", None):
        fault = _concluded("text_cut_by_max_tokens", _items(status=status))
        assert fault is R.RESPONSE_INCOMPLETE


def test_a_whole_body_responses_carrier_matches_by_json_value() -> None:
    calls = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["whole_two_calls"]["calls"]]
    escaped = [(i, n, json.dumps(json.loads(a))) for i, n, a in calls]
    assert escaped != calls  # litellm's bytes differ from the wire's, not the value
    released, _, fault, _ = replay(whole=body("whole_two_calls"), carrier=_items(*escaped))
    assert fault is None and [c["call_id"] for c in released] == [c[0] for c in calls]
    other = _items(escaped[0], (*escaped[1][:2], '{"path": "x", "content": "y"}'))
    _, _, fault, _ = replay(whole=body("whole_two_calls"), carrier=other)
    assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_a_call_without_fragments_has_the_empty_object_and_litellm_shows_it() -> None:
    frames = [
        ("messageStart", {"role": "assistant"}),
        (
            "contentBlockStart",
            {"contentBlockIndex": 0, "start": {"toolUse": {"toolUseId": "t1", "name": "ping"}}},
        ),
        ("contentBlockStop", {"contentBlockIndex": 0}),
        ("messageStop", {"stopReason": "tool_use"}),
        ("metadata", {"usage": {}}),
    ]
    data = b"".join(
        encode_frame(
            [
                (":event-type", kind),
                (":content-type", "application/json"),
                (":message-type", "event"),
            ],
            json.dumps(obj).encode(),
        )
        for kind, obj in frames
    )
    from litellm_toolgate.core import PolicyDecision, ToolRegistry

    registry = ToolRegistry.from_tools(
        [{"type": "function", "function": {"name": "ping", "parameters": {"type": "object"}}}]
    )
    for shown in ("{}", "{ }"):
        attempt = Attempt(registry)
        attempt.bind_response(content_type=MEDIA, streamed=True, path=PATH)
        attempt.receive_bytes(data)
        attempt.receive_eof()
        for call in attempt.conclude(_carrier(("t1", "ping", shown))):
            attempt.decide(call.index, PolicyDecision.approve())
        assert [(c.call_id, c.arguments) for c in attempt.release()] == [("t1", "{}")]
