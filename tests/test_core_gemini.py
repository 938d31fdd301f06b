"""The Gemini ``generateContent`` wire through the sans-I/O core: every fixture whole, at every
byte split, one byte at a time and at random splits; whole (``:generateContent``) bodies; the
terminal, identity and carrier rules; the withholding client. No litellm."""

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
    ToolRegistry,
)
from litellm_toolgate.core.decision.state import StreamState, Wire, wire_of
from litellm_toolgate.core.decision.withhold import Withholder
from litellm_toolgate.core.wires import gemini

R = QuarantineReason
PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
SSE = "text/event-stream"
GEMINI = CoreWire(
    "gemini",
    wire=Wire.GEMINI,
    path=PATH,
    whole_path=PATH.replace(":streamGenerateContent", ":generateContent"),
    content_type=SSE,
    attempt_id="att-g",
)
FIXTURES, MANIFEST, CASES, REGISTRY = GEMINI.folder, GEMINI.manifest, GEMINI.cases, GEMINI.registry
STREAMED, WHOLE = GEMINI.streamed, GEMINI.whole
body, replay, check = GEMINI.body, GEMINI.replay, GEMINI.check


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_whole_at_every_split_and_at_random(name: str) -> None:
    data = body(name)
    check(name, [data])
    for cut in range(1, len(data)):
        check(name, [data[:cut], data[cut:]])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_calls_one_message", "lf_separators", "invalid_utf8"]
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
        "refusal",
        "unexpected_choice",
        "unsupported_tool_type",
        "identity_conflict",
        "missing_call_identity",
        "duplicate_key",
        "schema_invalid",
        "unknown_tool",
        "invalid_utf8",
    } <= reasons
    released = [c for c in CASES.values() if c["expect"] == "release"]
    assert any(c["calls"] and c["calls"][0]["call_id"].startswith("gemini-call-") for c in released)
    assert any(
        c["calls"] and not c["calls"][0]["call_id"].startswith("gemini-call-") for c in released
    )


def test_the_generator_reproduces_every_file(tmp_path: Path) -> None:
    GEMINI.check_generator(tmp_path)


def test_the_path_picks_the_gemini_wire() -> None:
    assert wire_of("/v1beta/models/gemini-2.5-flash:streamGenerateContent") is Wire.GEMINI
    assert wire_of("/models/gemini-2.5-flash:generateContent") is Wire.GEMINI
    assert wire_of("/v1beta/models/gemini-2.5-flash:countTokens") is None
    assert wire_of("/v1beta/models/gemini-2.5-flash:streamgeneratecontent") is None


def test_an_ndjson_body_on_the_gemini_path_is_refused() -> None:
    attempt = Attempt(REGISTRY)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.bind_response(content_type="application/x-ndjson", streamed=True, path=PATH)
    assert info.value.reason is R.UNSUPPORTED_WIRE


def test_calls_are_released_only_under_stop() -> None:
    spec = gemini.WIRE
    for reason in ("MAX_TOKENS", "SAFETY", "RECITATION", "OTHER", "LANGUAGE", "SPII"):
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
        assert spec.terminal_fault(reason, False, lambda: True) is None
    for reason in ("stop", None):
        assert spec.terminal_fault(reason, True, lambda: True) is R.FINISH_REASON_MISMATCH
        assert spec.terminal_fault(reason, False, lambda: True) is R.FINISH_REASON_MISMATCH
    assert spec.terminal_fault("STOP", True, lambda: False) is None
    assert spec.terminal_fault("STOP", False, lambda: False) is None
    for failed in (
        "MALFORMED_FUNCTION_CALL",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "FINISH_REASON_UNSPECIFIED",
        "MALFORMED_RESPONSE",
        "MISSING_THOUGHT_SIGNATURE",
        "A_REASON_FROM_THE_FUTURE",
    ):
        assert spec.terminal_fault(failed, False, lambda: True) is R.FINISH_REASON_MISMATCH


def test_a_continuation_finish_releases_nothing() -> None:
    """``CONTINUATION``: a finish of Vertex's (in litellm's ``FinishReason`` type and mapped to
    ``length`` by litellm's ``map_finish_reason`` on 1.110.2 and 1.108.7) that ends one hop of
    a longer answer, with a ``continuationToken`` litellm may send back for the next hop (its
    "long decode", when the request sets an output limit). It is no finish the wire releases
    anything under: not ``STOP`` (no call is finished), and not one of the text finishes
    either (the answer is not over; the next hop would be a second response, which the gate
    never splices onto an attempt). Refused with or without a call, in the spec and over a
    replayed body, with no call handed over."""
    spec = gemini.WIRE
    assert "CONTINUATION" not in gemini.CARRIER_FINISH
    assert spec.terminal_fault("CONTINUATION", True, lambda: True) is R.FINISH_REASON_MISMATCH
    assert spec.terminal_fault("CONTINUATION", False, lambda: True) is R.FINISH_REASON_MISMATCH
    call = {"functionCall": {"name": "multiply", "args": {"a": 7, "b": 8}}}
    for parts in ([call], [{"text": "7 times 8 is"}]):
        message = _cand(*parts, finishReason="CONTINUATION")
        message["candidates"][0]["continuationToken"] = "hop-1"  # type: ignore[index]
        data = b"data: " + json.dumps(message).encode() + b"\r\n\r\n"
        released, _, fault, _ = replay([data])
        assert released == []
        assert fault is not None and fault.reason is R.FINISH_REASON_MISMATCH


# ---- the carrier: litellm's chat chunks, matched by position, name and arguments -----------
def _carrier(*calls: tuple[str, str], finish: str = "tool_calls") -> Carrier:
    return Carrier(
        {i: CarrierCall(f"litellm-{i}", name, args) for i, (name, args) in enumerate(calls)},
        finish,
    )


def test_the_chat_carrier_is_matched_by_position_name_and_arguments_never_by_id() -> None:
    data = body("two_calls_one_message")
    write = json.loads(CASES["two_calls_one_message"]["calls"][1]["arguments"])
    ok = _carrier(("multiply", '{"a":7,"b":8}'), ("write_file", json.dumps(write)))
    released, _, fault, _ = replay([data], carrier=ok)
    assert fault is None and len(released) == 2
    assert [c["call_id"] for c in released] == ["gemini-call-0", "gemini-call-1"]
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
    data = body("two_calls_one_message")
    write = json.loads(CASES["two_calls_one_message"]["calls"][1]["arguments"])
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
        [body("text_cut_by_max_tokens")], carrier=Carrier({}, "completed", kind="responses")
    )[2]
    assert fault is not None and fault.reason is R.RESPONSE_INCOMPLETE


def test_a_bridge_handed_the_wire_s_identities_must_show_them() -> None:
    """Where the withholding client wrote the gate's identity of each call into the body the
    client parsed (``Carrier.wire_ids``), the items must carry it too: litellm's own ids, or
    the identities swapped, are a mismatch, whatever names and values say."""
    data = body("two_calls_one_message")
    write = json.loads(CASES["two_calls_one_message"]["calls"][1]["arguments"])
    args = ('{"a": 7, "b": 8}', json.dumps(write))
    names = ("multiply", "write_file")

    def items(*ids: str) -> Carrier:
        shown = enumerate(zip(ids, names, args, strict=True))
        calls = {i: CarrierCall(c, n, a) for i, (c, n, a) in shown}
        return Carrier(calls, "completed", kind="responses", wire_ids=True)

    released, _, fault, _ = replay([data], carrier=items("gemini-call-0", "gemini-call-1"))
    assert fault is None
    assert [c["call_id"] for c in released] == ["gemini-call-0", "gemini-call-1"]
    for ids in (("litellm-0", "litellm-1"), ("gemini-call-1", "gemini-call-0")):
        fault = replay([data], carrier=items(*ids))[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_a_text_only_carrier_must_say_the_wire_s_finish() -> None:
    for name, said in (("text_cut_by_max_tokens", "length"), ("text_only", "stop")):
        data = body(name)
        assert replay([data], carrier=_carrier(finish=said))[2] is None
        for wrong in ("tool_calls", "content_filter", None):
            fault = replay([data], carrier=Carrier({}, wrong))[2]
            assert fault is not None and fault.reason is R.CARRIER_MISMATCH


# ---- the normalizer's rules, one message at a time ------------------------------------------
def _one(obj: object) -> QuarantineReason | None:
    data = b"data: " + json.dumps(obj).encode() + b"\r\n\r\n"
    return replay([data])[2].reason  # type: ignore[union-attr]


def _cand(*parts: object, **extra: object) -> dict[str, object]:
    return {"candidates": [{"content": {"parts": list(parts), "role": "model"}, **extra}]}


def test_the_normalizer_refuses_what_it_cannot_read() -> None:
    call = {"functionCall": {"name": "multiply", "args": {"a": 1, "b": 2}}}
    assert _one({"candidates": {}}) is R.MALFORMED_EVENT
    assert _one({"candidates": ["x"]}) is R.MALFORMED_EVENT
    assert _one(_cand(call, index=1)) is R.UNEXPECTED_CHOICE
    assert _one(_cand(call, index="0")) is R.MALFORMED_EVENT
    assert _one({"candidates": [{"content": "x"}]}) is R.MALFORMED_EVENT
    assert _one({"candidates": [{"content": {"parts": {}}}]}) is R.MALFORMED_EVENT
    assert _one(_cand("text")) is R.MALFORMED_EVENT
    assert _one(_cand({"text": 3})) is R.MALFORMED_EVENT
    assert _one(_cand({"text": "a", "functionCall": call["functionCall"]})) is (
        R.UNSUPPORTED_TOOL_TYPE
    )
    assert _one(_cand({"inlineData": {"mimeType": "image/png", "data": ""}})) is (
        R.UNSUPPORTED_TOOL_TYPE
    )
    assert _one(_cand({"functionCall": "multiply"})) is R.MALFORMED_EVENT
    assert _one(_cand({"functionCall": {"args": {}}})) is R.MISSING_CALL_IDENTITY
    assert _one(_cand({"functionCall": {"name": "multiply", "id": ""}})) is (
        R.MISSING_CALL_IDENTITY
    )
    assert _one(_cand({"functionCall": {"name": "multiply", "willContinue": False}})) is (
        R.UNSUPPORTED_TOOL_TYPE
    )
    assert _one(_cand(call, finishReason="")) is R.MALFORMED_EVENT
    assert _one(_cand(call, finishReason=1)) is R.MALFORMED_EVENT


def test_a_call_without_args_is_an_empty_object() -> None:
    message = _cand({"functionCall": {"name": "anything"}}, finishReason="STOP")
    registry = ToolRegistry.from_tools([{"type": "function", "function": {"name": "anything"}}])
    attempt = Attempt(registry, attempt_id="att-g0", clock=lambda: 0.0)
    attempt.bind_response(content_type=SSE, streamed=True, path=PATH)
    attempt.receive_bytes(b"data: " + json.dumps(message).encode() + b"\n\n")
    attempt.receive_eof()
    for pending in attempt.conclude():
        attempt.decide(pending.index, PolicyDecision.approve())
    [call] = attempt.release()
    assert (call.call_id, call.name, call.arguments) == ("gemini-call-0", "anything", "{}")


def test_a_call_without_args_meets_the_schema_as_an_empty_object() -> None:
    data = b"".join(
        b"data: " + json.dumps(o).encode() + b"\n\n"
        for o in (_cand({"functionCall": {"name": "multiply"}}, finishReason="STOP"),)
    )
    _, _, fault, attempt = replay([data])
    # multiply requires a and b: the empty object reaches the schema, which refuses it.
    assert fault is not None and fault.reason is R.SCHEMA_INVALID
    assert attempt.wire is Wire.GEMINI


def test_metadata_only_parts_and_messages_pass_as_metadata() -> None:
    messages = (
        {"usageMetadata": {"promptTokenCount": 1}},
        {"candidates": []},
        _cand({"thoughtSignature": "c2ln"}),
        _cand({"text": "56."}, finishReason="STOP"),
    )
    data = b"".join(b"data: " + json.dumps(o).encode() + b"\r\n\r\n" for o in messages)
    released, text, fault, attempt = replay([data])
    assert fault is None and released == [] and text == "56."
    assert attempt.state is StreamState.RELEASED


# ---- the withholding client ---------------------------------------------------------------
def _withhold(data: bytes, approve: bool = True) -> tuple[list[bytes], list[bytes], Attempt]:
    attempt = Attempt(REGISTRY, attempt_id="att-w", clock=lambda: 0.0)
    attempt.bind_response(content_type=SSE, streamed=True, path=PATH)
    holder = Withholder(attempt, streamed=True)
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


def _data(message: bytes) -> dict[str, object]:
    value = json.loads(message.split(b"data: ", 1)[1])
    assert isinstance(value, dict)
    return value


def test_text_messages_pass_live_and_calls_wait_for_the_decision() -> None:
    live, held, attempt = _withhold(body("multiply_basic"))
    assert attempt.state is StreamState.RELEASED
    texts = [_data(m)["candidates"][0]["content"]["parts"][0]["text"] for m in live]  # type: ignore[index]
    assert texts == ["Let me ", "multiply."]
    out = [_data(m) for m in held]
    assert "functionCall" in out[0]["candidates"][0]["content"]["parts"][0]  # type: ignore[index]
    assert out[-1]["candidates"][0]["finishReason"] == "STOP"  # type: ignore[index]
    assert all(m.startswith(b"data: ") and m.endswith(b"\n\n") and m.isascii() for m in held)


@pytest.mark.parametrize("name", [n for n in STREAMED if CASES[n]["expect"] == "quarantine"])
def test_a_refused_stream_hands_over_no_call(name: str) -> None:
    live, held, attempt = _withhold(body(name))
    assert attempt.quarantined is not None
    assert held == []
    for message in live:
        assert gemini.passes_live(_data(message))
        assert b"functionCall" not in message


def test_the_live_rule_holds_calls_the_finish_errors_and_unknown_parts() -> None:
    passes = gemini.passes_live
    assert passes(_cand({"text": "x"}))
    assert passes(_cand({"text": "x", "thought": True}))
    assert passes({"usageMetadata": {}})
    assert not passes(_cand({"functionCall": {"name": "multiply"}}))
    assert not passes(_cand({"text": "x"}, finishReason="STOP"))
    assert not passes(_cand({"text": "x", "other": 1}))
    assert not passes(_cand({"executableCode": {}}))
    assert not passes(_cand({"text": "x"}, index=1))
    assert not passes({"candidates": [{}, {}]})
    assert not passes({"error": {"code": 500}})
    assert not passes({"promptFeedback": {"blockReason": "SAFETY"}})
