"""A loopback upstream for every route at once: it records every request it gets, whatever
the path, method or body, and answers by path.

``answers`` maps a path suffix (``"/chat/completions"``, ``"/responses"``) to the body served
there (an SSE stream when the request asked for one, in chunked encoding); any other path gets
a 200 JSON error body, so a request that reaches it is counted, never mistaken for a stream.
Used by the route matrix (a refused route must send nothing) and the request-fidelity tests
(the request litellm sends with and without the gate).
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


def _asks_stream(body: bytes) -> bool:
    try:
        return bool(json.loads(body).get("stream"))
    except (ValueError, AttributeError):
        return False


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class RouteServer:
    answers: dict[str, bytes] = field(default_factory=dict)
    content_type: str = "text/event-stream"
    content_types: dict[str, str] = field(default_factory=dict)
    """A path suffix's own content type (Ollama's ``/api/chat`` streams NDJSON)."""
    wholes: dict[str, bytes] = field(default_factory=dict)
    """A path suffix's whole JSON body, served where the request did not ask for a stream
    (litellm asking for a whole Responses result it replays as events)."""
    requests: list[Seen] = field(default_factory=list)
    tls: ssl.SSLContext | None = None
    """Serve HTTPS with this server-side context (a failed handshake reaches no handler, so
    it is not a request: ``requests`` counts only what got through)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        scheme = "http" if self.tls is None else "https"
        return f"{scheme}://127.0.0.1:{self._server.server_address[1]}/v1"

    def answer(self, path: str) -> bytes | None:
        bare = path.split("?", 1)[0].rstrip("/")
        for suffix, body in self.answers.items():
            if bare.endswith(suffix):
                return body
        return None

    def whole(self, path: str) -> bytes | None:
        bare = path.split("?", 1)[0].rstrip("/")
        return next((b for s, b in self.wholes.items() if bare.endswith(s)), None)

    def __enter__(self) -> RouteServer:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with owner._lock:
                    owner.requests.append(
                        Seen(self.command, self.path, dict(self.headers.items()), body)
                    )
                answer = owner.answer(self.path)
                whole = None if _asks_stream(body) else owner.whole(self.path)
                if whole is not None:
                    self.close_connection = True
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(whole)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(whole)
                    return
                # Each answer closes its connection, and says so: a client that is not told
                # may reuse the socket for its next request while this side closes it.
                self.close_connection = True
                if answer is None:
                    payload = b'{"error": {"message": "not a route this server serves"}}'
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_response(200)
                bare = self.path.split("?", 1)[0].rstrip("/")
                content_type = next(
                    (t for s, t in owner.content_types.items() if bare.endswith(s)),
                    owner.content_type,
                )
                self.send_header("Content-Type", content_type)
                self.send_header("Transfer-Encoding", "chunked")
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(answer), answer))

            do_POST = do_GET = do_PUT = _any

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        if self.tls is not None:
            # The handshake runs in accept(); one that fails is an OSError there, which the
            # server drops before any handler runs.
            self._server.socket = self.tls.wrap_socket(self._server.socket, server_side=True)
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        ).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
