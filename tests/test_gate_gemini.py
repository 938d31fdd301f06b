"""``gate.completion`` / ``gate.acompletion`` with ``model="gemini/..."`` through the real
litellm over loopback HTTP.

litellm calls ``POST {api_base}/models/<model>:streamGenerateContent?alt=sse`` (or
``:generateContent`` for a whole answer) and translates Gemini's ``GenerateContentResponse``
messages (``fixtures/gemini``) into chat chunks. The wire is the truth; litellm's chunks are
the carrier, cross-checked by position, name and arguments (litellm gives every call an id of
its own). Each streamed fixture is served whole and in odd-sized chunks, read sync and async;
each whole body with ``stream=False``. The gate must give the manifest's outcome: the exact
calls released (in one chunk, after every text chunk, under the wire's identity), or
``ToolCallQuarantined`` with the manifest's reason and no tool call handed out.

The same wire on ``vertex_ai/gemini-...`` (litellm calls ``{api_base}/v1/projects/<project>/
locations/<location>/publishers/google/models/<model>:streamGenerateContent?alt=sse``, after
fetching a Google token from the loopback token endpoint of tests/vertexauth.py): every
streamed fixture once, sync or async, the few of ``BOTH`` both ways, every whole body.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger
from loopback import PLAIN_OUTCOMES, ask_multiply, call, plain_outcome, tool_calls
from vertexauth import GEMINI_MODEL, GEMINI_PATH, TOKENS, long_decode, vertex_args
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

litellm.suppress_debug_info = True
R = QuarantineReason
GEMINI = Fixtures("gemini")
FIXTURES, MANIFEST, CASES = GEMINI.folder, GEMINI.manifest, GEMINI.cases
STREAMED, WHOLE = GEMINI.streamed, GEMINI.whole
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}
MODES = [(False, "whole"), (True, "split")]
BOTH = {"multiply_basic", "two_calls_two_messages", "error_mid_stream", "lf_separators"}
PARAMS = [
    pytest.param("gemini", name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for name in STREAMED
    for a, s in ([*MODES, (True, "whole"), (False, "split")] if name in BOTH else MODES)
] + [
    # vertex_ai/: each fixture once (sync and async by turns), the few of BOTH both ways.
    pytest.param("vertex_ai", name, a, "split", id=f"vertex-{name}-{'async' if a else 'sync'}")
    for i, name in enumerate(STREAMED)
    for a in ([False, True] if name in BOTH else [bool(i % 2)])
]
ROUTES = ["gemini", "vertex_ai"]


def _args(route: str, **extra: Any) -> dict[str, Any]:
    """litellm's arguments for a Gemini model on ``route`` (beyond ``ask_multiply``'s)."""
    if route == "vertex_ai":
        return {"model": GEMINI_MODEL, **vertex_args(), **extra}
    return {"model": "gemini/gemini-2.5-flash", "api_key": "k", **extra}


def run(
    gate: ToolGate,
    upstream: FakeUpstream,
    asynchronous: bool,
    *,
    stream: bool = True,
    route: str = "gemini",
) -> tuple[list[Any], Any]:
    """The chunks (or the whole response) and the quarantine, if any."""
    extra = _args(route, stream=stream)
    args = ask_multiply(upstream, extra.pop("model"), MANIFEST["tools"], **extra)
    return call(gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=stream)


def _serve(upstream: FakeUpstream, scripted: Scripted) -> list[str]:
    """Serve ``scripted`` to the next request; the list gets the path it was asked on."""
    paths: list[str] = []

    def answer(_: dict[str, Any]) -> Scripted:
        paths.append(request_path())
        return scripted

    upstream.handler = answer
    return paths


def _sent_gemini_request(
    upstream: FakeUpstream, route: str = "gemini", paths: list[str] | None = None
) -> None:
    """The request litellm sent is Gemini's (contents and function declarations), one request
    (on vertex_ai/, at Vertex's path, the token fetched apart: never from the upstream)."""
    sent = upstream.requests[-1]
    assert "contents" in sent and "messages" not in sent
    names = [d["name"] for t in sent["tools"] for d in t.get("function_declarations", [])]
    assert names == ["multiply", "write_file"]
    if route == "vertex_ai":
        assert len(upstream.requests) == 1 and paths is not None
        assert paths[0].removesuffix(":streamGenerateContent").removesuffix(
            ":generateContent"
        ) == GEMINI_PATH.removesuffix(":streamGenerateContent")
        assert TOKENS, "litellm fetched its Google token at the loopback token endpoint"


@pytest.mark.parametrize(("route", "name", "asynchronous", "split"), PARAMS)
def test_every_streamed_fixture(
    upstream: FakeUpstream, route: str, name: str, asynchronous: bool, split: str
) -> None:
    case = CASES[name]
    body = (FIXTURES / case["body"]).read_bytes()
    paths = _serve(upstream, Scripted(body, chunk_sizes=SPLITS[split]))
    gate = ToolGate(MANIFEST["tools"])
    try:
        chunks, error = run(gate, upstream, asynchronous, route=route)
    finally:
        gate.close()
    _sent_gemini_request(upstream, route, paths)
    if route == "vertex_ai":
        assert paths == [GEMINI_PATH]
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
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        assert released == []
        no_leak(error)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", WHOLE)
def test_every_whole_body(
    upstream: FakeUpstream, name: str, asynchronous: bool, route: str
) -> None:
    case = CASES[name]
    body = (FIXTURES / case["body"]).read_bytes()
    paths = _serve(upstream, Scripted(body, content_type="application/json"))
    gate = ToolGate(MANIFEST["tools"])
    try:
        out, error = run(gate, upstream, asynchronous, stream=False, route=route)
    finally:
        gate.close()
    _sent_gemini_request(upstream, route, paths)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        got = [
            {"call_id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
            for tc in calls
        ]
        assert [(c["name"], json.loads(c["arguments"])) for c in got] == [
            (c["name"], json.loads(c["arguments"])) for c in case["calls"]
        ]
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        no_leak(error)


# ---- what plain litellm hands over (docs/gemini.md, docs/routes.md) -------------------------
BROKEN = [n for n in STREAMED if CASES[n]["expect"] == "quarantine"]
LITELLM = tuple(int(x) for x in version("litellm").split(".")[:2])
# How plain litellm.completion(stream=True), with no gate, ends each broken recording:
# raised, finished calls (each argument text a JSON object) under tool_calls, such calls under
# another finish reason, or no usable call. The figures docs/gemini.md gives, per version;
# the same on vertex_ai/ as on gemini/ (litellm reads both with one parser).
PLAIN = {
    (1, 110): {"raised": 2, "tool_calls": 15, "other_finish": 4, "no_call": 3},
    (1, 108): {"raised": 2, "tool_calls": 14, "other_finish": 5, "no_call": 3},
}


def _plain(upstream: FakeUpstream, name: str, route: str) -> str:
    upstream.enqueue(Scripted((FIXTURES / CASES[name]["body"]).read_bytes()))
    extra = _args(route)
    args = ask_multiply(upstream, extra.pop("model"), MANIFEST["tools"], **extra)
    return plain_outcome(args)


@pytest.mark.parametrize("route", ROUTES)
def test_plain_litellm_hands_over_most_broken_recordings(
    upstream: FakeUpstream, route: str
) -> None:
    """The gate refuses all of them (test_every_streamed_fixture); plain litellm does not."""
    tally = dict.fromkeys(PLAIN_OUTCOMES, 0)
    for name in BROKEN:
        tally[_plain(upstream, name, route)] += 1
    assert sum(tally.values()) == len(BROKEN) == 24
    assert tally == PLAIN[LITELLM]


# ---- the canary: no argument text in a refusal, its chain, its frames or any log -----------
CANARY_CASES = [n for n in BROKEN if CANARY.encode() in (FIXTURES / CASES[n]["body"]).read_bytes()]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", CANARY_CASES)
def test_no_gemini_quarantine_leaks_the_arguments(
    upstream: FakeUpstream, name: str, asynchronous: bool
) -> None:
    upstream.enqueue(Scripted((FIXTURES / CASES[name]["body"]).read_bytes()))
    gate = ToolGate(MANIFEST["tools"])
    try:
        with every_logger() as logs:
            chunks, error = run(gate, upstream, asynchronous)
    finally:
        gate.close()
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is R(CASES[name]["reason"])
    assert tool_calls(chunks) == []
    assert_clean_exception(error)
    assert_clean_logs(logs)
    assert [r for r in logs if r.name == "litellm_toolgate"], "the gate logs its decision"


def test_the_canary_cases_are_not_trivial() -> None:
    assert {"arguments_schema_invalid", "unknown_tool", "partial_arguments"} <= set(CANARY_CASES)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_call_without_args_is_refused_where_litellm_cannot_carry_it(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """The wire allows a call with no ``args`` (read as ``{}``: the core releases it, see
    test_core_gemini), but litellm fails on one (``KeyError: 'args'``) on both versions: the
    gate cannot show the caller a call litellm did not carry, so it refuses, typed."""
    message = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "now"}}], "role": "model"},
                "finishReason": "STOP",
            }
        ]
    }
    upstream.enqueue(Scripted(b"data: " + json.dumps(message).encode() + b"\r\n\r\n"))
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    gate = ToolGate(tools)
    try:
        args = ask_multiply(upstream, "gemini/gemini-2.5-flash", tools, stream=True, api_key="k")
        chunks, error = call(gate.completion, gate.acompletion, args, asynchronous=asynchronous)
    finally:
        gate.close()
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is R.CARRIER_MISMATCH
    assert tool_calls(chunks) == []


# ---- Vertex's long decode: an answer in hops, spliced by litellm ----------------------------
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_vertex_long_decode_hops_are_refused(upstream: FakeUpstream, asynchronous: bool) -> None:
    """Plain litellm asks for the second hop and hands over its call as the answer's; the gate
    never splices a second response onto an attempt (``spliced_response``), and a call of a
    hop it has not read as one whole answer is never handed over."""
    args = ask_multiply(upstream, GEMINI_MODEL, MANIFEST["tools"][:1], **vertex_args())
    args.update(stream=True, max_tokens=1000)
    paths = long_decode(upstream)
    plain, error = call(litellm.completion, litellm.acompletion, args, asynchronous=asynchronous)
    assert error is None and len(paths) == 2 and "/v1beta1/projects/" in paths[1]
    assert [tc.function.name for tc in tool_calls(plain)] == ["multiply"]

    paths = long_decode(upstream)
    gate = ToolGate(MANIFEST["tools"][:1])
    try:
        chunks, error = call(gate.completion, gate.acompletion, args, asynchronous=asynchronous)
    finally:
        gate.close()
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is R.SPLICED_RESPONSE
    assert tool_calls(chunks) == []
