"""``ToolGate``'s lifecycle: the litellm handlers it creates (their httpx clients) are closed by
``close()`` / ``aclose()`` and by ``with`` / ``async with``; a closed gate refuses new calls;
clients the caller passed are left open. Driven through the real litellm against the demo's
loopback fake upstream."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import litellm
import pytest
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from litellm.types.utils import ModelResponse

from litellm_toolgate import AsyncGatedStream, GatedStream, ToolGate
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.demo.serve import demo_answer
from litellm_toolgate.loopback.upstream import FakeUpstream

litellm.suppress_debug_info = True
TOOLS = [MULTIPLY]


@pytest.fixture(scope="module")
def demo() -> Any:
    with FakeUpstream(demo_answer) as upstream:
        yield upstream


def _kwargs(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "tools": TOOLS,
        "messages": [{"role": "user", "content": "7 times 8?"}],
        **extra,
    }


@pytest.fixture
def closed(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The httpx transports closed during the test (the real close runs, and is recorded)."""
    seen: list[object] = []
    sync_close, async_close = httpx.HTTPTransport.close, httpx.AsyncHTTPTransport.aclose

    def close(self: httpx.HTTPTransport) -> None:
        seen.append(self)
        sync_close(self)

    async def aclose(self: httpx.AsyncHTTPTransport) -> None:
        seen.append(self)
        await async_close(self)

    monkeypatch.setattr(httpx.HTTPTransport, "close", close)
    monkeypatch.setattr(httpx.AsyncHTTPTransport, "aclose", aclose)
    return seen


def _released(chunks: list[Any]) -> list[str]:
    return [tc.function.name for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]


def test_with_block_closes_the_sync_transport_and_a_closed_gate_refuses(
    demo: FakeUpstream, closed: list[object]
) -> None:
    with ToolGate(TOOLS) as gate:
        stream = gate.completion(**_kwargs(demo, stream=True))
        assert isinstance(stream, GatedStream)
        assert _released(list(stream)) == ["multiply"]
        whole = gate.completion(**_kwargs(demo))
        assert isinstance(whole, ModelResponse)
        (handler,) = gate.clients._sync_handlers.values()
        client = handler.client
        transport = client._transport
        assert not client.is_closed and transport not in closed
    assert gate.closed and gate.clients._sync_handlers == {}
    assert client.is_closed and closed.count(transport) == 1
    for call in (
        lambda: gate.completion(**_kwargs(demo, stream=True)),
        lambda: gate.responses(model="cometapi/gpt-4o-mini", input="7 times 8?"),
        gate.http_client,
    ):
        with pytest.raises(RuntimeError, match="ToolGate was closed"):
            call()
    gate.close()  # twice is harmless
    assert closed.count(transport) == 1
    assert "closed" in repr(gate)


def test_async_with_closes_the_async_handler_on_its_loop(demo: FakeUpstream) -> None:
    async def main() -> tuple[ToolGate, httpx.AsyncClient]:
        async with ToolGate(TOOLS) as gate:
            stream = await gate.acompletion(**_kwargs(demo, stream=True))
            assert isinstance(stream, AsyncGatedStream)
            assert _released([c async for c in stream]) == ["multiply"]
            (handler,) = gate.clients._async_handlers[asyncio.get_running_loop()].values()
            client = handler.client
            assert not client.is_closed
        assert client.is_closed  # closed on its own loop, inside async with
        with pytest.raises(RuntimeError, match="ToolGate was closed"):
            await gate.acompletion(**_kwargs(demo, stream=True))
        with pytest.raises(RuntimeError, match="ToolGate was closed"):
            gate.async_http_client()
        return gate, client

    gate, client = asyncio.run(main())
    assert gate.closed and len(gate.clients._async_handlers) == 0
    assert client.is_closed


def test_sync_close_also_closes_an_async_handler_whose_loop_is_idle(demo: FakeUpstream) -> None:
    gate = ToolGate(TOOLS)
    loop = asyncio.new_event_loop()
    try:
        whole = loop.run_until_complete(gate.acompletion(**_kwargs(demo)))
        assert isinstance(whole, ModelResponse)
        (handler,) = gate.clients._async_handlers[loop].values()
        client = handler.client
        assert not client.is_closed
        gate.close()
        assert client.is_closed
    finally:
        loop.close()


def test_a_client_the_caller_passed_is_left_open(demo: FakeUpstream, closed: list[object]) -> None:
    mine = HTTPHandler(client=httpx.Client())
    with ToolGate(TOOLS) as gate:
        assert _released(list(gate.completion(**_kwargs(demo, stream=True, client=mine)))) == [
            "multiply"
        ]
        assert gate.clients._sync_handlers == {}  # the gate made none of its own
    # Only this client's transport is asked about: a transport of an earlier test's client that
    # the garbage collector finalises during this test would land in `closed` too.
    assert mine.client._transport not in closed and not mine.client.is_closed
    response = mine.client.post(f"{demo.base_url}/chat/completions", json=_kwargs(demo))
    assert response.status_code == 200
    mine.client.close()
