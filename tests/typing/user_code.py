"""A user's code, type-checked by ``tests/test_gate_typing.py`` with ``mypy --strict``.

Never run: it only has to type-check. Each ``assert_type`` states what an editor must infer
from the gate's overloads, without a cast.
"""

from __future__ import annotations

from typing import assert_type

from litellm.types.llms.openai import ResponsesAPIResponse
from litellm.types.utils import ModelResponse

from litellm_toolgate import AsyncGatedStream, GatedStream, ToolGate

MESSAGES = [{"role": "user", "content": "7 times 8?"}]


def sync_calls(gate: ToolGate, flag: bool) -> list[object]:
    seen: list[object] = []
    stream = gate.completion(model="cometapi/gpt-4o-mini", messages=MESSAGES, stream=True)
    assert_type(stream, GatedStream)
    for chunk in stream:
        seen.append(chunk)
    whole = gate.completion(model="cometapi/gpt-4o-mini", messages=MESSAGES)
    assert_type(whole, ModelResponse)
    seen.append(whole.choices)
    assert_type(gate.completion(model="m", messages=MESSAGES, stream=False), ModelResponse)
    either = gate.completion(model="m", messages=MESSAGES, stream=flag)
    assert_type(either, GatedStream | ModelResponse)
    events = gate.responses(model="openai/gpt-4o-mini", input="7 times 8?", stream=True)
    assert_type(events, GatedStream)
    with events:
        seen.extend(events)
    response = gate.responses(model="openai/gpt-4o-mini", input="7 times 8?")
    assert_type(response, ResponsesAPIResponse)
    seen.append(response.output)
    return seen


async def async_calls(gate: ToolGate) -> list[object]:
    seen: list[object] = []
    stream = await gate.acompletion(model="cometapi/gpt-4o-mini", messages=MESSAGES, stream=True)
    assert_type(stream, AsyncGatedStream)
    async for chunk in stream:
        seen.append(chunk)
    whole = await gate.acompletion(model="cometapi/gpt-4o-mini", messages=MESSAGES)
    assert_type(whole, ModelResponse)
    events = await gate.aresponses(model="openai/gpt-4o-mini", input="x", stream=True)
    assert_type(events, AsyncGatedStream)
    async with events:
        seen.extend([event async for event in events])
    assert_type(await gate.aresponses(model="openai/gpt-4o-mini", input="x"), ResponsesAPIResponse)
    return seen


def lifecycle() -> None:
    with ToolGate() as gate:
        assert_type(gate, ToolGate)
    gate.close()


async def alifecycle() -> None:
    async with ToolGate() as gate:
        assert_type(gate, ToolGate)
    await gate.aclose()
