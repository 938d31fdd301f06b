"""``ToolGateGuardrail`` in ``litellm.callbacks`` on Bedrock's Converse wire, real litellm on
loopback.

``litellm.acompletion`` with ``model="bedrock/converse/..."`` (fake AWS credentials: litellm
signs with botocore; ``api_base`` on loopback), streamed and whole, for every recording of
``fixtures/bedrock``; a sync ``litellm.completion`` is refused before sending (litellm's sync
Converse handler sends on a client the gate cannot claim, docs/bedrock.md). The callback
withholds the AWS event-stream frames themselves and hands litellm (its
``AWSEventStreamDecoder``, which reads them with botocore) the frames it releases, each
written again with both checksums. Since litellm re-shapes the calls (it numbers them 0, 1,
... in start order), its own decoder is run over the held frames first and its calls are
cross-checked with the wire before anything goes out. The outcome is ``ToolGate``'s for the
same body (tests/test_gate_bedrock.py): the manifest's, but for a tool block with no input
delta at all, where litellm hands over empty arguments, refused ``carrier_mismatch`` by both.
A released call is the wire's call (id, name, text) as a caller assembles litellm's chunks; a
refusal hands out no tool call and no argument text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from loopback import ask_multiply, tool_calls
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.core.eventstream import EventStreamDecoder
from litellm_toolgate.core.state import Wire
from litellm_toolgate.core.wires import WIRES
from litellm_toolgate.demo.upstream import FakeUpstream, Scripted
from litellm_toolgate.edge.preflight import UNPARSED, litellm_parse

litellm.suppress_debug_info = True
R = QuarantineReason
BEDROCK = Fixtures("bedrock")
FIXTURES, MANIFEST, CASES = BEDROCK.folder, BEDROCK.manifest, BEDROCK.cases
MEDIA = "application/vnd.amazon.eventstream"
MODEL = "bedrock/converse/" + MANIFEST["model"]
AWS = {
    "aws_access_key_id": "AKIDEXAMPLE",
    "aws_secret_access_key": "not-a-secret",
    "aws_region_name": "us-east-1",
}


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
    """As through ToolGate: a tool block with no input delta at all reaches the caller with
    empty arguments from litellm (the manifest's ``via_litellm``)."""
    return BEDROCK.through_litellm(name)


def _call(
    upstream: FakeUpstream, *, asynchronous: bool, stream: bool, model: str = MODEL
) -> tuple[list[Any], Any]:
    """What ``litellm.completion`` / ``acompletion`` handed out, and the error, if any."""
    args = ask_multiply(upstream, model, MANIFEST["tools"], stream=stream, **AWS)
    out: list[Any] = []

    async def go() -> None:
        result = await litellm.acompletion(**args)
        if stream:
            async for chunk in result:
                out.append(chunk)
        else:
            out.append(result)

    try:
        if asynchronous:
            asyncio.run(go())
        elif stream:
            for chunk in litellm.completion(**args):
                out.append(chunk)
        else:
            out.append(litellm.completion(**args))
    except Exception as exc:
        return out, exc
    return out, None


def _refused(error: BaseException | None, case: dict[str, Any]) -> None:
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    no_leak(fault)
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("name", BEDROCK.streamed)
def test_every_streamed_fixture(upstream: FakeUpstream, name: str) -> None:
    case = expected(name)
    upstream.enqueue(Scripted(BEDROCK.body(name), content_type=MEDIA, chunk_sizes=[1, 7, 13, 64]))
    chunks, error = _call(upstream, asynchronous=True, stream=True)
    assert upstream.requests[-1]["toolConfig"]  # sent: the callback refused nothing unsent
    released = tool_calls(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls: dict[int, dict[str, Any]] = {}
        for tc in released:
            call = calls.setdefault(tc.index, {"call_id": None, "name": None, "arguments": ""})
            call["call_id"] = call["call_id"] or tc.id
            call["name"] = call["name"] or tc.function.name
            call["arguments"] += tc.function.arguments or ""
        assert [calls[i] for i in sorted(calls)] == case["calls"]
        assert sorted(calls) == list(range(len(case["calls"])))
        text = "".join(
            (getattr(c.choices[0].delta, "reasoning_content", None) or "")
            + (c.choices[0].delta.content or "")
            for c in chunks
            if c.choices
        )
        assert text == case["text"]
        if calls:
            finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
            assert [f for f in finishes if f][-1] == "tool_calls"
    else:
        assert error is not None, f"{name}: released {released}"
        _refused(error, case)
        assert released == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("name", BEDROCK.whole)
def test_every_whole_body(upstream: FakeUpstream, name: str) -> None:
    case = expected(name)
    upstream.enqueue(Scripted(BEDROCK.body(name), content_type="application/json"))
    out, error = _call(upstream, asynchronous=True, stream=False)
    assert "toolConfig" in upstream.requests[-1]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        got = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls]
        assert got == [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case["calls"]]
    else:
        _refused(error, case)
        assert out == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_sync_call_is_refused_unsent(upstream: FakeUpstream, stream: bool) -> None:
    """litellm's sync Converse handler sends on a client the gate cannot claim
    (calltypes._SYNC_UNCLAIMED): under the callback a sync call is refused before sending."""
    before = len(upstream.requests)
    out, error = _call(upstream, asynchronous=False, stream=stream)
    assert isinstance(error, UngatedCallRefused), repr(error)
    assert "it was not sent" in str(error) and "litellm.acompletion" in str(error)
    assert out == [] and len(upstream.requests) == before


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_other_bedrock_apis_stay_refused_unsent(upstream: FakeUpstream, asynchronous: bool) -> None:
    before = len(upstream.requests)
    invoke = "bedrock/invoke/" + MANIFEST["model"]
    _, error = _call(upstream, asynchronous=asynchronous, stream=True, model=invoke)
    # The sync hook's refusal is UngatedCallRefused, the async hook's RouteNotGated.
    assert isinstance(error, UngatedCallRefused if not asynchronous else RouteNotGated)
    assert "another API than Converse" in str(error)
    assert len(upstream.requests) == before


# ---- the parse the callback runs over a held body, on its own ----------------------------------
def _values(name: str) -> list[Any]:
    """The payloads of a recording's frames, decoded: what the withholder keeps of each."""
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    return [json.loads(m.data) for m in decoder.feed(BEDROCK.body(name))]


def test_litellm_parse_numbers_the_calls_as_litellm_does() -> None:
    """litellm's own decoder: calls keyed 0, 1, ... in start order (the wire's blocks are
    keyed by contentBlockIndex), with the wire's toolUseId, name and fragments."""
    carrier = litellm_parse(MODEL)(_values("two_calls"), True)
    assert not carrier.foreign and carrier.finish_reason == "tool_calls"
    assert sorted(carrier.calls) == [0, 1]
    want = CASES["two_calls"]["calls"]
    got = [carrier.calls[i] for i in sorted(carrier.calls)]
    assert [(c.call_id, c.name, c.arguments) for c in got] == [
        (w["call_id"], w["name"], w["arguments"]) for w in want
    ]


def test_litellm_parse_of_a_whole_body() -> None:
    carrier = litellm_parse(MODEL)([json.loads(BEDROCK.body("whole_two_calls"))], False)
    assert carrier.finish_reason == "tool_calls" and not carrier.foreign
    assert [c.name for c in carrier.calls.values()] == [
        c["name"] for c in CASES["whole_two_calls"]["calls"]
    ]


def test_litellm_parse_fails_closed() -> None:
    """A body litellm's decoder fails on: a carrier that matches no wire (refused
    ``carrier_mismatch``), never an error of litellm's quoting the body."""
    broken = [{"contentBlockIndex": 0, "start": {"toolUse": {"name": CANARY}}}]
    assert litellm_parse(MODEL)(broken, True) is UNPARSED
    assert litellm_parse(MODEL)([["not", "an", "object"]], False) is UNPARSED
    assert WIRES[Wire.BEDROCK].reparsed
