"""TLS on the handler routes: a gated call trusts, and fails, exactly where litellm does.

The gate sends a gated request through a tapped copy of the handler litellm builds for the
call (``edge/clients.py``), so litellm's TLS settings must hold through it: the call's
``ssl_verify`` (a CA bundle's path, ``False``, or the default trust store), the process-wide
``litellm.ssl_verify``, and a client certificate (``litellm.ssl_certificate``) for a server
that asks for one. Each case below makes the same streamed ``cometapi/`` call, sync and
async (on litellm's default aiohttp transport, and on httpx), to an HTTPS server on
loopback whose certificate a throwaway CA signed: once with plain litellm, once through
:class:`ToolGate`; the outcome (the calls released, or the error's type) and the number of
requests that got past the handshake must be the same. The cases where trust fails are the
point: through the gate, as without it, the request never reaches the server.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import ipaddress
import ssl
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CASES, MANIFEST, body_of
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from litellm.llms.custom_httpx import http_handler
from routeserver import RouteServer

from litellm_toolgate import ToolGate

litellm.suppress_debug_info = True
GOOD = body_of(CASES["multiply_basic"])


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA's certificate: the bundle a caller trusts
    server_cert: Path
    server_key: Path
    client: Path  # a client certificate and its key, in one PEM file


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _issue(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: tuple[x509.Name, ec.EllipticCurvePrivateKey] | None,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    issuer_name, signer = issuer if issuer is not None else (_name(subject), key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    else:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return builder.sign(signer, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    where = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _issue("toolgate test CA", ca_key, None, ca=True)
    server_key = ec.generate_private_key(ec.SECP256R1())
    server = _issue(
        "127.0.0.1", server_key, (ca.subject, ca_key), usage=ExtendedKeyUsageOID.SERVER_AUTH
    )
    client_key = ec.generate_private_key(ec.SECP256R1())
    client = _issue(
        "caller", client_key, (ca.subject, ca_key), usage=ExtendedKeyUsageOID.CLIENT_AUTH
    )
    paths = Pki(where / "ca.pem", where / "server.pem", where / "server.key", where / "client.pem")
    paths.ca.write_bytes(_pem(ca))
    paths.server_cert.write_bytes(_pem(server))
    paths.server_key.write_bytes(_key_pem(server_key))
    paths.client.write_bytes(_pem(client) + _key_pem(client_key))
    return paths


def _server_context(pki: Pki, *, client_cert: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if client_cert:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    return context


@pytest.fixture(scope="module")
def https(pki: Pki) -> Iterator[RouteServer]:
    with RouteServer(
        answers={"/chat/completions": GOOD}, tls=_server_context(pki, client_cert=False)
    ) as server:
        yield server


@pytest.fixture(scope="module")
def mtls(pki: Pki) -> Iterator[RouteServer]:
    with RouteServer(
        answers={"/chat/completions": GOOD}, tls=_server_context(pki, client_cert=True)
    ) as server:
        yield server


def _outcome(gate: ToolGate | None, kwargs: dict[str, Any], asynchronous: bool) -> str:
    """The calls released (by name), or the type of the error the call ended in."""
    kwargs = {
        **kwargs,
        "messages": [{"role": "user", "content": "7 x 8?"}],
        "tools": copy.deepcopy(MANIFEST["tools"]),
        "stream": True,
        "max_retries": 0,
    }
    names: list[str] = []

    def take(chunk: Any) -> None:
        for call in chunk.choices[0].delta.tool_calls or []:
            if call.function.name:
                names.append(call.function.name)

    try:
        if asynchronous:

            async def go() -> None:
                call = litellm.acompletion if gate is None else gate.acompletion
                async for chunk in await call(**kwargs):
                    take(chunk)

            asyncio.run(go())
        else:
            call = litellm.completion if gate is None else gate.completion
            for chunk in call(**kwargs):
                take(chunk)
    except Exception as error:
        return f"error {type(error).__name__}"
    return "released " + ",".join(names)


def _plain_and_gated(
    server: RouteServer, kwargs: dict[str, Any], mode: str
) -> tuple[tuple[str, int], tuple[str, int]]:
    """(outcome, requests the server got) for plain litellm, then through a new gate; each
    with litellm's handler caches empty, as in a process that starts with these settings."""
    seen = []
    for gated in (False, True):
        _fresh_litellm_tls()
        server.requests.clear()
        if gated:
            with ToolGate(MANIFEST["tools"]) as gate:
                outcome = _outcome(gate, kwargs, mode != "sync")
        else:
            outcome = _outcome(None, kwargs, mode != "sync")
        seen.append((outcome, len(server.requests)))
    return seen[0], seen[1]


def _fresh_litellm_tls() -> None:
    """litellm's handlers and SSL contexts, built anew as in a process that starts with the
    settings the test made. litellm keeps one SSL context per CA bundle for the process, and
    httpx loads a client certificate into the context it is given: once a call used a client
    certificate, every later call that trusts the same bundle presents it too, with or without
    the gate. The tests start from empty caches so each setting is judged on its own."""
    litellm.in_memory_llm_clients_cache.flush_cache()
    http_handler._ssl_context_cache.clear()


@pytest.fixture
def tls_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """litellm's process-wide TLS settings, as each test sets them, put back afterwards."""
    for name in ("SSL_VERIFY", "SSL_CERTIFICATE", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(litellm, "ssl_verify", True)
    monkeypatch.setattr(litellm, "ssl_certificate", None)
    monkeypatch.setattr(litellm, "disable_aiohttp_transport", False)
    yield
    _fresh_litellm_tls()


RELEASED = "released multiply"
MODES = ["sync", "async", "async-httpx"]
"""How the call is made: sync, async on the aiohttp transport litellm uses by default, or
async with ``litellm.disable_aiohttp_transport`` (httpx)."""


def _kwargs(server: RouteServer, **extra: Any) -> dict[str, Any]:
    return {
        "model": "cometapi/gpt-4o-mini",
        "api_base": server.base_url,
        "api_key": "sk-t",
        **extra,
    }


@pytest.mark.usefixtures("tls_settings")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "setting", ["call-ca-bundle", "call-no-verify", "process-ca-bundle", "default-trust"]
)
def test_server_trust_holds_through_the_gate(
    https: RouteServer, pki: Pki, setting: str, mode: str
) -> None:
    litellm.disable_aiohttp_transport = mode == "async-httpx"
    extra: dict[str, Any] = {}
    if setting == "call-ca-bundle":
        extra["ssl_verify"] = str(pki.ca)
    elif setting == "call-no-verify":
        extra["ssl_verify"] = False
    elif setting == "process-ca-bundle":
        litellm.ssl_verify = str(pki.ca)
    plain, gated = _plain_and_gated(https, _kwargs(https, **extra), mode)
    assert gated == plain
    if setting == "default-trust":
        # The throwaway CA is in no trust store: the handshake fails, nothing is sent.
        assert plain[0].startswith("error ") and plain[1] == 0
    else:
        assert plain == (RELEASED, 1)


@pytest.mark.usefixtures("tls_settings")
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("with_certificate", [True, False], ids=["certificate", "none"])
def test_a_client_certificate_holds_through_the_gate(
    mtls: RouteServer, pki: Pki, with_certificate: bool, mode: str
) -> None:
    litellm.disable_aiohttp_transport = mode == "async-httpx"
    if with_certificate:
        litellm.ssl_certificate = str(pki.client)
    plain, gated = _plain_and_gated(mtls, _kwargs(mtls, ssl_verify=str(pki.ca)), mode)
    assert gated == plain
    if with_certificate and mode != "async":
        assert plain == (RELEASED, 1)
    else:
        # Without a certificate the server lets no request in. Nor with one on litellm's
        # aiohttp transport (its default for async calls): on both supported versions it does
        # not present litellm.ssl_certificate, with or without the gate.
        assert plain[0].startswith("error ") and plain[1] == 0


@pytest.mark.usefixtures("tls_settings")
def test_one_gate_does_not_carry_trust_from_one_call_to_the_next(
    https: RouteServer, pki: Pki
) -> None:
    """The gate keeps a handler per TLS setting: a call that trusts the CA, then one that
    trusts only the default store, on one gate; the second fails as it does without it."""
    _fresh_litellm_tls()
    with ToolGate(MANIFEST["tools"]) as gate:
        first = _outcome(gate, _kwargs(https, ssl_verify=str(pki.ca)), False)
        https.requests.clear()
        second = _outcome(gate, _kwargs(https, ssl_verify=True), False)
    assert first == RELEASED
    assert second.startswith("error ") and https.requests == []
