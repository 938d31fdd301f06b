"""Anthropic Messages streams for the property tests and the fuzzer, well-formed and damaged.

:func:`stream` writes a well-formed stream from a seed: ``message_start``, maybe ``ping``,
then text, thinking and up to three ``tool_use`` blocks in any order, each tool's argument
text cut into ``partial_json`` fragments (led by the API's empty one), then ``message_delta``
with ``stop_reason`` (``tool_use`` when there are tool blocks) and ``message_stop``. The
argument text is usually a JSON object for the tool, sometimes hostile (NaN, duplicate keys,
trailing data, the policy's ``deny`` key, nothing at all). :func:`damage` then breaks it at
the level of events (dropped, duplicated, swapped, stop reason changed, an error, a server
tool, a start input, an index moved, an id reused, an event after the end) and of bytes
(truncated, corrupted). What the gate must do is decided by :mod:`oracle_anthropic`.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

DAMAGES = (
    "drop",
    "dup",
    "swap",
    "stop_reason",
    "after_stop",
    "truncate",
    "corrupt",
    "error",
    "server_tool",
    "start_input",
    "index",
    "reuse_id",
    "unknown_delta",
)


@dataclass
class Stream:
    events: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[int, str, str, str]] = field(default_factory=list)
    crlf: bool = False

    def body(self) -> bytes:
        end = "\r\n" if self.crlf else "\n"
        return "".join(
            f"event: {e['type']}{end}data: {json.dumps(e, ensure_ascii=False)}{end}{end}"
            for e in self.events
        ).encode()


def _arguments(rng: random.Random, name: str) -> str:
    roll = rng.random()
    if roll < 0.08:
        return rng.choice(['{"a": NaN, "b": 1}', '{"a": 1, "a": 2, "b": 3}', '{"a": 1, "b": 2} x'])
    if roll < 0.12:
        return '{"a": 7, "b": 8, "deny": true}' if name != "multiply" else '{"deny": 1}'
    if name == "multiply":
        return json.dumps({"a": rng.randint(-99, 99), "b": rng.random() * 10})
    if name == "write_file":
        return json.dumps({"path": f"notes/{rng.randint(0, 9)}.txt", "content": "ünï ✓ 🎉"})
    return "" if rng.random() < 0.4 else json.dumps({"k": [1, {"x": None}]})


def stream(seed: int) -> Stream:
    rng = random.Random(seed)
    s = Stream(crlf=rng.random() < 0.2)
    s.events.append({"type": "message_start", "message": {"id": f"msg_{seed}", "content": []}})
    if rng.random() < 0.5:
        s.events.append({"type": "ping"})
    kinds = rng.choices(["text", "thinking", "tool"], k=rng.randint(0, 4))
    for index, kind in enumerate(kinds):
        if kind == "text":
            block: dict[str, Any] = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": "Hi ✓"}] * rng.randint(0, 2)
        elif kind == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": "hm"},
                {"type": "signature_delta", "signature": "Eq"},
            ]
        else:
            name = rng.choice(["multiply", "write_file", "anything", "unregistered"])
            block = {"type": "tool_use", "id": f"toolu_{seed}_{index}", "name": name, "input": {}}
            text = _arguments(rng, name)
            cuts = sorted(rng.sample(range(len(text) + 1), min(len(text), rng.randint(0, 4))))
            parts = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in ["", *parts]]
            s.calls.append((index, block["id"], name, text or "{}"))
        s.events.append({"type": "content_block_start", "index": index, "content_block": block})
        s.events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        s.events.append({"type": "content_block_stop", "index": index})
    stop = "tool_use" if s.calls else rng.choice(["end_turn", "max_tokens", "stop_sequence"])
    s.events.append({"type": "message_delta", "delta": {"stop_reason": stop}, "usage": {}})
    s.events.append({"type": "message_stop"})
    return s


def damage(s: Stream, seed: int, kinds: list[str]) -> bytes:
    """The stream's bytes with each of ``kinds`` applied (seeded)."""
    rng = random.Random(seed ^ 0x5EED)
    events = [dict(e) for e in s.events]
    byte_damage: list[str] = []
    for kind in kinds:
        at = rng.randrange(len(events))
        if kind == "drop" and len(events) > 1:
            del events[at]
        elif kind == "dup":
            events.insert(at, events[at])
        elif kind == "swap" and at + 1 < len(events):
            events[at], events[at + 1] = events[at + 1], events[at]
        elif kind == "stop_reason":
            reason = rng.choice(["end_turn", "max_tokens", "refusal", "pause_turn", "tool_use"])
            for e in events:
                if e["type"] == "message_delta":
                    e["delta"] = {"stop_reason": reason}
        elif kind == "after_stop":
            events.append(rng.choice([{"type": "ping"}, {"type": "message_stop"}]))
        elif kind == "error":
            events.insert(at, {"type": "error", "error": {"type": "overloaded_error"}})
        elif kind == "server_tool":
            block = {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_search",
                "input": {},
            }
            events[at:at] = [
                {"type": "content_block_start", "index": 90, "content_block": block},
                {"type": "content_block_stop", "index": 90},
            ]
        elif kind == "start_input":
            for e in events:
                if e["type"] == "content_block_start" and e["content_block"]["type"] == "tool_use":
                    e["content_block"] = {**e["content_block"], "input": {"a": 1}}
                    break
        elif kind == "index":
            if "index" in events[at]:
                events[at] = {**events[at], "index": events[at]["index"] + rng.choice([1, -1, 7])}
        elif kind == "reuse_id":
            starts = [e for e in events if e.get("content_block", {}).get("type") == "tool_use"]
            if len(starts) > 1:
                first, second = starts[0], starts[1]
                second["content_block"] = {
                    **second["content_block"],
                    "id": first["content_block"]["id"],
                }
        elif kind == "unknown_delta":
            if "index" in events[at]:
                delta = {"type": "input_delta_v2", "json": "{}"}
                events.insert(
                    at,
                    {"type": "content_block_delta", "index": events[at]["index"], "delta": delta},
                )
        else:
            byte_damage.append(kind)
    body = Stream(events, s.calls, s.crlf).body()
    for kind in byte_damage:
        if kind == "truncate" and body:
            body = body[: rng.randrange(len(body))]
        elif kind == "corrupt" and body:
            at = rng.randrange(len(body))
            body = body[:at] + bytes([rng.randrange(256)]) + body[at + 1 :]
    return body


def cuts_of(body: bytes, seed: int) -> list[int]:
    rng = random.Random(seed ^ 0xC075)
    if len(body) < 2:
        return []
    if rng.random() < 0.01:
        return list(range(1, len(body)))  # one byte at a time
    return sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 12))))


SEEDS = st.integers(0, 2**31)
DAMAGE_LISTS = st.lists(st.sampled_from(DAMAGES), max_size=2)
