"""Deliberately wrong: ``tests/test_gate_typing.py`` requires mypy to reject each line that
ends in the marker comment, so the check cannot pass by everything being ``Any``."""

from __future__ import annotations

from typing import assert_type

from litellm.types.utils import ModelResponse

from litellm_toolgate import AsyncGatedStream, GatedStream, ToolGate


def wrong(gate: ToolGate) -> None:
    assert_type(gate.completion(model="m", messages=[], stream=True), ModelResponse)  # wrong
    assert_type(gate.completion(model="m", messages=[]), GatedStream)  # wrong


async def awrong(gate: ToolGate) -> None:
    assert_type(await gate.acompletion(model="m", messages=[], stream=True), GatedStream)  # wrong
    stream = await gate.acompletion(model="m", messages=[], stream=True)
    for _ in stream:  # wrong: an AsyncGatedStream is not a sync iterable
        pass
    assert_type(stream, AsyncGatedStream)
