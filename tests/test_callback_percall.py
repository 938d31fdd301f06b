"""A gate handed to a call in its own ``callbacks=`` (none in ``litellm.callbacks``).

Against the real litellm on loopback (issue 38, holes 3 and 4): litellm runs no hook of such
a gate before an async request is sent or a cached answer is read. A model turn is gated
exactly, or refused before anything is sent, typed: an async call is refused unsent
(:class:`AsyncCallStopped`, zero requests at the upstream), whole and streamed, on
``cometapi/`` and ``openai/``; a sync or async ``caching=True`` call is never answered from a
``litellm.cache`` an ungated call filled (it is sent, and the sync one gated).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import litellm
import pytest
from test_callback_contain import (  # the shared loopback fixtures and helpers
    BAD,
    GOOD,
    _clean,
    arguments_of,
    call,
    new_cache,
    upstream,
)
from test_callback_contain import run as run_caught

from litellm_toolgate import AsyncCallStopped, SchemaRejected, ToolGate, ToolGateGuardrail
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.loopback.upstream import FakeUpstream

__all__ = ["_clean", "upstream"]  # pytest fixtures, used by name


def run(mode: str, stream: bool, kwargs: dict[str, Any]) -> Any:
    """:func:`test_callback_contain.run`, also returning an :class:`AsyncCallStopped`."""
    try:
        return run_caught(mode, stream, kwargs)
    except AsyncCallStopped as stopped:
        return stopped


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("prompt", ["bad", "good"])
def test_an_async_openai_call_handed_a_gate_is_gated_on_the_wire(
    upstream: FakeUpstream, stream: bool, prompt: str
) -> None:
    """On ``openai/`` the gate claims the SDK client litellm holds: a schema-invalid call
    is quarantined typed (never handed over), a valid one released; one request each."""
    gate = ToolGateGuardrail([MULTIPLY])
    before = len(upstream.requests)
    kwargs = {**call(upstream, f"{prompt} {uuid.uuid4().hex}"), "model": "openai/gpt-4o-mini"}
    got = run("async", stream, {**kwargs, "callbacks": [gate]})
    if prompt == "bad":
        assert isinstance(got, SchemaRejected), got
    else:
        assert arguments_of(got) == [GOOD], got
    assert len(upstream.requests) == before + 1


@pytest.mark.parametrize("model", ["cometapi/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest"])
@pytest.mark.parametrize("stream", [True, False])
def test_an_async_call_the_gate_cannot_claim_is_refused_unsent(
    upstream: FakeUpstream, model: str, stream: bool
) -> None:
    """On litellm's own HTTP routes the async client is taken after the only hook litellm
    runs, on another thread: the call is refused typed, and nothing reaches the upstream."""
    gate = ToolGateGuardrail([MULTIPLY])
    before = len(upstream.requests)
    kwargs = {**call(upstream, f"bad {uuid.uuid4().hex}"), "model": model}
    got = run("async", stream, {**kwargs, "callbacks": [gate]})
    assert isinstance(got, AsyncCallStopped), got
    assert "callbacks=" in str(got) and "not sent" in str(got)
    assert len(upstream.requests) == before
    if model.startswith("cometapi/"):  # the same call, sync, is gated on the wire
        again = run("sync", stream, {**kwargs, "callbacks": [gate]})
        assert isinstance(again, SchemaRejected), again


@pytest.mark.parametrize("model", ["cometapi/gpt-4o-mini", "openai/gpt-4o-mini"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_cached_invalid_call_is_not_handed_to_a_call_that_names_a_gate(
    upstream: FakeUpstream, model: str, mode: str, stream: bool
) -> None:
    litellm.cache = new_cache(type="local")
    kwargs = {**call(upstream, f"bad {uuid.uuid4().hex}"), "model": model, "caching": True}
    filled = run("sync", stream, kwargs)  # no gate: litellm caches the invalid call
    assert arguments_of(filled) == [BAD]
    before = len(upstream.requests)
    assert arguments_of(run(mode, stream, kwargs)) == [BAD]  # a cache hit, no request
    assert len(upstream.requests) == before
    gate = ToolGateGuardrail([MULTIPLY])
    got = run(mode, stream, {**kwargs, "callbacks": [gate]})
    # Not answered from the cache: sent and gated, or refused unsent.
    if mode == "async" and model.startswith("cometapi/"):
        assert isinstance(got, AsyncCallStopped), got
        assert len(upstream.requests) == before
    else:
        assert isinstance(got, SchemaRejected), got
        assert len(upstream.requests) == before + 1


def test_the_clients_the_gate_claimed_are_given_back(upstream: FakeUpstream) -> None:
    """A call that names no gate goes out through the claimed clients as litellm sends it;
    closing the gate gives them their own transports back."""
    from litellm_toolgate.edge.sync import asyncclaim

    gate = ToolGateGuardrail([MULTIPLY])
    kwargs = {**call(upstream, "good"), "model": "openai/gpt-4o-mini"}
    assert arguments_of(run("async", True, {**kwargs, "callbacks": [gate]})) == [GOOD]
    assert asyncclaim._wrapped
    gate.close()
    assert not asyncclaim._wrapped
    before = len(upstream.requests)

    async def go() -> Any:
        return await litellm.acompletion(**kwargs)

    assert arguments_of(asyncio.run(go())) == [GOOD]
    assert len(upstream.requests) == before + 1


@pytest.mark.parametrize("model", ["cometapi/gpt-4o-mini", "openai/gpt-4o-mini"])
@pytest.mark.parametrize("stream", [True, False])
def test_a_toolgates_own_async_calls_are_left_to_it(
    upstream: FakeUpstream, model: str, stream: bool
) -> None:
    """litellm keeps running a gate once handed to a call; a ToolGate's own async calls
    (vouched for by their client) are left to that ToolGate, which releases a valid call."""
    gate = ToolGateGuardrail([MULTIPLY])
    run("async", True, {**call(upstream, "good"), "model": model, "callbacks": [gate]})
    own = ToolGate([MULTIPLY])
    kwargs = {**call(upstream, "good"), "model": model}
    kwargs.pop("num_retries")

    async def go() -> Any:
        result = await own.acompletion(**kwargs, stream=stream)
        return [c async for c in result] if stream else result

    assert arguments_of(asyncio.run(go())) == [GOOD]
