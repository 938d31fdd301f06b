"""The gate in ``litellm.callbacks`` under frameworks built on litellm, on loopback.

The OpenAI Agents SDK's ``LitellmModel`` and a ``litellm.Router`` with fallbacks each drive a
tool loop: a good stream runs the tool once and ends in the model's answer; a broken one
(arguments cut short, ``[DONE]`` without a finish reason) raises the typed quarantine out of
the framework, and the tool never runs.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from litellm_toolgate import StreamFault, ToolGateGuardrail
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.demo.serve import as_requested, demo_answer
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream

litellm.suppress_debug_info = True
GOOD = "What is 7 times 8?"
BROKEN = "broken: what is 7 times 8?"


def answer(request: dict[str, Any]) -> Scripted:
    """The demo's upstream; a tool result (in any form) gets the model's final text."""
    if any(m.get("role") == "tool" for m in request.get("messages") or []):
        return as_requested(request, answer_stream("7 times 8 is 56."))
    return demo_answer(request)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(answer) as server:
        yield server


@pytest.fixture(autouse=True)
def gate() -> Iterator[None]:
    saved = litellm.callbacks
    litellm.callbacks = [ToolGateGuardrail([MULTIPLY])]
    yield
    litellm.callbacks = saved
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_openai_agents_litellm_model(upstream: FakeUpstream, streamed: bool) -> None:
    import agents
    from agents.extensions.models.litellm_model import LitellmModel

    agents.set_tracing_disabled(True)
    ran: list[tuple[float, float]] = []

    @agents.function_tool
    def multiply(a: float, b: float) -> float:
        """Multiply two numbers."""
        ran.append((a, b))
        return a * b

    model = LitellmModel(model="cometapi/gpt-4o-mini", base_url=upstream.base_url, api_key="sk")
    agent = agents.Agent(name="calc", instructions="Use tools.", tools=[multiply], model=model)

    async def run(prompt: str) -> Any:
        if not streamed:
            return (await agents.Runner.run(agent, prompt)).final_output
        result = agents.Runner.run_streamed(agent, prompt)
        async for _ in result.stream_events():
            pass
        return result.final_output

    assert asyncio.run(run(GOOD)) == "7 times 8 is 56."
    assert ran == [(7.0, 8.0)]
    with pytest.raises(StreamFault):
        asyncio.run(run(BROKEN))
    assert ran == [(7.0, 8.0)], "the tool ran on a broken call"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_router_with_fallbacks_tool_loop(upstream: FakeUpstream, mode: str) -> None:
    with FakeUpstream(answer) as backup:
        deployments = [
            {
                "model_name": name,
                "litellm_params": {
                    "model": "cometapi/gpt-4o-mini",
                    "api_base": server.base_url,
                    "api_key": "sk",
                },
            }
            for name, server in (("main", upstream), ("backup", backup))
        ]
        router = litellm.Router(
            model_list=deployments, fallbacks=[{"main": ["backup"]}], num_retries=2, retry_after=0
        )
        ran: list[dict[str, Any]] = []

        def turn(messages: list[dict[str, Any]]) -> Any:
            kwargs = {"model": "main", "messages": messages, "tools": [MULTIPLY], "stream": True}
            if mode == "sync":
                return litellm.stream_chunk_builder(list(router.completion(**kwargs)))

            async def go() -> Any:
                chunks = [c async for c in await router.acompletion(**kwargs)]
                return litellm.stream_chunk_builder(chunks)

            return asyncio.run(go())

        def loop(prompt: str) -> str:
            messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
            while True:
                message = turn(messages).choices[0].message
                if not message.tool_calls:
                    return str(message.content)
                messages.append(message.model_dump())
                for call in message.tool_calls:
                    arguments = json.loads(call.function.arguments)
                    ran.append(arguments)
                    value = arguments["a"] * arguments["b"]
                    content = json.dumps({"value": value})
                    messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

        assert loop(GOOD) == "7 times 8 is 56."
        assert ran == [{"a": 7, "b": 8}]
        with pytest.raises(StreamFault):
            loop(BROKEN)
        assert ran == [{"a": 7, "b": 8}]
        assert backup.requests == [], "a refusal went to the fallback"
