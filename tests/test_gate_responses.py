"""``gate.responses()`` / ``gate.aresponses()`` through the real litellm over loopback HTTP.

Two routes: native (``openai/<model>`` with an ``api_base``: litellm calls ``/responses`` and
the wire is Responses SSE, ``fixtures/responses``) and bridged (``cometapi/<model>``: litellm
calls ``/chat/completions`` and turns the chat wire, ``fixtures/chat``, into Responses events).
Each fixture is served by the loopback fake upstream whole and in odd-sized chunks, read sync
and async. The gate must give the manifest's outcome: the exact calls released (each call's
events withheld until then, and all of them before ``response.completed``), or
``ToolCallQuarantined`` with the manifest's reason and not one function-call event handed out.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import litellm
import pytest
from conftest import CASES as CHAT_CASES
from conftest import MANIFEST as CHAT_MANIFEST
from conftest import body_of, expected, no_leak
from loopback import call
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
RESPONSES = Fixtures("responses")
FIXTURES, MANIFEST, CASES = RESPONSES.folder, RESPONSES.manifest, RESPONSES.cases
OVERRIDES: dict[str, dict[str, str]] = MANIFEST["bridged"]["overrides"]
CALL_EVENTS = {
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
}
# Chunk sizes that cut the body inside events, inside UTF-8 sequences and between lines.
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}


def kind(event: Any) -> str:
    value = getattr(event, "type", None)
    return str(getattr(value, "value", value))


def is_call_event(event: Any) -> bool:
    if kind(event) in CALL_EVENTS:
        return True
    item = getattr(event, "item", None)
    item_type = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind(event).startswith("response.output_item.") and item_type == "function_call"


def field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name)


def collect(events: list[Any]) -> tuple[str, list[dict[str, Any]], list[str]]:
    text, calls = "", []
    for event in events:
        if kind(event) == "response.output_text.delta":
            text += event.delta
        if kind(event) == "response.output_item.done" and is_call_event(event):
            calls.append({k: field(event.item, k) for k in ("call_id", "name", "arguments")})
    return text, calls, [kind(e) for e in events]


def run(
    gate: ToolGate, upstream: FakeUpstream, model: str, asynchronous: bool, **extra: Any
) -> tuple[list[Any], ToolCallQuarantined | None]:
    kwargs = {
        "model": model,
        "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": MANIFEST["tools"],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
        **extra,
    }
    return call(gate.responses, gate.aresponses, kwargs, asynchronous=asynchronous)


def check(
    *,
    outcome: str,
    reason: str | None,
    want_text: str,
    want_calls: list[dict[str, Any]],
    events: list[Any],
    error: ToolCallQuarantined | None,
) -> None:
    text, calls, kinds = collect(events)
    if outcome == "release":
        assert error is None, f"quarantined {error!r}"
        assert text == want_text
        assert calls == want_calls
        assert kinds[-1] == "response.completed"
        if want_calls:
            # Every call event was withheld and released together, right before completed.
            positions = [i for i, e in enumerate(events) if is_call_event(e)]
            assert positions == list(range(positions[0], len(events) - 1))
    else:
        assert error is not None, f"released {calls!r}"
        assert error.reason is R(reason), (error.reason, reason)
        assert not [e for e in events if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in kinds
        assert want_text.startswith(text)
        no_leak(error)


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


GATE = ToolGate(MANIFEST["tools"])


# Cases recorded for another route's profile are replayed by the core tests under that route;
# here every case runs on the native openai/ route.
NATIVE = sorted(n for n, c in CASES.items() if c.get("route", "openai/").startswith("openai/"))


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", NATIVE)
def test_native_route(upstream: FakeUpstream, name: str, asynchronous: bool, split: str) -> None:
    case = CASES[name]
    data = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(data, chunk_sizes=SPLITS[split]))
    events, error = run(GATE, upstream, "openai/gpt-4o-mini", asynchronous)
    check(
        outcome=case["expect"],
        reason=case.get("reason"),
        want_text=case["text"],
        want_calls=case.get("calls", []),
        events=events,
        error=error,
    )
    assert upstream.requests[-1].get("input") is not None  # it went to /responses natively


BRIDGED = sorted(n for n, c in CHAT_CASES.items() if "transport" not in c)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", BRIDGED)
def test_bridged_route(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = CHAT_CASES[name]
    override = OVERRIDES.get(name)
    outcome, reason = (override["expect"], override.get("reason")) if override else expected(case)
    # Sync reads the body whole, async in odd pieces: both paths see both.
    upstream.enqueue(Scripted(body_of(case), chunk_sizes=SPLITS["split"] if asynchronous else None))
    chat_tools = CHAT_MANIFEST["tools"]
    gate = ToolGate(chat_tools)
    events, error = run(gate, upstream, "cometapi/gpt-4o-mini", asynchronous)
    want = [
        {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case.get("calls", [])
    ]
    check(
        outcome=outcome,
        reason=reason,
        want_text=case["text"],
        want_calls=want,
        events=events,
        error=error,
    )
    assert upstream.requests[-1].get("messages") is not None  # it went to chat completions


# ---- the bridge over the other wires ------------------------------------------------------------
# litellm bridges the Responses API to chat over Anthropic's, Bedrock's, Gemini's and Ollama's
# wires too: every recording of those wires goes through gate.responses in
# test_gate_responses_wires.py (ids kept) and test_gate_responses_whole_wires.py (ids replaced
# by litellm, matched by position).


# ---- non-streamed responses -------------------------------------------------------------------
ITEM = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "multiply",
    "arguments": '{"a": 7, "b": 8}',
}
REASONING = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB-opaque"}


def response_body(status: str = "completed", output: list[Any] | None = None) -> bytes:
    obj = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "model": "gpt-4o-mini",
        "output": [REASONING, ITEM] if output is None else output,
    }
    return json.dumps(obj).encode()


def chat_body(arguments: str, finish: str = "tool_calls") -> bytes:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": arguments},
    }
    obj = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1767225600,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": finish,
            }
        ],
    }
    return json.dumps(obj).encode()


def run_whole(
    upstream: FakeUpstream, model: str, body: bytes, asynchronous: bool
) -> tuple[Any, ToolCallQuarantined | None]:
    upstream.enqueue(Scripted(body, content_type="application/json"))
    kwargs = {
        "model": model,
        "input": "What is 7 times 8?",
        "tools": MANIFEST["tools"],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
    }
    try:
        if asynchronous:
            return asyncio.run(GATE.aresponses(**kwargs)), None
        return GATE.responses(**kwargs), None
    except ToolCallQuarantined as exc:
        return None, exc


def function_calls(response: Any) -> list[tuple[str, str]]:
    return [
        (item.call_id, item.arguments)
        for item in response.output
        if getattr(item, "type", None) == "function_call"
    ]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_non_streamed_native_response_is_checked(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    response, error = run_whole(upstream, "openai/gpt-4o-mini", response_body(), asynchronous)
    assert error is None
    assert function_calls(response) == [("call_1", ITEM["arguments"])]
    # The reasoning item comes back untouched, encrypted content and all.
    reasoning = [i for i in response.output if getattr(i, "type", None) == "reasoning"]
    assert [getattr(r, "encrypted_content", None) for r in reasoning] == ["gAAAAB-opaque"]
    for body, reason in (
        (response_body("incomplete"), R.RESPONSE_INCOMPLETE),
        (response_body(output=[{**ITEM, "arguments": '{"a": 7, "b"'}]), R.INVALID_JSON),
        (response_body(output=[{**ITEM, "name": "rm_rf"}]), R.UNKNOWN_TOOL),
    ):
        response, error = run_whole(upstream, "openai/gpt-4o-mini", body, asynchronous)
        assert response is None and error is not None and error.reason is reason


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_non_streamed_bridged_response_is_checked(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    good = chat_body('{"a": 7, "b": 8}')
    response, error = run_whole(upstream, "cometapi/gpt-4o-mini", good, asynchronous)
    assert error is None
    assert function_calls(response) == [("call_1", '{"a": 7, "b": 8}')]
    response, error = run_whole(
        upstream, "cometapi/gpt-4o-mini", chat_body('{"a": 7, "b'), asynchronous
    )
    assert response is None and error is not None and error.reason is R.INVALID_JSON
    response, error = run_whole(
        upstream, "cometapi/gpt-4o-mini", chat_body('{"a": 7, "b": 8}', "length"), asynchronous
    )
    assert response is None and error is not None and error.reason is R.FINISH_REASON_MISMATCH


# ---- interruptions on the native route -----------------------------------------------------------
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_native_disconnect_then_a_retry_is_a_new_attempt(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    data = (FIXTURES / CASES["write_file_unicode"]["body"]).read_bytes()
    cut = data.index(b"function_call_arguments.delta") + 200
    upstream.enqueue(Scripted(data, chunk_sizes=[50], disconnect_after=cut))
    events, error = run(GATE, upstream, "openai/gpt-4o-mini", asynchronous, num_retries=0)
    assert error is not None and error.reason is R.DISCONNECTED
    assert not [e for e in events if is_call_event(e)]
    upstream.enqueue(Scripted(data))
    events, error = run(GATE, upstream, "openai/gpt-4o-mini", asynchronous)
    assert error is None
    assert collect(events)[1] == CASES["write_file_unicode"]["calls"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_native_silence_is_a_stall(upstream: FakeUpstream, asynchronous: bool) -> None:
    from litellm_toolgate import Limits

    data = (FIXTURES / CASES["multiply_basic"]["body"]).read_bytes()
    cut = data.index(b"function_call_arguments.done")
    upstream.enqueue(Scripted(data, stall_after=cut))
    gate = ToolGate(MANIFEST["tools"], limits=Limits(idle_timeout=0.5))
    events, error = run(gate, upstream, "openai/gpt-4o-mini", asynchronous, num_retries=0)
    assert error is not None and error.reason is R.STALLED
    assert not [e for e in events if is_call_event(e)]


def test_closing_a_responses_stream_releases_nothing(upstream: FakeUpstream) -> None:
    data = (FIXTURES / CASES["multiply_basic"]["body"]).read_bytes()
    upstream.enqueue(Scripted(data))
    stream = GATE.responses(
        model="openai/gpt-4o-mini",
        input="go",
        api_base=upstream.base_url,
        api_key="sk-test",
        stream=True,
    )
    with stream:
        first = next(stream)
    assert kind(first) == "response.created"
    with pytest.raises(ToolCallQuarantined) as info:
        next(stream)
    assert info.value.reason is R.CANCELLED


# ---- a route that ignores client= is refused ---------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_result_made_without_the_wire_is_refused(asynchronous: bool, stream: bool) -> None:
    # litellm's mock_response makes a result without any HTTP: the gate never saw a wire.
    kwargs = {
        "model": "openai/gpt-4o-mini",
        "input": "go",
        "mock_response": "hello",
        "api_key": "sk-test",
        "stream": stream,
    }
    handed: list[Any] = []

    async def go() -> None:
        result = await GATE.aresponses(**kwargs)
        async for event in result:
            handed.append(event)

    with pytest.raises(ToolCallQuarantined) as info:
        if asynchronous:
            asyncio.run(go())
        else:
            handed.extend(GATE.responses(**kwargs))
    assert info.value.reason is R.WIRE_NOT_OBSERVED
    assert handed == []


# ---- the carrier adapter: litellm's events cross-checked ---------------------------------
def real_events(upstream: FakeUpstream, name: str) -> list[Any]:
    """What plain litellm yields for a native fixture (no gate): the carrier as it is."""
    upstream.enqueue(Scripted((FIXTURES / CASES[name]["body"]).read_bytes()))
    stream: Any = litellm.responses(
        model="openai/gpt-4o-mini",
        input="go",
        api_base=upstream.base_url,
        api_key="sk-test",
        stream=True,
    )
    return list(stream)


def carrier_after(events: list[Any]) -> Any:
    from litellm_toolgate.edge.carriers.responses import CarrierEvents

    adapter = CarrierEvents()
    passed = [e for e in events if adapter.admit(e) is not None]
    assert not [e for e in passed if is_call_event(e)]
    return adapter.carrier()


def test_the_carrier_adapter_notices_litellm_contradicting_itself(upstream: FakeUpstream) -> None:
    events = real_events(upstream, "two_calls_interleaved")
    good = carrier_after(events)
    assert not good.foreign and good.finish_reason == "completed" and len(good.calls) == 2

    def where(kind_: str) -> int:
        return next(i for i, e in enumerate(events) if kind(e) == kind_)

    def changed(position: int, **update: Any) -> list[Any]:
        copy = list(events)
        copy[position] = events[position].model_copy(update=update)
        return copy

    item_done = where("response.output_item.done")
    completed = where("response.completed")
    wrong_item = events[item_done].item.model_copy(update={"arguments": "{}"})
    broken = [
        changed(where("response.function_call_arguments.done"), arguments="{}"),
        changed(where("response.function_call_arguments.delta"), item_id="fc_other"),
        changed(where("response.function_call_arguments.delta"), output_index=7),
        changed(where("response.function_call_arguments.delta"), output_index=[1]),
        changed(item_done, item=wrong_item),
        [e for i, e in enumerate(events) if i != item_done],  # an item never done
        [*events, events[completed]],  # an event after the final one
        [*events[:2], ("not", "an event"), *events[2:]],
        changed(where("response.output_item.added"), output_index="0"),
        [*events[:completed], events[where("response.output_item.added")], *events[completed:]],
    ]
    resp = events[completed].response
    broken.append(changed(completed, response=resp.model_copy(update={"output": resp.output[:1]})))
    for variant in broken:
        carrier = carrier_after(variant)
        # Either makes the attempt refuse the carrier (carrier_mismatch).
        assert carrier.foreign or carrier.finish_reason != "completed"
    incomplete = changed(completed, response=resp.model_copy(update={"status": "incomplete"}))
    assert carrier_after(incomplete).finish_reason == "incomplete"


# ---- guard(): a Responses stream started by the caller ----------------------------------------
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("model", "body"),
    [
        ("openai/gpt-4o-mini", (FIXTURES / "completed_drops_a_call.sse").read_bytes()),
        ("cometapi/gpt-4o-mini", body_of(CHAT_CASES["done_without_finish"])),
    ],
    ids=["native", "bridged"],
)
def test_guard_gates_a_responses_stream_the_caller_started(
    upstream: FakeUpstream, model: str, body: bytes, asynchronous: bool
) -> None:
    kwargs: dict[str, Any] = {
        "model": model,
        "input": "go",
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
    }
    handed: list[Any] = []

    async def go() -> None:
        client = GATE.async_http_client()
        stream = await litellm.aresponses(client=client, **kwargs)
        async for event in GATE.guard(stream, client):  # type: ignore[union-attr]
            handed.append(event)

    upstream.enqueue(Scripted(body))
    with pytest.raises(ToolCallQuarantined) as info:
        if asynchronous:
            asyncio.run(go())
        else:
            client = GATE.http_client()
            handed.extend(GATE.guard(litellm.responses(client=client, **kwargs), client))  # type: ignore[arg-type]
    expect = R.ITEM_MISMATCH if model.startswith("openai/") else R.MISSING_FINISH
    assert info.value.reason is expect
    assert not [e for e in handed if is_call_event(e)]


def test_guard_refuses_a_whole_response() -> None:
    from litellm_toolgate import WireNotObservable

    # Asked for a stream, litellm's mock_response hands back a whole response object.
    client = GATE.http_client(stream=True)
    whole = litellm.responses(
        model="openai/gpt-4o-mini",
        input="go",
        mock_response="hello",
        api_key="sk-test",
        stream=True,
        client=client,
    )
    with pytest.raises(WireNotObservable):
        GATE.guard(whole, client)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_reasoning_items_pass_through_untouched(upstream: FakeUpstream, asynchronous: bool) -> None:
    data = (FIXTURES / CASES["reasoning_then_call"]["body"]).read_bytes()
    messages = [json.loads(line[6:]) for line in data.decode().splitlines() if line[:6] == "data: "]
    sent = [
        m["item"]
        for m in messages
        if m["type"].startswith("response.output_item.") and m["item"]["type"] == "reasoning"
    ]
    upstream.enqueue(Scripted(data, chunk_sizes=SPLITS["split"]))
    events, error = run(GATE, upstream, "openai/gpt-4o-mini", asynchronous)
    assert error is None
    got = [
        e.item
        for e in events
        if kind(e).startswith("response.output_item.") and field(e.item, "type") == "reasoning"
    ]
    assert len(got) == len(sent) == 2
    for item, original in zip(got, sent, strict=True):
        assert field(item, "encrypted_content") == original["encrypted_content"]
        assert field(item, "id") == original["id"]
    # They reached the caller live, before the withheld call and the completion.
    positions = [i for i, e in enumerate(events) if kind(e).startswith("response.output_item.")]
    assert [field(events[i].item, "type") for i in positions][:2] == ["reasoning", "reasoning"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_bridged_text_cut_by_length_is_an_incomplete_response(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    from litellm_toolgate.loopback.upstream import answer_stream

    body = answer_stream("Seven times eight is").replace(
        b'"finish_reason":"stop"', b'"finish_reason":"length"'
    )
    assert b'"length"' in body
    upstream.enqueue(Scripted(body))
    events, error = run(GATE, upstream, "cometapi/gpt-4o-mini", asynchronous)
    # Chat rules alone would let a text-only stream cut by length through; the Responses API
    # promises a completed response, so the gate refuses it.
    assert error is not None and error.reason is R.RESPONSE_INCOMPLETE
    assert "response.completed" not in collect(events)[2]


# ---- litellm's own errors, limits and the policy on the Responses API ---------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_http_error_before_the_response_is_litellms_typed_error(
    upstream: FakeUpstream, asynchronous: bool, stream: bool
) -> None:
    upstream.enqueue(
        Scripted(
            b'{"error": {"message": "slow down", "type": "rate_limit"}}',
            status=429,
            content_type="application/json",
        )
    )
    kwargs = {
        "model": "openai/gpt-4o-mini",
        "input": "go",
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": stream,
        "num_retries": 0,
    }
    with pytest.raises(litellm.RateLimitError):
        if asynchronous:
            asyncio.run(GATE.aresponses(**kwargs))
        else:
            GATE.responses(**kwargs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_non_streamed_limits_and_policy(upstream: FakeUpstream, asynchronous: bool) -> None:
    from litellm_toolgate import Limits, PolicyDecision

    def run_with(gate: ToolGate, body: bytes) -> ToolCallQuarantined:
        upstream.enqueue(Scripted(body, content_type="application/json"))
        kwargs = {
            "model": "openai/gpt-4o-mini",
            "input": "go",
            "api_base": upstream.base_url,
            "api_key": "sk-test",
            "num_retries": 0,
        }
        with pytest.raises(ToolCallQuarantined) as info:
            if asynchronous:
                asyncio.run(gate.aresponses(**kwargs))
            else:
                gate.responses(**kwargs)
        return info.value

    small = ToolGate(MANIFEST["tools"], limits=Limits(max_body_bytes=200))
    assert run_with(small, response_body()).reason is R.BODY_TOO_LARGE

    async def deny_async(call: Any) -> PolicyDecision:
        return PolicyDecision.deny("not today")

    def deny(call: Any) -> PolicyDecision:
        return PolicyDecision.deny("not today")

    strict = ToolGate(MANIFEST["tools"], policy=deny_async if asynchronous else deny)
    error = run_with(strict, response_body())
    assert error.reason is R.POLICY_DENIED
    assert [r.policy_reason for r in error.records] == ["not today"]
