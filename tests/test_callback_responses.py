"""The Responses API through ``ToolGateGuardrail`` in ``litellm.callbacks``, real litellm on loopback.

``litellm.aresponses`` is gated like ``litellm.acompletion``: the pre-call deployment hook puts
in the gate's client, which withholds on the wire. Native route (``openai/`` with an
``api_base``; the wire is Responses SSE, ``fixtures/responses``): every fixture, streamed,
must end as the manifest says: the calls released (their events arriving only after the
wire validated), or litellm's error with the quarantine of the manifest's reason behind it
and not one function-call event delivered. Bridged route (``cometapi/``; the wire is chat
SSE): a sample of ``fixtures/chat``. Whole responses on both routes are checked by the
deployment success hook. Sync ``litellm.responses`` is refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, body_of, expected
from conftest import CASES as CHAT_CASES
from conftest import MANIFEST as CHAT_MANIFEST

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.demo.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
SPLIT = [1, 7, 13, 2, 64]
CALL_EVENTS = {"response.function_call_arguments.delta", "response.function_call_arguments.done"}


def kind(event: Any) -> str:
    value = getattr(event, "type", None)
    return str(getattr(value, "value", value))


def field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def is_call_event(event: Any) -> bool:
    item = getattr(event, "item", None)
    return kind(event) in CALL_EVENTS or (
        kind(event).startswith("response.output_item.") and field(item, "type") == "function_call"
    )


def released_calls(events: list[Any]) -> list[dict[str, Any]]:
    return [
        {k: field(e.item, k) for k in ("call_id", "name", "arguments")}
        for e in events
        if kind(e) == "response.output_item.done" and is_call_event(e)
    ]


def no_leak(exc: BaseException) -> None:
    seen: BaseException | None = exc
    while seen is not None:
        for rendered in (str(seen), repr(seen), repr(seen.args)):
            assert CANARY not in rendered
        seen = seen.__cause__ or seen.__context__


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    """litellm copies ``litellm.callbacks`` into lists of its own; take the gates out of all."""
    yield
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def install(tools: list[dict[str, Any]]) -> ToolGateGuardrail:
    gate = ToolGateGuardrail(tools)
    litellm.callbacks = [gate]
    return gate


def kwargs_for(upstream: FakeUpstream, model: str, tools: Any, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": tools,
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


async def stream(kwargs: dict[str, Any]) -> tuple[list[Any], BaseException | None]:
    events: list[Any] = []
    try:
        async for event in await litellm.aresponses(stream=True, **kwargs):
            events.append(event)
    except Exception as exc:
        return events, exc
    return events, None


def check(
    outcome: str,
    reason: str | None,
    want_calls: list[dict[str, Any]],
    events: list[Any],
    error: BaseException | None,
) -> None:
    kinds = [kind(e) for e in events]
    if outcome == "release":
        assert error is None, f"refused: {error!r}"
        assert released_calls(events) == want_calls
        assert kinds[-1] == "response.completed"
        return
    assert error is not None, f"released {released_calls(events)!r}"
    quarantine = find_quarantine(error)
    assert quarantine is not None, repr(error)
    assert quarantine.reason is R(reason), (quarantine.reason, reason)
    assert not [e for e in events if is_call_event(e)], "a function-call event leaked"
    assert "response.completed" not in kinds
    no_leak(error)


@pytest.mark.parametrize("name", sorted(CASES))
def test_native_stream(upstream: FakeUpstream, name: str) -> None:
    case = CASES[name]
    install(MANIFEST["tools"])
    data = (FIXTURES / case["body"]).read_bytes()
    # Half the cases arrive in odd pieces (cut inside events and UTF-8), half whole.
    upstream.enqueue(Scripted(data, chunk_sizes=SPLIT if len(name) % 2 else None))
    events, error = asyncio.run(
        stream(kwargs_for(upstream, "openai/gpt-4o-mini", MANIFEST["tools"]))
    )
    check(case["expect"], case.get("reason"), case.get("calls", []), events, error)
    assert upstream.requests[-1].get("input") is not None  # it went to /responses natively
