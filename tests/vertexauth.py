"""Google credentials for litellm's ``vertex_ai/`` route, on loopback.

litellm fetches an OAuth access token through google-auth before every ``vertex_ai/``
request, even with an ``api_base``. :func:`vertex_args` gives litellm a throwaway service
account (an RSA key made here, never anything of Google's) whose ``token_uri`` is a loopback
token endpoint of this module: google-auth signs a JWT with the key and posts it there over
its own ``requests`` session, and gets a made-up token back. That request never reaches the
fake upstream the model call goes to, nor the gate's client: :data:`TOKENS` counts it.

One token server serves the whole test process (litellm caches a token per credentials).
"""

from __future__ import annotations

import json
import threading
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

PROJECT = "toolgate-test"
LOCATION = "us-central1"
TOKEN = "ya29.toolgate-loopback-token"
TOKENS: list[str] = []
"""The path of every token request the loopback token endpoint answered."""


class _TokenHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        form = self.rfile.read(length).decode() if length else ""
        TOKENS.append(self.path)
        ok = self.path == "/token" and "assertion=" in form
        body = json.dumps(
            {"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer"}
            if ok
            else {"error": "invalid_grant"}
        ).encode()
        self.close_connection = True
        self.send_response(200 if ok else 400)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)


@cache
def _token_uri() -> str:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenHandler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    ).start()
    return f"http://127.0.0.1:{server.server_address[1]}/token"


@cache
def credentials() -> str:
    """A service account's JSON, as ``vertex_credentials=`` takes it (a string)."""
    return new_credentials()


def new_credentials() -> str:
    """Another service account (a key of its own): litellm keeps a token per credentials, so
    its first call with these fetches one."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    return json.dumps(
        {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": "loopback",
            "private_key": pem,
            "client_email": f"gate@{PROJECT}.iam.gserviceaccount.com",
            "client_id": "1",
            "token_uri": _token_uri(),
        }
    )


def vertex_args() -> dict[str, Any]:
    """litellm's arguments that place a ``vertex_ai/`` call (with an ``api_base`` of the
    caller's) and let it get its token on loopback."""
    return {
        "vertex_credentials": credentials(),
        "vertex_project": PROJECT,
        "vertex_location": LOCATION,
    }


GEMINI_MODEL = "vertex_ai/gemini-2.5-flash"
CLAUDE_MODEL = "vertex_ai/claude-sonnet-4@20250514"
GEMINI_PATH = (
    f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-2.5-flash"
    ":streamGenerateContent"
)
"""The path litellm (1.108.7 and 1.110.2) calls for a streamed Gemini model under an
``api_base`` (with ``?alt=sse``)."""
CLAUDE_PATH = (
    f"/v1/projects/{PROJECT}/locations/{LOCATION}/publishers/anthropic/models/"
    "claude-sonnet-4@20250514:streamRawPredict"
)
"""The path litellm calls for a streamed Claude model on Vertex under an ``api_base``."""


def long_decode(upstream: FakeUpstream) -> list[str]:
    """Serve an answer in two hops, as Vertex does for litellm's "long decode" (a request
    with an output limit): text ending ``CONTINUATION`` with a ``continuationToken``, then
    (asked again with the token, at ``v1beta1``) a call ending ``STOP``. The paths asked."""
    paths: list[str] = []

    def hop(parts: list[Any], finish: str, token: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        candidate["finishReason"] = finish
        if token is not None:
            candidate["continuationToken"] = token
        usage = {"promptTokenCount": 3, "candidatesTokenCount": 5, "totalTokenCount": 8}
        message = {"candidates": [candidate], "usageMetadata": usage}
        return b"data: " + json.dumps(message).encode() + b"\r\n\r\n"

    call = {"functionCall": {"name": "multiply", "args": {"a": 7, "b": 8}}}
    bodies = [hop([{"text": "7 times 8"}], "CONTINUATION", "hop-1"), hop([call], "STOP")]

    def answer(_: dict[str, Any]) -> Scripted:
        paths.append(request_path())
        return Scripted(bodies.pop(0))

    upstream.handler = answer
    return paths
