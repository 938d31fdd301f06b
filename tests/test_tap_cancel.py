"""A read cancelled locally is not the body's end: the wire tap must not feed EOF then.

A LiteLLM proxy whose client went away cancels the task reading the upstream, then closes
litellm's stream, which closes the tapped body. The tap's piece iterator ended with the
cancellation, so a drain over it ends at once: that is no clean end of the body, and
taking it for one made the attempt conclude on a wire that never ended
(``missing_finish``, a *remote* fault counted against the route by the escalation), where
the reader going away is ``cancelled``, a local one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from litellm_toolgate.core import Attempt, ToolRegistry
from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.edge.transport import AsyncTapTransport, WireTap


def _text_event() -> bytes:
    choice = {"index": 0, "delta": {"content": "some text"}, "finish_reason": None}
    return b"data: " + json.dumps({"id": "c", "choices": [choice]}).encode() + b"\n\n"


class Silent(httpx.AsyncByteStream):
    """One text event, then silence until closed."""

    def __init__(self) -> None:
        self.closed = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield _text_event()
        await self.closed.wait()

    async def aclose(self) -> None:
        self.closed.set()


class Upstream(httpx.AsyncBaseTransport):
    def __init__(self) -> None:
        self.body = Silent()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        headers = {"content-type": "text/event-stream"}
        return httpx.Response(200, headers=headers, stream=self.body, request=request)


async def _cancelled_then_closed() -> Attempt:
    attempt = Attempt(ToolRegistry.from_tools([]))
    tap = WireTap(attempt, streamed=True)
    upstream = Upstream()
    async with httpx.AsyncClient(transport=AsyncTapTransport(upstream, tap)) as client:
        request = client.build_request(
            "POST", "http://upstream/v1/chat/completions", json={"model": "m", "stream": True}
        )
        response = await client.send(request, stream=True)
        seen: list[Any] = []

        async def read() -> None:
            async for piece in response.aiter_raw():
                seen.append(piece)

        task = asyncio.create_task(read())
        while not seen:
            await asyncio.sleep(0.01)
        task.cancel()  # the proxy's client went away: the reading task is cancelled
        await asyncio.gather(task, return_exceptions=True)
        await response.aclose()  # then litellm's stream, and with it the body, is closed
    return attempt


def test_a_cancelled_read_then_close_is_not_the_end_of_the_body() -> None:
    attempt = asyncio.run(_cancelled_then_closed())
    fault = attempt.quarantined
    # Not concluded on a made-up end of body: still open for the reader to cancel.
    assert fault is None or fault.reason is not QuarantineReason.MISSING_FINISH, fault
    assert attempt.interrupt(QuarantineReason.CANCELLED) is not None
    assert attempt.quarantined is not None
    assert attempt.quarantined.reason is QuarantineReason.CANCELLED
