"""A ``litellm.Router`` with fallbacks and retries never re-sends a refusal the gate made.

Two loopback upstreams: the primary serves the fixture the message names; the backup (the
fallback group) always serves a clean call to another tool, which the policy approves. If a
quarantine or a policy denial were treated as a failed deployment, the Router would retry the
primary or fall back to the backup and hand the caller an approved call; the caller must see
the refusal instead, in its family, and the backup must never be asked. With the opt-in
``retry_stream_faults``, a remote stream fault before the first chunk may go to the fallback
(a new request, gated afresh); arguments, schema and policy never do.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CASES, MANIFEST, body_of

from litellm_toolgate import (
    ArgumentsRejected,
    PolicyDenied,
    StreamFault,
    ToolCall,
    ToolCallQuarantined,
    ToolGateGuardrail,
)
from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
BACKUP_ANSWER = "write_file_unicode"


def _by_name(request: dict[str, Any]) -> Scripted:
    return as_requested(request, body_of(CASES[str(request["messages"][-1]["content"])]))


def _backup(request: dict[str, Any]) -> Scripted:
    return as_requested(request, body_of(CASES[BACKUP_ANSWER]))


@pytest.fixture(scope="module")
def upstreams() -> Iterator[tuple[FakeUpstream, FakeUpstream]]:
    with FakeUpstream(_by_name) as primary, FakeUpstream(_backup) as backup:
        yield primary, backup


def deny_multiply(call: ToolCall) -> bool:
    return call.name != "multiply"


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    saved = litellm.callbacks
    yield
    litellm.callbacks = saved
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def router(primary: FakeUpstream, backup: FakeUpstream) -> litellm.Router:
    def deployment(name: str, upstream: FakeUpstream) -> dict[str, Any]:
        return {
            "model_name": name,
            "litellm_params": {
                "model": "cometapi/gpt-4o-mini",
                "api_base": upstream.base_url,
                "api_key": "sk-test",
            },
        }

    return litellm.Router(
        model_list=[deployment("gated", primary), deployment("backup", backup)],
        fallbacks=[{"gated": ["backup"]}],
        num_retries=2,
        retry_after=0,
    )


def call(r: litellm.Router, name: str, *, mode: str, stream: bool) -> Any:
    messages = [{"role": "user", "content": name}]
    if mode == "sync":
        result = r.completion(model="gated", messages=messages, stream=stream)
        return list(result) if stream else result

    async def go() -> Any:
        result = await r.acompletion(model="gated", messages=messages, stream=stream)
        return [chunk async for chunk in result] if stream else result

    return asyncio.run(go())


def tool_names(result: Any, stream: bool) -> set[str]:
    if not stream:
        return {t.function.name for t in result.choices[0].message.tool_calls or []}
    return {
        tc.function.name
        for chunk in result
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
        if tc.function.name
    }


CASES_REFUSED = [
    ("args_invalid_json", ArgumentsRejected),
    ("multiply_basic", PolicyDenied),
    ("error_event_midstream", StreamFault),
]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(("name", "family"), CASES_REFUSED, ids=[c[0] for c in CASES_REFUSED])
def test_a_refusal_is_never_resent(
    upstreams: tuple[FakeUpstream, FakeUpstream],
    name: str,
    family: type[ToolCallQuarantined],
    mode: str,
    stream: bool,
) -> None:
    primary, backup = upstreams
    litellm.callbacks = [ToolGateGuardrail(MANIFEST["tools"], policy=deny_multiply)]
    sent, asked = len(primary.requests), len(backup.requests)
    if name == "error_event_midstream" and not stream:
        family = ToolCallQuarantined  # a whole body cannot carry the mid-stream error event
    with pytest.raises(family):
        call(router(primary, backup), name, mode=mode, stream=stream)
    assert len(primary.requests) == sent + 1, "the refused request was sent again"
    assert len(backup.requests) == asked, "the refusal went to the fallback"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_good_call_goes_through_the_router(
    upstreams: tuple[FakeUpstream, FakeUpstream], mode: str
) -> None:
    primary, backup = upstreams
    litellm.callbacks = [ToolGateGuardrail(MANIFEST["tools"])]
    result = call(router(primary, backup), "multiply_basic", mode=mode, stream=True)
    assert tool_names(result, True) == {"multiply"}


@pytest.mark.parametrize(
    ("name", "falls_back"),
    [("error_event_midstream", True), ("args_invalid_json", False), ("multiply_basic", False)],
)
def test_opt_in_retry_of_remote_stream_faults(
    upstreams: tuple[FakeUpstream, FakeUpstream], name: str, falls_back: bool
) -> None:
    primary, backup = upstreams
    gate = ToolGateGuardrail(MANIFEST["tools"], policy=deny_multiply, retry_stream_faults=True)
    litellm.callbacks = [gate]
    asked = len(backup.requests)
    if falls_back:
        result = call(router(primary, backup), name, mode="async", stream=True)
        # The fallback is a new request, gated afresh: the backup's call, released whole.
        assert tool_names(result, True) == {"write_file"}
        assert len(backup.requests) == asked + 1
    else:
        with pytest.raises(ToolCallQuarantined):
            call(router(primary, backup), name, mode="async", stream=True)
        assert len(backup.requests) == asked
