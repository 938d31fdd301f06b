"""The Anthropic wire's quarantines leak no argument text (canary in the arguments).

Each case carries the canary in a tool block's arguments where the reason's own error would
quote it (the JSON text, the schema's failing value, the start input, the bytes before an
error or an end). It runs through ``gate.completion`` and ``gate.acompletion`` on an
``anthropic/`` model (respx at the httpx edge, ``/v1/messages``), and a whole message through
``gate.amessages``, with every logger captured at DEBUG (tests/leakcheck.py): the
quarantine, its chain, its records and every log record must be free of the canary.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CANARY, Pieces
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate

litellm.suppress_debug_info = True
# respx answers at httpx's edge: litellm's async handlers on httpx (conftest).
pytestmark = pytest.mark.usefixtures("litellm_on_httpx")
R = QuarantineReason
C = CANARY
URL = "http://upstream.test/v1/messages"
TOOLS = [
    {
        "name": "write_file",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "maxLength": 8},
                "content": {"type": "string"},
            },
            "required": ["path", "content"],
        },
    }
]
ARGS = json.dumps({"path": f"src/{C}.py", "content": f"# {C}\n"})


def ev(kind: str, **fields: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps({'type': kind, **fields})}\n\n".encode()


START = ev("message_start", message={"id": "msg_leak", "content": []})
BLOCK = ev(
    "content_block_start",
    index=0,
    content_block={"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}},
)


def delta(text: str) -> bytes:
    return ev(
        "content_block_delta", index=0, delta={"type": "input_json_delta", "partial_json": text}
    )


STOP = ev("content_block_stop", index=0)


def end(reason: str = "tool_use") -> bytes:
    return ev("message_delta", delta={"stop_reason": reason}) + ev("message_stop")


CASES: dict[str, tuple[bytes, QuarantineReason]] = {
    "schema_invalid": (START + BLOCK + delta(ARGS) + STOP + end(), R.SCHEMA_INVALID),
    "invalid_json": (START + BLOCK + delta(ARGS[:-2]) + STOP + end(), R.INVALID_JSON),
    "trailing_data": (START + BLOCK + delta(ARGS + f' "{C}"') + STOP + end(), R.TRAILING_DATA),
    "max_tokens": (
        START + BLOCK + delta(ARGS) + STOP + end("max_tokens"),
        R.FINISH_REASON_MISMATCH,
    ),
    "overloaded": (
        START + BLOCK + delta(ARGS[:30]) + ev("error", error={"type": "overloaded_error"}),
        R.ERROR_EVENT,
    ),
    "eof_mid_arguments": (START + BLOCK + delta(ARGS[:30]), R.MISSING_FINISH),
    "start_input": (
        START
        + BLOCK.replace(b'"input": {}', json.dumps({"input": json.loads(ARGS)})[1:-1].encode())
        + STOP
        + end(),
        R.ITEM_MISMATCH,
    ),
}


def run(body: bytes, asynchronous: bool) -> tuple[list[Any], BaseException | None]:
    gate = ToolGate(TOOLS)
    chunks: list[Any] = []
    kwargs = {
        "model": "anthropic/claude-x",
        "messages": [{"role": "user", "content": "go"}],
        "api_base": "http://upstream.test",
        "api_key": "sk-ant-test",
        "tools": [
            {
                "type": "function",
                "function": {"name": "write_file", "parameters": {"type": "object"}},
            }
        ],
        "stream": True,
    }

    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces([body])
        )

    async def go() -> None:
        async for chunk in await gate.acompletion(**kwargs):
            chunks.append(chunk)

    error: BaseException | None = None
    with respx.mock as router:
        router.post(URL).mock(side_effect=respond)
        try:
            if asynchronous:
                asyncio.run(go())
            else:
                chunks.extend(gate.completion(**kwargs))
        except Exception as exc:
            error = exc
    return chunks, error


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", list(CASES))
def test_no_anthropic_quarantine_leaks_the_arguments(name: str, asynchronous: bool) -> None:
    body, reason = CASES[name]
    assert C.encode() in body, "the canary must be on the wire for this to prove anything"
    with every_logger() as logs:
        chunks, error = run(body, asynchronous)
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is reason
    assert not [tc for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])]
    assert_clean_exception(error)
    assert_clean_logs(logs)
    assert [r for r in logs if r.name == "litellm_toolgate"], "the gate logs its decision"


def test_a_whole_message_through_amessages_leaks_nothing() -> None:
    message = {
        "id": "msg_leak",
        "type": "message",
        "role": "assistant",
        "model": "claude-x",
        "content": [
            {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": json.loads(ARGS)}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    gate = ToolGate(TOOLS)

    async def go() -> Any:
        return await gate.amessages(
            model="anthropic/claude-x",
            max_tokens=64,
            messages=[{"role": "user", "content": "go"}],
            tools=TOOLS,
            api_base="http://upstream.test",
            api_key="sk-ant-test",
        )

    error: BaseException | None = None
    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(return_value=httpx.Response(200, json=message))
        try:
            asyncio.run(go())
        except ToolCallQuarantined as exc:
            error = exc
    assert isinstance(error, ToolCallQuarantined) and error.reason is R.SCHEMA_INVALID
    assert_clean_exception(error)
    assert_clean_logs(logs)
