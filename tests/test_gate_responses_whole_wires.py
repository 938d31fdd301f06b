"""``gate.responses()`` / ``gate.aresponses()`` on ``gemini/``, ``ollama_chat/`` and Gemini on
``vertex_ai/``, through the real litellm over loopback HTTP.

litellm has no Responses config for these routes: it makes a chat call on the provider's own
wire (Gemini's ``streamGenerateContent`` SSE, ``fixtures/gemini``; Ollama's NDJSON
``/api/chat``, ``fixtures/ollama``) and turns its chat chunks into Responses events. Its
bridge hands a Gemini call sent without an id, and every streamed Ollama call, out under an
id of its own (drawn at random), so the items are matched to the wire by position, name and
JSON value (``core/wires/whole.py``, ``bridged_by_position_fault``), and the release shows
the wire's identity instead of litellm's id (``carriers/responses.py``, ``wire_ids``), in
the items, in ``response.completed`` and in a whole result, as a chat release on these wires
does. Every fixture, streamed (sync whole, async in odd pieces) and every whole body, sync
and async: a good one releases exactly the wire's calls; a broken one is quarantined with
the manifest's reason and no function-call item is handed out. The callback gates these
routes too (tests/test_callback_responses_whole_wires.py), but for a streamed
``ollama_chat/`` call, which it refuses unsent (litellm draws every streamed call's id after
it decided).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import litellm
import pytest
from conftest import litellm_version, no_leak
from loopback import call
from test_gate_responses import collect, is_call_event, kind
from vertexauth import GEMINI_MODEL, vertex_args
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    UngatedCallRefused,
)
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
GEMINI, OLLAMA = Fixtures("gemini"), Fixtures("ollama")
WIRES = {
    "gemini": (GEMINI, "gemini/gemini-2.5-flash", "text/event-stream"),
    "vertex_ai": (GEMINI, GEMINI_MODEL, "text/event-stream"),
    "ollama_chat": (OLLAMA, "ollama_chat/qwen3:8b", "application/x-ndjson"),
}
CREDENTIALS = {
    "gemini": lambda: {"api_key": "k"},
    "vertex_ai": vertex_args,
    "ollama_chat": lambda: {},
}
SPLIT = [1, 7, 13, 2, 64]
INCOMPLETE = {"expect": "quarantine", "reason": "response_incomplete"}
# Where the outcome through litellm's Responses bridge differs from the wire's manifest.
# Text cut by the token limit or stopped by a content filter: the Responses API promises a
# completed response, and litellm's bridge does not complete this one (as on Bedrock's).
THROUGH_BRIDGE: dict[str, dict[str, dict[str, str]]] = {
    "gemini": {"text_cut_by_max_tokens": INCOMPLETE, "text_stopped_for_safety": INCOMPLETE},
    "ollama_chat": {"text_cut_by_length": INCOMPLETE},
}
THROUGH_BRIDGE["vertex_ai"] = THROUGH_BRIDGE["gemini"]  # the same wire, the same bridge
if litellm_version().startswith("1.110."):
    # litellm 1.110 numbers each line's calls from 0, so two calls of two lines reach its
    # bridge merged into one (as its chat chunks do: test_gate_ollama.py).
    THROUGH_BRIDGE["ollama_chat"]["two_calls_two_lines_without_ids"] = {
        "expect": "quarantine",
        "reason": "carrier_mismatch",
    }


def expected(route: str, name: str) -> dict[str, Any]:
    return {**WIRES[route][0].cases[name], **THROUGH_BRIDGE[route].get(name, {})}


PARAMS = [
    pytest.param(route, name, a, id=f"{route}-{name}-{'async' if a else 'sync'}")
    for route, (fixtures, _, _) in WIRES.items()
    for name in fixtures.cases
    for a in (False, True)
]


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


def _kwargs(route: str, upstream: FakeUpstream, streamed: bool) -> dict[str, Any]:
    fixtures, model, _ = WIRES[route]
    return {
        "model": model,
        "input": "What is 7 times 8? Use multiply.",
        "tools": fixtures.manifest["tools"],
        "api_base": upstream.root_url,
        "stream": streamed,
        "num_retries": 0,
        **CREDENTIALS[route](),
    }


def _calls(items: list[Any]) -> list[tuple[str, str, Any]]:
    """(call id, name, argument value) of each function-call item."""
    return [
        (i.call_id, i.name, json.loads(i.arguments))
        for i in items
        if getattr(i, "type", None) == "function_call"
    ]


@pytest.mark.parametrize(("route", "name", "asynchronous"), PARAMS)
def test_every_fixture(upstream: FakeUpstream, route: str, name: str, asynchronous: bool) -> None:
    fixtures, _, media = WIRES[route]
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
    gate = ToolGate(fixtures.manifest["tools"])
    try:
        out, error = call(
            gate.responses,
            gate.aresponses,
            _kwargs(route, upstream, streamed),
            asynchronous=asynchronous,
            stream=streamed,
        )
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1  # the wire's own chat call, once
    want = [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case.get("calls", [])]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        if streamed:
            _, got, kinds = collect(out)
            # The wire's identity (not litellm's id), names and argument values.
            assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in got] == want
            assert kinds[-1] == "response.completed"
            assert _calls(list(out[-1].response.output)) == want
            # No event shows litellm's own id: each function-call item (added and done).
            shown = {
                e.item.call_id
                for e in out
                if getattr(getattr(e, "item", None), "type", None) == "function_call"
            }
            assert shown == {c[0] for c in want}
            if want:  # every call event withheld, then released together before completed
                positions = [i for i, e in enumerate(out) if is_call_event(e)]
                assert positions == list(range(positions[0], len(out) - 1))
            # The manifests count thinking as text; the bridge shows it as reasoning.
            text = "".join(
                e.delta
                for e in out
                if kind(e)
                in ("response.reasoning_summary_text.delta", "response.output_text.delta")
            )
            assert text == case["text"]
        else:
            assert _calls(list(out[0].output)) == want
            assert out[0].status == "completed"
    else:
        assert isinstance(error, ToolCallQuarantined), f"{name}: released {out!r}"
        assert error.reason is R(case["reason"]), f"{name}: {error.reason}"
        assert not [e for e in out if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in collect(out)[2]
        no_leak(error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", ["ollama_chat"])
def test_the_callback_refuses_an_ollama_stream_unsent(
    upstream: FakeUpstream, route: str, asynchronous: bool
) -> None:
    """Under ``litellm.callbacks`` the gate decides before litellm parses the released body,
    and litellm's Ollama stream parser draws a fresh id for every call whatever the line
    says: the gate could not say which ids it released, so it refuses the stream unsent."""
    fixtures = WIRES[route][0]
    gate = ToolGateGuardrail(fixtures.manifest["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    sent = len(upstream.requests)
    error: BaseException | None = None
    try:
        kwargs = _kwargs(route, upstream, True)
        if asynchronous:

            async def go() -> None:
                async for _ in await litellm.aresponses(**kwargs):
                    pass

            asyncio.run(go())
        else:
            for _ in litellm.responses(**kwargs):
                pass
    except Exception as exc:
        error = exc
    finally:
        litellm.callbacks = saved
        gate.close()
    assert len(upstream.requests) == sent  # refused before sending
    if not asynchronous:
        assert isinstance(error, UngatedCallRefused), repr(error)
        assert "use ToolGate" in str(error)
        return
    refused = error
    while refused is not None and not isinstance(refused, RouteNotGated):
        refused = refused.__cause__ or refused.__context__
    assert isinstance(refused, RouteNotGated), repr(error)
    assert refused.route == route and "use ToolGate" in refused.reason
