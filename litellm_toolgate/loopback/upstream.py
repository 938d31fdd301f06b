"""A fake CometAPI chat-completions server on loopback, for tests and the demo.

It answers ``POST /v1/chat/completions`` (and ``/chat/completions``) with scripted bodies,
and ``POST /v1/responses`` (and ``/responses``) the same way, for the native Responses route,
and ``POST /v1/messages`` for the Anthropic route (point litellm's ``anthropic/`` models at
``upstream.root_url``: litellm appends ``/v1/messages`` itself), Ollama's ``/api/chat`` and
Gemini's ``.../models/<model>:streamGenerateContent`` / ``:generateContent`` (``gemini/``
and ``vertex_ai/gemini-...`` models at ``upstream.root_url``; the streamed path is answered as
a stream) and Vertex AI's ``:streamRawPredict`` / ``:rawPredict`` (``vertex_ai/claude-...``).
A request that asks for ``"stream": true`` (or a streamed path: Gemini's
``:streamGenerateContent``, Bedrock's ``/converse-stream``) gets its body in HTTP/1.1 chunked
transfer encoding, one chunk per write, so a client can tell a clean end (the zero-length
terminating chunk) from a connection that was dropped part way (no terminating chunk: httpx
raises ``RemoteProtocolError``). Other requests get a ``Content-Length`` body.

Only the standard library is used, and the server binds to 127.0.0.1 on an ephemeral port.

Example::

    with FakeUpstream() as upstream:
        upstream.enqueue(Scripted(body=recording("round1_multiply.sse")))
        ...  # point a client at upstream.base_url
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import select
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

__all__ = [
    "FakeUpstream",
    "Scripted",
    "answer_stream",
    "recording",
    "request_header",
    "request_path",
]

_CHAT_PATHS = frozenset(
    {
        "/v1/chat/completions",
        "/chat/completions",
        "/v1/responses",
        "/responses",
        "/v1/messages",
        "/api/chat",  # Ollama (ollama_chat/)
    }
)
_CHAT_SUFFIXES = (
    "/chat/completions",
    "/responses",
    ":streamGenerateContent",  # Gemini (gemini/): .../models/<model>:streamGenerateContent
    ":generateContent",
    "/converse-stream",  # Bedrock (bedrock/): /model/<model id>/converse-stream
    "/converse",
    # Claude on Vertex AI (vertex_ai/claude-...): .../publishers/anthropic/models/<model>
    # :streamRawPredict, Anthropic's Messages wire (the request says "stream": true).
    ":streamRawPredict",
    ":rawPredict",
    "/v2/chat",  # Cohere (cohere/): api_base is the whole URL, .../v2/chat
    "/text/chat_stream",  # watsonx.ai (watsonx/): /ml/v1/text/chat_stream?version=...
    "/text/chat",
)
_STREAM_SUFFIX = (":streamGenerateContent", "/converse-stream")
"""Gemini and Bedrock's Converse ask for a stream by the path (Gemini with ``?alt=sse`` too),
not by a ``stream`` field: answered in chunked transfer encoding, as the services do."""
_JOIN_TIMEOUT = 2.0
_REQUEST_WAIT = 120.0
"""How long a connection may stay silent (before its request, or within one) before the
server closes it: far longer than any client of a test waits to send."""
_local = threading.local()  # each request is served on a thread of its own


def request_path() -> str:
    """The URL path of the request being answered (for a handler serving several routes)."""
    return str(getattr(_local, "path", ""))


def request_header(name: str) -> str | None:
    """A header of the request being answered (None when it has none of that name)."""
    headers = getattr(_local, "headers", None)
    return None if headers is None else headers.get(name)


_STALL_POLL = 0.02


@dataclass
class Scripted:
    """One scripted response.

    ``chunk_sizes`` splits the body into writes of these sizes (cycled); ``None`` writes it
    at once. ``disconnect_after`` closes the connection after that many body bytes, without
    the terminating chunk (even when that is the whole body). ``stall_after`` sends that many
    body bytes and then goes silent until the server stops or the client goes away; the
    connection is then closed, again without the terminating chunk. With both set, the
    smaller one wins.
    """

    body: bytes
    status: int = 200
    content_type: str = "text/event-stream"
    chunk_sizes: Sequence[int] | None = None
    disconnect_after: int | None = None
    stall_after: int | None = None

    def __post_init__(self) -> None:
        if self.chunk_sizes is not None:
            if len(self.chunk_sizes) == 0:
                raise ValueError("chunk_sizes must not be empty")
            if any(size <= 0 for size in self.chunk_sizes):
                raise ValueError("chunk_sizes must all be positive")
        for name in ("disconnect_after", "stall_after"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name} must not be negative")


def _pieces(data: bytes, sizes: Sequence[int] | None) -> Iterator[bytes]:
    """Split ``data`` into consecutive pieces whose lengths follow ``sizes`` (cycled)."""
    if not data:
        return
    if sizes is None:
        yield data
        return
    pos = 0
    turn = 0
    while pos < len(data):
        size = sizes[turn % len(sizes)]
        turn += 1
        yield data[pos : pos + size]
        pos += size


class _Server(ThreadingHTTPServer):
    """A threading HTTP server that keeps track of its connection threads."""

    daemon_threads = True
    allow_reuse_address = False
    request_queue_size = 512  # the listen backlog: a load test opens hundreds at once

    def __init__(self, owner: FakeUpstream) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", owner.requested_port), _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="fake-upstream-conn",
            daemon=True,
        )
        self.owner._track(thread, request)
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            self.owner._untrack(request)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeCometAPI/0.1"
    sys_version = ""
    # The socket timeout for reads and writes on one connection. Generous: on a busy machine
    # a client may connect long before its event loop gets to send the request (hundreds of
    # calls started at once); a server that gave up first would reset a call the client still
    # makes. stop() cuts every connection still open, so nothing waits on this to end.
    timeout = _REQUEST_WAIT

    @property
    def _owner(self) -> FakeUpstream:
        return cast(_Server, self.server).owner

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: tests read the request log instead."""

    def do_GET(self) -> None:
        self._send_json(404, _error_body("not found", "invalid_request_error"))

    def do_POST(self) -> None:
        length_header = self.headers.get("Content-Length")
        try:
            length = int(length_header) if length_header is not None else 0
        except ValueError:
            length = -1
        if length < 0:
            self._send_json(400, _error_body("bad Content-Length", "invalid_request_error"))
            return
        raw = self.rfile.read(length) if length else b""
        path = _local.path = urlsplit(self.path).path
        _local.headers = self.headers
        # Azure's deployment paths (/openai/deployments/<name>/chat/completions) too.
        if path not in _CHAT_PATHS and not path.endswith(_CHAT_SUFFIXES):
            self._send_json(404, _error_body("not found", "invalid_request_error"))
            return
        try:
            payload = json.loads(raw)
        except ValueError:
            payload = None
        if not isinstance(payload, dict):
            self._send_json(400, _error_body("body is not a JSON object", "invalid_request_error"))
            return
        self._owner._record(payload)
        try:
            scripted = self._owner._next_response(payload)
        except Exception as exc:  # a handler that fails becomes a 500 for the client
            self._send_json(
                500, _error_body(f"handler failed: {type(exc).__name__}", "server_error")
            )
            return
        if scripted is None:
            self._send_json(500, _error_body("no scripted response left", "server_error"))
            return
        self._serve(
            scripted, streaming=payload.get("stream") is True or path.endswith(_STREAM_SUFFIX)
        )

    def _send_json(self, status: int, body: bytes) -> None:
        self.close_connection = True
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def _serve(self, scripted: Scripted, *, streaming: bool) -> None:
        body = scripted.body
        self.close_connection = True
        self.send_response(scripted.status)
        self.send_header("Content-Type", scripted.content_type)
        if streaming:
            self.send_header("Transfer-Encoding", "chunked")
            self.send_header("Cache-Control", "no-cache")
        else:
            self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()

        cuts = [n for n in (scripted.disconnect_after, scripted.stall_after) if n is not None]
        stop_at = min([len(body), *cuts])
        complete = not cuts  # with a cut, the terminating chunk is never sent
        try:
            for piece in _pieces(body[:stop_at], scripted.chunk_sizes):
                self._write(piece, chunked=streaming)
            if complete:
                if streaming:
                    self._write_raw(b"0\r\n\r\n")
                return
            stalls = scripted.stall_after is not None and (
                scripted.disconnect_after is None
                or scripted.stall_after <= scripted.disconnect_after
            )
            if stalls:
                self._stall()
        except OSError:
            return
        # Returning without the terminating chunk: the server then closes the socket.

    def _write(self, data: bytes, *, chunked: bool) -> None:
        if chunked:
            self._write_raw(b"%x\r\n" % len(data) + data + b"\r\n")
        else:
            self._write_raw(data)

    def _write_raw(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def _stall(self) -> None:
        """Send nothing until the server stops or the client closes its side."""
        stopping = self._owner._stopping
        conn = self.connection
        while not stopping.wait(_STALL_POLL):
            try:
                readable, _, _ = select.select([conn], [], [], 0)
                if readable and not conn.recv(1, socket.MSG_PEEK):
                    return
            except OSError:
                return


def _error_body(message: str, kind: str) -> bytes:
    return json.dumps({"error": {"message": message, "type": kind}}).encode()


class FakeUpstream:
    """A loopback chat-completions server answering with :class:`Scripted` responses.

    Responses come from the FIFO queue filled by :meth:`enqueue` first; when it is empty the
    ``handler`` (if any) is called with the request's JSON body. With neither, the server
    answers 500 with a JSON error. Every JSON body received is appended to ``requests``.
    ``port`` 0 (the default) lets the system pick a free port.
    """

    def __init__(
        self, handler: Callable[[dict[str, Any]], Scripted] | None = None, *, port: int = 0
    ) -> None:
        self.handler = handler
        self.requested_port = port
        self.requests: list[dict[str, Any]] = []
        self._queue: deque[Scripted] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._serve_thread: threading.Thread | None = None
        self._threads: list[threading.Thread] = []
        self._conns: set[socket.socket] = set()

    # Public API

    def enqueue(self, *scripted: Scripted) -> None:
        """Queue responses; each request takes the oldest one."""
        with self._lock:
            self._queue.extend(scripted)

    def discard(self) -> int:
        """Drop every queued response (one a refused, never sent, request left): how many."""
        with self._lock:
            dropped = len(self._queue)
            self._queue.clear()
        return dropped

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("FakeUpstream is not started")
        return int(self._server.server_address[1])

    @property
    def root_url(self) -> str:
        """The server's root, ``http://127.0.0.1:<port>`` (the Anthropic route's api_base)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API base, ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeUpstream:
        if self._server is not None:
            raise RuntimeError("FakeUpstream is already started")
        self._stopping.clear()
        self._server = _Server(self)
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="fake-upstream",
            daemon=True,
        )
        self._serve_thread.start()
        return self

    def stop(self) -> None:
        """Stop serving, end stalled responses and join every thread. Safe to call twice."""
        server = self._server
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._serve_thread is not None:
            self._serve_thread.join(_JOIN_TIMEOUT)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(0.5)
        # A connection still busy (a client that never sent its request, or a write that
        # blocks) is cut so that its thread ends too.
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(_JOIN_TIMEOUT)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
        self._server = None
        self._serve_thread = None

    def __enter__(self) -> FakeUpstream:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # Used by the server threads

    def _track(self, thread: threading.Thread, conn: socket.socket) -> None:
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            self._conns.add(conn)

    def _untrack(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)

    def _record(self, payload: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(payload)

    def _next_response(self, payload: dict[str, Any]) -> Scripted | None:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        if self.handler is None:
            return None
        return self.handler(payload)


def recording(name: str) -> bytes:
    """The bytes of a recorded stream shipped in ``litellm_toolgate/loopback/recordings``."""
    return resources.files(__package__).joinpath("recordings", name).read_bytes()


def answer_stream(text: str, *, model: str = "gpt-4o-mini") -> bytes:
    """A text-only SSE body streaming ``text``: role, content pieces, stop, usage, [DONE].

    The output is deterministic for a given text and model.
    """
    digest = hashlib.sha256(f"{model}\n{text}".encode()).hexdigest()
    base: dict[str, Any] = {
        "id": "chatcmpl-" + digest[:29],
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": model,
        "system_fingerprint": "fp_" + digest[29:39],
    }

    def event(choices: list[dict[str, Any]], **extra: Any) -> bytes:
        obj = {**base, "choices": choices, **extra}
        line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
        # Raw U+2028/U+2029 are valid JSON, but some line splitters break on them.
        line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
        return b"data: " + line.encode() + b"\n\n"

    def delta_choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    out = [event(delta_choice({"role": "assistant", "content": "", "refusal": None}))]
    for piece in _text_pieces(text):
        out.append(event(delta_choice({"content": piece})))
    out.append(event(delta_choice({}, "stop")))
    words = max(1, len(text.split()))
    out.append(
        event(
            [],
            usage={"prompt_tokens": 64, "completion_tokens": words, "total_tokens": 64 + words},
        )
    )
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def _text_pieces(text: str) -> list[str]:
    """Cut text into word-sized pieces, each keeping its leading space, like a tokenizer."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        if ch == " " and current.strip():
            pieces.append(current)
            current = ""
        current += ch
    if current:
        pieces.append(current)
    return pieces


def calls_stream(
    calls: Sequence[tuple[str, str, str]], *, text: str = "", model: str = "gpt-4o-mini"
) -> bytes:
    """A chat SSE body streaming ``text``, then the tool calls ``(id, name, arguments)``
    (each call's arguments cut in two fragments), ``finish_reason: tool_calls`` and [DONE]."""
    base: dict[str, Any] = {
        "id": "chatcmpl-calls",
        "object": "chat.completion.chunk",
        "created": 1767225600,
        "model": model,
    }

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
        line = json.dumps({**base, "choices": [choice]}, separators=(",", ":"))
        return b"data: " + line.encode() + b"\n\n"

    out = [event({"role": "assistant", "content": ""})]
    out += [event({"content": piece}) for piece in _text_pieces(text)]
    for index, (call_id, name, arguments) in enumerate(calls):
        half = len(arguments) // 2
        opened = {"index": index, "id": call_id, "type": "function"}
        opened["function"] = {"name": name, "arguments": arguments[:half]}
        out.append(event({"tool_calls": [opened]}))
        rest = {"index": index, "function": {"arguments": arguments[half:]}}
        out.append(event({"tool_calls": [rest]}))
    out.append(event({}, "tool_calls"))
    out.append(b"data: [DONE]\n\n")
    return b"".join(out)


def responses_calls_stream(
    calls: Sequence[tuple[str, str, str]], *, reasoning: str | None = "enc-reasoning-1"
) -> bytes:
    """A native Responses SSE body: a reasoning item (with ``encrypted_content``) and one
    ``function_call`` item per ``(call_id, name, arguments)``, then ``response.completed``."""
    response = {"id": "resp_calls", "object": "response", "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": response}]
    output: list[dict[str, Any]] = []
    if reasoning is not None:
        item = {"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": reasoning}
        events.append({"type": "response.output_item.added", "output_index": 0, "item": item})
        events.append({"type": "response.output_item.done", "output_index": 0, "item": item})
        output.append(item)
    for call_id, name, arguments in calls:
        index = len(output)
        item = {
            "id": f"fc_{index}",
            "type": "function_call",
            "call_id": call_id,
            "name": name,
            "arguments": "",
            "status": "in_progress",
        }
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        delta = {"item_id": item["id"], "output_index": index}
        events.append(
            {"type": "response.function_call_arguments.delta", **delta, "delta": arguments}
        )
        events.append(
            {"type": "response.function_call_arguments.done", **delta, "arguments": arguments}
        )
        done = {**item, "arguments": arguments, "status": "completed"}
        events.append({"type": "response.output_item.done", "output_index": index, "item": done})
        output.append(done)
    final = {**response, "status": "completed", "output": output}
    events.append({"type": "response.completed", "response": final})
    return b"".join(
        f"event: {e['type']}\ndata: {json.dumps({**e, 'sequence_number': n})}\n\n".encode()
        for n, e in enumerate(events)
    )
