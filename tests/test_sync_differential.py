"""The differential side-effect test: the same requests, with and without a gate.

For calls the gate does not gate, a process with a :class:`ToolGateGuardrail` constructed,
registered and already used (so its sync claim is installed) must send exactly what a process
without it sends, and hand the caller the same result. Each scenario below runs twice, in a
world without a gate and in a world with one, against loopback servers (HTTP, and HTTPS with
a self-signed certificate), and the test compares what the servers (and a loopback HTTP
proxy) saw and what the caller got. The matrix: the process's and the call's ``ssl_verify``,
the user's ``litellm.sync_transport`` / ``client_session`` / ``aclient_session`` set before
and after the gate, environment proxies, redirects, the OpenAI SDK's own retries after a
429 or a 503, and a cache hit (``litellm.cache`` set before and after the gate: embeddings,
sync and async, answered from it the second time). Calls the gate does gate (a sync stream
after a 429, an async stream on the user's ``aclient_session``) must reach the same servers
through the same objects; a model turn is the one call litellm's cache answers differently:
with a gate it skips the cache read and is sent again, gated (the last test here).
"""

from __future__ import annotations

import asyncio
import datetime
import http.client
import ipaddress
import json
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import litellm
import pytest
from conftest import CASES, MANIFEST, body_of

from litellm_toolgate import ToolGateGuardrail
from litellm_toolgate.demo.serve import as_requested

litellm.suppress_debug_info = True

_EMBEDDING = {
    "object": "list",
    "data": [{"object": "embedding", "embedding": [0.25, -0.5], "index": 0}],
    "model": "m",
    "usage": {"prompt_tokens": 1, "total_tokens": 1},
}
_COHERE = {
    "id": "e-1",
    "embeddings": [[0.25, -0.5]],
    "texts": ["hello"],
    "meta": {"billed_units": {"input_tokens": 1}},
    "response_type": "embeddings_floats",
}
# Headers that differ between any two identical calls (none of them the gate's doing).
_VOLATILE = frozenset({"host", "x-stainless-read-timeout"})


@dataclass
class Seen:
    where: str
    path: str
    headers: dict[str, str]
    body: Any


@dataclass
class World:
    seen: list[Seen] = field(default_factory=list)
    failures: list[int] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(world: World, where: str) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("retry-after-ms", "1")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            payload = json.loads(self.rfile.read(length))
            headers = {k.lower(): v for k, v in self.headers.items()}
            with world.lock:
                world.seen.append(Seen(where, self.path, headers, payload))
                failure = world.failures.pop(0) if world.failures else None
            if self.path.startswith("/redirect/"):  # moved: 307 keeps the method and body
                self.send_response(307)
                self.send_header("location", self.path.removeprefix("/redirect"))
                self.send_header("content-length", "0")
                self.end_headers()
            elif failure is not None:
                self._send(failure, "application/json", b'{"error": {"message": "later"}}')
            elif "texts" in payload:  # Cohere's embedding request
                self._send(200, "application/json", json.dumps(_COHERE).encode())
            elif self.path.endswith("/embeddings"):
                self._send(200, "application/json", json.dumps(_EMBEDDING).encode())
            else:
                name = str(payload["messages"][-1]["content"])
                scripted = as_requested(payload, body_of(CASES[name]))
                self._send(200, scripted.content_type, scripted.body)

    return Handler


def _proxy_handler(world: World, target: str) -> type[BaseHTTPRequestHandler]:
    """A forward HTTP proxy: records the absolute URL, sends the request on to ``target``."""
    port = int(target.rsplit(":", 1)[1])

    class Proxy(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length)
            with world.lock:
                world.seen.append(Seen("proxy", self.path, {}, None))
            upstream = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
            upstream.request("POST", urlsplit(self.path).path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for key, value in answer.getheaders():
                if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                    self.send_header(key, value)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            upstream.close()

    return Proxy


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@dataclass
class Servers:
    world: World
    http: str
    https: str
    proxy: str
    chat: str  # where the gated world's first calls go (not recorded)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    world, warm = World(), World()
    plain = ThreadingHTTPServer(("127.0.0.1", 0), _handler(world, "http"))
    secure = ThreadingHTTPServer(("127.0.0.1", 0), _handler(world, "https"))
    cert, key = _self_signed(tmp_path_factory.mktemp("tls"))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    secure.socket = context.wrap_socket(secure.socket, server_side=True)
    http_url = f"http://127.0.0.1:{plain.server_address[1]}"
    proxy = ThreadingHTTPServer(("127.0.0.1", 0), _proxy_handler(world, http_url))
    chat = ThreadingHTTPServer(("127.0.0.1", 0), _handler(warm, "chat"))
    running = [plain, secure, proxy, chat]
    for server in running:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield Servers(
            world,
            http=http_url + "/v1",
            https=f"https://127.0.0.1:{secure.server_address[1]}/v1",
            proxy=f"http://127.0.0.1:{proxy.server_address[1]}",
            chat=f"http://127.0.0.1:{chat.server_address[1]}/v1",
        )
    finally:
        for server in running:
            server.shutdown()
            server.server_close()


def _outcome(call: Callable[[], Any]) -> str:
    try:
        result = call()
    except Exception as exc:  # the caller's view: which error
        return type(exc).__name__
    if hasattr(result, "data"):
        return json.dumps([dict(item) for item in result.data], sort_keys=True, default=str)
    return "".join(
        tc.function.arguments or ""
        for chunk in result
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    )


def _embed(base: str, route: str, **extra: Any) -> Callable[[], Any]:
    model = {
        "voyage": "voyage/voyage-3",
        "cohere": "cohere/embed-english-v3.0",  # reads the call's own ssl_verify
        "openai": "openai/text-embedding-3-small",
    }[route]
    return lambda: litellm.embedding(
        model=model, input=["hello"], api_base=base, api_key="sk-test", **extra
    )


def _first_calls(servers: Servers, gated: bool) -> ToolGateGuardrail | None:
    """The same first calls in both worlds; in the gated one a gate in litellm.callbacks
    gates them (a sync stream on each kind of route), so its sync claim is installed."""
    gate = ToolGateGuardrail(MANIFEST["tools"]) if gated else None
    if gate is not None:
        litellm.callbacks = [gate]
    for model in ("cometapi/gpt-4o-mini", "openai/gpt-4o-mini"):
        list(
            litellm.completion(
                model=model,
                messages=[{"role": "user", "content": "multiply_basic"}],
                api_base=servers.chat,
                api_key="sk-test",
                stream=True,
                num_retries=0,
            )
        )
    return gate


Scenario = Callable[[Servers, Callable[[], None]], list[str]]


def _run(servers: Servers, scenario: Scenario, gated: bool) -> tuple[list[str], list[Seen]]:
    saved = {
        "callbacks": litellm.callbacks,
        "ssl_verify": litellm.ssl_verify,
        "client_session": litellm.client_session,
        "aclient_session": litellm.aclient_session,
        "sync_transport": getattr(litellm, "sync_transport", None),
        "cache": litellm.cache,
    }
    litellm.in_memory_llm_clients_cache.flush_cache()
    servers.world.seen.clear()
    gate: ToolGateGuardrail | None = None

    def add_gate() -> None:
        nonlocal gate
        gate = _first_calls(servers, gated)
        servers.world.seen.clear()

    try:
        outcomes = scenario(servers, add_gate)
        return outcomes, list(servers.world.seen)
    finally:
        if gate is not None:
            gate.close()
        for name, value in saved.items():
            setattr(litellm, name, value)
        litellm.in_memory_llm_clients_cache.flush_cache()


def _comparable(seen: list[Seen]) -> list[tuple[str, str, dict[str, str], Any]]:
    return [
        (s.where, s.path, {k: v for k, v in s.headers.items() if k not in _VOLATILE}, s.body)
        for s in seen
    ]


# ---- the scenarios --------------------------------------------------------------------------
def tls_process_off_call_on(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    litellm.ssl_verify = False
    add_gate()
    return [
        _outcome(_embed(servers.https, "cohere", ssl_verify=True)),  # must fail: self-signed
        _outcome(_embed(servers.https, "cohere")),
        _outcome(_embed(servers.https, "openai")),
    ]


def tls_process_on_call_off(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    litellm.ssl_verify = True
    add_gate()
    return [
        _outcome(_embed(servers.https, "cohere", ssl_verify=False)),
        _outcome(_embed(servers.https, "cohere")),  # must fail: self-signed
        _outcome(_embed(servers.https, "openai")),
    ]


class _Marking(httpx.HTTPTransport):
    """A user's transport that leaves a trace on what it sends."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["x-user-transport"] = "yes"
        return super().handle_request(request)


def _chat(base: str, route: str, **extra: Any) -> Callable[[], Any]:
    """A sync stream the gate does gate (same wire, same answer, marker never sent)."""
    return lambda: litellm.completion(
        model=f"{route}/gpt-4o-mini",
        messages=[{"role": "user", "content": "multiply_basic"}],
        api_base=base,
        api_key="sk-test",
        stream=True,
        num_retries=0,
        **extra,
    )


def sync_transport_before(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    litellm.sync_transport = _Marking()  # type: ignore[attr-defined]
    add_gate()
    return [_outcome(_embed(servers.http, "voyage")), _outcome(_chat(servers.http, "cometapi"))]


def sync_transport_after(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    litellm.sync_transport = _Marking()  # type: ignore[attr-defined]
    litellm.in_memory_llm_clients_cache.flush_cache()  # litellm builds clients on it now
    return [_outcome(_chat(servers.http, "cometapi")), _outcome(_embed(servers.http, "voyage"))]


def client_session_before(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    litellm.client_session = httpx.Client(headers={"x-session": "mine"})
    add_gate()
    return [_outcome(_embed(servers.http, "openai")), _outcome(_chat(servers.http, "openai"))]


def client_session_after(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    litellm.client_session = httpx.Client(headers={"x-session": "mine"})
    litellm.in_memory_llm_clients_cache.flush_cache()  # litellm builds SDK clients on it now
    return [_outcome(_chat(servers.http, "openai")), _outcome(_embed(servers.http, "openai"))]


def _aclient_session(servers: Servers) -> list[str]:
    async def go() -> list[str]:
        embedded = await litellm.aembedding(
            model="openai/text-embedding-3-small",
            input=["hello"],
            api_base=servers.http,
            api_key="sk-test",
        )
        stream = await litellm.acompletion(
            model="openai/gpt-4o-mini",
            messages=[{"role": "user", "content": "multiply_basic"}],
            api_base=servers.http,
            api_key="sk-test",
            stream=True,
            num_retries=0,
        )
        chunks = [chunk async for chunk in stream]
        return [
            json.dumps([dict(item) for item in embedded.data], sort_keys=True, default=str),
            _outcome(lambda: chunks),
        ]

    litellm.aclient_session = httpx.AsyncClient(headers={"x-asession": "mine"})
    litellm.in_memory_llm_clients_cache.flush_cache()
    return asyncio.run(go())


def aclient_session_before(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()  # (set before or after makes no difference to the gate: it reads it per call)
    return _aclient_session(servers)


def environment_proxy(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    patch = pytest.MonkeyPatch()
    try:
        for variable in ("HTTP_PROXY", "http_proxy"):
            patch.setenv(variable, servers.proxy)
        for variable in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            patch.delenv(variable, raising=False)
        litellm.in_memory_llm_clients_cache.flush_cache()
        # An upstream name only the proxy resolves (it sends everything to the HTTP server).
        far = "http://upstream.invalid/v1"
        return [_outcome(_embed(far, "voyage")), _outcome(_embed(far, "openai"))]
    finally:
        patch.undo()


def sdk_retries(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    retrying = {"max_retries": 2, "num_retries": None}
    outcomes = []
    for status in (429, 503):
        servers.world.failures[:] = [status]
        outcomes.append(_outcome(_embed(servers.http, "openai", **retrying)))
        servers.world.failures[:] = [status]
        # A call the gate does gate: retried by the SDK, claimed again, released.
        outcomes.append(
            _outcome(
                lambda: litellm.completion(
                    model="openai/gpt-4o-mini",
                    messages=[{"role": "user", "content": "multiply_basic"}],
                    api_base=servers.http,
                    api_key="sk-test",
                    stream=True,
                    **retrying,
                )
            )
        )
    return outcomes


def _cached_embeddings(servers: Servers) -> list[str]:
    """Each embedding twice, sync and async: the second of each is litellm's cache hit."""

    async def twice() -> list[str]:
        got = []
        for _ in range(2):
            embedded = await litellm.aembedding(
                model="openai/text-embedding-3-small",
                input=["async"],
                api_base=servers.http,
                api_key="sk-test",
            )
            got.append(json.dumps([dict(item) for item in embedded.data], default=str))
            await asyncio.sleep(0.05)  # litellm writes an async call's entry in a task
        return got

    outcomes = []
    for route in ("openai", "voyage", "openai", "voyage"):
        outcomes.append(_outcome(_embed(servers.http, route)))
    return outcomes + asyncio.run(twice())


def cache_hit_before(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    litellm.cache = litellm.Cache(type="local")
    add_gate()
    return _cached_embeddings(servers)


def cache_hit_after(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    litellm.cache = litellm.Cache(type="local")
    return _cached_embeddings(servers)


def cached_model_turn(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    """Not in the differential: a call the gate does gate is never answered from the cache."""
    litellm.cache = litellm.Cache(type="local")
    add_gate()
    # (temperature: not the cache key of the first calls, which the ungated world also makes)
    return [_outcome(_chat(servers.http, "cometapi", temperature=0)) for _ in range(2)]


def redirects(servers: Servers, add_gate: Callable[[], None]) -> list[str]:
    add_gate()
    moved = servers.http.replace("/v1", "/redirect/v1")
    return [_outcome(_embed(moved, "voyage")), _outcome(_embed(moved, "openai"))]


SCENARIOS: dict[str, Scenario] = {
    "tls-process-off-call-on": tls_process_off_call_on,
    "tls-process-on-call-off": tls_process_on_call_off,
    "sync-transport-before": sync_transport_before,
    "sync-transport-after": sync_transport_after,
    "client-session-before": client_session_before,
    "client-session-after": client_session_after,
    "aclient-session": aclient_session_before,
    "environment-proxy": environment_proxy,
    "sdk-retries": sdk_retries,
    "redirects": redirects,
    "cache-hit-before": cache_hit_before,
    "cache-hit-after": cache_hit_after,
}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_a_gate_changes_nothing_it_does_not_gate(servers: Servers, name: str) -> None:
    scenario = SCENARIOS[name]
    plain_outcomes, plain_seen = _run(servers, scenario, gated=False)
    gated_outcomes, gated_seen = _run(servers, scenario, gated=True)
    assert gated_outcomes == plain_outcomes
    assert _comparable(gated_seen) == _comparable(plain_seen)
    assert plain_seen, "the scenario sent nothing"


def test_the_matrix_means_what_it_says(servers: Servers) -> None:
    """The worlds differ where the settings say they should (so the comparison can fail)."""
    # Per-call ssl_verify=True refused the self-signed certificate; the process's False let
    # the other two through.
    _, seen = _run(servers, tls_process_off_call_on, gated=True)
    assert [s.where for s in seen] == ["https", "https"]
    assert "texts" in seen[0].body and seen[1].path.endswith("/embeddings")
    # Per-call ssl_verify=False let that call through; the process's True refused the rest.
    _, seen = _run(servers, tls_process_on_call_off, gated=True)
    assert [s.where for s in seen] == ["https"]
    expected = CASES["multiply_basic"]["calls"][0]["arguments"]
    for scenario in (sync_transport_before, sync_transport_after):
        outcomes, seen = _run(servers, scenario, gated=True)
        assert expected in outcomes  # the gated call was released, not refused
        assert len(seen) == 2 and all(s.headers.get("x-user-transport") == "yes" for s in seen)
        assert all("x-toolgate-claim" not in s.headers for s in seen)
    for scenario in (client_session_before, client_session_after):
        outcomes, seen = _run(servers, scenario, gated=True)
        assert expected in outcomes
        assert len(seen) == 2 and all(s.headers.get("x-session") == "mine" for s in seen)
    _, seen = _run(servers, aclient_session_before, gated=True)
    assert len(seen) == 2 and all(s.headers.get("x-asession") == "mine" for s in seen)
    _, seen = _run(servers, environment_proxy, gated=True)
    assert [s.where for s in seen] == ["proxy", "http", "proxy", "http"]
    outcomes, seen = _run(servers, sdk_retries, gated=True)
    assert len(seen) == 8  # every call sent twice: the first try, and the SDK's retry
    assert outcomes[1] == outcomes[3] == expected
    _, seen = _run(servers, redirects, gated=True)
    assert [s.path.startswith("/redirect/") for s in seen] == [True, False, True, False]
    # Each embedding was sent once: its second call was litellm's cache hit, gate or not.
    for scenario in (cache_hit_before, cache_hit_after):
        _, seen = _run(servers, scenario, gated=True)
        assert [s.body.get("input") for s in seen] == [["hello"], ["hello"], ["async"]]


def test_a_gated_call_is_sent_again_where_litellm_would_answer_from_its_cache(
    servers: Servers,
) -> None:
    """The one difference the cache makes, on purpose (docs/callbacks.md, litellm's cache):
    without a gate the second call is a cache hit; with one, a model turn skips the cache
    read, is sent again and gated. The caller gets the same answer both times."""
    plain_outcomes, plain_seen = _run(servers, cached_model_turn, gated=False)
    gated_outcomes, gated_seen = _run(servers, cached_model_turn, gated=True)
    expected = CASES["multiply_basic"]["calls"][0]["arguments"]
    assert plain_outcomes == gated_outcomes == [expected, expected]
    assert len(plain_seen) == 1 and len(gated_seen) == 2
    assert _comparable(gated_seen)[:1] == _comparable(plain_seen)
