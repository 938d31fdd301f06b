"""Async decisions over large withheld arguments run on a worker thread, not on the loop."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import litellm
import pytest
from conftest import MANIFEST

from litellm_toolgate import ToolGate
from litellm_toolgate.core.decision.attempt import Attempt
from litellm_toolgate.core.values.registry import ToolRegistry
from litellm_toolgate.edge.offload import OFF_LOOP_BYTES, decide_off_loop
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True


def call_body(arguments: str, fragment: int = 512) -> bytes:
    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        chunk = {
            "id": "chatcmpl-offload",
            "object": "chat.completion.chunk",
            "created": 1767225600,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(chunk).encode() + b"\n\n"

    opener = {"index": 0, "id": "call_1", "type": "function"}
    opener["function"] = {"name": "write_file", "arguments": ""}
    out = [event({"role": "assistant", "content": None}), event({"tool_calls": [opener]})]
    for i in range(0, len(arguments), fragment):
        piece = {"index": 0, "function": {"arguments": arguments[i : i + fragment]}}
        out.append(event({"tool_calls": [piece]}))
    out += [event({}, "tool_calls"), b"data: [DONE]\n\n"]
    return b"".join(out)


def arguments_of(size: int) -> str:
    return json.dumps({"path": "workspace/a.txt", "content": "x" * size})


@pytest.mark.parametrize("size", [100, 4 * OFF_LOOP_BYTES], ids=["small", "large"])
def test_where_the_async_decision_runs(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    threads: list[str] = []
    conclude = Attempt.conclude

    def recording(self: Attempt, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return conclude(self, *args, **kwargs)

    monkeypatch.setattr(Attempt, "conclude", recording)
    arguments = arguments_of(size)

    async def go(upstream: FakeUpstream) -> tuple[list[str], str]:
        released: list[str] = []
        stream = await ToolGate(MANIFEST["tools"]).acompletion(
            model="cometapi/gpt-4o-mini",
            messages=[{"role": "user", "content": "go"}],
            api_base=upstream.base_url,
            api_key="sk-test",
            stream=True,
            num_retries=0,
        )
        async for chunk in stream:
            for choice in chunk.choices:
                released += [tc.function.arguments for tc in choice.delta.tool_calls or []]
        return released, threading.current_thread().name

    with FakeUpstream() as upstream:
        upstream.enqueue(Scripted(call_body(arguments)))
        released, loop_thread = asyncio.run(go(upstream))
    assert released == [arguments]
    assert len(threads) == 1
    if size > OFF_LOOP_BYTES:
        assert threads[0].startswith("toolgate-decision")
    else:
        assert threads[0] == loop_thread


def test_a_cancelled_wait_lets_the_worker_finish_first() -> None:
    attempt = Attempt(ToolRegistry.from_tools(MANIFEST["tools"]))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    attempt.receive_bytes(call_body(arguments_of(OFF_LOOP_BYTES)))
    assert attempt.argument_bytes > OFF_LOOP_BYTES
    finished = threading.Event()

    def decide() -> str:
        time.sleep(0.3)
        finished.set()
        return "done"

    async def go() -> bool:
        task = asyncio.create_task(decide_off_loop(attempt, decide))
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return finished.is_set()

    assert asyncio.run(go()) is True


def test_a_cancelled_wait_does_not_block_the_loop() -> None:
    """The worker waits for another task of the loop to run after the cancellation: had the
    cancelled wait held the loop until the worker finished, the worker would wait out its
    limit and not finish (no timing is judged: the machine's load moves none of it)."""
    attempt = Attempt(ToolRegistry.from_tools(MANIFEST["tools"]))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    attempt.receive_bytes(call_body(arguments_of(OFF_LOOP_BYTES)))
    started = threading.Event()
    loop_ran_on = threading.Event()
    finished = threading.Event()

    def decide() -> str:
        started.set()
        if loop_ran_on.wait(timeout=60):
            finished.set()
        return "done"

    async def elsewhere() -> None:
        loop_ran_on.set()

    async def go() -> bool:
        task = asyncio.create_task(decide_off_loop(attempt, decide))
        while not started.is_set():
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.sleep(0)
        task.cancel()  # a second cancellation is the same one
        # Another task runs while the cancelled wait lets its worker finish.
        await asyncio.create_task(elsewhere())
        with pytest.raises(asyncio.CancelledError):
            await task
        return finished.is_set()

    assert asyncio.run(go()) is True


# ---- the loop stays free while a large call is rejected, on the callback's paths --------
ROWS_TOOL = {
    "type": "function",
    "function": {
        "name": "store_rows",
        "description": "Store integer rows.",
        "parameters": {
            "type": "object",
            "properties": {"rows": {"type": "array", "items": {"type": "integer"}}},
            "required": ["rows"],
            "additionalProperties": False,
        },
    },
}
# About 1.5 MiB of integers whose very last element fails the schema.
_ROWS = json.dumps({"rows": [*([123456] * 220_000), "not an integer"]})


def rows_body() -> bytes:
    return call_body(_ROWS, fragment=8192).replace(b"write_file", b"store_rows")


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_large_rejection_does_not_hold_the_loop_under_the_callback(
    monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    """The decision over 1.5 MiB of arguments runs on a worker thread, not on the loop's
    (judged by the thread it ran on, which the machine's load does not move)."""
    from litellm_toolgate import ToolCallQuarantined, ToolGateGuardrail, find_quarantine
    from litellm_toolgate.demo.serve import json_body_of

    assert len(_ROWS) > 1_400_000
    gate = ToolGateGuardrail([ROWS_TOOL])
    body = rows_body()
    threads: list[threading.Thread] = []
    conclude = Attempt.conclude

    def recording(self: Attempt, *args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return conclude(self, *args, **kwargs)

    monkeypatch.setattr(Attempt, "conclude", recording)

    async def call(upstream: FakeUpstream) -> BaseException | None:
        try:
            result = await litellm.acompletion(
                model="cometapi/gpt-4o-mini",
                messages=[{"role": "user", "content": "go"}],
                api_base=upstream.base_url,
                api_key="sk-test",
                stream=stream,
                num_retries=0,
            )
            if stream:
                async for _ in result:
                    pass
        except Exception as exc:
            return exc
        return None

    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        with FakeUpstream() as upstream:
            if stream:
                upstream.enqueue(Scripted(body))
            else:
                upstream.enqueue(Scripted(json_body_of(body), content_type="application/json"))
            error = asyncio.run(call(upstream))  # the loop runs on this thread
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
    quarantine = error if isinstance(error, ToolCallQuarantined) else find_quarantine(error)
    assert quarantine is not None, repr(error)
    assert quarantine.reason.value == "schema_invalid"
    assert threads, "the attempt was never concluded"
    assert threading.current_thread() not in threads, "the decision ran on the loop's thread"
