"""Sync whole (non-streamed) ``litellm.completion`` under ``litellm.callbacks`` on the OpenAI
SDK routes (``openai/``, ``azure/``, ``custom_openai/``) and on ``azure_ai/``: gated, as the
agent frameworks call them (smolagents, LangChain's ``ChatLiteLLM``, DSPy), not refused.

A loopback upstream answers each request with a whole chat body of the test's choosing, and
counts the requests. A valid call is released with the wire's arguments, byte for byte; every
refusal reaches the caller as the gate's typed quarantine (never litellm's retryable
``APIConnectionError`` / ``InternalServerError``), the upstream asked exactly once, whatever
litellm's ``num_retries``, the OpenAI SDK's ``max_retries``, a ``litellm.Router``'s retries or
fallbacks; with litellm's own clients, a ``client=`` of the caller's and
``litellm.client_session``. ``cometapi/`` (litellm's own HTTP handler, gated before) is the
control.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import litellm
import openai
import pytest
from conftest import MANIFEST

from litellm_toolgate import (
    ArgumentsRejected,
    PolicyDenied,
    QuarantineReason,
    SchemaRejected,
    StreamFault,
    ToolCallQuarantined,
    ToolGateGuardrail,
    UngatedCallRefused,
)
from litellm_toolgate.edge.sync import claiming as synccall

litellm.suppress_debug_info = True
R = QuarantineReason

# The wire's arguments, spaced and ordered as no serializer would: released byte for byte.
WIRE_ARGS = '{ "b":8.50,  "a" : 7 }'


def chat_body(
    arguments: str = WIRE_ARGS, *, name: str = "multiply", finish: str = "tool_calls"
) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-whole",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "gpt-4o-mini",
            "choices": [
                {
                    "index": 0,
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": name, "arguments": arguments},
                            }
                        ],
                    },
                    "finish_reason": finish,
                }
            ],
            "usage": {"prompt_tokens": 5, "completion_tokens": 5, "total_tokens": 10},
        }
    ).encode()


SECRET = "s3cr3t-argument-text"
BODIES = {
    "valid": chat_body(),
    "schema_invalid": chat_body('{"a": "' + SECRET + '", "b": 8}'),
    "unknown_tool": chat_body('{"path": "' + SECRET + '"}', name="delete_everything"),
    "duplicate_key": chat_body('{"a": 7, "a": 8, "b": 1}'),
    "truncated_args": chat_body('{"a": 7, "b'),
    "finish_length": chat_body('{"a": 7, "b": 8}', finish="length"),
    "policy_denied": chat_body('{"a": 700, "b": 8}'),
    "body_cut": chat_body()[:-40],
}
# What each refusal is: the family the caller catches, and its reason.
REFUSED: dict[str, tuple[type[ToolCallQuarantined], QuarantineReason]] = {
    "schema_invalid": (SchemaRejected, R.SCHEMA_INVALID),
    "unknown_tool": (SchemaRejected, R.UNKNOWN_TOOL),
    "duplicate_key": (ArgumentsRejected, R.DUPLICATE_KEY),
    "truncated_args": (ArgumentsRejected, R.INVALID_JSON),
    "finish_length": (StreamFault, R.FINISH_REASON_MISMATCH),
    "policy_denied": (PolicyDenied, R.POLICY_DENIED),
    "body_cut": (StreamFault, R.MALFORMED_EVENT),
}


class Upstream:
    """A loopback upstream: answers every POST with the body its last user message names."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length))
                owner.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                body = BODIES[str(payload["messages"][-1]["content"])]
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def _policy(call: Any) -> bool:
    return bool(call.arguments.get("a", 0) < 100)


@pytest.fixture(autouse=True)
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"], policy=_policy)
    saved, session = litellm.callbacks, litellm.client_session
    litellm.callbacks = [gate]
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        litellm.client_session = session
        litellm.in_memory_llm_clients_cache.flush_cache()
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
        for made in [o for o in gc.get_objects() if isinstance(o, ToolGateGuardrail)]:
            made.close()
        assert len(synccall.CLAIMS) == 0, "an armed claim was left behind"


SDK_ROUTES = ["openai", "azure", "custom_openai"]
ROUTES = [*SDK_ROUTES, "azure_ai", "cometapi"]


def where(upstream: Upstream, route: str) -> dict[str, Any]:
    """The model and endpoint of ``route`` on the loopback upstream."""
    if route == "azure":
        return {
            "model": "azure/gpt-4o-mini",
            "api_base": upstream.root,
            "api_version": "2024-10-21",
        }
    if route == "azure_ai":
        # Not an OpenAI model: litellm keeps it on azure_ai/ (an OpenAI model on a
        # non-Foundry endpoint would be its azure/ route).
        return {"model": "azure_ai/mistral-large-2407", "api_base": f"{upstream.root}/v1"}
    return {"model": f"{route}/gpt-4o-mini", "api_base": f"{upstream.root}/v1"}


def call(upstream: Upstream, route: str, case: str, **extra: Any) -> dict[str, Any]:
    return {
        **where(upstream, route),
        "messages": [{"role": "user", "content": case}],
        "tools": MANIFEST["tools"],
        "api_key": "sk-test",
        "num_retries": 2,
        **extra,
    }


def check_refused(error: BaseException, case: str) -> None:
    family, reason = REFUSED[case]
    assert isinstance(error, family), type(error).__mro__
    assert isinstance(error, ToolCallQuarantined) and error.reason is reason
    assert SECRET not in str(error) and SECRET not in repr(error)
    # Not litellm's retryable wrapper, nor one of litellm's own exceptions.
    assert not isinstance(error, (openai.APIError, litellm.APIConnectionError))
    assert not isinstance(error, litellm.InternalServerError)


@pytest.mark.parametrize("route", ROUTES)
def test_a_valid_whole_call_is_released_with_the_wire_arguments(
    upstream: Upstream, route: str
) -> None:
    before = len(upstream.requests)
    response = litellm.completion(**call(upstream, route, "valid"))
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert [tc.function.arguments for tc in choice.message.tool_calls] == [WIRE_ARGS]
    assert [tc.function.name for tc in choice.message.tool_calls] == ["multiply"]
    assert len(upstream.requests) == before + 1
    assert synccall.MARKER not in upstream.requests[-1][1]


@pytest.mark.parametrize("case", sorted(REFUSED))
@pytest.mark.parametrize("route", ROUTES)
def test_a_refused_whole_call_raises_the_typed_quarantine_and_is_sent_once(
    upstream: Upstream, route: str, case: str
) -> None:
    before = len(upstream.requests)
    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(**call(upstream, route, case))
    check_refused(refused.value, case)
    assert len(upstream.requests) == before + 1  # never re-sent by num_retries=2
    assert synccall.MARKER not in upstream.requests[-1][1]


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_the_sdks_own_retries_do_not_resend_a_refusal(upstream: Upstream, route: str) -> None:
    before = len(upstream.requests)
    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(**call(upstream, route, "schema_invalid", max_retries=3))
    check_refused(refused.value, "schema_invalid")
    assert len(upstream.requests) == before + 1


class Counting(httpx.HTTPTransport):
    """A caller's own transport: counts the requests sent through it."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        return super().handle_request(request)


def own_client(upstream: Upstream, route: str, transport: httpx.BaseTransport) -> Any:
    http_client = httpx.Client(transport=transport)
    if route == "azure":
        return openai.AzureOpenAI(
            api_key="sk-own",
            azure_endpoint=upstream.root,
            api_version="2024-10-21",
            http_client=http_client,
        )
    return openai.OpenAI(api_key="sk-own", base_url=f"{upstream.root}/v1", http_client=http_client)


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_a_client_of_your_own_is_gated(upstream: Upstream, route: str) -> None:
    counting = Counting()
    own = own_client(upstream, route, counting)
    before = len(upstream.requests)
    response = litellm.completion(client=own, **call(upstream, route, "valid"))
    assert [tc.function.arguments for tc in response.choices[0].message.tool_calls] == [WIRE_ARGS]
    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(client=own, **call(upstream, route, "unknown_tool"))
    check_refused(refused.value, "unknown_tool")
    assert counting.sent == 2 and len(upstream.requests) == before + 2
    assert synccall.MARKER not in upstream.requests[-1][1]


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_a_client_session_of_your_own_is_used_and_gated(upstream: Upstream, route: str) -> None:
    counting = Counting()
    mine = httpx.Client(transport=counting)
    litellm.client_session = mine
    before = len(upstream.requests)
    response = litellm.completion(**call(upstream, route, "valid"))
    assert [tc.function.arguments for tc in response.choices[0].message.tool_calls] == [WIRE_ARGS]
    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(**call(upstream, route, "duplicate_key"))
    check_refused(refused.value, "duplicate_key")
    assert counting.sent == 2 and len(upstream.requests) == before + 2
    assert litellm.client_session is mine


@pytest.mark.parametrize("route", ROUTES)
def test_a_router_neither_retries_nor_falls_back_on_a_refusal(
    upstream: Upstream, route: str
) -> None:
    params = {**where(upstream, route), "api_key": "sk-test"}
    router = litellm.Router(
        model_list=[
            {"model_name": "primary", "litellm_params": params},
            {"model_name": "fallback", "litellm_params": params},
        ],
        num_retries=2,
        fallbacks=[{"primary": ["fallback"]}],
        retry_after=0,
    )
    messages = [{"role": "user", "content": "policy_denied"}]
    before = len(upstream.requests)
    with pytest.raises(ToolCallQuarantined) as refused:
        router.completion(model="primary", messages=messages, tools=MANIFEST["tools"])
    check_refused(refused.value, "policy_denied")
    assert len(upstream.requests) == before + 1
    released = router.completion(
        model="primary",
        messages=[{"role": "user", "content": "valid"}],
        tools=MANIFEST["tools"],
    )
    assert [tc.function.arguments for tc in released.choices[0].message.tool_calls] == [WIRE_ARGS]
    assert len(upstream.requests) == before + 2


def test_a_whole_call_the_gate_cannot_arm_is_refused_unsent(upstream: Upstream) -> None:
    """A refusal held for a whole SDK call's request (here: an ``extra_body`` value the SDK
    serializes but the claim's copy of the body cannot) is answered unsent by the claiming
    transport, and reaches the caller as ``UngatedCallRefused``, not as litellm's error."""
    from pydantic import BaseModel

    class Tag(BaseModel):
        name: str

    before = len(upstream.requests)
    with pytest.raises(UngatedCallRefused, match="could not prepare") as refused:
        litellm.completion(
            **call(upstream, "openai", "valid", extra_body={"metadata_tag": Tag(name="t")})
        )
    assert not isinstance(refused.value, litellm.InternalServerError)
    assert len(upstream.requests) == before
    import pickle

    again = pickle.loads(pickle.dumps(refused.value))
    assert type(again) is UngatedCallRefused and str(again) == str(refused.value)


def test_custom_openai_is_gated_async_too(upstream: Upstream) -> None:
    """custom_openai/ is in the route table now: the async callback injects its SDK client,
    as on openai/."""
    import asyncio

    async def go(case: str) -> Any:
        return await litellm.acompletion(**call(upstream, "custom_openai", case))

    before = len(upstream.requests)
    response = asyncio.run(go("valid"))
    assert [tc.function.arguments for tc in response.choices[0].message.tool_calls] == [WIRE_ARGS]
    with pytest.raises(ToolCallQuarantined) as refused:
        asyncio.run(go("schema_invalid"))
    check_refused(refused.value, "schema_invalid")
    assert len(upstream.requests) == before + 2


def test_a_stream_litellm_fakes_from_a_whole_answer_is_judged_whole(upstream: Upstream) -> None:
    """litellm asks Azure's o-series for a whole answer and makes a stream of it itself: the
    gate judges the whole body on the wire (it is no stream), before litellm makes chunks."""
    kwargs = {**call(upstream, "azure", "valid", stream=True), "model": "azure/o1-mini"}
    before = len(upstream.requests)
    chunks = list(litellm.completion(**kwargs))
    arguments = "".join(
        tc.function.arguments or "" for c in chunks for tc in c.choices[0].delta.tool_calls or []
    )
    assert arguments == WIRE_ARGS
    kwargs["messages"] = [{"role": "user", "content": "schema_invalid"}]
    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(**kwargs)
    check_refused(refused.value, "schema_invalid")
    assert len(upstream.requests) == before + 2


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_a_refusal_keeps_no_argument_text_in_its_chain_or_frames(
    upstream: Upstream, route: str
) -> None:
    from leakcheck import assert_clean_exception

    with pytest.raises(ToolCallQuarantined) as refused:
        litellm.completion(**call(upstream, route, "schema_invalid"))
    assert_clean_exception(refused.value, SECRET)
    # It pickles as the gate's own class (an error tracker, a process pool).
    import pickle

    again = pickle.loads(pickle.dumps(refused.value))
    assert type(again).__name__ == "SchemaRejected" and again.reason is R.SCHEMA_INVALID
    assert isinstance(again, SchemaRejected) and str(again) == str(refused.value)
