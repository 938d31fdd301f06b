"""Helpers for tests that drive the gate through the real litellm against FakeUpstream.

``kwargs`` builds litellm's arguments for the loopback server, ``run`` takes one request
through the gate (sync or async) and returns the chunks it yielded with the quarantine, if
any; ``released`` lists the tool calls among the chunks. The ``upstream`` fixture (a
running FakeUpstream) is in conftest.py.
"""

from __future__ import annotations

import asyncio
from typing import Any

from litellm_toolgate import ToolCallQuarantined, ToolGate
from litellm_toolgate.demo.upstream import FakeUpstream


def kwargs(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "messages": [{"role": "user", "content": "go"}],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
        "num_retries": 0,
        **extra,
    }


def run(gate: ToolGate, upstream: FakeUpstream, asynchronous: bool) -> tuple[list[Any], Any]:
    """One streamed request; a quarantine is returned, any other error propagates."""
    chunks: list[Any] = []

    async def go_async() -> Any:
        async for chunk in await gate.acompletion(**kwargs(upstream)):
            chunks.append(chunk)

    try:
        if asynchronous:
            asyncio.run(go_async())
        else:
            chunks.extend(gate.completion(**kwargs(upstream)))
    except ToolCallQuarantined as exc:
        return chunks, exc
    return chunks, None


def released(chunks: list[Any]) -> list[tuple[str, str]]:
    """(name, arguments) of every tool call the chunks hand over."""
    return [
        (tc.function.name, tc.function.arguments)
        for c in chunks
        for ch in c.choices
        for tc in (ch.delta.tool_calls or [])
    ]
