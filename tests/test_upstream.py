"""The loopback fake CometAPI server: framing, transport faults, request log, handler, stop."""

from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any

import httpx
import pytest

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, recording

BODY = (
    b"".join(b'data: {"n":%d,"pad":"%s"}\n\n' % (i, b"x" * (i % 17)) for i in range(40))
    + b"data: [DONE]\n\n"
)
STREAM_REQUEST: dict[str, Any] = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
}


def _read_raw_http(port: int, payload: dict[str, Any]) -> bytes:
    """Send one POST over a plain socket and return every byte until the server closes."""
    data = json.dumps(payload).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data)
    ) + data
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(request)
        out = bytearray()
        while chunk := sock.recv(65536):
            out += chunk
    return bytes(out)


def _dechunk(raw: bytes) -> tuple[list[int], bytes, bool]:
    """Parse a chunked body: (chunk sizes, payload, whether the zero-length chunk came)."""
    sizes: list[int] = []
    payload = bytearray()
    pos = 0
    while True:
        eol = raw.index(b"\r\n", pos)
        size = int(raw[pos:eol], 16)
        pos = eol + 2
        if size == 0:
            assert raw[pos : pos + 2] == b"\r\n"
            return sizes, bytes(payload), True
        if pos + size + 2 > len(raw):
            return sizes, bytes(payload), False
        sizes.append(size)
        payload += raw[pos : pos + size]
        assert raw[pos + size : pos + size + 2] == b"\r\n"
        pos += size + 2
        if pos == len(raw):
            return sizes, bytes(payload), False


def _split_response(raw: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return lines[0], headers, body


def _collect(response: httpx.Response, sink: bytearray) -> None:
    for piece in response.iter_raw():
        sink += piece


def test_streamed_body_arrives_whole_in_chunks() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, chunk_sizes=[1, 7, 64]))
        with (
            httpx.Client(timeout=5) as client,
            client.stream("POST", f"{up.base_url}/chat/completions", json=STREAM_REQUEST) as r,
        ):
            assert r.status_code == 200
            assert r.headers["transfer-encoding"] == "chunked"
            assert r.headers["content-type"] == "text/event-stream"
            assert "content-length" not in r.headers
            received = bytearray()
            _collect(r, received)
    assert bytes(received) == BODY


def test_each_write_is_one_chunk_and_the_body_ends_cleanly() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, chunk_sizes=[5, 100]))
        raw = _read_raw_http(up.port, STREAM_REQUEST)
    status, headers, body = _split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    assert headers["connection"] == "close"
    sizes, payload, terminated = _dechunk(body)
    assert payload == BODY
    assert terminated
    expected = []
    left = len(BODY)
    turn = 0
    while left:
        size = min([5, 100][turn % 2], left)
        expected.append(size)
        left -= size
        turn += 1
    assert sizes == expected


def test_one_write_without_chunk_sizes() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY))
        raw = _read_raw_http(up.port, STREAM_REQUEST)
    sizes, payload, terminated = _dechunk(_split_response(raw)[2])
    assert (sizes, payload, terminated) == ([len(BODY)], BODY, True)


@pytest.mark.parametrize("cut", [0, 1, 123, len(BODY) - 1, len(BODY)])
def test_disconnect_after_breaks_the_stream_after_exactly_n_bytes(cut: int) -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, chunk_sizes=[10], disconnect_after=cut))
        received = bytearray()
        with (
            httpx.Client(timeout=5) as client,
            client.stream("POST", f"{up.base_url}/chat/completions", json=STREAM_REQUEST) as r,
            pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
        ):
            _collect(r, received)
    assert bytes(received) == BODY[:cut]


def test_disconnect_leaves_no_terminating_chunk_on_the_wire() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, disconnect_after=len(BODY)))
        raw = _read_raw_http(up.port, STREAM_REQUEST)
    _sizes, payload, terminated = _dechunk(_split_response(raw)[2])
    assert payload == BODY
    assert not terminated


def test_disconnect_of_a_non_streamed_body() -> None:
    with FakeUpstream() as up:
        up.enqueue(
            Scripted(body=b'{"ok": true}', content_type="application/json", disconnect_after=5)
        )
        with (
            httpx.Client(timeout=5) as client,
            pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)),
        ):
            client.post(f"{up.base_url}/chat/completions", json={"model": "m"})


def test_stall_after_times_the_client_out() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, chunk_sizes=[33], stall_after=100))
        received = bytearray()
        timeout = httpx.Timeout(5.0, read=0.3)
        started = time.monotonic()
        with (
            httpx.Client(timeout=timeout) as client,
            client.stream("POST", f"{up.base_url}/chat/completions", json=STREAM_REQUEST) as r,
            pytest.raises(httpx.ReadTimeout),
        ):
            _collect(r, received)
        assert time.monotonic() - started < 10  # a hang guard
    assert bytes(received) == BODY[:100]


def test_stall_ends_when_the_client_goes_away() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=BODY, stall_after=10))
        with (
            httpx.Client(timeout=5) as client,
            client.stream("POST", f"{up.base_url}/chat/completions", json=STREAM_REQUEST) as r,
        ):
            assert r.status_code == 200
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and any(t.is_alive() for t in up._threads):
            time.sleep(0.02)
        assert not any(t.is_alive() for t in up._threads)


def test_stop_returns_promptly_with_a_stalled_response_in_flight() -> None:
    up = FakeUpstream().start()
    up.enqueue(Scripted(body=BODY, stall_after=50))
    errors: list[BaseException] = []
    received = bytearray()
    first_bytes = threading.Event()

    def client_side() -> None:
        try:
            with (
                httpx.Client(timeout=30) as client,
                client.stream("POST", f"{up.base_url}/chat/completions", json=STREAM_REQUEST) as r,
            ):
                for piece in r.iter_raw():
                    received.extend(piece)
                    first_bytes.set()
        except BaseException as exc:  # recorded for the assertion below
            errors.append(exc)

    thread = threading.Thread(target=client_side, daemon=True)
    thread.start()
    assert first_bytes.wait(5)
    started = time.monotonic()
    up.stop()
    assert time.monotonic() - started < 5  # a hang guard, not a speed target
    thread.join(5)
    assert not thread.is_alive()
    assert bytes(received) == BODY[:50]
    assert len(errors) == 1
    assert isinstance(errors[0], (httpx.RemoteProtocolError, httpx.ReadError))
    assert not any(t.is_alive() for t in up._threads)
    up.stop()  # a second stop is harmless


def test_a_client_that_sends_its_request_late_is_answered_not_reset() -> None:
    # Many calls started at once on a busy machine: a client's connection is open long
    # before its event loop gets to send the request. The server used to give up on a silent
    # connection after 10 s and close it, so such a call failed with an empty-message
    # ReadError (a reset) or "Server disconnected" that litellm reports as a 500
    # (test_callback_concurrency, under load). 11 s: past that old bound.
    data = json.dumps({"model": "m", "messages": [], "stream": False}).encode()
    request = (
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(data)
    ) + data
    with FakeUpstream() as up:
        up.enqueue(Scripted(b"{}", content_type="application/json"))
        with socket.create_connection(("127.0.0.1", up.port), timeout=30) as sock:
            time.sleep(11)
            sock.sendall(request)
            out = bytearray()
            while chunk := sock.recv(65536):
                out += chunk
        status, _headers, body = _split_response(bytes(out))
        assert status == "HTTP/1.1 200 OK"
        assert body == b"{}"
        assert len(up.requests) == 1


def test_stop_cuts_a_connection_that_never_sends() -> None:
    up = FakeUpstream().start()
    with socket.create_connection(("127.0.0.1", up.port), timeout=30) as sock:
        deadline = time.monotonic() + 10
        while not up._conns and time.monotonic() < deadline:
            time.sleep(0.02)  # the server has accepted it and waits for the request
        assert up._conns
        started = time.monotonic()
        up.stop()
        assert time.monotonic() - started < 10  # a hang guard, not a speed target
        assert sock.recv(1) == b""  # closed by the server, unanswered
    assert not any(t.is_alive() for t in up._threads)


def test_non_streamed_body_uses_content_length() -> None:
    body = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "choices": []}).encode()
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=body, content_type="application/json", chunk_sizes=[3]))
        raw = _read_raw_http(up.port, {"model": "gpt-4o-mini", "messages": []})
    status, headers, payload = _split_response(raw)
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-length"] == str(len(body))
    assert "transfer-encoding" not in headers
    assert payload == body


def test_stream_false_is_not_streamed() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=b"{}", content_type="application/json"))
        r = httpx.post(f"{up.base_url}/chat/completions", json={"stream": False}, timeout=5)
    assert r.headers["content-length"] == "2"
    assert r.json() == {}


@pytest.mark.parametrize(
    ("path", "streamed"),
    [
        ("/model/m/converse-stream", True),
        ("/model/m/converse", False),
        ("/v1beta/models/g:streamGenerateContent", True),
        ("/v1beta/models/g:generateContent", False),
    ],
)
def test_a_stream_asked_for_by_its_path_is_chunked(path: str, streamed: bool) -> None:
    """Bedrock's Converse and Gemini ask for a stream by the path, not a ``stream`` field."""
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=b"{}", content_type="application/json"))
        r = httpx.post(f"{up.root_url}{path}", json={}, timeout=5)
    assert (r.headers.get("transfer-encoding"), r.headers.get("content-length")) == (
        ("chunked", None) if streamed else (None, "2")
    )
    assert r.json() == {}


def test_request_log_and_both_paths() -> None:
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=b"{}", content_type="application/json"))
        up.enqueue(Scripted(body=BODY))
        root = up.base_url.removesuffix("/v1")
        first = {"model": "a", "messages": [{"role": "user", "content": "one"}]}
        second = {**STREAM_REQUEST, "model": "b"}
        with httpx.Client(timeout=5) as client:
            assert client.post(f"{up.base_url}/chat/completions", json=first).content == b"{}"
            assert client.post(f"{root}/chat/completions", json=second).content == BODY
            missing = client.post(f"{up.base_url}/embeddings", json=first)
            assert missing.status_code == 404
        assert up.requests == [first, second]
        assert up.base_url == f"http://127.0.0.1:{up.port}/v1"


def test_empty_queue_without_handler_answers_500_json() -> None:
    with FakeUpstream() as up:
        r = httpx.post(f"{up.base_url}/chat/completions", json=STREAM_REQUEST, timeout=5)
    assert r.status_code == 500
    assert r.headers["content-type"] == "application/json"
    assert r.json()["error"]["type"] == "server_error"


def test_handler_runs_after_the_queue_is_used_up() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: dict[str, Any]) -> Scripted:
        seen.append(request)
        return Scripted(body=answer_stream(f"model was {request['model']}"))

    with FakeUpstream(handler) as up:
        up.enqueue(Scripted(body=b"queued"))
        with httpx.Client(timeout=5) as client:
            url = f"{up.base_url}/chat/completions"
            assert client.post(url, json={**STREAM_REQUEST, "model": "q"}).content == b"queued"
            answer = client.post(url, json={**STREAM_REQUEST, "model": "h"})
    assert [r["model"] for r in seen] == ["h"]
    assert answer.content == answer_stream("model was h")


def test_handler_failure_becomes_a_500() -> None:
    def handler(request: dict[str, Any]) -> Scripted:
        raise RuntimeError("boom")

    with FakeUpstream(handler) as up:
        r = httpx.post(f"{up.base_url}/chat/completions", json=STREAM_REQUEST, timeout=5)
    assert r.status_code == 500


def test_error_status_is_passed_through() -> None:
    error = b'{"error": {"message": "rate limited", "type": "rate_limit_error"}}'
    with FakeUpstream() as up:
        up.enqueue(Scripted(body=error, status=429, content_type="application/json"))
        r = httpx.post(f"{up.base_url}/chat/completions", json={"model": "m"}, timeout=5)
    assert r.status_code == 429
    assert r.content == error


def test_scripted_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError):
        Scripted(body=b"x", chunk_sizes=[0])
    with pytest.raises(ValueError):
        Scripted(body=b"x", chunk_sizes=[])
    with pytest.raises(ValueError):
        Scripted(body=b"x", disconnect_after=-1)


def _sse_payloads(body: bytes) -> list[str]:
    return [line[6:] for line in body.decode().split("\n") if line.startswith("data: ")]


def test_answer_stream_is_a_text_only_sse_body() -> None:
    text = "7 times 8 is 56, so the answer is 56."
    body = answer_stream(text)
    assert body == answer_stream(text)
    payloads = _sse_payloads(body)
    assert payloads[-1] == "[DONE]"
    chunks = [json.loads(p) for p in payloads[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    pieces = [c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]]
    assert "".join(pieces) == text
    assert sum(1 for p in pieces if p) > 3
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert all(c["model"] == "gpt-4o-mini" for c in chunks)
    assert json.loads(_sse_payloads(answer_stream("x", model="other"))[0])["model"] == "other"


def test_recordings_are_shipped() -> None:
    round1 = recording("round1_multiply.sse")
    assert b'"name":"multiply"' in round1
    assert round1.endswith(b"data: [DONE]\n\n")
    broken = recording("broken_truncated.sse")
    assert b"CANARY-7f3a9c" in broken
    assert b'"finish_reason":"' not in broken
    assert broken.endswith(b"data: [DONE]\n\n")
