"""``gate.completion`` / ``gate.acompletion`` with ``model="ollama_chat/..."`` through the real
litellm over loopback HTTP.

litellm calls ``POST {api_base}/api/chat`` and translates Ollama's newline-delimited JSON
(``fixtures/ollama``) into chat chunks. The wire is the truth; litellm's chunks are the
carrier, cross-checked by position, name and arguments (litellm gives every call a uuid of
its own). Each streamed fixture is served whole and in odd-sized chunks, read sync and
async; each whole body with ``stream=False``. The gate must give the manifest's outcome: the
exact calls released (in one chunk, after every text chunk, under the wire's ids), or
``ToolCallQuarantined`` with the manifest's reason and no tool call handed out.
"""

from __future__ import annotations

import json
from typing import Any

import litellm
import pytest
from conftest import no_leak
from loopback import ask_multiply, call, tool_calls
from wirecases import Fixtures

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
OLLAMA = Fixtures("ollama")
FIXTURES, MANIFEST, CASES = OLLAMA.folder, OLLAMA.manifest, OLLAMA.cases
STREAMED, WHOLE = OLLAMA.streamed, OLLAMA.whole
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}
NDJSON = "application/x-ndjson"
# Where the outcome through litellm's chat carrier differs from the core's (the manifest's
# via_litellm): litellm 1.110 numbers the calls of each line from 0, so two calls in two lines
# both arrive as tool index 0 and its chunks merge them into one call, which the cross-check
# refuses; 1.108.7 numbers them apart and the calls are released. Either way no merged call
# reaches the caller.
MODES = [(False, "whole"), (True, "split")]
BOTH = {"multiply_basic", "two_calls_one_line", "error_mid_stream", "crlf_lines"}
PARAMS = [
    pytest.param(name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for name in STREAMED
    for a, s in ([*MODES, (True, "whole"), (False, "split")] if name in BOTH else MODES)
]


def run(
    gate: ToolGate, upstream: FakeUpstream, asynchronous: bool, *, stream: bool = True
) -> tuple[list[Any], Any]:
    """The chunks (or the whole response) and the quarantine, if any."""
    args = ask_multiply(upstream, "ollama_chat/qwen3:8b", MANIFEST["tools"], stream=stream)
    return call(gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=stream)


@pytest.mark.parametrize(("name", "asynchronous", "split"), PARAMS)
def test_every_streamed_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool, split: str
) -> None:
    case = OLLAMA.through_litellm(name)  # where litellm merges calls: carrier_mismatch
    body = (FIXTURES / case["body"]).read_bytes()
    upstream.enqueue(Scripted(body, content_type=NDJSON, chunk_sizes=SPLITS[split]))
    gate = ToolGate(MANIFEST["tools"])
    try:
        chunks, error = run(gate, upstream, asynchronous)
    finally:
        gate.close()
    assert upstream.requests[-1]["stream"] is True
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
    assert upstream.requests[-1].get("stream") is False
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
