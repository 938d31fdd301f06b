"""Route personalities for the fake upstream: how different routes stream the same calls.

``toolgate probe`` against the loopback fake (and its tests) needs routes that stream tool
calls in the ways real routes do. :func:`personality_answer` answers the probe's requests
(:mod:`litellm_toolgate.operate.requests`, told apart by their prompt) in the personality
the request's model names (``cometapi/probe-mistral`` reaches the fake as
``probe-mistral``), or the ``X-Fake-Personality`` header names:

========================  ==================================================================
``standard``              OpenAI's way: id and name on a call's first fragment, arguments in
                          pieces, ``finish_reason: tool_calls``, usage when asked, ``[DONE]``
``repeat-identity``       id and name repeated on every fragment of a call
``no-done``               everything but the closing ``data: [DONE]``
``forced-stop``           ``finish_reason: "stop"`` with calls (OpenAI on a forced call)
``utf8-split``            transport reads cut inside UTF-8 sequences
``mistral``               whole calls, each in one fragment without ``index`` (Mistral)
``lm-studio``             Responses: arguments only in ``function_call_arguments.done``, no
                          delta (LM Studio)
========================  ==================================================================

A chat request gets chat SSE, a ``/responses`` request Responses SSE and a ``/v1/messages``
request Anthropic SSE (the ``standard`` way of each wire; ``lm-studio`` only changes the
Responses wire, the chat-only personalities only the chat wire). A prompt that is not one
of the probe's gets a short text answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ..operate.requests import LARGE_CONTENT, NON_ASCII_CONTENT, by_prompt
from .upstream import Scripted, request_header, request_path

__all__ = ["PERSONALITIES", "answers_probe", "personality_answer", "personality_of"]

PERSONALITIES = (
    "standard",
    "repeat-identity",
    "no-done",
    "forced-stop",
    "utf8-split",
    "mistral",
    "lm-studio",
)
_CREATED = 1767225600
_FRAGMENT = 12  # characters of argument text per fragment

Call = tuple[str, str]  # (tool name, argument text)


def _answer(prompt: str) -> tuple[str, list[Call]]:
    """The text and calls the fake answers a probe request with."""
    request = by_prompt(prompt)
    multiply = ("multiply", '{"a": 7, "b": 8}')
    if request is None:
        return "I am a fake upstream.", []
    if request.name == "parallel_calls":
        return "", [multiply, ("multiply", '{"a": 6, "b": 9}')]
    if request.name == "no_arguments":
        return "", [("get_time", "{}")]
    if request.name == "text_then_call":
        return "I will multiply 7 by 8.", [multiply]
    if request.name == "large_argument":
        args = {"path": "probe/large.txt", "content": LARGE_CONTENT}
        return "", [("write_file", json.dumps(args))]
    if request.name == "non_ascii":
        args = {"path": "probe/unicode.txt", "content": NON_ASCII_CONTENT}
        return "", [("write_file", json.dumps(args, ensure_ascii=False))]
    return "", [multiply]


def _digest(*parts: object) -> str:
    return hashlib.sha256("\n".join(map(str, parts)).encode()).hexdigest()


def _pieces(text: str, size: int = _FRAGMENT) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _data(obj: dict[str, Any], event: str | None = None) -> bytes:
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + line + "\n\n").encode()


# ---- chat ------------------------------------------------------------------------------------
def chat_body(
    text: str,
    calls: list[Call],
    *,
    seed: str,
    repeat_identity: bool = False,
    whole_without_index: bool = False,
    finish_with_calls: str = "tool_calls",
    done: bool = True,
    usage: bool = True,
) -> bytes:
    """A chat-completions SSE body streaming ``text`` then ``calls`` in one personality."""
    base = {
        "id": "chatcmpl-" + _digest(seed)[:29],
        "object": "chat.completion.chunk",
        "created": _CREATED,
        "model": "probe-model",
    }

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        return _data({**base, "choices": [choice]})

    out = [chunk({"role": "assistant", "content": ""})]
    for piece in _pieces(text, 8) if text else []:
        out.append(chunk({"content": piece}))
    for index, (name, arguments) in enumerate(calls):
        call_id = (
            _digest(seed, index)[:9] if whole_without_index else "call_" + _digest(seed, index)[:24]
        )
        if whole_without_index:
            whole = {"id": call_id, "function": {"name": name, "arguments": arguments}}
            out.append(chunk({"tool_calls": [whole]}))
            continue
        head: dict[str, Any] = {"index": index, "id": call_id, "type": "function"}
        out.append(chunk({"tool_calls": [{**head, "function": {"name": name, "arguments": ""}}]}))
        for piece in _pieces(arguments):
            function: dict[str, Any] = {"arguments": piece}
            fragment: dict[str, Any] = {"index": index}
            if repeat_identity:
                fragment = dict(head)
                function = {"name": name, "arguments": piece}
            out.append(chunk({"tool_calls": [{**fragment, "function": function}]}))
    out.append(chunk({}, finish_with_calls if calls else "stop"))
    if usage:
        out.append(
            _data(
                {
                    **base,
                    "choices": [],
                    "usage": {"prompt_tokens": 64, "completion_tokens": 16, "total_tokens": 80},
                }
            )
        )
    if done:
        out.append(b"data: [DONE]\n\n")
    return b"".join(out)


# ---- Responses -------------------------------------------------------------------------------
def responses_body(
    text: str, calls: list[Call], *, seed: str, arguments_only_in_done: bool = False
) -> bytes:
    """A Responses SSE body: a text item (if any), then one function-call item per call."""
    response_id = "resp_" + _digest(seed)[:32]
    head = {
        "id": response_id,
        "object": "response",
        "created_at": _CREATED,
        "model": "probe-model",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    sequence = iter(range(10_000))
    out: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        out.append(_data({"type": kind, "sequence_number": next(sequence), **fields}, kind))

    event("response.created", response={**head, "status": "in_progress", "output": []})
    event("response.in_progress", response={**head, "status": "in_progress", "output": []})
    items: list[dict[str, Any]] = []
    if text:
        message_id = "msg_" + _digest(seed, "msg")[:24]
        index = len(items)
        part = {"type": "output_text", "text": "", "annotations": []}
        item = {"id": message_id, "type": "message", "role": "assistant"}
        event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress", "content": []},
        )
        where = {"item_id": message_id, "output_index": index, "content_index": 0}
        event("response.content_part.added", **where, part=part)
        for piece in _pieces(text, 8):
            event("response.output_text.delta", **where, delta=piece)
        event("response.output_text.done", **where, text=text)
        done_part = {**part, "text": text}
        event("response.content_part.done", **where, part=done_part)
        finished = {**item, "status": "completed", "content": [done_part]}
        event("response.output_item.done", output_index=index, item=finished)
        items.append(finished)
    for number, (name, arguments) in enumerate(calls):
        index = len(items)
        item_id = "fc_" + _digest(seed, "fc", number)[:24]
        call = {
            "id": item_id,
            "type": "function_call",
            "call_id": "call_" + _digest(seed, number)[:24],
            "name": name,
        }
        event(
            "response.output_item.added",
            output_index=index,
            item={**call, "status": "in_progress", "arguments": ""},
        )
        if not arguments_only_in_done:
            for piece in _pieces(arguments):
                event(
                    "response.function_call_arguments.delta",
                    item_id=item_id,
                    output_index=index,
                    delta=piece,
                )
        event(
            "response.function_call_arguments.done",
            item_id=item_id,
            output_index=index,
            arguments=arguments,
        )
        finished = {**call, "status": "completed", "arguments": arguments}
        event("response.output_item.done", output_index=index, item=finished)
        items.append(finished)
    usage = {"input_tokens": 64, "output_tokens": 16, "total_tokens": 80}
    event(
        "response.completed",
        response={**head, "status": "completed", "output": items, "usage": usage},
    )
    return b"".join(out)


# ---- Anthropic -------------------------------------------------------------------------------
def anthropic_body(text: str, calls: list[Call], *, seed: str) -> bytes:
    """An Anthropic Messages SSE body: a text block (if any), then one tool_use block per call."""
    out: list[bytes] = []

    def event(kind: str, **fields: Any) -> None:
        out.append(_data({"type": kind, **fields}, kind))

    message: dict[str, Any] = {
        "id": "msg_" + _digest(seed)[:24],
        "type": "message",
        "role": "assistant",
        "model": "probe-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 64, "output_tokens": 1},
    }
    event("message_start", message=message)
    index = 0
    if text:
        event("content_block_start", index=index, content_block={"type": "text", "text": ""})
        for piece in _pieces(text, 8):
            event("content_block_delta", index=index, delta={"type": "text_delta", "text": piece})
        event("content_block_stop", index=index)
        index += 1
    for number, (name, arguments) in enumerate(calls):
        block = {
            "type": "tool_use",
            "id": "toolu_" + _digest(seed, number)[:24],
            "name": name,
            "input": {},
        }
        event("content_block_start", index=index, content_block=block)
        for piece in _pieces(arguments):
            delta = {"type": "input_json_delta", "partial_json": piece}
            event("content_block_delta", index=index, delta=delta)
        event("content_block_stop", index=index)
        index += 1
    stop = "tool_use" if calls else "end_turn"
    event(
        "message_delta",
        delta={"stop_reason": stop, "stop_sequence": None},
        usage={"output_tokens": 16},
    )
    event("message_stop")
    return b"".join(out)


# ---- the handler -----------------------------------------------------------------------------
def personality_of(request: dict[str, Any], header: str | None = None) -> str:
    """The personality a request asks for: the header's, else one its model names."""
    if header in PERSONALITIES:
        return header
    model = str(request.get("model", ""))
    for name in sorted(PERSONALITIES, key=len, reverse=True):
        if model.endswith(name) or f"probe-{name}" in model:
            return name
    return "standard"


def answers_probe(request: dict[str, Any]) -> bool:
    """Whether a request is the probe's (its prompt, a personality header or model name)."""
    if request_header("X-Fake-Personality") is not None:
        return True
    return "probe-" in str(request.get("model", "")) or by_prompt(_prompt(request)) is not None


def _prompt(request: dict[str, Any]) -> str:
    """The last user message's text (chat, Anthropic), or the Responses input's."""
    messages: Any = request.get("messages")
    if messages is None:
        source = request.get("input")
        if isinstance(source, str):
            return source
        messages = source if isinstance(source, list) else []
    message: Any
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _utf8_cuts(body: bytes) -> list[int]:
    """Read sizes that cut the body right after the first byte of every multi-byte sequence
    (and every 64 bytes otherwise)."""
    cuts = {i + 1 for i, byte in enumerate(body) if byte >= 0xC0}
    cuts.update(range(64, len(body), 64))
    sizes: list[int] = []
    last = 0
    for cut in sorted(cuts):
        if 0 < cut < len(body):
            sizes.append(cut - last)
            last = cut
    sizes.append(len(body) - last)
    return sizes


def personality_answer(request: dict[str, Any], header: str | None = None) -> Scripted:
    """The fake's answer to one streamed request in its personality."""
    if header is None:
        header = request_header("X-Fake-Personality")
    personality = personality_of(request, header)
    prompt = _prompt(request)
    text, calls = _answer(prompt)
    seed = f"{personality}\n{prompt}"
    path = request_path()
    if request.get("stream") is not True:
        error = {"error": {"message": "the fake upstream streams only", "type": "invalid_request"}}
        return Scripted(json.dumps(error).encode(), status=400, content_type="application/json")
    if path.endswith("/v1/messages"):
        body = anthropic_body(text, calls, seed=seed)
    elif "input" in request and "messages" not in request:
        body = responses_body(
            text, calls, seed=seed, arguments_only_in_done=personality == "lm-studio"
        )
    else:
        options = request.get("stream_options") or {}
        body = chat_body(
            text,
            calls,
            seed=seed,
            repeat_identity=personality == "repeat-identity",
            whole_without_index=personality == "mistral",
            finish_with_calls="stop" if personality == "forced-stop" else "tool_calls",
            done=personality != "no-done",
            usage=bool(options.get("include_usage")) if isinstance(options, dict) else False,
        )
    sizes = _utf8_cuts(body) if personality == "utf8-split" else [64]
    return Scripted(body, chunk_sizes=sizes)
