"""The Responses wire through the sans-I/O core: every native fixture, whole, byte by byte and
at random splits; each stage of a function-call item shown necessary; non-streamed bodies;
the carrier cross-check for Responses carriers on both wires. No litellm."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from conftest import split
from hypothesis import example, given, settings
from hypothesis import strategies as st
from wirecases import CoreWire, refused

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    CarrierCall,
    Party,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
)
from litellm_toolgate.core.decision.state import StreamState, Wire

ROOT = Path(__file__).resolve().parent.parent
R = QuarantineReason
SSE = "text/event-stream"
PATH = "/v1/responses"
RESPONSES = CoreWire(
    "responses", wire=Wire.RESPONSES, path=PATH, content_type=SSE, attempt_id="att-r"
)
FIXTURES, MANIFEST, CASES = RESPONSES.folder, RESPONSES.manifest, RESPONSES.cases
REGISTRY, body, replay = RESPONSES.registry, RESPONSES.body, RESPONSES.replay


def check(name: str, pieces: list[bytes]) -> None:
    case = CASES[name]
    released, text, fault, attempt = replay(pieces, route=case.get("route", ""))
    if case["expect"] == "release":
        assert fault is None, f"{name}: {fault!r}"
        # The core releases in output_index order; the manifest lists item.done order.
        # ``released`` names every client call (custom, shell, patch) where it differs.
        key = lambda c: c["call_id"]  # noqa: E731
        want = case.get("released", case["calls"])
        assert sorted(released, key=key) == sorted(want, key=key)
        assert text == case["text"]
        assert attempt.wire is Wire.RESPONSES
        assert attempt.state is StreamState.RELEASED
        assert attempt.finish_reason == "completed"
    else:
        refused(case, released, fault)


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_native_fixture_whole_and_at_random_splits(name: str) -> None:
    data = body(name)
    check(name, [data])
    for seed in range(4):
        check(name, split(data, "random", seed))


@pytest.mark.parametrize("name", ["multiply_basic", "two_calls_interleaved", "error_event"])
def test_native_fixtures_one_byte_at_a_time(name: str) -> None:
    check(name, split(body(name), "bytewise"))


def test_the_manifest_covers_the_issue() -> None:
    reasons = {c.get("reason") for c in MANIFEST["cases"]}
    assert {
        "item_mismatch",
        "incomplete_item",
        "response_incomplete",
        "error_event",
        "refusal",
        "event_after_terminal",
        "identity_conflict",
        "missing_finish",
    } <= reasons
    assert {"two_calls_interleaved", "arguments_only_in_done", "completed_drops_a_call"} <= set(
        CASES
    )


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
    for path in tmp_path.iterdir():
        if path.is_file():
            assert path.read_bytes() == (FIXTURES / path.name).read_bytes(), path.name
    recorded = (
        ROOT / "litellm_toolgate" / "loopback" / "recordings" / "round1_multiply_responses.sse"
    )
    assert (tmp_path / "rec" / recorded.name).read_bytes() == recorded.read_bytes()


# ---- response.completed is never enough on its own ---------------------------------------------
# A good call, one stage at a time; dropping or changing any one stage must quarantine.
ITEM = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "multiply"}
ARGS = '{"a": 7, "b": 8}'


def ev(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


def stages(**change: Any) -> dict[str, bytes | None]:
    """The stages of a one-call stream; a stage set to None is left out."""
    done_item = {**ITEM, "arguments": ARGS, "status": "completed"}
    out: dict[str, bytes | None] = {
        "created": ev("response.created", response={"id": "resp_1", "status": "in_progress"}),
        "added": ev("response.output_item.added", output_index=0, item={**ITEM, "arguments": ""}),
        "delta": ev(
            "response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta=ARGS
        ),
        "args_done": ev(
            "response.function_call_arguments.done",
            output_index=0,
            item_id="fc_1",
            arguments=ARGS,
        ),
        "item_done": ev("response.output_item.done", output_index=0, item=done_item),
        "completed": ev(
            "response.completed",
            response={"id": "resp_1", "status": "completed", "output": [done_item]},
        ),
    }
    out.update(change)
    return out


def run_stages(parts: dict[str, bytes | None]) -> ToolCallQuarantined | None:
    _, _, fault, _ = replay([b"".join(p for p in parts.values() if p is not None)])
    return fault


def test_all_stages_release() -> None:
    assert run_stages(stages()) is None


def test_an_error_event_whose_data_is_the_end_marker_is_an_error() -> None:
    """``event: error`` with ``data: [DONE]`` after the completion is an error, not the end."""
    assert run_stages({**stages(), "done": b"data: [DONE]\n\n"}) is None
    fault = run_stages({**stages(), "done": b"event: error\ndata: [DONE]\n\n"})
    assert fault is not None and fault.reason is R.EVENT_AFTER_TERMINAL
    fault = run_stages({**stages(), "completed": b"event: error\ndata: [DONE]\n\n"})
    assert fault is not None and fault.reason is R.ERROR_EVENT


ORDER = list(stages())


@settings(max_examples=400, deadline=None)
@example(ORDER[1:])
@example([*ORDER[:3], "created", *ORDER[3:]])
@example([*ORDER, "created"])
@example([*ORDER, "completed"])
@given(st.lists(st.sampled_from(ORDER), max_size=9))
def test_any_other_sequence_of_stages_releases_nothing(sequence: list[str]) -> None:
    """Dropped, repeated or reordered stages: only the one right sequence releases."""
    parts = stages()
    data = b"".join(parts[name] or b"" for name in sequence)
    released, _, fault, _ = replay([data])
    # response.created names the response and may come any number of times before the
    # completion; every other stage exactly once, in order.
    stages_only = [name for name in sequence if name != "created"]
    late = "completed" in sequence and "created" in sequence[sequence.index("completed") :]
    if stages_only == ORDER[1:] and not late:
        assert fault is None and len(released) == 1
    else:
        assert fault is not None and released == []


OTHER = '{"a": 7, "b": 9}'


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"delta": None}, R.ITEM_MISMATCH),  # .done holds what was never streamed
        ({"args_done": None}, R.INCOMPLETE_ITEM),
        ({"item_done": None}, R.INCOMPLETE_ITEM),
        ({"args_done": None, "item_done": None}, R.INCOMPLETE_ITEM),
        ({"completed": None}, R.MISSING_FINISH),
        (
            {
                "args_done": ev(
                    "response.function_call_arguments.done",
                    output_index=0,
                    item_id="fc_1",
                    arguments=OTHER,
                )
            },
            R.ITEM_MISMATCH,
        ),
        (
            {
                "item_done": ev(
                    "response.output_item.done",
                    output_index=0,
                    item={**ITEM, "arguments": OTHER, "status": "completed"},
                )
            },
            R.ITEM_MISMATCH,
        ),
        (
            {
                "item_done": ev(
                    "response.output_item.done",
                    output_index=0,
                    item={**ITEM, "name": "write_file", "arguments": ARGS},
                )
            },
            R.ITEM_MISMATCH,
        ),
        (
            {
                "item_done": ev(
                    "response.output_item.done",
                    output_index=0,
                    item={**ITEM, "arguments": ARGS, "status": "incomplete"},
                )
            },
            R.INCOMPLETE_ITEM,
        ),
        (
            {
                "completed": ev(
                    "response.completed",
                    response={"id": "resp_1", "status": "completed", "output": []},
                )
            },
            R.ITEM_MISMATCH,
        ),
        (
            {
                "completed": ev(
                    "response.completed",
                    response={
                        "id": "resp_1",
                        "status": "completed",
                        "output": [{**ITEM, "id": "fc_2", "arguments": ARGS}],
                    },
                )
            },
            R.ITEM_MISMATCH,
        ),
        (
            {
                "completed": ev(
                    "response.completed",
                    response={"id": "resp_1", "status": "failed", "output": []},
                )
            },
            R.RESPONSE_INCOMPLETE,
        ),
        (
            {
                "completed": ev(
                    "response.completed", response={"id": "resp_1", "status": "completed"}
                )
            },
            R.MALFORMED_EVENT,
        ),
        (
            {"after": ev("response.output_text.delta", output_index=1, item_id="m", delta="late")},
            R.EVENT_AFTER_TERMINAL,
        ),
    ],
    ids=lambda v: "-".join(v) if isinstance(v, dict) else getattr(v, "value", str(v)),
)
def test_each_missing_or_disagreeing_stage_quarantines(
    change: dict[str, bytes | None], reason: QuarantineReason
) -> None:
    fault = run_stages(stages(**change))
    assert fault is not None and fault.reason is reason


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'event: response.created\ndata: {"type": "response.in_progress"}\n\n', R.MALFORMED_EVENT),
        (b"data: [1, 2]\n\n", R.MALFORMED_EVENT),
        (b'data: {"no": "type"}\n\n', R.MALFORMED_EVENT),
        (b'data: {"type": "response.created", "response": []}\n\n', R.MALFORMED_EVENT),
        (b'data: {"type": "response.created", "response": {"id": 5}}\n\n', R.MALFORMED_EVENT),
        (b"data: [DONE]\n\n", R.MISSING_FINISH),
        (ev("response.output_item.added", output_index=True, item=ITEM), R.INVALID_CALL_INDEX),
        (ev("response.output_item.added", output_index=0, item=[]), R.MALFORMED_EVENT),
        (ev("response.output_item.added", output_index=0, item={"type": 3}), R.MALFORMED_EVENT),
        (
            ev("response.output_item.added", output_index=0, item={**ITEM, "name": ""}),
            R.MISSING_CALL_IDENTITY,
        ),
        (
            ev("response.output_item.added", output_index=0, item=ITEM)
            + ev("response.output_item.added", output_index=1, item={**ITEM, "id": "fc_2"}),
            R.IDENTITY_CONFLICT,
        ),
        (
            ev("response.output_item.added", output_index=0, item=ITEM)
            + ev("response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta=5),
            R.MALFORMED_EVENT,
        ),
        (
            ev("response.output_item.added", output_index=0, item=ITEM)
            + ev("response.output_item.done", output_index=0, item={"type": "message"}),
            R.IDENTITY_CONFLICT,
        ),
        (
            ev(
                "response.output_item.done",
                output_index=0,
                item={"type": "message", "content": "x"},
            ),
            R.MALFORMED_EVENT,
        ),
        (
            ev(
                "response.output_item.done",
                output_index=0,
                item={"type": "message", "content": [{"type": "refusal", "refusal": "no"}]},
            ),
            R.REFUSAL,
        ),
        (ev("response.refusal.done", output_index=0, refusal="no"), R.REFUSAL),
        (ev("response.incomplete", response={"status": "incomplete"}), R.RESPONSE_INCOMPLETE),
        (ev("response.failed", response={"status": "failed"}), R.ERROR_EVENT),
        (ev("error", message="boom"), R.ERROR_EVENT),
        (b"event: error\ndata: upstream overloaded\n\n", R.ERROR_EVENT),
        (
            ev(
                "response.completed",
                response={"status": "completed", "output": [{"type": "teleport_call"}]},
            ),
            R.UNSUPPORTED_TOOL_TYPE,
        ),
    ],
)
def test_wire_shapes_that_quarantine(data: bytes, reason: QuarantineReason) -> None:
    _, _, fault, _ = replay([data])
    assert fault is not None and fault.reason is reason


def test_quiet_and_unknown_events_pass_and_text_counts() -> None:
    data = (
        ev("response.created", response={"status": "in_progress"})
        + ev("response.output_item.added", output_index=0, item={"type": "message", "content": []})
        + ev("response.output_text.delta", output_index=0, item_id="m", delta="")
        + ev("response.output_text.delta", output_index=0, item_id="m", delta="hi")
        + ev("response.content_part.done", output_index=0, item_id="m", part={})
        + ev("response.something_new", output_index=0)
        + ev("response.completed", response={"status": "completed", "output": []})
    )
    released, text, fault, attempt = replay([data])
    assert fault is None and released == [] and text == "hi"
    assert attempt.unknown_events == 1 and attempt.response_id is None
    assert attempt.text_bytes == 2


# ---- non-streamed Responses bodies ---------------------------------------------------------------
def run_body(obj: Any, carrier: Carrier | None = None) -> tuple[Any, ToolCallQuarantined | None]:
    attempt = Attempt(REGISTRY, attempt_id="att-b", clock=lambda: 0.0)
    try:
        attempt.bind_response(content_type="application/json", streamed=False, path=PATH)
        attempt.receive_body(json.dumps(obj).encode())
        calls = attempt.conclude(carrier)
        for call in calls:
            attempt.decide(call.index, PolicyDecision.approve())
        return attempt.release(), None
    except ToolCallQuarantined as exc:
        return None, exc


DONE_ITEM = {**ITEM, "arguments": ARGS, "status": "completed"}
MESSAGE = {"type": "message", "content": [{"type": "output_text", "text": "ok"}]}
REASONING = {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAA"}


def test_a_whole_response_body_is_checked_like_a_stream() -> None:
    body_ok = {"id": "resp_1", "status": "completed", "output": [REASONING, MESSAGE, DONE_ITEM]}
    released, fault = run_body(body_ok)
    assert fault is None
    assert [(c.index, c.call_id, c.arguments) for c in released] == [(2, "call_1", ARGS)]
    carrier = Carrier(
        {0: CarrierCall("call_1", "multiply", ARGS, item_id="fc_1")}, "completed", kind="responses"
    )
    assert run_body(body_ok, carrier)[1] is None
    bad = Carrier(
        {0: CarrierCall("call_1", "multiply", ARGS, item_id="fc_9")}, "completed", kind="responses"
    )
    assert run_body(body_ok, bad)[1].reason is R.CARRIER_MISMATCH  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("obj", "reason"),
    [
        ({"status": "incomplete", "output": [DONE_ITEM]}, R.RESPONSE_INCOMPLETE),
        ({"status": "completed", "output": {}}, R.MALFORMED_EVENT),
        ({"error": {"message": "x"}}, R.ERROR_EVENT),
        (
            {"status": "completed", "output": [{**DONE_ITEM, "arguments": '{"a": 7'}]},
            R.INVALID_JSON,
        ),
        (
            {"status": "completed", "output": [{**DONE_ITEM, "status": "incomplete"}]},
            R.INCOMPLETE_ITEM,
        ),
        ({"status": "completed", "output": [{**DONE_ITEM, "arguments": None}]}, R.MALFORMED_EVENT),
    ],
)
def test_a_bad_response_body_quarantines(obj: dict[str, Any], reason: QuarantineReason) -> None:
    assert run_body(obj)[1].reason is reason  # type: ignore[union-attr]


# ---- a Responses carrier over either wire --------------------------------------------------------
def responses_carrier(
    calls: dict[int, CarrierCall], status: str | None = "completed", **kw: Any
) -> Carrier:
    return Carrier(calls, status, kind="responses", **kw)


def test_native_carrier_must_equal_the_wire() -> None:
    data = body("multiply_basic")
    case = CASES["multiply_basic"]
    (call,) = case["calls"]
    item_id = json.loads(data.split(b"response.output_item.done\ndata: ")[2].split(b"\n")[0])[
        "item"
    ]["id"]
    good = responses_carrier(
        {1: CarrierCall(call["call_id"], "multiply", call["arguments"], item_id=item_id)}
    )
    assert replay([data], carrier=good)[2] is None
    for bad in (
        responses_carrier({1: CarrierCall(call["call_id"], "multiply", call["arguments"])}),
        responses_carrier({1: CarrierCall(call["call_id"], "multiply", "{}", item_id=item_id)}),
        responses_carrier({}),
        responses_carrier({1: good.calls[1]}, "incomplete"),
        responses_carrier({1: good.calls[1]}, foreign=True),
    ):
        fault = replay([data], carrier=bad)[2]
        assert fault is not None and fault.reason is R.CARRIER_MISMATCH


def chat_attempt(data: bytes, carrier: Carrier) -> ToolCallQuarantined | None:
    attempt = Attempt(REGISTRY, attempt_id="att-c", clock=lambda: 0.0)
    try:
        attempt.bind_response(content_type=SSE, streamed=True, path="/v1/chat/completions")
        attempt.receive_bytes(data)
        attempt.receive_eof()
        attempt.conclude(carrier)
    except ToolCallQuarantined as exc:
        return exc
    return None


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    obj = {"id": "c1", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return f"data: {json.dumps(obj)}\n\n".encode()


def test_bridged_carrier_matches_by_call_id_and_truncation_is_incomplete() -> None:
    calls = [
        {
            "index": 1,
            "id": "call_b",
            "type": "function",
            "function": {"name": "multiply", "arguments": ARGS},
        },
        {
            "index": 0,
            "id": "call_a",
            "type": "function",
            "function": {"name": "multiply", "arguments": ARGS},
        },
    ]
    data = chunk({"tool_calls": calls}) + chunk({}, "tool_calls") + b"data: [DONE]\n\n"
    # litellm numbers items in the order it saw them: call_b first. Matching is by call id.
    carrier = responses_carrier(
        {0: CarrierCall("call_b", "multiply", ARGS), 1: CarrierCall("call_a", "multiply", ARGS)}
    )
    assert chat_attempt(data, carrier) is None
    twice = responses_carrier(
        {0: CarrierCall("call_a", "multiply", ARGS), 1: CarrierCall("call_a", "multiply", ARGS)}
    )
    assert chat_attempt(data, twice).reason is R.CARRIER_MISMATCH  # type: ignore[union-attr]
    text = chunk({"content": "Seven times"}) + chunk({}, "length") + b"data: [DONE]\n\n"
    fault = chat_attempt(text, responses_carrier({}, "incomplete"))
    assert fault is not None and fault.reason is R.RESPONSE_INCOMPLETE


def test_an_unknown_path_is_a_route_not_gated() -> None:
    attempt = Attempt(REGISTRY)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.bind_response(content_type=SSE, streamed=True, path="/v1/embeddings")
    # The gate's own limitation (local), not the upstream's fault.
    assert info.value.reason is R.ROUTE_NOT_GATED
    assert info.value.party is Party.LOCAL
