"""``gate.completion`` / ``gate.acompletion`` with ``model="bedrock/converse/..."`` through the
real litellm over loopback HTTP.

litellm signs the request with botocore (fake credentials), calls ``POST
{api_base}/model/<id>/converse-stream`` (``/converse`` with ``stream=False``) and reads the
AWS event-stream body (``fixtures/bedrock``) with botocore's decoder into chat chunks. The
wire is the truth; litellm's chunks are the carrier, cross-checked by order, ``toolUseId``,
name and argument text. Each streamed fixture is served whole and in odd-sized chunks, read
sync and async; each whole body with ``stream=False``. The gate must give the manifest's
outcome: the exact calls released, or ``ToolCallQuarantined`` with the manifest's reason,
no tool call handed out and the canary nowhere in the error. Then plain litellm, with no
gate, on the same broken recordings: the figures docs/bedrock.md gives.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import litellm
import pytest
from conftest import CANARY, litellm_version, no_leak
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from loopback import ask_multiply, call, plain_outcome, tool_calls
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, RouteNotGated, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
BEDROCK = Fixtures("bedrock")
FIXTURES, MANIFEST, CASES = BEDROCK.folder, BEDROCK.manifest, BEDROCK.cases
STREAMED, WHOLE = BEDROCK.streamed, BEDROCK.whole
MEDIA = "application/vnd.amazon.eventstream"
MODEL = "bedrock/converse/" + MANIFEST["model"]
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}
AWS = {
    "aws_access_key_id": "AKIDEXAMPLE",
    "aws_secret_access_key": "not-a-secret",
    "aws_region_name": "us-east-1",
}
MODES = [(False, "whole"), (True, "split")]
BOTH = {"multiply_basic", "two_calls", "exception_frame", "bad_message_crc", "cut_mid_frame"}
ALL_MODES = [*MODES, (True, "whole"), (False, "split")]


def _modes(position: int, name: str) -> list[tuple[bool, str]]:
    """Every mode for a few fixtures, two for each good one, and one for each broken one,
    taking turns (each litellm call costs most of a second: the suite stays in seconds)."""
    if name in BOTH:
        return ALL_MODES
    if CASES[name]["expect"] == "release":
        return MODES
    return [ALL_MODES[position % 4]]


PARAMS = [
    pytest.param(name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for position, name in enumerate(STREAMED)
    for a, s in _modes(position, name)
]


def ask(upstream: FakeUpstream, *, stream: bool = True, model: str = MODEL) -> dict[str, Any]:
    return ask_multiply(upstream, model, MANIFEST["tools"], stream=stream, **AWS)


def run(
    gate: ToolGate, upstream: FakeUpstream, asynchronous: bool, *, stream: bool = True
) -> tuple[list[Any], Any]:
    """The chunks (or the whole response) and the quarantine, if any."""
    args = ask(upstream, stream=stream)
    return call(gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=stream)


@pytest.mark.parametrize(("name", "asynchronous", "split"), PARAMS)
def test_every_streamed_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool, split: str
) -> None:
    case = BEDROCK.through_litellm(name)  # a tool block without input: carrier_mismatch
    body = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(body, content_type=MEDIA, chunk_sizes=SPLITS[split]))
    gate = ToolGate(MANIFEST["tools"])
    try:
        chunks, error = run(gate, upstream, asynchronous)
    finally:
        gate.close()
    assert "toolConfig" in upstream.requests[-1]
    released = tool_calls(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        got = [
            {"call_id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
            for tc in released
        ]
        assert got == case["calls"]
        assert [tc.index for tc in released] == list(range(len(case["calls"])))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        reasoning = "".join(
            getattr(c.choices[0].delta, "reasoning_content", None) or ""
            for c in chunks
            if c.choices
        )
        assert reasoning + text == case["text"]
        if released:
            assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        assert released == []
        no_leak(error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_body(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = CASES[name]
    body = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(body, content_type="application/json"))
    gate = ToolGate(MANIFEST["tools"])
    try:
        out, error = run(gate, upstream, asynchronous, stream=False)
    finally:
        gate.close()
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        got = [(tc.id, tc.function.name, json.loads(tc.function.arguments)) for tc in calls]
        assert got == [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case["calls"]]
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        no_leak(error)


@pytest.mark.parametrize(
    "model",
    [
        "bedrock/invoke/" + MANIFEST["model"],
        "bedrock/chat_completions/" + MANIFEST["model"],
        "bedrock/ai21.jamba-1-5-large-v1:0",
    ],
)
def test_other_bedrock_apis_are_refused_unsent(upstream: FakeUpstream, model: str) -> None:
    gate = ToolGate(MANIFEST["tools"])
    try:
        with pytest.raises(RouteNotGated):
            gate.completion(**ask(upstream, model=model))
        with pytest.raises(RouteNotGated):
            asyncio.run(gate.acompletion(**ask(upstream, model=model)))
    finally:
        gate.close()
    assert upstream.requests == []


def test_a_model_without_the_converse_prefix_is_gated_too(upstream: FakeUpstream) -> None:
    upstream.enqueue(
        Scripted((FIXTURES / "two_calls.eventstream").read_bytes(), content_type=MEDIA)
    )
    gate = ToolGate(MANIFEST["tools"])
    try:
        args = ask(upstream, model="bedrock/" + MANIFEST["model"])
        chunks, error = call(gate.completion, gate.acompletion, args, asynchronous=False)
    finally:
        gate.close()
    assert error is None
    assert [tc.id for tc in tool_calls(chunks)] == [
        c["call_id"] for c in CASES["two_calls"]["calls"]
    ]


# ---- plain litellm on the same broken recordings ---------------------------------------------
BROKEN = [n for n in STREAMED if CASES[n]["expect"] == "quarantine"]
# What plain litellm.completion(stream=True) hands its caller for the broken recordings
# (docs/bedrock.md): how many end with calls whose arguments parse as a JSON object.
PLAIN_FINISHED = {"1.110.2": 24, "1.108.7": 25}


def _plain(upstream: FakeUpstream, name: str) -> str:
    upstream.enqueue(Scripted((FIXTURES / CASES[name]["body"]).read_bytes(), content_type=MEDIA))
    # A client of its own per call (litellm's HTTPHandler, no gate): litellm's shared client
    # may hold a kept-alive connection to an earlier test's server on a reused port.
    client = HTTPHandler(timeout=30)
    try:
        return plain_outcome({**ask(upstream), "client": client})
    finally:
        client.close()


def test_what_plain_litellm_hands_over(upstream: FakeUpstream) -> None:
    outcomes = {name: _plain(upstream, name) for name in BROKEN}
    finished = sorted(n for n, o in outcomes.items() if o in ("tool_calls", "other_finish"))
    print(f"\nplain litellm {litellm_version()}: {len(finished)} of {len(BROKEN)}: {outcomes}")
    assert len(finished) == PLAIN_FINISHED[litellm_version()], finished


# ---- the canary: no refusal leaks argument text ----------------------------------------------
CANARY_CASES = [
    n
    for n in STREAMED
    if CASES[n]["expect"] == "quarantine"
    and CANARY.encode() in (FIXTURES / CASES[n]["body"]).read_bytes()
]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_refusals_with_the_canary_on_the_wire_leak_nothing(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """Every broken recording that carries the canary on the wire (in a call's arguments),
    every logger captured at DEBUG: the quarantine, its chain, its records and every log
    record but botocore's are free of it."""
    assert len(CANARY_CASES) >= 8
    for name in CANARY_CASES:
        body = (FIXTURES / CASES[name]["body"]).read_bytes()
        upstream.enqueue(Scripted(body, content_type=MEDIA, chunk_sizes=[5, 11]))
        gate = ToolGate(MANIFEST["tools"])
        try:
            with every_logger() as logs:
                chunks, error = run(gate, upstream, asynchronous)
        finally:
            gate.close()
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert tool_calls(chunks) == []
        assert_clean_exception(error)
        # botocore.parsers, which litellm's Bedrock decoder calls, logs each event's payload
        # at DEBUG: litellm's own reading of the wire, like litellm's loggers (left out by
        # every_logger), not the gate's.
        assert_clean_logs([r for r in logs if not r.name.startswith("botocore")])
        assert [r for r in logs if r.name == "litellm_toolgate"], "the gate logs its decision"
        no_leak(error)
