"""Chat-completions streams for the property tests and fuzzers, well-formed and then damaged.

:func:`stream` writes a well-formed stream: a role chunk, text fragments and up to three
tool calls whose argument text is cut into fragments, all interleaved, then a finish, maybe
a usage chunk, and ``[DONE]``. The argument text is usually a JSON object, sometimes a
hostile one (NaN, huge numbers, deep nesting, duplicate keys, lone surrogates, trailing
data) or plain garbage. :func:`wire` then damages it at the level of messages (dropped,
duplicated, reordered, ids and names changed, extra choices, error events, bad indexes, a
second finish, data after ``[DONE]``) and of bytes (truncated, corrupted, invalid UTF-8),
and picks an encoding (LF, CRLF or CR line ends, a BOM, comments, chunks over two ``data:``
lines) and a set of cut points. What the gate must do with the result is decided by
:mod:`oracle`, not here: the generator only writes bytes.

Speed matters (a CI run judges over 10,000 streams), so the detail is drawn from a
``random.Random`` seeded by hypothesis, and hypothesis itself draws only the seed and the
top-level choices (:data:`knobs`: which damage, which encoding), which is what shrinking
can usefully simplify. A failure names its seed and knobs, which replay it exactly.
"""

from __future__ import annotations

import itertools
import json
import os
import random
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from hypothesis import strategies as st

SAFE = 2**53 - 1
RESPONSE_ID = "chatcmpl-prop"

TOOLS: list[dict[str, Any]] = [
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
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {"type": "function", "function": {"name": "anything"}},
]
SCHEMAS = {
    t["function"]["name"]: t["function"].get("parameters", {"type": "object"}) for t in TOOLS
}
NAMES = [*SCHEMAS, "not_registered"]


def policy(name: str, value: dict[str, Any]) -> bool:
    """The tests' policy: a top-level key ``deny`` is refused."""
    return "deny" not in value


def scaled(examples: int) -> int:
    """``examples`` times ``TOOLGATE_ATTACK_SCALE`` (default 1): the long run is one variable."""
    return max(1, int(examples * float(os.environ.get("TOOLGATE_ATTACK_SCALE", "1"))))


# ---- values and argument text --------------------------------------------------------------

TEXT_ALPHABET = 'abc xyz/._-"\\\n\t\x00\x1féß€😀\u2028\ufeff'
KEYS = ["k", "deny", "path", "x", "a", "b", ""]


def text(rng: random.Random, size: int = 8) -> str:
    return "".join(rng.choice(TEXT_ALPHABET) for _ in range(rng.randint(0, size)))


def number(rng: random.Random) -> int | float:
    kind = rng.randint(0, 3)
    if kind == 0:
        return rng.randint(-SAFE, SAFE)
    if kind == 1:
        return rng.randint(-9, 99)
    if kind == 2:
        return rng.uniform(-1e6, 1e6)
    return rng.choice([0.0, -0.0, 1e308, -1e-308, 5e-324, 0.1])


def value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randint(0, 7 if depth < 3 else 4)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return number(rng)
    if kind in (3, 4):
        return text(rng)
    if kind == 5:
        return [value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {text(rng, 5): value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def arguments_value(rng: random.Random, name: str) -> dict[str, Any]:
    if name == "multiply":
        return {"a": number(rng), "b": number(rng)}
    if name == "write_file":
        return {"path": text(rng), "content": text(rng, 30)}
    keys = [rng.choice(KEYS) if rng.random() < 0.5 else text(rng, 5) for _ in range(4)]
    return {key: value(rng) for key in keys}


HOSTILE_VALUES = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999",
    "-1e400",
    "1e-400",
    "9007199254740991",
    "9007199254740992",
    "-9007199254740993",
    "1" * 30,
    "1" * 5000,
    "01",
    "1.",
    ".5",
    "+1",
    "-",
    "tru",
    "nul",
    '"\\ud800"',
    '"x\\udc00"',
    '"\\ud83d\\ude00"',
    '"\\ud83d\\u0041"',
    '"\ud800"',
    '"\x01"',
    '"\\x41"',
    "'single'",
    '{"d": 1, "d": 2}',
    '[{"e": 1, "f": {"e": 2, "e": 3}}]',
]
SHAPES = [
    '{"a": 1, "a": 2}',
    "{v} x",
    "{v}{v}",
    "{v}\n",
    " \t\r\n{v}",
    "\ufeff{v}",
    "\u00a0{v}",
    "[1, 2]",
    '"text"',
    "7",
    "null",
    "",
    "  ",
    "{{}}",
]
GARBAGE = '{}[]":,0123456789 .eE-+tfnrul\\abu\ud800'


def hostile_text(rng: random.Random, valid: str) -> str:
    """Argument text that a lax parser might take and a strict one must weigh."""
    form = rng.choice(["value", "deep", "shape", "cut", "garbage"])
    if form == "value":
        return '{"a": ' + rng.choice(HOSTILE_VALUES) + ', "b": 2}'
    if form == "deep":
        depth = rng.choice([1, 61, 62, 63, 64, 65, 100, 5000])
        opener = rng.choice(["[", '{"k":'])
        closer = "]" if opener == "[" else "}"
        return '{"a": ' + opener * depth + "1" + closer * depth + ', "b": 3}'
    if form == "shape":
        return rng.choice(SHAPES).replace("{v}", valid).replace("{{}}", "{}")
    if form == "cut":
        return valid[: rng.randint(0, len(valid))]
    return "".join(rng.choice(GARBAGE) for _ in range(rng.randint(0, 30)))


def argument_text(rng: random.Random, name: str, hostile: bool) -> str:
    value_ = arguments_value(rng, name)
    if not hostile:
        value_.pop("deny", None)
    valid = json.dumps(value_, ensure_ascii=rng.random() < 0.5, indent=rng.choice([None, 1]))
    if hostile and rng.random() < 0.3:
        return hostile_text(rng, valid)
    return valid


# ---- well-formed streams -------------------------------------------------------------------


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
class Msg:
    """One SSE message: a chunk object, or raw data text (``[DONE]``, garbage)."""

    data: dict[str, Any] | str
    event: str | None = None


@dataclass
class Stream:
    messages: list[Msg]
    calls: list[Call]
    finish: str
    mutations: list[str] = field(default_factory=list)
    body: bytes = b""
    cuts: list[int] = field(default_factory=list)


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {
        "id": RESPONSE_ID,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}],
    }


def opening(index: int, call_id: str, name: str, fragment: str) -> dict[str, Any]:
    function = {"name": name, "arguments": fragment}
    fragment_ = {"index": index, "id": call_id, "type": "function", "function": function}
    return chunk({"tool_calls": [fragment_]})


def continuing(index: int, fragment: str) -> dict[str, Any]:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


def cut_text(rng: random.Random, text_: str) -> tuple[str, ...]:
    """``text_`` in 1-5 pieces (the first may be empty: an opening fragment without arguments)."""
    points = sorted(rng.randint(0, len(text_)) for _ in range(rng.randint(0, 4)))
    bounds = [0, *points, len(text_)]
    return tuple(text_[a:b] for a, b in itertools.pairwise(bounds))


def stream(rng: random.Random, hostile: bool = True) -> Stream:
    """A well-formed stream (its arguments hostile now and then when ``hostile``)."""
    count = rng.choice([0, 1, 1, 2, 2, 3])
    indices = rng.sample(range(count), count)  # opening order need not be index order
    calls = []
    for n, index in enumerate(indices):
        name = rng.choice(NAMES if hostile else NAMES[:3])
        fragments = cut_text(rng, argument_text(rng, name, hostile))
        calls.append(Call(index, f"call_{n}_{index}", name, fragments))
    texts = [text(rng) or "." for _ in range(rng.randint(0, 4))]
    # Interleave: a shuffle of labels, the k-th occurrence of a call's label being its k-th
    # fragment, so each call's fragments keep their order.
    labels = [("text", i) for i in range(len(texts))]
    for c in calls:
        labels += [("call", c.index)] * len(c.fragments)
    rng.shuffle(labels)
    by_index = {c.index: c for c in calls}
    taken: dict[int, int] = {}
    messages = [Msg(chunk({"role": "assistant", "content": ""}))]
    for kind, key in labels:
        if kind == "text":
            messages.append(Msg(chunk({"content": texts[key]})))
            continue
        call = by_index[key]
        k = taken.get(key, 0)
        taken[key] = k + 1
        if k == 0:
            messages.append(Msg(opening(call.index, call.call_id, call.name, call.fragments[0])))
        else:
            messages.append(Msg(continuing(call.index, call.fragments[k])))
    finish = "tool_calls" if calls else "stop"
    if rng.random() < 0.1:
        finish = rng.choice(["tool_calls", "stop", "length", "content_filter"])
    messages.append(Msg(chunk(finish=finish)))
    if rng.random() < 0.5:
        usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
        messages.append(Msg({"id": RESPONSE_ID, "choices": [], "usage": usage}))
    messages.append(Msg("[DONE]"))
    return Stream(messages, sorted(calls, key=lambda c: c.index), finish)


# ---- damage --------------------------------------------------------------------------------

MESSAGE_MUTATIONS = (
    "drop",
    "duplicate",
    "swap",
    "shuffle",
    "identity",
    "index",
    "choice",
    "error",
    "refusal",
    "legacy",
    "unknown_event",
    "after_done",
    "finish",
    "tool_type",
    "bad_data",
    "merge",
)
BYTE_MUTATIONS = ("truncate", "corrupt", "invalid_utf8", "insert")
ODD_INDEXES: list[Any] = [-1, True, False, "0", 1.5, float("nan"), float("inf"), 2**70, None, 0, 1]
INVALID_UTF8 = [b"\xff", b"\xc3", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xe2\x82"]
HUGE_INT = '{"x": ' + "9" * 5000 + "}"  # valid JSON past the int-string conversion limit
BAD_DATA = ["{not json", "[1]", "NaN", "", "null", "[DONE] ", '{"choices": 5}', HUGE_INT]


def _fragments(messages: list[Msg]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in messages:
        choices = m.data.get("choices") if isinstance(m.data, dict) else None
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            calls = delta.get("tool_calls") if isinstance(delta, dict) else None
            out += [f for f in calls or [] if isinstance(f, dict)]
    return out


def _first_choice(m: Msg) -> dict[str, Any] | None:
    choices = m.data.get("choices") if isinstance(m.data, dict) else None
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        return choices[0]
    return None


def mutate(rng: random.Random, kind: str, messages: list[Msg]) -> None:
    """Damage ``messages`` in place (the chunk objects are fresh per stream)."""
    at = rng.randrange(len(messages))
    fragments = _fragments(messages)
    if kind == "drop":
        del messages[at]
    elif kind == "duplicate":
        messages.insert(at, Msg(json.loads(json.dumps(messages[at].data)), messages[at].event))
    elif kind == "swap":
        other = rng.randrange(len(messages))
        messages[at], messages[other] = messages[other], messages[at]
    elif kind == "shuffle":
        window = messages[at : at + 4]
        rng.shuffle(window)
        messages[at : at + 4] = window
    elif kind == "identity" and fragments:
        fragment = rng.choice(fragments)
        how = rng.choice(["id", "name", "both", "drop_id", "drop_name", "null_name"])
        function = fragment.get("function")
        if not isinstance(function, dict):  # an earlier mutation may have replaced it
            function = fragment["function"] = {}
        if how in ("id", "both"):
            fragment["id"] = rng.choice(["call_0_0", "call_1_1", "call_x", ""])
        if how in ("name", "both"):
            function["name"] = rng.choice([*NAMES, "", "multiply_"])
        if how == "drop_id":
            fragment.pop("id", None)
        if how == "drop_name":
            function.pop("name", None)
        if how == "null_name":
            fragment["function"] = rng.choice([None, [], "x"])
    elif kind == "index" and fragments:
        rng.choice(fragments)["index"] = rng.choice(ODD_INDEXES)
    elif kind == "choice":
        target, choice = messages[at].data, _first_choice(messages[at])
        if isinstance(target, dict) and choice is not None:
            how = rng.choice(["index", "extra", "not_list", "not_dict", "delta"])
            if how == "index":
                choice["index"] = rng.choice([1, 2, -1, True, 0.0, "0", None])
            elif how == "extra":
                target["choices"].append({"index": 1, "delta": {"content": "other"}})
            elif how == "not_list":
                target["choices"] = choice
            elif how == "not_dict":
                target["choices"] = [7]
            else:
                choice["delta"] = rng.choice([[], "text", 3, None])
    elif kind == "error":
        error = Msg({"error": {"message": "upstream failed", "type": "server_error"}})
        messages.insert(at, rng.choice([error, Msg("{}", event="error"), Msg({"error": None})]))
    elif kind == "refusal":
        messages.insert(at, Msg(chunk({"refusal": rng.choice(["no", "", None])})))
    elif kind == "legacy":
        legacy = {"function_call": {"name": "multiply", "arguments": "{}"}}
        messages.insert(at, Msg(chunk(legacy)))
    elif kind == "unknown_event":
        messages.insert(at, Msg('{"type": "ping"}', event=rng.choice(["ping", "message"])))
    elif kind == "after_done":
        late = [Msg(chunk({"content": "late"})), Msg("[DONE]"), Msg("{}", event="ping")]
        messages.append(rng.choice(late))
    elif kind == "finish":
        how = rng.choice(["second", "empty", "number", "early"])
        if how == "second":
            messages.insert(at, Msg(chunk(finish=rng.choice(["stop", "tool_calls"]))))
        elif how == "empty":
            messages.insert(at, Msg(chunk(finish="")))
        elif how == "number":
            bad = chunk()
            bad["choices"][0]["finish_reason"] = 1
            messages.insert(at, Msg(bad))
        else:
            messages.insert(at, Msg(chunk(finish="tool_calls")))
    elif kind == "tool_type" and fragments:
        rng.choice(fragments)["type"] = rng.choice(["custom", None, "function", 5])
    elif kind == "bad_data":
        messages.insert(at, Msg(rng.choice(BAD_DATA)))
    elif kind == "merge" and at + 1 < len(messages):
        # Two chunks' fragments (and the second's finish) in one chunk.
        a, b = _first_choice(messages[at]), _first_choice(messages[at + 1])
        if a is not None and b is not None:
            da, db = a.get("delta"), b.get("delta")
            if isinstance(da, dict) and isinstance(db, dict) and not db.get("content"):
                da["tool_calls"] = (da.get("tool_calls") or []) + (db.get("tool_calls") or [])
                a["finish_reason"] = b.get("finish_reason")
                del messages[at + 1]


def encode(
    messages: list[Msg], *, ensure_ascii: bool, eol: str, split_lines: bool, space: bool
) -> bytes:
    out: list[str] = []
    sep = "data: " if space else "data:"
    for m in messages:
        lines = []
        if m.event is not None:
            lines.append("event: " + m.event)
        data = m.data if isinstance(m.data, str) else json.dumps(m.data, ensure_ascii=ensure_ascii)
        if split_lines and not isinstance(m.data, str) and ", " in data:
            # SSE joins data lines with LF, which is JSON whitespace: still the same chunk.
            head, tail = data.split(", ", 1)
            lines += [sep + head + ",", sep + tail]
        else:
            lines.append(sep + data)
        out.append(eol.join(lines) + eol + eol)
    # surrogatepass: a lone surrogate written raw becomes bytes no UTF-8 decoder accepts.
    return "".join(out).encode("utf-8", "surrogatepass")


class Knobs(NamedTuple):
    """The top-level choices hypothesis draws (and shrinks); the rest comes from ``seed``."""

    seed: int
    mutations: tuple[str, ...]
    byte_mutation: str | None
    eol: str
    split_lines: bool


def knobs(
    hostile: bool = True, kinds: tuple[str, ...] = MESSAGE_MUTATIONS
) -> st.SearchStrategy[Knobs]:
    """Hypothesis's draw; ``kinds`` are the message mutations of the wire (chat by default)."""
    mutations = st.lists(st.sampled_from(kinds), max_size=2 if hostile else 0)
    byte: st.SearchStrategy[str | None] = st.none()
    if hostile:  # one stream in four damaged at the byte level
        byte = st.sampled_from([None, None, None, *BYTE_MUTATIONS])
    return st.builds(
        Knobs,
        st.integers(0, 2**32 - 1),
        mutations.map(tuple),
        byte,
        st.sampled_from(["\n", "\r\n", "\r"]),
        st.integers(0, 7).map(lambda n: n == 0),
    )


BATCH = 8


def siblings(k: Knobs, hostile: bool, kinds: tuple[str, ...]) -> list[Knobs]:
    """``k`` and ``BATCH - 1`` sibling knobs that follow from ``k.seed``.

    One hypothesis example costs a few milliseconds of engine time, several times the cost
    of judging one stream, so each example judges a batch (each sibling's knobs are listed
    on failure, and any one of them replays alone with its wire's ``wire``).
    """
    rng = random.Random(k.seed ^ 0x5EED)
    out = [k]
    for _ in range(BATCH - 1):
        out.append(
            Knobs(
                rng.getrandbits(32),
                tuple(rng.choices(kinds, k=rng.randint(0, 2))) if hostile else (),
                rng.choice([None, None, None, *BYTE_MUTATIONS]) if hostile else None,
                rng.choice(["\n", "\n", "\r\n", "\r"]),
                rng.random() < 0.125,
            )
        )
    return out


def batch(k: Knobs, hostile: bool = True) -> list[tuple[Knobs, Stream]]:
    """``k``'s chat stream and its siblings' (see :func:`siblings`)."""
    return [(s, wire(s, hostile)) for s in siblings(k, hostile, MESSAGE_MUTATIONS)]


def damage(rng: random.Random, kind: str, body: bytes) -> bytes:
    """``body`` damaged at the byte level: truncated, a byte changed, bad UTF-8, noise."""
    at = rng.randrange(len(body))
    if kind == "truncate":
        return body[:at]
    if kind == "corrupt":
        return body[:at] + bytes([(body[at] + rng.randint(1, 255)) % 256]) + body[at + 1 :]
    if kind == "invalid_utf8":
        return body[:at] + rng.choice(INVALID_UTF8) + body[at:]
    return body[:at] + rng.randbytes(rng.randint(1, 4)) + body[at:]


def cut_points(rng: random.Random, body: bytes) -> list[int]:
    """Where to split ``body`` when feeding it: random cuts, now and then every byte."""
    if rng.random() < 0.01 and len(body) < 1500:
        return list(range(1, len(body)))  # one byte at a time
    if len(body) > 1:
        return sorted({rng.randrange(1, len(body)) for _ in range(rng.randint(0, 20))})
    return []


def wire(k: Knobs, hostile: bool = True) -> Stream:
    """The stream for ``k``: written, damaged, encoded, with a set of cut points."""
    rng = random.Random(k.seed)
    base = stream(rng, hostile)
    messages = [Msg(json.loads(json.dumps(m.data)), m.event) for m in base.messages]
    for kind in k.mutations:
        mutate(rng, kind, messages)
    body = encode(
        messages,
        ensure_ascii=rng.random() < 0.5,
        eol=k.eol,
        split_lines=k.split_lines,
        space=rng.random() < 0.9,
    )
    if rng.random() < 0.1:  # a comment between two messages
        end = (k.eol * 2).encode()
        at = body.find(end, rng.randrange(len(body)))
        at = len(body) if at < 0 else at + len(end)
        body = body[:at] + b": keep-alive" + end + body[at:]
    if rng.random() < 0.05:
        body = "\ufeff".encode() + body
    applied = list(k.mutations)
    if k.byte_mutation is not None and body:
        body = damage(rng, k.byte_mutation, body)
        applied.append(k.byte_mutation)
    base.messages, base.mutations, base.body = messages, applied, body
    base.cuts = cut_points(rng, body)
    return base
