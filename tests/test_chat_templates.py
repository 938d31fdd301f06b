"""The chat normalizer's templates change no answer: with them or without, the same events.

A stream's text and argument lines usually differ only in their one string; the normalizer
learns such a line as a template and reads the next lines that fit it without parsing them
(``ChatNormalizer._learn``). Here a normalizer that learns and one that never does read the
same messages, and must give equal events and equal faults: on every fixture, on generated
streams (well-formed and damaged), and on lines built to sit on a template's edges (quotes,
escapes, control characters, lone surrogates, another field changed, the key repeated).
"""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest
from chatgen import MESSAGE_MUTATIONS, TOOLS, Knobs, siblings, wire
from conftest import CHAT, ROOT

from litellm_toolgate.core import Attempt, ToolCallQuarantined, ToolRegistry
from litellm_toolgate.core.decision.events import ArgumentDelta, TextDelta, WireEvent
from litellm_toolgate.core.decision.profiles import profile_for
from litellm_toolgate.core.framing.sse import SSEDecoder
from litellm_toolgate.core.wires import chat
from litellm_toolgate.core.wires.chat import ChatNormalizer
from litellm_toolgate.core.wires.loads import WireFault

Outcome = list[WireEvent] | tuple[str, int | None]


def read(normalizer: ChatNormalizer, event: str, data: str) -> Outcome:
    try:
        return normalizer.fields(event, data)
    except WireFault as fault:
        return (fault.reason.value, fault.index)


def never_learns(profile: Any = None) -> ChatNormalizer:
    reference = ChatNormalizer() if profile is None else ChatNormalizer(profile)
    reference._learns = chat._LEARNS
    return reference


def agree(messages: list[tuple[str, str]], profile: Any = None) -> ChatNormalizer:
    """Both normalizers read ``messages`` until the first fault; returns the learning one."""
    learning = ChatNormalizer() if profile is None else ChatNormalizer(profile)
    reference = never_learns(profile)
    for event, data in messages:
        got = read(learning, event, data)
        assert got == read(reference, event, data)
        if isinstance(got, tuple):
            break
    return learning


def messages_of(body: bytes) -> list[tuple[str, str]]:
    decoder = SSEDecoder(max_event_bytes=1 << 24)
    try:
        fields = decoder.feed_fields(body)
    except Exception:  # a broken stream: what was decoded before it still counts
        return []
    return [(event, data) for event, data, _ in fields]


def test_templates_change_nothing_on_the_fixtures() -> None:
    learned = 0
    for path in sorted(CHAT.glob("*.sse")):
        learned += len(agree(messages_of(path.read_bytes()))._templates)
    for path in sorted((ROOT / "fixtures" / "profiles").glob("*.sse")):
        profile = profile_for("mistral/x", None) if "mistral" in path.name else None
        agree(messages_of(path.read_bytes()), profile)
    assert learned > 10  # the fixtures really used templates


@pytest.mark.parametrize("block", range(4))
def test_templates_change_nothing_on_generated_streams(block: int) -> None:
    learned = 0
    for seed in range(block * 40, (block + 1) * 40):
        for k in siblings(Knobs(seed, (), None, "\n", False), True, MESSAGE_MUTATIONS):
            learned += len(agree(messages_of(wire(k).body))._templates)
    assert learned > 40


def line(delta: dict[str, Any], **extra: Any) -> str:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}
    return json.dumps(
        {"id": "c-1", "object": "chat.completion.chunk", "choices": [choice], **extra}
    )


def opener(index: int = 0) -> str:
    call = {"index": index, "id": f"call_{index}", "type": "function"}
    return line({"tool_calls": [{**call, "function": {"name": "multiply", "arguments": ""}}]})


def text_line(raw: str) -> str:
    return line({"content": "@@"}).replace('"@@"', f'"{raw}"')


def fragment_line(raw: str, index: int = 0) -> str:
    return line({"tool_calls": [{"index": index, "function": {"arguments": "@@"}}]}).replace(
        '"@@"', f'"{raw}"'
    )


EDGES = [
    "plain",
    "",
    'a"b',
    '\\"',
    "\\\\",
    "ends with a backslash\\",
    "\\n\\t\\u0041",
    "\\ud800",
    "\\udc00\\ud800",
    "\\u00",
    "\\x41",
    "\x01",
    "tab\there",
    "\u2028 and é",
    '"},"extra":1,"x":"',
    '"}}],"choices":[{"index":1,"delta":{"content":"',
    '\\"content\\":\\"',
]


def sequences(maker: Any) -> list[list[tuple[str, str]]]:
    first = [("", line({"role": "assistant", "content": ""})), ("", opener()), ("", opener(1))]
    learn = [("", maker("learn me")), ("", maker("again"))]
    rng = random.Random(7)
    alphabet = ['"', "\\", "n", "u", "d", "8", "0", "A", "\x01", "é", "}", ",", ":", " ", "\\u"]
    randoms = ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 10))) for _ in range(400)]
    out = [first + learn + [("", maker(raw))] for raw in EDGES]
    out.append(first + learn + [("", maker(raw)) for raw in randoms])
    return out


@pytest.mark.parametrize("maker", [text_line, fragment_line], ids=["text", "arguments"])
def test_templates_change_nothing_at_their_edges(maker: Any) -> None:
    for messages in sequences(maker):
        learning = agree(messages)
        assert learning._templates  # the fast reading was really tried


def test_lines_that_only_look_alike_are_read_in_full() -> None:
    learn = [("", line({"role": "assistant", "content": ""})), ("", text_line("hello"))]
    others = [
        line({"content": "x"}, usage=None),  # another field
        line({"content": "x", "role": "assistant"}),
        line({"content": "x"}).replace('"content": "x"', '"content" : "x"'),
        line({"content": "x"}).replace("}]}", '}], "choices": []}'),  # a duplicate key
        line({"content": "x"}).replace('"index": 0', '"index": 1'),
        text_line("x") + " ",
        " " + text_line("x"),
        text_line("x").replace('"c-1"', '"c-2"'),
    ]
    for other in others:
        agree([*learn, ("", other)])
        agree([*learn, ("message", other)])
        agree([*learn, ("", other + "\n" + other)])


def test_a_misleading_key_is_never_taken_for_the_text() -> None:
    """The only raw ``"content":"`` is inside another key; the real key is escaped. The cut
    found first looks right (its string equals the text), and only the parses with the two
    sentinels show it is not: no template, and the next line is read in full."""

    def tricky(fake: str, real: str) -> str:
        return (
            '{"id": "c-1", "x\\"content":"' + fake + '", "choices": [{"index": 0, '
            '"delta": {"\\u0063ontent": "' + real + '"}, "finish_reason": null}]}'
        )

    first = ("", line({"role": "assistant", "content": ""}))
    assert json.loads(tricky("1", "1"))["choices"][0]["delta"] == {"content": "1"}
    learning = agree([first, ("", tricky("1", "1")), ("", tricky("2", "1"))])
    assert learning.fields("", tricky("3", "1")) == [TextDelta(0, "1")]


def test_a_template_of_another_index_or_an_unopened_one_is_not_used() -> None:
    opened = [("", line({"role": "assistant", "content": ""})), ("", opener(0))]
    learn = [("", fragment_line("abc", 0))]
    agree([*opened, *learn, ("", fragment_line("def", 1))])  # index 1 never opened: a fault
    learning = agree([*opened, *learn, ("", fragment_line("ghi", 0))])
    assert learning.fields("", fragment_line("jkl", 0)) == [ArgumentDelta(0, 0, "jkl")]


def test_a_learned_line_is_read_without_a_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    learning = agree([("", line({"role": "assistant", "content": ""})), ("", text_line("one"))])
    parsed: list[str] = []
    original = chat.load_object
    monkeypatch.setattr(chat, "load_object", lambda data: parsed.append(data) or original(data))
    assert learning.fields("", text_line("two")) == [TextDelta(0, "two")]
    assert learning.fields("", text_line('t\\"w\\u00e9')) == [TextDelta(0, 't"wé')]
    assert parsed == []
    with pytest.raises(WireFault):  # not one string: read in full, and refused
        learning.fields("", text_line('a"b'))
    assert len(parsed) == 1


def test_learning_is_bounded() -> None:
    learning = ChatNormalizer()
    learning.fields("", line({"role": "assistant", "content": ""}))
    for i in range(40):
        learning.fields("", line({"content": "x"}, n=i))  # every line differs elsewhere
    assert learning._learns == chat._LEARNS
    assert len(learning._templates) <= chat._TEMPLATES


def test_a_long_line_is_not_kept() -> None:
    learning = ChatNormalizer()
    learning.fields("", line({"role": "assistant", "content": ""}))
    for _ in range(3):
        learning.fields("", line({"content": "x"}, pad="p" * chat._TEMPLATE_CHARS))
    assert learning._templates == []


def test_templates_hold_no_argument_text() -> None:
    learning = agree(
        [("", opener()), ("", fragment_line("SECRET-1")), ("", fragment_line("SECRET-2"))]
    )
    assert learning._templates
    for template in learning._templates:
        assert "SECRET" not in template.prefix + template.suffix


def test_the_fixture_folder_is_where_the_tests_look() -> None:
    assert Path(CHAT).is_dir()


def test_the_two_per_event_events_are_still_frozen_values() -> None:
    """TextDelta and ArgumentDelta store their fields through their slots (a faster
    __init__): still frozen, equal and hashed by value, the fragment out of the repr."""
    fragment = ArgumentDelta(0, 2, "SECRET-3")
    assert fragment == ArgumentDelta(choice=0, index=2, fragment="SECRET-3")
    assert hash(fragment) == hash(ArgumentDelta(0, 2, "SECRET-3"))
    assert fragment != ArgumentDelta(0, 1, "SECRET-3")
    assert "SECRET" not in repr(fragment)
    assert dataclasses.replace(fragment, index=5) == ArgumentDelta(0, 5, "SECRET-3")
    text = TextDelta(0, "hello")
    assert (text.choice, text.text) == (0, "hello") and text == TextDelta(choice=0, text="hello")
    for event, name in ((fragment, "index"), (text, "text")):
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, name, 1)
        assert not hasattr(event, "__dict__")
    with pytest.raises(TypeError):
        TextDelta(0)  # type: ignore[call-arg]


# ---- the attempt's loop: a template's line applied without its event -----------------------
_REGISTRY = ToolRegistry.from_tools(TOOLS)


def _attempt_outcome(body: bytes, cuts: list[int], *, take: bool, learn: bool) -> Any:
    """What an attempt made of ``body`` fed in the pieces ``cuts`` make: its records (less
    the time it was made) and its calls' texts, or its fault."""
    attempt = Attempt(_REGISTRY, attempt_id="att-1", run_id="run-1", clock=lambda: 0.0)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    normalizer = attempt._normalizer
    assert isinstance(normalizer, ChatNormalizer)
    if not learn:
        normalizer._learns = chat._LEARNS
    events: list[WireEvent] = []
    texts: list[str] | None = None
    try:
        for start, stop in zip([0, *cuts], [*cuts, len(body)], strict=True):
            if take:
                attempt.take_bytes(body[start:stop])
            else:
                events += attempt.receive_bytes(body[start:stop])
        attempt.receive_eof()
        texts = [call.arguments for call in attempt.conclude()]
    except ToolCallQuarantined:
        pass
    records = [r.model_dump(exclude={"observed_at"}) for r in attempt.records()]
    return records, texts, attempt.quarantined and attempt.quarantined.reason, events


@pytest.mark.parametrize("block", range(2))
def test_the_attempt_applies_a_template_line_as_its_event(block: int) -> None:
    """Fed through take_bytes (no events built) or receive_bytes, learning or not, the
    attempt ends in the same records, calls and fault; receive_bytes returns the same
    events whether the lines were templates or not."""
    rng = random.Random(block)
    bodies = [path.read_bytes() for path in sorted(CHAT.glob("*.sse"))] if block == 0 else []
    for seed in range(block * 25, (block + 1) * 25):
        bodies += [
            wire(k).body
            for k in siblings(Knobs(seed, (), None, "\n", False), True, MESSAGE_MUTATIONS)
        ]
    for body in bodies:
        cuts = sorted(rng.sample(range(1, len(body)), min(3, len(body) - 1))) if body else []
        reference = _attempt_outcome(body, cuts, take=False, learn=False)
        assert _attempt_outcome(body, cuts, take=False, learn=True) == reference
        records, texts, reason, _ = _attempt_outcome(body, cuts, take=True, learn=True)
        assert (records, texts, reason) == reference[:3]
