"""The gate, observed: an HTTP transport that reads a route's whole body, feeding a
:class:`~litellm_toolgate.core.records.observe.WireObserver` each piece as it arrives (with
its time),
then hands the gate the same pieces, and the same read error if reading failed.

So the wire's facts cover the whole body even where the gate stopped reading at a fault, and
the gate decides on exactly that body. :class:`ObservedGate` is a :class:`ToolGate` whose
transports are observed (with ``observe=True``) and which keeps its attempts, for the probe
and the replays of ``toolgate verify``.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..core.decision.attempt import Attempt
from ..core.decision.state import wire_of
from ..core.records.observe import WireObserver
from ..edge.clients import ClientPool, _tapped_copy
from ..edge.gate import ToolGate

__all__ = ["AsyncObservingTransport", "ObservedGate", "ObservingTransport"]


class _Replay(httpx.SyncByteStream, httpx.AsyncByteStream):
    """The pieces read, handed out again; then the read error, if reading failed."""

    def __init__(self, pieces: list[bytes], error: BaseException | None) -> None:
        self._pieces = pieces
        self._error = error

    def __iter__(self) -> Iterator[bytes]:
        yield from self._pieces
        if self._error is not None:
            raise self._error

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            yield piece
        if self._error is not None:
            raise self._error


class _Observing:
    """What the sync and async observing transports share."""

    def __init__(self, sink: _Sink) -> None:
        self.sink = sink

    def _start(self, request: httpx.Request, response: httpx.Response) -> WireObserver | None:
        wire = wire_of(request.url.path)
        if wire is None:
            return None
        observer = WireObserver(wire, started=self.sink.started, path=request.url.path)
        observer.status = response.status_code
        observer.content_type = response.headers.get("content-type", "")
        self.sink.observers.append(observer)
        return observer

    @staticmethod
    def _replayed(
        request: httpx.Request,
        response: httpx.Response,
        observer: WireObserver,
        error: BaseException | None,
    ) -> httpx.Response:
        return httpx.Response(
            status_code=response.status_code,
            headers=response.headers,
            stream=_Replay(list(observer.pieces), error),
            extensions=response.extensions,
            request=request,
        )


class ObservingTransport(_Observing, httpx.BaseTransport):
    def __init__(self, inner: httpx.BaseTransport, sink: _Sink) -> None:
        super().__init__(sink)
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        observer = self._start(request, response)
        if observer is None:
            return response
        error: BaseException | None = None
        assert isinstance(response.stream, httpx.SyncByteStream)
        try:
            for piece in response.stream:
                observer.feed(piece, self.sink.clock())
        except httpx.TransportError as exc:
            error = exc
        finally:
            response.close()
        observer.end(self.sink.clock(), clean=error is None)
        return self._replayed(request, response, observer, error)

    def close(self) -> None:
        self.inner.close()


class AsyncObservingTransport(_Observing, httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport, sink: _Sink) -> None:
        super().__init__(sink)
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        observer = self._start(request, response)
        if observer is None:
            return response
        error: BaseException | None = None
        assert isinstance(response.stream, httpx.AsyncByteStream)
        try:
            async for piece in response.stream:
                observer.feed(piece, self.sink.clock())
        except httpx.TransportError as exc:
            error = exc
        finally:
            await response.aclose()
        observer.end(self.sink.clock(), clean=error is None)
        return self._replayed(request, response, observer, error)

    async def aclose(self) -> None:
        await self.inner.aclose()


@dataclass
class _Sink:
    clock: Callable[[], float] = time.monotonic
    started: float = 0.0
    observers: list[WireObserver] = field(default_factory=list)


class _ObservingPool(ClientPool):
    """The gate's litellm handlers and httpx clients, each seen through a copy whose
    transport and proxy mounts are observing transports."""

    def __init__(self, sink: _Sink) -> None:
        super().__init__()
        self.sink = sink
        self._observed: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()

    def _observing(self, inner: Any) -> Any:
        if isinstance(inner, httpx.AsyncBaseTransport):
            return AsyncObservingTransport(inner, self.sink)
        return ObservingTransport(inner, self.sink)

    def _observed_copy(self, client: Any) -> Any:
        made = self._observed.get(client)
        if made is None:
            made = self._observed[client] = _tapped_copy(client, self._observing)
        return made

    def handler_client(self, handler: Any) -> httpx.Client | httpx.AsyncClient:
        client: httpx.Client | httpx.AsyncClient = self._observed_copy(
            super().handler_client(handler)
        )
        return client

    def http_client(self, asynchronous: bool) -> httpx.Client | httpx.AsyncClient:
        client: httpx.Client | httpx.AsyncClient = self._observed_copy(
            super().http_client(asynchronous)
        )
        return client


class ObservedGate(ToolGate):
    """A :class:`ToolGate` that keeps its last attempt and, with ``observe``, what each
    response's wire looked like (:attr:`observers`)."""

    def __init__(self, *args: Any, observe: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.sink = _Sink()
        if observe:
            self.clients = _ObservingPool(self.sink)
        self.attempts: list[Attempt] = []

    def new_attempt(self, *, tools: Any = None, model: str = "") -> Attempt:
        attempt = super().new_attempt(tools=tools, model=model)
        self.attempts.append(attempt)
        return attempt

    def begin(self) -> None:
        """A new request starts now: its times are counted from here."""
        self.sink.started = self.sink.clock()
        self.sink.observers.clear()
        self.attempts.clear()

    @property
    def observer(self) -> WireObserver | None:
        return self.sink.observers[-1] if self.sink.observers else None

    @property
    def attempt(self) -> Attempt | None:
        return self.attempts[-1] if self.attempts else None
