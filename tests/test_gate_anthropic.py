"""``gate.completion`` / ``gate.acompletion`` with ``model="anthropic/..."`` through the real
litellm over loopback HTTP.

litellm calls ``POST {api_base}/v1/messages`` and translates the Anthropic wire
(``fixtures/anthropic``) into chat chunks. The wire is the truth; litellm's chunks are the
carrier, cross-checked. Each streamed fixture is served whole and in odd-sized chunks, read
sync and async; each whole body with ``stream=False``. The gate must give the manifest's
outcome: the exact calls released (in one chunk, after every text chunk, under litellm's tool
indices), or ``ToolCallQuarantined`` with the manifest's reason and no tool call handed out.

The same wire on ``vertex_ai/claude-...``: litellm calls ``{api_base}/v1/projects/<project>/
locations/<location>/publishers/anthropic/models/<model>:streamRawPredict`` (``:rawPredict``
for a whole answer) through its Anthropic handler, after fetching a Google token from the
loopback token endpoint of tests/vertexauth.py; every streamed fixture once (sync and async
by turns, the few of ``BOTH`` both ways) and every whole body.
"""

from __future__ import annotations

import json
from importlib.metadata import version
from typing import Any

import litellm
import pytest
from conftest import no_leak
from loopback import PLAIN_OUTCOMES, ask_multiply, call, plain_outcome, tool_calls
from vertexauth import CLAUDE_MODEL, CLAUDE_PATH, TOKENS, vertex_args
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

litellm.suppress_debug_info = True
R = QuarantineReason
ANTHROPIC = Fixtures("anthropic")
FIXTURES, MANIFEST, CASES = ANTHROPIC.folder, ANTHROPIC.manifest, ANTHROPIC.cases
STREAMED, WHOLE = ANTHROPIC.streamed, ANTHROPIC.whole
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}
# Where the outcome through litellm's chat carrier differs from the core's. Two tool blocks
# open at once: litellm appends every input_json_delta to the tool call it opened last, so
# its chunks mix the two calls' arguments; the cross-check refuses them.
THROUGH_CHAT: dict[str, dict[str, str]] = {
    "tool_deltas_overlap": {"expect": "quarantine", "reason": "carrier_mismatch"}
}
# Every fixture sync and whole, and async in odd pieces; both modes both ways for a few.
MODES = [(False, "whole"), (True, "split")]
BOTH = {"multiply_basic", "interleaved_blocks", "overloaded_error"}
PARAMS = [
    pytest.param("anthropic", name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for name in STREAMED
    for a, s in ([*MODES, (True, "whole"), (False, "split")] if name in BOTH else MODES)
] + [
    # vertex_ai/claude-...: each fixture once (sync and async by turns), BOTH both ways.
    pytest.param("vertex_ai", name, a, "split", id=f"vertex-{name}-{'async' if a else 'sync'}")
    for i, name in enumerate(STREAMED)
    for a in ([False, True] if name in BOTH else [bool(i % 2)])
]
ROUTES = {
    "anthropic": ("anthropic/claude-sonnet-4-5", {"api_key": "sk-ant-test"}),
    "vertex_ai": (CLAUDE_MODEL, vertex_args()),
}


def run(
    gate: ToolGate,
    upstream: FakeUpstream,
    asynchronous: bool,
    *,
    stream: bool = True,
    route: str = "anthropic",
) -> tuple[list[Any], Any]:
    """The chunks (or the whole response) and the quarantine, if any."""
    model, extra = ROUTES[route]
    args = ask_multiply(upstream, model, MANIFEST["tools"], stream=stream, **extra)
    return call(gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=stream)


def _serve(upstream: FakeUpstream, scripted: Scripted) -> list[str]:
    """Serve ``scripted`` to the next request; the list gets the path it was asked on."""
    paths: list[str] = []

    def answer(_: dict[str, Any]) -> Scripted:
        paths.append(request_path())
        return scripted

    upstream.handler = answer
    return paths


def _sent_to(route: str, upstream: FakeUpstream, paths: list[str], *, stream: bool) -> None:
    """The one request litellm sent went where the route sends it (on vertex_ai/, Vertex's
    rawPredict path, the token fetched apart: never from the upstream, never tapped)."""
    assert len(upstream.requests) == len(paths) == 1
    if route == "vertex_ai":
        want = CLAUDE_PATH if stream else CLAUDE_PATH.replace(":streamRawPredict", ":rawPredict")
        assert paths == [want]
        assert upstream.requests[0]["anthropic_version"] == "vertex-2023-10-16"
        assert TOKENS, "litellm fetched its Google token at the loopback token endpoint"
    else:
        assert paths == ["/v1/messages"]


@pytest.mark.parametrize(("route", "name", "asynchronous", "split"), PARAMS)
def test_every_streamed_fixture(
    upstream: FakeUpstream, route: str, name: str, asynchronous: bool, split: str
) -> None:
    case = {**CASES[name], **THROUGH_CHAT.get(name, {})}
    body = (FIXTURES / case["body"]).read_bytes()
    paths = _serve(upstream, Scripted(body, chunk_sizes=SPLITS[split]))
    chunks, error = run(ToolGate(MANIFEST["tools"]), upstream, asynchronous, route=route)
    assert upstream.requests[-1]["stream"] is True
    _sent_to(route, upstream, paths, stream=True)
    released = tool_calls(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        got = [
            {"call_id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
            for tc in released
        ]
        assert got == case["calls"]
        # One release chunk, under litellm's own tool indices, after all the text.
        assert [tc.index for tc in released] == list(range(len(case["calls"])))
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text == case["text"]
        if released:
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"]), name
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
    out, error = run(ToolGate(MANIFEST["tools"]), upstream, asynchronous, stream=False, route=route)
    _sent_to(route, upstream, paths, stream=False)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        message = out[0].choices[0].message
        got = [
            {
                "call_id": tc.id,
                "name": tc.function.name,
                "arguments": json.loads(tc.function.arguments),
            }
            for tc in message.tool_calls or []
        ]
        want = [{**c, "arguments": json.loads(c["arguments"])} for c in case["calls"]]
        assert got == want
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: {error!r}"
        assert error.reason is R(case["reason"])
        assert out == []
        no_leak(error)


def test_litellm_sends_the_anthropic_request(upstream: FakeUpstream) -> None:
    """What litellm sends for ``anthropic/`` (so the fake and the gate read the right wire)."""
    upstream.enqueue(Scripted((FIXTURES / "multiply_basic.sse").read_bytes()))
    chunks, error = run(ToolGate(MANIFEST["tools"]), upstream, False)
    assert error is None and tool_calls(chunks)
    sent = upstream.requests[-1]
    assert sent["stream"] is True and sent["max_tokens"] > 0
    assert [t["name"] for t in sent["tools"]] == ["multiply", "write_file", "get_time"]
    assert all("input_schema" in t for t in sent["tools"])


# ---- what plain litellm hands over (docs/anthropic.md, docs/routes.md) ----------------------
BROKEN = [n for n in STREAMED if CASES[n]["expect"] == "quarantine"]
LITELLM = tuple(int(x) for x in version("litellm").split(".")[:2])
# How plain litellm.completion(stream=True), with no gate, ends each broken recording:
# raised, finished calls (each argument text a JSON object) under tool_calls, such calls under
# another finish reason, or no usable call. The figures docs/anthropic.md gives, per version
# and route (Claude on vertex_ai/ goes through the same handler as anthropic/).
PLAIN = {
    (1, 110): {"raised": 5, "tool_calls": 22, "other_finish": 3, "no_call": 12},
    (1, 108): {"raised": 1, "tool_calls": 20, "other_finish": 8, "no_call": 13},
}


def _plain(upstream: FakeUpstream, name: str, route: str) -> str:
    upstream.enqueue(Scripted((FIXTURES / CASES[name]["body"]).read_bytes()))
    model, extra = ROUTES[route]
    args = ask_multiply(upstream, model, MANIFEST["tools"], **extra)
    return plain_outcome(args)


@pytest.mark.parametrize("route", ROUTES)
def test_plain_litellm_hands_over_broken_recordings(upstream: FakeUpstream, route: str) -> None:
    """The gate refuses all of them (test_every_streamed_fixture); plain litellm does not."""
    tally = dict.fromkeys(PLAIN_OUTCOMES, 0)
    for name in BROKEN:
        tally[_plain(upstream, name, route)] += 1
    assert sum(tally.values()) == len(BROKEN) == 42
    assert tally == PLAIN[LITELLM]
