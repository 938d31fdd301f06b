"""How a sync call under the callback is refused: the two exceptions, and the answer the
claiming transport gives a refused request in place of sending it.

litellm swallows every ``Exception`` a logging hook raises, so a refusal decided in one is
never raised there: the request is answered unsent by a :class:`RefusedResponse`, which
raises :class:`UngatedCallRefused` where litellm first reads the answer (see
:mod:`.hooks`). :class:`SyncCallStopped` is the last line, for the places with no other
way out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
from litellm.exceptions import GuardrailRaisedException

from ...core.errors import WireNotObservable


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
    """The last line of the sync claim, where litellm gives a refusal no other way out.

    Raised only where no ``Exception`` can reach the caller and the call would otherwise go
    on ungated: from ``log_post_api_call`` when an armed or refused request went out through
    an HTTP client the gate never saw (the response's body is then not read), and from
    ``log_pre_api_call`` when the refused call cannot be held for a claiming transport (a
    closed gate litellm still calls after the last gate put the process back). Deliberately
    not an ``Exception``: litellm logs and drops those from a logging hook and goes on.
    """


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
    as it is.
    """

    def __init__(self, request: httpx.Request, message: str) -> None:
        streamed = _asks_for_stream(request)
        super().__init__(
            200,
            headers={"content-type": "text/event-stream" if streamed else "application/json"},
            stream=_Refused(message) if streamed else httpx.ByteStream(b""),
            request=request,
        )
        self.refusal = message

    @property
    def content(self) -> bytes:
        raise UngatedCallRefused(self.refusal)


def _asks_for_stream(request: httpx.Request) -> bool:
    try:
        body = json.loads(request.content)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("stream") is True


__all__ = ["RefusedResponse", "SyncCallStopped", "UngatedCallRefused"]
