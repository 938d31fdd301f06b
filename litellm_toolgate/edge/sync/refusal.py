"""How a sync call under the callback is refused: the refusal, the answer the claiming
transport gives a refused request in place of sending it, and how an answer litellm already
holds is turned into the refusal before litellm reads it.

litellm swallows every ``Exception`` a logging hook raises, so a refusal decided in one is
never raised there. A request is answered unsent by a :class:`RefusedResponse`; an answer
that came back through an HTTP client the gate never saw is turned, in place, into one that
answers like it (:func:`stop_response`). Both raise :class:`UngatedCallRefused` where
litellm first reads the answer (see :mod:`.hooks`). :class:`SyncCallStopped` is kept for
the one case where the gate finds neither: it is a ``BaseException`` because nothing else
leaves a logging hook.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from ...core.errors import ToolGateError, WireNotObservable
from ..seam.symbols import SDK_RAW_RESPONSE, GuardrailRaisedException, lazy


class UngatedCallRefused(WireNotObservable, GuardrailRaisedException):
    """A sync call under the callback that the gate cannot gate; it was not sent.

    A :class:`~...core.errors.ToolGateError`, and a litellm guardrail intervention (status
    400), so litellm hands it to the caller as it is and a ``Router`` never re-sends it. It
    is raised where litellm lets an ``Exception`` through: in litellm's call set-up (see
    :mod:`.hooks`), or by the claiming transport when the refused request reaches it, before
    any byte of it is sent (``log_pre_api_call`` only records the refusal: litellm swallows
    every ``Exception`` a logging hook raises).
    """

    status_code = 400

    def __init__(self, message: str) -> None:
        WireNotObservable.__init__(self, message)
        self.guardrail_name = "toolgate"
        self.message = message
        self.blocked_content = False
        self.status_code = 400
        self.args = (message,)


class SyncCallStopped(BaseException):
    """The sync claim's last resort, where the gate finds no way for a refusal to reach the
    caller as an ``Exception``.

    Both paths that used to end here now end in :class:`UngatedCallRefused` (see
    :mod:`.hooks`); this is raised only if the gate cannot put that refusal in place: from
    ``log_post_api_call`` when a request went out through an HTTP client the gate never saw
    and the answer litellm is about to read is not among the call's frames (a litellm whose
    request code the gate does not know), and from ``log_pre_api_call`` when no claiming
    transport can be put around litellm's clients for a refused call (litellm's own code
    failed to build its client). Deliberately not an ``Exception``: litellm logs and drops
    those from a logging hook and goes on. It carries the refusal it stands for
    (:attr:`refusal`, an :class:`UngatedCallRefused`), so a caller can recognise it and
    re-raise that: ``except SyncCallStopped as stop: raise stop.refusal``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.refusal = UngatedCallRefused(message)


class AsyncCallStopped(SyncCallStopped):
    """An async model turn refused unsent by a gate that is not in ``litellm.callbacks``
    (handed to a call in its own ``callbacks=``): litellm runs only its logging hooks, and
    drops any ``Exception`` they raise, so the refusal leaves ``log_pre_api_call`` as this
    ``BaseException`` (catch it by name; ``except Exception`` does not). Nothing was sent."""


_THROUGH: dict[tuple[type[BaseException], bool], type[BaseException]] = {}
# What litellm's OpenAIError carries beyond an exception's own fields (1.108.7, 1.110.2).
_HANDLER_FIELDS = ("request", "response", "headers", "body", "status_code_is_synthesized")


def _plain(error: BaseException) -> BaseException:
    """``error`` as the gate's own class again, without litellm's handler fields."""
    cls: type[BaseException] = next(c for c in type(error).__mro__ if c not in _THROUGH.values())
    plain: BaseException = cls.__new__(cls)
    plain.__dict__.update({k: v for k, v in error.__dict__.items() if k not in _HANDLER_FIELDS})
    plain.args = error.args
    return plain


def _reduce_plain(self: BaseException) -> Any:
    return _plain(self).__reduce__()


def through_openai_handler(
    error: Exception, request: httpx.Request | None = None, *, asynchronous: bool = False
) -> Exception:
    """``error`` (the gate's refusal of a sync whole call on an OpenAI SDK route) as an
    exception litellm's OpenAI SDK chat handler hands on as it is.

    That handler reads a whole body inside the SDK's request, and wraps whatever it raises
    there in a new error of its own (a 500, which litellm's ``num_retries`` and a Router
    re-send), unless it is litellm's ``OpenAIError`` (``AzureOpenAIError`` in its Azure
    handler), which it re-raises untouched (:mod:`..seam.symbols`). So the refusal is built
    again as an instance of a subclass of its own class and of both of those: ``except
    SchemaRejected`` (or ``UngatedCallRefused``) still catches it, with every field of it;
    litellm's exception mapping then sees a
    guardrail intervention and hands it to the caller as it is, never re-sent. The OpenAI
    SDK under it lets any exception that is not an ``httpx`` transport error or a timeout
    through unretried (openai 3.60); openai 2.x lets only its own ``OpenAIError`` through
    (any other is wrapped in a retried connection error), so the refusal is one of those
    too."""
    bases: tuple[type[Exception], ...] = (
        lazy("OpenAIError"),
        lazy("AzureOpenAIError"),
        lazy("SDKError"),
    )
    if asynchronous:
        # litellm's async OpenAI handler hands on only this one as it is (see symbols).
        bases = (lazy("UnprocessableEntityError"),)
    if all(isinstance(error, base) for base in bases):
        return error
    cls = type(error)
    mixed = _THROUGH.get((cls, asynchronous))
    if mixed is None:
        mixed = _THROUGH[(cls, asynchronous)] = type(
            cls.__name__,
            (cls, *bases),
            {
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
                "__doc__": cls.__doc__,
                "__reduce__": _reduce_plain,
            },
        )
    through = mixed.__new__(mixed)
    through.__dict__.update(error.__dict__)
    through.args = error.args
    status = getattr(error, "status_code", 400)
    sent = request if request is not None else httpx.Request("POST", "http://toolgate.invalid")
    for name, value in (
        ("request", sent),
        ("response", httpx.Response(status, request=sent)),
        ("headers", None),
        ("body", None),
        ("status_code_is_synthesized", False),
    ):
        through.__dict__.setdefault(name, value)
    assert isinstance(through, Exception)
    return through


def sdk_whole(request: httpx.Request) -> bool:
    """Whether ``request`` is a whole (non-streamed) chat request of litellm's OpenAI SDK
    handler: the SDK reads its body inside its request, and litellm's handler wraps what is
    raised there unless it passes :func:`through_openai_handler`. litellm asks the SDK for
    its raw response (``X-Stainless-Raw-Response: true``, 1.108.7, 1.110.2); no other client
    of litellm's sends that header (:data:`~..seam.symbols.SDK_RAW_RESPONSE`)."""
    return request.headers.get(SDK_RAW_RESPONSE) == "true" and not _asks_for_stream(request)


class ThroughHandler(httpx.SyncByteStream):
    """A whole body judged while the OpenAI SDK's request reads it (``inner``, the gate's
    withholding stream): a refusal it raises is raised again as one litellm's OpenAI SDK
    handler hands on as it is (:func:`through_openai_handler`), outside every ``except``
    block and from a frame that holds no byte of the body."""

    def __init__(self, inner: httpx.SyncByteStream, request: httpx.Request) -> None:
        self._inner = inner
        self._sent = request

    def __iter__(self) -> Iterator[bytes]:
        failure: ToolGateError | None = None
        try:
            yield from self._inner
        except ToolGateError as refused:
            failure = refused
        if failure is not None:
            through = through_openai_handler(failure, self._sent)
            failure = None
            through.__traceback__ = None
            raise through

    def close(self) -> None:
        self._inner.close()


class AsyncThroughHandler(httpx.AsyncByteStream):
    """:class:`ThroughHandler` for an async whole body the OpenAI SDK reads inside its
    request (a gate handed to an async call in its ``callbacks=``, see :mod:`.asyncclaim`)."""

    def __init__(self, inner: httpx.AsyncByteStream, request: httpx.Request) -> None:
        self._inner = inner
        self._sent = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        failure: ToolGateError | None = None
        try:
            async for piece in self._inner:
                yield piece
        except ToolGateError as refused:
            failure = refused
        if failure is not None:
            through = through_openai_handler(failure, self._sent, asynchronous=True)
            failure = None
            through.__traceback__ = None
            raise through

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Refused(httpx.SyncByteStream):
    """The body of a refused stream: reading it raises the refusal (made to pass litellm's
    OpenAI SDK handler as it is, for ``through``)."""

    def __init__(self, message: str, through: httpx.Request | None = None) -> None:
        self.message = message
        self.through = through

    def __iter__(self) -> Iterator[bytes]:
        refusal: Exception = UngatedCallRefused(self.message)
        if self.through is not None:
            refusal = through_openai_handler(refusal, self.through)
        raise refusal


class RefusedResponse(httpx.Response):
    """What litellm gets in place of the answer to a request the gate refused unsent.

    litellm (and the OpenAI SDK under it) turns anything raised while a request is sent, or
    while a whole body is read, into an error of its own, often a retryable one. So nothing
    is raised there: a stream raises :class:`UngatedCallRefused` where litellm first reads
    it, and a whole body reads as empty and raises it the first time litellm looks at its
    content (building its result); both places hand a guardrail intervention to the caller
    as it is. A whole body litellm parses inside its request code (``in_read``) raises it
    as litellm's request reads it, which litellm's Gemini handler lets through as it is; so
    does a whole body the OpenAI SDK reads inside its request (:func:`sdk_whole`), raised as
    one litellm's SDK handler hands on as it is (:func:`through_openai_handler`).
    """

    def __init__(self, request: httpx.Request, message: str, *, in_read: bool = False) -> None:
        streamed = _asks_for_stream(request)
        # A whole body litellm's OpenAI SDK handler reads inside the SDK's request: raised
        # there, made to pass that handler as it is (see through_openai_handler).
        through = sdk_whole(request)
        super().__init__(
            200,
            headers={"content-type": "text/event-stream" if streamed else "application/json"},
            # in_read: a whole body litellm parses inside its request code, where an error
            # raised at its content would become litellm's: raised as litellm's request
            # reads it instead (see claiming.reads_whole_first).
            stream=_Refused(message, request if through else None)
            if streamed or in_read or through
            else httpx.ByteStream(b""),
            request=request,
        )
        self.refusal = message

    @property
    def content(self) -> bytes:
        raise UngatedCallRefused(self.refusal)


class _StoppedResponse(httpx.Response):
    """An answer litellm holds that the gate turned into its refusal (:func:`stop_response`):
    every read of its body raises it."""

    refusal: str

    @property
    def content(self) -> bytes:
        raise UngatedCallRefused(self.refusal)

    @property
    def text(self) -> str:
        raise UngatedCallRefused(self.refusal)

    def json(self, **kwargs: Any) -> Any:
        raise UngatedCallRefused(self.refusal)

    def read(self) -> bytes:
        raise UngatedCallRefused(self.refusal)

    def iter_raw(self, chunk_size: int | None = None) -> Iterator[bytes]:
        raise UngatedCallRefused(self.refusal)

    def iter_bytes(self, chunk_size: int | None = None) -> Iterator[bytes]:
        raise UngatedCallRefused(self.refusal)

    def iter_text(self, chunk_size: int | None = None) -> Iterator[str]:
        raise UngatedCallRefused(self.refusal)

    def iter_lines(self) -> Iterator[str]:
        raise UngatedCallRefused(self.refusal)


def stop_response(response: httpx.Response, message: str) -> None:
    """Turn, in place, an answer litellm holds but has not handed over into the refusal:
    its connection is released unread (a body litellm already read is dropped), and every
    later read of it raises :class:`UngatedCallRefused`, as a :class:`RefusedResponse` does.

    An iterator litellm already built over it (a generator not yet started) raises on its
    first step: it reads the body through these methods, or through :attr:`stream`."""
    original = response.stream
    response.stream = _Refused(message)
    if isinstance(original, httpx.SyncByteStream):
        with contextlib.suppress(Exception):
            original.close()
    for cached in ("_content", "_text"):
        response.__dict__.pop(cached, None)
    response.__class__ = _StoppedResponse
    assert isinstance(response, _StoppedResponse)
    response.refusal = message


# Paths that ask for a stream whatever the body says: Gemini's streamGenerateContent,
# Bedrock's converse-stream, and Claude's streamRawPredict on Vertex AI.
_STREAM_PATHS = (":streamGenerateContent", "/converse-stream", ":streamRawPredict")


def _asks_for_stream(request: httpx.Request) -> bool:
    if request.url.path.endswith(_STREAM_PATHS):
        return True
    try:
        body = json.loads(request.content)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("stream") is True


__all__ = [
    "RefusedResponse",
    "AsyncCallStopped",
    "AsyncThroughHandler",
    "SyncCallStopped",
    "ThroughHandler",
    "UngatedCallRefused",
    "sdk_whole",
    "stop_response",
    "through_openai_handler",
]
