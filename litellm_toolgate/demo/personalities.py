"""Route personalities for the fake upstream: how different routes stream the same calls.

``toolgate probe`` against the loopback fake (and its tests) needs routes that stream tool
calls in the ways real routes do. :func:`personality_answer` answers the probe's requests
(:mod:`litellm_toolgate.loopback.requests`, told apart by their prompt) in the personality
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

A chat request gets chat SSE, a ``/responses`` request Responses SSE, a ``/v1/messages``
request Anthropic SSE, a Gemini ``...:streamGenerateContent`` request Gemini SSE (whole
``GenerateContentResponse`` objects, calls without ids, ``finishReason: STOP``), an Ollama
``/api/chat`` request newline-delimited JSON (whole calls with ids, the ``done: true`` line
last) and a Bedrock ``/model/<id>/converse-stream`` request AWS event-stream frames
(``toolUse`` blocks, ``messageStop``, then ``metadata``) and a watsonx.ai
``/ml/v1/text/chat_stream`` request chat chunks in ``id:`` / ``event: message`` messages
with no ``[DONE]``: the ``standard`` way of each wire.
``lm-studio`` only changes the Responses wire, the chat-only personalities only the chat
wire, ``utf8-split`` the read sizes of every wire. On the Gemini and Bedrock paths the model
is named in the path, not the body. A prompt that is not one of the probe's gets a short
text answer.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any
from urllib.parse import unquote

from ..core.framing.eventstream import encode_frame
from ..loopback.requests import LARGE_CONTENT, NON_ASCII_CONTENT, by_prompt
from ..loopback.upstream import Scripted, request_header, request_path

__all__ = [
    "PERSONALITIES",
    "answers_probe",
    "bedrock_body",
    "gemini_body",
    "ollama_body",
    "personality_answer",
    "personality_of",
    "watsonx_body",
]

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


def _json(obj: dict[str, Any]) -> str:
    """Compact JSON with non-ASCII written as is, as the routes send it."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _data(obj: dict[str, Any], event: str | None = None, end: str = "\n") -> bytes:
    head = f"event: {event}{end}" if event else ""
    return (head + "data: " + _json(obj) + end + end).encode()


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


# ---- watsonx.ai ------------------------------------------------------------------------------
def watsonx_body(text: str, calls: list[Call], *, seed: str) -> bytes:
    """A watsonx.ai ``/ml/v1/text/chat_stream`` body: the ``standard`` chat chunks, each
    message with an ``id:`` and ``event: message`` line, the usage chunk last, no ``[DONE]``."""
    body = chat_body(text, calls, seed=seed, done=False, usage=True)
    messages = [m for m in body.split(b"\n\n") if m]
    return b"".join(
        b"id: %d\nevent: message\n%s\n\n" % (number, message)
        for number, message in enumerate(messages, 1)
    )


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


# ---- Gemini ----------------------------------------------------------------------------------
_GEMINI_USAGE = {"promptTokenCount": 64, "candidatesTokenCount": 16, "totalTokenCount": 80}


def gemini_body(text: str, calls: list[Call], *, seed: str) -> bytes:
    """A Gemini ``streamGenerateContent?alt=sse`` body: one whole ``GenerateContentResponse``
    per message (CRLF line ends, no ``[DONE]``), text in pieces, every call whole in one
    message (``args`` an object, no id), then the finish message: ``STOP`` and the usage."""
    response_id = "resp-" + _digest(seed)[:12]

    def message(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        obj: dict[str, Any] = {"candidates": [candidate]}
        if finish is not None:
            candidate["finishReason"] = finish
            candidate["index"] = 0
            obj["usageMetadata"] = _GEMINI_USAGE
        obj["modelVersion"] = "probe-model"
        obj["responseId"] = response_id
        return _data(obj, end="\r\n")

    out = [message([{"text": piece}]) for piece in (_pieces(text, 8) if text else [])]
    if calls:
        parts = [
            {"functionCall": {"name": name, "args": json.loads(arguments)}}
            for name, arguments in calls
        ]
        out.append(message(parts))
    out.append(message([{"text": ""}], "STOP"))
    return b"".join(out)


# ---- Ollama ----------------------------------------------------------------------------------
def ollama_body(text: str, calls: list[Call], *, seed: str) -> bytes:
    """An Ollama ``/api/chat`` body (``application/x-ndjson``): one object per line, text in
    pieces, every call whole in one line (``arguments`` an object, an id of the server's
    ``call_`` and 8 characters), then the ``done: true`` line: ``done_reason: stop`` and the
    token counts."""
    tick = iter(range(1, 10_000))

    def line(message: dict[str, Any], **extra: Any) -> bytes:
        stamp = f"2026-01-01T00:00:{next(tick) % 60:02d}.000000Z"
        obj = {"model": "probe-model", "created_at": stamp, "message": message, **extra}
        return (_json(obj) + "\n").encode()

    out = [
        line({"role": "assistant", "content": piece}, done=False)
        for piece in (_pieces(text, 8) if text else [])
    ]
    if calls:
        made = [
            {
                "id": "call_" + _digest(seed, index)[:8],
                "function": {"index": index, "name": name, "arguments": json.loads(arguments)},
            }
            for index, (name, arguments) in enumerate(calls)
        ]
        out.append(line({"role": "assistant", "content": "", "tool_calls": made}, done=False))
    out.append(
        line(
            {"role": "assistant", "content": ""},
            done=True,
            done_reason="stop",
            total_duration=885095291,
            prompt_eval_count=64,
            eval_count=16,
        )
    )
    return b"".join(out)


# ---- Bedrock Converse ------------------------------------------------------------------------
def _frame(event: str, obj: dict[str, Any]) -> bytes:
    headers = [
        (":event-type", event),
        (":content-type", "application/json"),
        (":message-type", "event"),
    ]
    return encode_frame(headers, _json(obj).encode())


def bedrock_body(text: str, calls: list[Call], *, seed: str) -> bytes:
    """A Bedrock ``converse-stream`` body (``application/vnd.amazon.eventstream``): one
    event frame per event. ``messageStart``; text as a block's deltas; one ``toolUse`` block
    per call (its start with id and name, the arguments in pieces, its stop); ``messageStop``
    (``tool_use``, or ``end_turn`` without calls); then ``metadata`` with the usage."""
    out = [_frame("messageStart", {"role": "assistant"})]
    index = 0
    if text:
        for piece in _pieces(text, 8):
            delta = {"contentBlockIndex": index, "delta": {"text": piece}}
            out.append(_frame("contentBlockDelta", delta))
        out.append(_frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for number, (name, arguments) in enumerate(calls):
        use = {"toolUseId": "tooluse_" + _digest(seed, number)[:22], "name": name}
        out.append(
            _frame("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": use}})
        )
        for piece in _pieces(arguments):
            delta = {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}
            out.append(_frame("contentBlockDelta", delta))
        out.append(_frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    out.append(_frame("messageStop", {"stopReason": "tool_use" if calls else "end_turn"}))
    usage = {"inputTokens": 64, "outputTokens": 16, "totalTokens": 80}
    out.append(_frame("metadata", {"usage": usage, "metrics": {"latencyMs": 120}}))
    return b"".join(out)


# ---- the handler -----------------------------------------------------------------------------
def _model(request: dict[str, Any]) -> str:
    """The model a request names: its body's ``model``, else the one in its path (Gemini's
    ``.../models/<model>:streamGenerateContent``, Bedrock's ``/model/<id>/converse-stream``)."""
    model = request.get("model")
    if isinstance(model, str) and model:
        return model
    model_id = request.get("model_id")  # watsonx.ai names the model so
    if isinstance(model_id, str) and model_id:
        return model_id
    path = request_path()
    if _wire_path(path) == "gemini":
        return path.rpartition("/")[2].partition(":")[0]
    if _wire_path(path) == "bedrock":
        return unquote(path.rstrip("/").rsplit("/", 2)[-2])
    return ""


def _wire_path(path: str) -> str | None:
    """The non-OpenAI wire a request path asks for (None: chat, Responses, Anthropic)."""
    if path.endswith((":streamGenerateContent", ":generateContent")):
        return "gemini"
    if path.endswith("/api/chat"):
        return "ollama"
    if path.endswith(("/converse-stream", "/converse")):
        return "bedrock"
    if path.endswith(("/text/chat_stream", "/text/chat")):
        return "watsonx"
    return None


_STREAMED_PATHS = (":streamGenerateContent", "/converse-stream")
"""Paths that ask for a stream by themselves (their body has no ``stream`` field)."""


def personality_of(request: dict[str, Any], header: str | None = None) -> str:
    """The personality a request asks for: the header's, else one its model names."""
    if header in PERSONALITIES:
        return header
    model = _model(request)
    for name in sorted(PERSONALITIES, key=len, reverse=True):
        if model.endswith(name) or f"probe-{name}" in model:
            return name
    return "standard"


def answers_probe(request: dict[str, Any]) -> bool:
    """Whether a request is the probe's (its prompt, a personality header or model name)."""
    if request_header("X-Fake-Personality") is not None:
        return True
    return "probe-" in _model(request) or by_prompt(_prompt(request)) is not None


def _prompt(request: dict[str, Any]) -> str:
    """The last user message's text (chat, Anthropic, Ollama, Bedrock: a ``text`` part), the
    Responses input's, or Gemini's last user ``contents`` entry's text parts."""
    messages: Any = request.get("messages")
    if messages is None and isinstance(request.get("contents"), list):
        messages = [
            {"role": entry.get("role"), "content": entry.get("parts")}
            for entry in request["contents"]
            if isinstance(entry, dict)
        ]
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
    wire = _wire_path(path)
    streamed = path.endswith(_STREAMED_PATHS) or request.get("stream") is True
    if not streamed:
        error = {"error": {"message": "the fake upstream streams only", "type": "invalid_request"}}
        return Scripted(json.dumps(error).encode(), status=400, content_type="application/json")
    media = "text/event-stream"
    if wire == "gemini":
        body = gemini_body(text, calls, seed=seed)
    elif wire == "ollama":
        body, media = ollama_body(text, calls, seed=seed), "application/x-ndjson"
    elif wire == "bedrock":
        body, media = bedrock_body(text, calls, seed=seed), "application/vnd.amazon.eventstream"
    elif wire == "watsonx":
        body = watsonx_body(text, calls, seed=seed)
    elif path.endswith("/v1/messages"):
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
    return Scripted(body, content_type=media, chunk_sizes=sizes)
