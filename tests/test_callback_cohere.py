"""Cohere's v2 chat (``cohere/``, ``cohere_chat/``) through the real litellm on loopback.

What the gate does on the route, and why (``edge/routes.py``, ``docs/cohere.md``):

* a whole (``stream=False``) sync call under ``litellm.callbacks`` is gated: every whole body
  of ``fixtures/cohere`` gives the manifest's outcome (the exact calls released under the
  wire's ids, or ``ToolCallQuarantined`` with the manifest's reason and no call handed out);
  litellm's own parse of the held body is cross-checked with the wire first;
* a streamed call is refused before anything is sent: litellm's reader of Cohere's stream
  takes each SSE line as bare JSON and fails on every real stream (shown here, without the
  gate, on a good recording);
* ``ToolGate`` and an async call under the callback are refused before anything is sent:
  litellm's Cohere handler drops the call's ``client=`` (shown here: ``ToolGate`` would see
  no wire);
* a ``cohere/v1/...`` model (Cohere's v1 chat, another wire) and the Responses API are
  refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from loopback import ask_multiply
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    WireNotObservable,
    find_quarantine,
)
from litellm_toolgate.edge.parsers import litellm_parse
from litellm_toolgate.edge.routes import ROUTES, Api, route_for
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
COHERE = Fixtures("cohere")
MANIFEST, CASES = COHERE.manifest, COHERE.cases
MODELS = ["cohere/command-a-03-2025", "cohere_chat/command-a-03-2025"]


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


def _args(upstream: FakeUpstream, model: str = MODELS[0], **extra: Any) -> dict[str, Any]:
    # litellm takes a Cohere api_base as the whole URL of the chat endpoint.
    args = ask_multiply(upstream, model, MANIFEST["tools"], api_key="throwaway", **extra)
    args["api_base"] = upstream.root_url + "/v2/chat"
    return args


def _whole(args: dict[str, Any], *, asynchronous: bool = False) -> Any:
    if asynchronous:
        return asyncio.run(litellm.acompletion(**args))
    return litellm.completion(**args)


def _released(result: Any) -> list[dict[str, Any]]:
    calls = result.choices[0].message.tool_calls or []
    return [
        {"call_id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in calls
    ]


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", COHERE.whole)
def test_every_whole_body_sync_under_the_callback(
    upstream: FakeUpstream, name: str, model: str
) -> None:
    case = CASES[name]
    upstream.enqueue(Scripted(COHERE.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    try:
        result = _whole(_args(upstream, model))
    except Exception as exc:
        error: Exception | None = exc
    else:
        error = None
    assert len(upstream.requests) == sent + 1
    assert upstream.requests[-1]["model"] == "command-a-03-2025"
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _released(result) == case["calls"]
        return
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    assert error is not None
    no_leak(error)


def _refused_unsent(upstream: FakeUpstream, call: Any, reason: str) -> None:
    sent = len(upstream.requests)
    with pytest.raises(WireNotObservable) as info:  # RouteNotGated, or the sync refusal
        call()
    assert reason in str(info.value)
    assert len(upstream.requests) == sent


@pytest.mark.usefixtures("gate")
def test_a_streamed_call_under_the_callback_is_refused_unsent(upstream: FakeUpstream) -> None:
    reason = "reads each SSE line as bare JSON"
    args = _args(upstream, stream=True)
    _refused_unsent(upstream, lambda: list(litellm.completion(**args)), reason)


@pytest.mark.usefixtures("gate")
def test_an_async_call_under_the_callback_is_refused_unsent(upstream: FakeUpstream) -> None:
    args = _args(upstream)
    _refused_unsent(upstream, lambda: _whole(args, asynchronous=True), "drops the call's client=")


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_toolgate_is_refused_unsent(upstream: FakeUpstream, asynchronous: bool) -> None:
    gate = ToolGate(MANIFEST["tools"])
    args = _args(upstream)
    try:
        if asynchronous:
            call: Any = lambda: asyncio.run(gate.acompletion(**args))  # noqa: E731
        else:
            call = lambda: gate.completion(**args)  # noqa: E731
        _refused_unsent(upstream, call, "drops the call's client=")
    finally:
        gate.close()


@pytest.mark.usefixtures("gate")
def test_a_v1_model_and_the_responses_api_are_refused_unsent(upstream: FakeUpstream) -> None:
    args = _args(upstream, "cohere/v1/command-r")
    _refused_unsent(upstream, lambda: _whole(args), "Cohere's v1 chat API")
    request = {"model": MODELS[0], "api_base": args["api_base"]}
    with pytest.raises(RouteNotGated, match="bridges the Responses API to chat"):
        route_for(request, Api.RESPONSES, callback=True)


def test_the_reasons_hold_for_this_litellm(upstream: FakeUpstream) -> None:
    """Without any gate: litellm's stream reader fails on a good Cohere stream, and a
    ``client=`` handed to a Cohere call carries nothing (the request goes over litellm's own
    client). If either stops holding, the route's refusals must be revisited."""
    saved = litellm.callbacks
    litellm.callbacks = []
    try:
        upstream.enqueue(Scripted(COHERE.body("multiply_basic")))
        with pytest.raises(Exception, match=r"(?i)pars"):
            list(litellm.completion(**_args(upstream, stream=True)))

        class Counting(HTTPHandler):
            used = 0

            def post(self, *args: Any, **kwargs: Any) -> Any:
                Counting.used += 1
                return super().post(*args, **kwargs)

        client = Counting()
        upstream.enqueue(Scripted(COHERE.body("whole_multiply"), content_type="application/json"))
        result = litellm.completion(**_args(upstream), client=client)
        assert Counting.used == 0
        assert _released(result) == CASES["whole_multiply"]["calls"]
    finally:
        litellm.callbacks = saved
    table = ROUTES["cohere"].chat
    assert table.streams is not None and table.unclaimed is not None


def test_litellm_parse_of_a_whole_body_keeps_the_wire_s_calls() -> None:
    body = json.loads(COHERE.body("whole_two_calls"))
    carrier = litellm_parse(MODELS[0])([body], False)
    assert not carrier.foreign
    wanted = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["whole_two_calls"]["calls"]]
    got = [(c.call_id, c.name, c.arguments) for _, c in sorted(carrier.calls.items())]
    assert got == wanted
    assert carrier.finish_reason in ("tool_calls", "stop")  # 1.110.2 maps it; 1.108.7 sets none
    assert CANARY not in repr(carrier)
