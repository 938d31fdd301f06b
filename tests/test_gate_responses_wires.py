"""``gate.responses()`` / ``gate.aresponses()`` on ``bedrock/converse/...``, on
``vertex_ai/claude-...`` and on ``anthropic/...`` through the real litellm over loopback HTTP.

litellm has no Responses config for these routes: it makes a chat call on the provider's own
wire (Bedrock's Converse, ``fixtures/bedrock``; Anthropic's Messages, through Vertex's
rawPredict or at ``/v1/messages``, ``fixtures/anthropic``) and turns its chat chunks into
Responses events. The wire is the truth; those events are the carrier, matched to the wire by
order, call id, name and arguments (``core/wires/base.py``, ``bridged_responses_fault``).
Every fixture, streamed (sync whole, async in odd pieces, by turns) and every whole body
(``stream=False``): a good one releases exactly the wire's calls as function-call items under
the wire's ids; a broken one is quarantined with the manifest's reason and no function-call
item is handed out.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest
from conftest import no_leak
from loopback import call
from test_gate_responses import collect, is_call_event, kind
from vertexauth import CLAUDE_MODEL, CLAUDE_PATH, vertex_args
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

litellm.suppress_debug_info = True
R = QuarantineReason
BEDROCK, ANTHROPIC = Fixtures("bedrock"), Fixtures("anthropic")
AWS = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "x", "aws_region_name": "r"}
BEDROCK_PATH = "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream"
PATHS = {  # where litellm sends a streamed call; a whole one drops the stream from the name
    "bedrock": (BEDROCK_PATH, BEDROCK_PATH.removesuffix("-stream")),
    "vertex_ai": (CLAUDE_PATH, CLAUDE_PATH.replace(":streamRawPredict", ":rawPredict")),
    "anthropic": ("/v1/messages", "/v1/messages"),
}
WIRES = {
    "bedrock": (
        BEDROCK,
        "bedrock/converse/" + BEDROCK.manifest["model"],
        "application/vnd.amazon.eventstream",
    ),
    "vertex_ai": (ANTHROPIC, CLAUDE_MODEL, "text/event-stream"),
    "anthropic": (ANTHROPIC, "anthropic/claude-sonnet-4-5", "text/event-stream"),
}
CREDENTIALS = {
    "bedrock": lambda: AWS,
    "vertex_ai": vertex_args,
    "anthropic": lambda: {"api_key": "sk-ant-test"},
}
SPLIT = [1, 7, 13, 2, 64]
# Where the outcome through litellm's Responses bridge differs from the wire's manifest.
# Text cut by the token limit: the Responses API promises a completed response, and litellm's
# bridge does not complete this one (as on a chat wire: test_gate_responses.py).
THROUGH_BRIDGE: dict[str, dict[str, dict[str, str]]] = {
    "bedrock": {
        "text_cut_by_max_tokens": {"expect": "quarantine", "reason": "response_incomplete"},
    },
    # Two tool blocks open at once: litellm appends each fragment to the call it opened last,
    # so its items mix the two calls' arguments (as its chat chunks do: test_gate_anthropic.py).
    "vertex_ai": {"tool_deltas_overlap": {"expect": "quarantine", "reason": "carrier_mismatch"}},
}
THROUGH_BRIDGE["anthropic"] = THROUGH_BRIDGE["vertex_ai"]  # the same wire, the same bridge


def expected(route: str, name: str) -> dict[str, Any]:
    return {**WIRES[route][0].cases[name], **THROUGH_BRIDGE[route].get(name, {})}


PARAMS = [
    pytest.param(route, name, bool(i % 2), id=f"{route}-{name}-{'async' if i % 2 else 'sync'}")
    for route, (fixtures, _, _) in WIRES.items()
    for i, name in enumerate(fixtures.streamed)
] + [
    pytest.param(route, name, a, id=f"{route}-{name}-{'async' if a else 'sync'}")
    for route, (fixtures, _, _) in WIRES.items()
    for name in fixtures.whole
    for a in (False, True)
]


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


def items(response: Any) -> list[dict[str, Any]]:
    """The function-call items of a whole Responses result."""
    return [
        {k: getattr(item, k) for k in ("call_id", "name", "arguments")}
        for item in response.output
        if getattr(item, "type", None) == "function_call"
    ]


@pytest.mark.parametrize(("route", "name", "asynchronous"), PARAMS)
def test_every_fixture(upstream: FakeUpstream, route: str, name: str, asynchronous: bool) -> None:
    fixtures, model, media = WIRES[route]
    case = expected(route, name)
    streamed = bool(case["streamed"])
    body = (fixtures.folder / case["body"]).read_bytes()
    chunks = SPLIT if streamed and asynchronous else None
    scripted = Scripted(
        body, content_type=media if streamed else "application/json", chunk_sizes=chunks
    )
    paths: list[str] = []

    def answer(_: dict[str, Any]) -> Scripted:
        paths.append(request_path())
        return scripted

    upstream.handler = answer
    kwargs = {
        "model": model,
        "input": "What is 7 times 8? Use multiply.",
        "tools": fixtures.manifest["tools"],
        "api_base": upstream.root_url,
        "stream": streamed,
        "num_retries": 0,
        **CREDENTIALS[route](),
    }
    gate = ToolGate(fixtures.manifest["tools"])
    try:
        out, error = call(
            gate.responses, gate.aresponses, kwargs, asynchronous=asynchronous, stream=streamed
        )
    finally:
        gate.close()
    assert paths == [PATHS[route][0 if streamed else 1]]  # the wire's own chat call, once
    want = case.get("calls", [])
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        if streamed:
            text, got, kinds = collect(out)
            assert got == want  # the wire's ids, names and argument text
            assert kinds[-1] == "response.completed"
            reasoning = "".join(
                e.delta for e in out if kind(e) == "response.reasoning_summary_text.delta"
            )
            # Bedrock's manifest counts reasoning as text, Anthropic's leaves thinking out.
            assert (reasoning + text if route == "bedrock" else text) == case["text"]
            if want:  # every call event withheld, then released together before completed
                positions = [i for i, e in enumerate(out) if is_call_event(e)]
                assert positions == list(range(positions[0], len(out) - 1))
        else:
            got = items(out[0])
            assert [(c["call_id"], c["name"]) for c in got] == [
                (c["call_id"], c["name"]) for c in want
            ]
            # A whole body's input object, serialized again by litellm: the same value.
            assert [json.loads(c["arguments"]) for c in got] == [
                json.loads(c["arguments"]) for c in want
            ]
            assert out[0].status == "completed"
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: released {out!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        assert not [e for e in out if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in collect(out)[2]
        no_leak(error)
