"""``toolgate fake-upstream``: the demo's fake CometAPI as a server of its own, for a proxy.

The proxy examples in ``config_examples/`` point a LiteLLM proxy at this server. It answers
like the demo does: a request that already holds a tool result gets the answer built from
it; a request whose last user message mentions "broken" gets the broken recording
(arguments cut short, ``[DONE]`` without a finish reason); any other request gets the
recorded ``multiply`` call. A request with ``"stream": false`` gets the same content as one
JSON ``chat.completion`` body (:func:`json_body_of`).

A Responses request (``POST /v1/responses``, the examples' native ``openai/`` model) gets the
recorded ``multiply`` call as Responses SSE, or its ``response.completed`` response as one
JSON body when it does not stream; with "broken" in its input the stream stops right before
the call's ``function_call_arguments.done`` (arguments cut short, no terminal events).

A request of ``toolgate probe`` (one of its prompts, a model named ``probe-<personality>``
or an ``X-Fake-Personality`` header) is answered in that route personality
(:mod:`.personalities`).

A ``POST /v1/messages`` request (the Anthropic example's ``anthropic/`` model) is answered on
the Anthropic wire, as ``toolgate demo --api anthropic`` is (:mod:`.anthropic`).

Also home to :func:`workspace_policy`, the example policy the YAML examples name, and to
:func:`json_body_of`, which tests use to serve recorded streams as non-streamed bodies.
"""

from __future__ import annotations

import json
import time
from typing import Any

from ..core.rules.policy import PolicyDecision, ToolCall
from ..loopback.upstream import FakeUpstream, Scripted, answer_stream, recording, request_path

_SYSTEM_DIRS = ("/etc/", "/usr/", "/bin/", "/sbin/", "/boot/", "/proc/", "/sys/", "/root/")


def workspace_policy(call: ToolCall) -> PolicyDecision:
    """Example policy: ``write_file`` may not write into system folders or climb with ``..``."""
    if call.name == "write_file":
        path = str(call.arguments.get("path", ""))
        if path.startswith(_SYSTEM_DIRS) or "/../" in f"/{path}/":
            return PolicyDecision.deny("write_file outside the allowed folders")
    return PolicyDecision.approve()


def json_body_of(sse: bytes) -> bytes:
    """A well-formed chat SSE recording as the one JSON body a non-streamed call returns.

    Text is joined, each call's argument fragments are joined in order, the finish reason
    and usage are kept. Meant for recordings whose SSE framing is sound (the arguments may
    be anything): a malformed recording gives a malformed body.
    """
    text: list[str] = []
    calls: dict[int, dict[str, Any]] = {}
    head: dict[str, Any] = {}
    finish: str | None = None
    usage: Any = None
    for block in sse.decode("utf-8").replace("\r\n", "\n").split("\n\n"):
        data = "".join(line[5:].lstrip() for line in block.split("\n") if line.startswith("data:"))
        if not data or data == "[DONE]":
            continue
        chunk = json.loads(data)
        head = head or chunk
        usage = chunk.get("usage") or usage
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            text.append(delta.get("content") or "")
            for fragment in delta.get("tool_calls") or []:
                call = calls.setdefault(
                    fragment["index"], {"id": None, "type": "function", "name": None, "args": []}
                )
                function = fragment.get("function") or {}
                call["id"] = call["id"] or fragment.get("id")
                call["name"] = call["name"] or function.get("name")
                call["args"].append(function.get("arguments") or "")
            finish = choice.get("finish_reason") or finish
    message: dict[str, Any] = {"role": "assistant", "content": "".join(text) or None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": "".join(c["args"])},
            }
            for _, c in sorted(calls.items())
        ]
    body = {
        "id": head.get("id", "chatcmpl-fake"),
        "object": "chat.completion",
        "created": head.get("created", 0),
        "model": head.get("model", "gpt-4o-mini"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage or {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }
    return json.dumps(body, ensure_ascii=False).encode()


def as_requested(request: dict[str, Any], sse: bytes, **options: Any) -> Scripted:
    """``sse`` as a stream, or as one JSON body when the request did not ask to stream."""
    if request.get("stream") is True:
        return Scripted(sse, **options)
    return Scripted(json_body_of(sse), content_type="application/json")


def _native_answer(request: dict[str, Any]) -> Scripted:
    """The answer to a Responses request (see the module docstring)."""
    sse = recording("round1_multiply_responses.sse")
    if "broken" in json.dumps(request.get("input")).lower():
        cut = sse.index(b"event: response.function_call_arguments.done")
        return Scripted(sse[:cut], chunk_sizes=[7, 64, 3])
    if request.get("stream") is True:
        return Scripted(sse, chunk_sizes=[7, 64, 3])
    for line in sse.decode().splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            body = json.dumps(json.loads(line[5:])["response"]).encode()
            return Scripted(body, content_type="application/json")
    raise AssertionError("the recording holds no response.completed")


def demo_answer(request: dict[str, Any]) -> Scripted:
    """The standalone fake upstream's answer to one request (see the module docstring)."""
    from .personalities import answers_probe, personality_answer

    if answers_probe(request):
        return personality_answer(request)
    if request_path().endswith("/v1/messages"):
        from .anthropic import fake_answer

        return fake_answer(request)
    if "input" in request:
        return _native_answer(request)
    messages = request.get("messages") or []
    results = [m for m in messages if m.get("role") == "tool"]
    if results:
        value = json.loads(results[-1]["content"])["value"]
        return as_requested(request, answer_stream(f"7 times 8 is {value:g}."))
    users = [m for m in messages if m.get("role") == "user"]
    last = str(users[-1].get("content", "")) if users else ""
    name = "broken_truncated.sse" if "broken" in last.lower() else "round1_multiply.sse"
    return as_requested(request, recording(name), chunk_sizes=[7, 64, 3])


def serve(port: int) -> None:
    """Serve :func:`demo_answer` on 127.0.0.1:``port`` until interrupted."""
    with FakeUpstream(demo_answer, port=port) as upstream:
        print(f"fake CometAPI on {upstream.base_url} (Ctrl-C to stop)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
