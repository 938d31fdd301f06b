"""``ToolGateGuardrail`` in ``litellm.callbacks`` on ``litellm.responses`` / ``aresponses``
where litellm bridges the Responses API to chat over a wire litellm re-shapes: Anthropic's
Messages (``anthropic/``, Claude on ``vertex_ai/`` through rawPredict) and Bedrock's Converse,
real litellm on loopback.

No hook of litellm's sees the Responses events its bridge makes before the caller does, so
the withholding client runs litellm's own chat parser for the route and then litellm's own
bridge over the body it holds, and cross-checks the events (a whole body: the result) with
the wire by the rule ``ToolGate`` applies to litellm's real events
(``edge/responsesbridge.py``). Every recording of ``fixtures/anthropic`` and
``fixtures/bedrock``, streamed (sync, and async in odd pieces) and whole, sync and async: the
outcome is ``ToolGate``'s for the same body (tests/test_gate_responses_wires.py); a release
hands out exactly the wire's calls under the wire's ids, a refusal no function-call event,
no ``response.completed`` and no argument text.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from test_gate_responses import collect, is_call_event, kind
from test_gate_responses_wires import CREDENTIALS, PATHS, WIRES, expected, items

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.core.framing.sse import SSEDecoder
from litellm_toolgate.edge.parsers import UNPARSED
from litellm_toolgate.edge.responsesbridge import bridged_responses_parse
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

litellm.suppress_debug_info = True
R = QuarantineReason
SPLIT = [1, 7, 13, 2, 64]

PARAMS = [
    pytest.param(route, name, a, id=f"{route}-{name}-{'async' if a else 'sync'}")
    for route, (fixtures, _, _) in WIRES.items()
    for name in (*fixtures.streamed, *fixtures.whole)
    for a in (False, True)
]


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


def _call(kwargs: dict[str, Any], *, asynchronous: bool, stream: bool) -> tuple[list[Any], Any]:
    """What ``litellm.responses`` / ``aresponses`` handed out, and the error, if any."""
    out: list[Any] = []

    async def go() -> None:
        result = await litellm.aresponses(**kwargs)
        if stream:
            async for event in result:
                out.append(event)
        else:
            out.append(result)

    try:
        if asynchronous:
            asyncio.run(go())
        elif stream:
            out.extend(litellm.responses(**kwargs))
        else:
            out.append(litellm.responses(**kwargs))
    except Exception as exc:
        return out, exc
    return out, None


@pytest.mark.parametrize(("route", "name", "asynchronous"), PARAMS)
def test_every_fixture(upstream: FakeUpstream, route: str, name: str, asynchronous: bool) -> None:
    fixtures, model, media = WIRES[route]
    case = expected(route, name)
    streamed = bool(case["streamed"])
    body = (fixtures.folder / case["body"]).read_bytes()
    scripted = Scripted(
        body,
        content_type=media if streamed else "application/json",
        chunk_sizes=SPLIT if streamed and asynchronous else None,
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
    gate = ToolGateGuardrail(fixtures.manifest["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        out, error = _call(kwargs, asynchronous=asynchronous, stream=streamed)
    finally:
        litellm.callbacks = saved
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
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined), f"{name}: released {out!r} / {error!r}"
        assert fault.reason is R(case["reason"]), f"{name}: {fault.reason}"
        assert not [e for e in out if is_call_event(e)], "a function-call event leaked"
        assert "response.completed" not in collect(out)[2]
        assert not [o for o in out if not streamed]  # a whole result: nothing handed out
        no_leak(error)


def _sse_values(body: bytes) -> list[Any]:
    return [json.loads(m.data) for m in SSEDecoder(max_event_bytes=1 << 20).feed(body) if m.data]


def test_the_bridge_run_over_a_held_body_is_a_responses_carrier() -> None:
    """litellm's parser and then its Responses bridge, over a held body's values: the items
    litellm will hand over, under the wire's ids (a stream: its events; a whole body: the
    result), as a Responses carrier the wire's rule matches."""
    fixtures, model, _ = WIRES["anthropic"]
    case = fixtures.cases["multiply_basic"]
    parse = bridged_responses_parse(model, tools=fixtures.manifest["tools"])
    carrier = parse(_sse_values((fixtures.folder / case["body"]).read_bytes()), True)
    assert carrier.kind == "responses" and not carrier.foreign
    assert carrier.finish_reason == "completed"
    got = [carrier.calls[i] for i in sorted(carrier.calls)]
    assert [(c.call_id, c.name, c.arguments) for c in got] == [
        (w["call_id"], w["name"], w["arguments"]) for w in case["calls"]
    ]
    whole = fixtures.cases["whole_tool_use"]
    carrier = parse([json.loads((fixtures.folder / whole["body"]).read_bytes())], False)
    assert carrier.kind == "responses" and carrier.finish_reason == "completed"
    assert [c.call_id for c in carrier.calls.values()] == [w["call_id"] for w in whole["calls"]]


def test_the_bridge_fails_closed() -> None:
    """A body litellm's parser or bridge fails on: a carrier that matches no wire (refused
    ``carrier_mismatch``), never litellm's error quoting the body."""
    _, model, _ = WIRES["anthropic"]
    parse = bridged_responses_parse(model)
    broken = [{"type": "content_block_start", "index": 0, "content_block": CANARY}]
    assert parse(broken, True) is UNPARSED
    assert parse([["not", "an", "object"]], False) is UNPARSED
    assert parse([{"content": CANARY}, {}], False) is UNPARSED
