"""Property tests of the core over generated Bedrock Converse streams, judged by an oracle.

Each seed writes a Converse stream (text blocks, tool blocks with their arguments cut into
random fragments, a stop reason, metadata) as AWS event-stream frames, intact or damaged (an
event dropped, repeated or moved, the stop reason changed, arguments broken, the body cut
or a byte flipped). ``oracle_bedrock`` (sharing no code with the gate) reads the frames and
judges the events; the core, fed the body at random splits, must release exactly what the
oracle releases, or refuse exactly when it refuses, and only ever raise
ToolCallQuarantined.
"""

from __future__ import annotations

import json
import random
import struct
import zlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracle_bedrock import frames, judge
from wirecases import CoreWire

from litellm_toolgate.core.decision.state import Wire

PATH = "/model/m/converse-stream"
WIRE = CoreWire(
    "bedrock",
    wire=Wire.BEDROCK,
    path=PATH,
    content_type="application/vnd.amazon.eventstream",
    attempt_id="att-bp",
)
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


TOOLS = {
    "multiply": lambda v: set(v) == {"a", "b"} and _number(v["a"]) and _number(v["b"]),
    "write_file": lambda v: (
        set(v) == {"path", "content"}
        and isinstance(v["path"], str)
        and len(v["path"]) <= 4096
        and isinstance(v["content"], str)
    ),
}
ARGUMENTS = [
    '{"a": 7, "b": 8}',
    '{"b":1.5,"a":-2}',
    '{"path": "notes/ü.txt", "content": "CANARY-7f3a9c ✓ 🎉"}',
    '{"a": 7}',  # schema-invalid
    '{"a": 1, "a": 2, "b": 3}',  # duplicate key
    '{"a": 7, "b": 8',  # cut
    '{"a": 7, "b": 8}{}',  # trailing
    "",  # no fragment: {}
]


def _string(name: str, value: str) -> bytes:
    raw = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(raw)) + raw


def _frame(event: str, obj: dict[str, Any]) -> bytes:
    headers = (
        _string(":event-type", event)
        + _string(":content-type", "application/json")
        + _string(":message-type", "event")
    )
    payload = json.dumps(obj, ensure_ascii=False).encode()
    prelude = struct.pack(">II", 16 + len(headers) + len(payload), len(headers))
    head = prelude + struct.pack(">I", zlib.crc32(prelude)) + headers + payload
    return head + struct.pack(">I", zlib.crc32(head))


def generate(seed: int) -> list[tuple[str, dict[str, Any]]]:
    rng = random.Random(seed)
    events: list[tuple[str, dict[str, Any]]] = [("messageStart", {"role": "assistant"})]
    calls = 0
    for index in range(rng.randint(0, 4)):
        if rng.random() < 0.4:
            for _ in range(rng.randint(1, 3)):
                delta = {"text": rng.choice(["Hi ", "ünï ", "", "56"])}
                events.append(("contentBlockDelta", {"contentBlockIndex": index, "delta": delta}))
        else:
            calls += 1
            tool = rng.choice(["multiply", "write_file", "delete"])
            good = ARGUMENTS[:3] if rng.random() < 0.7 else ARGUMENTS
            text = rng.choice(good)
            use = {"toolUseId": f"tooluse_{seed}_{calls}", "name": tool}
            events.append(
                ("contentBlockStart", {"contentBlockIndex": index, "start": {"toolUse": use}})
            )
            at = 0
            while at < len(text):
                step = rng.randint(1, 9)
                fragment = {"toolUse": {"input": text[at : at + step]}}
                events.append(
                    ("contentBlockDelta", {"contentBlockIndex": index, "delta": fragment})
                )
                at += step
        events.append(("contentBlockStop", {"contentBlockIndex": index}))
    stop = "tool_use" if calls else rng.choice(["end_turn", "max_tokens"])
    events.append(("messageStop", {"stopReason": stop}))
    events.append(("metadata", {"usage": {"inputTokens": 1, "outputTokens": 2}}))
    return events


def damage(seed: int, events: list[tuple[str, dict[str, Any]]]) -> bytes:
    rng = random.Random(~seed)
    events = list(events)
    kind = rng.randrange(7)
    at = rng.randrange(len(events))
    if kind == 0:
        del events[at]
    elif kind == 1:
        events.insert(at, events[at])
    elif kind == 2 and at + 1 < len(events):
        events[at], events[at + 1] = events[at + 1], events[at]
    elif kind == 3:
        events[-2] = (
            "messageStop",
            {"stopReason": rng.choice(["tool_use", "end_turn", "max_tokens"])},
        )
    body = b"".join(_frame(e, o) for e, o in events)
    if kind == 4:
        return body[: rng.randrange(len(body))]
    if kind == 5:
        flipped = bytearray(body)
        flipped[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
        return bytes(flipped)
    return body


def outcome(body: bytes, seed: int) -> list[tuple[str, str, str]] | None:
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(0, 6))))
    pieces = [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]
    released, _, fault, _ = WIRE.replay(pieces)  # raises anything but a quarantine
    if fault is not None:
        assert not released
        return None
    return [(c["call_id"], c["name"], c["arguments"]) for c in released]


def expected(body: bytes) -> list[tuple[str, str, str]] | None:
    decoded = frames(body)
    return None if isinstance(decoded, str) else judge(decoded, TOOLS)


@settings(FAST, max_examples=300)
@given(st.integers(0, 2**32))
def test_intact_streams_match_the_oracle(seed: int) -> None:
    body = b"".join(_frame(e, o) for e, o in generate(seed))
    assert outcome(body, seed) == expected(body)


@settings(FAST, max_examples=600)
@given(st.integers(0, 2**32))
def test_damaged_streams_match_the_oracle(seed: int) -> None:
    body = damage(seed, generate(seed))
    assert outcome(body, seed) == expected(body)


def test_the_oracle_releases_and_refuses_both() -> None:
    judged = [expected(b"".join(_frame(e, o) for e, o in generate(s))) for s in range(200)]
    assert any(j for j in judged) and any(j is None for j in judged)
    assert any(j == [] for j in judged)
