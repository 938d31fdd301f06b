"""Cohere's v2 chat (``cohere/``, ``cohere_chat/``) through the real litellm on loopback.

What the gate does on the route, and why (``edge/routes.py``, ``docs/cohere.md``):

* a whole (``stream=False``) call is gated on every entry point: ``ToolGate`` (sync and
  async) and ``litellm.callbacks`` (sync and async); every whole body of ``fixtures/cohere``
  gives the manifest's outcome (the exact calls released under the wire's ids, or
  ``ToolCallQuarantined`` with the manifest's reason, no call handed out and no argument
  text in the error); litellm's result is cross-checked with the wire;
* litellm's Cohere handler drops the call's ``client=`` (shown here without the gate), so
  the gate claims litellm's own client for each call by a one-time token in the call's
  ``extra_headers`` (``sync/tokenclaim.py``; the sync callback by its own marker): the token
  never reaches the upstream, two concurrent calls are each decided on their own wire, an
  unrelated call on the same client is not touched, and a call whose request went out on a
  client the gate did not claim is refused, its answer never handed over;
* a streamed call is refused before anything is sent: litellm's reader of Cohere's stream
  takes each SSE line as bare JSON and fails on every real stream (shown here, without the
  gate, on a good recording);
* a client handed to the caller (``gate.http_client``), a ``cohere/v1/...`` model (Cohere's
  v1 chat, another wire) and the Responses API are refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from litellm.integrations.custom_logger import CustomLogger
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
from litellm_toolgate.edge.sync import claiming, tokenclaim
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_header

litellm.suppress_debug_info = True
R = QuarantineReason
COHERE = Fixtures("cohere")
MANIFEST, CASES = COHERE.manifest, COHERE.cases
MODELS = ["cohere/command-a-03-2025", "cohere_chat/command-a-03-2025"]
MODES = ["callback-sync", "callback-async", "toolgate-sync", "toolgate-async"]
BROKEN = [name for name in COHERE.whole if CASES[name]["expect"] != "release"]


class Served:
    """What the upstream answers next (queued, or by the request's last message), and the
    gate's headers each request arrived with (none may reach it)."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.by_message: dict[str, Scripted] = {}
        self.tokens: list[str | None] = []
        self.markers: list[str | None] = []
        self.barrier: threading.Barrier | None = None

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.tokens.append(request_header(tokenclaim.TOKEN_HEADER))
        self.markers.append(request_header(claiming.MARKER))
        if self.barrier is not None:
            self.barrier.wait(timeout=60)  # every concurrent request is in flight at once
        text = str(payload["messages"][-1].get("content"))
        if text in self.by_message:
            return self.by_message[text]
        return self.queue.popleft()


@pytest.fixture(scope="module")
def served() -> Served:
    return Served()


@pytest.fixture(scope="module")
def upstream(served: Served) -> Iterator[FakeUpstream]:
    with FakeUpstream(served) as server:
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


def _run(mode: str, args: dict[str, Any]) -> Any:
    """One call of ``mode``: under a gate in ``litellm.callbacks``, or through a ToolGate."""
    if mode.startswith("toolgate"):
        toolgate = ToolGate(MANIFEST["tools"])
        try:
            if mode == "toolgate-async":
                return asyncio.run(toolgate.acompletion(**args))
            return toolgate.completion(**args)
        finally:
            toolgate.close()
    guardrail = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [guardrail]
    try:
        return _whole(args, asynchronous=mode == "callback-async")
    finally:
        litellm.callbacks = saved
        guardrail.close()


def _released(result: Any) -> list[dict[str, Any]]:
    calls = result.choices[0].message.tool_calls or []
    return [
        {"call_id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in calls
    ]


def _outcome(call: Callable[[], Any]) -> tuple[Any, Exception | None]:
    try:
        return call(), None
    except Exception as exc:
        return None, exc


def _check(name: str, result: Any, error: Exception | None) -> None:
    """The manifest's outcome: the exact calls, or the quarantine with nothing handed out
    and no argument text in the error."""
    case = CASES[name]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _released(result) == case["calls"]
        return
    assert result is None
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    assert error is not None
    no_leak(error)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("name", COHERE.whole)
def test_every_whole_body_on_every_entry_point(
    upstream: FakeUpstream, served: Served, name: str, model: str, mode: str
) -> None:
    served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    result, error = _outcome(lambda: _run(mode, _args(upstream, model)))
    assert len(upstream.requests) == sent + 1
    assert upstream.requests[-1]["model"] == "command-a-03-2025"
    # The gate's token (or the sync callback's marker) never reaches the upstream.
    assert served.tokens[-1] is None and served.markers[-1] is None
    _check(name, result, error)


@pytest.mark.parametrize("mode", ["callback-async", "toolgate-sync", "toolgate-async"])
def test_no_argument_text_reaches_a_log_or_an_error(
    upstream: FakeUpstream, served: Served, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The broken recordings whose arguments carry the canary: not in any error, its chain,
    its records or any log line."""
    for name in ("whole_schema_invalid", "whole_unknown_tool"):
        assert CANARY in COHERE.body(name).decode()
        served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
        result, error = _outcome(lambda: _run(mode, _args(upstream)))
        _check(name, result, error)
    assert CANARY not in caplog.text


def _refused_unsent(upstream: FakeUpstream, call: Any, reason: str) -> None:
    sent = len(upstream.requests)
    with pytest.raises(WireNotObservable) as info:  # RouteNotGated, or the sync refusal
        call()
    assert reason in str(info.value)
    assert len(upstream.requests) == sent


_STREAMS = "reads each SSE line as bare JSON"


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_call_is_refused_unsent(upstream: FakeUpstream, mode: str) -> None:
    def call() -> Any:
        result = _run(mode, _args(upstream, stream=True))
        if mode == "callback-sync":
            return list(result)
        return result

    _refused_unsent(upstream, call, _STREAMS)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_client_handed_to_the_caller_is_refused(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """litellm would drop it: a client the caller passes on itself cannot carry the call."""
    toolgate = ToolGate(MANIFEST["tools"])
    try:
        make = toolgate.async_http_client if asynchronous else toolgate.http_client
        with pytest.raises(RouteNotGated, match="drops the call's client="):
            make(model=MODELS[0], stream=False, api_base=upstream.root_url + "/v2/chat")
    finally:
        toolgate.close()


@pytest.mark.usefixtures("gate")
def test_a_v1_model_is_refused_unsent(upstream: FakeUpstream) -> None:
    args = _args(upstream, "cohere/v1/command-r")
    _refused_unsent(upstream, lambda: _whole(args), "Cohere's v1 chat API")


def _responses_args(upstream: FakeUpstream, **extra: Any) -> dict[str, Any]:
    tools = [{"type": "function", **t["function"]} for t in MANIFEST["tools"]]
    return {
        "model": MODELS[0],
        "input": "What is 7 times 8? Use multiply.",
        "tools": tools,
        "api_key": "throwaway",
        "api_base": upstream.root_url + "/v2/chat",
        **extra,
    }


def _respond(mode: str, args: dict[str, Any]) -> Any:
    """One Responses call of ``mode`` (litellm bridges it to a Cohere chat call)."""
    if mode.startswith("toolgate"):
        toolgate = ToolGate(MANIFEST["tools"])
        try:
            if mode == "toolgate-async":
                return asyncio.run(toolgate.aresponses(**args))
            return toolgate.responses(**args)
        finally:
            toolgate.close()
    guardrail = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [guardrail]
    try:
        if mode == "callback-async":
            return asyncio.run(litellm.aresponses(**args))
        return litellm.responses(**args)
    finally:
        litellm.callbacks = saved
        guardrail.close()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", COHERE.whole)
def test_every_whole_body_through_the_responses_api(
    upstream: FakeUpstream, served: Served, name: str, mode: str
) -> None:
    """litellm bridges the Responses API to a Cohere chat call and keeps each call's id as
    its function-call item's call_id: the items are cross-checked with the wire."""
    case = CASES[name]
    served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    result, error = _outcome(lambda: _respond(mode, _responses_args(upstream)))
    assert len(upstream.requests) == sent + 1
    assert served.tokens[-1] is None and served.markers[-1] is None
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert result.status == "completed"
        items = [o for o in result.output if getattr(o, "type", None) == "function_call"]
        got = [{"call_id": o.call_id, "name": o.name, "arguments": o.arguments} for o in items]
        assert got == case["calls"]
        return
    assert result is None
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    assert error is not None
    no_leak(error)


@pytest.mark.parametrize("mode", MODES)
def test_a_streamed_responses_call_is_refused_unsent(upstream: FakeUpstream, mode: str) -> None:
    def call() -> Any:
        result = _respond(mode, _responses_args(upstream, stream=True))
        if mode == "callback-sync":
            return list(result)
        return result

    _refused_unsent(upstream, call, _STREAMS)
    request = {"model": MODELS[0], "api_base": upstream.root_url, "stream": True}
    with pytest.raises(RouteNotGated, match="bare JSON"):
        route_for(request, Api.RESPONSES, callback=True)


@pytest.mark.parametrize("mode", ["callback-async", "toolgate-sync", "toolgate-async"])
def test_a_messages_call_is_refused_unsent(upstream: FakeUpstream, mode: str) -> None:
    """litellm bridges ``/v1/messages`` on a Cohere model to chat, over a wire that is not
    chat-completions: the request is refused before it is sent (``route_not_gated``)."""
    tools = [
        {
            "name": t["function"]["name"],
            "description": t["function"].get("description", ""),
            "input_schema": t["function"]["parameters"],
        }
        for t in MANIFEST["tools"]
    ]
    args = {
        "model": MODELS[0],
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": tools,
        "max_tokens": 100,
        "api_key": "throwaway",
        "api_base": upstream.root_url + "/v2/chat",
    }
    sent = len(upstream.requests)
    toolgate = ToolGate(MANIFEST["tools"])
    guardrail = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    try:
        if mode == "toolgate-sync":
            result, error = _outcome(lambda: toolgate.messages(**args))
        elif mode == "toolgate-async":
            result, error = _outcome(lambda: asyncio.run(toolgate.amessages(**args)))
        else:
            litellm.callbacks = [guardrail]
            call = litellm.anthropic.messages.acreate(**args)
            result, error = _outcome(lambda: asyncio.run(call))
    finally:
        litellm.callbacks = saved
        guardrail.close()
        toolgate.close()
    assert result is None and len(upstream.requests) == sent
    fault = find_quarantine(error)
    assert fault is not None and fault.reason is R.ROUTE_NOT_GATED, repr(error)


@pytest.mark.parametrize("mode", ["callback-async", "toolgate-async", "toolgate-sync"])
def test_concurrent_calls_are_each_decided_on_their_own_wire(
    upstream: FakeUpstream, served: Served, mode: str
) -> None:
    """Five calls in flight at once on litellm's one cached Cohere client, each decided on
    its own wire (async: one event loop; ``ToolGate``'s sync calls: one thread each).
    Through ``ToolGate`` the fifth is a plain litellm call (no gate): it gets its answer as
    plain litellm hands it over (the claimed client tapped nothing of it); under the
    callback it is gated like the others."""
    names = ["whole_multiply", "whole_duplicate_key", "whole_two_calls", "whole_max_tokens"]
    for i, name in enumerate(names):
        served.by_message[f"call {i}"] = Scripted(
            COHERE.body(name), content_type="application/json"
        )
    served.by_message["plain"] = Scripted(
        COHERE.body("whole_duplicate_key"), content_type="application/json"
    )
    toolgate = ToolGate(MANIFEST["tools"])
    guardrail = ToolGateGuardrail(MANIFEST["tools"])

    def ask(i: int | None) -> dict[str, Any]:
        text = "plain" if i is None else f"call {i}"
        args = _args(upstream)
        args["messages"] = [{"role": "user", "content": text}]
        return args

    async def gated(i: int) -> Any:
        if mode == "toolgate-async":
            return await toolgate.acompletion(**ask(i))
        return await litellm.acompletion(**ask(i))

    async def everything() -> list[Any]:
        calls = [gated(i) for i in range(len(names))]
        calls.append(litellm.acompletion(**ask(None)))
        return await asyncio.gather(*calls, return_exceptions=True)

    def in_threads() -> list[Any]:
        # ToolGate's sync calls, one thread each, and a plain litellm call beside them.
        def one(i: int | None) -> Any:
            call = litellm.completion if i is None else toolgate.completion
            try:
                return call(**ask(i))
            except Exception as exc:
                return exc

        with ThreadPoolExecutor(len(names) + 1) as pool:
            return list(pool.map(one, [*range(len(names)), None]))

    saved = litellm.callbacks
    if mode == "callback-async":
        litellm.callbacks = [guardrail]
    served.barrier = threading.Barrier(len(names) + 1)
    sent = len(served.tokens)
    try:
        results = in_threads() if mode == "toolgate-sync" else asyncio.run(everything())
    finally:
        served.barrier = None
        served.by_message.clear()
        litellm.callbacks = saved
        guardrail.close()
        toolgate.close()
    assert len(served.tokens) == sent + len(names) + 1
    assert served.tokens[sent:] == [None] * (len(names) + 1)
    for name, got in zip(names, results, strict=False):
        if isinstance(got, Exception):
            _check(name, None, got)
        else:
            _check(name, got, None)
    plain = results[-1]
    if mode == "callback-async":
        _check("whole_duplicate_key", None, plain)
        return
    assert not isinstance(plain, Exception), repr(plain)
    # Plain litellm hands over the duplicate key as it is: no gate read that wire.
    assert [c["name"] for c in _released(plain)] == ["multiply"]


class _Evicting(CustomLogger):  # type: ignore[misc]
    """Empties litellm's client cache right before the request is sent: litellm's handler
    then makes a new client, which the gate never claimed."""

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.mark.parametrize("mode", ["callback-async", "toolgate-sync", "toolgate-async"])
def test_a_call_sent_on_a_client_the_gate_did_not_claim_is_refused(
    upstream: FakeUpstream, served: Served, mode: str
) -> None:
    evicting = _Evicting()
    litellm.callbacks = [evicting]
    served.queue.append(Scripted(COHERE.body("whole_multiply"), content_type="application/json"))
    try:
        if mode == "callback-async":
            guardrail = ToolGateGuardrail(MANIFEST["tools"])
            litellm.callbacks = [evicting, guardrail]
            try:
                result, error = _outcome(lambda: _whole(_args(upstream), asynchronous=True))
            finally:
                guardrail.close()
        else:
            result, error = _outcome(lambda: _run(mode, _args(upstream)))
    finally:
        litellm.callbacks = []
        # litellm copies callbacks into lists of its own: take the flusher out of all.
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if cb is not evicting]
    assert result is None, "the answer of an unclaimed request reached the caller"
    assert isinstance(error, WireNotObservable) or find_quarantine(error) is not None, error
    # It went out on litellm's new client, token and all (a meaningless one-time header).
    assert served.tokens[-1] is not None


def test_toolgate_and_the_sync_callback_share_litellm_s_client(
    upstream: FakeUpstream, served: Served
) -> None:
    """The sync callback claims litellm's cached sync client by its marker, ToolGate by its
    token, one layer around the other: each call is decided by its own gate, and the client
    gets its own transport back once both are done."""
    from litellm_toolgate.edge.seam import privates
    from litellm_toolgate.edge.seam.symbols import _get_httpx_client

    guardrail = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [guardrail]
    toolgate = ToolGate(MANIFEST["tools"])
    try:
        for name, call in (
            ("whole_multiply", litellm.completion),
            ("whole_duplicate_key", toolgate.completion),
            ("whole_two_calls", litellm.completion),
            ("whole_unknown_tool", toolgate.completion),
        ):
            served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
            result, error = _outcome(lambda: call(**_args(upstream)))  # noqa: B023
            _check(name, result, error)
            assert served.tokens[-1] is None and served.markers[-1] is None
    finally:
        litellm.callbacks = saved
        guardrail.close()
        toolgate.close()
    gc.collect()
    transport = privates.transport(_get_httpx_client(params={"ssl_verify": None}).client)
    layers = []
    while transport is not None:
        layers.append(type(transport).__name__)
        transport = getattr(transport, "inner", None)
    assert not {"ClaimingTransport", "TokenClaimingTransport"} & set(layers), layers


def test_the_claimed_clients_are_given_back() -> None:
    """Once no call's claim is alive, every client litellm's cache holds has its own
    transport again."""
    gc.collect()
    assert tokenclaim.wrapped() == 0


def test_the_reasons_hold_for_this_litellm(upstream: FakeUpstream, served: Served) -> None:
    """Without any gate: litellm's stream reader fails on a good Cohere stream, and a
    ``client=`` handed to a Cohere call carries nothing (the request goes over litellm's own
    client). If either stops holding, the route must be revisited."""
    saved = litellm.callbacks
    litellm.callbacks = []
    try:
        served.queue.append(Scripted(COHERE.body("multiply_basic")))
        with pytest.raises(Exception, match=r"(?i)pars"):
            list(litellm.completion(**_args(upstream, stream=True)))

        class Counting(HTTPHandler):
            used = 0

            def post(self, *args: Any, **kwargs: Any) -> Any:
                Counting.used += 1
                return super().post(*args, **kwargs)

        client = Counting()
        served.queue.append(
            Scripted(COHERE.body("whole_multiply"), content_type="application/json")
        )
        result = litellm.completion(**_args(upstream), client=client)
        assert Counting.used == 0
        assert _released(result) == CASES["whole_multiply"]["calls"]
    finally:
        litellm.callbacks = saved
    table = ROUTES["cohere"].chat
    assert table.streams is not None and getattr(table, "drops_client", False)


def test_litellm_parse_of_a_whole_body_keeps_the_wire_s_calls() -> None:
    body = json.loads(COHERE.body("whole_two_calls"))
    carrier = litellm_parse(MODELS[0])([body], False)
    assert not carrier.foreign
    wanted = [(c["call_id"], c["name"], c["arguments"]) for c in CASES["whole_two_calls"]["calls"]]
    got = [(c.call_id, c.name, c.arguments) for _, c in sorted(carrier.calls.items())]
    assert got == wanted
    assert carrier.finish_reason in ("tool_calls", "stop")  # 1.110.2 maps it; 1.108.7 sets none
    assert CANARY not in repr(carrier)
