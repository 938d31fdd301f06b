"""watsonx.ai's chat wire (``/ml/v1/text/chat_stream``, ``/ml/v1/text/chat``) through the
sans-I/O core: every fixture whole, at every byte split, one byte at a time and at random
splits; whole (``stream: false``) bodies; the terminal (no ``[DONE]``: the finish, then the
body's clean end), the deltas litellm reads otherwise than the wire, the carrier rule. No
litellm."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CANARY, split
from wirecases import CoreWire

from litellm_toolgate.core import Carrier, CarrierCall, QuarantineReason
from litellm_toolgate.core.decision.state import Wire, wire_of
from litellm_toolgate.core.wires import watsonx

R = QuarantineReason
PATH = "/ml/v1/text/chat_stream"
WATSONX = CoreWire(
    "watsonx",
    wire=Wire.WATSONX,
    path=PATH,
    content_type="text/event-stream",
    attempt_id="att-w",
    whole_path="/ml/v1/text/chat",
)
CASES = WATSONX.cases
STREAMED, WHOLE = WATSONX.streamed, WATSONX.whole
body, replay, check = WATSONX.body, WATSONX.replay, WATSONX.check


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_whole_at_every_split_and_at_random(name: str) -> None:
    data = body(name)
    check(name, [data])
    for cut in range(1, len(data), 7):
        check(name, [data[:cut], data[cut:]])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize("name", ["multiply_basic", "two_calls", "cut_before_the_blank_line"])
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
        "unsupported_tool_type",
        "carrier_mismatch",
        "unexpected_choice",
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
    WATSONX.check_generator(tmp_path)


def test_the_path_picks_the_watsonx_wire() -> None:
    assert wire_of("/ml/v1/text/chat_stream") is Wire.WATSONX
    assert wire_of("/ml/v1/text/chat") is Wire.WATSONX
    assert wire_of("/ml/v1/deployments/my-dep/text/chat_stream") is Wire.WATSONX
    assert wire_of("/ml/v1/text/generation_stream") is None  # watsonx_text/: another wire
    assert wire_of("/v1/chat/completions") is Wire.CHAT


def test_calls_are_released_only_under_tool_calls() -> None:
    spec = watsonx.WIRE
    for reason in ("stop", "length", "content_filter", None):
        # stop with calls is never taken, whatever the route's profile would say
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
        assert spec.terminal_fault(reason, False, lambda: True) is None
    assert spec.terminal_fault("tool_calls", True, lambda: False) is None
    assert spec.terminal_fault("tool_calls", False, lambda: True) is R.FINISH_REASON_MISMATCH


def test_several_choices_are_refused_before_sending() -> None:
    spec = watsonx.WIRE
    assert spec.request_fault({}) is None
    assert spec.request_fault({"n": 1}) is None
    for n in (2, 0, "2", True):
        assert spec.request_fault({"n": n}) is R.UNSUPPORTED_REQUEST


def test_the_body_may_end_after_the_finish_but_not_inside_a_message() -> None:
    data = body("multiply_basic")
    assert replay([data])[2] is None
    # Cut at every message boundary after the finish: a clean end. Anywhere inside the
    # last message: refused.
    last = data.rstrip(b"\n").rfind(b"\n\n") + 2
    for cut in range(last + 1, len(data)):
        fault = replay([data[:cut]])[2]
        assert fault is not None and fault.reason is R.MALFORMED_EVENT, cut
    assert replay([data[:last]])[2] is None


def test_a_quarantine_names_no_argument_text() -> None:
    for name in ("arguments_schema_invalid", "unknown_tool", "whole_schema_invalid"):
        streamed = CASES[name]["streamed"]
        fault = (replay([body(name)]) if streamed else replay(whole=body(name)))[2]
        assert fault is not None
        for rendered in (str(fault), repr(fault), repr(fault.args), repr(fault.__cause__)):
            assert CANARY not in rendered
            assert "seven" not in rendered


def _carrier(*calls: tuple[str, str, str], finish: str = "tool_calls") -> Carrier:
    return Carrier(
        {i: CarrierCall(call_id, name, args) for i, (call_id, name, args) in enumerate(calls)},
        finish,
    )


def test_litellm_s_chunks_must_be_the_wire_s_calls() -> None:
    mine = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["two_calls"]["calls"]]
    data = body("two_calls")
    released, _, fault, _ = replay([data], carrier=_carrier(*mine))
    assert fault is None and len(released) == 2
    (id0, n0, a0) = mine[0]
    for carrier in (
        _carrier(mine[1], mine[0]),
        _carrier((id0, n0, a0.replace(" ", "")), mine[1]),
        _carrier(("other-id", n0, a0), mine[1]),
        _carrier((id0, "write_file", a0), mine[1]),
        _carrier(mine[0]),
        _carrier(*mine, finish="stop"),
        Carrier(_carrier(*mine).calls, "tool_calls", foreign=True),
    ):
        fault = replay([data], carrier=carrier)[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_the_table_differs_from_chat_s_only_at_the_end_after_the_finish() -> None:
    from litellm_toolgate.core.decision.state import (
        STREAM_TABLES,
        StreamInput,
        StreamState,
        next_stream_state,
    )

    S, I = StreamState, StreamInput  # noqa: E741
    assert next_stream_state(S.FINISHED, I.EOF, Wire.WATSONX) is S.CLOSED
    assert next_stream_state(S.FINISHED, I.EOF, Wire.CHAT) is R.MISSING_DONE
    chat, mine = STREAM_TABLES[Wire.CHAT], STREAM_TABLES[Wire.WATSONX]
    assert {k for k in chat if chat[k] != mine.get(k)} == {(S.FINISHED, I.EOF)}
    assert set(chat) == set(mine)
