"""Deterministic chat-completions SSE bodies and the tool set the benchmark gates them with.

Every body is what an OpenAI-compatible server sends for ``stream=True``: a role chunk,
content or tool-call fragments, the finish chunk, a usage chunk and ``data: [DONE]``. The
number of events is the number of SSE messages, ``[DONE]`` included, so "2,000 events" is
2,000 messages on the wire. Nothing is random: two runs serve byte-identical bodies.
"""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

_BASE: dict[str, Any] = {
    "id": "chatcmpl-bench0000000000000000000000",
    "object": "chat.completion.chunk",
    "created": 1767225600,
    "model": "gpt-4o-mini",
    "system_fingerprint": "fp_bench0000",
}

# A write_file-like tool and a ten-property record tool (the decision-latency schema).
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write text content to a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "maxLength": 4096},
                    "content": {"type": "string"},
                },
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "record_rows",
            "description": "Store rows of measurements.",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string", "maxLength": 200},
                    "rows": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "integer", "minimum": 0},
                                "name": {"type": "string", "minLength": 1},
                                "kind": {"enum": ["a", "b", "c", "d"]},
                                "value": {"type": "number"},
                                "ok": {"type": "boolean"},
                                "tags": {"type": "array", "items": {"type": "string"}},
                                "note": {"type": ["string", "null"]},
                                "parent": {"type": ["integer", "null"]},
                                "weight": {"type": "number", "minimum": 0},
                                "code": {"type": "string", "maxLength": 16},
                            },
                            "required": ["id", "name", "kind", "value", "ok"],
                            "additionalProperties": False,
                        },
                    },
                },
                "required": ["title", "rows"],
                "additionalProperties": False,
            },
        },
    },
]


def _event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
    obj = {**_BASE, "choices": choices, **extra}
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def _delta(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _event([{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}])


def _usage() -> bytes:
    usage = {"prompt_tokens": 64, "completion_tokens": 10, "total_tokens": 74}
    return _event([], usage=usage)


_DONE = b"data: [DONE]\n\n"
_WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta")


def text_body(events: int) -> bytes:
    """A text-only stream of exactly ``events`` SSE messages."""
    if events < 5:
        raise ValueError("a text body needs at least 5 events")
    out = [_delta({"role": "assistant", "content": "", "refusal": None})]
    out += [_delta({"content": f" {_WORDS[i % 8]}"}) for i in range(events - 4)]
    out += [_delta({}, "stop"), _usage(), _DONE]
    return b"".join(out)


def file_arguments(size: int) -> str:
    """write_file arguments of about ``size`` bytes (a path and a long content string)."""
    line = "def f(x):\n    return x * 2  # bench\n"
    content = line * max(1, (size - 40) // (len(line) + 2))
    return json.dumps({"path": "workspace/bench.py", "content": content})


def rows_arguments(size: int) -> str:
    """record_rows arguments of about ``size`` bytes: many small objects (a schema's worst)."""

    def row(i: int) -> dict[str, Any]:
        return {
            "id": i,
            "name": f"row-{i}",
            "kind": "abcd"[i % 4],
            "value": i * 0.5,
            "ok": i % 2 == 0,
            "tags": ["x", "y"],
            "note": None,
            "parent": i - 1 if i else None,
            "weight": 1.25,
            "code": f"c{i % 97}",
        }

    one = len(json.dumps(row(10_000), separators=(",", ":"))) + 1
    rows = [row(i) for i in range(max(1, (size - 30) // one))]
    return json.dumps({"title": "bench", "rows": rows}, separators=(",", ":"))


def _split(text: str, parts: int) -> list[str]:
    """Exactly ``parts`` non-empty pieces (``text`` must be at least that long)."""
    cuts = [len(text) * k // parts for k in range(parts + 1)]
    return [text[a:b] for a, b in pairwise(cuts)]


def tool_body(
    events: int, *, arguments: str | None = None, name: str = "write_file"
) -> tuple[bytes, str]:
    """One call (write_file unless named), arguments cut into fragments: ``events`` messages."""
    if events < 6:
        raise ValueError("a tool body needs at least 6 events")
    fragments = events - 5
    args = arguments if arguments is not None else file_arguments(max(64, fragments * 12))
    pieces = _split(args, fragments)
    out = [_delta({"role": "assistant", "content": None, "refusal": None})]
    call = {"index": 0, "id": "call_bench_0", "type": "function"}
    out.append(_delta({"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]}))
    out += [_delta({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    out += [_delta({}, "tool_calls"), _usage(), _DONE]
    return b"".join(out), args


def interleaved_body(
    calls: int = 4, size: int = 16_384, fragment: int = 64
) -> tuple[bytes, list[str]]:
    """``calls`` write_file calls of ``size`` bytes each, their fragments interleaved."""
    args = [file_arguments(size) for _ in range(calls)]
    split = [_split(a, -(-len(a) // fragment)) for a in args]
    out = [_delta({"role": "assistant", "content": None, "refusal": None})]
    for i in range(calls):
        opener = {"index": i, "id": f"call_bench_{i}", "type": "function"}
        opener["function"] = {"name": "write_file", "arguments": ""}
        out.append(_delta({"tool_calls": [opener]}))
    for turn in range(max(len(s) for s in split)):
        for i, pieces in enumerate(split):
            if turn < len(pieces):
                frag = {"index": i, "function": {"arguments": pieces[turn]}}
                out.append(_delta({"tool_calls": [frag]}))
    out += [_delta({}, "tool_calls"), _usage(), _DONE]
    return b"".join(out), args


def count_events(body: bytes) -> int:
    return body.count(b"\n\n")
