"""Cohere's v2 chat wire (``/v2/chat``) through the sans-I/O core: every fixture whole, at
every byte split, one byte at a time and at random splits; whole (``stream: false``) bodies;
the terminal, identity and carrier rules; the withholding client. No litellm."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from conftest import CANARY, split
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
from litellm_toolgate.core.wires import cohere

R = QuarantineReason
PATH = "/v2/chat"
SSE = "text/event-stream"
COHERE = CoreWire("cohere", wire=Wire.COHERE, path=PATH, content_type=SSE, attempt_id="att-c")
FIXTURES, MANIFEST, CASES, REGISTRY = COHERE.folder, COHERE.manifest, COHERE.cases, COHERE.registry
STREAMED, WHOLE = COHERE.streamed, COHERE.whole
body, replay, check = COHERE.body, COHERE.replay, COHERE.check


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_whole_at_every_split_and_at_random(name: str) -> None:
    data = body(name)
    check(name, [data])
    for cut in range(1, len(data), 3):
        check(name, [data[:cut], data[cut:]])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize("name", ["multiply_basic", "two_calls", "invalid_utf8"])
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
        "incomplete_item",
        "malformed_event",
        "event_after_terminal",
        "spliced_response",
        "identity_conflict",
        "missing_call_identity",
        "invalid_call_index",
        "unsupported_tool_type",
        "invalid_json",
        "trailing_data",
        "not_an_object",
        "duplicate_key",
        "schema_invalid",
        "unknown_tool",
        "invalid_utf8",
    } <= reasons
    released = [c for c in CASES.values() if c["expect"] == "release"]
    assert any(len(c["calls"]) == 2 for c in released if c["streamed"])
    assert any(len(c["calls"]) == 2 for c in released if not c["streamed"])


def test_the_generator_reproduces_every_file(tmp_path: Path) -> None:
    COHERE.check_generator(tmp_path)


def test_the_path_picks_the_cohere_wire() -> None:
    assert wire_of("/v2/chat") is Wire.COHERE
    assert wire_of("/v2/chat/") is Wire.COHERE
    assert wire_of("/v1/chat") is None  # Cohere's v1 chat: another wire
    assert wire_of("/v2/chat/completions") is Wire.CHAT


def test_calls_are_released_only_under_tool_call() -> None:
    spec = cohere.WIRE
    for reason in ("COMPLETE", "STOP_SEQUENCE", "MAX_TOKENS", "ERROR", "TIMEOUT", None):
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
        assert spec.terminal_fault(reason, False, lambda: True) is None
    assert spec.terminal_fault("TOOL_CALL", True, lambda: False) is None
    assert spec.terminal_fault("TOOL_CALL", False, lambda: True) is R.FINISH_REASON_MISMATCH


def test_a_quarantine_names_no_argument_text() -> None:
    for name in ("arguments_schema_invalid", "unknown_tool", "whole_schema_invalid"):
        streamed = CASES[name]["streamed"]
        fault = (replay([body(name)]) if streamed else replay(whole=body(name)))[2]
        assert fault is not None
        for rendered in (str(fault), repr(fault), repr(fault.args), repr(fault.__cause__)):
            assert CANARY not in rendered
            assert "seven" not in rendered


# ---- the carrier: litellm's chat chunks, matched by position, id, name and exact text ------
def _carrier(*calls: tuple[str, str, str], finish: str = "tool_calls") -> Carrier:
    return Carrier(
        {i: CarrierCall(call_id, name, args) for i, (call_id, name, args) in enumerate(calls)},
        finish,
    )


def _wire_calls(name: str) -> list[tuple[str, str, str]]:
    return [(c["call_id"], c["name"], c["arguments"]) for c in CASES[name]["calls"]]


@pytest.mark.parametrize("finish", ["tool_calls", "stop"])
def test_the_chat_carrier_is_matched_by_position_id_name_and_text(finish: str) -> None:
    """litellm 1.110.2 says ``tool_calls`` for TOOL_CALL; 1.108.7 sets no finish on a whole
    Cohere result (``stop``). Either way the calls must be the wire's, exactly."""
    mine = _wire_calls("whole_two_calls")
    data = body("whole_two_calls")
    released, _, fault, _ = replay(whole=data, carrier=_carrier(*mine, finish=finish))
    assert fault is None and len(released) == 2
    (id0, n0, a0) = mine[0]
    for carrier in (
        _carrier(mine[1], mine[0]),
        _carrier((id0, n0, a0.replace(" ", "")), mine[1]),  # the same JSON, other text
        _carrier(("other-id", n0, a0), mine[1]),
        _carrier((id0, "write_file", a0), mine[1]),
        _carrier(mine[0]),
        _carrier(*mine, finish="length"),
        Carrier(_carrier(*mine).calls, "tool_calls", foreign=True),
    ):
        _, _, fault, _ = replay(whole=data, carrier=carrier)
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def _items(*calls: tuple[str, str, str], status: str = "completed") -> Carrier:
    """litellm's Responses result, bridged from a chat call: its function-call items."""
    return Carrier(_carrier(*calls).calls, status, kind="responses")


def test_a_bridged_responses_carrier_is_matched_by_order_call_id_name_and_text() -> None:
    """litellm bridges the Responses API to a Cohere chat call and keeps each call's id as
    its item's call_id: the items must be the wire's calls, in order, exactly, and the
    result ``completed``."""
    mine = _wire_calls("whole_two_calls")
    data = body("whole_two_calls")
    released, _, fault, _ = replay(whole=data, carrier=_items(*mine))
    assert fault is None and len(released) == 2
    (id0, n0, a0) = mine[0]
    for carrier in (
        _items(mine[1], mine[0]),
        _items((id0, n0, a0.replace(" ", "")), mine[1]),  # the same JSON, other text
        _items(("other-id", n0, a0), mine[1]),
        _items((id0, "write_file", a0), mine[1]),
        _items(mine[0]),
        _items(*mine, status="incomplete"),
        Carrier(_items(*mine).calls, "completed", foreign=True, kind="responses"),
    ):
        _, _, fault, _ = replay(whole=data, carrier=carrier)
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_a_text_only_carrier_may_say_litellm_s_mapping_or_stop() -> None:
    data = body("text_cut_by_max_tokens")
    for finish in ("length", "stop"):
        assert replay([data], carrier=_carrier(finish=finish))[2] is None
    fault = replay([data], carrier=_carrier(finish="content_filter"))[2]
    assert fault is not None and fault.reason is R.CARRIER_MISMATCH


# ---- the withholding client ---------------------------------------------------------------
def _withhold(
    data: bytes, approve: bool = True, parse: Parse | None = None
) -> tuple[list[bytes], list[bytes], Attempt]:
    attempt = Attempt(REGISTRY, attempt_id="att-w", clock=lambda: 0.0)
    attempt.bind_response(content_type=SSE, streamed=True, path=PATH)
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


def _values(messages: list[bytes]) -> list[dict[str, object]]:
    out = []
    for message in messages:
        for line in message.decode().splitlines():
            if line.startswith("data: "):
                out.append(json.loads(line[6:]))
    return out


def test_text_passes_live_and_calls_wait_for_the_decision() -> None:
    mine = _wire_calls("multiply_basic")
    live, held, attempt = _withhold(body("multiply_basic"), parse=lambda v, s: _carrier(*mine))
    assert attempt.state is StreamState.RELEASED
    assert [v["type"] for v in _values(live)] == [
        "message-start",
        "tool-plan-delta",
        "tool-plan-delta",
    ]
    types = [v["type"] for v in _values(held)]
    assert types[0] == "tool-call-start" and types[-1] == "message-end"
    # Re-encoded with the event name kept, as the wire names each event.
    assert all(m.startswith(b"event: ") and m.isascii() for m in held)
    # A parse of the held body that is not the wire's releases nothing.
    other = [(mine[0][0], mine[0][1], '{"a": 7, "b": 9}')]
    live, held, attempt = _withhold(body("multiply_basic"), parse=lambda v, s: _carrier(*other))
    assert held == [] and attempt.quarantined is not None
    assert attempt.quarantined.reason is R.CARRIER_MISMATCH


@pytest.mark.parametrize("name", [n for n in STREAMED if CASES[n]["expect"] == "quarantine"])
def test_a_refused_stream_hands_over_no_call(name: str) -> None:
    live, held, attempt = _withhold(body(name))
    assert attempt.quarantined is not None
    assert held == []
    for value in _values(live):
        assert cohere.passes_live(value)
        assert not str(value["type"]).startswith("tool-call")


def test_the_live_rule_holds_calls_the_end_and_unknown_events() -> None:
    passes = cohere.passes_live
    empty = {"message": {"role": "assistant", "content": [], "tool_calls": []}}
    assert passes({"type": "message-start", "delta": empty})
    assert not passes(
        {"type": "message-start", "delta": {"message": {"tool_calls": [{"id": "x"}]}}}
    )
    text = {"message": {"content": {"type": "text", "text": ""}}}
    assert passes({"type": "content-start", "index": 0, "delta": text})
    other = {"message": {"content": {"type": "tool", "text": ""}}}
    assert not passes({"type": "content-start", "index": 0, "delta": other})
    assert passes({"type": "tool-plan-delta", "delta": {"message": {"tool_plan": "x"}}})
    for kind in ("tool-call-start", "tool-call-delta", "tool-call-end", "message-end", "x"):
        assert not passes({"type": kind, "index": 0})
