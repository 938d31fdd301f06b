"""Ollama ``/api/chat`` streamed bodies for the property tests and the fuzzer, well-formed and
damaged.

:func:`stream` writes a well-formed body from a seed: lines ``{"model", "created_at",
"message": {"role", "content", "thinking"?, "tool_calls"?}, "done": false}`` holding text,
thinking text and up to three whole calls (in one line or several, all with ids or none,
``function.index`` numbered per line), then the done line (``done: true``, a
``done_reason``: ``stop`` when there are calls, sometimes carrying the last calls itself),
each line JSON with or without non-ASCII escaped, ended by LF or CRLF. The arguments are
usually an object for the tool, sometimes one the schema or the policy refuses, or a call to
a tool nobody declared. :func:`damage` then breaks it at the level of lines (dropped,
duplicated, swapped, the done reason changed or removed, ``done`` not a boolean, a line
after the done line, an error object, ids mixed or reused or empty, a negative or boolean
index, a call without a name, arguments as a string, a duplicate key, NaN, a blank line,
which is harmless) and of bytes (truncated, corrupted). What the gate must do is decided by
:mod:`oracle_ollama`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

PATH = "/api/chat"
DAMAGES = (
    "drop",
    "dup",
    "swap",
    "reason",
    "no_reason",
    "done_string",
    "after_done",
    "error",
    "mix_ids",
    "reuse_id",
    "empty_id",
    "bad_index",
    "no_name",
    "args_string",
    "dup_key",
    "nan",
    "blank",
    "truncate",
    "corrupt",
)


@dataclass
class Stream:
    lines: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[int, str, str, str]] = field(default_factory=list)
    crlf: bool = False
    ascii: bool = True

    def body(self) -> bytes:
        return encode([json.dumps(m, ensure_ascii=self.ascii) for m in self.lines], self.crlf)


def encode(datas: list[str], crlf: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(d + end for d in datas).encode("utf-8", "surrogatepass")


def _line(n: int, message: dict[str, Any], done: bool = False) -> dict[str, Any]:
    return {
        "model": "qwen3:8b",
        "created_at": f"2026-08-21T18:00:{n:02d}.000000Z",
        "message": {"role": "assistant", **message},
        "done": done,
    }


def _args(rng: random.Random, name: str) -> dict[str, Any]:
    roll = rng.random()
    if roll < 0.06:
        return {"a": 7, "b": 8, "deny": True}
    if roll < 0.1:
        return {"a": "seven"}
    if name == "multiply":
        return {"a": rng.randint(-99, 99), "b": rng.random() * 10}
    if name == "write_file":
        return {"path": f"notes/{rng.randint(0, 9)}.txt", "content": "ünï ✓ 🎉"}
    return {} if rng.random() < 0.4 else {"k": [1, {"x": None}]}


def _calls(rng: random.Random, s: Stream, seed: int, with_ids: bool) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for index in range(rng.randint(1, 2)):
        if len(s.calls) >= 3:
            break
        name = rng.choice(["multiply", "write_file", "anything", "unregistered"])
        args = _args(rng, name)
        call: dict[str, Any] = {"function": {"index": index, "name": name, "arguments": args}}
        if rng.random() < 0.3:
            del call["function"]["index"]
        position = len(s.calls)
        if with_ids:
            call["id"] = f"call_{seed % 10**8:08d}{position}"
        out.append(call)
        identity = call.get("id", f"ollama-call-{position}")
        s.calls.append((position, identity, name, json.dumps(args, ensure_ascii=False)))
    return out


def stream(seed: int) -> Stream:
    rng = random.Random(seed)
    s = Stream(crlf=rng.random() < 0.2, ascii=rng.random() < 0.5)
    with_ids = rng.random() < 0.6
    for _ in range(rng.randint(0, 5)):
        kind = rng.choice(["text", "text", "thinking", "call"])
        message: dict[str, Any] = {"content": ""}
        if kind == "text":
            message["content"] = rng.choice(["Hi ✓", "", "7 × 8", "\n"])
        elif kind == "thinking":
            message["thinking"] = rng.choice(["hm", "ünï"])
        elif len(s.calls) < 3:
            message["tool_calls"] = _calls(rng, s, seed, with_ids)
        s.lines.append(_line(len(s.lines), message))
    reason = "stop" if s.calls or rng.random() < 0.6 else rng.choice(["length", "load"])
    last: dict[str, Any] = {"content": ""}
    if reason == "stop" and len(s.calls) < 3 and rng.random() < 0.2:
        last["tool_calls"] = _calls(rng, s, seed, with_ids)
    done = _line(len(s.lines), last, done=True)
    done["done_reason"] = reason
    done.update(total_duration=885095291, prompt_eval_count=122, eval_count=33)
    s.lines.append(done)
    return s


def _first_call(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    for line in lines:
        for call in line.get("message", {}).get("tool_calls") or []:
            found: dict[str, Any] = call
            return found
    return None


def damage(s: Stream, seed: int, kinds: list[str]) -> bytes:
    """The body with each of ``kinds`` applied (seeded)."""
    rng = random.Random(seed ^ 0x011A)
    lines: list[Any] = json.loads(json.dumps(s.lines))
    raw: list[str] = []
    byte_damage: list[str] = []
    for kind in kinds:
        at = rng.randrange(len(lines))
        call = _first_call(lines)
        done = lines[-1] if isinstance(lines[-1], dict) else {}
        if kind == "drop" and len(lines) > 1:
            del lines[at]
        elif kind == "dup":
            lines.insert(at, lines[at])
        elif kind == "swap" and at + 1 < len(lines):
            lines[at], lines[at + 1] = lines[at + 1], lines[at]
        elif kind == "reason":
            done["done_reason"] = rng.choice(["length", "load", "unload", ""])
        elif kind == "no_reason":
            done.pop("done_reason", None)
        elif kind == "done_string":
            lines[at]["done"] = rng.choice(["true", "false", 1, None])
        elif kind == "after_done":
            extra = _line(99, {"content": "more"})
            if rng.random() < 0.5:
                late = {"function": {"name": "anything", "arguments": {}}}
                extra["message"]["tool_calls"] = [late]
            lines.append(extra)
        elif kind == "error":
            lines.insert(at, {"error": "an error was encountered while running the model"})
        elif kind == "mix_ids" and call is not None:
            if "id" in call:
                del call["id"]
            else:
                call["id"] = "call_mixed00"
        elif kind == "reuse_id":
            twice = {"id": "call_again00", "function": {"name": "anything", "arguments": {}}}
            lines.insert(at, _line(98, {"content": "", "tool_calls": [twice, twice]}))
        elif kind == "empty_id" and call is not None:
            call["id"] = rng.choice(["", 7])
        elif kind == "bad_index" and call is not None:
            call["function"]["index"] = rng.choice([-1, True, "0", 1.0])
        elif kind == "no_name" and call is not None:
            call["function"]["name"] = rng.choice(["", None, 3])
        elif kind == "args_string" and call is not None:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
        elif kind in ("dup_key", "nan", "blank"):
            raw.append(kind)
        else:
            byte_damage.append(kind)
    datas = [json.dumps(m, ensure_ascii=s.ascii) for m in lines]
    for kind in raw:
        if kind == "blank":
            datas.insert(rng.randrange(len(datas) + 1), "")
            continue
        hits = [i for i, d in enumerate(datas) if '"arguments": {' in d]
        if hits:
            i = rng.choice(hits)
            extra = '"a": 1, "a": 2, ' if kind == "dup_key" else '"nan": NaN, '
            datas[i] = datas[i].replace('"arguments": {', '"arguments": {' + extra, 1)
    body = encode(datas, s.crlf)
    for kind in byte_damage:
        if kind == "truncate" and body:
            body = body[: rng.randrange(len(body))]
        elif kind == "corrupt" and body:
            at = rng.randrange(len(body))
            body = body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
    return body


SEEDS = st.integers(0, 2**31)
DAMAGE_LISTS = st.lists(st.sampled_from(DAMAGES), max_size=2)
