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
from collections.abc import Iterator
from typing import Any

import httpx

from ...core.errors import WireNotObservable
from ..seam.symbols import GuardrailRaisedException


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


class _Refused(httpx.SyncByteStream):
    """The body of a refused stream: reading it raises the refusal."""

    def __init__(self, message: str) -> None:
        self.message = message

    def __iter__(self) -> Iterator[bytes]:
        raise UngatedCallRefused(self.message)


class RefusedResponse(httpx.Response):
    """What litellm gets in place of the answer to a request the gate refused unsent.

    litellm (and the OpenAI SDK under it) turns anything raised while a request is sent, or
    while a whole body is read, into an error of its own, often a retryable one. So nothing
    is raised there: a stream raises :class:`UngatedCallRefused` where litellm first reads
    it, and a whole body reads as empty and raises it the first time litellm looks at its
    content (building its result); both places hand a guardrail intervention to the caller
    as it is. A whole body litellm parses inside its request code (``in_read``) raises it
    as litellm's request reads it, which litellm's Gemini handler lets through as it is.
    """

    def __init__(self, request: httpx.Request, message: str, *, in_read: bool = False) -> None:
        streamed = _asks_for_stream(request)
        super().__init__(
            200,
            headers={"content-type": "text/event-stream" if streamed else "application/json"},
            # in_read: a whole body litellm parses inside its request code, where an error
            # raised at its content would become litellm's: raised as litellm's request
            # reads it instead (see claiming.reads_whole_first).
            stream=_Refused(message) if streamed or in_read else httpx.ByteStream(b""),
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


__all__ = ["RefusedResponse", "SyncCallStopped", "UngatedCallRefused", "stop_response"]
