"""A closed withholding stream keeps nothing of its call, and what reaches it later gets nothing.

The withholding streams of :mod:`litellm_toolgate.edge.httpwithhold` (the callback's SDK
path, sync and async) are what litellm reads in place of the upstream's body. litellm keeps
the httpx response holding the stream in reference cycles of its own after a call, as it
keeps a tap body's (``tests/test_tap_close.py``). So closing a withholding stream lets go of
the tap (and the attempt), the withholder with what it holds, and the inner stream; a fresh
read of a closed stream is refused (``httpx.StreamClosed``) and changes nothing, and a reader
that was inside it when it closed gets nothing that was held. A whole body's
:class:`HeldResponse` raises the quarantine found while it was read after its stream let
go of the attempt.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from test_tap_close import TEXT, Upstream, _reaches, _request

from litellm_toolgate import ToolCallQuarantined, find_quarantine
from litellm_toolgate.core import Attempt, ToolRegistry
from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.edge.httpwithhold import (
    HeldResponse,
    SyncWithholdingStream,
    Withholding,
    WithholdingTransport,
)
from litellm_toolgate.edge.transport import WireTap, _wrap

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}


def _chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return b"data: " + json.dumps({"id": "c", "choices": [choice]}).encode() + b"\n\n"


# Text that passes live, then a call the stream holds until the body ended cleanly.
CALL = [
    _chunk({"role": "assistant", "content": "working"}),
    _chunk(
        {
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "multiply", "arguments": '{"a": 7, "b": 8}'},
                }
            ]
        }
    ),
    _chunk({}, "tool_calls") + b"data: [DONE]\n\n",
]


def _tap() -> tuple[Attempt, WireTap]:
    attempt = Attempt(ToolRegistry.from_tools([MULTIPLY]))
    return attempt, WireTap(attempt, streamed=True)


async def _async_response(
    pieces: list[bytes],
) -> tuple[Attempt, WireTap, Upstream, httpx.Response]:
    attempt, tap = _tap()
    upstream = Upstream(pieces)
    transport = WithholdingTransport(upstream, tap, Withholding(None))
    response = await transport.handle_async_request(_request())
    return attempt, tap, upstream, response


def _sync_response(pieces: list[bytes]) -> tuple[Attempt, WireTap, Upstream, httpx.Response]:
    # As the sync claim builds it (sync.claiming): the tap bound, the stream around the body.
    attempt, tap = _tap()
    upstream = Upstream(pieces)
    request = _request()
    tap.prepare(request)
    response = upstream.handle_request(request)
    assert tap.bind(response, request)
    assert isinstance(response.stream, httpx.SyncByteStream)
    body = SyncWithholdingStream(response.stream, tap, Withholding(None))
    return attempt, tap, upstream, _wrap(response, body, request)


def test_a_closed_async_stream_reaches_neither_the_tap_nor_the_attempt() -> None:
    async def go() -> None:
        attempt, tap, upstream, response = await _async_response(CALL)
        assert _reaches(response, attempt)  # while open, the stream withholds for the attempt
        seen = [piece async for piece in response.stream]  # type: ignore[union-attr]
        assert b"multiply" in b"".join(seen)  # released once the body ended cleanly
        assert attempt.quarantined is None
        await response.aclose()
        assert upstream.body.closed
        assert not _reaches(response, attempt)
        assert not _reaches(response, tap)
        assert not _reaches(response, upstream.body)

    asyncio.run(go())


def test_a_closed_sync_stream_reaches_neither_the_tap_nor_the_attempt() -> None:
    attempt, tap, upstream, response = _sync_response(CALL)
    assert _reaches(response, attempt)
    assert b"multiply" in b"".join(response.stream)  # type: ignore[arg-type]
    assert attempt.quarantined is None
    response.close()
    assert upstream.body.closed
    assert not _reaches(response, attempt)
    assert not _reaches(response, tap)
    assert not _reaches(response, upstream.body)


def test_closing_unread_cancels_then_lets_go() -> None:
    # Closed before litellm read anything: the attempt is cancelled (nothing held goes out),
    # and only then does the stream let go.
    async def go() -> None:
        attempt, _, upstream, response = await _async_response(CALL)
        await response.aclose()
        assert attempt.quarantined is not None
        assert attempt.quarantined.reason is QuarantineReason.CANCELLED
        assert upstream.body.closed
        assert not _reaches(response, attempt)

    asyncio.run(go())
    attempt, _, upstream, response = _sync_response(CALL)
    response.close()
    assert attempt.quarantined is not None
    assert attempt.quarantined.reason is QuarantineReason.CANCELLED
    assert upstream.body.closed
    assert not _reaches(response, attempt)


def test_a_late_read_of_a_closed_async_stream_is_refused_and_changes_nothing() -> None:
    async def go() -> None:
        attempt, _, _, response = await _async_response(TEXT)
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


def test_a_late_read_of_a_closed_sync_stream_is_refused_and_changes_nothing() -> None:
    attempt, _, _, response = _sync_response(TEXT)
    body = response.stream
    assert isinstance(body, httpx.SyncByteStream)
    response.close()
    concluded = attempt.summary()
    with pytest.raises(httpx.StreamClosed):
        list(body)
    body.close()
    assert attempt.summary() == concluded


def test_a_second_read_of_a_decided_open_async_stream_still_yields_nothing() -> None:
    # The OpenAI SDK reads a body again to drain it after [DONE]: before the close that is
    # an empty read, as it was, not a refusal.
    async def go() -> None:
        attempt, _, _, response = await _async_response(CALL)
        body = response.stream
        assert isinstance(body, httpx.AsyncByteStream)
        assert b"multiply" in b"".join([piece async for piece in body])
        assert [piece async for piece in body] == []
        assert attempt.quarantined is None
        await response.aclose()

    asyncio.run(go())


def test_a_reader_inside_the_async_stream_at_its_close_gets_nothing_held() -> None:
    # litellm read the text that passes live, then the stream was closed under it: the call
    # held behind the text never goes out, and the reader ends with the cancellation's
    # quarantine, typed.
    async def go() -> None:
        attempt, _, _, response = await _async_response(CALL)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        reader = response.stream.__aiter__()
        first = await reader.__anext__()
        assert b"working" in first
        await response.aclose()
        rest: list[bytes] = []
        with pytest.raises(ToolCallQuarantined) as raised:
            async for piece in reader:
                rest.append(piece)
        assert rest == []
        fault = find_quarantine(raised.value)
        assert fault is not None and fault.reason is QuarantineReason.CANCELLED
        assert attempt.quarantined is not None
        assert attempt.quarantined.reason is QuarantineReason.CANCELLED

    asyncio.run(go())


def test_a_reader_inside_the_sync_stream_at_its_close_gets_nothing_held() -> None:
    attempt, _, _, response = _sync_response(CALL)
    assert isinstance(response.stream, httpx.SyncByteStream)
    reader = iter(response.stream)
    assert b"working" in next(reader)
    response.close()
    rest: list[bytes] = []
    with pytest.raises(ToolCallQuarantined) as raised:
        rest.extend(reader)
    assert rest == []
    fault = find_quarantine(raised.value)
    assert fault is not None and fault.reason is QuarantineReason.CANCELLED
    assert attempt.quarantined is not None
    assert attempt.quarantined.reason is QuarantineReason.CANCELLED


class WholeUpstream(Upstream):
    def handle_request(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "application/json"}
        return httpx.Response(200, headers=headers, stream=self.body, request=request)


def _whole(arguments: str) -> bytes:
    call = {"id": "call_1", "type": "function"}
    call["function"] = {"name": "multiply", "arguments": arguments}  # type: ignore[assignment]
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls"}
    return json.dumps({"id": "c", "object": "chat.completion", "choices": [choice]}).encode()


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [('{"a": 7, "b": 8}', None), ('{"a": 7, "b": ', QuarantineReason.INVALID_JSON)],
    ids=["released", "quarantined"],
)
def test_a_held_whole_body_keeps_its_quarantine_not_its_attempt(
    arguments: str, reason: QuarantineReason | None
) -> None:
    # An async whole call: the body is held and judged while litellm reads it, the
    # quarantine raised when litellm looks at the content, after the stream closed.
    async def go() -> None:
        attempt = Attempt(ToolRegistry.from_tools([MULTIPLY]))
        tap = WireTap(attempt, streamed=False)
        upstream = WholeUpstream([_whole(arguments)])
        gate = Withholding(None, whole_here=True)
        response = await WithholdingTransport(upstream, tap, gate).handle_async_request(_request())
        assert isinstance(response, HeldResponse)
        await response.aread()  # litellm's request reads it whole, then it is closed
        assert upstream.body.closed
        assert not _reaches(response, attempt)
        assert not _reaches(response, tap)
        if reason is None:
            assert json.loads(response.content)["choices"][0]["message"]["tool_calls"]
            return
        with pytest.raises(ToolCallQuarantined) as raised:
            _ = response.content
        fault = find_quarantine(raised.value)
        assert fault is not None and fault.reason is reason

    asyncio.run(go())
