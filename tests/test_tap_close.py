"""A closed tap body keeps nothing of its call, and what reaches it later gets nothing.

litellm keeps the httpx response of a proxy stream (and with it the body the gate tapped) in
reference cycles of its own after the stream ended. A closed body that still held its tap
kept the attempt and its reading state until the next collection (the gc-off proxy soak,
``tests/test_proxy_soak.py``). So closing a body lets go of the tap, the wrapped stream and
its piece iterator; a fresh read of a closed body is refused (``httpx.StreamClosed``), and
a reader that was inside it when it closed gets no further piece and takes no end of body.
"""

from __future__ import annotations

import asyncio
import gc
import json
import types
from collections import deque
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from litellm_toolgate.core import Attempt, ToolRegistry
from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.edge.transport import (
    AsyncTapTransport,
    StreamQuarantined,
    TapTransport,
    WireTap,
)

URL = "http://upstream/v1/chat/completions"


def _event(text: str) -> bytes:
    choice = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    return b"data: " + json.dumps({"id": "c", "choices": [choice]}).encode() + b"\n\n"


def _last() -> bytes:
    choice = {"index": 0, "delta": {}, "finish_reason": "stop"}
    event = b"data: " + json.dumps({"id": "c", "choices": [choice]}).encode() + b"\n\n"
    return event + b"data: [DONE]\n\n"


TEXT = [_event("one"), _event("two"), _last()]


class Pieces(httpx.SyncByteStream, httpx.AsyncByteStream):
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        yield from self.pieces

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self.pieces:
            yield piece

    def close(self) -> None:
        self.closed = True

    async def aclose(self) -> None:
        self.closed = True


class Upstream(httpx.BaseTransport, httpx.AsyncBaseTransport):
    def __init__(self, pieces: list[bytes]) -> None:
        self.body = Pieces(pieces)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=self.body, request=request)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return self.handle_request(request)


def _request() -> httpx.Request:
    return httpx.Request("POST", URL, json={"model": "m", "stream": True})


def _tap() -> tuple[Attempt, WireTap]:
    attempt = Attempt(ToolRegistry.from_tools([]))
    return attempt, WireTap(attempt, streamed=True)


def _reaches(start: object, target: object, limit: int = 200_000) -> bool:
    """Whether ``target`` is reachable from ``start`` by references, breadth first. Classes
    and modules are not entered, nor a function's globals (its closure and defaults are):
    the question is what the body holds, not what the process can reach. A walk that runs
    out of its bound fails rather than answer no."""
    seen: set[int] = set()
    todo: deque[object] = deque([start])
    while todo:
        obj = todo.popleft()
        if obj is target:
            return True
        if id(obj) in seen or isinstance(obj, (type, types.ModuleType)):
            continue
        seen.add(id(obj))
        assert len(seen) < limit, "the walk ran out of its bound"
        if isinstance(obj, types.FunctionType):
            todo.extend(obj.__closure__ or ())
            todo.extend(obj.__defaults__ or ())
            continue
        todo.extend(gc.get_referents(obj))
    return False


def test_a_closed_async_body_reaches_neither_the_tap_nor_the_attempt() -> None:
    async def go() -> None:
        attempt, tap = _tap()
        upstream = Upstream(TEXT)
        response = await AsyncTapTransport(upstream, tap).handle_async_request(_request())
        assert _reaches(response, attempt)  # while open, the body feeds the tap
        seen = [piece async for piece in response.stream]  # type: ignore[union-attr]
        assert b"".join(seen) == b"".join(TEXT)
        await response.aclose()
        assert upstream.body.closed
        assert tap.ended and attempt.quarantined is None  # the end was taken before
        assert tap.close_async is None
        assert not _reaches(response, attempt)
        assert not _reaches(response, tap)
        assert not _reaches(response, upstream.body)

    asyncio.run(go())


def test_a_closed_sync_body_reaches_neither_the_tap_nor_the_attempt() -> None:
    attempt, tap = _tap()
    upstream = Upstream(TEXT)
    response = TapTransport(upstream, tap).handle_request(_request())
    assert b"".join(response.stream) == b"".join(TEXT)  # type: ignore[arg-type]
    response.close()
    assert upstream.body.closed and tap.ended and tap.close_sync is None
    assert not _reaches(response, attempt)
    assert not _reaches(response, tap)


def test_closing_unread_drains_first_then_lets_go() -> None:
    # Closed before litellm read anything: the rest is drained into the attempt (its end
    # seen), and only then does the body let go.
    async def go() -> None:
        attempt, tap = _tap()
        response = await AsyncTapTransport(Upstream(TEXT), tap).handle_async_request(_request())
        await response.aclose()
        assert tap.ended and attempt.quarantined is None
        assert not _reaches(response, attempt)

    asyncio.run(go())


def test_a_late_read_of_a_closed_async_body_is_refused_and_takes_nothing() -> None:
    async def go() -> None:
        attempt, tap = _tap()
        response = await AsyncTapTransport(Upstream(TEXT), tap).handle_async_request(_request())
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)
        await response.aclose()
        concluded = attempt.summary()
        with pytest.raises(httpx.StreamClosed):
            async for _ in body:
                pass
        await body.aclose()  # a second close is a no-op
        assert attempt.summary() == concluded

    asyncio.run(go())


def test_a_late_read_of_a_closed_sync_body_is_refused() -> None:
    attempt, tap = _tap()
    response = TapTransport(Upstream(TEXT), tap).handle_request(_request())
    body = response.stream
    assert isinstance(body, httpx.SyncByteStream)
    response.close()
    concluded = attempt.summary()
    with pytest.raises(httpx.StreamClosed):
        list(body)
    body.close()
    assert attempt.summary() == concluded


def test_a_reader_inside_the_body_at_its_close_gets_nothing_more() -> None:
    # litellm read one piece, then the body was closed under it (its stream closed), then
    # the reader goes on: no piece passes after the close, and it ends without error, the
    # close having taken the body's end.
    async def go() -> None:
        attempt, tap = _tap()
        response = await AsyncTapTransport(Upstream(TEXT), tap).handle_async_request(_request())
        assert isinstance(response.stream, httpx.AsyncByteStream)
        reader = response.stream.__aiter__()
        assert await reader.__anext__() == TEXT[0]
        await response.aclose()
        assert tap.ended and attempt.quarantined is None
        with pytest.raises(StopAsyncIteration):
            await reader.__anext__()
        assert attempt.quarantined is None

    asyncio.run(go())


def test_a_reader_holding_an_open_line_of_a_quarantined_body_gets_a_read_error() -> None:
    # litellm holds an unterminated line when the close quarantines the stream (the drain
    # read a broken event): the reader going on gets the quarantine's read error, never a
    # clean end that would make litellm parse the held line, as before the body let go.
    broken = [_event("one")[:20], _event("one")[20:] + b"data: {not json\n\n" + _last()]

    async def go() -> None:
        attempt, tap = _tap()
        response = await AsyncTapTransport(Upstream(broken), tap).handle_async_request(_request())
        assert isinstance(response.stream, httpx.AsyncByteStream)
        reader = response.stream.__aiter__()
        assert await reader.__anext__() == broken[0]
        await response.aclose()
        assert attempt.quarantined is not None
        assert attempt.quarantined.reason is not QuarantineReason.CANCELLED
        with pytest.raises(StreamQuarantined):
            await reader.__anext__()

    asyncio.run(go())
