"""The OpenAI SDK routes and litellm's handler routes send, through the gate, exactly what
litellm sends without it.

For ``openai/`` and ``azure/`` chat, sync and async, each case makes the same call twice to a
loopback upstream that records requests: once with plain litellm, once through
:class:`ToolGate` (which hands litellm an SDK client of its own on a tapped transport). The
method, URL (path and query: Azure's ``api-version``), body and headers must be equal:
key, organization, extra headers, the SDK's timeout and retry headers. A caller's own SDK
client is wrapped, not replaced, and stays untapped for its other calls; an environment proxy
is still used. The same holds for a sync stream under ``litellm.callbacks``, which goes out on
litellm's own SDK client, its httpx client wrapped in place by the gate.

On the routes that take a litellm ``HTTPHandler`` (``cometapi/``, ``openrouter/``) the gate's
handler is a tapped copy of the one litellm builds for itself: the same headers (litellm's
User-Agent), the same environment proxy; a caller's own handler keeps its httpx client's
headers, and the caller's handler is left as it was.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import openai
import pytest
from conftest import CASES, MANIFEST, body_of
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, HTTPHandler
from routeserver import RouteServer, Seen

from litellm_toolgate import ToolGate, ToolGateGuardrail, WireNotObservable
from litellm_toolgate.edge.sync.claiming import MARKER

litellm.suppress_debug_info = True
GOOD = body_of(CASES["multiply_basic"])
# Headers that differ between any two requests, with or without the gate.
VARYING = {"x-stainless-retry-count", "content-length", "x-stainless-raw-response"}


@pytest.fixture(scope="module")
def server() -> Iterator[RouteServer]:
    with RouteServer(answers={"/chat/completions": GOOD}) as upstream:
        yield upstream


def _call(kwargs: dict[str, Any], gate: ToolGate | None, asynchronous: bool) -> None:
    kwargs = {"messages": [{"role": "user", "content": "7 x 8?"}], "stream": True, **kwargs}
    kwargs["tools"] = copy.deepcopy(MANIFEST["tools"])  # litellm may edit them in place
    if asynchronous:

        async def go() -> None:
            call = litellm.acompletion if gate is None else gate.acompletion
            async for _ in await call(**kwargs):
                pass

        asyncio.run(go())
    else:
        call = litellm.completion if gate is None else gate.completion
        for _ in call(**kwargs):
            pass


def _sent(server: RouteServer, kwargs: dict[str, Any], gate: ToolGate | None, a: bool) -> Seen:
    server.requests.clear()
    _call(dict(kwargs), gate, a)
    assert len(server.requests) == 1
    return server.requests[0]


def _plain_then_gated(
    server: RouteServer,
    kwargs: dict[str, Any],
    gate: ToolGate,
    asynchronous: bool,
    closing: httpx.Client | httpx.AsyncClient | None = None,
) -> tuple[Seen, Seen]:
    """The same stream sent by plain litellm, then through ``gate``: what the server saw each
    time. Async, both on one event loop (a caller's AsyncClient belongs to one loop).
    ``closing``: the caller's httpx client, closed once both are sent."""
    if not asynchronous:
        plain = _sent(server, kwargs, None, False)
        gated = _sent(server, kwargs, gate, False)
        if isinstance(closing, httpx.Client):
            closing.close()
        return plain, gated

    async def both() -> tuple[Seen, Seen]:
        seen = []
        for who in (None, gate):
            server.requests.clear()
            call = litellm.acompletion if who is None else who.acompletion
            async for _ in await call(
                **kwargs,
                messages=[{"role": "user", "content": "7 x 8?"}],
                tools=copy.deepcopy(MANIFEST["tools"]),
                stream=True,
            ):
                pass
            assert len(server.requests) == 1
            seen.append(server.requests[0])
        if isinstance(closing, httpx.AsyncClient):
            await closing.aclose()
        return seen[0], seen[1]

    return asyncio.run(both())


def _same(plain: Seen, gated: Seen) -> None:
    assert (gated.method, gated.path) == (plain.method, plain.path)
    assert json.loads(gated.body) == json.loads(plain.body)
    lower = {k.lower(): v for k, v in plain.headers.items() if k.lower() not in VARYING}
    got = {k.lower(): v for k, v in gated.headers.items() if k.lower() not in VARYING}
    assert got == lower


def _cases(base: str) -> dict[str, dict[str, Any]]:
    return {
        "openai": {"model": "openai/gpt-4o-mini", "api_base": base, "api_key": "sk-a"},
        "openai-org-headers-timeout": {
            "model": "openai/gpt-4o-mini",
            "api_base": base,
            "api_key": "sk-b",
            "organization": "org-test",
            "extra_headers": {"X-Trace": "t-1"},
            "timeout": 12.5,
            "max_retries": 1,
        },
        "azure": {
            "model": "azure/my-deployment",
            "api_base": base.removesuffix("/v1"),
            "api_key": "az-key",
            "api_version": "2024-10-21",
        },
        "azure-headers": {
            "model": "azure/gpt-4o-mini",
            "api_base": base.removesuffix("/v1"),
            "api_key": "az-key-2",
            "api_version": "2025-01-01-preview",
            "extra_headers": {"X-Trace": "t-2"},
            "timeout": 30,
        },
        "perplexity": {
            "model": "perplexity/sonar",
            "api_base": base,
            "api_key": "pplx",
            "drop_params": True,
        },
    }


CASE_NAMES = list(_cases("http://x/v1"))


def _handler_cases(base: str) -> dict[str, dict[str, Any]]:
    """Routes on which litellm takes a litellm HTTPHandler / AsyncHTTPHandler."""
    return {
        "cometapi": {"model": "cometapi/gpt-4o-mini", "api_base": base, "api_key": "sk-c"},
        "openrouter": {
            "model": "openrouter/openai/gpt-4o-mini",
            "api_base": base,
            "api_key": "sk-or",
            "extra_headers": {"X-Trace": "t-3"},
        },
    }


HANDLER_CASES = list(_handler_cases("http://x/v1"))


def _fresh_litellm_clients() -> None:
    # litellm caches its handlers (built once from the environment): built anew here, as
    # they would be in a process that started with this environment.
    litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", CASE_NAMES)
def test_the_gate_sends_what_litellm_sends(
    server: RouteServer, name: str, asynchronous: bool
) -> None:
    kwargs = _cases(server.base_url)[name]
    plain = _sent(server, kwargs, None, asynchronous)
    gated = _sent(server, kwargs, ToolGate(MANIFEST["tools"]), asynchronous)
    _same(plain, gated)
    if name.startswith("azure"):
        assert f"api-version={kwargs['api_version']}" in gated.path


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("kind", ["openai", "azure"])
def test_a_callers_sdk_client_is_wrapped_not_replaced(
    server: RouteServer, kind: str, asynchronous: bool
) -> None:
    http = (httpx.AsyncClient if asynchronous else httpx.Client)(headers={"X-Http": "mine"})
    common: dict[str, Any] = {"default_headers": {"X-Sdk": "mine"}, "http_client": http}
    if kind == "openai":
        make: Any = openai.AsyncOpenAI if asynchronous else openai.OpenAI
        client = make(api_key="sk-user", base_url=server.base_url, organization="org-u", **common)
        model = "openai/gpt-4o-mini"
    else:
        make = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
        client = make(
            api_key="az-user",
            azure_endpoint=server.base_url.removesuffix("/v1"),
            api_version="2024-06-01",
            **common,
        )
        model = "azure/my-deployment"
    transport = http._transport
    kwargs = {"model": model, "client": client}
    gate = ToolGate(MANIFEST["tools"])
    plain, gated = _plain_then_gated(server, kwargs, gate, asynchronous)
    _same(plain, gated)
    headers = {k.lower(): v for k, v in gated.headers.items()}
    assert headers.get("x-http") == "mine" and headers.get("x-sdk") == "mine"
    # The caller's clients are as they were: their next calls are theirs, untapped.
    assert client._client is http and http._transport is transport
    assert not hasattr(client, "tap")


def test_an_sdk_client_on_the_sdks_own_http_client_keeps_its_settings(
    server: RouteServer,
) -> None:
    client = openai.OpenAI(api_key="sk-own", base_url=server.base_url, organization="org-o")
    kwargs = {"model": "openai/gpt-4o-mini", "client": client}
    plain = _sent(server, kwargs, None, False)
    gated = _sent(server, kwargs, ToolGate(MANIFEST["tools"]), False)
    _same(plain, gated)


def test_a_client_of_the_wrong_kind_is_refused_before_sending(server: RouteServer) -> None:
    server.requests.clear()
    with pytest.raises(WireNotObservable, match=r"openai\.OpenAI"):
        _call(
            {"model": "openai/gpt-4o-mini", "api_base": server.base_url, "client": object()},
            ToolGate(MANIFEST["tools"]),
            False,
        )
    # The SDK's own HTTP library, configured by the caller: the gate cannot tap it.
    other = openai.OpenAI(
        api_key="k", base_url=server.base_url, http_client=openai.DefaultHttpxClient()
    )
    with pytest.raises(WireNotObservable, match="HTTP client"):
        _call({"model": "openai/gpt-4o-mini", "client": other}, ToolGate(MANIFEST["tools"]), False)
    assert server.requests == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_environment_proxy_is_still_used(
    server: RouteServer, monkeypatch: pytest.MonkeyPatch, asynchronous: bool
) -> None:
    proxy = server.base_url.removesuffix("/v1")
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("http_proxy", proxy)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", True)
    kwargs = {
        "model": f"openai/proxy-{int(asynchronous)}",
        "api_base": "http://upstream.invalid/v1",
        "api_key": "sk-proxy",
    }
    gated = _sent(server, kwargs, ToolGate(MANIFEST["tools"]), asynchronous)
    # Through a proxy the request line carries the absolute URL of the upstream.
    assert gated.path == "http://upstream.invalid/v1/chat/completions"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", HANDLER_CASES)
def test_a_handler_route_sends_what_litellm_sends(
    server: RouteServer, name: str, asynchronous: bool
) -> None:
    kwargs = _handler_cases(server.base_url)[name]
    _fresh_litellm_clients()
    plain = _sent(server, kwargs, None, asynchronous)
    gated = _sent(server, kwargs, ToolGate(MANIFEST["tools"]), asynchronous)
    _same(plain, gated)
    user_agent = {k.lower(): v for k, v in gated.headers.items()}["user-agent"]
    assert user_agent.startswith("litellm/")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", HANDLER_CASES)
def test_a_handler_route_uses_the_environment_proxy_as_litellm_does(
    server: RouteServer, monkeypatch: pytest.MonkeyPatch, name: str, asynchronous: bool
) -> None:
    proxy = server.base_url.removesuffix("/v1")
    for variable in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(variable, proxy)
    for variable in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
    kwargs = _handler_cases("http://upstream.invalid/v1")[name]
    _fresh_litellm_clients()
    try:
        plain = _sent(server, kwargs, None, asynchronous)
        gated = _sent(server, kwargs, ToolGate(MANIFEST["tools"]), asynchronous)
    finally:
        _fresh_litellm_clients()  # no handler built with the proxy outlives this test
    # Through a proxy the request line carries the absolute URL of the upstream.
    assert plain.path == gated.path == "http://upstream.invalid/v1/chat/completions"
    _same(plain, gated)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_callers_handler_is_wrapped_not_replaced(server: RouteServer, asynchronous: bool) -> None:
    handler: Any
    if asynchronous:
        handler = AsyncHTTPHandler()
        handler.client = httpx.AsyncClient(headers={"X-Http": "mine"}, timeout=30)
    else:
        handler = HTTPHandler(client=httpx.Client(headers={"X-Http": "mine"}, timeout=30))
    http = handler.client
    transport, mounts = http._transport, dict(http._mounts)
    kwargs = {**_handler_cases(server.base_url)["cometapi"], "client": handler}
    gate = ToolGate(MANIFEST["tools"])
    plain, gated = _plain_then_gated(server, kwargs, gate, asynchronous, closing=http)
    _same(plain, gated)
    assert {k.lower(): v for k, v in gated.headers.items()}.get("x-http") == "mine"
    # The caller's handler is as it was: its next calls are its own, untapped.
    assert handler.client is http and http._transport is transport
    assert dict(http._mounts) == mounts
    assert not hasattr(handler, "tap")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_litellm_keeps_no_gate_client_in_its_cache(server: RouteServer, asynchronous: bool) -> None:
    # litellm caches an Azure client it was handed, for later calls with the same settings;
    # the gate's client (one call's tap) must not be handed to a later, ungated call.
    kwargs = _cases(server.base_url)["azure"]
    _sent(server, kwargs, ToolGate(MANIFEST["tools"]), asynchronous)
    cached = litellm.in_memory_llm_clients_cache.cache_dict.values()
    assert not [client for client in cached if hasattr(client, "tap")]
    plain = _sent(server, kwargs, None, asynchronous)  # and litellm's own call still works
    assert plain.path.startswith("/openai/deployments/my-deployment/chat/completions")


# ---- sync calls under litellm.callbacks: claimed on litellm's SDK client (sdkclaim) ---------
def _plain_then_under_callback(server: RouteServer, kwargs: dict[str, Any]) -> tuple[Seen, Seen]:
    """The same sync stream sent by plain litellm (no session, no gate), then by litellm
    with a gate in litellm.callbacks (which sets no session: it wraps litellm's own client)."""
    saved = (litellm.callbacks, litellm.client_session)
    litellm.client_session = None
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        litellm.callbacks = []
        plain = _sent(server, kwargs, None, False)
        litellm.callbacks = [ToolGateGuardrail(MANIFEST["tools"])]
        gated = _sent(server, kwargs, None, False)
        assert litellm.client_session is None
    finally:
        litellm.callbacks, litellm.client_session = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
        litellm.in_memory_llm_clients_cache.flush_cache()
    return plain, gated


@pytest.mark.parametrize("name", [n for n in CASE_NAMES if n != "perplexity"])
def test_a_sync_stream_under_the_callback_sends_what_litellm_sends(
    server: RouteServer, name: str
) -> None:
    kwargs = _cases(server.base_url)[name]
    plain, gated = _plain_then_under_callback(server, kwargs)
    _same(plain, gated)
    assert not any(k.lower() == MARKER for k in gated.headers)
    assert MARKER not in str(kwargs)  # the caller's extra_headers never held it


def test_a_sync_stream_under_the_callback_still_uses_an_environment_proxy(
    server: RouteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = server.base_url.removesuffix("/v1")
    for variable in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(variable, proxy)
    for variable in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
    kwargs = {
        "model": "openai/proxy-sync",
        "api_base": "http://upstream.invalid/v1",
        "api_key": "k",
    }
    plain, gated = _plain_then_under_callback(server, kwargs)
    # Through a proxy the request line carries the absolute URL of the upstream.
    assert plain.path == gated.path == "http://upstream.invalid/v1/chat/completions"
    _same(plain, gated)
