"""Soak: 10,000 sync and async calls under the callback, failing and succeeding, flat memory.

One gate in ``litellm.callbacks``; a loopback upstream answers a rotating mix: a clean stream
(released), a schema-invalid one (quarantined), a 500, a 429 on the OpenAI SDK route
(retries off), a refused connection, sync on litellm's HTTP route and on the SDK route, and
async streamed and whole. After a warm-up, neither the process's resident memory nor the
number of live Python objects may grow with the number of calls (tracemalloc would slow
litellm several times over), and the gate's tables (claims, wrapped clients, in-flight
requests) stay at their bound. Marked ``slow`` (``scripts/quick.sh`` skips it; the full
suite and CI run it). ``TOOLGATE_SOAK_CALLS`` changes the number of calls.

How "flat" is judged, so that a busy machine does not fail it and a leak still does:
memory is sampled every :data:`SAMPLE_EVERY` calls after the warm-up, each sample after a
full collection and ``malloc_trim`` (what the allocator holds free is not growth), and the
growth between the median of the first three samples, of the middle three and of the last
three must stay under a bound that is a floor (one-time settling: allocator arenas, litellm's
caches) plus a per-call allowance far below what a leak of one request's worth costs (the
claim with its body copy that issue 22 found was ~100 kB per failing call). A single
outlying sample (a burst of garbage, a page the kernel had not yet reclaimed) moves no
median; a leak moves all of them. ``test_the_flatness_judgment`` shows both.

The gate's own log records (a warning per quarantined call) go to a handler of this test's
that formats each one and checks it for argument text, instead of pytest's log capture, which
would keep all ~3,300 of them (and their text) alive for the test's length: growth that is
pytest's, not the gate's, and two more formattings per record.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import gc
import itertools
import logging
import os
import statistics
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
SAMPLE_EVERY = max(1, (CALLS - WARM_UP) // 10)
# What may move between two of the three medians (see the module docstring): a floor for
# one-time settling, and a per-call allowance. A leaked claim with its body copy was ~100 kB
# a failing call (over half the mix fails): over the ~3,600 calls between two medians,
# ~200 MB against a bound of ~26 MB.
RSS_FLOOR = 12 * 1024 * 1024
RSS_PER_CALL = 4 * 1024
OBJECTS_FLOOR = 5_000
OBJECTS_PER_CALL = 3  # one object leaked per call is caught at 10,000 calls; so is a dict

_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or None)
_TRIM = getattr(_LIBC, "malloc_trim", None)  # glibc; elsewhere RSS is read as it is


def _resident() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _measure() -> tuple[int, int]:
    gc.collect()
    if _TRIM is not None:
        _TRIM(0)  # hand free heap pages back, so RSS counts what is held
    return _resident(), len(gc.get_objects())


def flat(samples: list[tuple[int, int]], every: int) -> list[str]:
    """What grew beyond its bound between the medians of the first, middle and last three
    samples (taken ``every`` calls apart); empty when memory stayed flat."""
    assert len(samples) >= 9, "too few samples to judge"
    middle = len(samples) // 2
    # (centre of the window, its samples)
    windows = [(1, samples[:3]), (middle, samples[middle - 1 : middle + 2])]
    windows.append((len(samples) - 2, samples[-3:]))
    found = []
    for (at_a, a), (at_b, b) in itertools.pairwise(windows):
        calls = (at_b - at_a) * every
        rss = statistics.median(r for r, _ in b) - statistics.median(r for r, _ in a)
        objects = statistics.median(o for _, o in b) - statistics.median(o for _, o in a)
        if rss >= RSS_FLOOR + RSS_PER_CALL * calls:
            found.append(f"resident memory grew {rss / 2**20:.1f} MB over {calls} calls")
        if objects >= OBJECTS_FLOOR + OBJECTS_PER_CALL * calls:
            found.append(f"live objects grew {objects:.0f} over {calls} calls")
    return found


def test_the_flatness_judgment() -> None:
    """The judgment fails a steady leak and passes noise a busy machine makes."""
    base, objects, mb = 1_400 * 2**20, 1_000_000, 2**20
    drift = [(base + n * 900 * 2048, objects) for n in range(11)]  # 2 kB a call
    assert flat(drift, 900) == []
    leak = [(base + n * 900 * 20 * 1024, objects) for n in range(11)]  # 20 kB a call
    assert flat(leak, 900) and "resident" in flat(leak, 900)[0]
    one_each = [(base, objects + n * 900) for n in range(11)]  # one object a call
    assert flat(one_each, 900) == []
    several = [(base, objects + n * 900 * 5) for n in range(11)]  # five objects a call
    assert "live objects" in flat(several, 900)[0]
    # A one-time step (an allocator arena, a cache filling) and single outliers: not growth.
    step = [(base + (20 * mb if n > 3 else 0), objects) for n in range(11)]
    spiky = [(base + (60 * mb if n in (2, 5, 9) else 0), objects) for n in range(11)]
    assert flat(step, 900) == [] and flat(spiky, 900) == []


class _GateLog(logging.Handler):
    """The gate's log records for the soak's length: formatted, checked, counted, not kept."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0
        self.unsafe = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        self.count += 1
        if '"a"' in text or "arguments" in text:  # argument text never reaches a log
            self.unsafe += 1


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
    samples: list[tuple[int, int]] = []
    gate_log, own = _GateLog(), logging.getLogger("litellm_toolgate")
    own.addHandler(gate_log)
    own.propagate = False
    try:
        with asyncio.Runner() as runner:
            mix = _mix(upstream, runner)
            for n in range(CALLS):
                got = mix[n % len(mix)]()
                outcomes[got] = outcomes.get(got, 0) + 1
                assert len(claiming.CLAIMS) <= 1 and claiming.CLAIMS.threads <= 1
                if n + 1 >= WARM_UP and (n + 1 - WARM_UP) % SAMPLE_EVERY == 0:
                    samples.append(_measure())
    finally:
        own.propagate = True
        own.removeHandler(gate_log)
        gate.close()
        litellm.callbacks = saved
        litellm.in_memory_llm_clients_cache.flush_cache()
    # Every kind of outcome happened, many times.
    assert outcomes.get("released", 0) >= CALLS // len(mix) * 2
    assert outcomes.get("unknown_tool", 0) >= CALLS // len(mix) * 2
    assert len(outcomes) >= 4, outcomes
    assert gate_log.count >= outcomes["unknown_tool"] and gate_log.unsafe == 0
    assert flat(samples, SAMPLE_EVERY) == [], [(r // 2**20, o) for r, o in samples]
    assert len(claiming.CLAIMS) == 0
    assert gate.pending == 0
    assert claiming.INSTALLATION.wrapped <= 8
