"""``toolgate demo --api responses``: the 7 × 8 tool loop through ``gate.responses()``.

Round one streams a ``multiply`` function call; the gate releases its events only after the
item's ``arguments.done``, its ``output_item.done`` and ``response.completed`` all agreed
with the wire and the arguments passed the schema. The demo multiplies locally and sends the
result back as a ``function_call_output`` item with the call's ``call_id``; round two streams
the answer (built by the fake upstream from that result). Then a broken chat stream
(arguments cut short, ``[DONE]`` with no finish reason) goes through litellm's Responses
bridge twice: plain litellm ends it in ``response.completed``, the gate quarantines it.

With a ``cometapi/...`` model (the default) litellm bridges to chat completions (to the real
CometAPI when ``COMETAPI_KEY`` is set); with ``openai/...`` it calls the fake upstream's
``/responses`` natively (Responses SSE).
"""

from __future__ import annotations

import json
import os
import warnings
from typing import Any, TextIO

import litellm

from .. import ToolCallQuarantined, ToolGate
from ..loopback.upstream import FakeUpstream, Scripted, answer_stream, recording

MULTIPLY = {
    "type": "function",
    "name": "multiply",
    "description": "Multiply two finite numbers.",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}
WRITE_FILE = {
    "type": "function",
    "name": "write_file",
    "description": "Write text to a file in the workspace.",
    "parameters": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
        "additionalProperties": False,
    },
}


def answer_events(text: str) -> bytes:
    """A native Responses SSE body streaming ``text`` as one message item, then completed."""
    item = {
        "id": "msg_demo_answer",
        "type": "message",
        "status": "in_progress",
        "role": "assistant",
    }
    response = {"id": "resp_demo_answer", "object": "response", "status": "in_progress"}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "output": []}},
        {"type": "response.output_item.added", "output_index": 0, "item": {**item, "content": []}},
    ]
    for word in text.split(" "):
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "delta": word if not events[-1]["type"].endswith("delta") else " " + word,
            }
        )
    final = {**item, "status": "completed", "content": [{"type": "output_text", "text": text}]}
    events.append({"type": "response.output_item.done", "output_index": 0, "item": final})
    events.append(
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [final]},
        }
    )
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    )


def fake_answer(request: dict[str, Any]) -> Scripted:
    """Round one: the recorded multiply call. Round two: an answer built from the result.

    A native request (``input``) gets Responses SSE; a bridged one (``messages``) chat SSE.
    """
    if "input" in request:
        items = request["input"]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        if not outputs:
            return Scripted(recording("round1_multiply_responses.sse"), chunk_sizes=[7, 64, 3])
        calls = {i.get("call_id") for i in items if i.get("type") == "function_call"}
        if outputs[-1].get("call_id") not in calls:
            return _unmatched()
        value = json.loads(outputs[-1]["output"])["value"]
        return Scripted(answer_events(f"7 times 8 is {value:g}."), chunk_sizes=[5, 40])
    messages = request.get("messages", [])
    results = [m for m in messages if m.get("role") == "tool"]
    if not results:
        return Scripted(recording("round1_multiply.sse"), chunk_sizes=[7, 64, 3])
    asked = {
        call.get("id")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
    }
    if results[-1].get("tool_call_id") not in asked:
        return _unmatched()
    value = json.loads(results[-1]["content"])["value"]
    return Scripted(answer_stream(f"7 times 8 is {value:g}."), chunk_sizes=[5, 40])


def _unmatched() -> Scripted:
    """A tool result whose call id matches no call of the conversation: the API refuses it."""
    body = {"error": {"message": "tool result for an unknown call_id", "type": "invalid_request"}}
    return Scripted(json.dumps(body).encode(), status=400, content_type="application/json")


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _kind(event: Any) -> str:
    value = getattr(event, "type", None)
    return str(getattr(value, "value", value))


def stream_round(
    gate: ToolGate, out: TextIO, flush_logs: Any, **kwargs: Any
) -> list[dict[str, Any]]:
    """Stream one round; print text live; return the released function-call items."""
    calls: list[dict[str, Any]] = []
    for event in gate.responses(stream=True, **kwargs):
        kind = _kind(event)
        if kind == "response.output_text.delta":
            out.write(event.delta)
            out.flush()
        elif kind == "response.output_item.done" and _field(event.item, "type") == "function_call":
            calls.append(
                {
                    "type": "function_call",
                    **{k: _field(event.item, k) for k in ("id", "call_id", "name", "arguments")},
                }
            )
    out.write("\n")
    flush_logs()
    return calls


def run_responses(out: TextIO, model: str | None, flush_logs: Any) -> int:
    with warnings.catch_warnings():
        # litellm's own Responses objects warn about their usage field while serializing.
        warnings.simplefilter("ignore", UserWarning)
        return _run(out, model, flush_logs)


def _run(out: TextIO, model: str | None, flush_logs: Any) -> int:
    with FakeUpstream(handler=fake_answer) as upstream:
        name = model or "cometapi/gpt-4o-mini"
        bridged = not name.startswith("openai/")
        real = bridged and bool(os.environ.get("COMETAPI_KEY"))
        route: dict[str, Any] = (
            {"model": name}
            if real
            else {"model": name, "api_base": upstream.base_url, "api_key": "sk-demo-loopback"}
        )
        where = "CometAPI" if real else f"fake upstream on {upstream.base_url}"
        how = "bridged to chat completions" if bridged else "native /responses"
        out.write(f"upstream: {where} ({how})\n")
        gate = ToolGate([MULTIPLY, WRITE_FILE])
        history: list[dict[str, Any]] = [
            {"role": "user", "content": "What is 7 times 8? Use multiply."}
        ]

        out.write("\n== round 1 (Responses API): the model asks for a tool ==\n")
        calls = stream_round(gate, out, flush_logs, input=history, tools=[MULTIPLY], **route)
        if [c["name"] for c in calls] != ["multiply"]:
            out.write("expected exactly one multiply call\n")
            return 1
        (call,) = calls
        arguments = json.loads(call["arguments"])
        product = float(arguments["a"]) * float(arguments["b"])
        out.write(
            f"released: multiply (call {call['call_id']}), validated; "
            f"computed locally: {product:g}\n"
        )
        history += [
            call,
            {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": json.dumps({"value": product}),
            },
        ]

        out.write("\n== round 2 (Responses API): the model answers ==\n")
        stream_round(gate, out, flush_logs, input=history, tools=[MULTIPLY], **route)

        out.write(
            "\n== a broken stream through the Responses bridge: arguments cut short, "
            "[DONE] with no finish_reason ==\n"
        )
        broken = {
            "model": "cometapi/gpt-4o-mini",
            "api_base": upstream.base_url,
            "api_key": "sk-demo-loopback",
            "input": "Write the notes file.",
            "tools": [WRITE_FILE],
        }
        upstream.enqueue(Scripted(recording("broken_truncated.sse")))
        out.write(f"plain litellm hands the caller: {_plain(broken)}\n")
        upstream.enqueue(Scripted(recording("broken_truncated.sse")))
        try:
            stream_round(gate, out, flush_logs, **broken)
        except ToolCallQuarantined as exc:
            flush_logs()
            out.write(f"the gate: {exc}\n")
            for record in exc.records:
                out.write(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
            out.write("nothing was released; no event of that call reached the caller\n")
            return 0
        out.write("the broken stream was not quarantined\n")
        return 1


def _plain(kwargs: dict[str, Any]) -> str:
    """What litellm alone yields: its last event and the calls' sizes, never their text."""
    last = None
    sizes = []
    stream: Any = litellm.responses(stream=True, **kwargs)
    for event in stream:
        last = _kind(event)
        if last == "response.output_item.done" and _field(event.item, "type") == "function_call":
            text = _field(event.item, "arguments") or ""
            try:
                json.loads(text)
                verdict = "parse"
            except ValueError:
                verdict = "do not parse"
            sizes.append(f"{len(text.encode())} bytes of arguments that {verdict}")
    return f"last event {last!r} and {len(sizes)} call(s): " + "; ".join(sizes)
