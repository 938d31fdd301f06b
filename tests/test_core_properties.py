"""Property tests of the attempt machine over generated chat streams.

A strategy writes a well-formed chat-completions stream: text fragments and up to three tool
calls whose argument text (a random JSON object) is cut into fragments, all interleaved;
then a finish, maybe a usage chunk, and ``[DONE]``. Some examples are then damaged: an event
dropped, duplicated or two swapped, the bytes truncated or one byte changed. Whatever comes,
the attempt must only ever raise ToolCallQuarantined, must release only after conclude and
release both succeeded, must release exactly the text of each call's fragments, and must not
care how the bytes were split.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from litellm_toolgate.core import (
    ChatAttempt,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.sse import SSEDecodeError, SSEDecoder
from litellm_toolgate.core.state import StreamState

REGISTRY = ToolRegistry.from_tools(
    [
        {
            "type": "function",
            "function": {
                "name": "multiply",
                "parameters": {
                    "type": "object",
                    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                    "required": ["a", "b"],
                    "additionalProperties": False,
                },
            },
        },
        {"type": "function", "function": {"name": "anything"}},
    ]
)
SAFE = 2**53 - 1
RESPONSE_ID = "chatcmpl-prop"

# ---- generating streams -------------------------------------------------------------------

numbers = st.integers(-SAFE, SAFE) | st.floats(allow_nan=False, allow_infinity=False)
scalars = st.none() | st.booleans() | numbers | st.text(max_size=12)
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
objects = st.dictionaries(st.text(max_size=8), values, max_size=4)
multiply_args = st.fixed_dictionaries({"a": numbers, "b": numbers})


@dataclass(frozen=True)
class Call:
    index: int
    call_id: str
    name: str
    fragments: tuple[str, ...]

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)


@dataclass
class Stream:
    events: list[tuple[Any, ...]]
    calls: list[Call]
    finish: str
    ensure_ascii: bool
    mutation: str = "none"
    body: bytes = b""
    cuts: list[int] = field(default_factory=list)


@st.composite
def cut_text(draw: st.DrawFn, text: str) -> tuple[str, ...]:
    """``text`` in 1-5 pieces (the first may be empty: an opening fragment without arguments)."""
    points = draw(st.lists(st.integers(0, len(text)), max_size=4))
    bounds = [0, *sorted(points), len(text)]
    return tuple(text[a:b] for a, b in itertools.pairwise(bounds))


@st.composite
def calls(draw: st.DrawFn) -> list[Call]:
    count = draw(st.integers(0, 3))
    indices = draw(st.permutations(range(count)))  # opening order need not be index order
    out = []
    for n, index in enumerate(indices):
        name = draw(st.sampled_from(["multiply", "anything"]))
        value = draw(multiply_args if name == "multiply" else objects)
        text = json.dumps(
            value, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1]))
        )
        out.append(Call(index, f"call_{n}_{index}", name, draw(cut_text(text))))
    return out


@st.composite
def streams(draw: st.DrawFn) -> Stream:
    call_list = draw(calls())
    texts = draw(st.lists(st.text(min_size=1, max_size=8), max_size=4))
    # Interleave: a permutation of labels, the k-th occurrence of a call's label being its
    # k-th fragment, so each call's fragments keep their order.
    labels = [("text", i) for i in range(len(texts))]
    for c in call_list:
        labels += [("call", c.index)] * len(c.fragments)
    order = draw(st.permutations(labels))
    by_index = {c.index: c for c in call_list}
    taken: dict[int, int] = {}
    events: list[tuple[Any, ...]] = [("role",)]
    for kind, key in order:
        if kind == "text":
            events.append(("text", texts[key]))
            continue
        call = by_index[key]
        k = taken.get(key, 0)
        taken[key] = k + 1
        if k == 0:
            events.append(("open", call.index, call.call_id, call.name, call.fragments[0]))
        else:
            events.append(("args", call.index, call.fragments[k]))
    finish = draw(st.sampled_from(["tool_calls", "stop"]))
    events.append(("finish", finish))
    if draw(st.booleans()):
        events.append(("usage",))
    events.append(("done",))
    return Stream(events, sorted(call_list, key=lambda c: c.index), finish, draw(st.booleans()))


def encode(event: tuple[Any, ...], ensure_ascii: bool) -> bytes:
    kind = event[0]
    if kind == "done":
        return b"data: [DONE]\n\n"
    delta: dict[str, Any] = {}
    finish = None
    doc: dict[str, Any] = {"id": RESPONSE_ID, "object": "chat.completion.chunk"}
    if kind == "role":
        delta = {"role": "assistant", "content": ""}
    elif kind == "text":
        delta = {"content": event[1]}
    elif kind == "open":
        _, index, call_id, name, fragment = event
        delta = {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": fragment},
                }
            ]
        }
    elif kind == "args":
        delta = {"tool_calls": [{"index": event[1], "function": {"arguments": event[2]}}]}
    elif kind == "finish":
        finish = event[1]
    if kind == "usage":
        doc["choices"] = []
        doc["usage"] = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    else:
        doc["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(doc, ensure_ascii=ensure_ascii).encode() + b"\n\n"


@st.composite
def wires(draw: st.DrawFn) -> Stream:
    """A generated stream, maybe damaged, with the bytes and a random set of cut points."""
    stream = draw(streams())
    events = list(stream.events)
    mutation = draw(
        st.sampled_from(["none", "none", "drop", "duplicate", "swap", "truncate", "corrupt"])
    )
    if mutation == "drop":
        del events[draw(st.integers(0, len(events) - 1))]
    elif mutation == "duplicate":
        at = draw(st.integers(0, len(events) - 1))
        events.insert(at, events[at])
    elif mutation == "swap":
        i, j = draw(st.lists(st.integers(0, len(events) - 1), min_size=2, max_size=2, unique=True))
        events[i], events[j] = events[j], events[i]
    body = b"".join(encode(e, stream.ensure_ascii) for e in events)
    if mutation == "truncate":
        body = body[: draw(st.integers(0, len(body) - 1))]
    elif mutation == "corrupt":
        at = draw(st.integers(0, len(body) - 1))
        byte = draw(st.integers(0, 255).filter(lambda b: b != body[at]))
        body = body[:at] + bytes([byte]) + body[at + 1 :]
    stream.events, stream.mutation, stream.body = events, mutation, body
    stream.cuts = sorted(draw(st.lists(st.integers(1, max(1, len(body) - 1)), max_size=20)))
    return stream


# ---- running and judging ------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    reason: QuarantineReason | None
    released: tuple[tuple[int, str, str, str], ...]


def replay(pieces: list[bytes]) -> Result:
    """Drive an attempt to its end. Only ToolCallQuarantined is caught: anything else fails."""
    attempt = ChatAttempt(REGISTRY)
    concluded = released_ok = False
    released: list[Any] = []
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True)
        for piece in pieces:
            attempt.receive_bytes(piece)
        attempt.receive_eof()
        calls = attempt.conclude()
        concluded = True
        for call in calls:
            attempt.decide(call.index, PolicyDecision.approve())
        released = attempt.release()
        released_ok = True
    except ToolCallQuarantined as fault:
        assert attempt.quarantined is fault
        assert attempt.state is StreamState.QUARANTINED
        assert not released
        try:
            attempt.release()
        except ToolCallQuarantined as again:
            assert again is fault
        else:
            raise AssertionError("a quarantined attempt released") from None
        return Result(fault.reason, ())
    assert concluded and released_ok
    assert attempt.state is StreamState.RELEASED
    return Result(None, tuple((c.index, c.call_id, c.name, c.arguments) for c in released))


def oracle_arguments(body: bytes) -> dict[int, str] | None:
    """Each index's fragments joined, read from the bytes independently of the attempt; None
    if the bytes are not a readable event stream of JSON chunks."""
    decoder = SSEDecoder(max_event_bytes=1 << 24)
    try:
        messages = decoder.feed(body) + decoder.flush()
    except SSEDecodeError:
        return None
    joined: dict[int, str] = {}
    for message in messages:
        if message.data == "[DONE]":
            continue
        try:
            doc = json.loads(message.data)
        except ValueError:
            return None
        for choice in doc.get("choices") or []:
            for fragment in (choice.get("delta") or {}).get("tool_calls") or []:
                text = (fragment.get("function") or {}).get("arguments") or ""
                joined[fragment["index"]] = joined.get(fragment["index"], "") + text
    return joined


def pieces_of(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wires())
def test_generated_streams(stream: Stream) -> None:
    whole = replay([stream.body])
    split = replay(pieces_of(stream.body, stream.cuts))
    assert split == whole, "the outcome must not depend on how the bytes were split"
    outcome = "released" if whole.reason is None else whole.reason.value
    event(f"{stream.mutation}: {outcome}")
    event(f"calls released: {len(whole.released)}")

    if whole.reason is None:
        # Released: exactly the text of each call's fragments, as the bytes carry them.
        oracle = oracle_arguments(stream.body)
        assert oracle is not None
        assert {index: arguments for index, _, _, arguments in whole.released} == oracle
        for _, _, _, arguments in whole.released:
            assert isinstance(json.loads(arguments), dict)

    if stream.mutation == "none":
        should_release = bool(stream.calls) == (stream.finish == "tool_calls")
        if should_release:
            assert whole.reason is None
            assert whole.released == tuple(
                (c.index, c.call_id, c.name, c.arguments) for c in stream.calls
            )
        else:
            assert whole.reason is QuarantineReason.FINISH_REASON_MISMATCH
    elif stream.mutation == "truncate":
        assert whole.reason is not None, "a stream cut before its end is never released"


def test_the_generator_is_not_trivial() -> None:
    """A fixed example of what the strategy writes, released exactly as generated."""
    call = Call(1, "call_0_1", "anything", ('{"k"', ': [1, "é"', "]}"))
    other = Call(0, "call_1_0", "multiply", ("", '{"a": 2, "b": 3}'))
    events: list[tuple[Any, ...]] = [
        ("role",),
        ("open", 1, call.call_id, call.name, call.fragments[0]),
        ("text", "hi "),
        ("open", 0, other.call_id, other.name, ""),
        ("args", 1, call.fragments[1]),
        ("args", 0, other.fragments[1]),
        ("args", 1, call.fragments[2]),
        ("finish", "tool_calls"),
        ("usage",),
        ("done",),
    ]
    body = b"".join(encode(e, False) for e in events)
    result = replay([body])
    assert result == Result(
        None,
        (
            (0, other.call_id, "multiply", other.arguments),
            (1, call.call_id, "anything", call.arguments),
        ),
    )
    assert oracle_arguments(body) == {0: other.arguments, 1: call.arguments}
