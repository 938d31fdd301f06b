"""``gate.messages()`` / ``gate.amessages()``: litellm's Anthropic-format entry point
(``litellm.anthropic.messages.create`` / ``acreate``, what the proxy's ``/v1/messages``
calls), gated, through the real litellm over loopback HTTP.

Two routes. Native (``anthropic/<model>``): litellm passes the Anthropic wire
(``fixtures/anthropic``) through as bytes; the wire and the carrier are the same stream.
Bridged (``cometapi/<model>``): litellm calls ``/chat/completions`` (``fixtures/chat``) and
makes Anthropic events from the chat wire. Either way the caller gets Anthropic SSE bytes
with every tool_use block withheld until the gate released it, right before
``message_delta`` / ``message_stop``, or ``ToolCallQuarantined`` with no tool_use block.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest
from conftest import CASES as CHAT_CASES
from conftest import MANIFEST as CHAT_MANIFEST
from conftest import body_of, expected, no_leak
from loopback import call
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
ANTHROPIC = Fixtures("anthropic")
FIXTURES, MANIFEST, CASES = ANTHROPIC.folder, ANTHROPIC.manifest, ANTHROPIC.cases
STREAMED, WHOLE = ANTHROPIC.streamed, ANTHROPIC.whole
# Anthropic tool shapes, as a /v1/messages caller passes them.
TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
    for t in MANIFEST["tools"]
]
CHAT_TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
    for t in CHAT_MANIFEST["tools"]
]
# litellm 1.110.2's native /v1/messages stream imports its proxy package (fastapi, orjson):
# the test extra installs them, so these tests run on both litellm versions.
# litellm's chat -> Anthropic bridge appends every tool-call fragment to the tool block it
# opened last, so interleaved chat calls come out mixed: the cross-check refuses them.
# A chat call whose every fragment repeats its name becomes one tool block per fragment,
# each with an id litellm made up.
BRIDGED_OVERRIDES = {
    "two_tools_interleaved": ("quarantine", "carrier_mismatch"),
    "two_calls_interleaved": ("quarantine", "carrier_mismatch"),
    "name_repeated": ("quarantine", "carrier_mismatch"),
}


def parse(stream: bytes) -> list[dict[str, Any]]:
    """The events of an Anthropic SSE byte stream (each must be whole)."""
    events = []
    for block in stream.decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if data:
            events.append(json.loads("\n".join(data)))
    return events


def tool_blocks(events: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Each tool_use block as the events show it: id, name, arguments."""
    calls: dict[int, dict[str, Any]] = {}
    for e in events:
        if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use":
            block = e["content_block"]
            start = json.dumps(block["input"], ensure_ascii=False) if block["input"] else "{}"
            calls[e["index"]] = {
                "call_id": block["id"],
                "name": block["name"],
                "parts": [],
                "start": start,
            }
        if e["type"] == "content_block_delta" and e["index"] in calls:
            calls[e["index"]]["parts"].append(e["delta"].get("partial_json", ""))
    return [
        {"call_id": c["call_id"], "name": c["name"], "arguments": "".join(c["parts"]) or c["start"]}
        for _, c in sorted(calls.items())
    ]


def text_of(events: list[dict[str, Any]]) -> str:
    return "".join(
        e["delta"]["text"]
        for e in events
        if e["type"] == "content_block_delta" and e["delta"]["type"] == "text_delta"
    )


def run(
    gate: ToolGate, asynchronous: bool, *, stream: bool = True, **kwargs: Any
) -> tuple[list[bytes], Any]:
    args = {
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "api_key": "sk-test",
        "stream": stream,
        **kwargs,
    }
    return call(gate.messages, gate.amessages, args, asynchronous=asynchronous, stream=stream)


def check(
    *,
    outcome: str,
    reason: str | None,
    want_text: str,
    want_calls: list[dict[str, str]],
    pieces: list[bytes],
    error: Any,
) -> None:
    assert all(isinstance(p, bytes) for p in pieces)
    events = parse(b"".join(pieces))
    if outcome == "release":
        assert error is None, f"quarantined {error!r}"
        assert tool_blocks(events) == want_calls
        assert text_of(events) == want_text
        assert [e["type"] for e in events[-2:]] == ["message_delta", "message_stop"]
    else:
        assert isinstance(error, ToolCallQuarantined), error
        assert error.reason is R(reason), (error.reason, reason)
        assert tool_blocks(events) == [], "a tool_use block leaked"
        assert "message_stop" not in [e["type"] for e in events]
        assert want_text.startswith(text_of(events))
        no_leak(error, records=False)


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


# ---- native: anthropic/ -------------------------------------------------------------------
@pytest.mark.parametrize("name", STREAMED)
def test_native_stream(upstream: FakeUpstream, name: str) -> None:
    case = CASES[name]
    upstream.enqueue(Scripted((FIXTURES / case["body"]).read_bytes(), chunk_sizes=[1, 7, 13, 64]))
    pieces, error = run(
        ToolGate(TOOLS),
        True,
        model="anthropic/claude-sonnet-4-5",
        api_base=upstream.root_url,
        tools=TOOLS,
    )
    check(
        outcome=case["expect"],
        reason=case.get("reason"),
        want_text=case["text"],
        want_calls=case.get("calls", []),
        pieces=pieces,
        error=error,
    )
    if case["expect"] == "release" and case["calls"]:
        # Held from the first tool block on: the caller's blocks arrive in the wire's order.
        wire = parse((FIXTURES / case["body"]).read_bytes())
        assert parse(b"".join(pieces)) == wire


@pytest.mark.parametrize("name", WHOLE)
def test_native_whole_message(upstream: FakeUpstream, name: str) -> None:
    case = CASES[name]
    body = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(body, content_type="application/json"))
    out, error = run(
        ToolGate(TOOLS),
        True,
        stream=False,
        model="anthropic/claude-x",
        api_base=upstream.root_url,
        tools=TOOLS,
    )
    if case["expect"] == "release":
        assert error is None, error
        assert out[0]["content"] == json.loads(body)["content"]
    else:
        assert isinstance(error, ToolCallQuarantined) and error.reason is R(case["reason"])
        assert out == []
        no_leak(error, records=False)


def test_native_sync_is_refused_by_litellm_before_sending(upstream: FakeUpstream) -> None:
    before = len(upstream.requests)
    with pytest.raises(ValueError, match="not implemented for sync"):
        run(
            ToolGate(TOOLS),
            False,
            model="anthropic/claude-x",
            api_base=upstream.root_url,
            tools=TOOLS,
        )
    assert len(upstream.requests) == before


# ---- bridged: a chat-completions model behind /v1/messages ------------------------------------
BRIDGED = sorted(n for n, c in CHAT_CASES.items() if "transport" not in c)


@pytest.mark.parametrize("name", BRIDGED)
def test_bridged_stream(upstream: FakeUpstream, name: str) -> None:
    case = CHAT_CASES[name]
    outcome, reason = BRIDGED_OVERRIDES.get(name) or expected(case)
    asynchronous = sum(map(ord, name)) % 2 == 1  # each fixture one way, both ways overall
    upstream.enqueue(Scripted(body_of(case), chunk_sizes=[1, 7, 13, 64] if asynchronous else None))
    pieces, error = run(
        ToolGate(CHAT_TOOLS),
        asynchronous,
        model="cometapi/gpt-4o-mini",
        api_base=upstream.base_url,
        tools=CHAT_TOOLS,
    )
    want = [
        {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
        for c in case.get("calls", [])
    ]
    check(
        outcome=outcome,
        reason=reason,
        want_text=case["text"],
        want_calls=want,
        pieces=pieces,
        error=error,
    )
    assert upstream.requests[-1].get("messages") is not None  # it went to chat completions


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_bridged_whole_message(upstream: FakeUpstream, asynchronous: bool) -> None:
    whole = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "multiply", "arguments": '{"a": 7, "b": 8}'},
                        }
                    ],
                },
            }
        ],
    }
    # Truncated arguments: litellm cannot parse them into the block's input, so what it
    # hands over differs from the wire before the strict parse would refuse them.
    cases = (('{"a": 7, "b": 8}', None), ('{"a": 7, "b": 8', R.CARRIER_MISMATCH))
    for arguments, fault in cases:
        whole["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments  # type: ignore[index]
        upstream.enqueue(Scripted(json.dumps(whole).encode(), content_type="application/json"))
        out, error = run(
            ToolGate(CHAT_TOOLS),
            asynchronous,
            stream=False,
            model="cometapi/gpt-4o-mini",
            api_base=upstream.base_url,
            tools=CHAT_TOOLS,
        )
        if fault is None:
            assert error is None, error
            blocks = [b for b in out[0]["content"] if b["type"] == "tool_use"]
            assert [(b["id"], b["name"], b["input"]) for b in blocks] == [
                ("call_1", "multiply", {"a": 7, "b": 8})
            ]
        else:
            assert isinstance(error, ToolCallQuarantined) and error.reason is fault
            assert out == []
