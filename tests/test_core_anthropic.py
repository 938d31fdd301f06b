"""The Anthropic Messages wire through the sans-I/O core: every fixture, whole, byte by byte
and at random splits; whole (``stream=False``) bodies; each stage of the terminal shown
necessary; the carrier cross-check for chat and Anthropic carriers. No litellm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import CANARY, split
from hypothesis import given, settings
from hypothesis import strategies as st
from wirecases import CoreWire

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    CarrierCall,
    QuarantineReason,
    ToolCallQuarantined,
)
from litellm_toolgate.core.decision.state import Wire, wire_of

ROOT = Path(__file__).resolve().parent.parent
R = QuarantineReason
PATH = "/v1/messages"
ANTHROPIC = CoreWire(
    "anthropic",
    wire=Wire.ANTHROPIC,
    path=PATH,
    content_type="text/event-stream",
    attempt_id="att-a",
)
FIXTURES, MANIFEST, CASES = ANTHROPIC.folder, ANTHROPIC.manifest, ANTHROPIC.cases
REGISTRY, STREAMED, WHOLE = ANTHROPIC.registry, ANTHROPIC.streamed, ANTHROPIC.whole
body, replay, check = ANTHROPIC.body, ANTHROPIC.replay, ANTHROPIC.check


@pytest.mark.parametrize("name", STREAMED)
def test_every_streamed_fixture_whole_and_at_random_splits(name: str) -> None:
    data = body(name)
    check(name, [data])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize(
    "name", ["multiply_basic", "interleaved_blocks", "empty_input_tool", "overloaded_error"]
)
def test_fixtures_one_byte_at_a_time(name: str) -> None:
    check(name, split(body(name), "bytewise"))


@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_body(name: str) -> None:
    check(name)


def test_the_manifest_covers_the_issue() -> None:
    reasons = {c.get("reason") for c in MANIFEST["cases"]}
    assert {
        "finish_reason_mismatch",
        "refusal",
        "missing_done",
        "missing_finish",
        "error_event",
        "event_after_terminal",
        "identity_conflict",
        "unsupported_tool_type",
        "item_mismatch",
        "incomplete_item",
    } <= reasons
    assert {
        "interleaved_blocks",
        "empty_input_tool",
        "write_file_canary",
        "stop_max_tokens",
        "stop_end_turn",
        "stop_sequence",
        "stop_refusal",
        "stop_pause_turn",
        "server_tool_use",
    } <= set(CASES)
    canary = [
        c for c in MANIFEST["cases"] if any(CANARY in k["arguments"] for k in c.get("calls", []))
    ]
    assert canary


def test_the_generator_reproduces_every_file(tmp_path: Path) -> None:
    import subprocess
    import sys

    subprocess.run(
        [
            sys.executable,
            str(FIXTURES / "generate.py"),
            "--out",
            str(tmp_path),
            "--recordings",
            str(tmp_path / "rec"),
        ],
        check=True,
        capture_output=True,
    )
    names = {p.name for p in tmp_path.iterdir() if p.is_file()}
    assert names == {p.name for p in FIXTURES.iterdir() if p.suffix in (".sse", ".json")}
    for name in names:
        assert (tmp_path / name).read_bytes() == (FIXTURES / name).read_bytes(), name
    recorded = (
        ROOT / "litellm_toolgate" / "loopback" / "recordings" / "round1_multiply_anthropic.sse"
    )
    assert (tmp_path / "rec" / recorded.name).read_bytes() == recorded.read_bytes()


# ---- the wire is picked from the path and the content type -------------------------------------
def test_the_path_picks_the_anthropic_wire() -> None:
    assert wire_of("/v1/messages") is Wire.ANTHROPIC
    assert wire_of("//v1/messages/") is Wire.ANTHROPIC  # litellm 1.108.7 with api_base ".../"
    assert wire_of("/anthropic/v1/messages") is Wire.ANTHROPIC
    assert wire_of("/v1/messages/count_tokens") is None
    # Claude on Vertex AI: Anthropic's wire under Vertex's rawPredict, that publisher only.
    vertex = "/v1/projects/p/locations/l/publishers/{}/models/{}:{}"
    assert wire_of(vertex.format("anthropic", "claude-x@1", "streamRawPredict")) is Wire.ANTHROPIC
    assert wire_of(vertex.format("anthropic", "claude-x@1", "rawPredict")) is Wire.ANTHROPIC
    assert wire_of(vertex.format("mistralai", "mistral-x", "streamRawPredict")) is None
    assert wire_of(vertex.format("ai21", "jamba-x", "rawPredict")) is None
    assert wire_of(vertex.format("anthropic", "claude-x@1", "countTokens")) is None
    assert wire_of("/publishers/anthropic/models:streamRawPredict") is None
    attempt = Attempt(REGISTRY)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.bind_response(content_type="application/json", streamed=True, path=PATH)
    assert info.value.reason is R.UNSUPPORTED_WIRE


# ---- every stage of the terminal is necessary ------------------------------------------------
ARGS = '{"a": 7, "b": 8}'


def ev(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def stages() -> dict[str, bytes]:
    return {
        "start": ev("message_start", message={"id": "msg_1", "content": []}),
        "block": ev(
            "content_block_start",
            index=0,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "multiply", "input": {}},
        ),
        "delta": ev(
            "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": ARGS}
        ),
        "stop": ev("content_block_stop", index=0),
        "message_delta": ev("message_delta", delta={"stop_reason": "tool_use"}),
        "message_stop": ev("message_stop"),
    }


def run(parts: list[bytes]) -> ToolCallQuarantined | None:
    return replay([b"".join(parts)])[2]


def test_all_stages_release() -> None:
    released, _, fault, _ = replay([b"".join(stages().values())])
    assert fault is None and released == [
        {"call_id": "toolu_1", "name": "multiply", "arguments": ARGS}
    ]


@pytest.mark.parametrize("dropped", ["start", "block", "stop", "message_delta", "message_stop"])
def test_dropping_any_stage_quarantines(dropped: str) -> None:
    parts = [v for k, v in stages().items() if k != dropped]
    assert run(parts) is not None


@settings(max_examples=200, deadline=None)
@given(st.permutations(list(stages())))
def test_only_the_protocol_order_releases(order: list[str]) -> None:
    parts = stages()
    fault = run([parts[k] for k in order])
    assert (fault is None) == (order == list(parts))


def test_an_error_event_whatever_its_data_is_an_error() -> None:
    parts = list(stages().values())
    fault = run([*parts[:4], b"event: error\ndata: [DONE]\n\n", *parts[4:]])
    assert fault is not None and fault.reason is R.ERROR_EVENT


# ---- the carrier cross-check -----------------------------------------------------------------
def chat_carrier(calls: dict[int, tuple[str, str, str]], finish: str | None) -> Carrier:
    return Carrier({i: CarrierCall(*c) for i, c in calls.items()}, finish)


def test_chat_carrier_renumbers_the_tool_blocks() -> None:
    case = CASES["interleaved_blocks"]
    good = {i: (c["call_id"], c["name"], c["arguments"]) for i, c in enumerate(case["calls"])}
    _, _, fault, _ = replay([body("interleaved_blocks")], carrier=chat_carrier(good, "tool_calls"))
    assert fault is None
    bad_variants = [
        chat_carrier(good, "stop"),
        chat_carrier({0: good[0]}, "tool_calls"),
        chat_carrier({0: good[1], 1: good[0]}, "tool_calls"),
        chat_carrier({**good, 1: (good[1][0], good[1][1], good[1][2][:-1])}, "tool_calls"),
        chat_carrier({**good, 0: ("toolu_other", good[0][1], good[0][2])}, "tool_calls"),
        Carrier({i: CarrierCall(*c) for i, c in good.items()}, "tool_calls", foreign=True),
    ]
    for carrier in bad_variants:
        _, _, fault, _ = replay([body("interleaved_blocks")], carrier=carrier)
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_chat_carrier_shows_no_text_for_an_empty_input() -> None:
    call = CASES["empty_input_tool"]["calls"][0]
    for shown in ("", "{}"):
        carrier = chat_carrier({0: (call["call_id"], "get_time", shown)}, "tool_calls")
        released, _, fault, _ = replay([body("empty_input_tool")], carrier=carrier)
        assert fault is None and released[0]["arguments"] == "{}"
    carrier = chat_carrier({0: (call["call_id"], "get_time", '{"x": 1}')}, "tool_calls")
    assert replay([body("empty_input_tool")], carrier=carrier)[2] is not None


def test_whole_body_carrier_may_serialize_the_input_its_own_way() -> None:
    calls = CASES["whole_tool_use"]["calls"]
    shown = {
        i: (c["call_id"], c["name"], json.dumps(json.loads(c["arguments"])))  # ASCII escapes
        for i, c in enumerate(calls)
    }
    released, _, fault, _ = replay(
        whole=body("whole_tool_use"), carrier=chat_carrier(shown, "tool_calls")
    )
    assert fault is None and released == calls


def test_anthropic_carrier_keeps_block_indices_and_the_stop_reason() -> None:
    case = CASES["multiply_basic"]
    call = case["calls"][0]
    good = Carrier(
        {1: CarrierCall(call["call_id"], call["name"], call["arguments"])},
        "tool_use",
        kind="anthropic",
    )
    assert replay([body("multiply_basic")], carrier=good)[2] is None
    for bad in (
        Carrier({0: good.calls[1]}, "tool_use", kind="anthropic"),
        Carrier(good.calls, "end_turn", kind="anthropic"),
    ):
        fault = replay([body("multiply_basic")], carrier=bad)[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def responses_carrier(calls: list[tuple[str, str, str]], status: str | None) -> Carrier:
    """Function-call items keyed by output index, after a text item at 0."""
    return Carrier(
        {i + 1: CarrierCall(*c, item_id=f"fc_{i}") for i, c in enumerate(calls)},
        status,
        kind="responses",
    )


def test_responses_carrier_keeps_the_block_ids_in_order() -> None:
    good = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["interleaved_blocks"]["calls"]]
    bodies = [body("interleaved_blocks")]
    assert replay(bodies, carrier=responses_carrier(good, "completed"))[2] is None
    json_alike = (*good[1][:2], json.dumps(json.loads(good[1][2]), separators=(",", ":")))
    assert json_alike != good[1]
    for bad in (
        responses_carrier(good[::-1], "completed"),
        responses_carrier(good[:1], "completed"),
        responses_carrier([good[0], ("toolu_other", *good[1][1:])], "completed"),
        responses_carrier([good[0], (good[1][0], "other", good[1][2])], "completed"),
        responses_carrier([good[0], json_alike], "completed"),  # streamed: the exact text
        responses_carrier(good, "incomplete"),
        responses_carrier(good, None),
        Carrier(responses_carrier(good, "completed").calls, "completed", True, "responses"),
    ):
        fault = replay(bodies, carrier=bad)[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_responses_carrier_of_a_whole_body_or_a_start_input_holds_the_json_value() -> None:
    for name in ("whole_tool_use", "empty_input_tool"):
        case = CASES[name]
        calls = [
            (c["call_id"], c["name"], json.dumps(json.loads(c["arguments"]))) for c in case["calls"]
        ]
        kwargs: dict[str, Any] = (
            {"whole": body(name)} if not case["streamed"] else {"pieces": [body(name)]}
        )
        released, _, fault, _ = replay(carrier=responses_carrier(calls, "completed"), **kwargs)
        assert fault is None and released == case["calls"], name
        shown = [(calls[0][0], calls[0][1], '{"x": 1}')]
        fault = replay(carrier=responses_carrier(shown, "completed"), **kwargs)[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH, name
        # litellm's chat chunks may show no text for a start input; its items may not.
        if case["streamed"]:
            shown = [(calls[0][0], calls[0][1], "")]
            fault = replay(carrier=responses_carrier(shown, "completed"), **kwargs)[2]
            assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def test_responses_carrier_of_text_cut_short_is_an_incomplete_response() -> None:
    text = b'{"id":"msg_1","type":"message","content":[{"type":"text","text":"Hi"}],'
    complete = replay(
        whole=text + b'"stop_reason":"end_turn"}', carrier=responses_carrier([], "completed")
    )
    assert complete[2] is None
    for stop in ("max_tokens", "refusal", "pause_turn"):
        whole = text + b'"stop_reason":"' + stop.encode() + b'"}'
        for status in ("completed", "incomplete"):
            fault = replay(whole=whole, carrier=responses_carrier([], status))[2]
            assert fault is not None and fault.reason is R.RESPONSE_INCOMPLETE, stop


def test_whole_body_refuses_a_duplicate_key_the_json_parser_would_merge() -> None:
    body = (
        b'{"id":"msg_1","type":"message","content":[{"type":"tool_use","id":"toolu_1",'
        b'"name":"multiply","input":{"a":7,"a":9,"b":8}}],"stop_reason":"tool_use"}'
    )
    fault = replay(whole=body)[2]
    assert fault is not None and fault.reason is R.DUPLICATE_KEY


def test_a_streamed_start_input_is_refused_even_without_deltas() -> None:
    parts = stages()
    parts["block"] = parts["block"].replace(b'"input": {}', b'"input": {"a": 7, "b": 8}')
    del parts["delta"]
    fault = run(list(parts.values()))
    assert fault is not None and fault.reason is R.ITEM_MISMATCH


@pytest.mark.parametrize("name", STREAMED)
def test_the_wire_classifier_passes_no_call_and_no_terminal_live(name: str) -> None:
    """What the one classification lets out before the decision, for every fixture: events
    of text-like blocks and lifecycle events only, never a piece of a tool block, the
    terminal, or an event it does not know."""
    from litellm_toolgate.core.framing.sse import SSEDecoder
    from litellm_toolgate.core.wires.anthropic import PASSING_BLOCKS, EventClassifier

    classifier = EventClassifier()
    blocks: dict[int, str] = {}
    decoder = SSEDecoder(max_event_bytes=1 << 20)
    passed = held = 0
    for message in decoder.feed(body(name)):
        try:
            obj = json.loads(message.data)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        block = obj.get("content_block")
        if obj.get("type") == "content_block_start" and isinstance(block, dict):
            blocks.setdefault(obj.get("index"), str(block.get("type")))
        if not classifier.passes_live(obj):
            held += 1
            continue
        passed += 1
        kind = obj.get("type")
        assert kind in ("message_start", "ping") or (
            kind in ("content_block_start", "content_block_delta", "content_block_stop")
            and blocks.get(obj.get("index")) in PASSING_BLOCKS
        ), (name, kind)
    assert held > 0  # every fixture ends with a terminal the classifier holds
