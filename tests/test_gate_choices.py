"""Chat completions for several choices (``n > 1``), gated choice by choice, through the
real litellm over a loopback upstream: under ``ToolGate`` and under ``litellm.callbacks``,
sync and async, streamed and whole, on ``cometapi/`` (litellm's own HTTP handler) and
``openai/`` (the OpenAI SDK).

Each choice has its own calls (tool index 0 of choice 0 and of choice 1 are two calls), its
own terminal and its own check; every choice is decided before any call is released, and
one bad choice quarantines the whole attempt. Routes on another wire keep refusing
``n > 1`` before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

R = QuarantineReason
litellm.suppress_debug_info = True

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
ROUTES = ["cometapi/gpt-4o", "openai/gpt-4o"]
DONE = b"data: [DONE]\n\n"


def chunk(choice: int, delta: dict[str, Any], finish: str | None = None) -> bytes:
    payload = {
        "id": "chatcmpl-n",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": choice, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


def opened(index: int, call_id: str) -> dict[str, Any]:
    fragment = {"index": index, "id": call_id, "type": "function"}
    return {"tool_calls": [{**fragment, "function": {"name": "multiply", "arguments": ""}}]}


def args(index: int, text: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


def text_only(n: int = 3) -> bytes:
    """What OpenAI streams for ``n`` choices of text: a role chunk per choice, the choices'
    text interleaved, each choice's own finish, then ``[DONE]``."""
    body = b"".join(chunk(c, {"role": "assistant", "content": ""}) for c in range(n))
    for word in ("Seven", " times", " eight"):
        body += b"".join(chunk(c, {"content": f"{word}{c}"}) for c in range(n))
    return body + b"".join(chunk(c, {}, "stop") for c in range(n)) + DONE


def two_choices_with_calls(second_b: str = "4}") -> bytes:
    """Choice 0 opens call tool index 0; choice 1 opens tool indices 0 and 1: the same tool
    index in two choices is two calls. Fragments interleave across the choices."""
    return (
        chunk(0, {"role": "assistant", "content": None})
        + chunk(1, {"role": "assistant", "content": None})
        + chunk(0, opened(0, "call_a"))
        + chunk(1, opened(0, "call_b"))
        + chunk(0, args(0, '{"a": 1,'))
        + chunk(1, args(0, '{"a": 3, "b": '))
        + chunk(1, opened(1, "call_c"))
        + chunk(0, args(0, ' "b": 2}'))
        + chunk(1, args(0, second_b))
        + chunk(1, args(1, '{"a": 5, "b": 6}'))
        + chunk(0, {}, "tool_calls")
        + chunk(1, {}, "tool_calls")
        + DONE
    )


WANT_CALLS = [
    (0, 0, "call_a", '{"a": 1, "b": 2}'),
    (1, 0, "call_b", '{"a": 3, "b": 4}'),
    (1, 1, "call_c", '{"a": 5, "b": 6}'),
]


def whole(choices: list[dict[str, Any]]) -> bytes:
    body = {"id": "chatcmpl-n", "object": "chat.completion", "created": 1, "model": "gpt-4o"}
    return json.dumps({**body, "choices": choices}).encode()


def whole_choice(index: int, content: str | None, calls: list[tuple[str, str]]) -> Any:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": "multiply", "arguments": a}}
            for i, a in calls
        ]
    finish = "tool_calls" if calls else "stop"
    return {"index": index, "message": message, "finish_reason": finish}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True)
def _unregister() -> Iterator[None]:
    yield
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def kwargs(upstream: FakeUpstream, model: str, n: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": [MULTIPLY],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        "n": n,
        **extra,
    }


Outcome = tuple[list[Any], BaseException | None]


def stream(call: Any, acall: Any, mode: str, kw: dict[str, Any]) -> Outcome:
    chunks: list[Any] = []
    if mode == "sync":
        try:
            for item in call(stream=True, **kw):
                chunks.append(item)
        except Exception as exc:
            return chunks, exc
        return chunks, None

    async def go() -> Outcome:
        try:
            async for item in await acall(stream=True, **kw):
                chunks.append(item)
        except Exception as exc:
            return chunks, exc
        return chunks, None

    return asyncio.run(go())


def whole_result(call: Any, acall: Any, mode: str, kw: dict[str, Any]) -> tuple[Any, Any]:
    try:
        if mode == "sync":
            return call(stream=False, **kw), None
        return asyncio.run(acall(stream=False, **kw)), None
    except Exception as exc:
        return None, exc


def entry(how: str) -> tuple[Any, Any]:
    if how == "ToolGate":
        gate = ToolGate([MULTIPLY])
        return gate.completion, gate.acompletion
    litellm.callbacks = [ToolGateGuardrail([MULTIPLY])]
    return litellm.completion, litellm.acompletion


def calls_of(chunks: list[Any]) -> list[tuple[int, int, str, str]]:
    """Every tool call the caller was handed: (choice, tool index, id, arguments)."""
    found: dict[tuple[int, int], list[Any]] = {}
    for item in chunks:
        for choice in item.choices:
            for tc in choice.delta.tool_calls or []:
                key = (choice.index, tc.index)
                entry = found.setdefault(key, [None, ""])
                entry[0] = entry[0] or tc.id
                entry[1] += tc.function.arguments or ""
    return sorted((c, i, v[0], v[1]) for (c, i), v in found.items())


def text_of(chunks: list[Any]) -> dict[int, str]:
    out: dict[int, str] = {}
    for item in chunks:
        for choice in item.choices:
            out[choice.index] = out.get(choice.index, "") + (choice.delta.content or "")
    return out


def quarantine_of(error: BaseException | None) -> ToolCallQuarantined:
    found = find_quarantine(error)
    assert found is not None, f"not quarantined: {error!r}"
    return found


HOWS = ["ToolGate", "callback"]
MODES = ["sync", "async"]


# ---- streamed ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("model", ROUTES)
def test_three_choices_of_text_are_released(
    upstream: FakeUpstream, model: str, how: str, mode: str
) -> None:
    call, acall = entry(how)
    upstream.enqueue(Scripted(text_only(3)))
    chunks, error = stream(call, acall, mode, kwargs(upstream, model, 3))
    assert error is None, error
    assert text_of(chunks) == {c: f"Seven{c} times{c} eight{c}" for c in range(3)}
    assert calls_of(chunks) == []
    # litellm shows one finish reason for the stream (choice 0's here).
    assert [c.finish_reason for i in chunks for c in i.choices if c.finish_reason] == ["stop"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("model", ROUTES)
def test_calls_in_two_choices_are_released_apart(
    upstream: FakeUpstream, model: str, how: str, mode: str
) -> None:
    call, acall = entry(how)
    upstream.enqueue(Scripted(two_choices_with_calls()))
    chunks, error = stream(call, acall, mode, kwargs(upstream, model, 2))
    assert error is None, error
    assert calls_of(chunks) == WANT_CALLS
    if how == "ToolGate":
        # Every call goes out after the wire's end was read, one chunk per choice, right
        # before the held finish.
        positions = [p for p, i in enumerate(chunks) if any(c.delta.tool_calls for c in i.choices)]
        assert positions == [len(chunks) - 3, len(chunks) - 2]


def test_released_calls_name_their_choice(upstream: FakeUpstream) -> None:
    gate = ToolGate([MULTIPLY])
    upstream.enqueue(Scripted(two_choices_with_calls()))
    gated = gate.completion(stream=True, **kwargs(upstream, "cometapi/gpt-4o", 2))
    for _ in gated:
        pass
    released = [(c.choice, c.index, c.call_id, c.arguments) for c in gated.released]
    assert released == WANT_CALLS
    ids = [r.item_id.split(".", 1)[1] for r in gated.attempt.records()]
    assert ids == ["0.0", "1.0", "1.1"]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("model", ROUTES)
def test_one_bad_choice_quarantines_every_choice(
    upstream: FakeUpstream, model: str, how: str, mode: str
) -> None:
    call, acall = entry(how)
    # Choice 1's first call is not valid JSON; choice 0's call is fine and is not released.
    upstream.enqueue(Scripted(two_choices_with_calls(second_b=f'"{CANARY}"')))
    chunks, error = stream(call, acall, mode, kwargs(upstream, model, 2))
    found = quarantine_of(error)
    assert found.reason in (R.SCHEMA_INVALID, R.INVALID_JSON)
    assert calls_of(chunks) == []
    no_leak(found)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
def test_a_choice_without_its_finish_is_cut(upstream: FakeUpstream, how: str, mode: str) -> None:
    call, acall = entry(how)
    body = two_choices_with_calls().replace(chunk(1, {}, "tool_calls"), b"")
    upstream.enqueue(Scripted(body))
    chunks, error = stream(call, acall, mode, kwargs(upstream, "cometapi/gpt-4o", 2))
    assert quarantine_of(error).reason is R.MISSING_FINISH
    assert calls_of(chunks) == []


@pytest.mark.parametrize("how", HOWS)
def test_a_choice_past_n_is_unexpected(upstream: FakeUpstream, how: str) -> None:
    call, acall = entry(how)
    upstream.enqueue(Scripted(text_only(3)))
    chunks, error = stream(call, acall, "async", kwargs(upstream, "cometapi/gpt-4o", 2))
    assert quarantine_of(error).reason is R.UNEXPECTED_CHOICE
    assert calls_of(chunks) == []


@pytest.mark.parametrize("how", HOWS)
def test_a_choice_whose_finish_contradicts_its_calls_quarantines_all(
    upstream: FakeUpstream, how: str
) -> None:
    call, acall = entry(how)
    body = two_choices_with_calls().replace(chunk(1, {}, "tool_calls"), chunk(1, {}, "stop"))
    upstream.enqueue(Scripted(body))
    chunks, error = stream(call, acall, "sync", kwargs(upstream, "openai/gpt-4o", 2))
    assert quarantine_of(error).reason is R.FINISH_REASON_MISMATCH
    assert calls_of(chunks) == []


@pytest.mark.parametrize("how", HOWS)
def test_litellm_showing_another_choices_finish_as_choice_0s_is_a_mismatch(
    upstream: FakeUpstream, how: str
) -> None:
    """litellm hands on only the first finish of the wire, under index 0: when that is
    another choice's, and differs from choice 0's, its chunks contradict the wire."""
    call, acall = entry(how)
    body = (
        chunk(1, opened(0, "call_b"))
        + chunk(1, args(0, '{"a": 3, "b": 4}'))
        + chunk(0, {"content": "No call."})
        + chunk(1, {}, "tool_calls")
        + chunk(0, {}, "stop")
        + DONE
    )
    upstream.enqueue(Scripted(body))
    chunks, error = stream(call, acall, "sync", kwargs(upstream, "cometapi/gpt-4o", 2))
    assert quarantine_of(error).reason is R.CARRIER_MISMATCH
    assert calls_of(chunks) == []


def test_n_in_extra_body_is_gated_too(upstream: FakeUpstream) -> None:
    gate = ToolGate([MULTIPLY])
    upstream.enqueue(Scripted(two_choices_with_calls()))
    kw = kwargs(upstream, "openai/gpt-4o", 1)
    del kw["n"]
    kw["extra_body"] = {"n": 2}
    chunks, error = stream(gate.completion, gate.acompletion, "async", kw)
    assert error is None, error
    assert calls_of(chunks) == WANT_CALLS


# ---- whole -------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("model", ROUTES)
def test_whole_responses_of_several_choices(
    upstream: FakeUpstream, model: str, how: str, mode: str
) -> None:
    call, acall = entry(how)
    good = whole(
        [
            whole_choice(0, "Calling.", [("call_a", '{"a": 1, "b": 2}')]),
            whole_choice(1, None, [("call_b", '{"a": 3, "b": 4}'), ("call_c", '{"a": 5}')]),
            whole_choice(2, "Fifty-six.", []),
        ]
    )
    upstream.enqueue(Scripted(good, content_type="application/json"))
    result, error = whole_result(call, acall, mode, kwargs(upstream, model, 3))
    # Choice 1's second call misses "b": the whole answer is refused, every choice with it.
    found = quarantine_of(error)
    assert found.reason is R.SCHEMA_INVALID and result is None
    fixed = good.replace(b'{\\"a\\": 5}', b'{\\"a\\": 5, \\"b\\": 6}')
    upstream.enqueue(Scripted(fixed, content_type="application/json"))
    result, error = whole_result(call, acall, mode, kwargs(upstream, model, 3))
    assert error is None, error
    got = [
        (
            c.index,
            c.finish_reason,
            [(t.id, t.function.arguments) for t in c.message.tool_calls or []],
        )
        for c in result.choices
    ]
    assert got == [
        (0, "tool_calls", [("call_a", '{"a": 1, "b": 2}')]),
        (1, "tool_calls", [("call_b", '{"a": 3, "b": 4}'), ("call_c", '{"a": 5, "b": 6}')]),
        (2, "stop", []),
    ]


# ---- refused before sending ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("model", ["anthropic/claude-sonnet-4-5", "ollama_chat/llama3"])
def test_other_wires_keep_refusing_n_greater_than_one(
    upstream: FakeUpstream, model: str, how: str, mode: str
) -> None:
    call, acall = entry(how)
    before = len(upstream.requests)
    chunks, error = stream(call, acall, mode, kwargs(upstream, model, 2))
    assert quarantine_of(error).reason is R.UNSUPPORTED_REQUEST
    assert chunks == [] and len(upstream.requests) == before


@pytest.mark.parametrize("how", HOWS)
@pytest.mark.parametrize("n", [0, -1, True, 1.5, 129])
def test_an_n_that_is_no_count_is_refused_unsent(upstream: FakeUpstream, how: str, n: Any) -> None:
    call, acall = entry(how)
    before = len(upstream.requests)
    chunks, error = stream(call, acall, "async", kwargs(upstream, "cometapi/gpt-4o", n))
    assert quarantine_of(error).reason is R.UNSUPPORTED_REQUEST
    assert chunks == [] and len(upstream.requests) == before
