"""``ToolGateGuardrail`` in ``litellm.callbacks`` on Bedrock's Converse wire, real litellm on
loopback.

``litellm.completion`` / ``litellm.acompletion`` with ``model="bedrock/converse/..."`` (fake
AWS credentials: litellm signs with botocore; ``api_base`` on loopback), streamed and whole,
sync and async, for every recording of ``fixtures/bedrock``. A sync call is claimed on the
handler litellm's sync Converse handler takes from its cache by the call's timeout, after the
hooks (the gate makes it first, with litellm's own code), by a marker put into the botocore
headers litellm logs and sends and the JSON text it logs and sends (docs/bedrock.md). The callback
withholds the AWS event-stream frames themselves and hands litellm (its
``AWSEventStreamDecoder``, which reads them with botocore) the frames it releases, each
written again with both checksums. Since litellm re-shapes the calls (it numbers them 0, 1,
... in start order), its own decoder is run over the held frames first and its calls are
cross-checked with the wire before anything goes out. The outcome is ``ToolGate``'s for the
same body (tests/test_gate_bedrock.py): the manifest's, but for a tool block with no input
delta at all, where litellm hands over empty arguments, refused ``carrier_mismatch`` by both.
A released call is the wire's call (id, name, text) as a caller assembles litellm's chunks; a
refusal hands out no tool call and no argument text.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import pytest
from conftest import CANARY, no_leak
from loopback import ask_multiply, call, tool_calls
from wirecases import Fixtures

from litellm_toolgate import (
    QuarantineReason,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.framing.eventstream import EventStreamDecoder
from litellm_toolgate.core.wires import WIRES
from litellm_toolgate.edge.parsers import UNPARSED, litellm_parse
from litellm_toolgate.edge.sync import claiming
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_header

litellm.suppress_debug_info = True
R = QuarantineReason
BEDROCK = Fixtures("bedrock")
FIXTURES, MANIFEST, CASES = BEDROCK.folder, BEDROCK.manifest, BEDROCK.cases
MEDIA = "application/vnd.amazon.eventstream"
MODEL = "bedrock/converse/" + MANIFEST["model"]
AWS = {
    "aws_access_key_id": "AKIDEXAMPLE",
    "aws_secret_access_key": "not-a-secret",
    "aws_region_name": "us-east-1",
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


def expected(name: str) -> dict[str, Any]:
    """As through ToolGate: a tool block with no input delta at all reaches the caller with
    empty arguments from litellm (the manifest's ``via_litellm``)."""
    return BEDROCK.through_litellm(name)


def _call(
    upstream: FakeUpstream, *, asynchronous: bool, stream: bool, model: str = MODEL
) -> tuple[list[Any], Any]:
    """What ``litellm.completion`` / ``acompletion`` handed out, and the error, if any."""
    args = ask_multiply(upstream, model, MANIFEST["tools"], stream=stream, **AWS)
    return call(
        litellm.completion,
        litellm.acompletion,
        args,
        asynchronous=asynchronous,
        stream=stream,
        catch=Exception,
    )


def _refused(error: BaseException | None, case: dict[str, Any]) -> None:
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(case["reason"]), fault.reason
    no_leak(fault)
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


SYNC_ASYNC = pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])


@pytest.mark.usefixtures("gate")
@SYNC_ASYNC
@pytest.mark.parametrize("name", BEDROCK.streamed)
def test_every_streamed_fixture(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = expected(name)
    upstream.enqueue(Scripted(BEDROCK.body(name), content_type=MEDIA, chunk_sizes=[1, 7, 13, 64]))
    sent = len(upstream.requests)
    chunks, error = _call(upstream, asynchronous=asynchronous, stream=True)
    assert len(upstream.requests) == sent + 1  # sent once: the callback refused nothing unsent
    assert upstream.requests[-1]["toolConfig"]
    released = tool_calls(chunks)
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls: dict[int, dict[str, Any]] = {}
        for tc in released:
            call = calls.setdefault(tc.index, {"call_id": None, "name": None, "arguments": ""})
            call["call_id"] = call["call_id"] or tc.id
            call["name"] = call["name"] or tc.function.name
            call["arguments"] += tc.function.arguments or ""
        assert [calls[i] for i in sorted(calls)] == case["calls"]
        assert sorted(calls) == list(range(len(case["calls"])))
        text = "".join(
            (getattr(c.choices[0].delta, "reasoning_content", None) or "")
            + (c.choices[0].delta.content or "")
            for c in chunks
            if c.choices
        )
        assert text == case["text"]
        if calls:
            finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
            assert [f for f in finishes if f][-1] == "tool_calls"
    else:
        assert error is not None, f"{name}: released {released}"
        _refused(error, case)
        assert released == []


@pytest.mark.usefixtures("gate")
@SYNC_ASYNC
@pytest.mark.parametrize("name", BEDROCK.whole)
def test_every_whole_body(upstream: FakeUpstream, name: str, asynchronous: bool) -> None:
    case = expected(name)
    upstream.enqueue(Scripted(BEDROCK.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    out, error = _call(upstream, asynchronous=asynchronous, stream=False)
    assert len(upstream.requests) == sent + 1 and "toolConfig" in upstream.requests[-1]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls or []
        got = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls]
        assert got == [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case["calls"]]
    else:
        _refused(error, case)
        if not asynchronous:
            # Raised while litellm's request read the body: the quarantine itself, not an
            # error litellm's Converse parse made of it.
            assert isinstance(error, ToolCallQuarantined), repr(error)
        assert out == []


class _Served:
    """The upstream's answers, and the claim marker each request arrived with."""

    def __init__(self, *bodies: Scripted) -> None:
        self.bodies = list(bodies)
        self.markers: list[str | None] = []

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.markers.append(request_header(claiming.MARKER))
        return self.bodies.pop(0)


def _scripted(name: str) -> Scripted:
    if name in BEDROCK.whole:
        return Scripted(BEDROCK.body(name), content_type="application/json")
    return Scripted(BEDROCK.body(name), content_type=MEDIA, chunk_sizes=[1, 7, 64])


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


def _sync(own: FakeUpstream, name: str, **extra: Any) -> tuple[list[Any], Any]:
    """A sync litellm.completion of ``name`` at ``own``: what it handed out (the chunks, or
    the one response), and the error it ended in (any BaseException)."""
    stream = name not in BEDROCK.whole
    args = ask_multiply(own, MODEL, MANIFEST["tools"], stream=stream, **AWS, **extra)
    out: list[Any] = []
    try:
        result = litellm.completion(**args)
        out.extend(result if stream else [result])
    except BaseException as exc:
        return out, exc
    return out, None


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(
    "name", ["multiply_basic", "schema_invalid", "whole_two_calls", "whole_duplicate_key"]
)
def test_a_sync_call_is_claimed_on_the_handler_litellm_takes_after_the_hooks(name: str) -> None:
    """litellm's sync Converse handler (streamed and whole) sends on the handler its cache
    keeps for the call's timeout (as an ``httpx.Timeout``), taken after the hooks ran: on a
    timeout no call used before, it does not exist yet when the call is armed. The gate makes
    it with litellm's own code under that very key and claims it: the request reaches the
    upstream once, through the claiming transport (the marker, put into the botocore headers
    litellm logged, taken out), and a broken answer is the typed quarantine."""
    timeout = 33.5
    key = f"httpx_clienttimeout_{httpx.Timeout(timeout)}"
    table = litellm.in_memory_llm_clients_cache.cache_dict
    for old in [k for k in list(table) if str(k).startswith("httpx_clienttimeout_")]:
        table.pop(old, None)
    served = _Served(_scripted(name))
    with FakeUpstream(served) as own:
        out, error = _sync(own, name, timeout=timeout)
        assert len(own.requests) == 1 and served.markers == [None]
    handler = table.get(key)
    assert handler is not None and isinstance(handler.client._transport, claiming.ClaimingTransport)
    case = expected(name)
    if case["expect"] == "release":
        assert error is None, repr(error)
        if name in BEDROCK.whole:
            calls = out[0].choices[0].message.tool_calls
            assert [c.function.name for c in calls] == [c["name"] for c in case["calls"]]
        else:
            assert [c.function.name for c in tool_calls(out) if c.function.name] == [
                c["name"] for c in case["calls"]
            ]
    else:
        assert isinstance(error, ToolCallQuarantined), repr(error)
        _refused(error, case)
        assert tool_calls(out) == [] if out else True


@pytest.mark.parametrize("name", ["multiply_basic", "whole_two_calls"])
def test_a_sync_call_refused_in_its_hook_is_refused_typed_and_unsent(name: str) -> None:
    """A sync call refused in log_pre_api_call (here: its gate closed by a callback after
    litellm's call set-up passed it): the claiming transport, around the timeout-keyed
    handler the gate made for it, answers its request unsent, and the caller gets the typed
    refusal (a whole one raised while litellm's request reads the answer)."""
    # Gates an earlier test of this file dropped without closing are put back when
    # collected: collect them now, so that what this test's gate changed is all there is to
    # put back (those an earlier file left open are closed when it ended: conftest.py).
    gc.collect()
    assert claiming.INSTALLATION.gates == 0
    made = ToolGateGuardrail(MANIFEST["tools"])
    litellm.in_memory_llm_clients_cache.flush_cache()
    with FakeUpstream() as own, _Hooked(made.close) as closing:
        own.enqueue(_scripted(name))
        saved = litellm.callbacks
        litellm.callbacks = [closing, made]
        try:
            out, error = _sync(own, name, timeout=35.5)
        finally:
            litellm.callbacks = saved
        assert own.requests == []
    assert isinstance(error, UngatedCallRefused) and "closed" in str(error), repr(error)
    assert tool_calls(out) == [] if out and name not in BEDROCK.whole else out == []
    assert claiming.INSTALLATION.gates == 0 and claiming.INSTALLATION.wrapped == 0


@pytest.mark.parametrize("name", ["multiply_basic", "whole_two_calls"])
def test_a_handler_evicted_after_the_hooks_is_stopped_before_anything_is_handed_over(
    name: str,
) -> None:
    """litellm's cache drops the handler the gate claimed between the gate's hook and the
    send (here: a callback after the gate empties it): the call goes out on a handler the
    gate never saw. A stream's answer is turned into the typed refusal after the headers,
    before litellm reads it; a whole one litellm would parse inside a catch-all of its own
    right after that check, so it ends in the last resort, SyncCallStopped (carrying the
    typed refusal). Nothing of either is handed over."""
    made = ToolGateGuardrail(MANIFEST["tools"])
    cache = litellm.in_memory_llm_clients_cache
    with FakeUpstream() as own, _Hooked(cache.flush_cache) as evicting:
        own.enqueue(_scripted(name))
        saved = litellm.callbacks
        litellm.callbacks = [made, evicting]
        try:
            out, error = _sync(own, name)
        finally:
            litellm.callbacks = saved
            made.close()
        assert len(own.requests) == 1  # it went out, on the handler the gate never saw
    if name in BEDROCK.whole:
        assert isinstance(error, claiming.SyncCallStopped), repr(error)
        assert isinstance(error.refusal, UngatedCallRefused) and out == []
    else:
        assert isinstance(error, UngatedCallRefused) and "cannot see" in str(error), repr(error)
        assert tool_calls(out) == []
    assert len(claiming.CLAIMS) == 0


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_other_bedrock_apis_stay_refused_unsent(upstream: FakeUpstream, asynchronous: bool) -> None:
    before = len(upstream.requests)
    invoke = "bedrock/invoke/" + MANIFEST["model"]
    _, error = _call(upstream, asynchronous=asynchronous, stream=True, model=invoke)
    # The sync hook's refusal is UngatedCallRefused, the async hook's RouteNotGated.
    assert isinstance(error, UngatedCallRefused if not asynchronous else RouteNotGated)
    assert "another API than Converse" in str(error)
    assert len(upstream.requests) == before


# ---- the parse the callback runs over a held body, on its own ----------------------------------
def _values(name: str) -> list[Any]:
    """The payloads of a recording's frames, decoded: what the withholder keeps of each."""
    decoder = EventStreamDecoder(max_event_bytes=1 << 20)
    return [json.loads(m.data) for m in decoder.feed(BEDROCK.body(name))]


def test_litellm_parse_numbers_the_calls_as_litellm_does() -> None:
    """litellm's own decoder: calls keyed 0, 1, ... in start order (the wire's blocks are
    keyed by contentBlockIndex), with the wire's toolUseId, name and fragments."""
    carrier = litellm_parse(MODEL)(_values("two_calls"), True)
    assert not carrier.foreign and carrier.finish_reason == "tool_calls"
    assert sorted(carrier.calls) == [0, 1]
    want = CASES["two_calls"]["calls"]
    got = [carrier.calls[i] for i in sorted(carrier.calls)]
    assert [(c.call_id, c.name, c.arguments) for c in got] == [
        (w["call_id"], w["name"], w["arguments"]) for w in want
    ]


def test_litellm_parse_of_a_whole_body() -> None:
    carrier = litellm_parse(MODEL)([json.loads(BEDROCK.body("whole_two_calls"))], False)
    assert carrier.finish_reason == "tool_calls" and not carrier.foreign
    assert [c.name for c in carrier.calls.values()] == [
        c["name"] for c in CASES["whole_two_calls"]["calls"]
    ]


def test_litellm_parse_fails_closed() -> None:
    """A body litellm's decoder fails on: a carrier that matches no wire (refused
    ``carrier_mismatch``), never an error of litellm's quoting the body."""
    broken = [{"contentBlockIndex": 0, "start": {"toolUse": {"name": CANARY}}}]
    assert litellm_parse(MODEL)(broken, True) is UNPARSED
    assert litellm_parse(MODEL)([["not", "an", "object"]], False) is UNPARSED
    assert WIRES[Wire.BEDROCK].reparsed


@pytest.mark.parametrize("name", ["multiply_basic", "whole_two_calls", "whole_duplicate_key"])
def test_a_sync_call_takes_the_request_s_own_tools(name: str) -> None:
    """With ``tools="request"`` the registry is the call's own tools, as the caller passed
    them (litellm's logging keeps them): the Converse body litellm logs carries them under
    ``toolConfig``, in Bedrock's shape, so reading the body's ``tools`` would find none and
    refuse every call as unknown."""
    made = ToolGateGuardrail("request")
    saved = litellm.callbacks
    litellm.callbacks = [made]
    try:
        with FakeUpstream() as own:
            own.enqueue(_scripted(name))
            out, error = _sync(own, name)
    finally:
        litellm.callbacks = saved
        made.close()
    case = expected(name)
    if case["expect"] == "release":
        assert error is None, repr(error)
        calls = out[0].choices[0].message.tool_calls if name in BEDROCK.whole else tool_calls(out)
        assert [c.function.name for c in calls if c.function.name] == [
            c["name"] for c in case["calls"]
        ]
    else:
        _refused(error, case)
