"""``ToolGateGuardrail`` in ``litellm.callbacks`` on Ollama's ``/api/chat`` wire, real litellm on
loopback.

``litellm.completion`` / ``litellm.acompletion`` with ``model="ollama_chat/..."``, streamed and
whole, sync and async, for every fixture of ``fixtures/ollama``. The callback withholds the wire
itself and lets litellm parse what it releases; since litellm may re-shape Ollama's calls
(1.110 numbers each line's calls from 0, so two calls of two lines reach the caller merged
under one tool index), litellm's own parser is run over the held body and its calls are
cross-checked with the wire before anything goes out. The outcome is the manifest's, except
that the two-lines case is refused ``carrier_mismatch`` where litellm merges (1.110) and
released where it numbers the calls apart (1.108.7): exactly what ``ToolGate`` does with the
same bodies (tests/test_gate_ollama.py). A released call is the wire's call as a caller
assembles litellm's chunks by tool index; a refusal hands out no tool call and no argument
text.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import litellm
import pytest
from conftest import CANARY
from loopback import ask_multiply, call
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.core.decision.carrier import Carrier
from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.wires import WIRES
from litellm_toolgate.edge.parsers import UNPARSED, litellm_parse
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
OLLAMA = Fixtures("ollama")
FIXTURES, MANIFEST, CASES = OLLAMA.folder, OLLAMA.manifest, OLLAMA.cases
NDJSON = "application/x-ndjson"
MODEL = "ollama_chat/qwen3:8b"
LITELLM_MERGES_CALLS = tuple(int(x) for x in version("litellm").split(".")[:2]) >= (1, 110)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        gate.close()


def expected(name: str) -> dict[str, Any]:
    """Where litellm hands calls over merged, carrier_mismatch (the manifest's
    ``via_litellm``)."""
    return OLLAMA.through_litellm(name)


def _call(upstream: FakeUpstream, *, asynchronous: bool, stream: bool) -> tuple[list[Any], Any]:
    """What ``litellm.completion`` / ``acompletion`` handed out, and the error, if any."""
    args = ask_multiply(upstream, MODEL, MANIFEST["tools"], stream=stream)
    return call(
        litellm.completion,
        litellm.acompletion,
        args,
        asynchronous=asynchronous,
        stream=stream,
        catch=Exception,
    )


def _assembled(chunks: list[Any]) -> list[tuple[str | None, str]]:
    """(name, arguments) per tool index, as a caller assembles litellm's chunks."""
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, ""])
                call[0] = call[0] or tc.function.name
                call[1] += tc.function.arguments or ""
    return [(c[0], c[1]) for _, c in sorted(calls.items())]


def _wanted(case: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["name"], json.loads(c["arguments"])) for c in case["calls"]]


def _refused(error: BaseException | None, case: dict[str, Any]) -> None:
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", OLLAMA.streamed)
def test_every_streamed_fixture(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = expected(name)
    upstream.enqueue(
        Scripted(OLLAMA.body(name), content_type=NDJSON, chunk_sizes=[1, 7, 13, 2, 64])
    )
    chunks, error = _call(upstream, asynchronous=asynchronous, stream=True)
    assert upstream.requests[-1]["stream"] is True
    calls = _assembled(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert [(n, json.loads(a)) for n, a in calls] == _wanted(case)
        text = "".join(
            (getattr(c.choices[0].delta, "reasoning_content", None) or "")
            + (c.choices[0].delta.content or "")
            for c in chunks
            if c.choices
        )
        assert text == case["text"]
    else:
        assert error is not None, f"{name}: released {calls}"
        _refused(error, case)
        assert calls == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", OLLAMA.whole)
def test_every_whole_body(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = expected(name)
    upstream.enqueue(Scripted(OLLAMA.body(name), content_type="application/json"))
    out, error = _call(upstream, asynchronous=asynchronous, stream=False)
    assert upstream.requests[-1].get("stream") is False
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == _wanted(case)
    else:
        _refused(error, case)
        assert out == []


# ---- the parse the callback runs over a held body, on its own ----------------------------------
def _values(name: str) -> list[Any]:
    return [json.loads(line) for line in OLLAMA.body(name).splitlines() if line.strip()]


def test_litellm_parse_shows_the_merge_litellm_makes() -> None:
    """The parse is litellm's own: two calls of two lines come out as litellm numbers them."""
    carrier = litellm_parse(MODEL)(_values("two_calls_two_lines_without_ids"), True)
    assert not carrier.foreign and carrier.finish_reason == "tool_calls"
    if LITELLM_MERGES_CALLS:
        assert list(carrier.calls) == [0]  # one broken call: both lines' arguments joined
    else:
        assert list(carrier.calls) == [0, 1]
        assert [json.loads(c.arguments) for c in carrier.calls.values()] == [
            {"a": 7, "b": 8},
            {"a": 2, "b": 3},
        ]


def test_litellm_parse_of_a_whole_body() -> None:
    body = json.loads(OLLAMA.body("whole_multiply"))
    carrier = litellm_parse(MODEL)([body], False)
    assert carrier.finish_reason == "tool_calls" and not carrier.foreign
    assert [c.name for c in carrier.calls.values()] == ["multiply"]


def test_litellm_parse_fails_closed() -> None:
    """No parser for the route, or a body litellm's parser fails on: a carrier that matches
    no wire (refused ``carrier_mismatch``), never an error of litellm's quoting the body."""
    assert litellm_parse("no-such-provider/x")(_values("multiply_basic"), True) is UNPARSED
    assert litellm_parse(MODEL)([{"message": {"content": CANARY}}], True) is UNPARSED
    assert litellm_parse(MODEL)([["not", "an", "object"]], False) is UNPARSED
    assert WIRES[Wire.OLLAMA].reparsed and UNPARSED.foreign
    assert isinstance(UNPARSED, Carrier)
