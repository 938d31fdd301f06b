"""The httpx edge: a transport that shows the gate every byte litellm reads.

litellm accepts a caller's HTTP client; the gate hands it one whose transport wraps the real
one. The wrapped response stream feeds each piece of the body to the attempt *before*
litellm sees it, so by the time litellm yields a chunk the gate has already judged the wire
that produced it. On a fault the body is cut short for litellm and the attempt keeps the
quarantine for whoever gates the stream to raise. Where litellm was handed whole lines only,
the body simply ends (litellm ends its stream quietly, and the gated stream, or the proxy's
hook, raises the quarantine with its own status). Where litellm holds an unterminated line
it ends in a read error instead: at a clean end litellm would take that line, up to
``max_event_bytes`` of it, for a whole one and parse it.

litellm stops reading at ``[DONE]`` and closes the response; closing drains what is left
of the body (bounded by the attempt's limits) so the gate knows whether it ended cleanly.
Read errors become interruptions: a read timeout is a stall (a stream's read timeout is
lowered to the gate's idle limit; a whole response keeps the caller's), any other transport
error a disconnect.

The sync and async bodies are thin loops over :class:`_TapBody`, which owns what a piece
and the end of reading mean.
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import httpx

from ..core.decision.attempt import Attempt
from ..core.decision.body import BodyReader
from ..core.errors import QuarantineReason, ToolCallQuarantined
from ..core.rules.policy import Policy
from ..core.wires import chat as chat_wire

R = QuarantineReason
# One read from the socket can hold 64 KiB, hundreds of events. The gate decodes what it is
# fed before litellm sees it, so a whole read would delay litellm's first chunk by the time
# the gate takes to decode all of it, and hold an event loop for milliseconds. Pieces are
# fed and passed on in slices of this size instead (litellm reassembles any split).
_SLICE = 8 * 1024


def _slices(piece: bytes) -> list[bytes]:
    if len(piece) <= _SLICE:
        return [piece]
    return [piece[i : i + _SLICE] for i in range(0, len(piece), _SLICE)]


class StreamQuarantined(httpx.ReadError):
    """What litellm reads in place of the rest of a quarantined body. Says nothing more."""

    def __init__(self) -> None:
        super().__init__("the gate quarantined this stream")


class WireTap(BodyReader):
    """Binds one attempt to the HTTP responses of one litellm call (the core's
    :class:`~..core.body.BodyReader` feeds it the body)."""

    def __init__(self, attempt: Attempt, *, streamed: bool) -> None:
        super().__init__(attempt, streamed=streamed)
        # Whether litellm hands the caller Responses events (either route) or chat chunks.
        self.responses_api = False
        # Whether litellm replays a whole Responses result as the caller's stream: the wire
        # is whole (``streamed`` False), litellm's events a stream all the same.
        self.replayed = False
        # Whether litellm hands the caller Anthropic Messages events (``/v1/messages``).
        self.messages_api = False
        # Where the call's request must go (``/v1/messages``: the bridge litellm was asked
        # about, see bridges); a request sent elsewhere is refused unsent.
        self.wire_path: str | None = None
        # The policy of the gate (or gate set) that judges the call (taps.new_tap).
        self.policy: Policy | None = None
        self.close_sync: Callable[[], None] | None = None
        self.close_async: Callable[[], Awaitable[None]] | None = None
        # Run with this tap as each request is prepared, inside litellm's call (the owner's
        # hook: ToolGate holds litellm's success logging of a whole answer there).
        self.on_prepare: Callable[[WireTap], None] | None = None
        # On a route whose litellm handler drops client=: the call's claim on litellm's own
        # client (sync.tokenclaim), checked before anything of the answer is handed over.
        self.token_claim: Any = None

    def prepare(self, request: httpx.Request) -> None:
        """Hand the attempt the request's fields; lower a stream's read timeout to the idle
        limit (a whole response keeps its own: :meth:`~..core.body.BodyReader.read_timeout`)."""
        if self.on_prepare is not None:
            self.on_prepare(self)
        self.bind_request(request.url.path, _request_fields(request))
        if self.wire_path is not None and not request.url.path.rstrip("/").endswith(self.wire_path):
            # litellm took another bridge than it said: a wire the gate was not set up for.
            self.interrupt(R.ROUTE_NOT_GATED)
        if not self.streamed:
            return
        timeout = dict(request.extensions.get("timeout") or {})
        timeout["read"] = self.read_timeout(timeout.get("read"))
        request.extensions["timeout"] = timeout

    def bind(self, response: httpx.Response, request: httpx.Request | None = None) -> bool:
        """Attach a response; False when it is not the gate's to read (an HTTP error)."""
        path = "/chat/completions" if request is None else request.url.path
        content_type = response.headers.get("content-type", "")
        return self.bind_response(response.status_code, content_type, path)

    def fail(self, error: BaseException) -> None:
        """Reading failed: a read timeout is a stall, any other error a disconnect."""
        self.interrupt(R.STALLED if isinstance(error, httpx.TimeoutException) else R.DISCONNECTED)


def _request_fields(request: httpx.Request) -> dict[str, object]:
    """The request body's fields the attempt needs (``n``, ``tool_choice``), or none."""
    if not request.url.path.rstrip("/").endswith("/chat/completions"):
        return {}  # only a chat request has fields the gate reads (Responses: none yet)
    try:
        return chat_wire.request_fields(request.content)
    except httpx.RequestNotRead:
        return {}


class RequestRefused(httpx.TransportError):
    """What litellm gets in place of a response to a request the gate refused unsent.

    Its cause is the attempt's quarantine (found behind litellm's error by
    ``find_quarantine``); nothing else is chained to it.
    """

    def __init__(self, fault: ToolCallQuarantined | None) -> None:
        super().__init__("the gate refused this request before sending it")
        self.__cause__ = fault
        self.__suppress_context__ = True


def _wrap(
    response: httpx.Response,
    stream: httpx.SyncByteStream | httpx.AsyncByteStream,
    request: httpx.Request,
) -> httpx.Response:
    return httpx.Response(
        status_code=response.status_code,
        headers=response.headers,
        stream=stream,
        extensions=response.extensions,
        request=request,
    )


class _TapBody:
    """What the sync and async bodies share: each is a thin loop over these steps.

    Closing a body is the end of its part in the call: it lets go of the tap (and so of the
    attempt and what it withholds), of the wrapped stream and of its piece iterator. litellm
    keeps the httpx response that holds the body in reference cycles of its own after a
    stream ends, so a body that kept them would keep the stream's whole reading state until
    the next collection. Whatever reaches a closed body later gets nothing: a fresh read is
    refused (``httpx.StreamClosed``), and a reader that was inside it when it closed ends as
    it would have, no piece passed and no end of the body taken (the close decided that).
    """

    def __init__(self, tap: WireTap) -> None:
        self._tap: WireTap | None = tap
        self._closed = False
        self._open_line = False  # litellm holds an unterminated line
        # The body itself ended (its iterator ran out). A piece iterator that stopped on an
        # exception (a read cancelled because the reader went away) is finished too, but a
        # drain over it ending at once is no end of the body: no EOF is fed then.
        self._exhausted = False
        # Whether the tap had quarantined the stream when the body closed (kept past it).
        self._faulted_at_close = False

    def _opening(self) -> None:
        """A read starts: refused once the body is closed (nothing is read or released)."""
        if self._closed:
            raise httpx.StreamClosed()

    def _passes(self, piece: bytes) -> bool:
        """Feed one piece to the attempt; True when litellm may have it."""
        tap = self._tap
        if tap is None or not tap.feed(piece):
            return False
        self._open_line = not piece.endswith((b"\n", b"\r"))
        return True

    def _ended(self) -> None:
        """Reading stopped without a transport error: at the body's end, or at a fault."""
        tap = self._tap
        faulted = self._faulted_at_close if tap is None else tap.faulted
        if faulted:
            if self._open_line:
                raise StreamQuarantined
            return
        if tap is not None:
            tap.eof()

    def _failed(self, error: httpx.TransportError) -> None:
        if self._tap is not None:
            self._tap.fail(error)

    def _start_close(self) -> WireTap | None:
        """The tap on the first close, when the rest of the body should be drained."""
        if self._closed:
            return None
        self._closed = True
        return self._tap

    def _let_go(self, tap: WireTap) -> None:
        """Closed: the body keeps nothing of the call (see the class)."""
        self._faulted_at_close = tap.faulted
        self._tap = None


class _TapStream(_TapBody, httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, tap: WireTap) -> None:
        super().__init__(tap)
        self._inner: httpx.SyncByteStream | None = inner
        self._it: Iterator[bytes] | None = None
        tap.close_sync = self.close

    def _pieces(self) -> Iterator[bytes]:
        # One iterator for reading and for draining on close, so no slice is ever skipped.
        if self._it is None:
            self._it = self._sliced()
        return self._it

    def _sliced(self) -> Iterator[bytes]:
        inner = self._inner
        if inner is None:  # closed before a read began
            return
        for piece in inner:
            yield from _slices(piece)
        self._exhausted = True

    def __iter__(self) -> Iterator[bytes]:
        self._opening()
        error: httpx.TransportError | None = None
        try:
            for piece in self._pieces():
                if not self._passes(piece):
                    break
                yield piece
        except httpx.TransportError as exc:
            error = exc
        piece = b""  # the piece refused is not kept: a raise below shows this frame
        if error is not None:
            self._failed(error)
            raise error
        self._ended()

    def close(self) -> None:
        tap = self._start_close()
        if tap is None:
            return
        try:
            if tap.wants_drain:
                for piece in self._pieces():
                    if not tap.feed(piece):
                        break
                else:
                    if self._exhausted:
                        tap.eof()
        except httpx.TransportError as exc:
            tap.fail(exc)
        finally:
            inner, self._inner, self._it = self._inner, None, None
            # Closed: the tap and this body stop holding each other.
            tap.close_sync = None
            self._let_go(tap)
            if inner is not None:
                inner.close()


class _AsyncTapStream(_TapBody, httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, tap: WireTap) -> None:
        super().__init__(tap)
        self._inner: httpx.AsyncByteStream | None = inner
        self._it: AsyncIterator[bytes] | None = None
        tap.close_async = self.aclose

    def _pieces(self) -> AsyncIterator[bytes]:
        # One iterator for reading and for draining on close, so no slice is ever skipped.
        if self._it is None:
            self._it = self._sliced()
        return self._it

    async def _sliced(self) -> AsyncIterator[bytes]:
        inner = self._inner
        if inner is None:  # closed before a read began
            return
        async for piece in inner:
            for turn, part in enumerate(_slices(piece)):
                if turn:  # a turn for other tasks between slices of one large read
                    await asyncio.sleep(0)
                yield part
        self._exhausted = True

    async def __aiter__(self) -> AsyncIterator[bytes]:
        self._opening()
        error: httpx.TransportError | None = None
        try:
            async for piece in self._pieces():
                if not self._passes(piece):
                    break
                yield piece
        except httpx.TransportError as exc:
            error = exc
        piece = b""  # the piece refused is not kept: a raise below shows this frame
        if error is not None:
            self._failed(error)
            raise error
        self._ended()

    async def aclose(self) -> None:
        tap = self._start_close()
        if tap is None:
            return
        try:
            if tap.wants_drain:
                async for piece in self._pieces():
                    if not tap.feed(piece):
                        break
                else:
                    if self._exhausted:
                        tap.eof()
        except httpx.TransportError as exc:
            tap.fail(exc)
        finally:
            try:
                it = self._it
                if isinstance(it, types.AsyncGeneratorType) and not it.ag_running:
                    # Finished now, on this loop: a suspended generator left to the garbage
                    # collector is finalized through the loop. (One a reader is inside now
                    # is that reader's to finish.)
                    await it.aclose()
            finally:
                inner, self._inner, self._it = self._inner, None, None
                # Closed: the tap and this body stop holding each other.
                tap.close_async = None
                self._let_go(tap)
                if inner is not None:
                    await inner.aclose()


class TapTransport(httpx.BaseTransport):
    """Sync transport around ``inner``. ``inner`` belongs to the gate or the caller (it is
    shared across calls), so closing this transport leaves it open."""

    def __init__(self, inner: httpx.BaseTransport, tap: WireTap) -> None:
        self.inner = inner
        self.tap = tap

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.tap.prepare(request)
        if self.tap.refused:
            raise RequestRefused(self.tap.attempt.quarantined)
        response = self.inner.handle_request(request)
        if not self.tap.bind(response, request):
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        return _wrap(response, _TapStream(response.stream, self.tap), request)

    def close(self) -> None:
        pass


class AsyncTapTransport(httpx.AsyncBaseTransport):
    """Async twin of :class:`TapTransport`."""

    def __init__(self, inner: httpx.AsyncBaseTransport, tap: WireTap) -> None:
        self.inner = inner
        self.tap = tap

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.tap.prepare(request)
        if self.tap.refused:
            raise RequestRefused(self.tap.attempt.quarantined)
        response = await self.inner.handle_async_request(request)
        if not self.tap.bind(response, request):
            return response
        assert isinstance(response.stream, httpx.AsyncByteStream)
        return _wrap(response, self._body(response.stream), request)

    def _body(self, stream: httpx.AsyncByteStream) -> httpx.AsyncByteStream:
        """The body litellm reads in place of ``stream``: here, a tee into the tap."""
        return _AsyncTapStream(stream, self.tap)

    async def aclose(self) -> None:
        pass
