"""Sync calls under ``litellm.callbacks``: armed, claimed on the wire, or refused unsent.

The fixtures themselves go through sync ``litellm.completion`` / ``litellm.responses`` in
``test_callback.py`` and ``test_callback_responses.py``; here are the claim's own edges: the
one-time marker never reaches the upstream, a user's ``litellm.sync_transport`` keeps working
under the gate, a client litellm cached before the gate was installed cannot bypass it, a
claim matches only the call that armed it, what cannot be claimed is refused before any byte
of it is read, and a ``ToolGate``'s own call (or a call made inside its policy) is gated once.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import litellm
import openai
import pytest
from conftest import CASES, MANIFEST, body_of
from litellm.llms.custom_httpx.http_handler import HTTPHandler
from routeserver import RouteServer

from litellm_toolgate import (
    PolicyDecision,
    QuarantineReason,
    SchemaRejected,
    ToolCallQuarantined,
    ToolGate,
    ToolGateError,
    ToolGateGuardrail,
    UngatedCallRefused,
    find_quarantine,
)
from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.edge.sync import claiming as synccall

litellm.suppress_debug_info = True
R = QuarantineReason


class Recorder:
    """A loopback upstream that serves the chat fixtures and records every request's headers."""

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        self.bodies: list[dict[str, Any]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length))
                owner.headers.append({k.lower(): v for k, v in self.headers.items()})
                owner.bodies.append(payload)
                name = str(payload["messages"][-1]["content"])
                scripted = as_requested(payload, body_of(CASES[name]))
                self.send_response(200)
                self.send_header("content-type", scripted.content_type)
                self.send_header("content-length", str(len(scripted.body)))
                self.end_headers()
                self.wfile.write(scripted.body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


@pytest.fixture(scope="module")
def upstream() -> Iterator[Recorder]:
    recorder = Recorder()
    recorder.thread.start()
    try:
        yield recorder
    finally:
        recorder.server.shutdown()
        recorder.server.server_close()


@pytest.fixture(autouse=True)
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
        # litellm keeps callbacks it saw in lists of its own (litellm.utils' callback_list):
        # close every gate this test built, so the next test finds the process as it was.
        for made in [o for o in gc.get_objects() if isinstance(o, ToolGateGuardrail)]:
            made.close()
        assert len(synccall.CLAIMS) == 0, "an armed claim was left behind"


def kwargs(upstream: Recorder, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "messages": [{"role": "user", "content": name}],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


def calls_of(chunks: list[Any]) -> list[str]:
    return [
        tc.function.arguments or ""
        for chunk in chunks
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_the_marker_never_reaches_the_upstream(upstream: Recorder, stream: bool) -> None:
    before = len(upstream.headers)
    result = litellm.completion(**kwargs(upstream, "multiply_basic", stream=stream))
    if stream:
        assert "".join(calls_of(list(result))) == CASES["multiply_basic"]["calls"][0]["arguments"]
    else:
        assert result.choices[0].message.tool_calls[0].function.name == "multiply"
    assert len(upstream.headers) == before + 1
    assert synccall.MARKER not in upstream.headers[-1]
    with pytest.raises(SchemaRejected):
        result = litellm.completion(**kwargs(upstream, "unknown_tool", stream=stream))
        list(result) if stream else None
    assert all(synccall.MARKER not in h for h in upstream.headers)


def test_a_users_sync_transport_is_composed(upstream: Recorder) -> None:
    """Set after the gate exists: no call is refused, the gate never replaces it."""

    class Counting(httpx.HTTPTransport):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[httpx.Request] = []

        def handle_request(self, request: httpx.Request) -> httpx.Response:
            self.seen.append(request)
            return super().handle_request(request)

    mine = Counting()
    saved = getattr(litellm, "sync_transport", None)
    litellm.sync_transport = mine  # type: ignore[attr-defined]
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        list(litellm.completion(**kwargs(upstream, "multiply_basic", stream=True)))
        with pytest.raises(SchemaRejected):
            list(litellm.completion(**kwargs(upstream, "unknown_tool", stream=True)))
        assert len(mine.seen) == 2  # both went out through the user's transport
        assert all(synccall.MARKER not in r.headers for r in mine.seen)
        assert litellm.sync_transport is mine  # type: ignore[attr-defined]
    finally:
        litellm.sync_transport = saved  # type: ignore[attr-defined]
        litellm.in_memory_llm_clients_cache.flush_cache()


def test_a_client_cached_before_the_gate_is_wrapped_and_gated(upstream: Recorder) -> None:
    saved_callbacks = litellm.callbacks
    litellm.callbacks = []
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        # Without the gate litellm builds and caches a plain client...
        litellm.completion(**kwargs(upstream, "multiply_basic"))
        litellm.callbacks = saved_callbacks
        sent = len(upstream.bodies)
        # ...which the gate wraps in place before the next call goes out on it.
        with pytest.raises(SchemaRejected):
            litellm.completion(**kwargs(upstream, "unknown_tool"))
        assert len(upstream.bodies) == sent + 1
    finally:
        litellm.callbacks = saved_callbacks
        litellm.in_memory_llm_clients_cache.flush_cache()


def test_a_client_of_your_own_is_claimed_and_gated(
    upstream: Recorder, gate: ToolGateGuardrail
) -> None:
    """A litellm HTTPHandler passed as client=: claimed in litellm's call set-up (in place,
    put back when the gate is closed), so its calls are gated like litellm's own and the
    marker never reaches the upstream."""
    own_transport = httpx.HTTPTransport()
    own = HTTPHandler(client=httpx.Client(transport=own_transport))
    before = len(upstream.headers)
    chunks = list(litellm.completion(client=own, **kwargs(upstream, "multiply_basic", stream=True)))
    assert "".join(calls_of(chunks)) == CASES["multiply_basic"]["calls"][0]["arguments"]
    assert isinstance(own.client._transport, synccall.ClaimingTransport)
    with pytest.raises(SchemaRejected):
        list(litellm.completion(client=own, **kwargs(upstream, "unknown_tool", stream=True)))
    assert len(upstream.headers) == before + 2
    assert all(synccall.MARKER not in h for h in upstream.headers[before:])
    gate.close()
    assert own.client._transport is own_transport


def test_a_client_the_gate_cannot_claim_is_refused_unsent(upstream: Recorder) -> None:
    class Opaque:
        """A client= that is no httpx client the gate could claim."""

    before = len(upstream.bodies)
    with pytest.raises(UngatedCallRefused, match="client=") as refused:
        litellm.completion(client=Opaque(), **kwargs(upstream, "multiply_basic", stream=True))
    assert isinstance(refused.value, ToolGateError)
    assert len(upstream.bodies) == before


def test_force_ipv4_calls_are_gated(upstream: Recorder, monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm builds an IPv4-only transport of its own: the gate wraps it like any other."""
    monkeypatch.setattr(litellm, "force_ipv4", True)
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        chunks = list(litellm.completion(**kwargs(upstream, "multiply_basic", stream=True)))
        assert "".join(calls_of(chunks)) == CASES["multiply_basic"]["calls"][0]["arguments"]
        with pytest.raises(SchemaRejected):
            list(litellm.completion(**kwargs(upstream, "unknown_tool", stream=True)))
    finally:
        litellm.in_memory_llm_clients_cache.flush_cache()


# ---- the OpenAI SDK routes: claimed on the SDK client's httpx client (sdkclaim) -----------
SDK_ROUTES = ["openai", "azure", "perplexity", "cerebras", "litellm_proxy", "custom_openai"]


def sdk_kwargs(upstream: Recorder, name: str, route: str, **extra: Any) -> dict[str, Any]:
    where: dict[str, Any] = {"model": f"{route}/gpt-4o-mini", "api_base": upstream.base_url}
    if route == "azure":
        where.update(api_base=upstream.base_url.removesuffix("/v1"), api_version="2024-10-21")
    return {**kwargs(upstream, name, **extra), **where}


class Watched(httpx.HTTPTransport):
    """A caller's own transport: counts requests and the response body bytes read."""

    def __init__(self) -> None:
        super().__init__()
        self.sent = 0
        self.read = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent += 1
        response = super().handle_request(request)
        owner = self
        inner = response.stream
        assert isinstance(inner, httpx.SyncByteStream)

        class Counted(httpx.SyncByteStream):
            def __iter__(self) -> Iterator[bytes]:
                for piece in inner:
                    owner.read += len(piece)
                    yield piece

            def close(self) -> None:
                inner.close()

        return httpx.Response(
            response.status_code,
            headers=response.headers,
            stream=Counted(),
            extensions=response.extensions,
        )


@pytest.fixture
def session_restored() -> Iterator[None]:
    """litellm's session and cached SDK clients put back as they were after the test."""
    saved = litellm.client_session
    litellm.in_memory_llm_clients_cache.flush_cache()
    try:
        yield
    finally:
        litellm.client_session = saved
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_an_sdk_route_stream_is_claimed_and_its_marker_never_sent(
    upstream: Recorder, route: str
) -> None:
    mine = {"X-Trace": "t-1"}
    before = len(upstream.bodies)
    chunks = list(
        litellm.completion(
            **sdk_kwargs(upstream, "multiply_basic", route, stream=True, extra_headers=mine)
        )
    )
    assert "".join(calls_of(chunks)) == CASES["multiply_basic"]["calls"][0]["arguments"]
    with pytest.raises(SchemaRejected):
        list(
            litellm.completion(
                **sdk_kwargs(upstream, "unknown_tool", route, stream=True, extra_headers=mine)
            )
        )
    assert len(upstream.bodies) == before + 2
    for sent in upstream.headers[-2:]:
        assert synccall.MARKER not in sent and sent.get("x-trace") == "t-1"
    assert mine == {"X-Trace": "t-1"}  # the caller's headers never held the marker
    assert litellm.client_session is None  # the gate set no session of its own


def test_a_call_the_gate_fails_to_arm_is_refused_unsent(upstream: Recorder) -> None:
    """litellm logs and drops any Exception a pre-call hook raises and sends the call anyway;
    a call the gate could not arm (here: an extra_body value the OpenAI SDK serializes but
    the claim's own copy of the body cannot) is refused, never sent unclaimed."""
    from pydantic import BaseModel

    class Tag(BaseModel):
        name: str

    before = len(upstream.bodies)
    with pytest.raises(UngatedCallRefused, match="could not prepare") as refused:
        list(
            litellm.completion(
                **sdk_kwargs(
                    upstream,
                    "unknown_tool",
                    "openai",
                    stream=True,
                    extra_body={"metadata_tag": Tag(name="t")},
                )
            )
        )
    assert len(upstream.bodies) == before
    error: BaseException | None = refused.value
    while error is not None:  # a refusal of the gate's own making, with no chain
        assert isinstance(error, UngatedCallRefused)
        error = error.__cause__ or error.__context__


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_a_whole_sync_response_on_an_sdk_route_is_claimed_and_gated(
    upstream: Recorder, route: str
) -> None:
    # Judged while the OpenAI SDK reads the body (tests/test_sync_sdk_whole.py has the rest).
    before = len(upstream.bodies)
    response = litellm.completion(**sdk_kwargs(upstream, "multiply_basic", route))
    calls = response.choices[0].message.tool_calls
    assert [c.function.arguments for c in calls] == [
        CASES["multiply_basic"]["calls"][0]["arguments"]
    ]
    with pytest.raises(SchemaRejected):
        litellm.completion(**sdk_kwargs(upstream, "unknown_tool", route))
    assert len(upstream.bodies) == before + 2
    for sent in upstream.headers[-2:]:
        assert synccall.MARKER not in sent


@pytest.mark.parametrize("route", SDK_ROUTES)
def test_a_client_session_of_your_own_is_used_and_gated(
    upstream: Recorder, route: str, session_restored: None
) -> None:
    watched = Watched()
    mine = httpx.Client(transport=watched, headers={"X-Http": "mine"})
    litellm.client_session = mine
    chunks = list(litellm.completion(**sdk_kwargs(upstream, "multiply_basic", route, stream=True)))
    assert "".join(calls_of(chunks)) == CASES["multiply_basic"]["calls"][0]["arguments"]
    with pytest.raises(SchemaRejected):
        list(litellm.completion(**sdk_kwargs(upstream, "unknown_tool", route, stream=True)))
    assert watched.sent == 2  # both through the user's own session...
    assert upstream.headers[-1].get("x-http") == "mine"  # ...with its settings
    # Still the user's session, on the user's transport (the gate's claim is around it).
    assert litellm.client_session is mine
    assert isinstance(mine._transport, synccall.ClaimingTransport)
    assert mine._transport.inner is watched


def test_an_azure_client_of_your_own_is_used_and_gated(
    upstream: Recorder, session_restored: None
) -> None:
    # litellm caches an Azure client it is handed (before any hook runs): that is where the
    # gate finds and wraps it.
    watched = Watched()
    own = openai.AzureOpenAI(
        api_key="sk-own",
        azure_endpoint=upstream.base_url.removesuffix("/v1"),
        api_version="2024-10-21",
        http_client=httpx.Client(transport=watched),
    )
    with pytest.raises(SchemaRejected):
        list(
            litellm.completion(
                client=own, **sdk_kwargs(upstream, "unknown_tool", "azure", stream=True)
            )
        )
    assert watched.sent == 1
    assert upstream.headers[-1].get("api-key") == "sk-own"


def test_an_openai_client_of_your_own_is_claimed_and_gated(upstream: Recorder) -> None:
    # litellm neither caches nor reports an openai/ client= before sending: the gate claims
    # it in litellm's call set-up, so its stream is gated and the marker never sent.
    watched = Watched()
    own = openai.OpenAI(
        api_key="sk-own", base_url=upstream.base_url, http_client=httpx.Client(transport=watched)
    )
    with pytest.raises(SchemaRejected):
        list(
            litellm.completion(
                client=own, **sdk_kwargs(upstream, "unknown_tool", "openai", stream=True)
            )
        )
    assert watched.sent == 1
    assert synccall.MARKER not in upstream.headers[-1]
    assert upstream.headers[-1].get("authorization") == "Bearer sk-own"


def test_an_sdk_client_cached_before_the_gate_is_wrapped_and_gated(
    upstream: Recorder, session_restored: None
) -> None:
    saved = litellm.callbacks
    litellm.callbacks = []
    litellm.client_session = None
    try:
        # Without a gate litellm builds and caches an SDK client on an http client of its own.
        list(litellm.completion(**sdk_kwargs(upstream, "multiply_basic", "openai", stream=True)))
    finally:
        litellm.callbacks = saved
    sent = len(upstream.bodies)
    with pytest.raises(SchemaRejected):  # wrapped in place: this very call is claimed
        list(litellm.completion(**sdk_kwargs(upstream, "unknown_tool", "openai", stream=True)))
    assert len(upstream.bodies) == sent + 1


@pytest.mark.parametrize(
    "model",
    # litellm sends chat on text-completion-openai/ through the SDK's legacy completions.
    ["text-completion-openai/gpt-3.5-turbo-instruct"],
)
def test_the_other_sdk_routes_are_refused_unsent(upstream: Recorder, model: str) -> None:
    before = len(upstream.bodies)
    with pytest.raises(UngatedCallRefused, match="not in the gate's route table"):
        litellm.completion(
            **{**kwargs(upstream, "multiply_basic", stream=True), "model": model},
            drop_params=True,
        )
    assert len(upstream.bodies) == before


@pytest.mark.parametrize(
    "model",
    [
        "bedrock/invoke/anthropic.claude-3-5-sonnet-20240620-v1:0",
        "cohere/v1/command-r",  # Cohere's v1 chat API: another wire
    ],
)
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_route_the_table_refuses_is_refused_unsent(
    upstream: Recorder, model: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As ToolGate and the async hook refuse it; sent, it would fail inside litellm."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(name, "test")
    monkeypatch.setenv("AWS_REGION_NAME", "us-east-1")
    before = len(upstream.bodies)
    route = model.partition("/")[0]
    with pytest.raises(UngatedCallRefused, match=f"route {route!r} \\(chat\\) is not gated"):
        litellm.completion(**{**kwargs(upstream, "multiply_basic", stream=stream), "model": model})
    assert len(upstream.bodies) == before


RESPONSES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"


@pytest.mark.parametrize(
    ("model", "name", "outcome"),
    [
        ("azure/gpt-4o", "multiply_basic", "released"),
        ("azure/gpt-4o", "arguments_only_in_done", "quarantined"),
        # A model missing from litellm's map: litellm asks for a whole result and replays
        # it; the gate decides that whole body before litellm replays it.
        ("azure/my-deployment", "multiply_basic", "replayed"),
        ("openai/my-model", "multiply_basic", "replayed"),
        ("openai/my-model", "arguments_trailing_data", "replayed"),
    ],
)
def test_sync_responses_on_the_sdk_routes_are_gated(model: str, name: str, outcome: str) -> None:
    """Sync Responses calls go through litellm's own HTTP handler on openai/ and azure/,
    replayed ones too (a whole body decided before litellm replays it)."""
    manifest = json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))
    case = {c["name"]: c for c in manifest["cases"]}[name]
    body = (RESPONSES / case["body"]).read_bytes()
    # The whole result litellm asks for where it replays: the recording's completed response.
    completed = [
        json.loads(line[6:])["response"]
        for line in body.decode().splitlines()
        if line.startswith("data: ") and '"response.completed"' in line
    ]
    whole = json.dumps(completed[-1]).encode()
    with RouteServer(answers={"/responses": body}, wholes={"/responses": whole}) as server:
        base = server.base_url
        call = {
            "model": model,
            "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
            "tools": manifest["tools"],
            "api_base": base.removesuffix("/v1") if model.startswith("azure/") else base,
            "api_version": "2025-03-01-preview",
            "api_key": "sk-test",
            "stream": True,
            "num_retries": 0,
        }
        litellm.callbacks = [ToolGateGuardrail(manifest["tools"])]
        if outcome == "replayed" and case["expect"] != "release":
            with pytest.raises(Exception) as refused:
                list(litellm.responses(**call))
            fault = find_quarantine(refused.value)
            assert fault is not None and fault.reason is R(case["reason"])
            assert len(server.requests) == 1
        elif outcome in ("released", "replayed"):
            events = list(litellm.responses(**call))
            done = "response.output_item.done"
            items = [e.item for e in events if getattr(e, "type", "") == done]
            released = [dict(i) if not isinstance(i, dict) else i for i in items]
            calls = [i["arguments"] for i in released if i.get("type") == "function_call"]
            assert calls == [c["arguments"] for c in case["calls"]]
        elif outcome == "quarantined":
            with pytest.raises(ToolCallQuarantined) as caught:
                list(litellm.responses(**call))
            assert caught.value.reason is R(case["reason"])
        else:
            raise AssertionError(outcome)


def test_sdk_streams_from_threads_keep_their_own_wire(upstream: Recorder) -> None:
    names = ["multiply_basic", "unknown_tool", "args_invalid_json", "two_tools_interleaved"]
    jobs = [(SDK_ROUTES[(i + j) % 2], names[(i * 3 + j) % 4]) for i in range(4) for j in range(5)]

    def run(route: str, name: str) -> tuple[str, Any]:
        try:
            chunks = list(litellm.completion(**sdk_kwargs(upstream, name, route, stream=True)))
        except ToolCallQuarantined as exc:
            return name, exc.reason
        by_index: dict[int, str] = {}
        for chunk in chunks:
            for choice in chunk.choices:
                for tc in choice.delta.tool_calls or []:
                    by_index[tc.index] = by_index.get(tc.index, "") + (tc.function.arguments or "")
        return name, [by_index[i] for i in sorted(by_index)]

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda job: run(*job), jobs))
    for name, got in results:
        case = CASES[name]
        if case["expect"] == "release":
            assert got == [c["arguments"] for c in case["calls"]], name
        else:
            assert got is R(case["reason"]), name


def test_a_redirect_of_a_claimed_call_is_not_followed(upstream: Recorder) -> None:
    """The redirected request would carry no marker and its answer would go out unread."""
    target = upstream.base_url + "/chat/completions"
    hits: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        hits.append(str(request.url))
        if len(hits) == 1:
            return httpx.Response(307, headers={"location": target})
        return httpx.HTTPTransport().handle_request(request)

    saved = getattr(litellm, "sync_transport", None)
    litellm.sync_transport = httpx.MockTransport(answer)  # type: ignore[attr-defined]
    litellm.in_memory_llm_clients_cache.flush_cache()
    before = len(upstream.bodies)
    try:
        with pytest.raises(UngatedCallRefused, match="redirect"):
            list(litellm.completion(**kwargs(upstream, "unknown_tool", stream=True)))
    finally:
        litellm.sync_transport = saved  # type: ignore[attr-defined]
        litellm.in_memory_llm_clients_cache.flush_cache()
    assert len(hits) == 1 and len(upstream.bodies) == before


def test_a_claim_matches_only_the_call_that_armed_it(upstream: Recorder) -> None:
    """Wrong token, wrong thread, wrong URL, wrong body: refused, never sent."""
    gate = ToolGate(MANIFEST["tools"])
    transport = synccall.ClaimingTransport(httpx.HTTPTransport())
    url = upstream.base_url + "/chat/completions"
    body = {"model": "m", "messages": [{"role": "user", "content": "multiply_basic"}]}

    def armed(call_id: str) -> str:
        headers: dict[str, Any] = {}
        tap = synccall.WireTap(gate.new_attempt(), streamed=False)
        extra = {"api_base": url, "complete_input_dict": body, "headers": headers}
        details = {"litellm_call_id": call_id, "additional_args": extra}
        synccall.arm(details, tap, synccall.Withholding(None))
        return str(headers[synccall.MARKER])

    def send(token: str, *, to: str = url, payload: Any = body) -> None:
        request = httpx.Request(
            "POST", to, json=payload, headers={synccall.MARKER: token, "content-type": "x"}
        )
        # A refusal is answered unsent; it is raised where litellm reads that answer.
        transport.handle_request(request).content  # noqa: B018

    def refused_at_the_check(call_id: str) -> None:
        # Claimed by nobody, and called from no litellm call (no answer to turn into the
        # refusal): the last resort, which carries the typed refusal it stands for.
        with pytest.raises(synccall.SyncCallStopped) as stopped:
            synccall.check_claimed({"litellm_call_id": call_id})
        assert isinstance(stopped.value.refusal, UngatedCallRefused)
        assert not isinstance(stopped.value, Exception)

    before = len(upstream.bodies)
    with pytest.raises(UngatedCallRefused):
        send("forged")
    token = armed("c1")
    with pytest.raises(UngatedCallRefused):
        send(token, payload={**body, "model": "other"})
    with pytest.raises(UngatedCallRefused):  # the token is spent even by a refused try
        send(token)
    token = armed("c2")
    with pytest.raises(UngatedCallRefused):
        send(token, to=url + "?x=1")
    token = armed("c3")
    errors: list[BaseException] = []

    def other_thread() -> None:
        try:
            send(token)
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=other_thread)
    worker.start()
    worker.join()
    assert len(errors) == 1 and isinstance(errors[0], UngatedCallRefused)
    assert len(upstream.bodies) == before  # none of them was sent
    refused_at_the_check("c3")


def test_tool_gate_beside_the_callback_gates_once(
    upstream: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    tool_gate = ToolGate(MANIFEST["tools"])
    with caplog.at_level("INFO", logger="litellm_toolgate"):
        chunks = list(tool_gate.completion(**kwargs(upstream, "multiply_basic", stream=True)))
    assert "".join(calls_of(chunks)) == CASES["multiply_basic"]["calls"][0]["arguments"]
    attempts = {getattr(r, "toolgate", {}).get("attempt_id") for r in caplog.records}
    assert len(attempts) == 1, attempts  # one attempt: the callback left the call alone
    assert synccall.MARKER not in upstream.headers[-1]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_made_inside_a_policy_is_gated(upstream: Recorder, mode: str) -> None:
    """An LLM judge inside a ToolGate policy: its own sync call is gated, not waved through."""
    seen: list[BaseException | None] = []

    def judge(call: Any) -> PolicyDecision:
        try:
            litellm.completion(**kwargs(upstream, "unknown_tool"))
            seen.append(None)
        except ToolCallQuarantined as exc:
            seen.append(exc)
        return PolicyDecision.approve()

    tool_gate = ToolGate(MANIFEST["tools"], policy=judge)
    if mode == "sync":
        tool_gate.completion(**kwargs(upstream, "multiply_basic"))
    else:
        asyncio.run(tool_gate.acompletion(**kwargs(upstream, "multiply_basic")))
    assert len(seen) == 1 and isinstance(seen[0], SchemaRejected)


def test_bridged_aresponses_runs_one_attempt_and_one_policy(
    upstream: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    runs: list[str] = []

    def policy(call: Any) -> bool:
        runs.append(call.attempt_id)
        return True

    litellm.callbacks = [ToolGateGuardrail(MANIFEST["tools"], policy=policy)]

    async def go() -> list[Any]:
        stream = await litellm.aresponses(
            model="cometapi/gpt-4o-mini",
            input=[{"role": "user", "content": "multiply_basic"}],
            tools=MANIFEST["tools"],
            api_base=upstream.base_url,
            api_key="sk-test",
            stream=True,
        )
        return [event async for event in stream]

    with caplog.at_level("INFO", logger="litellm_toolgate"):
        asyncio.run(go())
    assert len(runs) == 1, runs
    attempts = {getattr(r, "toolgate", {}).get("attempt_id") for r in caplog.records}
    assert attempts == set(runs)


class Evicting:
    """A callback that empties litellm's client cache in its log_pre_api_call, and is taken
    out of every list of litellm's afterwards (left there, it would evict every later call's
    client)."""

    def __init__(self) -> None:
        from litellm.integrations.custom_logger import CustomLogger

        class Evict(CustomLogger):  # type: ignore[misc]
            def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
                litellm.in_memory_llm_clients_cache.flush_cache()

        self.callback = Evict()

    def __enter__(self) -> Any:
        litellm.in_memory_llm_clients_cache.flush_cache()  # the call makes a client of its own
        return self.callback

    def __exit__(self, *exc: object) -> None:
        for name in dir(litellm):
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not self.callback]
        litellm.in_memory_llm_clients_cache.flush_cache()


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
def test_a_client_evicted_after_the_hooks_ends_in_a_typed_refusal(
    upstream: Recorder, gate: ToolGateGuardrail, streamed: bool
) -> None:
    """On litellm's HTTP routes the handler is taken from litellm's client cache after the
    hooks ran; the cache evicts the one the gate wrapped in between (here: a callback after
    the gate empties it), so the call goes out on a fresh client the gate never saw. The
    request was sent; in log_post_api_call its answer is turned into the refusal, and the
    caller gets UngatedCallRefused (a ToolGateError, an Exception) where litellm first reads
    it: nothing of it is handed over."""
    sent = len(upstream.bodies)
    with Evicting() as evicting:
        litellm.callbacks = [gate, evicting]
        with pytest.raises(UngatedCallRefused, match="cannot see") as refused:
            answer = litellm.completion(**kwargs(upstream, "unknown_tool", stream=streamed))
            if streamed:
                for _chunk in answer:
                    raise AssertionError("a chunk of an unclaimed call reached the caller")
            raise AssertionError("the answer of an unclaimed call reached the caller")
    assert isinstance(refused.value, ToolGateError) and isinstance(refused.value, Exception)
    assert len(upstream.bodies) == sent + 1  # it did go out, on the client the gate never saw
    assert "delete_file" not in str(refused.value)  # nothing of the answer is in it


def test_an_sdk_client_litellm_holds_is_claimed_even_if_evicted_before_the_gate_runs(
    upstream: Recorder, gate: ToolGateGuardrail
) -> None:
    """On the OpenAI SDK routes litellm takes its SDK client before the hooks run; the cache
    evicts it before the gate sweeps the cache (here: a callback before the gate empties
    it). The gate claims the client litellm's call holds, so the stream is gated."""
    sent = len(upstream.bodies)
    with Evicting() as evicting:
        litellm.callbacks = [evicting, gate]
        with pytest.raises(SchemaRejected):
            list(litellm.completion(**sdk_kwargs(upstream, "unknown_tool", "openai", stream=True)))
    assert len(upstream.bodies) == sent + 1
    assert synccall.MARKER not in upstream.headers[-1]  # claimed: the marker was taken out


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
def test_a_responses_client_litellm_holds_is_claimed_even_if_evicted_before_the_gate_runs(
    gate: ToolGateGuardrail, streamed: bool
) -> None:
    """litellm's sync Responses handler takes its client before the hooks run, and logs no
    post_api_call for a stream: a client evicted before the gate swept the cache would have
    handed over an ungated stream. The gate claims the client the call holds."""
    manifest = json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))
    case = {c["name"]: c for c in manifest["cases"]}["arguments_only_in_done"]
    body = (RESPONSES / case["body"]).read_bytes()
    with RouteServer(answers={"/responses": body}) as server, Evicting() as evicting:
        litellm.callbacks = [evicting, ToolGateGuardrail(manifest["tools"])]
        call = {
            "model": "azure/gpt-4o",
            "input": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
            "tools": manifest["tools"],
            "api_base": server.base_url.removesuffix("/v1"),
            "api_version": "2025-03-01-preview",
            "api_key": "sk-test",
            "stream": streamed,
            "num_retries": 0,
        }
        with pytest.raises(ToolCallQuarantined):
            answer = litellm.responses(**call)
            if streamed:
                list(answer)
            raise AssertionError("an ungated Responses answer reached the caller")
        assert len(server.requests) == 1


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
def test_a_gate_closed_after_the_call_set_up_refuses_it_typed_and_unsent(
    upstream: Recorder, gate: ToolGateGuardrail, streamed: bool
) -> None:
    """The last gate is closed after litellm's call set-up passed it (another thread's
    close(); here: a callback before the gate closes it), so the process is put back when
    litellm runs the gate's log_pre_api_call. The gate takes the installation back for this
    one refusal: the request is answered unsent with UngatedCallRefused, and the clients are
    given back once it is delivered."""
    from litellm.integrations.custom_logger import CustomLogger

    class Closing(CustomLogger):  # type: ignore[misc]
        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            gate.close()

    closing = Closing()
    litellm.callbacks = [closing, gate]
    sent = len(upstream.bodies)
    try:
        with pytest.raises(UngatedCallRefused, match="closed") as refused:
            answer = litellm.completion(**kwargs(upstream, "multiply_basic", stream=streamed))
            if streamed:
                for _chunk in answer:
                    raise AssertionError("a chunk of a refused call reached the caller")
            raise AssertionError("a refused call's answer reached the caller")
    finally:
        for name in dir(litellm):
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not closing]
    assert isinstance(refused.value, ToolGateError)
    assert len(upstream.bodies) == sent  # never sent
    assert synccall.INSTALLATION.gates == 0 and synccall.INSTALLATION.wrapped == 0  # put back


@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
def test_a_gate_closed_after_arming_a_call_still_gates_it(
    upstream: Recorder, gate: ToolGateGuardrail, streamed: bool
) -> None:
    """The last gate is closed after its log_pre_api_call armed the call and before litellm
    sends it (another thread's close(); here: a callback after the gate closes it). The
    armed claim keeps the installation in place until it is settled, so the request is
    claimed on the wire and gated; the clients are given back once it was claimed."""
    from litellm.integrations.custom_logger import CustomLogger

    class Closing(CustomLogger):  # type: ignore[misc]
        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            gate.close()

    closing = Closing()
    litellm.callbacks = [gate, closing]
    try:
        with pytest.raises(SchemaRejected):
            answer = litellm.completion(**kwargs(upstream, "unknown_tool", stream=streamed))
            if streamed:
                list(answer)
            raise AssertionError("an armed call's answer reached the caller ungated")
    finally:
        for name in dir(litellm):
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not closing]
    assert synccall.MARKER not in upstream.headers[-1]  # claimed: the marker was taken out
    assert synccall.INSTALLATION.gates == 0 and synccall.INSTALLATION.wrapped == 0  # put back


def test_a_closed_gate_in_a_calls_own_callbacks_refuses_it_typed_and_unsent(
    upstream: Recorder, gate: ToolGateGuardrail
) -> None:
    """A closed gate handed to litellm in a call's own callbacks= (litellm reads no
    default_on of those, so its call set-up never sees it), with no gate left: its
    log_pre_api_call refuses the call, typed and unsent, on the installation it takes back
    for that refusal alone."""
    gate.close()
    litellm.callbacks = []
    assert synccall.INSTALLATION.gates == 0
    sent = len(upstream.bodies)
    for streamed in (True, False):
        with pytest.raises(UngatedCallRefused, match="closed"):
            answer = litellm.completion(
                callbacks=[gate], **kwargs(upstream, "multiply_basic", stream=streamed)
            )
            if streamed:
                list(answer)
            raise AssertionError("a closed gate's call was handed over")
        assert synccall.INSTALLATION.gates == 0 and synccall.INSTALLATION.wrapped == 0
    assert len(upstream.bodies) == sent


def test_a_refusal_that_cannot_be_put_in_place_is_the_last_resort(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If no claiming transport can be put around litellm's clients for a refused call
    (litellm's own code fails to build its client), log_pre_api_call has no Exception way
    out: SyncCallStopped, which carries the typed refusal; nothing is left installed."""
    from litellm_toolgate.edge.sync import hooks

    monkeypatch.setattr(synccall, "INSTALLATION", synccall.Installation())
    monkeypatch.setattr(litellm, "callbacks", [])  # no other gate decides in its place
    made = ToolGateGuardrail(MANIFEST["tools"])
    made.close()

    def broken(*handlers: Any) -> None:
        raise RuntimeError("litellm could not build its client")

    monkeypatch.setattr(hooks, "claim_http_handlers", broken)
    details = {"call_type": "completion", "litellm_call_id": "closed-1", "model": "m"}
    with pytest.raises(synccall.SyncCallStopped, match="closed") as stopped:
        made.log_pre_api_call(None, None, details)
    assert isinstance(stopped.value.refusal, UngatedCallRefused)
    assert synccall.INSTALLATION.gates == 0 and synccall.INSTALLATION.wrapped == 0
    assert len(synccall.CLAIMS) == 0
