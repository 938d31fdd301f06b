"""The route matrix: every litellm route either gated exactly or refused before sending.

(Each call gets its own copy of the tools: litellm 1.108.7 edits a request's tool schemas in
place on some routes.)

For each provider prefix, sync and async, chat completions and the Responses API, a loopback
upstream serves a good and a broken stream in that route's wire (chosen by the path litellm
calls: chat SSE on ``/chat/completions``, Responses SSE on ``/responses``). Exactly one of
two outcomes is allowed, and it must be the one the route table (``edge/routes.py``) says:

* **gated**: the good stream's tool calls come out byte for byte, the broken one is
  quarantined with not one tool-call fragment handed out;
* **refused**: :class:`RouteNotGated` naming the route and the reason, and the upstream got
  no request at all.

Anything else (an exception from inside litellm, a release the gate did not decide, a route
refused after sending) fails. The table's own properties (an unknown provider is refused, the
``toolgate routes`` command prints it) are tested at the end.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CASES as CHAT_CASES
from conftest import MANIFEST as CHAT_MANIFEST
from conftest import RecordingObserver, body_of
from routeserver import RouteServer
from vertexauth import CLAUDE_MODEL, GEMINI_MODEL, TOKENS, new_credentials, vertex_args

from litellm_toolgate import (
    Party,
    QuarantineReason,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGate,
    WireNotObservable,
)
from litellm_toolgate.edge.logs import observers
from litellm_toolgate.edge.routes import ROUTES, Api, ClientKind, Gated, route_for

litellm.suppress_debug_info = True
# litellm looks up Hugging Face tokenizers for some models (retrying for seconds offline).
os.environ.setdefault("HF_HUB_OFFLINE", "1")
RESPONSES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
RESP_MANIFEST = json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))
RESP_CASES = {c["name"]: c for c in RESP_MANIFEST["cases"]}

# The routes of the matrix: litellm model string and the extra arguments that route needs.
MODELS: dict[str, tuple[str, dict[str, Any]]] = {
    "openai": ("openai/gpt-4o-mini", {}),
    "azure": ("azure/gpt-4o-mini", {"api_version": "2024-10-21"}),
    "azure_ai": ("azure_ai/mistral-large-2407", {}),
    "cometapi": ("cometapi/gpt-4o-mini", {}),
    "openrouter": ("openrouter/openai/gpt-4o-mini", {}),
    "groq": ("groq/llama-3.3-70b-versatile", {}),
    "deepseek": ("deepseek/deepseek-chat", {}),
    "xai": ("xai/grok-3", {}),
    "mistral": ("mistral/mistral-large-latest", {}),
    "together_ai": ("together_ai/meta-llama/Llama-3.3-70B-Instruct-Turbo", {}),
    "fireworks_ai": ("fireworks_ai/accounts/fireworks/models/llama-v3p1-70b-instruct", {}),
    "hosted_vllm": ("hosted_vllm/my-model", {}),
    "ollama_chat": ("ollama_chat/llama3.1", {}),
    # litellm refuses tools for Perplexity unless told to drop them.
    "perplexity": ("perplexity/sonar", {"drop_params": True}),
    "cerebras": ("cerebras/llama3.1-8b", {}),
    "anthropic": ("anthropic/claude-3-5-sonnet-20241022", {}),
    "gemini": ("gemini/gemini-1.5-pro", {}),
    # vertex_ai/ with a Google token from a loopback token endpoint (tests/vertexauth.py).
    "vertex_ai": (GEMINI_MODEL, vertex_args()),
    "bedrock": (
        "bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0",
        {
            "aws_access_key_id": "AKIDEXAMPLE",
            "aws_secret_access_key": "x",
            "aws_region_name": "us-east-1",
        },
    ),
    "cohere": ("cohere/command-r", {}),
    "databricks": ("databricks/my-endpoint", {}),
    # token=: litellm takes it as the bearer token and asks IBM's IAM for none.
    "watsonx": ("watsonx/ibm/granite-13b-chat-v2", {"project_id": "p", "token": "tok"}),
    "litellm_proxy": ("litellm_proxy/gpt-4o-mini", {}),
    "custom_openai": ("custom_openai/gpt-4o-mini", {}),
}
# Also: an OpenAI model on azure_ai is litellm's azure route; vertex_ai/ gates Claude (on
# Anthropic's wire) and refuses its other partner models.
MODELS["azure_ai:openai-model"] = ("azure_ai/gpt-4o", {"api_version": "2024-10-21"})
MODELS["vertex_ai:claude"] = (CLAUDE_MODEL, vertex_args())
MODELS["vertex_ai:mistral"] = ("vertex_ai/mistral-large@2407", vertex_args())
# A deployment named otherwise whose base_model is a Gemini model: litellm sends it to
# generateContent (its base_model rule), and the gate judges it as the Gemini model it is.
MODELS["vertex_ai:base_model"] = (
    "vertex_ai/my-tuned-endpoint",
    {**vertex_args(), "base_model": "vertex_ai/gemini-2.5-flash"},
)
ROWS = [*MODELS]

ANTHROPIC = RESPONSES.parent / "anthropic"
OLLAMA = RESPONSES.parent / "ollama"
GEMINI = RESPONSES.parent / "gemini"
BEDROCK = RESPONSES.parent / "bedrock"
WATSONX = RESPONSES.parent / "watsonx"
GOOD = {
    "/chat/completions": body_of(CHAT_CASES["multiply_basic"]),
    "/responses": (RESPONSES / RESP_CASES["multiply_basic"]["body"]).read_bytes(),
    "/messages": (ANTHROPIC / "multiply_basic.sse").read_bytes(),
    "/api/chat": (OLLAMA / "multiply_basic.ndjson").read_bytes(),
    ":streamGenerateContent": (GEMINI / "multiply_basic.sse").read_bytes(),
    "/converse-stream": (BEDROCK / "multiply_basic.eventstream").read_bytes(),
    ":streamRawPredict": (ANTHROPIC / "multiply_basic.sse").read_bytes(),  # Claude on Vertex
    "/text/chat_stream": (WATSONX / "multiply_basic.sse").read_bytes(),  # watsonx.ai
}
BROKEN = {
    "/chat/completions": body_of(CHAT_CASES["args_invalid_json"]),
    "/responses": (RESPONSES / RESP_CASES["arguments_trailing_data"]["body"]).read_bytes(),
    "/messages": (ANTHROPIC / "arguments_truncated.sse").read_bytes(),
    # Ollama's arguments arrive as an object, never as text that fails to parse: its broken
    # recording is a call cut by the length limit.
    "/api/chat": (OLLAMA / "length_after_call.ndjson").read_bytes(),
    # Gemini's too (an object, not text): a call cut by the token limit.
    ":streamGenerateContent": (GEMINI / "call_then_max_tokens.sse").read_bytes(),
    "/converse-stream": (BEDROCK / "arguments_cut.eventstream").read_bytes(),
    ":streamRawPredict": (ANTHROPIC / "arguments_truncated.sse").read_bytes(),
    "/text/chat_stream": (WATSONX / "arguments_truncated.sse").read_bytes(),
}


def _whole(case: str) -> bytes:
    """The whole Responses body of a recording: its ``response.completed`` event's response
    (what litellm asks for where it replays a whole result as a stream)."""
    body = (RESPONSES / RESP_CASES[case]["body"]).read_text(encoding="utf-8")
    for line in body.splitlines():
        if line.startswith("data: ") and '"response.completed"' in line:
            return json.dumps(json.loads(line[6:])["response"]).encode()
    raise AssertionError(f"{case}: no response.completed")


WHOLE_GOOD = {"/responses": _whole("multiply_basic")}
WHOLE_BROKEN = {"/responses": _whole("arguments_trailing_data")}
CONTENT_TYPES = {
    "/api/chat": "application/x-ndjson",
    "/converse-stream": "application/vnd.amazon.eventstream",
}
GATE = ToolGate(CHAT_MANIFEST["tools"])


@pytest.fixture(scope="module")
def server() -> Iterator[RouteServer]:
    with RouteServer(content_types=CONTENT_TYPES) as upstream:
        yield upstream


def _call(row: str, api: Api, base: str, asynchronous: bool) -> list[Any]:
    model, extra = MODELS[row]
    kwargs: dict[str, Any] = {
        "model": model,
        "api_base": base,
        "api_key": "sk-test",
        "stream": True,
        "num_retries": 0,
        **extra,
    }
    if api is Api.CHAT:
        kwargs.update(
            messages=[{"role": "user", "content": "7 x 8?"}],
            tools=copy.deepcopy(CHAT_MANIFEST["tools"]),
        )
        call, acall = GATE.completion, GATE.acompletion
    else:
        tools = copy.deepcopy(RESP_MANIFEST["tools"])
        if row in ("anthropic", "vertex_ai:claude"):
            # litellm's Anthropic translation refuses the other tool types before sending.
            tools = [t for t in tools if t["type"] == "function"]
        kwargs.update(input="7 x 8?", tools=tools)
        call, acall = GATE.responses, GATE.aresponses
    if not asynchronous:
        return list(call(**kwargs))

    async def go() -> list[Any]:
        return [item async for item in await acall(**kwargs)]

    return asyncio.run(go())


def _released(items: list[Any], api: Api) -> list[tuple[str, str]]:
    """(name, arguments) of every tool call the caller was handed."""
    if api is Api.CHAT:
        calls: dict[int, list[str]] = {}
        for chunk in items:
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    name, args = calls.setdefault(tc.index, ["", ""])
                    calls[tc.index] = [
                        name + (tc.function.name or ""),
                        args + (tc.function.arguments or ""),
                    ]
        return [(n, a) for n, a in (calls[i] for i in sorted(calls))]
    out = []
    for event in items:
        kind = str(getattr(getattr(event, "type", ""), "value", getattr(event, "type", "")))
        item = getattr(event, "item", None)
        if kind == "response.output_item.done" and _field(item, "type") == "function_call":
            out.append((_field(item, "name"), _field(item, "arguments")))
    return out


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _fragments(items: list[Any], api: Api) -> bool:
    """Whether any tool-call fragment at all reached the caller."""
    if api is Api.CHAT:
        return any(c.delta.tool_calls for chunk in items for c in chunk.choices)
    return any(
        "function_call" in str(getattr(e, "type", ""))
        or ("function_call" in json.dumps(getattr(e, "item", None) or {}, default=str))
        for e in items
    )


def _route(row: str) -> dict[str, Any]:
    """What route_for reads of the row's call (its model, api_base, base_model and stream:
    the matrix's calls are streamed)."""
    model, extra = MODELS[row]
    return {"model": model, "api_base": "http://127.0.0.1:1/v1", "stream": True, **extra}


def _want(row: str, api: Api) -> list[tuple[str, str]]:
    gated = route_for(_route(row), api)
    if api is Api.RESPONSES and not gated.bridged:
        case = RESP_CASES["multiply_basic"]
    else:
        case = CHAT_CASES["multiply_basic"]
    return [(c["name"], c["arguments"]) for c in case["calls"]]


def _table_says_gated(row: str, api: Api) -> bool:
    try:
        route_for(_route(row), api)
    except RouteNotGated:
        return False
    return True


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", list(Api), ids=lambda a: a.value)
@pytest.mark.parametrize("row", ROWS)
def test_route_is_gated_exactly_or_refused_before_sending(
    server: RouteServer, row: str, api: Api, asynchronous: bool
) -> None:
    gated = _table_says_gated(row, api)
    outcomes = []
    for bodies in (GOOD, BROKEN):
        server.answers = dict(bodies)
        server.wholes = dict(WHOLE_GOOD if bodies is GOOD else WHOLE_BROKEN)
        server.requests.clear()
        items: list[Any] = []
        try:
            items = _call(row, api, server.base_url, asynchronous)
        except RouteNotGated as refused:
            assert not gated, f"{row} {api.value}: the table gates it, yet it was refused"
            assert server.requests == [], "a refused route sent a request"
            assert refused.party is Party.LOCAL and refused.status_code == 501
            assert refused.api == api.value and refused.reason in str(refused)
            assert f"'{ROUTES[refused.route].provider}'" in str(refused)
            outcomes.append("refused")
            continue
        except ToolCallQuarantined as fault:
            assert bodies is BROKEN, f"{row} {api.value}: good stream quarantined: {fault!r}"
            assert fault.reason in (
                QuarantineReason.INVALID_JSON,
                QuarantineReason.TRAILING_DATA,
                QuarantineReason.FINISH_REASON_MISMATCH,  # Ollama's and Gemini's (BROKEN)
            )
            assert not _fragments(items, api), "a tool-call fragment reached the caller"
            outcomes.append("quarantined")
            continue
        assert gated, f"{row} {api.value}: released on a route the table refuses"
        assert bodies is GOOD, f"{row} {api.value}: a broken stream was released"
        # litellm 1.108.7 asks Ollama about the model its response named (``/api/show``)
        # once the call is over: not the call's request.
        assert len([r for r in server.requests if not r.path.endswith("/api/show")]) == 1
        assert _released(items, api) == _want(row, api)
        outcomes.append("released")
    assert outcomes in (["released", "quarantined"], ["refused", "refused"]), outcomes


def test_every_matrix_route_is_in_the_table() -> None:
    providers = {r for r in MODELS if ":" not in r}
    assert providers <= set(ROUTES)


@pytest.mark.parametrize(
    ("model", "route"),
    [
        ("nosuchprovider/some-model", "nosuchprovider/some-model"),
        ("sambanova/Meta-Llama-3.1-8B-Instruct", "sambanova"),
    ],
    ids=["unknown-to-litellm", "not-in-the-table"],
)
def test_an_unknown_provider_is_refused_before_sending(model: str, route: str) -> None:
    with RouteServer(answers=dict(GOOD)) as server:
        with pytest.raises(RouteNotGated) as refused:
            list(GATE.completion(model=model, messages=[], api_base=server.base_url, stream=True))
        assert server.requests == []
    assert refused.value.route == route
    assert isinstance(refused.value, WireNotObservable)


def test_custom_llm_provider_picks_the_route() -> None:
    decision = route_for({"model": "my-model", "custom_llm_provider": "azure"}, Api.CHAT)
    assert isinstance(decision, Gated) and decision.client.name == "AZURE_SDK"
    # cohere/: whole calls, on litellm's own client (its handler drops client=); streams
    # refused.
    decision = route_for({"model": "my-model", "custom_llm_provider": "cohere"}, Api.CHAT)
    assert isinstance(decision, Gated) and decision.drops_client
    with pytest.raises(RouteNotGated) as refused:
        route_for({"model": "my-model", "custom_llm_provider": "cohere", "stream": True}, Api.CHAT)
    assert refused.value.route == "cohere"
    # bedrock/: per model, as litellm routes it: Converse is gated, invoke/ refused (and a
    # model litellm cannot place goes to invoke on 1.108.7, to Converse on 1.110.2).
    claude = "anthropic.claude-3-5-sonnet-20240620-v1:0"
    decision = route_for({"model": claude, "custom_llm_provider": "bedrock"}, Api.CHAT)
    assert isinstance(decision, Gated) and decision.wire.value == "bedrock"
    with pytest.raises(RouteNotGated) as refused:
        route_for({"model": f"invoke/{claude}", "custom_llm_provider": "bedrock"}, Api.CHAT)
    assert refused.value.route == "bedrock"
    # vertex_ai/: per model, as litellm routes it: Gemini (generateContent) and Claude
    # (Anthropic's Messages through rawPredict) are gated, every other model refused.
    for model in ("gemini-2.5-flash", "claude-sonnet-4@20250514", "claude-3-5-haiku@20241022"):
        decision = route_for({"model": model, "custom_llm_provider": "vertex_ai"}, Api.CHAT)
        assert isinstance(decision, Gated)
    for model in (
        "mistral-large@2407",
        "codestral-2501",
        "jamba-1.5-large@001",
        "meta/llama-3.1-405b-instruct-maas",
        "deepseek-ai/deepseek-r1-0528-maas",
        "qwen/qwen3-coder-480b-a35b-instruct-maas",
        "openai/gpt-oss-120b-maas",
        "gemma/gemma-3-12b-it",
        "chat-bison",
        "1234567890",
    ):
        with pytest.raises(RouteNotGated) as refused:
            route_for({"model": model, "custom_llm_provider": "vertex_ai"}, Api.CHAT)
        assert refused.value.route == "vertex_ai", model
    # The Responses API (litellm's bridge to chat): Claude and Gemini on vertex_ai/,
    # anthropic/, gemini/ and bedrock/'s Converse models are gated by ToolGate and by the
    # callback (Gemini's calls under the identities the gate writes into the body it
    # releases); vertex_ai/'s other models are refused.
    for model in (
        "vertex_ai/claude-sonnet-4@20250514",
        f"bedrock/{claude}",
        "anthropic/claude-sonnet-4-5",
        "vertex_ai/gemini-2.5-flash",
        "gemini/gemini-2.5-flash",
    ):
        for callback in (False, True):
            decision = route_for({"model": model}, Api.RESPONSES, callback=callback)
            assert isinstance(decision, Gated) and decision.bridged, model
    # ollama_chat/: litellm's bridge draws every streamed call's id, matched by position
    # through ToolGate; the callback gates whole calls (whose ids litellm keeps) and refuses
    # streams.
    ollama = {"model": "ollama_chat/qwen3"}
    for stream in (False, True):
        decision = route_for({**ollama, "stream": stream}, Api.RESPONSES)
        assert isinstance(decision, Gated) and decision.bridged
    assert route_for(ollama, Api.RESPONSES, callback=True).bridged
    with pytest.raises(RouteNotGated) as refused:
        route_for({**ollama, "stream": True}, Api.RESPONSES, callback=True)
    assert "use ToolGate" in refused.value.reason
    with pytest.raises(RouteNotGated) as refused:
        route_for({"model": "vertex_ai/mistral-large@2407"}, Api.RESPONSES)
    assert refused.value.route == "vertex_ai"
    with pytest.raises(RouteNotGated) as refused:
        route_for({"model": f"bedrock/invoke/{claude}"}, Api.RESPONSES)
    assert refused.value.route == "bedrock"


def test_a_path_the_gate_does_not_read_is_local() -> None:
    # A caller who builds the client without a model (so no route check) and calls a route
    # the gate does not read (Ollama's /api/generate): refused at the response, as the gate's
    # own limitation.
    with RouteServer(answers={"/api/generate": b'{"response": ""}\n'}) as server:
        client = GATE.http_client(stream=True)
        with pytest.raises(ToolCallQuarantined) as caught:
            stream = litellm.completion(
                model="ollama/llama3.1",
                messages=[{"role": "user", "content": "hi"}],
                api_base=server.base_url.removesuffix("/v1"),
                stream=True,
                client=client,
            )
            list(GATE.guard(stream, client))
    assert caught.value.reason is QuarantineReason.ROUTE_NOT_GATED
    assert caught.value.party is Party.LOCAL and caught.value.status_code == 501


def test_toolgate_routes_prints_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    from litellm_toolgate.cli import main

    assert main(["routes"]) == 0
    out = capsys.readouterr().out
    for name in ROUTES:
        assert name in out
    assert "openai" in out and "gated" in out and "refused" in out
    # litellm's Responses bridge over Gemini's wire: gated by the callback too; over
    # Ollama's, streams through ToolGate only (litellm draws each streamed call's id).
    lines = out.splitlines()
    responses = {
        lines[i].split()[0]: lines[i + 1] for i in range(len(lines) - 1) if lines[i][:1].strip()
    }
    assert "callback refuses" not in responses["gemini"]
    assert "callback refuses" not in responses["vertex_ai"]
    assert "callback refuses" not in responses["ollama_chat"]
    assert "the callback gates whole calls only" in responses["ollama_chat"]
    at = next(i for i, line in enumerate(lines) if line.startswith("cohere "))
    for row in (lines[at], lines[at + 1]):
        assert "litellm drops client=" in row and "whole calls only, streams refused" in row
    assert "Responses: gated (bridged to chat, cohere SSE" in lines[at + 1]


@pytest.mark.parametrize(
    "model",
    # bedrock/'s invoke/ models are refused by every face (its Converse models are gated), so
    # are vertex_ai/'s partner models other than Claude.
    [
        "bedrock/invoke/anthropic.claude-3-5-sonnet-20240620-v1:0",
        "vertex_ai/mistral-large@2407",
        "x/y",
    ],
)
def test_the_callback_refuses_before_sending(server: RouteServer, model: str) -> None:
    from litellm_toolgate import ToolGateGuardrail

    saved = litellm.callbacks
    litellm.callbacks = [ToolGateGuardrail(CHAT_MANIFEST["tools"])]
    server.requests.clear()
    try:
        with pytest.raises(RouteNotGated) as refused:
            asyncio.run(
                litellm.acompletion(
                    model=model,
                    messages=[{"role": "user", "content": "hi"}],
                    api_base=server.base_url,
                    stream=True,
                    num_retries=0,
                )
            )
    finally:
        litellm.callbacks = saved
        # litellm copies callbacks into lists of its own: take the gate out of all of them.
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
    assert server.requests == []
    assert refused.value.party is Party.LOCAL


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_the_callers_tools_are_not_edited_by_litellm(
    server: RouteServer, asynchronous: bool
) -> None:
    # litellm 1.108.7 drops additionalProperties from a request's tools in place on
    # hosted_vllm/: a gate whose registry is each request's tools would then accept extra
    # properties on the next call made with the same list.
    server.answers = dict(GOOD)
    gate = ToolGate("request")
    tools = copy.deepcopy(CHAT_MANIFEST["tools"])
    kwargs = {
        "model": "hosted_vllm/my-model",
        "messages": [{"role": "user", "content": "7 x 8?"}],
        "tools": tools,
        "api_base": server.base_url,
        "stream": True,
    }
    if asynchronous:

        async def go() -> None:
            async for _ in await gate.acompletion(**kwargs):
                pass

        asyncio.run(go())
    else:
        list(gate.completion(**kwargs))
    assert tools == CHAT_MANIFEST["tools"]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("model", "wire"),
    [(GEMINI_MODEL, "gemini"), (CLAUDE_MODEL, "anthropic")],
    ids=["gemini", "claude"],
)
def test_the_vertex_token_fetch_is_not_the_gate_s(
    server: RouteServer, model: str, wire: str, asynchronous: bool
) -> None:
    """litellm fetches a Google token before a vertex_ai/ call (new credentials: no token
    kept yet) over google-auth's own session: the upstream gets one request, the gate decides
    one attempt, on the model's wire, released; the token request is none of them."""
    server.answers = dict(GOOD)
    server.requests.clear()
    decided = RecordingObserver()
    tokens = len(TOKENS)
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "7 x 8?"}],
        "tools": copy.deepcopy(CHAT_MANIFEST["tools"]),
        "api_base": server.base_url,
        "stream": True,
        "num_retries": 0,
        **vertex_args(),
        "vertex_credentials": new_credentials(),
    }
    observers.add(decided)
    try:
        if asynchronous:

            async def go() -> list[Any]:
                return [c async for c in await GATE.acompletion(**kwargs)]

            items = asyncio.run(go())
        else:
            items = list(GATE.completion(**kwargs))
    finally:
        observers.remove(decided)
    assert len(TOKENS) == tokens + 1
    assert len(server.requests) == 1 and "token" not in server.requests[0].path
    assert [(o.wire.value, o.released, o.calls) for o in decided.outcomes] == [(wire, True, 1)]
    assert _released(items, Api.CHAT) == _want("vertex_ai", Api.CHAT)


def test_a_vertex_deployment_is_judged_by_its_base_model(server: RouteServer) -> None:
    """litellm sends a Vertex deployment whose ``base_model`` names a Gemini model to
    generateContent whatever the deployment's own name (1.108.7, 1.110.2): the gate gates it
    as that Gemini model, on chat, and its Responses API as for any Gemini model (through
    ToolGate and the callback)."""
    model, extra = MODELS["vertex_ai:base_model"]
    assert route_for(_route("vertex_ai:base_model"), Api.CHAT).client is ClientKind.HTTP_HANDLER
    with pytest.raises(RouteNotGated, match="another API"):
        route_for({"model": model}, Api.CHAT)  # without its base_model: no Gemini model
    assert route_for(_route("vertex_ai:base_model"), Api.RESPONSES).bridged
    assert route_for(_route("vertex_ai:base_model"), Api.RESPONSES, callback=True).bridged
    # In the model_info, where litellm also reads it.
    info = {"model": model, "model_info": {"base_model": extra["base_model"]}}
    assert route_for(info, Api.CHAT).client is ClientKind.HTTP_HANDLER
    for asynchronous in (False, True):
        server.answers = dict(GOOD)
        server.requests.clear()
        items = _call("vertex_ai:base_model", Api.CHAT, server.base_url, asynchronous)
        assert _released(items, Api.CHAT) == _want("vertex_ai:base_model", Api.CHAT)
        assert [r.path.split("?")[0].rsplit(":", 1)[-1] for r in server.requests] == [
            "streamGenerateContent"
        ]
