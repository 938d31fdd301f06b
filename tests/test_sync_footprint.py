"""The sync machinery's footprint on the process: retries, tables, globals, TLS.

Each test here pins one promise of the sync claim (see ``litellm_toolgate.edge.sync``):

* the OpenAI SDK's own retries after a 429 or a 503 are gated like the first try, and no
  refusal reaches the caller as a ``BaseException`` that is not a ``ToolGateError``;
* every outcome of a sync call, failure included, leaves the claim table as it found it;
* constructing a gate changes no global of litellm's; the first call that needs the sync
  claim installs it, ``close()`` puts every global back, two gates share one installation.
"""

from __future__ import annotations

import gc
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import litellm
import pytest
from conftest import CASES, MANIFEST, body_of

from litellm_toolgate import SchemaRejected, ToolGateError, ToolGateGuardrail
from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.edge.sync import claiming
from litellm_toolgate.edge.sync.custom import CustomProviderRefused

litellm.suppress_debug_info = True


class Scripted:
    """A loopback upstream that answers the fixtures, after ``failures`` statuses first."""

    def __init__(self) -> None:
        self.failures: list[int] = []
        self.seen: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                payload = json.loads(self.rfile.read(length))
                owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                if owner.failures:
                    status = owner.failures.pop(0)
                    body = b'{"error": {"message": "try later", "type": "upstream_error"}}'
                    self.send_response(status)
                    self.send_header("content-type", "application/json")
                    self.send_header("retry-after-ms", "1")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
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
def upstream() -> Iterator[Scripted]:
    server = Scripted()
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


@pytest.fixture
def gate() -> Iterator[ToolGateGuardrail]:
    saved = litellm.callbacks
    saved_session = litellm.client_session
    litellm.in_memory_llm_clients_cache.flush_cache()
    with ToolGateGuardrail(MANIFEST["tools"]) as made:
        litellm.callbacks = [made]
        try:
            yield made
        finally:
            litellm.callbacks = saved
            for name in dir(litellm):
                value = getattr(litellm, name, None)
                if isinstance(value, list):
                    value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]
    litellm.client_session = saved_session
    litellm.in_memory_llm_clients_cache.flush_cache()
    assert len(claiming.CLAIMS) == 0, "an armed claim was left behind"


def chat(upstream: Scripted, name: str, route: str = "cometapi", **extra: Any) -> dict[str, Any]:
    return {
        "model": f"{route}/gpt-4o-mini",
        "messages": [{"role": "user", "content": name}],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "num_retries": 0,
        **extra,
    }


def calls_of(chunks: list[Any]) -> str:
    return "".join(
        tc.function.arguments or ""
        for chunk in chunks
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    )


# ---- hole 7: the SDK's own retries --------------------------------------------------------
@pytest.mark.parametrize("status", [429, 503])
def test_an_sdk_retry_after_a_rate_limit_is_gated_and_released(
    upstream: Scripted, gate: ToolGateGuardrail, status: int
) -> None:
    upstream.failures[:] = [status]
    before = len(upstream.seen)
    chunks = list(
        litellm.completion(
            **chat(
                upstream, "multiply_basic", "openai", stream=True, max_retries=2, num_retries=None
            )
        )
    )
    assert len(upstream.seen) == before + 2, upstream.seen  # the first try, and the SDK retry
    assert calls_of(chunks) == CASES["multiply_basic"]["calls"][0]["arguments"]
    assert all(claiming.MARKER not in seen for seen in upstream.seen)
    # A retried call that is not valid is still refused.
    upstream.failures[:] = [status]
    with pytest.raises(SchemaRejected):
        list(
            litellm.completion(
                **chat(
                    upstream, "unknown_tool", "openai", stream=True, max_retries=2, num_retries=None
                )
            )
        )


# ---- hole 9: tables bounded and cleaned on every outcome ------------------------------------
def _live_claims() -> int:
    """Claim objects still alive anywhere (in the table or not)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o).__name__ == "_Claim")


def test_failed_sync_calls_leave_no_claim(upstream: Scripted, gate: ToolGateGuardrail) -> None:
    for _ in range(5):
        upstream.failures[:] = [500]
        with pytest.raises(litellm.InternalServerError):  # litellm maps the 500
            litellm.completion(**chat(upstream, "multiply_basic", stream=True))
        assert len(claiming.CLAIMS) == 0
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
    for _ in range(5):
        with pytest.raises((litellm.APIConnectionError, litellm.InternalServerError)):
            litellm.completion(**{**chat(upstream, "multiply_basic"), "api_base": dead})
        assert len(claiming.CLAIMS) == 0
    for _ in range(5):  # the SDK route: a 429 its client does not retry
        upstream.failures[:] = [429]
        with pytest.raises(litellm.RateLimitError):
            litellm.completion(
                **chat(upstream, "multiply_basic", "openai", stream=True, max_retries=0)
            )
        assert len(claiming.CLAIMS) == 0
    assert _live_claims() == 0  # nothing kept them (or a copy of their body) elsewhere


def test_a_kept_failure_keeps_no_claim(upstream: Scripted, gate: ToolGateGuardrail) -> None:
    """A failure logger (an error tracker, a test's recorder) that keeps every failed call's
    exception keeps its traceback's frames: the claiming transport's among them. The claim
    is not in that frame any more once the request has failed."""
    from litellm.integrations.custom_logger import CustomLogger

    class Keeper(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.kept: list[Any] = []

        def log_failure_event(self, kwargs: Any, *args: Any) -> None:
            self.kept.append(kwargs.get("exception"))

    keeper = Keeper()
    litellm.callbacks = [gate, keeper]
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens there
    raised = []
    try:
        for _ in range(3):
            with pytest.raises((litellm.APIConnectionError, litellm.InternalServerError)) as got:
                litellm.completion(**{**chat(upstream, "multiply_basic"), "api_base": dead})
            raised.append(got.value)  # kept, traceback and all, as a caller may keep it
        assert all(exc.__traceback__ is not None for exc in raised)
        assert _live_claims() == 0
    finally:
        for name in dir(litellm):  # litellm copied the logger into its other lists
            value = getattr(litellm, name, None)
            if isinstance(value, list) and keeper in value:
                value[:] = [cb for cb in value if cb is not keeper]


def test_the_gate_keeps_no_client_of_its_own_per_tls_setting(
    upstream: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One installation of this test's own (gates other tests made may still be alive).
    monkeypatch.setattr(claiming, "INSTALLATION", claiming.Installation())
    saved = litellm.callbacks
    gate = ToolGateGuardrail(MANIFEST["tools"])
    litellm.callbacks = [gate]
    litellm.in_memory_llm_clients_cache.flush_cache()

    def round_of_calls() -> None:
        for verify in (True, False, None):
            list(
                litellm.completion(
                    **chat(upstream, "multiply_basic", stream=True, ssl_verify=verify)
                )
            )

    try:
        round_of_calls()
        wrapped = claiming.INSTALLATION.wrapped
        assert 1 <= wrapped <= 4  # litellm's handlers for the three settings (+ its module one)
        for _ in range(3):
            round_of_calls()
        # Only litellm's own clients are wrapped (weakly held), one per ssl_verify as litellm
        # caches them; the gate makes no client of its own, per call or per setting.
        assert claiming.INSTALLATION.wrapped <= wrapped
    finally:
        gate.close()
        litellm.callbacks = saved
        litellm.in_memory_llm_clients_cache.flush_cache()


# ---- holes 6 and 8: nothing global until needed, close() restores ---------------------------
def test_a_gate_changes_nothing_until_a_call_needs_it_and_close_puts_it_back(
    upstream: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    from litellm.llms.custom_httpx.http_handler import _get_httpx_client

    saved_transport = getattr(litellm, "sync_transport", None)
    saved_session = litellm.client_session
    saved_callbacks = litellm.callbacks
    # One installation of this test's own (gates other tests made may still be alive).
    monkeypatch.setattr(claiming, "INSTALLATION", claiming.Installation())
    litellm.in_memory_llm_clients_cache.flush_cache()
    handler = _get_httpx_client(params={"ssl_verify": None})
    own = handler.client._transport
    module_level = litellm.module_level_client.client._transport
    first = ToolGateGuardrail(MANIFEST["tools"])
    second = ToolGateGuardrail(MANIFEST["tools"])
    try:
        # Constructing gates changes nothing.
        assert getattr(litellm, "sync_transport", None) is saved_transport
        assert litellm.client_session is saved_session
        assert handler.client._transport is own
        assert litellm.module_level_client.client._transport is module_level
        litellm.callbacks = [first]
        list(litellm.completion(**chat(upstream, "multiply_basic", stream=True)))
        # The call wrapped the client it went out on, in place, around its own transport.
        wrapped = handler.client._transport
        assert isinstance(wrapped, claiming.ClaimingTransport) and wrapped.inner is own
        assert getattr(litellm, "sync_transport", None) is saved_transport
        first.close()  # the other gate still holds the installation
        assert handler.client._transport is wrapped
        second.close()
        assert handler.client._transport is own
        assert litellm.module_level_client.client._transport is module_level
        assert claiming.INSTALLATION.wrapped == 0
        second.close()  # closing twice is harmless
        assert first not in litellm.callbacks  # close() took it out of litellm's lists
        # A closed gate put back by hand refuses the sync calls it would have gated.
        litellm.callbacks = [first]
        with pytest.raises(claiming.UngatedCallRefused, match="closed"):
            litellm.completion(**chat(upstream, "multiply_basic", stream=True))
    finally:
        litellm.callbacks = saved_callbacks
        first.close()
        second.close()
        litellm.in_memory_llm_clients_cache.flush_cache()


def test_close_takes_the_gate_out_of_litellms_callback_lists(upstream: Scripted) -> None:
    saved = litellm.callbacks
    with ToolGateGuardrail(MANIFEST["tools"]) as made:
        litellm.callbacks = [made]
        list(litellm.completion(**chat(upstream, "multiply_basic", stream=True)))
        assert made in litellm.input_callback  # litellm copied it there
    try:
        assert made not in litellm.callbacks and made not in litellm.input_callback
        assert made not in litellm.success_callback and made not in litellm.failure_callback
        # Without a gate the call is litellm's alone again.
        list(litellm.completion(**chat(upstream, "unknown_tool", stream=True)))
    finally:
        litellm.callbacks = saved


def test_a_gate_whose_construction_failed_closes_and_reprs_without_error() -> None:
    # A bad setting raises inside __init__; the half-built object can still be found (litellm
    # or a test reaching it through gc) and closed: it acquired nothing, so it releases
    # nothing, and the installation's count is untouched.
    before = claiming.INSTALLATION._gates
    with pytest.raises(Exception, match="max_callz"):
        ToolGateGuardrail(MANIFEST["tools"], limits={"max_callz": 1})
    half = ToolGateGuardrail.__new__(ToolGateGuardrail)
    half.close()
    assert repr(half) == "ToolGateGuardrail(None, None)"
    assert claiming.INSTALLATION._gates == before


# ---- hole 2: model turns the sync path never armed --------------------------------------
def _custom_providers(upstream: Scripted) -> dict[str, Any]:
    """Two CustomLLM providers that call the upstream: over raw httpx, over litellm's handler."""
    from litellm import CustomLLM, ModelResponse
    from litellm.llms.custom_httpx.http_handler import HTTPHandler

    def ask(send: Callable[[str, dict[str, Any]], bytes], name: str) -> ModelResponse:
        payload = {"model": "m", "messages": [{"role": "user", "content": name}]}
        body = json.loads(send(upstream.base_url + "/chat/completions", payload))
        return ModelResponse(**body)

    def raw(url: str, payload: dict[str, Any]) -> bytes:
        return httpx.post(url, json=payload).content

    def handled(url: str, payload: dict[str, Any]) -> bytes:
        return bytes(HTTPHandler().post(url, json=payload).content)

    class Provider(CustomLLM):
        def __init__(self, send: Callable[[str, dict[str, Any]], bytes]) -> None:
            super().__init__()
            self.send = send

        def completion(self, *args: Any, **kwargs: Any) -> ModelResponse:
            return ask(self.send, kwargs["messages"][-1]["content"])

        def streaming(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
            response = ask(self.send, kwargs["messages"][-1]["content"])
            call = response.choices[0].message.tool_calls[0]
            yield {
                "finish_reason": "tool_calls",
                "index": 0,
                "is_finished": True,
                "text": "",
                "tool_use": {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                    "index": 0,
                },
                "usage": None,
            }

    return {"rawllm": Provider(raw), "handlerllm": Provider(handled)}


@pytest.mark.parametrize("registered", ["before", "after"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_custom_provider_sync_turn_is_refused_unsent(
    upstream: Scripted, registered: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One installation of this test's own (gates other tests made may still be alive).
    monkeypatch.setattr(claiming, "INSTALLATION", claiming.Installation())
    providers = _custom_providers(upstream)
    saved_map, saved_callbacks = litellm.custom_provider_map, litellm.callbacks
    entries = [{"provider": name, "custom_handler": h} for name, h in providers.items()]

    def call(name: str) -> Any:
        result = litellm.completion(
            model=f"{name}/m",
            messages=[{"role": "user", "content": "unknown_tool"}],
            stream=stream,
        )
        return list(result) if stream else result

    try:
        if registered == "before":
            litellm.custom_provider_map = entries
        with ToolGateGuardrail(MANIFEST["tools"]) as made:
            litellm.callbacks = [made]
            if registered == "after":
                litellm.custom_provider_map = entries
                # Any call the gate sees next shadows the providers registered since.
                list(litellm.completion(**chat(upstream, "multiply_basic", stream=True)))
            before = len(upstream.seen)
            for name in providers:
                with pytest.raises(CustomProviderRefused, match=name):
                    call(name)
            assert len(upstream.seen) == before  # nothing was sent
        # Closed: the providers are theirs again (and their broken call goes through).
        for name in providers:
            assert call(name) is not None
    finally:
        litellm.custom_provider_map = saved_map
        litellm.callbacks = saved_callbacks


@pytest.mark.parametrize("api", ["completion", "responses"])
@pytest.mark.parametrize("registered", ["before", "after"])
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
def test_a_custom_provider_sync_turn_is_refused_unsent_as_the_first_call(
    upstream: Scripted, api: str, registered: str, stream: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chat and Responses, the provider registered before the gate or after it and called
    before any other call: refused before anything is sent, as a ToolGateError."""
    monkeypatch.setattr(claiming, "INSTALLATION", claiming.Installation())
    providers = _custom_providers(upstream)
    saved_map, saved_callbacks = litellm.custom_provider_map, litellm.callbacks
    entries = [{"provider": name, "custom_handler": h} for name, h in providers.items()]

    def call(name: str) -> Any:
        if api == "responses":
            result = litellm.responses(model=f"{name}/m", input="unknown_tool", stream=stream)
        else:
            result = litellm.completion(
                model=f"{name}/m",
                messages=[{"role": "user", "content": "unknown_tool"}],
                stream=stream,
            )
        return list(result) if stream else result

    try:
        if registered == "before":
            litellm.custom_provider_map = entries
        with ToolGateGuardrail(MANIFEST["tools"]) as made:
            litellm.callbacks = [made]
            if registered == "after":
                litellm.custom_provider_map = entries
            before = len(upstream.seen)
            for name in providers:
                with pytest.raises(ToolGateError, match=name):
                    call(name)
            assert len(upstream.seen) == before  # nothing was sent
    finally:
        litellm.custom_provider_map = saved_map
        litellm.callbacks = saved_callbacks
