"""The Responses API through ``ToolGateGuardrail`` in ``litellm.callbacks``, on loopback.

``litellm.aresponses`` is gated like ``litellm.acompletion``: the pre-call deployment hook puts
in the gate's client, which withholds on the wire. Native route (``openai/`` with an
``api_base``; the wire is Responses SSE, ``fixtures/responses``): every fixture, streamed,
must end as the manifest says: the calls released (their events arriving only after the
wire validated), or litellm's error with the quarantine of the manifest's reason behind it
and not one function-call event delivered. Bridged route (``cometapi/``; the wire is chat
SSE): a sample of ``fixtures/chat``. Whole responses on both routes are checked by the
deployment success hook. Sync ``litellm.responses`` is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import copy
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, body_of, expected, no_leak
from conftest import CASES as CHAT_CASES
from conftest import MANIFEST as CHAT_MANIFEST

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
SPLIT = [1, 7, 13, 2, 64]
CALL_EVENTS = {"response.function_call_arguments.delta", "response.function_call_arguments.done"}


def kind(event: Any) -> str:
    value = getattr(event, "type", None)
    return str(getattr(value, "value", value))


def field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def is_call_event(event: Any) -> bool:
    item = getattr(event, "item", None)
    return kind(event) in CALL_EVENTS or (
        kind(event).startswith("response.output_item.") and field(item, "type") == "function_call"
    )


def released_calls(events: list[Any]) -> list[dict[str, Any]]:
    return [
        {k: field(e.item, k) for k in ("call_id", "name", "arguments")}
        for e in events
        if kind(e) == "response.output_item.done" and is_call_event(e)
    ]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    """litellm copies ``litellm.callbacks`` into lists of its own; take the gates out of all."""
    yield
    from litellm_toolgate.edge.sync import claiming as synccall

    assert len(synccall.CLAIMS) == 0, "a sync call's claim was left behind"
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def install(tools: list[dict[str, Any]]) -> ToolGateGuardrail:
    gate = ToolGateGuardrail(tools)
    litellm.callbacks = [gate]
    return gate


def kwargs_for(upstream: FakeUpstream, model: str, tools: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": tools,
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


async def stream(kwargs: dict[str, Any]) -> tuple[list[Any], BaseException | None]:
    events: list[Any] = []
    try:
        async for event in await litellm.aresponses(stream=True, **kwargs):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


def sync_stream(kwargs: dict[str, Any]) -> tuple[list[Any], BaseException | None]:
    events: list[Any] = []
    try:
        for event in litellm.responses(stream=True, **kwargs):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


def run_stream(mode: str, kwargs: dict[str, Any]) -> tuple[list[Any], BaseException | None]:
    return asyncio.run(stream(kwargs)) if mode == "async" else sync_stream(kwargs)


def check(
    outcome: str,
    reason: str | None,
    want_calls: list[dict[str, Any]],
    events: list[Any],
    error: BaseException | None,
) -> None:
    kinds = [kind(e) for e in events]
    if outcome == "release":
        assert error is None, f"refused: {error!r}"
        assert released_calls(events) == want_calls
        assert kinds[-1] == "response.completed"
        return
    assert error is not None, f"released {released_calls(events)!r}"
    # The quarantine itself reaches the caller, through litellm, in its family.
    assert isinstance(error, R(reason).family), repr(error)
    assert find_quarantine(error) is error
    assert error.reason is R(reason), (error.reason, reason)
    assert not [e for e in events if is_call_event(e)], "a function-call event leaked"
    assert "response.completed" not in kinds
    no_leak(error, records=False)


# Cases recorded for another route's profile run in the core tests under that route.
NATIVE = sorted(n for n, c in CASES.items() if c.get("route", "openai/").startswith("openai/"))


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("name", NATIVE)
def test_native_stream(upstream: FakeUpstream, name: str, mode: str) -> None:
    case = CASES[name]
    install(MANIFEST["tools"])
    data = (FIXTURES / case["body"]).read_bytes()
    # Half the cases arrive in odd pieces (cut inside events and UTF-8), half whole.
    upstream.enqueue(Scripted(data, chunk_sizes=SPLIT if len(name) % 2 else None))
    events, error = run_stream(mode, kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"]))
    check(case["expect"], case.get("reason"), case.get("calls", []), events, error)
    assert upstream.requests[-1].get("input") is not None  # it went to /responses natively


# A sample of the chat fixtures through litellm's bridge: the wire is chat SSE.
BRIDGED = [
    "multiply_basic",
    "text_only",
    "two_tools_interleaved",
    "args_invalid_json",
    "args_duplicate_key",
    "schema_wrong_type",
    "unknown_tool",
    "calls_with_finish_stop",
]


@pytest.mark.parametrize("mode", ["async", "sync"])
@pytest.mark.parametrize("name", BRIDGED)
def test_bridged_stream(upstream: FakeUpstream, name: str, mode: str) -> None:
    case = CHAT_CASES[name]
    override = MANIFEST["bridged"]["overrides"].get(name)
    outcome, reason = (override["expect"], override.get("reason")) if override else expected(case)
    install(CHAT_MANIFEST["tools"])
    upstream.enqueue(Scripted(body_of(case), chunk_sizes=SPLIT))
    events, error = run_stream(
        mode, kwargs_for(upstream, "cometapi/gpt-4o-mini", CHAT_MANIFEST["tools"])
    )
    want = [
        {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case.get("calls", [])
    ]
    check(outcome, reason, want, events, error)
    assert upstream.requests[-1].get("messages") is not None  # it went to chat completions


ITEM = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "multiply",
    "arguments": '{"a": 7, "b": 8}',
}


def native_body(status: str = "completed", item: dict[str, Any] = ITEM) -> bytes:
    return json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1767225600,
            "status": status,
            "model": "gpt-4o-mini",
            "output": [item],
        }
    ).encode()


def chat_body(arguments: str, finish: str = "tool_calls") -> bytes:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1767225600,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
    ).encode()


async def whole(kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    try:
        return await litellm.aresponses(**kwargs), None
    except Exception as exc:
        return None, exc


BAD_ARGS = '{"a": 7, "b": "' + CANARY


@pytest.mark.parametrize(
    ("model", "body", "reason"),
    [
        ("openai/gpt-4o-mini", native_body(), None),
        ("openai/gpt-4o-mini", native_body("incomplete"), R.RESPONSE_INCOMPLETE),
        ("openai/gpt-4o-mini", native_body(item={**ITEM, "arguments": BAD_ARGS}), R.INVALID_JSON),
        ("openai/gpt-4o-mini", native_body(item={**ITEM, "name": "rm_rf"}), R.UNKNOWN_TOOL),
        ("cometapi/gpt-4o-mini", chat_body('{"a": 7, "b": 8}'), None),
        ("cometapi/gpt-4o-mini", chat_body(BAD_ARGS), R.INVALID_JSON),
        ("cometapi/gpt-4o-mini", chat_body('{"a": 7, "b": 8}', "length"), R.FINISH_REASON_MISMATCH),
    ],
    ids=[
        "native-ok",
        "native-incomplete",
        "native-json",
        "native-unknown",
        "bridged-ok",
        "bridged-json",
        "bridged-length",
    ],
)
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_whole_response(
    upstream: FakeUpstream, model: str, body: bytes, reason: R | None, mode: str
) -> None:
    install(MANIFEST["tools"])
    upstream.enqueue(Scripted(body, content_type="application/json"))
    kwargs = kwargs_for(upstream, model, MANIFEST["tools"])
    if mode == "async":
        response, error = asyncio.run(whole(kwargs))
    else:
        response, error = None, None
        try:
            response = litellm.responses(**kwargs)
        except Exception as exc:
            error = exc
    if reason is None:
        assert error is None, repr(error)
        calls = [(i.call_id, i.arguments) for i in response.output if i.type == "function_call"]
        assert calls == [("call_1", '{"a": 7, "b": 8}')]
        return
    assert response is None and error is not None
    assert isinstance(error, reason.family) and error.reason is reason, repr(error)
    assert find_quarantine(error) is error
    no_leak(error, records=False)


def test_tool_gate_responses_still_works_beside_the_callback(upstream: FakeUpstream) -> None:
    """``ToolGate.responses`` gates its sync call itself: the callback lets it through."""
    install(MANIFEST["tools"])
    case = CASES["multiply_basic"]
    upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes()))
    gate = ToolGate(MANIFEST["tools"])
    kwargs = kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"])
    events = list(gate.responses(stream=True, **kwargs))
    assert released_calls(events) == case["calls"]
    upstream.enqueue(Scripted((FIXTURES / CASES["unknown_tool"]["body"]).read_bytes()))
    with pytest.raises(ToolCallQuarantined):
        list(gate.responses(stream=True, **kwargs))

    async def gated_async() -> list[Any]:
        return [event async for event in await gate.aresponses(stream=True, **kwargs)]

    # Async, the callback's client wraps the gate's own: both gate, the result is the same.
    upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes()))
    assert released_calls(asyncio.run(gated_async())) == case["calls"]
    upstream.enqueue(Scripted((FIXTURES / CASES["unknown_tool"]["body"]).read_bytes()))
    with pytest.raises(Exception) as caught:
        asyncio.run(gated_async())
    assert find_quarantine(caught.value) is not None


def test_text_passes_live_and_calls_wait_for_the_wire(upstream: FakeUpstream) -> None:
    """Text events reach the caller before the body ended; call events only after it did."""
    install(MANIFEST["tools"])
    case = CASES["multiply_basic"]
    data = (FIXTURES / case["body"]).read_bytes()
    cut = data.index(b"function_call_arguments.delta")
    upstream.enqueue(Scripted(data, stall_after=cut))
    seen: list[str] = []

    async def go() -> None:
        async for event in await litellm.aresponses(
            stream=True, **kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"])
        ):
            seen.append(kind(event))
            if kind(event) == "response.output_text.delta":
                return  # text arrived while the upstream was still silent mid-call

    asyncio.run(asyncio.wait_for(go(), timeout=20))
    assert "response.output_text.delta" in seen
    assert not [k for k in seen if k in CALL_EVENTS]


def test_the_fake_upstream_of_the_proxy_examples_answers_natively() -> None:
    """``toolgate fake-upstream`` serves the examples' native model: gated, and broken refused."""
    from litellm_toolgate.demo.serve import demo_answer

    install(MANIFEST["tools"])
    with FakeUpstream(demo_answer) as server:
        base = kwargs_for(server, "openai/gpt-4o-mini", MANIFEST["tools"])
        events, error = asyncio.run(stream(base))
        assert error is None and [c["name"] for c in released_calls(events)] == ["multiply"]
        whole_response, error = asyncio.run(whole(base))
        assert error is None
        assert [i.name for i in whole_response.output if i.type == "function_call"] == ["multiply"]
        events, error = asyncio.run(stream({**base, "input": "broken, please"}))
        assert find_quarantine(error) is not None
        assert not [e for e in events if is_call_event(e)]


# ---- route profiles and chat n > 1 under the callback ------------------------------------------
PROFILES_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "profiles"
PROFILE_CASES = json.loads((PROFILES_DIR / "manifest.json").read_text(encoding="utf-8"))["cases"]
MULTIPLY_TOOL = CHAT_MANIFEST["tools"][:1]


async def chat_stream(kwargs: dict[str, Any]) -> tuple[list[Any], BaseException | None]:
    chunks: list[Any] = []
    try:
        async for chunk in await litellm.acompletion(stream=True, **kwargs):
            chunks.append(chunk)
    except Exception as exc:
        return chunks, exc
    return chunks, None


def chat_kwargs(upstream: FakeUpstream, model: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        # A copy: litellm's mistral/ route edits the tools it is given (it drops
        # additionalProperties), and these are the shared manifest's.
        "tools": copy.deepcopy(MULTIPLY_TOOL),
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


def call_ids(chunks: list[Any]) -> list[str]:
    return [c.id for chunk in chunks for c in (chunk.choices[0].delta.tool_calls or []) if c.id]


@pytest.mark.parametrize("case", PROFILE_CASES, ids=lambda c: c["name"])
def test_profile_shapes_under_the_callback(upstream: FakeUpstream, case: dict[str, Any]) -> None:
    install(MULTIPLY_TOOL)
    body = (PROFILES_DIR / case["body"]).read_bytes()
    # The forced-choice shape is cited for hosted_vllm/ too, and that route's client is
    # litellm's own HTTP handler on both versions.
    route = "hosted_vllm/qwen3" if case["route"].startswith("openai/") else case["route"]
    extra = case.get("request", {})
    upstream.enqueue(Scripted(body, chunk_sizes=SPLIT))
    chunks, error = asyncio.run(chat_stream(chat_kwargs(upstream, route, **extra)))
    assert error is None, error
    want = [] if case["name"] == "mistral_content_parts" else ["call_forced", "Dq1"]
    assert [i for i in call_ids(chunks) if i in want] == [i for i in want if i in body.decode()]
    upstream.enqueue(Scripted(body, chunk_sizes=SPLIT))
    chunks, error = asyncio.run(chat_stream(chat_kwargs(upstream, "cometapi/gpt-4o", **extra)))
    found = find_quarantine(error)
    assert found is not None and found.reason is R(case["strict"])
    assert call_ids(chunks) == []


def test_n_greater_than_one_under_the_callback_is_refused_unsent(upstream: FakeUpstream) -> None:
    """On a wire that streams one answer (gated choice by choice on chat completions:
    tests/test_gate_choices.py)."""
    install(MULTIPLY_TOOL)
    before = len(upstream.requests)
    model = "anthropic/claude-sonnet-4-5"
    chunks, error = asyncio.run(chat_stream(chat_kwargs(upstream, model, n=2)))
    found = find_quarantine(error)
    assert found is not None and found.reason is R.UNSUPPORTED_REQUEST
    assert chunks == [] and len(upstream.requests) == before


def test_a_gate_made_after_litellm_cached_a_client_gates_the_first_sync_call(
    upstream: FakeUpstream,
) -> None:
    """litellm's sync Responses route takes its cached client before any hook runs and hands
    the stream over with no later hook: the gate drops clients built without its transport
    when it is made, so even the first sync call after that is claimed and gated."""
    saved = getattr(litellm, "sync_transport", None)
    litellm.callbacks = []
    litellm.sync_transport = None  # type: ignore[attr-defined]
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        ok = CASES["multiply_basic"] if "multiply_basic" in CASES else CASES[NATIVE[0]]
        upstream.enqueue(Scripted((FIXTURES / ok["body"]).read_bytes()))
        sync_stream(kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"]))
        install(MANIFEST["tools"])
        case = CASES["apply_patch_bad_diff"]
        upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes()))
        events, error = sync_stream(kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"]))
        check(case["expect"], case.get("reason"), [], events, error)
    finally:
        litellm.callbacks = []
        litellm.sync_transport = saved  # type: ignore[attr-defined]
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.fixture
def route_lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every lookup of the project's ``route_for`` (the route table checked against litellm)
    from here on, by the name of the function that asked, wherever a module of the gate
    holds it."""
    from litellm_toolgate.edge import routes

    original = routes.route_for
    asked: list[str] = []

    def counted(request: Any, api: Any, **kw: Any) -> Any:
        assert api.value == "responses", api
        asked.append(sys._getframe(1).f_code.co_name)
        return original(request, api, **kw)

    for name, module in list(sys.modules.items()):
        if name.startswith("litellm_toolgate") and getattr(module, "route_for", None) is original:
            monkeypatch.setattr(module, "route_for", counted)
    return asked


# The route lookups of one Responses call through the callback. Async: the pre-call hook
# asks once and hands the route to the replay check and the client's kind. Sync: the call's
# set-up asks of the call's own arguments (a refusal there reaches the caller as it is) and
# log_pre_api_call of the deployment's (its base_model, model_info), which arms the call:
# once each.
ROUTE_LOOKUPS = {"async": 1, "sync": 2}


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
@pytest.mark.parametrize("mode", ["async", "sync"])
def test_a_responses_call_asks_its_route_once_a_hook(
    upstream: FakeUpstream, route_lookups: list[str], mode: str, streamed: bool
) -> None:
    install(MANIFEST["tools"])
    kwargs = kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"])
    if streamed:
        upstream.enqueue(Scripted((FIXTURES / CASES["multiply_basic"]["body"]).read_bytes()))
        events, error = run_stream(mode, kwargs)
        assert error is None, repr(error)
        assert released_calls(events)
    else:
        upstream.enqueue(Scripted(native_body(), content_type="application/json"))
        if mode == "async":
            response, error = asyncio.run(whole(kwargs))
        else:
            response, error = litellm.responses(**kwargs), None
        assert error is None, repr(error)
        assert [i.call_id for i in response.output if i.type == "function_call"] == ["call_1"]
    assert upstream.requests[-1].get("input") is not None  # it went to /responses natively
    assert len(route_lookups) == ROUTE_LOOKUPS[mode], route_lookups
