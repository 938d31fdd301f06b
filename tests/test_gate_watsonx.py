"""watsonx.ai's chat (``watsonx/``) through the real litellm on loopback: ``ToolGate``
(``gate.completion`` / ``gate.acompletion``) and ``ToolGateGuardrail`` in
``litellm.callbacks`` (``litellm.completion`` / ``litellm.acompletion``), streamed and whole,
sync and async, every fixture of ``fixtures/watsonx``.

litellm calls ``POST {api_base}/ml/v1/text/chat_stream?version=...`` (``/ml/v1/text/chat``
for a whole result) through its OpenAI-like handler, which takes the gate's ``client=``; the
calls pass ``token=`` and ``project_id``, so litellm asks IBM's IAM for nothing (the loopback
server is the only address reached, one request a call). The gate must give the manifest's
outcome: the exact calls released under the wire's ids, or ``ToolCallQuarantined`` with the
manifest's reason and no tool call handed out. The Responses API (bridged to chat by litellm)
is gated the same way, and a request for several choices is refused before sending.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib.metadata import version
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import no_leak
from leakcheck import find_in_frames
from loopback import PLAIN_OUTCOMES, ask_multiply, call, plain_outcome, tool_calls
from test_gate_responses import collect
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    SyncCallStopped,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    UngatedCallRefused,
    WireNotObservable,
    find_quarantine,
)
from litellm_toolgate.edge.routes import Api, route_for
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
WATSONX = Fixtures("watsonx")
FIXTURES, MANIFEST, CASES = WATSONX.folder, WATSONX.manifest, WATSONX.cases
STREAMED, WHOLE = WATSONX.streamed, WATSONX.whole
MODEL = "watsonx/ibm/granite-3-3-8b-instruct"
SSE = "text/event-stream"
SPLITS = {"whole": None, "split": [1, 7, 13, 2, 64]}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture
def guardrail() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        gate.close()


def _args(upstream: FakeUpstream, *, stream: bool, **extra: Any) -> dict[str, Any]:
    # token=: litellm takes it as the bearer token and fetches none from IAM.
    return ask_multiply(
        upstream, MODEL, MANIFEST["tools"], stream=stream, token="tok", project_id="p", **extra
    )


def _streamed_calls(chunks: list[Any]) -> list[dict[str, Any]]:
    return [
        {"call_id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
        for tc in tool_calls(chunks)
    ]


def _assembled(chunks: list[Any]) -> list[dict[str, Any]]:
    """The calls as a caller assembles litellm's chunks (id and name from the first fragment
    that has them, the arguments joined), in tool index order."""
    calls: dict[int, dict[str, Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                c = calls.setdefault(tc.index, {"call_id": None, "name": None, "arguments": ""})
                c["call_id"] = c["call_id"] or tc.id
                c["name"] = c["name"] or tc.function.name
                c["arguments"] += tc.function.arguments or ""
    return [calls[i] for i in sorted(calls)]


def _whole_calls(result: Any) -> list[dict[str, Any]]:
    calls = result.choices[0].message.tool_calls or []
    return [
        {"call_id": c.id, "name": c.function.name, "arguments": c.function.arguments} for c in calls
    ]


def _text(chunks: list[Any]) -> str:
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def _refused(error: BaseException | None, case: dict[str, Any], handed: list[Any]) -> None:
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), f"{case['name']}: {error!r}"
    assert fault.reason is R(case["reason"]), f"{case['name']}: {fault.reason}"
    assert handed == [], f"{case['name']}: a call was handed out"
    assert error is not None
    no_leak(error)


def _served(upstream: FakeUpstream, name: str, split: str | None = None) -> int:
    streamed = CASES[name]["streamed"]
    sizes = SPLITS[split] if split else None
    content_type = SSE if streamed else "application/json"
    upstream.enqueue(Scripted(WATSONX.body(name), content_type=content_type, chunk_sizes=sizes))
    return len(upstream.requests)


TOOLGATE_STREAMED = [
    pytest.param(name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for name in STREAMED
    for a, s in ((False, "whole"), (True, "split"))
] + [
    pytest.param(name, a, s, id=f"{name}-{'async' if a else 'sync'}-{s}")
    for name in ("multiply_basic", "two_calls", "cut_after_finish_mid_usage")
    for a, s in ((True, "whole"), (False, "split"))
]


@pytest.mark.parametrize(("name", "asynchronous", "split"), TOOLGATE_STREAMED)
def test_toolgate_every_streamed_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool, split: str
) -> None:
    case = CASES[name]
    sent = _served(upstream, name, split)
    gate = ToolGate(MANIFEST["tools"])
    try:
        args = _args(upstream, stream=True)
        chunks, error = call(
            gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=True
        )
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1
    assert upstream.requests[-1]["stream"] is True
    assert upstream.requests[-1]["model_id"] == "ibm/granite-3-3-8b-instruct"
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _streamed_calls(chunks) == case["calls"]
        assert _text(chunks) == case["text"]
        if case["calls"]:
            assert chunks[-1].choices[0].finish_reason == "tool_calls"
    else:
        _refused(error, case, tool_calls(chunks))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", WHOLE)
def test_toolgate_every_whole_body(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = CASES[name]
    sent = _served(upstream, name)
    gate = ToolGate(MANIFEST["tools"])
    try:
        args = _args(upstream, stream=False)
        out, error = call(
            gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=False
        )
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1
    assert upstream.requests[-1].get("stream") in (False, None)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _whole_calls(out[0]) == case["calls"]
    else:
        _refused(error, case, [])


@pytest.mark.usefixtures("guardrail")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", STREAMED)
def test_callback_every_streamed_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool
) -> None:
    case = CASES[name]
    sent = _served(upstream, name, "split" if asynchronous else None)
    args = _args(upstream, stream=True)
    chunks, error = call(
        litellm.completion, litellm.acompletion, args, asynchronous=asynchronous, catch=Exception
    )
    assert len(upstream.requests) == sent + 1
    handed = _assembled(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert handed == case["calls"]
        assert _text(chunks) == case["text"]
    else:
        _refused(error, case, handed)


@pytest.mark.usefixtures("guardrail")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", WHOLE)
def test_callback_every_whole_body(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    """A sync whole call goes out through the client the gate gave it at set-up (the one
    litellm would build for that call alone), claimed."""
    case = CASES[name]
    sent = _served(upstream, name)
    args = _args(upstream, stream=False)
    out, error = call(
        litellm.completion,
        litellm.acompletion,
        args,
        asynchronous=asynchronous,
        stream=False,
        catch=Exception,
    )
    assert len(upstream.requests) == sent + 1
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert _whole_calls(out[0]) == case["calls"]
    else:
        _refused(error, case, [])


def test_the_route_is_gated_on_the_watsonx_wire() -> None:
    request = {"model": MODEL}
    chat = route_for(request, Api.CHAT)
    assert chat.wire.value == "watsonx" and not chat.bridged
    responses = route_for(request, Api.RESPONSES)
    assert responses.wire.value == "watsonx" and responses.bridged
    assert route_for(request, Api.CHAT, callback=True).wire.value == "watsonx"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_several_choices_are_refused_before_sending(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    """litellm's reader makes every choice choice 0: n > 1 cannot be gated on this wire."""
    sent = len(upstream.requests)
    gate = ToolGate(MANIFEST["tools"])
    try:
        args = _args(upstream, stream=True, n=2)
        _, error = call(
            gate.completion, gate.acompletion, args, asynchronous=asynchronous, stream=True
        )
    finally:
        gate.close()
    assert error is not None
    assert getattr(error, "reason", None) is R.UNSUPPORTED_REQUEST, repr(error)
    assert len(upstream.requests) == sent


TIMEOUTS = {
    "default": {},
    "timeout": {"timeout": 7},
    "request_timeout": {"request_timeout": 9.5},
    "httpx_timeout": {"timeout": httpx.Timeout(3.0, connect=2.0)},
}


def _timeout_sent(how: str, extra: dict[str, Any]) -> Any:
    """The timeout litellm's request for a sync whole watsonx call carried (httpx keeps it in
    the request's extensions), with no gate (``plain``), under the callback, or through
    ToolGate; respx answers at httpx's transport."""
    args = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
        "tools": MANIFEST["tools"],
        "api_base": "http://127.0.0.1:9",
        "num_retries": 0,
        "token": "tok",
        "project_id": "p",
        **extra,
    }
    answer = httpx.Response(
        200, content=WATSONX.body("whole_multiply"), headers={"content-type": "application/json"}
    )
    with respx.mock(assert_all_called=True) as router:
        route = router.post(url__startswith="http://127.0.0.1:9/").mock(return_value=answer)
        if how == "toolgate":
            gate = ToolGate(MANIFEST["tools"])
            try:
                result = gate.completion(**args)
            finally:
                gate.close()
        elif how == "callback":
            gate_ = ToolGateGuardrail(MANIFEST["tools"])
            saved = litellm.callbacks
            litellm.callbacks = [gate_]
            try:
                result = litellm.completion(**args)
            finally:
                litellm.callbacks = saved
                gate_.close()
        else:
            result = litellm.completion(**args)
        assert _whole_calls(result) == CASES["whole_multiply"]["calls"]
        return route.calls.last.request.extensions["timeout"]


@pytest.mark.parametrize("how", ["callback", "toolgate"])
@pytest.mark.parametrize("setting", list(TIMEOUTS))
def test_sync_whole_calls_keep_litellms_timeout(how: str, setting: str) -> None:
    """litellm sends a sync whole watsonx call through an HTTPHandler it builds for that call
    alone, with the call's timeout. The gate gives the call the same client (claimed, under
    the callback; tapped, through ToolGate): the request carries the timeout plain litellm's
    would."""
    extra = TIMEOUTS[setting]
    assert _timeout_sent(how, extra) == _timeout_sent("plain", extra)


@pytest.mark.usefixtures("guardrail")
def test_a_timeout_litellm_cannot_resolve_is_refused_unsent(upstream: FakeUpstream) -> None:
    """The gate builds the call's client with litellm's own timeout rule; where that rule
    fails on the call's timeout, the call is refused before anything is sent."""
    sent = len(upstream.requests)
    with pytest.raises(UngatedCallRefused, match="could not build the same one"):
        litellm.completion(**_args(upstream, stream=False, timeout=[1]))
    gate = ToolGate(MANIFEST["tools"])
    try:
        with pytest.raises(WireNotObservable, match="cannot build the client"):
            gate.completion(**_args(upstream, stream=False, timeout=[1]))
    finally:
        gate.close()
    assert len(upstream.requests) == sent


def test_a_gate_in_a_calls_own_callbacks_stops_a_sync_whole_answer(upstream: FakeUpstream) -> None:
    """Handed to one call in its callbacks=, the gate's first hook runs after litellm decided
    on the client it builds for a sync whole call: the request goes out unclaimed. litellm
    parses that answer before its post-call hook, so the answer is stopped there, in the
    last resort (SyncCallStopped): nothing of it is handed over."""
    gate = ToolGateGuardrail(MANIFEST["tools"])
    sent = _served(upstream, "whole_schema_invalid")
    try:
        with pytest.raises(SyncCallStopped, match="cannot see") as stopped:
            litellm.completion(**_args(upstream, stream=False, callbacks=[gate]))
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1
    no_leak(stopped.value)
    # litellm's own post_call frame holds the body it read in a local of its own, which no
    # hook can reach; anything else of the call (its logging details included) holds none.
    found = find_in_frames(stopped.value)
    assert found == ["post_call@litellm_logging.py:original_response"], found


# ---- the Responses API, bridged to chat by litellm ---------------------------------------
FLAT_TOOLS = [{"type": "function", **t["function"]} for t in MANIFEST["tools"]]
THROUGH_THE_BRIDGE = {
    # litellm's bridge makes an incomplete response of text cut by the token limit, as on
    # every chat wire (ChatWire.carrier_fault): refused through ToolGate.
    "text_cut_by_length": "response_incomplete",
    # The call left without arguments (choices given twice): ToolGate's cross-check of the
    # bridge's items refuses it before the arguments are parsed.
    "chunk_with_duplicate_key": "carrier_mismatch",
}


def _responses_args(upstream: FakeUpstream, *, stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "input": "What is 7 times 8? Use multiply.",
        "tools": FLAT_TOOLS,
        "api_base": upstream.root_url,
        "token": "tok",
        "project_id": "p",
        "stream": stream,
        "num_retries": 0,
    }


def _items(out: list[Any], streamed: bool) -> list[dict[str, Any]]:
    if streamed:
        return collect(out)[1]
    output = out[0].output if out else []
    return [
        {"call_id": c.call_id, "name": c.name, "arguments": c.arguments}
        for c in output
        if getattr(c, "type", None) == "function_call"
    ]


def _responses_outcome(
    out: list[Any], error: BaseException | None, case: dict[str, Any], reason: str | None
) -> None:
    handed = _items(out, case["streamed"])
    if reason is None and case["expect"] == "release":
        assert error is None, f"{case['name']}: {error!r}"
        assert handed == case["calls"]
        return
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), f"{case['name']}: {error!r}"
    assert fault.reason is R(reason or case["reason"]), f"{case['name']}: {fault.reason}"
    assert handed == []
    assert error is not None
    no_leak(error)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", [*STREAMED, *WHOLE])
def test_toolgate_responses_every_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool
) -> None:
    case = CASES[name]
    sent = _served(upstream, name, "split" if asynchronous else None)
    gate = ToolGate(MANIFEST["tools"])
    try:
        out, error = call(
            gate.responses,
            gate.aresponses,
            _responses_args(upstream, stream=case["streamed"]),
            asynchronous=asynchronous,
            stream=case["streamed"],
        )
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1
    _responses_outcome(out, error, case, THROUGH_THE_BRIDGE.get(name))


CALLBACK_RESPONSES = [
    pytest.param(name, a, id=f"{name}-{'async' if a else 'sync'}")
    for name in STREAMED
    for a in (False, True)
] + [
    pytest.param(name, a, id=f"{name}-{'async' if a else 'sync'}")
    for name in WHOLE
    for a in (False, True)
]


@pytest.mark.usefixtures("guardrail")
@pytest.mark.parametrize(("name", "asynchronous"), CALLBACK_RESPONSES)
def test_callback_responses_every_fixture(
    upstream: FakeUpstream, name: str, asynchronous: bool
) -> None:
    """The callback withholds the chat wire under litellm's bridge: the wire's outcome (text
    cut by the token limit is released as the incomplete response litellm makes of it)."""
    case = CASES[name]
    sent = _served(upstream, name)
    args = _responses_args(upstream, stream=case["streamed"])
    out, error = call(
        litellm.responses,
        litellm.aresponses,
        args,
        asynchronous=asynchronous,
        stream=case["streamed"],
        catch=Exception,
    )
    assert len(upstream.requests) == sent + 1
    _responses_outcome(out, error, case, None)


# ---- what plain litellm hands over ---------------------------------------------------------
BROKEN = [n for n in STREAMED if CASES[n]["expect"] == "quarantine"]
LITELLM = tuple(int(x) for x in version("litellm").split(".")[:2])
# How plain litellm.completion(stream=True), with no gate, ends each broken recording: raised,
# finished calls (each argument text a JSON object) under tool_calls, such calls under another
# finish reason, or no usable call. The figures docs/watsonx.md gives, per version (1.108.7
# says stop for stop_with_call; 1.110.2 says tool_calls, since calls were streamed).
PLAIN = {
    (1, 110): {"raised": 0, "tool_calls": 28, "other_finish": 0, "no_call": 7},
    (1, 108): {"raised": 0, "tool_calls": 27, "other_finish": 1, "no_call": 7},
}


def test_plain_litellm_hands_over_most_broken_recordings(upstream: FakeUpstream) -> None:
    """The gate refuses all of them (test_toolgate_every_streamed_fixture); plain litellm
    does not."""
    tally = dict.fromkeys(PLAIN_OUTCOMES, 0)
    for name in BROKEN:
        _served(upstream, name)
        tally[plain_outcome(_args(upstream, stream=True))] += 1
    assert sum(tally.values()) == len(BROKEN) == 35
    assert tally == PLAIN[LITELLM]


@pytest.mark.parametrize("name", ["two_calls", "stop_with_call", "whole_two_calls"])
def test_a_deployment_model_is_gated_too(upstream: FakeUpstream, name: str) -> None:
    """``watsonx/deployment/<id>``: litellm calls ``/ml/v1/deployments/<id>/text/chat_stream``
    (``/text/chat`` whole), the same wire."""
    case = CASES[name]
    sent = _served(upstream, name)
    gate = ToolGate(MANIFEST["tools"])
    try:
        args = ask_multiply(
            upstream,
            "watsonx/deployment/my-deployment",
            MANIFEST["tools"],
            stream=case["streamed"],
            token="tok",
            space_id="space",
        )
        out, error = call(
            gate.completion, gate.acompletion, args, asynchronous=False, stream=case["streamed"]
        )
    finally:
        gate.close()
    assert len(upstream.requests) == sent + 1
    if case["expect"] == "release":
        assert error is None, repr(error)
        handed = _streamed_calls(out) if case["streamed"] else _whole_calls(out[0])
        assert handed == case["calls"]
    else:
        _refused(error, case, tool_calls(out))
