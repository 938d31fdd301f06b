"""``toolgate demo --api anthropic``: the 7 × 8 tool loop over ``/v1/messages``.

The calls are Anthropic-shaped (``gate.amessages()``, litellm's Anthropic-format entry point,
the one the proxy's ``/v1/messages`` calls) against an ``anthropic/`` model on the loopback
fake upstream, which speaks the Anthropic wire. Round one streams a ``tool_use`` block for
``multiply``; the gate releases it only after its ``content_block_stop``, ``stop_reason:
tool_use``, ``message_stop`` and a clean end of the body, a strict parse and the schema. The
demo multiplies locally and sends the product back as a ``tool_result`` block with the
block's ``tool_use_id`` (the fake answers a result only when that id matches); round two
streams the answer. Then a broken stream (the tool input cut short, the body ending before
any ``message_delta``) is quarantined.

litellm 1.110.2's streamed Anthropic pass-through imports litellm's proxy package; where that
is not installed the demo makes whole (``stream=False``) calls instead and says so.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from ..core.errors import ToolCallQuarantined
from ..loopback.upstream import FakeUpstream, Scripted, recording

if TYPE_CHECKING:
    from ..edge.gate import ToolGate

MODEL = "anthropic/claude-sonnet-4-5"
MULTIPLY = {
    "name": "multiply",
    "description": "Multiply two finite numbers.",
    "input_schema": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}
ROUND_ONE = "round1_multiply_anthropic.sse"


def _event(kind: str, **fields: Any) -> bytes:
    data = json.dumps({"type": kind, **fields}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def answer_events(text: str, message_id: str = "msg_demo_answer") -> bytes:
    """An Anthropic SSE body streaming ``text`` as one text block, then ``end_turn``."""
    message = {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [],
        "usage": {"input_tokens": 40, "output_tokens": 1},
    }
    parts = [
        _event("message_start", message=message),
        _event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
    ]
    for start in range(0, len(text), 6):
        delta = {"type": "text_delta", "text": text[start : start + 6]}
        parts.append(_event("content_block_delta", index=0, delta=delta))
    parts += [
        _event("content_block_stop", index=0),
        _event("message_delta", delta={"stop_reason": "end_turn"}, usage={"output_tokens": 9}),
        _event("message_stop"),
    ]
    return b"".join(parts)


def whole_of(sse: bytes) -> bytes:
    """A well-formed Anthropic SSE body as the one message a ``stream=False`` call returns."""
    message: dict[str, Any] = {}
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for chunk in sse.decode().split("\n\n"):
        data = [line[6:] for line in chunk.split("\n") if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads("".join(data))
        kind = event["type"]
        if kind == "message_start":
            message = dict(event["message"])
        elif kind == "content_block_start":
            blocks[event["index"]] = dict(event["content_block"])
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif delta["type"] == "input_json_delta":
                inputs[event["index"]] = inputs.get(event["index"], "") + delta["partial_json"]
        elif kind == "message_delta":
            message["stop_reason"] = event["delta"].get("stop_reason")
    for index, text in inputs.items():
        blocks[index]["input"] = json.loads(text) if text else {}
    message["content"] = [blocks[i] for i in sorted(blocks)]
    message.setdefault("usage", {"input_tokens": 40, "output_tokens": 12})
    return json.dumps(message).encode()


def _tool_uses(messages: list[dict[str, Any]]) -> set[Any]:
    return {
        block.get("id")
        for m in messages
        if m.get("role") == "assistant" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_use"
    }


def fake_answer(request: dict[str, Any]) -> Scripted:
    """Answer one ``/v1/messages`` request (see the module docstring)."""
    stream = request.get("stream") is True
    messages = request.get("messages") or []
    results = [
        block
        for m in messages
        if m.get("role") == "user" and isinstance(m.get("content"), list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    if results:
        if results[-1].get("tool_use_id") not in _tool_uses(messages):
            error = {"type": "invalid_request_error", "message": "no such tool_use_id"}
            body = json.dumps({"type": "error", "error": error}).encode()
            return Scripted(body, status=400, content_type="application/json")
        content: Any = results[-1].get("content")
        text = content if isinstance(content, str) else content[0]["text"]
        sse = answer_events(f"7 times 8 is {json.loads(text)['value']:g}.")
    elif "broken" in json.dumps(messages).lower():
        sse = recording(ROUND_ONE)
        # The tool input cut short, and the body ends there: no stop, no message_delta.
        sse = sse[: sse.rindex(b"event: content_block_delta")]
        if not stream:
            body = json.loads(whole_of(recording(ROUND_ONE)))
            body["stop_reason"] = "max_tokens"
            return Scripted(json.dumps(body).encode(), content_type="application/json")
    else:
        sse = recording(ROUND_ONE)
    if stream:
        return Scripted(sse, chunk_sizes=[7, 64, 3])
    return Scripted(whole_of(sse), content_type="application/json")


def _collect(pieces: list[bytes]) -> tuple[str, list[dict[str, Any]]]:
    """The text and the tool_use blocks (input parsed) of an Anthropic SSE byte stream."""
    text = ""
    blocks: dict[int, dict[str, Any]] = {}
    inputs: dict[int, str] = {}
    for chunk in b"".join(pieces).decode().split("\n\n"):
        data = [line[6:] for line in chunk.split("\n") if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads("".join(data))
        if event["type"] == "content_block_start" and event["content_block"]["type"] == "tool_use":
            blocks[event["index"]] = dict(event["content_block"])
        elif event["type"] == "content_block_delta":
            delta = event["delta"]
            if delta["type"] == "text_delta":
                text += delta["text"]
            elif delta["type"] == "input_json_delta":
                inputs[event["index"]] = inputs.get(event["index"], "") + delta["partial_json"]
    for index, block in blocks.items():
        block["input"] = json.loads(inputs.get(index) or "{}")
    return text, [blocks[i] for i in sorted(blocks)]


async def _round(gate: ToolGate, out: TextIO, stream: bool, **kwargs: Any) -> Any:
    result = await gate.amessages(stream=stream, **kwargs)
    if not stream:
        text = "".join(b.get("text", "") for b in result["content"] if b["type"] == "text")
        out.write(text + "\n")
        return text, [b for b in result["content"] if b["type"] == "tool_use"]
    pieces = []
    async for piece in result:
        pieces.append(piece)
    text, calls = _collect(pieces)
    out.write(text + "\n")
    return text, calls


def run_anthropic(out: TextIO, model: str | None, flush_logs: Callable[[], None]) -> int:
    return asyncio.run(_demo(out, model or MODEL, flush_logs))


async def _demo(out: TextIO, model: str, flush_logs: Callable[[], None]) -> int:
    # Imported here: the fake upstream's handler (fake_answer) must not wait for litellm.
    from ..edge.gate import ToolGate

    stream = importlib.util.find_spec("fastapi") is not None
    with FakeUpstream(handler=fake_answer) as upstream:
        route = {"model": model, "api_base": upstream.root_url, "api_key": "sk-ant-demo"}
        out.write(f"upstream: fake Anthropic API on {upstream.root_url}/v1/messages\n")
        if not stream:
            out.write("(litellm's proxy package is not installed: whole, non-streamed calls)\n")
        gate = ToolGate([MULTIPLY])
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "What is 7 times 8? Use multiply."}
        ]
        common = {"max_tokens": 1024, "tools": [MULTIPLY], **route}

        out.write("\n== round 1: the model asks for a tool ==\n")
        text, calls = await _round(gate, out, stream, messages=messages, **common)
        flush_logs()
        if [c["name"] for c in calls] != ["multiply"]:
            out.write("expected exactly one multiply tool_use block\n")
            return 1
        product = float(calls[0]["input"]["a"]) * float(calls[0]["input"]["b"])
        out.write(
            f"released: multiply (tool_use {calls[0]['id']}), validated; "
            f"computed locally: {product:g}\n"
        )
        assistant = [{"type": "text", "text": text}] if text else []
        messages += [
            {"role": "assistant", "content": [*assistant, *calls]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": calls[0]["id"],
                        "content": json.dumps({"value": product}),
                    }
                ],
            },
        ]

        out.write("\n== round 2: the model answers ==\n")
        await _round(gate, out, stream, messages=messages, **common)
        flush_logs()

        what = "the input cut short, no stop_reason" if stream else "stop_reason max_tokens"
        out.write(f"\n== a broken message: {what} ==\n")
        broken = [{"role": "user", "content": "broken: write it down"}]
        try:
            await _round(gate, out, stream, messages=broken, **common)
        except ToolCallQuarantined as exc:
            flush_logs()
            out.write(f"the gate: {exc}\n")
            for record in exc.records:
                out.write(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
            out.write("nothing was released; the caller never saw that tool_use block\n")
            return 0
        out.write("the broken message was not quarantined\n")
        return 1
