"""Gemini ``streamGenerateContent`` bodies for the property tests and the fuzzer, well-formed
and damaged.

:func:`stream` writes a well-formed body from a seed: messages of one candidate holding text,
thought text and up to three whole ``functionCall`` parts (all with ids or none), then a
``finishReason`` (``STOP`` when there are calls; in its own message or in the last one) with
usage. The arguments are usually an object for the tool, sometimes one the schema or the
policy refuses, or a call to a tool nobody declared. :func:`damage` then breaks it at the
level of messages (dropped, duplicated, swapped, the finish changed, a message after the
finish, an error, a blocked prompt, a second candidate, a code part, partial arguments, ids
mixed or reused, args as a string, a duplicate key, NaN) and of bytes (truncated,
corrupted). What the gate must do is decided by :mod:`oracle_gemini`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

PATH = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
DAMAGES = (
    "drop",
    "dup",
    "swap",
    "finish",
    "after_finish",
    "truncate",
    "corrupt",
    "error",
    "blocked",
    "second_candidate",
    "code_part",
    "partial",
    "mix_ids",
    "reuse_id",
    "args_string",
    "dup_key",
    "nan",
)
USAGE = {"promptTokenCount": 9, "candidatesTokenCount": 4, "totalTokenCount": 13}


@dataclass
class Stream:
    messages: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[int, str, str, str]] = field(default_factory=list)
    crlf: bool = True

    def body(self) -> bytes:
        return encode([json.dumps(m, ensure_ascii=False) for m in self.messages], self.crlf)


def encode(datas: list[str], crlf: bool) -> bytes:
    end = "\r\n" if crlf else "\n"
    return "".join(f"data: {d}{end}{end}" for d in datas).encode("utf-8", "surrogatepass")


def _message(parts: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    cand: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
    if finish is not None:
        cand["finishReason"] = finish
        cand["index"] = 0
    out: dict[str, Any] = {"candidates": [cand], "modelVersion": "gemini-2.5-flash"}
    if finish is not None:
        out["usageMetadata"] = USAGE
    return out


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


def stream(seed: int) -> Stream:
    rng = random.Random(seed)
    s = Stream(crlf=rng.random() < 0.8)
    with_ids = rng.random() < 0.4
    parts_seen: list[dict[str, Any]] = []
    for _ in range(rng.randint(0, 4)):
        parts: list[dict[str, Any]] = []
        for kind in rng.choices(["text", "thought", "call"], k=rng.randint(1, 3)):
            if kind == "text":
                parts.append({"text": rng.choice(["Hi ✓", "", "7 × 8"])})
            elif kind == "thought":
                parts.append({"text": "hm", "thought": True})
            elif len(s.calls) < 3:
                name = rng.choice(["multiply", "write_file", "anything", "unregistered"])
                args = _args(rng, name)
                call: dict[str, Any] = {"name": name, "args": args}
                if with_ids:
                    call["id"] = f"fc-{seed}-{len(s.calls)}"
                if name == "anything" and not args and rng.random() < 0.5:
                    del call["args"]
                part: dict[str, Any] = {"functionCall": call}
                if rng.random() < 0.2:
                    part["thoughtSignature"] = "c2ln"
                parts.append(part)
                position = len(s.calls)
                s.calls.append(
                    (
                        position,
                        call.get("id", f"gemini-call-{position}"),
                        name,
                        json.dumps(args, ensure_ascii=False),
                    )
                )
        parts_seen.extend(parts)
        s.messages.append(_message(parts))
    finish = "STOP" if s.calls else rng.choice(["STOP", "MAX_TOKENS", "SAFETY"])
    if s.messages and rng.random() < 0.4:
        last = s.messages[-1]["candidates"][0]
        last["finishReason"] = finish
        s.messages[-1]["usageMetadata"] = USAGE
    else:
        s.messages.append(_message([{"text": ""}], finish))
    return s


def _first_call(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for m in messages:
        for cand in m.get("candidates", [])[:1]:
            for part in cand.get("content", {}).get("parts", []):
                if "functionCall" in part:
                    found: dict[str, Any] = part["functionCall"]
                    return found
    return None


def damage(s: Stream, seed: int, kinds: list[str]) -> bytes:
    """The body with each of ``kinds`` applied (seeded)."""
    rng = random.Random(seed ^ 0x6E3)
    messages = json.loads(json.dumps(s.messages))
    raw: list[str] = []
    byte_damage: list[str] = []
    for kind in kinds:
        at = rng.randrange(len(messages))
        call = _first_call(messages)
        if kind == "drop" and len(messages) > 1:
            del messages[at]
        elif kind == "dup":
            messages.insert(at, messages[at])
        elif kind == "swap" and at + 1 < len(messages):
            messages[at], messages[at + 1] = messages[at + 1], messages[at]
        elif kind == "finish":
            reason = rng.choice(["MAX_TOKENS", "SAFETY", "MALFORMED_FUNCTION_CALL", "OTHER", ""])
            for m in reversed(messages):
                if "candidates" in m:
                    m["candidates"][0]["finishReason"] = reason
                    break
        elif kind == "after_finish":
            messages.append(
                rng.choice([{"usageMetadata": USAGE}, _message([{"functionCall": {"name": "x"}}])])
            )
        elif kind == "error":
            messages.insert(at, {"error": {"code": 500, "status": "INTERNAL"}})
        elif kind == "blocked":
            messages.insert(at, {"promptFeedback": {"blockReason": "OTHER"}})
        elif kind == "second_candidate":
            mine = messages[at].get("candidates", [{}])
            cand = dict(mine[0], index=1)
            messages[at] = {**messages[at], "candidates": [*mine, cand]}
        elif kind == "code_part":
            messages.insert(at, _message([{"executableCode": {"code": "print(1)"}}]))
        elif kind == "partial" and call is not None:
            call["willContinue"] = rng.random() < 0.5
        elif kind == "mix_ids" and call is not None:
            if "id" in call:
                del call["id"]
            else:
                call["id"] = "fc-mixed"
        elif kind == "reuse_id":
            messages.insert(at, _message([{"functionCall": {"name": "multiply", "id": "fc-r"}}]))
            messages.insert(at, _message([{"functionCall": {"name": "multiply", "id": "fc-r"}}]))
        elif kind == "args_string" and call is not None:
            call["args"] = json.dumps(call.get("args", {}))
        elif kind in ("dup_key", "nan"):
            raw.append(kind)
        else:
            byte_damage.append(kind)
    datas = [json.dumps(m, ensure_ascii=False) for m in messages]
    for kind in raw:
        hits = [i for i, d in enumerate(datas) if '"args": {' in d]
        if hits:
            i = rng.choice(hits)
            extra = '"a": 1, "a": 2, ' if kind == "dup_key" else '"nan": NaN, '
            datas[i] = datas[i].replace('"args": {', '"args": {' + extra, 1)
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
