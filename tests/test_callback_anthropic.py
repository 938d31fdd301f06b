"""``ToolGateGuardrail`` in ``litellm.callbacks`` on the Anthropic wire, real litellm on loopback.

``litellm.acompletion(model="anthropic/...")`` streamed and whole for every Anthropic fixture:
the injected client withholds on the wire itself (by the core's event classification), so no
tool-call chunk reaches the caller before the gate released it; a quarantine reaches the
caller as litellm's exception with the gate's behind it (:func:`find_quarantine`).
``litellm.anthropic.messages.acreate`` (call type ``anthropic_messages``) the same way, native
and bridged from a chat model. ``litellm.acompletion(model="vertex_ai/claude-...")`` (the same
wire through Vertex's rawPredict, tests/vertexauth.py) for every other streamed fixture (the
rest go through sync ``litellm.completion`` in test_callback_anthropic_sync.py) and every
whole body.
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
from vertexauth import CLAUDE_MODEL, vertex_args

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
STREAMED = sorted(n for n, c in CASES.items() if c["streamed"])
WHOLE = sorted(n for n, c in CASES.items() if not c["streamed"])
# Two tool blocks open at once: litellm appends every input_json_delta to the tool call it
# opened last, so it would hand over the two calls' arguments mixed. The callback runs
# litellm's own parser over the held body before releasing it (preflight.litellm_parse) and
# refuses what it would make, as ToolGate refuses litellm's chunks (test_gate_anthropic).
THROUGH_CHAT: dict[str, dict[str, str]] = {
    "tool_deltas_overlap": {"expect": "quarantine", "reason": "carrier_mismatch"}
}
# The chat routes on Anthropic's wire: the model and what else the route needs.
ROUTES = {
    "anthropic": ("anthropic/claude-sonnet-4-5", {"api_key": "sk-ant-test"}),
    "vertex_ai": (CLAUDE_MODEL, vertex_args()),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    yield
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


@pytest.fixture
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        gate.close()


def _no_leak(error: BaseException) -> None:
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


async def _completion(
    upstream: FakeUpstream, stream: bool, route: str = "anthropic"
) -> tuple[list[Any], Any]:
    out: list[Any] = []
    error: BaseException | None = None
    model, extra = ROUTES[route]
    try:
        result = await litellm.acompletion(
            model=model,
            messages=[{"role": "user", "content": "go"}],
            tools=MANIFEST["tools"],
            api_base=upstream.root_url,
            num_retries=0,
            stream=stream,
            **extra,
        )
        if stream:
            async for chunk in result:
                out.append(chunk)
        else:
            out.append(result)
    except Exception as exc:
        error = exc
    return out, error


def _calls(chunks: list[Any]) -> list[tuple[str | None, str | None, str]]:
    """(id, name, arguments) per tool index, as the caller would assemble them."""
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, None, ""])
                call[0] = call[0] or tc.id
                call[1] = call[1] or tc.function.name
                call[2] += tc.function.arguments or ""
    return [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


# vertex_ai/: every other recording here, the rest sync (test_callback_anthropic_sync).
STREAMS = [pytest.param(name, "anthropic", id=name) for name in STREAMED] + [
    pytest.param(name, "vertex_ai", id=f"vertex-{name}")
    for i, name in enumerate(STREAMED)
    if i % 2 == 0 or name == "multiply_basic"
]


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(("name", "route"), STREAMS)
def test_acompletion_stream(upstream: FakeUpstream, name: str, route: str) -> None:
    case = {**CASES[name], **THROUGH_CHAT.get(name, {})}
    upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes(), chunk_sizes=[1, 7, 64]))
    chunks, error = asyncio.run(_completion(upstream, True, route))
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        want = [(c["call_id"], c["name"], c["arguments"]) for c in case["calls"]]
        # litellm shows an empty input as no text; the gate withheld it all the same.
        got = [(i, n, a or "{}") for i, n, a in _calls(chunks)]
        assert got == want
    else:
        assert error is not None, f"{name}: released {_calls(chunks)}"
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined), repr(error)
        assert fault.reason is R(case["reason"])
        assert _calls(chunks) == []
        _no_leak(error)


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", WHOLE)
def test_acompletion_whole(upstream: FakeUpstream, name: str, route: str) -> None:
    case = CASES[name]
    upstream.enqueue(
        Scripted((FIXTURES / case["body"]).read_bytes(), content_type="application/json")
    )
    out, error = asyncio.run(_completion(upstream, False, route))
    if case["expect"] == "release":
        assert error is None, error
        calls = out[0].choices[0].message.tool_calls or []
        assert [(c.id, c.function.name) for c in calls] == [
            (c["call_id"], c["name"]) for c in case["calls"]
        ]
    else:
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined) and fault.reason is R(case["reason"])
        assert out == []


async def _acreate(upstream: FakeUpstream, model: str, base: str, stream: bool) -> Any:
    out: list[Any] = []
    error: BaseException | None = None
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
        for t in MANIFEST["tools"]
    ]
    try:
        result = await litellm.anthropic.messages.acreate(
            model=model,
            max_tokens=256,
            messages=[{"role": "user", "content": "go"}],
            tools=tools,
            api_base=base,
            api_key="sk-test",
            stream=stream,
        )
        if stream:
            async for piece in result:
                out.append(piece)
        else:
            out.append(result)
    except Exception as exc:
        error = exc
    return out, error


def _tool_starts(pieces: list[Any]) -> int:
    return b"".join(pieces).count(b'"type":"tool_use"') + b"".join(pieces).count(
        b'"type": "tool_use"'
    )


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(
    "name", ["multiply_basic", "interleaved_blocks", "overloaded_error", "stop_max_tokens"]
)
def test_messages_acreate_native_stream(upstream: FakeUpstream, name: str) -> None:
    case = CASES[name]
    upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes(), chunk_sizes=[3, 50]))
    pieces, error = asyncio.run(_acreate(upstream, "anthropic/claude-x", upstream.root_url, True))
    if case["expect"] == "release":
        assert error is None, error
        assert _tool_starts(pieces) == len(case["calls"])
    else:
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined) and fault.reason is R(case["reason"])
        assert _tool_starts(pieces) == 0


@pytest.mark.usefixtures("gate")
def test_messages_acreate_native_whole(upstream: FakeUpstream) -> None:
    for name in ("whole_tool_use", "whole_schema_invalid"):
        case = CASES[name]
        upstream.enqueue(
            Scripted((FIXTURES / case["body"]).read_bytes(), content_type="application/json")
        )
        out, error = asyncio.run(_acreate(upstream, "anthropic/claude-x", upstream.root_url, False))
        if case["expect"] == "release":
            assert error is None and len(out[0]["content"]) == 3
        else:
            fault = find_quarantine(error)
            assert isinstance(fault, ToolCallQuarantined) and fault.reason is R(case["reason"])
            assert out == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(
    ("name", "stream"),
    [
        ("multiply_basic", True),
        ("args_invalid_json", True),
        ("multiply_basic", False),
        ("args_invalid_json", False),
    ],
)
def test_messages_acreate_bridged(upstream: FakeUpstream, name: str, stream: bool) -> None:
    """A chat model behind litellm.anthropic.messages.acreate, under the callback."""
    from conftest import CASES as CHAT_CASES
    from conftest import body_of

    from litellm_toolgate.demo.serve import as_requested

    case = CHAT_CASES[name]
    upstream.enqueue(as_requested({"stream": stream}, body_of(case)))
    out, error = asyncio.run(_acreate(upstream, "cometapi/gpt-4o-mini", upstream.base_url, stream))
    if case["expect"] == "release":
        assert error is None, error
        if stream:
            assert _tool_starts(out) == 1
        else:
            assert [b["name"] for b in out[0]["content"] if b["type"] == "tool_use"] == ["multiply"]
    elif stream:
        # litellm's bridge turns the chat call's error into an ``event: error`` frame of the
        # Anthropic stream it hands over (its caller's Anthropic SDK raises on it).
        assert error is None
        body = b"".join(out)
        assert _tool_starts(out) == 0
        assert b"event: error" in body and f"quarantined: {case['reason']}".encode() in body
    else:
        # A whole body is decided in the transport, with litellm's bridge run over it first:
        # arguments its converter cannot take are a carrier mismatch before they are parsed.
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined)
        assert fault.reason in (R(case["reason"]), R.CARRIER_MISMATCH)
        assert out == []
        _no_leak(error)


def _create(upstream: FakeUpstream, stream: bool) -> Any:
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
        for t in MANIFEST["tools"]
    ]
    result = litellm.anthropic.messages.create(
        model="cometapi/gpt-4o-mini",
        max_tokens=256,
        messages=[{"role": "user", "content": "go"}],
        tools=tools,
        api_base=upstream.base_url,
        api_key="sk-test",
        stream=stream,
    )
    return list(result) if stream else result


@pytest.mark.usefixtures("gate")
def test_messages_create_bridged_stream_is_refused_unsent(upstream: FakeUpstream) -> None:
    """litellm's sync Messages adapter ends its stream quietly on any exception, so a
    quarantine raised under it could never reach the caller: refused before sending."""
    from litellm_toolgate import UngatedCallRefused

    sent = len(upstream.requests)
    with pytest.raises(UngatedCallRefused, match="acreate"):
        _create(upstream, stream=True)
    assert len(upstream.requests) == sent


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("name", ["multiply_basic", "args_invalid_json"])
def test_messages_create_bridged_whole_is_gated(upstream: FakeUpstream, name: str) -> None:
    from conftest import CASES as CHAT_CASES
    from conftest import body_of

    from litellm_toolgate.demo.serve import as_requested

    case = CHAT_CASES[name]
    upstream.enqueue(as_requested({"stream": False}, body_of(case)))
    if case["expect"] == "release":
        message = _create(upstream, stream=False)
        assert [b["name"] for b in message["content"] if b["type"] == "tool_use"] == ["multiply"]
        return
    with pytest.raises(ToolCallQuarantined) as caught:
        _create(upstream, stream=False)
    assert caught.value.reason is R(case["reason"])
    _no_leak(caught.value)
