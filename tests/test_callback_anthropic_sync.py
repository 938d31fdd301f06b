"""Sync ``litellm.completion(model="anthropic/...")`` under ``litellm.callbacks``, real
litellm on loopback.

litellm's Anthropic chat handler differs from its other HTTP-handler routes in two ways the
sync claim has to meet (docs/callbacks.md, "Sync calls"): it logs its request body and only
then sets ``"stream": true`` on it, in place, before sending it; and it sends a whole
response on the handler its client cache keeps for the call's timeout, which it takes after
the hooks ran. Every Anthropic fixture goes through it here, streamed ones with
``stream=True`` and whole ones without: a good answer is handed over exactly as plain
litellm hands it over (but for litellm's per-call id), a broken one is refused typed with
nothing of its tool calls released, and the claim's marker never reaches the upstream.

Half the streams on ``vertex_ai/claude-...`` (litellm's Anthropic handler through Vertex's
rawPredict, tests/vertexauth.py; the other half async in test_callback_anthropic.py), and
every whole answer there too: litellm's Anthropic handler sends it on the same timeout-keyed
handler, taken after the hooks, which the gate makes and claims as on anthropic/.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import litellm
import pytest
from conftest import CANARY
from vertexauth import CLAUDE_MODEL, vertex_args

from litellm_toolgate import (
    QuarantineReason,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.edge.sync import claiming as synccall
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_header

litellm.suppress_debug_info = True
R = QuarantineReason
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
STREAMED = sorted(n for n, c in CASES.items() if c["streamed"])
WHOLE = sorted(n for n, c in CASES.items() if not c["streamed"])
# As through litellm.acompletion (test_callback_anthropic): litellm would hand over the two
# overlapping calls' arguments mixed; its own parser, run over the held body, says so.
THROUGH_CHAT: dict[str, dict[str, str]] = {
    "tool_deltas_overlap": {"expect": "quarantine", "reason": "carrier_mismatch"}
}
ROUTES = {
    "anthropic": ("anthropic/claude-sonnet-4-5", {"api_key": "sk-ant-test"}),
    "vertex_ai": (CLAUDE_MODEL, vertex_args()),
}
# litellm's own per-call values: the only fields of a result that differ between two calls.
_PER_CALL = {"id", "created"}


class Served:
    """What the upstream answers next, and the claim marker each request arrived with."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.markers: list[str | None] = []

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.markers.append(request_header(synccall.MARKER))
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
    made = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [made]
    try:
        yield made
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
        made.close()
        assert len(synccall.CLAIMS) == 0, "an armed claim was left behind"


def _scripted(name: str) -> Scripted:
    case = CASES[name]
    body = (FIXTURES / case["body"]).read_bytes()
    if case["streamed"]:
        return Scripted(body, chunk_sizes=[1, 7, 64])
    return Scripted(body, content_type="application/json")


def _completion(
    upstream: FakeUpstream, served: Served, name: str, route: str = "anthropic", **extra: Any
) -> tuple[list[Any], BaseException | None]:
    """Sync litellm.completion of the fixture ``name``: what the caller got (the chunks, or
    the one response) and the error it ended in."""
    stream = bool(CASES[name]["streamed"])
    served.queue.append(_scripted(name))
    out: list[Any] = []
    error: BaseException | None = None
    model, needs = ROUTES[route]
    try:
        result = litellm.completion(
            model=model,
            messages=[{"role": "user", "content": "go"}],
            tools=MANIFEST["tools"],
            api_base=upstream.root_url,
            num_retries=0,
            stream=stream,
            **needs,
            **extra,
        )
        if stream:
            for chunk in result:
                out.append(chunk)
        else:
            out.append(result)
    except Exception as exc:
        error = exc
    return out, error


def _plain(upstream: FakeUpstream, served: Served, name: str, route: str) -> list[Any]:
    """What plain litellm (no gate in the process's callbacks) hands over for ``name``."""
    saved = litellm.callbacks
    litellm.callbacks = []
    try:
        out, error = _completion(upstream, served, name, route)
    finally:
        litellm.callbacks = saved
    assert error is None, f"plain litellm failed on {name}: {error!r}"
    return out


def _forget_timeout_handlers() -> None:
    """Drop the handlers litellm's cache keeps by timeout, so that the next call's is made
    after its hooks ran (as on a process's first call with that timeout)."""
    table = litellm.in_memory_llm_clients_cache.cache_dict
    for key in [k for k in list(table) if str(k).startswith("httpx_clienttimeout_")]:
        table.pop(key, None)


def _dumps(results: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.model_dump().items() if k not in _PER_CALL} for r in results]


def _calls(chunks: list[Any]) -> list[tuple[str | None, str | None, str]]:
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, None, ""])
                call[0] = call[0] or tc.id
                call[1] = call[1] or tc.function.name
                call[2] += tc.function.arguments or ""
    return [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


def _no_leak(error: BaseException) -> None:
    seen: BaseException | None = error
    while seen is not None:
        assert CANARY not in str(seen) and CANARY not in repr(seen.args)
        seen = seen.__cause__ or seen.__context__


def _quarantined(error: BaseException | None, reason: str) -> None:
    assert error is not None
    assert not isinstance(error, UngatedCallRefused), f"refused, not gated: {error}"
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    assert fault.reason is R(reason)
    _no_leak(error)


# vertex_ai/: the recordings test_callback_anthropic.py does not read async there.
STREAMS = [pytest.param(name, "anthropic", id=name) for name in STREAMED] + [
    pytest.param(name, "vertex_ai", id=f"vertex-{name}")
    for i, name in enumerate(STREAMED)
    if i % 2 == 1 or name == "multiply_basic"
]


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize(("name", "route"), STREAMS)
def test_completion_stream(upstream: FakeUpstream, served: Served, name: str, route: str) -> None:
    case = {**CASES[name], **THROUGH_CHAT.get(name, {})}
    plain = _plain(upstream, served, name, route) if case["expect"] == "release" else None
    sent = len(upstream.requests)
    chunks, error = _completion(upstream, served, name, route)
    assert len(upstream.requests) == sent + 1  # gated: sent once, not refused unsent
    assert served.markers[-1] is None  # the claim's marker never reaches the upstream
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert plain is not None and _dumps(chunks) == _dumps(plain)
        want = [(c["call_id"], c["name"], c["arguments"]) for c in case["calls"]]
        assert [(i, n, a or "{}") for i, n, a in _calls(chunks)] == want
    else:
        _quarantined(error, case["reason"])
        assert _calls(chunks) == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", WHOLE)
def test_completion_whole(upstream: FakeUpstream, served: Served, name: str, route: str) -> None:
    case = CASES[name]
    plain = _plain(upstream, served, name, route) if case["expect"] == "release" else None
    _forget_timeout_handlers()
    sent = len(upstream.requests)
    out, error = _completion(upstream, served, name, route)
    assert len(upstream.requests) == sent + 1
    assert served.markers[-1] is None
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        assert plain is not None and _dumps(out) == _dumps(plain)
        calls = out[0].choices[0].message.tool_calls or []
        assert [(c.id, c.function.name) for c in calls] == [
            (c["call_id"], c["name"]) for c in case["calls"]
        ]
    else:
        _quarantined(error, case["reason"])
        assert out == []


@pytest.mark.usefixtures("gate")
@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["whole_tool_use", "whole_schema_invalid"])
def test_a_whole_response_on_a_handler_made_after_the_hooks_is_gated(
    upstream: FakeUpstream, served: Served, name: str, route: str
) -> None:
    """litellm's Anthropic chat handler takes its whole-response client from its cache by
    the call's timeout, after the hooks ran (on anthropic/, and for Claude on vertex_ai/): on
    a timeout no call used before, that handler does not exist yet when the call is armed.
    The gate makes it (with litellm's own code) and claims it, so the call is gated, not
    stopped after it was sent: it reaches the upstream once, through the claiming transport
    (which takes the marker out)."""
    timeout = 41.25
    key = f"httpx_clienttimeout_{timeout}"
    cache = litellm.in_memory_llm_clients_cache
    _forget_timeout_handlers()
    sent = len(upstream.requests)
    out, error = _completion(upstream, served, name, route, timeout=timeout)
    assert len(upstream.requests) == sent + 1 and served.markers[-1] is None
    handler = cache.cache_dict.get(key)
    assert handler is not None and isinstance(handler.client._transport, synccall.ClaimingTransport)
    if CASES[name]["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        calls = out[0].choices[0].message.tool_calls
        assert [c.id for c in calls] == [c["call_id"] for c in CASES[name]["calls"]]
    else:
        _quarantined(error, CASES[name]["reason"])


@pytest.mark.usefixtures("gate")
def test_a_timeout_keyed_handler_is_made_only_on_the_anthropic_route(
    upstream: FakeUpstream, served: Served
) -> None:
    """The gate makes litellm's timeout-keyed handler for the call only on the route whose
    handler takes it; a call on another HTTP-handler route leaves litellm's cache alone."""
    from conftest import CASES as CHAT_CASES
    from conftest import body_of

    from litellm_toolgate.demo.serve import as_requested

    timeout = 43.75
    key = f"httpx_clienttimeout_{timeout}"
    cache = litellm.in_memory_llm_clients_cache
    cache.cache_dict.pop(key, None)
    served.queue.append(as_requested({"stream": False}, body_of(CHAT_CASES["multiply_basic"])))
    result = litellm.completion(
        model="cometapi/gpt-4o-mini",
        messages=[{"role": "user", "content": "go"}],
        api_base=upstream.base_url,
        api_key="sk-test",
        num_retries=0,
        timeout=timeout,
    )
    assert result.choices[0].message.tool_calls[0].function.name == "multiply"
    assert key not in cache.cache_dict


def test_a_streamed_claim_takes_the_logged_body_with_the_stream_flag_and_nothing_else(
    upstream: FakeUpstream,
) -> None:
    """The one difference a claim forgives between the body litellm logged and the one it
    sends: ``"stream": true`` added, on a streamed call. A whole call's claim takes the
    logged body alone; a streamed one refuses any other change, or the flag set false."""
    gate = ToolGate(MANIFEST["tools"])
    transport = synccall.ClaimingTransport(httpx.MockTransport(lambda r: httpx.Response(599)))
    url = upstream.root_url + "/v1/messages"
    body = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "go"}]}

    def outcome(streamed: bool, payload: dict[str, Any]) -> str:
        headers: dict[str, Any] = {}
        tap = synccall.WireTap(gate.new_attempt(), streamed=streamed)
        extra = {"api_base": url, "complete_input_dict": body, "headers": headers}
        details = {"litellm_call_id": f"c-{streamed}-{len(payload)}", "additional_args": extra}
        synccall.arm(details, tap, synccall.Withholding(None))
        request = httpx.Request(
            "POST", url, json=payload, headers={synccall.MARKER: headers[synccall.MARKER]}
        )
        try:
            answer = transport.handle_request(request)
        finally:
            synccall.CLAIMS.settle(details["litellm_call_id"])
        if isinstance(answer, synccall.RefusedResponse):  # answered unsent
            return "refused"
        # A non-success answer is handed back unread: 599 is the inner transport's.
        return "sent" if answer.status_code == 599 else "other"

    flagged = {**body, "stream": True}
    assert outcome(True, body) == "sent"
    assert outcome(True, flagged) == "sent"
    assert outcome(False, body) == "sent"
    assert outcome(False, flagged) == "refused"
    assert outcome(True, {**body, "stream": False}) == "refused"
    assert outcome(True, {**flagged, "max_tokens": 9}) == "refused"
    assert outcome(True, {**flagged, "extra": 1}) == "refused"
    assert len(synccall.CLAIMS) == 0


@pytest.mark.parametrize("route", ROUTES)
def test_a_whole_call_whose_handler_is_evicted_after_the_hooks_is_refused_typed(
    upstream: FakeUpstream, served: Served, route: str
) -> None:
    """litellm's cache drops the timeout-keyed handler the gate claimed between the gate's
    hook and the send (here: a callback after the gate empties the cache): the call goes out
    on a handler the gate never saw, marker and all. litellm's Anthropic handler runs its
    post-call hook before it reads the body, so the answer is turned into the typed refusal
    there: nothing of it is handed over."""
    from litellm.integrations.custom_logger import CustomLogger

    class Evict(CustomLogger):  # type: ignore[misc]
        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            litellm.in_memory_llm_clients_cache.flush_cache()

    made, evicting = ToolGateGuardrail(MANIFEST["tools"]), Evict()
    saved = litellm.callbacks
    litellm.callbacks = [made, evicting]
    sent = len(upstream.requests)
    try:
        out, error = _completion(upstream, served, "whole_tool_use", route)
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not evicting]
        made.close()
    assert isinstance(error, UngatedCallRefused) and "cannot see" in str(error), repr(error)
    assert out == [] and len(upstream.requests) == sent + 1
    assert served.markers[-1] is not None  # it went out unclaimed, on the evicted handler
    assert len(synccall.CLAIMS) == 0
