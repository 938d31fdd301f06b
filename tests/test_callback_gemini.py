"""``ToolGateGuardrail`` in ``litellm.callbacks`` on Gemini's ``generateContent`` wire, real
litellm on loopback.

``litellm.completion`` / ``litellm.acompletion`` with ``model="gemini/..."`` (and Gemini
models on ``vertex_ai/``), for every recording of ``fixtures/gemini``: streamed and whole,
sync and async. A sync whole call is claimed on the handler litellm's Gemini handler takes
from its cache by the call's timeout, after the hooks, and its body is judged while
litellm's request reads it, since litellm parses it before its post-call hook (see below).
The callback withholds
the wire itself and lets litellm parse what it releases; since litellm re-shapes Gemini's
calls (it makes its own ids, and numbers calls over the messages itself), litellm's own Gemini
parser is run over the held body and its calls are cross-checked with the wire, by position,
name and arguments, before anything goes out. The outcome is the manifest's, which is what
``ToolGate`` gives for the same bodies (tests/test_gate_gemini.py). A released call is the
wire's call as a caller assembles litellm's chunks by tool index; a refusal hands out no tool
call and no argument text.
"""

from __future__ import annotations

import asyncio
import gc
import json
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import pytest
from conftest import CANARY
from loopback import ask_multiply, call
from vertexauth import GEMINI_MODEL, long_decode, vertex_args
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.wires import WIRES
from litellm_toolgate.edge.parsers import UNPARSED, litellm_parse
from litellm_toolgate.edge.sync import claiming
from litellm_toolgate.edge.sync.refusal import UngatedCallRefused
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_header

litellm.suppress_debug_info = True
R = QuarantineReason
GEMINI = Fixtures("gemini")
MANIFEST, CASES = GEMINI.manifest, GEMINI.cases
MODEL = "gemini/gemini-2.5-flash"
# The route's model and the arguments it needs: gemini/ and vertex_ai/ (Gemini's wire both,
# Vertex with a Google token from the loopback token endpoint of tests/vertexauth.py).
ROUTES = {
    "gemini": (MODEL, {"api_key": "k"}),
    "vertex_ai": (GEMINI_MODEL, vertex_args()),
}


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


def _call(
    upstream: FakeUpstream, *, asynchronous: bool, stream: bool, route: str = "gemini"
) -> tuple[list[Any], Any]:
    """What ``litellm.completion`` / ``acompletion`` handed out, and the error, if any."""
    model, extra = ROUTES[route]
    args = ask_multiply(upstream, model, MANIFEST["tools"], stream=stream, **extra)
    return call(
        litellm.completion,
        litellm.acompletion,
        args,
        asynchronous=asynchronous,
        stream=stream,
        catch=Exception,
    )


def _assembled(chunks: list[Any]) -> list[tuple[str | None, str]]:
    """(name, arguments) per tool index, as a caller assembles litellm's chunks."""
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, ""])
                call[0] = call[0] or tc.function.name
                call[1] += tc.function.arguments or ""
    return [(c[0], c[1]) for _, c in sorted(calls.items())]


def _wanted(case: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(c["name"], json.loads(c["arguments"])) for c in case["calls"]]


def _refused(error: BaseException | None, case: dict[str, Any]) -> None:
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


STREAMED = [
    pytest.param("gemini", name, a, id=f"{name}-{'async' if a else 'sync'}")
    for name in GEMINI.streamed
    for a in (False, True)
] + [
    # vertex_ai/: each recording once, sync and async by turns; the good one both ways.
    pytest.param("vertex_ai", name, a, id=f"vertex-{name}-{'async' if a else 'sync'}")
    for i, name in enumerate(GEMINI.streamed)
    for a in ([False, True] if name == "multiply_basic" else [bool(i % 2)])
]


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(("route", "name", "asynchronous"), STREAMED)
def test_every_streamed_fixture(
    upstream: FakeUpstream, route: str, name: str, asynchronous: bool
) -> None:
    case = CASES[name]
    upstream.enqueue(Scripted(GEMINI.body(name), chunk_sizes=[1, 7, 13, 2, 64]))
    chunks, error = _call(upstream, asynchronous=asynchronous, stream=True, route=route)
    assert "contents" in upstream.requests[-1]
    calls = _assembled(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert [(n, json.loads(a)) for n, a in calls] == _wanted(case)
        text = "".join(
            (getattr(c.choices[0].delta, "reasoning_content", None) or "")
            + (c.choices[0].delta.content or "")
            for c in chunks
            if c.choices
        )
        assert text == case["text"]
        if calls:
            finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
            assert [f for f in finishes if f] == ["tool_calls"]
    else:
        assert error is not None, f"{name}: released {calls}"
        _refused(error, case)
        assert calls == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", GEMINI.whole)
def test_every_whole_body(
    upstream: FakeUpstream, name: str, route: str, asynchronous: bool
) -> None:
    case = CASES[name]
    upstream.enqueue(Scripted(GEMINI.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    out, error = _call(upstream, asynchronous=asynchronous, stream=False, route=route)
    assert len(upstream.requests) == sent + 1 and "contents" in upstream.requests[-1]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == _wanted(case)
    else:
        _refused(error, case)
        # The quarantine itself, sync and async, never an error litellm's Gemini parse
        # made of it (sync: raised while litellm's request read the body).
        assert isinstance(error, ToolCallQuarantined), repr(error)
        assert out == []


# Whole bodies the gate refuses on the wire itself, each carrying the canary (at "@@").
_REFUSED_WHOLE = {
    name: body.replace("@@", CANARY).encode()
    for name, body in {
        "duplicate_key": (
            '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
            '{"name": "multiply", "args": {"a": 7, "a": 8, "b": "@@"}}}]}, '
            '"finishReason": "STOP", "index": 0}]}'
        ),
        "without_finish": (
            '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
            '{"name": "multiply", "args": {"a": 7, "b": "@@"}}}]}, "index": 0}]}'
        ),
        "cut": (
            '{"candidates": [{"content": {"role": "model", "parts": [{"functionCall": '
            '{"name": "multiply", "args": {"a": 7, "b": "@@'
        ),
        "not_json": "@@ is no JSON",
        "error_body": '{"error": {"code": 500, "message": "@@", "status": "INTERNAL"}}',
    }.items()
}


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", _REFUSED_WHOLE)
def test_a_whole_body_refused_on_the_wire_reaches_the_caller_as_the_quarantine(
    upstream: FakeUpstream, name: str, route: str, asynchronous: bool
) -> None:
    """Issue 38, 12: the gate's own exception, sync and async, never litellm's
    ``BadRequestError`` made of it by its Gemini parse; nothing of the body in it."""
    upstream.enqueue(Scripted(_REFUSED_WHOLE[name], content_type="application/json"))
    out, error = _call(upstream, asynchronous=asynchronous, stream=False, route=route)
    assert isinstance(error, ToolCallQuarantined), repr(error)
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__
    assert out == []


class _Served:
    """The upstream's answers, and the claim marker each request arrived with."""

    def __init__(self, *bodies: Scripted) -> None:
        self.bodies = list(bodies)
        self.markers: list[str | None] = []

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.markers.append(request_header(claiming.MARKER))
        return self.bodies.pop(0)


def _forget_timeout_handlers() -> None:
    """Drop the handlers litellm's cache keeps by timeout, so that the next call's is made
    after its hooks ran (as on a process's first call with that timeout)."""
    table = litellm.in_memory_llm_clients_cache.cache_dict
    for key in [k for k in list(table) if str(k).startswith("httpx_clienttimeout_")]:
        table.pop(key, None)


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["whole_multiply", "whole_max_tokens"])
def test_a_sync_whole_call_is_claimed_on_the_handler_litellm_takes_after_the_hooks(
    name: str, route: str
) -> None:
    """litellm's Gemini handler sends a sync whole call on the handler its cache keeps for
    the call's timeout (as an ``httpx.Timeout``), taken after the hooks ran: on a timeout no
    call used before, it does not exist yet when the call is armed. The gate makes it with
    litellm's own code under that very key and claims it: the request reaches the upstream
    once, through the claiming transport (the marker taken out), and a broken answer is the
    typed quarantine, raised before litellm parsed any of it (it would hand over a call cut
    by ``MAX_TOKENS``)."""
    timeout = 37.5
    key = f"httpx_clienttimeout_{httpx.Timeout(timeout)}"
    _forget_timeout_handlers()
    served = _Served(Scripted(GEMINI.body(name), content_type="application/json"))
    with FakeUpstream(served) as own:
        model, extra = ROUTES[route]
        args = ask_multiply(own, model, MANIFEST["tools"], timeout=timeout, **extra)
        out: list[Any] = []
        try:
            out.append(litellm.completion(**args))
            error: Exception | None = None
        except Exception as exc:
            error = exc
        assert len(own.requests) == 1 and served.markers == [None]
    handler = litellm.in_memory_llm_clients_cache.cache_dict.get(key)
    assert handler is not None and isinstance(handler.client._transport, claiming.ClaimingTransport)
    case = CASES[name]
    if case["expect"] == "release":
        assert error is None, repr(error)
        calls = out[0].choices[0].message.tool_calls
        assert [(c.function.name, json.loads(c.function.arguments)) for c in calls] == (
            _wanted(case)
        )
    else:
        assert isinstance(error, ToolCallQuarantined), repr(error)
        _refused(error, case)
        assert out == []


class _Hooked:
    """A callback whose log_pre_api_call runs ``act``, taken out of every list of litellm's
    afterwards."""

    def __init__(self, act: Any) -> None:
        from litellm.integrations.custom_logger import CustomLogger

        class Hook(CustomLogger):  # type: ignore[misc]
            def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
                act()

        self.callback = Hook()

    def __enter__(self) -> Any:
        return self.callback

    def __exit__(self, *exc: object) -> None:
        for name in dir(litellm):
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not self.callback]
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("route", ROUTES)
def test_a_sync_call_refused_in_its_hook_is_refused_typed_and_unsent(
    route: str, stream: bool
) -> None:
    """A sync call refused in log_pre_api_call (here: its gate closed by a callback after
    litellm's call set-up passed it): the claiming transport answers its request unsent (a
    whole one on the timeout-keyed handler the gate made for it), and the caller gets the
    typed refusal: a whole one raised while litellm's request reads the answer, not an error
    litellm's Gemini parse makes of it; a stream's (asked for by the path
    ``:streamGenerateContent``, not the body) where litellm first reads it."""
    # Gates an earlier test of this file dropped without closing are put back when
    # collected: collect them now, so that what this test's gate changed is all there is to
    # put back (those an earlier file left open are closed when it ended: conftest.py).
    gc.collect()
    assert claiming.INSTALLATION.gates == 0
    made = ToolGateGuardrail(MANIFEST["tools"])
    _forget_timeout_handlers()
    with FakeUpstream() as own, _Hooked(made.close) as closing:
        own.enqueue(Scripted(GEMINI.body("whole_multiply"), content_type="application/json"))
        model, extra = ROUTES[route]
        args = ask_multiply(own, model, MANIFEST["tools"], timeout=39.5, stream=stream, **extra)
        saved = litellm.callbacks
        litellm.callbacks = [closing, made]
        try:
            with pytest.raises(UngatedCallRefused, match="closed"):
                answer = litellm.completion(**args)
                if stream:
                    for _chunk in answer:
                        raise AssertionError("a chunk of a refused call reached the caller")
        finally:
            litellm.callbacks = saved
        assert own.requests == []
    assert claiming.INSTALLATION.gates == 0 and claiming.INSTALLATION.wrapped == 0


@pytest.mark.parametrize("route", ROUTES)
def test_a_handler_evicted_after_the_hooks_ends_in_the_last_resort(route: str) -> None:
    """litellm's cache drops the handler the gate claimed between the gate's hook and the
    send (here: a callback after the gate empties it), so the call goes out on a handler the
    gate never saw, and litellm parses the whole body before its post-call hook: no answer
    is left there that a refusal could be put into. The check after the headers ends the
    call in the last resort, SyncCallStopped (carrying the typed refusal): nothing of the
    answer is handed over."""
    made = ToolGateGuardrail(MANIFEST["tools"])
    cache = litellm.in_memory_llm_clients_cache
    with FakeUpstream() as own, _Hooked(cache.flush_cache) as evicting:
        own.enqueue(Scripted(GEMINI.body("whole_multiply"), content_type="application/json"))
        model, extra = ROUTES[route]
        args = ask_multiply(own, model, MANIFEST["tools"], **extra)
        saved = litellm.callbacks
        litellm.callbacks = [made, evicting]
        out: list[Any] = []
        try:
            with pytest.raises(claiming.SyncCallStopped, match="cannot see") as stopped:
                out.append(litellm.completion(**args))
        finally:
            litellm.callbacks = saved
            made.close()
        assert len(own.requests) == 1  # it went out, on the handler the gate never saw
    assert isinstance(stopped.value.refusal, UngatedCallRefused)
    assert out == [] and len(claiming.CLAIMS) == 0


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_call_without_args_is_refused_as_toolgate_refuses_it(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """The core reads a call without ``args`` as ``{}``; litellm fails on it (``KeyError``) on
    both versions, so its parse matches no wire: ``carrier_mismatch``, as through ``ToolGate``
    (test_gate_gemini), with nothing handed out."""
    message = {
        "candidates": [
            {
                "content": {"parts": [{"functionCall": {"name": "now"}}], "role": "model"},
                "finishReason": "STOP",
            }
        ]
    }
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]
    gate = ToolGateGuardrail(tools)
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        upstream.enqueue(Scripted(b"data: " + json.dumps(message).encode() + b"\r\n\r\n"))
        args = ask_multiply(upstream, MODEL, tools, stream=True, api_key="k")
        chunks: list[Any] = []

        async def go() -> None:
            async for chunk in await litellm.acompletion(**args):
                chunks.append(chunk)

        with pytest.raises(Exception) as caught:
            if asynchronous:
                asyncio.run(go())
            else:
                for chunk in litellm.completion(**args):
                    chunks.append(chunk)
    finally:
        litellm.callbacks = saved
        gate.close()
    fault = find_quarantine(caught.value)
    assert isinstance(fault, ToolCallQuarantined), repr(caught.value)
    assert fault.reason is R.CARRIER_MISMATCH
    assert _assembled(chunks) == []


# ---- the parse the callback runs over a held body, on its own ----------------------------------
def _values(name: str) -> list[Any]:
    body = GEMINI.body(name).replace(b"\r\n", b"\n")
    return [json.loads(line[5:]) for line in body.split(b"\n") if line.startswith(b"data:")]


def test_litellm_parse_of_a_stream_is_litellm_s_gemini_parser() -> None:
    """litellm's Gemini config names no stream parser; the parse builds the iterator litellm's
    Gemini stream calls build, and ends the stream as litellm's stream wrapper does (the
    parser marks a finish reason on every chunk as a passing one)."""
    carrier = litellm_parse(MODEL)(_values("two_calls_two_messages"), True)
    assert not carrier.foreign and carrier.finish_reason == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in carrier.calls.values()] == [
        ("multiply", {"a": 7, "b": 8}),
        ("multiply", {"a": 2, "b": 3}),
    ]
    assert all(c.call_id and c.call_id.startswith("call_") for c in carrier.calls.values())
    text = litellm_parse(MODEL)(_values("text_cut_by_max_tokens"), True)
    assert text.finish_reason == "length" and not text.calls


def test_litellm_parse_of_a_whole_body() -> None:
    body = json.loads(GEMINI.body("whole_multiply"))
    carrier = litellm_parse(MODEL)([body], False)
    assert carrier.finish_reason == "tool_calls" and not carrier.foreign
    assert [c.name for c in carrier.calls.values()] == ["multiply"]


def test_litellm_parse_fails_closed() -> None:
    """A body litellm's Gemini parser fails on (an error object, a call without args, a whole
    body without usage): a carrier that matches no wire, never litellm's error quoting it."""
    error = {"error": {"code": 500, "message": CANARY, "status": "INTERNAL"}}
    assert litellm_parse(MODEL)([error], True) is UNPARSED
    no_args = {"candidates": [{"content": {"parts": [{"functionCall": {"name": "now"}}]}}]}
    assert litellm_parse(MODEL)([no_args], True) is UNPARSED
    assert litellm_parse(MODEL)([json.loads(GEMINI.body("whole_without_finish"))], False) is (
        UNPARSED
    )
    assert WIRES[Wire.GEMINI].reparsed


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_legacy_functions_are_refused_as_toolgate_refuses_them(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """Asked with legacy ``functions``, litellm's Gemini parser hands a call over as a
    ``function_call`` (finish ``stop``), which no wire check maps: the parse the callback runs
    is told so, and the call is refused ``carrier_mismatch``, as through ``ToolGate``."""
    upstream.enqueue(Scripted(GEMINI.body("multiply_basic")))
    args = ask_multiply(upstream, MODEL, [], stream=True, api_key="k")
    del args["tools"]
    args["functions"] = [MANIFEST["tools"][0]["function"]]
    chunks: list[Any] = []

    async def go() -> None:
        async for chunk in await litellm.acompletion(**args):
            chunks.append(chunk)

    with pytest.raises(Exception) as caught:
        if asynchronous:
            asyncio.run(go())
        else:
            for chunk in litellm.completion(**args):
                chunks.append(chunk)
    fault = find_quarantine(caught.value)
    assert isinstance(fault, ToolCallQuarantined), repr(caught.value)
    assert fault.reason is R.CARRIER_MISMATCH
    assert not any(c.choices and c.choices[0].delta.function_call for c in chunks)
    assert _assembled(chunks) == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_vertex_long_decode_hops_are_refused(asynchronous: bool) -> None:
    """An answer in two hops (Vertex's ``CONTINUATION`` and a ``continuationToken``, which
    plain litellm follows with a second request and splices, handing over the second hop's
    call: test_gate_gemini): the callback withholds the first hop whole, and its finish is
    none a call or a finished answer is released under, so it is refused there
    (``finish_reason_mismatch``) and the second hop is never asked for."""
    with FakeUpstream() as own:
        paths = long_decode(own)
        args = ask_multiply(own, GEMINI_MODEL, MANIFEST["tools"][:1], **vertex_args())
        args.update(stream=True, max_tokens=1000)
        chunks: list[Any] = []

        async def go() -> None:
            async for chunk in await litellm.acompletion(**args):
                chunks.append(chunk)

        with pytest.raises(Exception) as caught:
            if asynchronous:
                asyncio.run(go())
            else:
                chunks.extend(litellm.completion(**args))
    fault = find_quarantine(caught.value)
    assert isinstance(fault, ToolCallQuarantined), repr(caught.value)
    assert fault.reason is R.FINISH_REASON_MISMATCH
    assert len(paths) == 1 and _assembled(chunks) == []


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_sync_call_takes_the_request_s_own_tools(upstream: FakeUpstream, stream: bool) -> None:
    """With ``tools="request"`` the registry is the call's own tools, as the caller passed
    them (litellm's logging keeps them), not the Gemini-shaped declarations of the body
    litellm logs: a good call is released."""
    made = ToolGateGuardrail("request")
    saved = litellm.callbacks
    litellm.callbacks = [made]
    try:
        if stream:
            upstream.enqueue(Scripted(GEMINI.body("multiply_basic")))
        else:
            upstream.enqueue(
                Scripted(GEMINI.body("whole_multiply"), content_type="application/json")
            )
        out, error = _call(upstream, asynchronous=False, stream=stream)
    finally:
        litellm.callbacks = saved
        made.close()
    assert error is None, repr(error)
    calls = (
        _assembled(out)
        if stream
        else [(c.function.name, c.function.arguments) for c in out[0].choices[0].message.tool_calls]
    )
    assert [(n, json.loads(a)) for n, a in calls] == [("multiply", {"a": 7, "b": 8})]
