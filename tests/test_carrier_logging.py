"""litellm's own record of a gated stream equals what the caller was handed.

litellm keeps every chunk it yields and, when the stream ends, assembles them into the
response its success callbacks log (spend logs, Langfuse, OpenTelemetry read that). The gate
hands the caller chunks with tool-call fragments taken out; it must do so on copies, so that
litellm's record still holds the released calls exactly as the caller received them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CASES, MANIFEST, Pieces, body_of
from litellm.integrations.custom_logger import CustomLogger

from litellm_toolgate import ToolGate

litellm.suppress_debug_info = True
# respx answers at httpx's edge: litellm's async handlers on httpx (conftest).
pytestmark = pytest.mark.usefixtures("litellm_on_httpx")
URL = "http://upstream.test/v1/chat/completions"
BASE: dict[str, Any] = {
    "model": "cometapi/gpt-4o-mini",
    "messages": [{"role": "user", "content": "go"}],
    "api_base": "http://upstream.test/v1",
    "api_key": "sk-test",
}


class Recorder(CustomLogger):
    """What litellm's success callbacks are given for a call."""

    def __init__(self) -> None:
        super().__init__()
        self.responses: list[Any] = []

    def log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.responses.append(response_obj)

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self.responses.append(response_obj)

    def wait(self) -> Any:
        deadline = time.monotonic() + 10
        while not self.responses and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.responses, "litellm logged no success"
        return self.responses[0]

    async def await_one(self) -> None:
        deadline = time.monotonic() + 10
        while not self.responses and time.monotonic() < deadline:
            await asyncio.sleep(0.02)


@pytest.fixture
def recorder() -> Any:
    saved = litellm.callbacks
    recorder = Recorder()
    litellm.callbacks = [recorder]
    try:
        yield recorder
    finally:
        litellm.callbacks = saved
        # litellm copies litellm.callbacks into lists of its own: take it out of all.
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, Recorder)]


def _serve(router: respx.MockRouter, name: str) -> None:
    body = body_of(CASES[name])
    router.post(URL).mock(
        return_value=httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces([body])
        )
    )


def _calls_of_chunks(chunks: list[Any]) -> list[tuple[Any, ...]]:
    assembled: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                entry = assembled.setdefault(tc.index, [None, None, ""])
                entry[0] = entry[0] or tc.id
                entry[1] = entry[1] or tc.function.name
                entry[2] += tc.function.arguments or ""
    return [tuple(assembled[i]) for i in sorted(assembled)]


def _calls_of_response(response: Any) -> list[tuple[Any, ...]]:
    message = response.choices[0].message
    return [(tc.id, tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]


def _text_of_chunks(chunks: list[Any]) -> str:
    return "".join(choice.delta.content or "" for c in chunks for choice in c.choices)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", ["multiply_basic", "two_tools_interleaved", "text_only"])
def test_litellm_logs_what_the_caller_received(
    recorder: Recorder, name: str, asynchronous: bool
) -> None:
    gate = ToolGate(MANIFEST["tools"])

    async def go() -> list[Any]:
        chunks = [c async for c in await gate.acompletion(stream=True, **BASE)]
        await recorder.await_one()
        return chunks

    with respx.mock as router:
        _serve(router, name)
        chunks = asyncio.run(go()) if asynchronous else list(gate.completion(stream=True, **BASE))
        logged = recorder.wait()
    received = _calls_of_chunks(chunks)
    assert received == [(c["id"], c["name"], c["arguments"]) for c in CASES[name].get("calls", [])]
    assert _calls_of_response(logged) == received
    assert (logged.choices[0].message.content or "") == _text_of_chunks(chunks)
    finish = [ch.finish_reason for c in chunks for ch in c.choices if ch.finish_reason]
    assert [logged.choices[0].finish_reason] == finish


RESPONSES_URL = "http://upstream.test/v1/responses"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_litellm_logs_the_responses_calls_the_caller_received(
    recorder: Recorder, asynchronous: bool
) -> None:
    gate = ToolGate(MANIFEST["tools"])
    base = {**BASE, "input": "go"}
    del base["messages"]

    async def go() -> list[Any]:
        events = [e async for e in await gate.aresponses(stream=True, **base)]
        await recorder.await_one()
        return events

    with respx.mock as router:
        _serve(router, "two_tools_interleaved")  # the bridge: a chat wire under Responses
        events = asyncio.run(go()) if asynchronous else list(gate.responses(stream=True, **base))
        logged = recorder.wait()
    done = [e.item for e in events if _kind(e) == "response.output_item.done"]
    received = [_call(i) for i in done if _field(i, "type") == "function_call"]
    assert len(received) == 2
    output = getattr(logged, "output", None)
    if output is None:  # litellm logs the bridged call as its chat response
        assert _calls_of_response(logged) == received
    else:
        assert [_call(i) for i in output if _field(i, "type") == "function_call"] == received


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _kind(event: Any) -> str:
    kind = _field(event, "type")
    return str(getattr(kind, "value", kind))


def _call(item: Any) -> tuple[Any, ...]:
    return (_field(item, "call_id"), _field(item, "name"), _field(item, "arguments"))
