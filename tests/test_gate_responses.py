"""``gate.responses()`` / ``gate.aresponses()`` through the real litellm over loopback HTTP.

Two routes: native (``openai/<model>`` with an ``api_base``: litellm calls ``/responses`` and
the wire is Responses SSE, ``fixtures/responses``) and bridged (``cometapi/<model>``: litellm
calls ``/chat/completions`` and turns the chat wire, ``fixtures/chat``, into Responses events).
Each fixture is served by the loopback fake upstream whole and in odd-sized chunks, read sync
and async. The gate must give the manifest's outcome: the exact calls released (each call's
events withheld until then, and all of them before ``response.completed``), or
``ToolCallQuarantined`` with the manifest's reason and not one function-call event handed out.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, CASES as CHAT_CASES, MANIFEST as CHAT_MANIFEST, body_of, expected

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.demo.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
OVERRIDES: dict[str, dict[str, str]] = MANIFEST["bridged"]["overrides"]
CALL_EVENTS = {
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
}
# Chunk sizes that cut the body inside events, inside UTF-8 sequences and between lines.
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}


def kind(event: Any) -> str:
    value = getattr(event, "type", None)
    return str(getattr(value, "value", value))


def is_call_event(event: Any) -> bool:
    if kind(event) in CALL_EVENTS:
        return True
    item = getattr(event, "item", None)
    item_type = item.get("type") if isinstance(item, dict) else getattr(item, "type", None)
    return kind(event).startswith("response.output_item.") and item_type == "function_call"


def collect(events: list[Any]) -> tuple[str, list[dict[str, Any]], list[str]]:
    text, calls = "", []
    for event in events:
        if kind(event) == "response.output_text.delta":
            text += event.delta
        if kind(event) == "response.output_item.done" and is_call_event(event):
            item = event.item
            get = item.get if isinstance(item, dict) else lambda k: getattr(item, k)
            calls.append(
                {"call_id": get("call_id"), "name": get("name"), "arguments": get("arguments")}
            )
    return text, calls, [kind(e) for e in events]


def run(
    gate: ToolGate, upstream: FakeUpstream, model: str, asynchronous: bool, **extra: Any
) -> tuple[list[Any], ToolCallQuarantined | None]:
    kwargs = {
        "model": model,
        "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": MANIFEST["tools"],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
        **extra,
    }
    events: list[Any] = []

    async def go() -> None:
        async for event in await gate.aresponses(**kwargs):
            events.append(event)

    try:
        if asynchronous:
            asyncio.run(go())
        else:
            for event in gate.responses(**kwargs):
                events.append(event)
    except ToolCallQuarantined as exc:
        return events, exc
    return events, None


def no_leak(exc: BaseException) -> None:
    seen: BaseException | None = exc
    while seen is not None:
        for rendered in (str(seen), repr(seen), repr(seen.args)):
            assert CANARY not in rendered
        seen = seen.__cause__ or seen.__context__
    for record in getattr(exc, "records", ()):
        assert CANARY not in record.model_dump_json()


def check(
    outcome: str,
    reason: str | None,
    want_text: str,
    want_calls: list[dict[str, Any]],
    events: list[Any],
    error: ToolCallQuarantined | None,
) -> None:
    text, calls, kinds = collect(events)
    if outcome == "release":
        assert error is None, f"quarantined {error!r}"
        assert text == want_text
        assert calls == want_calls
        assert kinds[-1] == "response.completed"
        if want_calls:
            # Every call event was withheld and released together, right before completed.
            positions = [i for i, e in enumerate(events) if is_call_event(e)]
            assert positions == list(range(positions[0], len(events) - 1))
    else:
        assert error is not None, f"released {calls!r}"
        assert error.reason is R(reason), (error.reason, reason)
        assert not [e for e in events if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in kinds
        assert want_text.startswith(text)
        no_leak(error)


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


GATE = ToolGate(MANIFEST["tools"])


@pytest.mark.parametrize("split", sorted(SPLITS))
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_native_route(upstream: FakeUpstream, name: str, asynchronous: bool, split: str) -> None:
    case = CASES[name]
    data = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(data, chunk_sizes=SPLITS[split]))
    events, error = run(GATE, upstream, "openai/gpt-4o-mini", asynchronous)
    check(case["expect"], case.get("reason"), case["text"], case.get("calls", []), events, error)
    assert upstream.requests[-1].get("input") is not None  # it went to /responses natively


BRIDGED = sorted(n for n, c in CHAT_CASES.items() if "transport" not in c)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", BRIDGED)
def test_bridged_route(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = CHAT_CASES[name]
    override = OVERRIDES.get(name)
    outcome, reason = (override["expect"], override.get("reason")) if override else expected(case)
    # Sync reads the body whole, async in odd pieces: both paths see both.
    upstream.enqueue(Scripted(body_of(case), chunk_sizes=SPLITS["split"] if asynchronous else None))
    chat_tools = CHAT_MANIFEST["tools"]
    gate = ToolGate(chat_tools)
    events, error = run(gate, upstream, "cometapi/gpt-4o-mini", asynchronous)
    want = [
        {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case.get("calls", [])
    ]
    check(outcome, reason, case["text"], want, events, error)
    assert upstream.requests[-1].get("messages") is not None  # it went to chat completions
