"""Release on the callback path is all or nothing, and a failure after the decision is typed.

The gate accepts a wire whose messages carry a field litellm cannot parse, outside the tool
call (``"created": "x"``). Released as is, litellm would hand the caller the first fragment
of the call and then fail with an error of its own. litellm's own parser is asked first, so
the attempt is refused as a carrier mismatch and no fragment goes out.

A whole (non-streamed) body goes the same way, on every way of use (callback and ToolGate,
sync and async, chat and litellm's Responses bridge): a body litellm cannot convert (a
``usage`` that is no object, a ``model`` its Responses bridge refuses) is a typed
``CarrierMismatch``, never litellm's own error (whose message quotes the body).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY

from litellm_toolgate import (
    CarrierMismatch,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.edge.parsers import responses_event_check
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True


def event(delta: dict[str, Any], finish: str | None = None, **envelope: Any) -> bytes:
    value = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **envelope,
    }
    return b"data: " + json.dumps(value).encode() + b"\n\n"


def body(where: int, **bad: Any) -> bytes:
    head = {"index": 0, "id": "call_1", "type": "function"}
    parts = [
        ({"role": "assistant", "content": "Let me "}, None),
        ({"content": "work it out."}, None),
        (
            {"tool_calls": [{**head, "function": {"name": "multiply", "arguments": '{"a": 7, '}}]},
            None,
        ),
        (
            {
                "tool_calls": [
                    {"index": 0, "function": {"arguments": f'"b": 8, "c": "{CANARY}"' + "}"}}
                ]
            },
            None,
        ),
        ({}, "tool_calls"),
    ]
    events = [event(d, f, **(bad if i == where else {})) for i, (d, f) in enumerate(parts)]
    return b"".join(events) + b"data: [DONE]\n\n"


@pytest.fixture(autouse=True)
def gate() -> Iterator[None]:
    saved = litellm.callbacks
    tools = [{**MULTIPLY, "function": {**MULTIPLY["function"], "parameters": {"type": "object"}}}]
    litellm.callbacks = [ToolGateGuardrail(tools)]
    yield
    litellm.callbacks = saved
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def run(base: str, mode: str) -> tuple[list[str], str, BaseException | None]:
    kwargs = {
        "model": "cometapi/gpt-4o-mini",
        "messages": [{"role": "user", "content": "7 times 8"}],
        "stream": True,
        "api_base": base,
        "api_key": "sk",
        "num_retries": 0,
    }
    chunks: list[Any] = []
    error: BaseException | None = None
    try:
        if mode == "sync":
            for chunk in litellm.completion(**kwargs):
                chunks.append(chunk)
        else:

            async def go() -> None:
                async for chunk in await litellm.acompletion(**kwargs):
                    chunks.append(chunk)

            asyncio.run(go())
    except Exception as exc:
        error = exc
    fragments = [
        tc.function.arguments or ""
        for c in chunks
        for choice in c.choices
        for tc in choice.delta.tool_calls or []
    ]
    text = "".join(choice.delta.content or "" for c in chunks for choice in c.choices)
    return fragments, text, error


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("where", "bad"),
    [(2, {"created": "x"}), (3, {"id": 5}), (4, {"model": 5}), (1, {"created": "x"})],
    ids=["first-fragment", "second-fragment", "finish", "live-text"],
)
def test_a_message_litellm_cannot_parse_releases_nothing(
    mode: str, where: int, bad: dict[str, Any]
) -> None:
    with FakeUpstream(lambda request: Scripted(body(where, **bad))) as upstream:
        fragments, text, error = run(upstream.base_url, mode)
    assert isinstance(error, CarrierMismatch), repr(error)
    assert fragments == [], "a fragment of the call went out"
    assert "Let me work it out.".startswith(text), text  # live text only, up to the fault
    seen: BaseException | None = error
    while seen is not None:  # litellm's parse error (which quotes the input) is not chained
        assert CANARY not in f"{seen} {seen!r}"
        seen = seen.__cause__ or seen.__context__


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_same_wire_parsed_cleanly_is_released(mode: str) -> None:
    with FakeUpstream(lambda request: Scripted(body(-1))) as upstream:
        fragments, text, error = run(upstream.base_url, mode)
    assert error is None and text == "Let me work it out."
    assert json.loads("".join(fragments)) == {"a": 7, "b": 8, "c": CANARY}


# ---- whole (non-streamed) bodies: a failure after the decision is typed ----------------------
def whole_body(**envelope: Any) -> bytes:
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": f'{{"a": 7, "b": 8, "c": "{CANARY}"}}'},
    }
    value = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        **envelope,
    }
    return json.dumps(value).encode()


def run_whole(base: str, way: str, mode: str, api: str) -> tuple[Any, BaseException | None]:
    kwargs: dict[str, Any] = {
        "model": "cometapi/gpt-4o-mini",
        "api_base": base,
        "api_key": "sk",
        "num_retries": 0,
    }
    if api == "chat":
        kwargs["messages"] = [{"role": "user", "content": "7 times 8"}]
    else:
        kwargs["input"] = "7 times 8"
    if way == "ToolGate":
        tools = litellm.callbacks[0].gate  # the same settings, used directly
        litellm.callbacks = []
        calls = {"chat": (tools.completion, tools.acompletion)}
        calls["responses"] = (tools.responses, tools.aresponses)
    else:
        calls = {"chat": (litellm.completion, litellm.acompletion)}
        calls["responses"] = (litellm.responses, litellm.aresponses)
    sync, asynchronous = calls[api]
    try:
        if mode == "sync":
            return sync(**kwargs), None

        async def go() -> Any:
            return await asynchronous(**kwargs)

        return asyncio.run(go()), None
    except Exception as exc:
        return None, exc


WAYS = [(w, m) for w in ("callback", "ToolGate") for m in ("sync", "async")]


@pytest.mark.parametrize(("way", "mode"), WAYS, ids=[f"{w}-{m}" for w, m in WAYS])
@pytest.mark.parametrize(
    ("api", "bad"),
    [("chat", {"usage": "x"}), ("responses", {"usage": "x"}), ("responses", {"model": 5})],
    ids=["chat-usage", "bridged-responses-usage", "bridged-responses-model"],
)
def test_a_whole_body_litellm_cannot_convert_is_refused_typed(
    way: str, mode: str, api: str, bad: dict[str, Any]
) -> None:
    """The gate approves the body; litellm's converter (or its Responses bridge) would fail
    on a field outside the call with an error of its own that quotes the body."""
    with FakeUpstream(
        lambda request: Scripted(whole_body(**bad), content_type="application/json")
    ) as upstream:
        result, error = run_whole(upstream.base_url, way, mode, api)
    assert result is None
    assert isinstance(error, CarrierMismatch), repr(error)
    assert find_quarantine(error) is error
    seen: BaseException | None = error
    while seen is not None:  # litellm's error (which quotes the body) is not chained
        assert CANARY not in f"{seen} {seen!r}"
        seen = seen.__cause__ or seen.__context__


@pytest.mark.parametrize(("way", "mode"), WAYS, ids=[f"{w}-{m}" for w, m in WAYS])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_the_same_whole_body_converted_cleanly_is_released(way: str, mode: str, api: str) -> None:
    with FakeUpstream(
        lambda request: Scripted(whole_body(), content_type="application/json")
    ) as upstream:
        result, error = run_whole(upstream.base_url, way, mode, api)
    assert error is None, repr(error)
    if api == "chat":
        arguments = result.choices[0].message.tool_calls[0].function.arguments
    else:
        arguments = next(i.arguments for i in result.output if i.type == "function_call")
    assert json.loads(arguments) == {"a": 7, "b": 8, "c": CANARY}


# ---- the Responses wire ----------------------------------------------------------------------
# litellm's Responses iterator (both versions) parses each event with the route's
# transform_streaming_response, which falls back to an unvalidated model when pydantic
# refuses the event; it then takes a ``response`` that stayed a plain object. What it fails
# on is a terminal event whose ``response`` is no object (the sync iterator reads its usage
# while logging, after every call event went out). The gate must refuse that before any
# event of the call is released, on every way of use.
TERMINALS = {"response.completed", "response.incomplete", "response.failed"}
RESPONSES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"


def native_events() -> list[dict[str, Any]]:
    text = (RESPONSES / "multiply_basic.sse").read_text(encoding="utf-8")
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: {")]


def native_stream(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def run_responses(base: str, way: str, mode: str) -> tuple[list[Any], BaseException | None]:
    kwargs: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "input": "7 times 8",
        "stream": True,
        "api_base": base,
        "api_key": "sk",
        "num_retries": 0,
    }
    sync, asynchronous = litellm.responses, litellm.aresponses
    if way == "ToolGate":
        gate = litellm.callbacks[0].gate
        litellm.callbacks = []
        sync, asynchronous = gate.responses, gate.aresponses
    events: list[Any] = []
    try:
        if mode == "sync":
            events.extend(sync(**kwargs))
        else:

            async def go() -> None:
                async for event in await asynchronous(**kwargs):
                    events.append(event)

            asyncio.run(go())
    except Exception as exc:
        return events, exc
    return events, None


def call_events(events: list[Any]) -> list[Any]:
    def item_type(event: Any) -> Any:
        item = getattr(event, "item", None)
        return item.get("type") if isinstance(item, dict) else getattr(item, "type", None)

    return [
        e
        for e in events
        if "function_call" in str(getattr(e, "type", "")) or item_type(e) == "function_call"
    ]


@pytest.mark.parametrize(("way", "mode"), WAYS, ids=[f"{w}-{m}" for w, m in WAYS])
@pytest.mark.parametrize("terminal", ["x", None, [1]], ids=["string", "null", "list"])
def test_a_responses_terminal_litellm_cannot_take_releases_nothing(
    way: str, mode: str, terminal: Any
) -> None:
    events = native_events()
    events[-1] = {**events[-1], "response": terminal}
    assert events[-1]["type"] == "response.completed"
    with FakeUpstream(lambda request: Scripted(native_stream(events))) as upstream:
        released, error = run_responses(upstream.base_url, way, mode)
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert find_quarantine(error) is error
    assert call_events(released) == [], "an event of the call went out"


def test_the_responses_event_check_takes_every_event_litellm_takes() -> None:
    check = responses_event_check("openai/gpt-4o-mini")
    assert check is not None
    for path in sorted(RESPONSES.glob("*.sse")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("data: {"):
                try:
                    event = json.loads(line[6:])
                except ValueError:
                    continue  # a damaged line: the attempt judges it, litellm skips it
                if not isinstance(event, dict):
                    continue
                if event.get("type") not in TERMINALS or isinstance(event.get("response"), dict):
                    assert check(event), (path.name, event.get("type"))
    completed = native_events()[-1]
    for bad in ("x", None, [1], 5):
        assert not check({**completed, "response": bad})


@pytest.mark.parametrize(("way", "mode"), WAYS, ids=[f"{w}-{m}" for w, m in WAYS])
def test_the_same_responses_stream_is_released(way: str, mode: str) -> None:
    with FakeUpstream(lambda request: Scripted(native_stream(native_events()))) as upstream:
        released, error = run_responses(upstream.base_url, way, mode)
    assert error is None, repr(error)
    assert call_events(released), "the call was not released"
