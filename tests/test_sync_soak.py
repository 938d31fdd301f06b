"""Soak: 10,000 sync and async calls under the callback, failing and succeeding, flat memory.

One gate in ``litellm.callbacks``; a loopback upstream answers a rotating mix: a clean stream
(released), a schema-invalid one (quarantined), a 500, a 429 on the OpenAI SDK route
(retries off), a refused connection, sync on litellm's HTTP route and on the SDK route, and
async streamed and whole. After a warm-up, neither the process's resident memory nor the
number of live Python objects may grow with the number of calls (tracemalloc would slow
litellm several times over), and the gate's tables (claims, wrapped clients, in-flight
requests) stay at their bound. Marked ``slow`` (``scripts/quick.sh`` skips it; the full
suite and CI run it). ``TOOLGATE_SOAK_CALLS`` changes the number of calls.
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Iterator
from typing import Any

import litellm
import pytest
from conftest import MANIFEST
from test_sync_footprint import Scripted

from litellm_toolgate import ToolCallQuarantined, ToolGateGuardrail
from litellm_toolgate.edge.sync import claiming

CALLS = int(os.environ.get("TOOLGATE_SOAK_CALLS", "10000"))
WARM_UP = min(1000, CALLS // 5)
# What may move between the checkpoints, whatever the number of calls (litellm's own caches
# settle; a leaked claim with its body copy was ~100 kB a call, so 4,000 calls ~400 MB).
ALLOWED_RSS_GROWTH = 32 * 1024 * 1024
ALLOWED_OBJECT_GROWTH = 20_000


def _resident() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _measure() -> tuple[int, int]:
    gc.collect()
    return _resident(), len(gc.get_objects())


@pytest.fixture(scope="module")
def upstream() -> Iterator[Scripted]:
    server = Scripted()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def _mix(upstream: Scripted, runner: asyncio.Runner) -> list[Callable[[], str]]:
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there

    def args(name: str, route: str = "cometapi", **extra: Any) -> dict[str, Any]:
        return {
            "model": f"{route}/gpt-4o-mini",
            "messages": [{"role": "user", "content": name}],
            "api_base": upstream.base_url,
            "api_key": "sk-test",
            "num_retries": 0,
            "stream": True,
            **extra,
        }

    def outcome(call: Callable[[], Any]) -> str:
        try:
            result = call()
            if not hasattr(result, "choices"):
                result = list(result)
        except ToolCallQuarantined as exc:
            return exc.reason.value
        except Exception as exc:
            return type(exc).__name__
        return "released"

    def failing(status: int, call: Callable[[], Any]) -> Callable[[], Any]:
        def go() -> Any:
            upstream.failures[:] = [status]
            return call()

        return go

    async def astream(name: str) -> Any:
        return [chunk async for chunk in await litellm.acompletion(**args(name))]

    async def awhole(name: str) -> Any:
        return await litellm.acompletion(**args(name, stream=False))

    return [
        lambda: outcome(lambda: litellm.completion(**args("multiply_basic"))),
        lambda: outcome(lambda: litellm.completion(**args("unknown_tool"))),
        lambda: outcome(failing(500, lambda: litellm.completion(**args("multiply_basic")))),
        lambda: outcome(lambda: litellm.completion(**{**args("multiply_basic"), "api_base": dead})),
        lambda: outcome(lambda: litellm.completion(**args("multiply_basic", "openai"))),
        lambda: outcome(
            failing(
                429,
                lambda: litellm.completion(
                    **args("multiply_basic", "openai", max_retries=0, num_retries=None)
                ),
            )
        ),
        lambda: outcome(lambda: litellm.completion(**args("unknown_tool", stream=False))),
        lambda: outcome(lambda: runner.run(astream("multiply_basic"))),
        lambda: outcome(lambda: runner.run(awhole("unknown_tool"))),
    ]


@pytest.mark.slow
def test_ten_thousand_calls_leave_memory_and_tables_flat(upstream: Scripted) -> None:
    saved = litellm.callbacks
    litellm.in_memory_llm_clients_cache.flush_cache()
    gate = ToolGateGuardrail(MANIFEST["tools"])
    litellm.callbacks = [gate]
    outcomes: dict[str, int] = {}
    checkpoints: list[tuple[int, int]] = []
    try:
        with asyncio.Runner() as runner:
            mix = _mix(upstream, runner)
            for n in range(CALLS):
                got = mix[n % len(mix)]()
                outcomes[got] = outcomes.get(got, 0) + 1
                assert len(claiming.CLAIMS) <= 1 and claiming.CLAIMS.threads <= 1
                if n + 1 in (WARM_UP, WARM_UP + (CALLS - WARM_UP) // 2, CALLS):
                    checkpoints.append(_measure())
    finally:
        gate.close()
        litellm.callbacks = saved
        litellm.in_memory_llm_clients_cache.flush_cache()
    # Every kind of outcome happened, many times.
    assert outcomes.get("released", 0) >= CALLS // len(mix) * 2
    assert outcomes.get("unknown_tool", 0) >= CALLS // len(mix) * 2
    assert len(outcomes) >= 4, outcomes
    (rss0, objects0), (rss1, objects1), (rss2, objects2) = checkpoints
    assert rss1 - rss0 < ALLOWED_RSS_GROWTH and rss2 - rss1 < ALLOWED_RSS_GROWTH, checkpoints
    assert objects1 - objects0 < ALLOWED_OBJECT_GROWTH, checkpoints
    assert objects2 - objects1 < ALLOWED_OBJECT_GROWTH, checkpoints
    assert len(claiming.CLAIMS) == 0
    assert gate.pending == 0
    assert claiming.INSTALLATION.wrapped <= 8
