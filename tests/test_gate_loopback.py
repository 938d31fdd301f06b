"""The gate against a real HTTP server on 127.0.0.1: chunked bodies, cuts, stalls, errors."""

from __future__ import annotations

import time

import litellm
import pytest
from conftest import CASES, MANIFEST, body_of
from loopback import released as calls
from loopback import run

from litellm_toolgate import Limits, QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason


MODES = [False, True]


@pytest.mark.parametrize("asynchronous", MODES, ids=["sync", "async"])
def test_chunked_body_in_odd_pieces_is_released(upstream: FakeUpstream, asynchronous: bool) -> None:
    case = CASES["two_tools_interleaved"]
    upstream.enqueue(Scripted(body_of(case), chunk_sizes=[1, 7, 13, 2]))
    chunks, error = run(ToolGate(MANIFEST["tools"]), upstream, asynchronous)
    assert error is None
    assert calls(chunks) == [(c["name"], c["arguments"]) for c in case["calls"]]


@pytest.mark.parametrize("asynchronous", MODES, ids=["sync", "async"])
def test_dropped_connection_is_a_disconnect_then_a_retry_works(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    case = CASES["disconnect_mid_arguments"]
    gate = ToolGate(MANIFEST["tools"])
    upstream.enqueue(
        Scripted(
            body_of(case), chunk_sizes=[50], disconnect_after=case["transport"]["disconnect_after"]
        )
    )
    chunks, error = run(gate, upstream, asynchronous)
    assert isinstance(error, ToolCallQuarantined)
    assert error.reason is R.DISCONNECTED
    assert calls(chunks) == []
    upstream.enqueue(Scripted(body_of(CASES[case["then"]])))
    chunks, error = run(gate, upstream, asynchronous)
    assert error is None and [n for n, _ in calls(chunks)] == ["multiply"]


@pytest.mark.parametrize("asynchronous", MODES, ids=["sync", "async"])
def test_silent_upstream_is_a_stall_at_the_idle_limit(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    case = CASES["stall_mid_arguments"]
    gate = ToolGate(MANIFEST["tools"], limits=Limits(idle_timeout=0.5))
    upstream.enqueue(Scripted(body_of(case), stall_after=case["transport"]["stall_after"]))
    started = time.monotonic()
    chunks, error = run(gate, upstream, asynchronous)
    assert isinstance(error, ToolCallQuarantined)
    assert error.reason is R.STALLED
    assert calls(chunks) == []
    assert time.monotonic() - started < 20


@pytest.mark.parametrize("asynchronous", MODES, ids=["sync", "async"])
def test_http_error_before_the_stream_is_litellms_typed_error(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    upstream.enqueue(
        Scripted(
            b'{"error": {"message": "slow down", "type": "rate_limit"}}',
            status=429,
            content_type="application/json",
        )
    )
    gate = ToolGate(MANIFEST["tools"])
    with pytest.raises(litellm.RateLimitError):
        run(gate, upstream, asynchronous)
    upstream.enqueue(Scripted(body_of(CASES["multiply_basic"])))
    chunks, error = run(gate, upstream, asynchronous)
    assert error is None and [n for n, _ in calls(chunks)] == ["multiply"]
