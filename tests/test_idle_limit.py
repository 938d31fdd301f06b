"""The idle limit is for streams: a whole (non-streamed) response keeps the caller's timeout.

A long reasoning call without streaming sends nothing until it is done; lowering its read
timeout to the gate's idle limit would cut it as ``stalled``. The loopback upstream here
answers after a pause longer than the idle limit: the whole response must arrive, the
streamed one must still be cut at the idle limit.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CASES, MANIFEST, body_of

from litellm_toolgate import Limits, ToolGate
from litellm_toolgate.demo.serve import json_body_of
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
IDLE = 0.3
PAUSE = 1.0


def _slow(request: dict[str, Any]) -> Scripted:
    time.sleep(PAUSE)  # thinking, silently, for longer than the idle limit
    body = body_of(CASES["multiply_basic"])
    if request.get("stream"):
        return Scripted(body)
    return Scripted(json_body_of(body), content_type="application/json")


@pytest.fixture(scope="module")
def slow_upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_slow) as server:
        yield server


def _base(upstream: FakeUpstream) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "messages": [{"role": "user", "content": "go"}],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "timeout": 30,
    }


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_whole_response_keeps_the_callers_timeout(
    slow_upstream: FakeUpstream, asynchronous: bool
) -> None:
    gate = ToolGate(MANIFEST["tools"], limits=Limits(idle_timeout=IDLE))
    base = _base(slow_upstream)
    response = asyncio.run(gate.acompletion(**base)) if asynchronous else gate.completion(**base)
    calls = response.choices[0].message.tool_calls
    assert [c.function.arguments for c in calls] == [
        c["arguments"] for c in CASES["multiply_basic"]["calls"]
    ]


def test_a_stream_is_still_cut_at_the_idle_limit(slow_upstream: FakeUpstream) -> None:
    gate = ToolGate(MANIFEST["tools"], limits=Limits(idle_timeout=IDLE))
    started = time.monotonic()
    # No response yet, so nothing for the gate to quarantine: litellm's own timeout error,
    # after the idle limit rather than the caller's 30 s.
    with pytest.raises(litellm.Timeout):
        list(gate.completion(stream=True, **_base(slow_upstream)))
    assert time.monotonic() - started < PAUSE
