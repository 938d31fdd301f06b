"""Many calls at once under ``litellm.callbacks``: each is judged against its own wire.

8 threads × 50 mixed sync calls (chat streamed and whole, Responses streamed) and 200
concurrent async calls, every one carrying its own number: the upstream answers each with a
``multiply`` call whose arguments hold that number (every fifth one cut short). A call
released with another call's arguments, or refused for another call's fault, is cross-talk.
Meanwhile a logging integration makes HTTP calls of its own (sync through litellm's own
``HTTPHandler``, so through the gate's sync transport, and async through httpx) to a
loopback sink on every success and failure.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import litellm
import pytest
from litellm.integrations.custom_logger import CustomLogger
from litellm.llms.custom_httpx.http_handler import HTTPHandler

from litellm_toolgate import ArgumentsRejected, ToolGateGuardrail
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.edge.sync import claiming as synccall
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
THREADS, PER_THREAD, CONCURRENT = 8, 50, 200


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    event = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def body_for(number: int) -> bytes:
    arguments = json.dumps({"a": number, "b": 8})
    if number % 5 == 0:
        arguments = arguments[:-3]  # cut short: a quarantine, for this call only
    head = {"index": 0, "id": f"call_{number}", "type": "function"}
    return b"".join(
        [
            chunk({"role": "assistant", "content": None}),
            chunk({"tool_calls": [{**head, "function": {"name": "multiply", "arguments": ""}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:9]}}]}),
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments[9:]}}]}),
            chunk({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )


def answer(request: dict[str, Any]) -> Scripted:
    said = request.get("messages") or request.get("input") or []
    number = int(str(said[-1]["content"]).removeprefix("n="))
    return as_requested(request, body_for(number))


class Shipping(CustomLogger):
    """A logging integration that ships every event over HTTP (to a loopback sink)."""

    def __init__(self, sink: str) -> None:
        super().__init__()
        self.sink = sink
        self.sync_client = HTTPHandler()  # built on litellm.sync_transport, like litellm's own
        self.shipped = 0
        self._lock = threading.Lock()

    def _count(self) -> None:
        with self._lock:
            self.shipped += 1

    def log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.sync_client.post(self.sink, json={"n": 0, "stream": False})
        self._count()

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.sync_client.post(self.sink, json={"n": 0, "stream": False})
        self._count()

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        # A generous connect timeout: hundreds of calls at once on a busy machine.
        async with httpx.AsyncClient(timeout=httpx.Timeout(60.0)) as client:
            await client.post(self.sink, json={"n": 0, "stream": False})
        self._count()


def sink_answer(request: dict[str, Any]) -> Scripted:
    return Scripted(b"{}", content_type="application/json")


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[FakeUpstream, FakeUpstream]]:
    with FakeUpstream(answer) as upstream, FakeUpstream(sink_answer) as sink:
        yield upstream, sink


@pytest.fixture
def shipping(servers: tuple[FakeUpstream, FakeUpstream]) -> Iterator[Shipping]:
    logger = Shipping(servers[1].base_url + "/chat/completions")
    saved = litellm.callbacks
    litellm.callbacks = [ToolGateGuardrail([MULTIPLY]), logger]
    try:
        yield logger
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, (ToolGateGuardrail, Shipping))]
        # litellm keeps callbacks it saw in lists of its own: close the gates built here.
        for made in [o for o in gc.get_objects() if isinstance(o, ToolGateGuardrail)]:
            made.close()


def expect(number: int, released: str | None, error: BaseException | None) -> None:
    if number % 5 == 0:
        assert isinstance(error, ArgumentsRejected), (number, error)
        assert released in (None, ""), number
    else:
        assert error is None, (number, error)
        assert released is not None and json.loads(released) == {"a": number, "b": 8}, number


def chat_arguments(chunks: list[Any]) -> str:
    return "".join(
        tc.function.arguments or ""
        for c in chunks
        for choice in c.choices
        for tc in choice.delta.tool_calls or []
    )


def sync_call(base: str, number: int) -> None:
    shape = number % 3
    common = {"api_base": base, "api_key": "sk", "num_retries": 0}
    said = [{"role": "user", "content": f"n={number}"}]
    released: str | None = None
    error: BaseException | None = None
    try:
        if shape == 0:
            stream = litellm.completion(
                model="cometapi/gpt-4o-mini", messages=said, stream=True, **common
            )
            released = chat_arguments(list(stream))
        elif shape == 1:
            response = litellm.completion(model="cometapi/gpt-4o-mini", messages=said, **common)
            released = response.choices[0].message.tool_calls[0].function.arguments
        else:
            events = list(
                litellm.responses(
                    model="cometapi/gpt-4o-mini",
                    input=said,
                    tools=[MULTIPLY],
                    stream=True,
                    **common,
                )
            )
            kinds = [str(getattr(e.type, "value", e.type)) for e in events]
            done = [
                e for e, k in zip(events, kinds, strict=True) if k == "response.output_item.done"
            ]
            released = "".join(getattr(e.item, "arguments", "") or "" for e in done)
    except Exception as exc:
        error = exc
    expect(number, released, error)


async def async_call(base: str, number: int) -> None:
    said = [{"role": "user", "content": f"n={number}"}]
    released: str | None = None
    error: BaseException | None = None
    try:
        stream = await litellm.acompletion(
            model="cometapi/gpt-4o-mini",
            messages=said,
            stream=True,
            api_base=base,
            api_key="sk",
            num_retries=0,
        )
        released = chat_arguments([c async for c in stream])
    except Exception as exc:
        error = exc
    expect(number, released, error)


def test_sync_threads_and_async_tasks_never_cross(
    servers: tuple[FakeUpstream, FakeUpstream], shipping: Shipping
) -> None:
    upstream, sink = servers
    base = upstream.base_url

    def thread(offset: int) -> None:
        for i in range(PER_THREAD):
            sync_call(base, 1 + offset * PER_THREAD + i)

    async def many() -> None:
        start = 1 + THREADS * PER_THREAD
        await asyncio.gather(*(async_call(base, start + i) for i in range(CONCURRENT)))

    with ThreadPoolExecutor(THREADS) as pool:
        futures = [pool.submit(thread, t) for t in range(THREADS)]
        asyncio.run(many())  # the async calls run while the threads do
        for future in futures:
            future.result()
    assert len(synccall.CLAIMS) == 0
    assert shipping.shipped > 0 and len(sink.requests) > 0
    assert all(synccall.MARKER not in json.dumps(r) for r in upstream.requests)
