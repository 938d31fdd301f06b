"""The core's reading of a chat response of several choices (``n > 1``), without litellm:
one accumulator per (choice, tool index), identities pinned per choice, each choice's own
terminal checked against its own calls, nothing released unless every choice passed.

Every body is fed whole, one byte at a time and at random cuts.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from litellm_toolgate.core import Attempt, PolicyDecision, ToolRegistry
from litellm_toolgate.core.decision.events import ChoiceFinish, Finish, TextDelta, slot
from litellm_toolgate.core.errors import QuarantineReason, ToolCallQuarantined
from litellm_toolgate.core.wires.chat import ChatNormalizer, ChoicesNormalizer, passes_live

R = QuarantineReason
MULTIPLY = {
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
}
REGISTRY = ToolRegistry.from_tools([MULTIPLY])
DONE = b"data: [DONE]\n\n"


def chunk(choice: Any, delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {"id": "chatcmpl-c", "object": "chat.completion.chunk", "created": 1}
    payload["choices"] = [{"index": choice, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def call(index: int, call_id: str | None, arguments: str) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id is not None:
        fragment.update(id=call_id, type="function")
        fragment["function"]["name"] = "multiply"
    return {"tool_calls": [fragment]}


def cuts(body: bytes, how: str, seed: int = 0) -> list[bytes]:
    if how == "whole":
        return [body]
    if how == "bytes":
        return [body[i : i + 1] for i in range(len(body))]
    rng = random.Random(seed)
    points = sorted(rng.sample(range(1, len(body)), min(12, len(body) - 1)))
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True)]


Outcome = list[tuple[int, int, str, str]] | QuarantineReason


def run(body: bytes, n: int, how: str = "whole", deny: str | None = None) -> Outcome:
    attempt = Attempt(REGISTRY)
    try:
        attempt.bind_request("/chat/completions", {"n": n})
        attempt.bind_response(content_type="text/event-stream", streamed=True)
        for piece in cuts(body, how):
            attempt.receive_bytes(piece)
        attempt.receive_eof()
        for c in attempt.conclude():
            denied = c.call_id == deny
            answer = PolicyDecision.deny("no") if denied else PolicyDecision.approve()
            attempt.decide(c.index, answer, choice=c.choice)
        return [(r.choice, r.index, r.call_id, r.arguments) for r in attempt.release()]
    except ToolCallQuarantined as fault:
        with pytest.raises(ToolCallQuarantined):
            attempt.release()  # nothing of any choice is released after the quarantine
        return fault.reason


TWO = (
    chunk(0, call(0, "a", '{"a": 1, '))
    + chunk(1, call(0, "b", '{"a": 3, '))
    + chunk(1, call(1, "c", '{"a": 5, "b": 6}'))
    + chunk(0, call(0, None, '"b": 2}'))
    + chunk(1, call(0, None, '"b": 4}'))
    + chunk(1, {}, "tool_calls")
    + chunk(0, {}, "tool_calls")
    + DONE
)
RELEASED = [
    (0, 0, "a", '{"a": 1, "b": 2}'),
    (1, 0, "b", '{"a": 3, "b": 4}'),
    (1, 1, "c", '{"a": 5, "b": 6}'),
]
TEXT3 = (
    b"".join(chunk(c, {"role": "assistant", "content": ""}) for c in range(3))
    + b"".join(chunk(c, {"content": f"t{c}"}) for c in (2, 0, 1))
    + chunk(1, {}, "stop")
    + chunk(2, {"content": "more"})
    + chunk(2, {}, "length")
    + chunk(0, {}, "stop")
    + DONE
)

CASES: list[tuple[str, bytes, int, Outcome]] = [
    ("three choices of text", TEXT3, 3, []),
    ("calls in two choices, same tool index", TWO, 2, RELEASED),
    (
        "one choice's call fails its schema",
        TWO.replace(b'"b\\": 4}', b'"c\\": 4}'),
        2,
        R.SCHEMA_INVALID,
    ),
    ("one choice's call is no JSON", TWO.replace(b'"b\\": 4}', b'"b\\": }'), 2, R.INVALID_JSON),
    ("one choice misses its finish", TWO.replace(chunk(1, {}, "tool_calls"), b""), 2, None),
    (
        "one choice's finish contradicts its calls",
        TWO.replace(chunk(1, {}, "tool_calls"), chunk(1, {}, "stop")),
        2,
        R.FINISH_REASON_MISMATCH,
    ),
    (
        "text of a choice after its own finish",
        chunk(0, {}, "stop") + chunk(0, {"content": "late"}) + chunk(1, {}, "stop") + DONE,
        2,
        R.EVENT_AFTER_TERMINAL,
    ),
    (
        "a call of a choice after its own finish",
        chunk(0, {}, "stop") + chunk(0, call(0, "a", "{}")) + chunk(1, {}, "stop") + DONE,
        2,
        R.EVENT_AFTER_TERMINAL,
    ),
    (
        "a second finish of one choice",
        chunk(0, {}, "stop") + chunk(0, {}, "stop") + chunk(1, {}, "stop") + DONE,
        2,
        R.EVENT_AFTER_TERMINAL,
    ),
    (
        "an empty chunk of a finished choice",
        chunk(0, {}, "stop") + chunk(0, {}) + chunk(1, {}, "stop") + DONE,
        2,
        [],
    ),
    ("a choice index past n", chunk(0, {}, "stop") + chunk(2, {}, "stop") + DONE, 2, None),
    ("a choice index that is no integer", chunk(True, {}, "stop") + DONE, 2, None),
    (
        "one call id in two choices",
        chunk(0, call(0, "a", '{"a": 1, "b": 2}'))
        + chunk(1, call(0, "a", '{"a": 1, "b": 2}'))
        + chunk(0, {}, "tool_calls")
        + chunk(1, {}, "tool_calls")
        + DONE,
        2,
        R.IDENTITY_CONFLICT,
    ),
    (
        "text after the last finish",
        chunk(0, {}, "stop") + chunk(1, {}, "stop") + chunk(1, {"content": "x"}) + DONE,
        2,
        R.EVENT_AFTER_TERMINAL,
    ),
]
WHERE = {
    "one choice misses its finish": R.MISSING_FINISH,
    "a choice index past n": R.UNEXPECTED_CHOICE,
    "a choice index that is no integer": R.UNEXPECTED_CHOICE,
}


@pytest.mark.parametrize("how", ["whole", "bytes", "random"])
@pytest.mark.parametrize(("name", "body", "n", "outcome"), CASES, ids=[c[0] for c in CASES])
def test_choices_table(name: str, body: bytes, n: int, outcome: Outcome, how: str) -> None:
    expected = WHERE.get(name, outcome)
    assert run(body, n, how) == expected


def test_a_denied_call_of_one_choice_releases_no_call_of_any() -> None:
    assert run(TWO, 2, deny="c") is R.POLICY_DENIED
    assert run(TWO, 2, deny="a") is R.POLICY_DENIED


def test_the_same_stream_for_one_choice_is_unexpected_choice() -> None:
    assert run(TWO, 1) is R.UNEXPECTED_CHOICE


def test_each_choice_finish_is_its_own_event_until_the_last() -> None:
    normalizer = ChoicesNormalizer(choices=3)
    events = []
    for line in TEXT3.decode().split("\n\n"):
        if line.startswith("data: {"):
            events += normalizer.fields("", line[6:])
    finishes = [e for e in events if isinstance(e, (Finish, ChoiceFinish))]
    assert finishes == [ChoiceFinish(1, "stop"), ChoiceFinish(2, "length"), Finish(0, "stop")]
    texts = [(e.choice, e.text) for e in events if isinstance(e, TextDelta)]
    assert texts == [(2, "t2"), (0, "t0"), (1, "t1"), (2, "more")]


def test_a_whole_body_of_several_choices() -> None:
    def message(calls: list[tuple[str, str]]) -> dict[str, Any]:
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": "multiply", "arguments": a}}
            for i, a in calls
        ]
        return {"role": "assistant", "content": None, "tool_calls": tool_calls}

    def body(second: str | None) -> bytes:
        choices = [
            {
                "index": 0,
                "message": message([("a", '{"a": 1, "b": 2}')]),
                "finish_reason": "tool_calls",
            },
            {
                "index": 1,
                "message": {"role": "assistant", "content": "no"},
                "finish_reason": "stop",
            },
        ]
        if second is not None:
            choices.append(
                {"index": 2, "message": message([("b", second)]), "finish_reason": "tool_calls"}
            )
        return json.dumps({"id": "x", "object": "chat.completion", "choices": choices}).encode()

    def whole(data: bytes) -> Outcome:
        attempt = Attempt(REGISTRY)
        try:
            attempt.bind_request("/chat/completions", {"n": 3})
            attempt.bind_response(content_type="application/json", streamed=False)
            attempt.receive_body(data)
            for c in attempt.conclude():
                attempt.decide(c.index, PolicyDecision.approve(), choice=c.choice)
            return [(r.choice, r.index, r.call_id, r.arguments) for r in attempt.release()]
        except ToolCallQuarantined as fault:
            return fault.reason

    assert whole(body('{"a": 3, "b": 4}')) == [
        (0, 0, "a", '{"a": 1, "b": 2}'),
        (2, 0, "b", '{"a": 3, "b": 4}'),
    ]
    assert whole(body('{"a": 3}')) is R.SCHEMA_INVALID
    assert whole(body(None)) is R.MISSING_FINISH  # choice 2 never came


def test_keys_of_choices_never_collide() -> None:
    for n in (1, 2, 3, 7):
        keys = {slot(c, i, n) for c in range(n) for i in range(50)}
        assert len(keys) == 50 * n
    assert [slot(0, i, 1) for i in range(5)] == list(range(5))


def test_one_choice_keeps_its_fast_path_and_several_do_not_learn_one() -> None:
    line = chunk(0, {"content": "hello"}).decode()[6:-2]
    one = ChatNormalizer()
    for _ in range(2):  # the first line also names the response: two events, not learned
        one.fields("", line)
    assert one.known(line) == (None, "hello")
    several = ChoicesNormalizer(choices=2)
    for _ in range(2):
        several.fields("", line)
    assert several.known(line) is None


def test_the_live_rule_holds_another_choices_text() -> None:
    # The wire-level live rule is choice 0's: the callback holds other choices' chunks.
    assert passes_live(json.loads(chunk(0, {"content": "x"})[6:]))
    assert not passes_live(json.loads(chunk(1, {"content": "x"})[6:]))


# ---- withheld on the wire (the callback) -------------------------------------------------------
def withheld(body: bytes, n: int) -> tuple[list[bytes], Any, Any]:
    from litellm_toolgate.core.decision.withhold import Withholder

    attempt = Attempt(REGISTRY)
    attempt.bind_request("/chat/completions", {"n": n})
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    held = Withholder(attempt, streamed=True, whole_here=True)
    live: list[bytes] = []
    for piece in cuts(body, "random", 3):
        if attempt.quarantined is None:
            try:
                attempt.receive_bytes(piece)
            except ToolCallQuarantined:
                break
            live += held.feed(piece)
    if attempt.quarantined is None:
        attempt.receive_eof()
    return live, held.conclude(), attempt


def test_every_choices_text_passes_live_until_something_is_held() -> None:
    live, calls, attempt = withheld(TEXT3, 3)
    shown = b"".join(live)
    assert all(f'"t{c}"'.encode() in shown for c in range(3))
    assert b'finish_reason": "stop' not in shown and calls == []
    assert attempt.quarantined is None


def test_the_first_finish_on_the_wire_must_be_choice_0s() -> None:
    """litellm shows one finish for the stream, the wire's first, under index 0: where that
    is another choice's, and another reason, the caller would be told a false one."""
    first_other = chunk(0, {"content": "x"}) + chunk(1, {}, "length") + chunk(0, {}, "stop") + DONE
    _, calls, attempt = withheld(first_other, 2)
    assert calls is None and attempt.quarantined.reason is R.CARRIER_MISMATCH
    same = chunk(0, {"content": "x"}) + chunk(1, {}, "stop") + chunk(0, {}, "stop") + DONE
    _, calls, attempt = withheld(same, 2)
    assert calls == [] and attempt.quarantined is None
    _, calls, attempt = withheld(TWO.replace(chunk(1, {}, "tool_calls"), b""), 2)
    assert calls is None and attempt.quarantined.reason is R.MISSING_FINISH
