"""The Responses API where litellm replays a whole result as the stream, on loopback.

On ``xai/``, ``openrouter/``, ``hosted_vllm/``, ``fireworks_ai/``, ``databricks/`` (GPT
models) and ``openai/``, litellm asks the upstream for a whole Responses result (no
``stream`` in the request) for a model its model map does not say streams natively, and
replays that result to the caller as events (its mock streaming iterator; 1.108.7 and
1.110.2 alike). The wire is then that whole body: the gate decides on it while litellm's
request reads it, before litellm makes one event of it. Each route, through ``ToolGate``
and through the callback, sync and async, streamed (replayed) and whole: a valid body's
call is released as the wire holds it, and every broken one is quarantined with no event
of a call handed out, its reason typed, its arguments in no error text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CANARY, body_of, no_leak
from conftest import CASES as CHAT_CASES
from routeserver import RouteServer

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.edge.routes import Api, route_for
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

R = QuarantineReason
TOOLS = [
    {
        "type": "function",
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    }
]
ARGS = '{"a": 7, "b": 8}'
ITEM = {
    "id": "fc_1",
    "type": "function_call",
    "status": "completed",
    "call_id": "call_1",
    "name": "multiply",
    "arguments": ARGS,
}
TEXT = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Multiplying.", "annotations": []}],
}
# Models litellm's model map does not say stream natively: litellm replays a whole result.
MODELS = {
    "xai": "xai/grok-replayed",
    "openrouter": "openrouter/acme/replayed-model",
    "hosted_vllm": "hosted_vllm/my-model",
    "fireworks_ai": "fireworks_ai/accounts/fireworks/models/my-model",
    "databricks": "databricks/gpt-replayed",
    "openai": "openai/my-model",
}


def body(status: str = "completed", item: dict[str, Any] | None = None) -> bytes:
    obj = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "model": "m",
        "output": [TEXT, ITEM if item is None else item],
    }
    return json.dumps(obj).encode()


BROKEN = {
    "invalid_json": (body(item={**ITEM, "arguments": '{"a": 7, "b": "' + CANARY}), R.INVALID_JSON),
    "duplicate_key": (
        body(item={**ITEM, "arguments": '{"a": 7, "a": 8, "b": "' + CANARY + '"}'}),
        R.DUPLICATE_KEY,
    ),
    "schema_invalid": (
        body(item={**ITEM, "arguments": '{"a": "' + CANARY + '", "b": 8}'}),
        R.SCHEMA_INVALID,
    ),
    "unknown_tool": (body(item={**ITEM, "name": "rm_rf"}), R.UNKNOWN_TOOL),
    "incomplete": (body("incomplete"), R.RESPONSE_INCOMPLETE),
    "bad_body": (b'{"id": "resp_1", "output": [' + CANARY.encode(), None),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    yield
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def _kind(event: Any) -> str:
    kind = getattr(event, "type", "")
    return str(getattr(kind, "value", kind))


def _is_call_event(event: Any) -> bool:
    item = getattr(event, "item", None)
    return "function_call" in _kind(event) or getattr(item, "type", None) == "function_call"


def _call(entry: str, mode: str, kwargs: dict[str, Any]) -> tuple[Any, BaseException | None]:
    """(events handed out, or the whole result; the exception raised, if any)."""
    gate = ToolGate(TOOLS) if entry == "toolgate" else None
    if gate is None:
        litellm.callbacks = [ToolGateGuardrail(TOOLS)]
    sync_call = litellm.responses if gate is None else gate.responses
    async_call = litellm.aresponses if gate is None else gate.aresponses
    events: list[Any] = []

    async def run_async() -> Any:
        result = await async_call(**kwargs)
        if not kwargs["stream"]:
            return result
        async for event in result:
            events.append(event)
        return events

    def run_sync() -> Any:
        result = sync_call(**kwargs)
        if not kwargs["stream"]:
            return result
        for event in result:
            events.append(event)
        return events

    try:
        return (asyncio.run(run_async()) if mode == "async" else run_sync()), None
    except Exception as exc:
        return events, exc


def _released(result: Any, stream: bool) -> list[tuple[str, str]]:
    if stream:
        return [
            (e.item.call_id, e.item.arguments)
            for e in result
            if _kind(e) == "response.output_item.done" and _is_call_event(e)
        ]
    return [(i.call_id, i.arguments) for i in result.output if i.type == "function_call"]


@pytest.mark.parametrize("stream", [True, False], ids=["replayed", "whole"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("entry", ["toolgate", "callback"])
@pytest.mark.parametrize("route", sorted(MODELS))
def test_a_replayed_whole_result_is_decided_before_litellm_replays_it(
    upstream: FakeUpstream, route: str, entry: str, mode: str, stream: bool
) -> None:
    model = MODELS[route]
    if stream:  # the premise: litellm replays this call (route_for asks litellm itself)
        assert route_for({"model": model, "stream": True}, Api.RESPONSES).replayed
    kwargs = {
        "model": model,
        "input": "What is 7 times 8?",
        "tools": TOOLS,
        "stream": stream,
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
    }
    upstream.enqueue(Scripted(body(), content_type="application/json"))
    result, error = _call(entry, mode, dict(kwargs))
    assert error is None, repr(error)
    assert _released(result, stream) == [("call_1", ARGS)]
    sent = upstream.requests[-1]
    assert "stream" not in sent or sent["stream"] is False  # a whole result was asked for
    for name, (broken, reason) in BROKEN.items():
        upstream.enqueue(Scripted(broken, content_type="application/json"))
        events, error = _call(entry, mode, dict(kwargs))
        assert error is not None, f"{name}: released"
        fault = error if isinstance(error, ToolCallQuarantined) else find_quarantine(error)
        assert fault is not None, f"{name}: {error!r}"
        if reason is not None:
            assert fault.reason is reason, name
        if stream:
            assert not any(_is_call_event(e) for e in events), f"{name}: a call event went out"
        no_leak(error)


# ---- custom_openai/: litellm bridges the Responses API to its chat call ------------------------
def _chat_whole(arguments: str) -> bytes:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": arguments},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    obj = {"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [choice]}
    return json.dumps(obj).encode()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("entry", "mode"),
    [("toolgate", "sync"), ("toolgate", "async"), ("callback", "async"), ("callback", "sync")],
)
def test_custom_openai_responses_are_bridged_to_chat_and_gated(
    entry: str, mode: str, stream: bool
) -> None:
    """litellm has no Responses config for custom_openai/ (1.108.7, 1.110.2): it makes a chat
    call with the OpenAI SDK client, as on cerebras/. A sync call under the callback is
    refused unsent there, as on every bridged OpenAI SDK route."""
    good = (body_of(CHAT_CASES["multiply_basic"]), _chat_whole(ARGS))
    broken = (body_of(CHAT_CASES["args_invalid_json"]), _chat_whole('{"a": 7, "b": "' + CANARY))
    for sse, whole in (good, broken):
        answers = {"/chat/completions": sse}
        with RouteServer(answers=answers, wholes={"/chat/completions": whole}) as server:
            kwargs = {
                "model": "custom_openai/gpt-4o-mini",
                "input": "What is 7 times 8?",
                "tools": TOOLS,
                "stream": stream,
                "api_base": server.base_url,
                "api_key": "sk-test",
                "num_retries": 0,
            }
            result, error = _call(entry, mode, kwargs)
            if entry == "callback" and mode == "sync":
                assert isinstance(error, UngatedCallRefused), repr(error)
                assert server.requests == []
                continue
            assert [r.path for r in server.requests] == ["/v1/chat/completions"]
        if sse is good[0]:
            assert error is None, repr(error)
            assert [a for _, a in _released(result, stream)] == [ARGS]
        else:
            fault = error if isinstance(error, ToolCallQuarantined) else find_quarantine(error)
            assert fault is not None and fault.reason is R.INVALID_JSON, repr(error)
            if stream:
                assert not any(_is_call_event(e) for e in result)
            no_leak(error)


# ---- azure_ai/: native (and replayed) only on an Azure OpenAI v1 host -------------------------
AZURE_BASE = "https://toolgate-test.openai.azure.com/openai/v1"


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("entry", ["toolgate", "callback"])
def test_azure_ai_replays_on_an_azure_host_and_is_decided_whole(
    entry: str, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """litellm has a Responses config for ``azure_ai/`` only where the ``api_base`` is an Azure
    OpenAI v1 host (1.108.7, 1.110.2; elsewhere it bridges to chat, as the route matrix
    shows): a model it does not know is replayed there. respx at the httpx edge stands for
    the host."""
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", True)
    model = "azure_ai/my-model"
    kwargs = {
        "model": model,
        "input": "What is 7 times 8?",
        "tools": TOOLS,
        "stream": True,
        "api_base": AZURE_BASE,
        "api_key": "k",
        "num_retries": 0,
    }
    assert route_for(kwargs, Api.RESPONSES).replayed
    cases = [("good", body(), None), *[(n, b, r) for n, (b, r) in BROKEN.items()]]
    for name, answer, reason in cases:
        with respx.mock(assert_all_called=False) as mock:
            reply = httpx.Response(
                200, content=answer, headers={"content-type": "application/json"}
            )
            route = mock.post(url__regex=r".*/openai/v1/responses.*").mock(return_value=reply)
            events, error = _call(entry, mode, dict(kwargs))
            assert [json.loads(c.request.content).get("stream") for c in route.calls] == [None]
        if reason is None and name == "good":
            assert error is None, repr(error)
            assert _released(events, True) == [("call_1", ARGS)]
            continue
        assert error is not None, f"{name}: released"
        fault = error if isinstance(error, ToolCallQuarantined) else find_quarantine(error)
        assert fault is not None, f"{name}: {error!r}"
        if reason is not None:
            assert fault.reason is reason, name
        assert not any(_is_call_event(e) for e in events), f"{name}: a call event went out"
        no_leak(error)
