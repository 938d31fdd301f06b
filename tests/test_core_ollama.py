"""The Ollama ``/api/chat`` wire through the sans-I/O core: every fixture whole, at every
byte split, one byte at a time and at random splits; whole (``stream: false``) bodies; the
terminal, identity and carrier rules; the NDJSON framing; the withholding client. No
litellm."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from conftest import split
from wirecases import CoreWire

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    CarrierCall,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
)
from litellm_toolgate.core.decision.state import StreamState, Wire, wire_of
from litellm_toolgate.core.decision.withhold import Parse, Withholder
from litellm_toolgate.core.errors import Fault
from litellm_toolgate.core.framing.ndjson import NDJSONDecoder
from litellm_toolgate.core.wires import ollama

R = QuarantineReason
PATH = "/api/chat"
NDJSON = "application/x-ndjson"
OLLAMA = CoreWire("ollama", wire=Wire.OLLAMA, path=PATH, content_type=NDJSON, attempt_id="att-o")
FIXTURES, MANIFEST, CASES, REGISTRY = OLLAMA.folder, OLLAMA.manifest, OLLAMA.cases, OLLAMA.registry
STREAMED, WHOLE = OLLAMA.streamed, OLLAMA.whole
body, replay, check = OLLAMA.body, OLLAMA.replay, OLLAMA.check


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_whole_at_every_split_and_at_random(name: str) -> None:
    data = body(name)
    check(name, [data])
    for cut in range(1, len(data)):
        check(name, [data[:cut], data[cut:]])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_calls_one_line", "crlf_lines", "invalid_utf8"]
)
def test_fixtures_one_byte_at_a_time(name: str) -> None:
    check(name, split(body(name), "bytewise"))


@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_body(name: str) -> None:
    check(name)


def test_the_manifest_covers_the_wire_rules() -> None:
    reasons = {c["reason"] for c in CASES.values() if c["expect"] == "quarantine"}
    assert {
        "finish_reason_mismatch",
        "missing_finish",
        "malformed_event",
        "event_after_terminal",
        "error_event",
        "identity_conflict",
        "missing_call_identity",
        "invalid_call_index",
        "duplicate_key",
        "schema_invalid",
        "unknown_tool",
        "invalid_utf8",
    } <= reasons
    released = [c for c in CASES.values() if c["expect"] == "release"]
    assert any(c["calls"] and c["calls"][0]["call_id"].startswith("ollama-call-") for c in released)
    assert any(c["calls"] and c["calls"][0]["call_id"].startswith("call_") for c in released)


def test_the_generator_reproduces_every_file(tmp_path: Path) -> None:
    OLLAMA.check_generator(tmp_path)


def test_the_path_picks_the_ollama_wire() -> None:
    assert wire_of("/api/chat") is Wire.OLLAMA
    assert wire_of("/api/chat/") is Wire.OLLAMA
    assert wire_of("/api/generate") is None


def test_an_sse_body_on_the_ollama_path_is_refused() -> None:
    attempt = Attempt(REGISTRY)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.bind_response(content_type="text/event-stream", streamed=True, path=PATH)
    assert info.value.reason is R.UNSUPPORTED_WIRE


def test_calls_are_released_only_under_stop() -> None:
    spec = ollama.WIRE
    for reason in ("length", "load", "unload", "tool_calls", None):
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
        assert spec.terminal_fault(reason, False, lambda: True) is None
    assert spec.terminal_fault("stop", True, lambda: False) is None


# ---- the carrier: litellm's chat chunks, matched by position, name and arguments -----------
def _carrier(*calls: tuple[str, str], finish: str = "tool_calls") -> Carrier:
    return Carrier(
        {i: CarrierCall(f"litellm-{i}", name, args) for i, (name, args) in enumerate(calls)},
        finish,
    )


def test_the_chat_carrier_is_matched_by_position_name_and_arguments_never_by_id() -> None:
    data = body("two_calls_one_line")
    write = json.loads(CASES["two_calls_one_line"]["calls"][1]["arguments"])
    ok = _carrier(("multiply", '{"a":7,"b":8}'), ("write_file", json.dumps(write)))
    released, _, fault, _ = replay([data], carrier=ok)
    assert fault is None and len(released) == 2
    swapped = _carrier(("write_file", json.dumps(write)), ("multiply", '{"a":7,"b":8}'))
    for carrier in (
        swapped,
        _carrier(("multiply", '{"a":7,"b":9}'), ("write_file", json.dumps(write))),
        _carrier(("multiply", '{"a":7,"b":8}')),
        _carrier(("multiply", '{"a":7,"b":8}'), ("write_file", json.dumps(write)), finish="stop"),
        Carrier(ok.calls, "tool_calls", foreign=True),
        Carrier(ok.calls, "completed", kind="responses"),  # a chat rule's carrier: chat only
    ):
        if carrier.kind == "responses":
            continue  # litellm's Responses bridge over this wire: the next test
        _, _, fault, _ = replay([data], carrier=carrier)
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_the_responses_bridge_is_matched_by_position_name_and_argument_value() -> None:
    """litellm's Responses events over this wire (its bridge to chat, ids of its own): the
    items in output order by name and JSON value, ending ``completed``; never by id."""
    data = body("two_calls_one_line")
    write = json.loads(CASES["two_calls_one_line"]["calls"][1]["arguments"])
    ok = _carrier(("multiply", '{"a": 7, "b": 8}'), ("write_file", json.dumps(write)))
    items = Carrier(ok.calls, "completed", kind="responses")
    released, _, fault, _ = replay([data], carrier=items)
    assert fault is None and len(released) == 2
    swapped = _carrier(("write_file", json.dumps(write)), ("multiply", '{"a":7,"b":8}'))
    wrong = _carrier(("multiply", '{"a":7,"b":9}'), ("write_file", json.dumps(write)))
    for carrier in (
        Carrier(swapped.calls, "completed", kind="responses"),
        Carrier(wrong.calls, "completed", kind="responses"),
        Carrier({0: ok.calls[0]}, "completed", kind="responses"),
        Carrier(ok.calls, "incomplete", kind="responses"),
        Carrier(ok.calls, "completed", foreign=True, kind="responses"),
    ):
        _, _, fault, _ = replay([data], carrier=carrier)
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH
    # Text the wire cut short is an incomplete response, whatever the bridge says.
    fault = replay(
        [body("text_cut_by_length")], carrier=Carrier({}, "completed", kind="responses")
    )[2]
    assert fault is not None and fault.reason is R.RESPONSE_INCOMPLETE


def test_a_text_only_carrier_must_say_the_wire_s_done_reason() -> None:
    data = body("text_cut_by_length")
    assert replay([data], carrier=_carrier(finish="length"))[2] is None
    fault = replay([data], carrier=_carrier(finish="stop"))[2]
    assert fault is not None and fault.reason is R.CARRIER_MISMATCH


# ---- the NDJSON framing -------------------------------------------------------------------
def test_the_decoder_cuts_lines_at_any_split() -> None:
    data = b'{"a":1}\n\n{"b":"\xc3\xbc"}\r\n{"c":3}\n'
    for cut in range(len(data) + 1):
        decoder = NDJSONDecoder(max_event_bytes=64)
        lines = decoder.feed(data[:cut]) + decoder.feed(data[cut:])
        decoder.flush()
        assert [m.data for m in lines] == ['{"a":1}', '{"b":"ü"}', '{"c":3}']
        assert {m.event for m in lines} == {""}
    assert decoder.bytes_seen == len(data)


def test_the_decoder_refuses_a_long_line_a_bad_byte_and_a_cut_line() -> None:
    decoder = NDJSONDecoder(max_event_bytes=8)
    assert [m.data for m in decoder.feed(b'{"a":1}\n{"bb":222')] == ['{"a":1}']
    assert decoder.error is R.EVENT_TOO_LARGE
    with pytest.raises(Fault):
        decoder.feed(b"\n")
    decoder = NDJSONDecoder(max_event_bytes=8)
    decoder.feed(b"{}\n\xff\n")
    assert decoder.error is R.INVALID_UTF8
    decoder = NDJSONDecoder(max_event_bytes=8)
    decoder.feed(b'{"a":1}\r')  # a CR held at the limit is not counted as the line's
    assert decoder.error is None
    assert decoder.pending
    with pytest.raises(Fault) as info:
        decoder.flush()
    assert info.value.reason is R.MALFORMED_EVENT


# ---- the withholding client ---------------------------------------------------------------
def _withhold(
    data: bytes, approve: bool = True, parse: Parse | None = None
) -> tuple[list[bytes], list[bytes], Attempt]:
    attempt = Attempt(REGISTRY, attempt_id="att-w", clock=lambda: 0.0)
    attempt.bind_response(content_type=NDJSON, streamed=True, path=PATH)
    holder = Withholder(attempt, streamed=True, parse=parse)
    live: list[bytes] = []
    for cut in range(0, len(data), 7):
        piece = data[cut : cut + 7]
        if attempt.take_bytes(piece) is not None:
            break
        live.extend(holder.feed(piece))
    if attempt.quarantined is None:
        with contextlib.suppress(ToolCallQuarantined):
            attempt.receive_eof()
    holder.begin_decision()
    calls = holder.conclude()
    if calls is not None:
        for call in calls:
            attempt.decide(call.index, PolicyDecision.approve())
    return live, holder.release(calls is not None and approve), attempt


def test_text_lines_pass_live_and_calls_wait_for_the_decision() -> None:
    live, held, attempt = _withhold(body("multiply_basic"))
    assert attempt.state is StreamState.RELEASED
    assert [json.loads(line)["message"]["content"] for line in live] == ["Let me ", "multiply."]
    out = [json.loads(line) for line in held]
    assert out[0]["message"]["tool_calls"][0]["function"]["name"] == "multiply"
    assert out[-1]["done"] is True
    # Re-encoded as the server writes them: one ASCII line each, newline-ended.
    assert all(line.endswith(b"\n") and line.count(b"\n") == 1 and line.isascii() for line in held)


@pytest.mark.parametrize("name", [n for n in STREAMED if CASES[n]["expect"] == "quarantine"])
def test_a_refused_stream_hands_over_no_call(name: str) -> None:
    live, held, attempt = _withhold(body(name))
    assert attempt.quarantined is not None
    assert held == []
    for line in live:
        assert ollama.passes_live(json.loads(line))
        assert b"tool_calls" not in line


def test_the_client_s_parse_of_the_held_body_is_cross_checked_before_release() -> None:
    """The wire says litellm may re-shape its calls: the parse the owner passes is run over
    the held lines' values (every line, in order) at the decision, and a parse that does not
    match the wire releases nothing."""
    assert ollama.WIRE.reparsed
    seen: list[tuple[int, bool]] = []

    def parse_as(carrier: Carrier) -> Parse:
        def parse(values: list[object], streamed: bool) -> Carrier:
            seen.append((len(values), streamed))
            return carrier

        return parse

    data = body("two_calls_two_lines_without_ids")
    both = _carrier(("multiply", '{"a": 7, "b": 8}'), ("multiply", '{"a": 2, "b": 3}'))
    _, held, attempt = _withhold(data, parse=parse_as(both))
    assert attempt.state is StreamState.RELEASED and len(held) == 3
    assert seen == [(3, True)]
    merged = _carrier(("multiply", '{"a": 7, "b": 8}{"a": 2, "b": 3}'))
    for carrier in (merged, Carrier({}, None, foreign=True)):
        _, held, attempt = _withhold(data, parse=parse_as(carrier))
        assert held == [] and attempt.quarantined is not None
        assert attempt.quarantined.reason is R.CARRIER_MISMATCH
    # Without a parse (the owner simulates nothing), the wire alone decides.
    assert _withhold(data)[2].state is StreamState.RELEASED


def test_the_live_rule_holds_calls_the_end_errors_and_unknown_fields() -> None:
    passes = ollama.passes_live
    assert passes({"message": {"role": "assistant", "content": "x"}, "done": False})
    assert passes(
        {"message": {"role": "assistant", "thinking": "x", "images": None}, "done": False}
    )
    assert not passes({"message": {"content": "x", "tool_calls": []}, "done": False})
    assert not passes({"message": {"content": "x", "other": 1}, "done": False})
    assert not passes({"message": {"content": "x"}, "done": True, "done_reason": "stop"})
    assert not passes({"message": {"content": "x"}})
    assert not passes({"error": "x", "done": False, "message": {}})
    assert not passes({"done": False})
