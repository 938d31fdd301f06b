"""``ToolGateGuardrail`` in ``litellm.callbacks`` on ``litellm.responses`` / ``aresponses`` over
the wires of whole calls whose ids litellm's bridge replaces: Gemini's (``gemini/``, Gemini
models on ``vertex_ai/``) and a whole Ollama body (``ollama_chat/``), real litellm on loopback.

litellm bridges the Responses API to chat there. Its Gemini parser keeps a call's
``functionCall.id`` but draws ``call_`` and a uuid for a call sent without one, after the
callback decided; its Ollama transformation does the same with a whole body's
``tool_calls[].id``. So the withholding client writes the gate's identity of each such call
(``gemini-call-<n>``, ``ollama-call-<n>``: the name the gate's records give it) into the body
it releases (``WireSpec.identities``), runs litellm's parser and bridge over the body so
written, and matches their items to the wire by position, name, JSON value and that identity
before anything held goes out (``core/wires/whole.py``, ``Carrier.wire_ids``). Every
recording of ``fixtures/gemini``, streamed (sync, and async in odd pieces) and whole, and
every whole body of ``fixtures/ollama``, sync and async: the outcome is ``ToolGate``'s for the
same body (tests/test_gate_responses_whole_wires.py); a release hands the caller exactly the
wire's calls under the ids the gate's records name (a call carrying a thought signature: that
id, then litellm's separator and the signature); a refusal hands out no function-call event,
no ``response.completed``, and no argument text. A streamed ``ollama_chat/`` call stays
refused under the callback, unsent (litellm's stream parser draws every call's id whatever
the line says: tests/test_gate_responses_whole_wires.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from test_callback_responses_bridged import _call
from test_gate_responses import collect, is_call_event, kind
from test_gate_responses_whole_wires import CREDENTIALS, WIRES, expected

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.wires import WIRES as WIRE_SPECS
from litellm_toolgate.core.wires.gemini import GeminiIdentities
from litellm_toolgate.edge.seam.symbols import lazy
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
SPLIT = [1, 7, 13, 2, 64]
SIGNED = {"thought_then_call"}  # a call carrying a thought signature


def _gated(route: str, name: str) -> bool:
    """Whether the callback gates this recording's call: every Gemini one, Ollama's whole."""
    return route != "ollama_chat" or not WIRES[route][0].cases[name]["streamed"]


PARAMS = [
    pytest.param(route, name, a, id=f"{route}-{name}-{'async' if a else 'sync'}")
    for route in WIRES
    for name in WIRES[route][0].cases
    if _gated(route, name)
    for a in (False, True)
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


def _shown(call_id: str, name: str) -> str:
    """The id litellm hands the caller for the gate's identity ``call_id``: itself, or with
    the thought signature litellm appends (the one recording that carries one)."""
    if name not in SIGNED:
        return call_id
    return f"{call_id}{lazy('THOUGHT_SIGNATURE_SEPARATOR')}c2lnbmF0dXJl"


def _function_calls(items: list[Any]) -> list[tuple[str, str, Any]]:
    return [
        (i.call_id, i.name, json.loads(i.arguments))
        for i in items
        if getattr(i, "type", None) == "function_call"
    ]


@pytest.mark.parametrize(("route", "name", "asynchronous"), PARAMS)
def test_every_fixture(
    upstream: FakeUpstream,
    route: str,
    name: str,
    asynchronous: bool,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fixtures, model, media = WIRES[route]
    case = expected(route, name)
    streamed = bool(case["streamed"])
    body = (fixtures.folder / case["body"]).read_bytes()
    sent = len(upstream.requests)
    upstream.enqueue(
        Scripted(
            body,
            content_type=media if streamed else "application/json",
            chunk_sizes=SPLIT if streamed and asynchronous else None,
        )
    )
    kwargs = {
        "model": model,
        "input": "What is 7 times 8? Use multiply.",
        "tools": fixtures.manifest["tools"],
        "api_base": upstream.root_url,
        "stream": streamed,
        "num_retries": 0,
        **CREDENTIALS[route](),
    }
    gate = ToolGateGuardrail(fixtures.manifest["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    caplog.set_level(logging.INFO, logger="litellm_toolgate")
    try:
        out, error = _call(kwargs, asynchronous=asynchronous, stream=streamed)
    finally:
        litellm.callbacks = saved
        gate.close()
    assert len(upstream.requests) == sent + 1  # the wire's own chat call, once
    records = [getattr(r, "toolgate", {}) for r in caplog.records]
    recorded = [r["call_id"] for r in records if r.get("call_id")]
    want = [
        (_shown(c["call_id"], name), c["name"], json.loads(c["arguments"]))
        for c in case.get("calls", [])
    ]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        # The gate's records name each released call by the wire's identity, the very id
        # the caller is handed (less litellm's thought-signature suffix).
        assert recorded == [c["call_id"] for c in case.get("calls", [])]
        if streamed:
            _, got, kinds = collect(out)
            assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in got] == want
            assert kinds[-1] == "response.completed"
            assert _function_calls(list(out[-1].response.output)) == want
            shown = {
                e.item.call_id
                for e in out
                if getattr(getattr(e, "item", None), "type", None) == "function_call"
            }
            assert shown == {c[0] for c in want}
            text = "".join(
                e.delta
                for e in out
                if kind(e)
                in ("response.reasoning_summary_text.delta", "response.output_text.delta")
            )
            assert text == case["text"]
        else:
            assert _function_calls(list(out[0].output)) == want
            assert out[0].status == "completed"
    else:
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined), f"{name}: released {out!r} / {error!r}"
        assert fault.reason is R(case["reason"]), f"{name}: {fault.reason}"
        assert not [e for e in out if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in collect(out)[2]
        assert streamed or not out  # a whole result: nothing handed out
        no_leak(error)
        for rendered in (repr(out), json.dumps(records, default=str)):
            assert CANARY not in rendered


def test_identities_are_written_as_the_gate_names_the_calls() -> None:
    """The writer gives each call without an id its position in the body, over all messages
    (as ``WholeCalls`` names it), leaves an id the wire sent, and touches nothing else."""
    ids = GeminiIdentities()
    parts: list[Any] = [{"text": "x"}, {"functionCall": {"name": "a"}}]
    first = {"candidates": [{"content": {"parts": parts}}]}
    second = {
        "candidates": [
            {"content": {"parts": [{"functionCall": {"name": "b", "args": {"k": CANARY}}}]}}
        ]
    }
    kept = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "c", "id": "w"}}]}}]}
    for value in (first, second, kept, {"usageMetadata": {}}, {"candidates": "odd"}):
        ids.identify(value)
    assert first["candidates"][0]["content"]["parts"][1]["functionCall"]["id"] == "gemini-call-0"
    call = second["candidates"][0]["content"]["parts"][0]["functionCall"]
    assert call == {"name": "b", "args": {"k": CANARY}, "id": "gemini-call-1"}
    assert kept["candidates"][0]["content"]["parts"][0]["functionCall"]["id"] == "w"
    # Only the wires whose client keeps the wire's ids have identities to write: Gemini's,
    # and a whole Ollama body (litellm draws every streamed Ollama call's id).
    for streamed, wires in ((True, ["gemini"]), (False, ["ollama", "gemini"])):
        found = [w.value for w, spec in WIRE_SPECS.items() if spec.identities(streamed)]
        assert sorted(found) == sorted(wires), streamed
    ids = WIRE_SPECS[Wire.OLLAMA].identities(False)
    assert ids is not None
    whole = {"message": {"tool_calls": [{"function": {"name": "a"}}, {"function": {}, "id": "w"}]}}
    ids.identify(whole)
    assert [c.get("id") for c in whole["message"]["tool_calls"]] == ["ollama-call-0", "w"]
