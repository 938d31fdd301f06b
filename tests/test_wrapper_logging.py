"""What litellm's success loggers hear of a whole answer gated by ``ToolGate``.

litellm hands a whole (non-streamed) answer to its success loggers (OpenTelemetry,
Langfuse, a ``CustomLogger``) before it returns it to the wrapper, arguments included. The
wrapper holds those loggers from the moment the call's request is prepared until it decided:
a released answer is logged as success, as always; a quarantined one never reaches a success
logger, whose failure handlers get the quarantine and the sanitized record instead, with no
argument text. Sync and async, chat (litellm's own HTTP handler and the OpenAI SDK route) and
the Responses API, through the real litellm against a loopback upstream.

The same for ``gate.responses`` / ``gate.messages`` streams, whose iterators log inline as
their own stream ends (the held handlers are deferred to the decision): success and stream
events for a released stream, one failure and no canary for a quarantined one, on
``openai/``, ``cometapi/`` and ``anthropic/``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY
from litellm.integrations.custom_logger import CustomLogger
from loopback import multiply_whole_body

from litellm_toolgate import SchemaRejected, ToolGate, find_quarantine
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "number"},
                "b": {"type": "number"},
                "note": {"type": "string"},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
GOOD = json.dumps({"a": 7, "b": 8, "note": CANARY})  # valid: released (the caller's to log)
BAD = json.dumps({"a": 7, "b": 8, "c": CANARY})  # an unknown key: schema_invalid
USER = [{"role": "user", "content": "7 times 8?"}]
WAIT = 30.0


class Recorder(CustomLogger):
    """Every event litellm's loggers get for the call under test (by its call id: litellm
    may still be logging an earlier test's calls), as text: kind, then what it was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str]] = []
        self.hooks: list[str] = []  # which of the logger's methods heard each event
        self.call_id = ""
        self._lock = threading.Lock()

    def _add(self, kind: str, kwargs: Any, response: Any, hook: str = "sync") -> None:
        with self._lock:
            if isinstance(kwargs, dict) and kwargs.get("litellm_call_id") == self.call_id:
                self.events.append((kind, f"{kwargs!r} {response!r}"))
                self.hooks.append(f"{hook} {kind}")

    def kinds(self) -> set[str]:
        with self._lock:
            return {kind for kind, _ in self.events}

    def log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("success", kwargs, response_obj)

    async def async_log_success_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("success", kwargs, response_obj, "async")

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("failure", kwargs, response_obj)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("failure", kwargs, response_obj, "async")

    def log_stream_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("stream", kwargs, response_obj)

    async def async_log_stream_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("stream", kwargs, response_obj, "async")


RECORDER = Recorder()  # one for the module: litellm keeps the first logger of a class it met


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    saved = litellm.callbacks
    litellm.callbacks = [RECORDER]
    with RECORDER._lock:
        RECORDER.events.clear()
        RECORDER.hooks.clear()
        RECORDER.call_id = f"call-{uuid.uuid4()}"
    try:
        yield RECORDER
    finally:
        litellm.callbacks = saved


def responses_body(arguments: str) -> bytes:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": arguments,
        "status": "completed",
    }
    return json.dumps(
        {
            "id": "resp_whole",
            "object": "response",
            "created_at": 1,
            "status": "completed",
            "model": "gpt-4o-mini",
            "output": [item],
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        }
    ).encode()


# (entry point, model, body maker)
SHAPES = {
    "chat-cometapi": ("completion", "cometapi/gpt-4o-mini", multiply_whole_body),
    "chat-openai": ("completion", "openai/gpt-4o-mini", multiply_whole_body),
    "responses-openai": ("responses", "openai/gpt-4o-mini", responses_body),
}


def make_call(
    shape: str, mode: str, arguments: str, base: str, settled: Callable[[], bool]
) -> BaseException | None:
    entry, model, _ = SHAPES[shape]
    kwargs: dict[str, Any] = {
        "model": model,
        "api_base": base,
        "api_key": "sk-logging",
        "num_retries": 0,
        "litellm_call_id": RECORDER.call_id,
    }
    if entry == "completion":
        kwargs["messages"] = USER
    else:
        kwargs["input"] = "7 times 8?"
    gate = ToolGate([TOOL])
    try:
        if mode == "sync":
            getattr(gate, entry)(**kwargs)
            deadline = time.monotonic() + WAIT
            while not settled() and time.monotonic() < deadline:
                time.sleep(0.02)
        else:

            async def go() -> None:
                try:
                    await getattr(gate, "a" + entry)(**kwargs)
                finally:
                    # litellm logs in tasks of its own, which a closed loop would end.
                    deadline = time.monotonic() + WAIT
                    while not settled() and time.monotonic() < deadline:
                        await asyncio.sleep(0.02)

            asyncio.run(go())
    except Exception as exc:
        return exc
    finally:
        gate.close()
    return None


def answer(shape: str, arguments: str) -> Callable[[Any], Scripted]:
    body = SHAPES[shape][2](arguments)
    return lambda request: Scripted(body, content_type="application/json")


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_released_whole_answer_is_logged_as_success(
    recorder: Recorder, shape: str, mode: str
) -> None:
    with FakeUpstream(answer(shape, GOOD)) as upstream:
        error = make_call(
            shape, mode, GOOD, upstream.base_url, lambda: "success" in recorder.kinds()
        )
    assert error is None, repr(error)
    assert recorder.kinds() == {"success"}
    # The loggers see what the caller got (released arguments are the caller's): this is
    # also what shows the check below would find argument text if it were there.
    assert any(CANARY in text for _, text in recorder.events)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_quarantined_whole_answer_never_reaches_a_success_logger(
    recorder: Recorder, shape: str, mode: str
) -> None:
    with FakeUpstream(answer(shape, BAD)) as upstream:
        error = make_call(
            shape, mode, BAD, upstream.base_url, lambda: "failure" in recorder.kinds()
        )
    assert isinstance(find_quarantine(error), SchemaRejected), repr(error)
    time.sleep(0.3)  # a success event, were one coming, has had its turn
    assert recorder.kinds() == {"failure"}, recorder.kinds()
    for _, text in recorder.events:
        assert CANARY not in text, "argument text reached litellm's loggers"


# ---- streams: gate.responses / gate.messages (stream=True) ---------------------------------
# litellm's Responses and Anthropic-messages iterators log the answer they assembled as their
# own stream ends, on the reader's thread or task, before the gate decided.
def _sse(events: list[dict[str, Any]], named: bool) -> bytes:
    out = b""
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        out += f"{head}data: {json.dumps(e)}\n\n".encode()
    return out


def responses_stream_body(arguments: str) -> bytes:
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": "",
        "status": "in_progress",
    }
    done = {**item, "arguments": arguments, "status": "completed"}
    base = {
        "id": "resp_stream",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o-mini",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    return _sse(
        [
            {
                "type": "response.created",
                "response": {**base, "status": "in_progress", "output": []},
            },
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {
                "type": "response.function_call_arguments.delta",
                "item_id": "fc_1",
                "output_index": 0,
                "delta": arguments,
            },
            {
                "type": "response.function_call_arguments.done",
                "item_id": "fc_1",
                "output_index": 0,
                "arguments": arguments,
            },
            {"type": "response.output_item.done", "output_index": 0, "item": done},
            {
                "type": "response.completed",
                "response": {**base, "status": "completed", "output": [done], "usage": usage},
            },
        ],
        named=True,
    )


def messages_stream_body(arguments: str) -> bytes:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-3-5-sonnet",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "multiply", "input": {}}
    return _sse(
        [
            {"type": "message_start", "message": message},
            {"type": "content_block_start", "index": 0, "content_block": block},
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": arguments},
            },
            {"type": "content_block_stop", "index": 0},
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
            {"type": "message_stop"},
        ],
        named=True,
    )


def chat_stream_body(arguments: str) -> bytes:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "multiply"}}
    events = [
        chunk(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{**call, "function": {"name": "multiply", "arguments": ""}}],
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
        chunk({}, "tool_calls"),
    ]
    return _sse(events, named=False) + b"data: [DONE]\n\n"


# (entry point, model, stream body maker, modes litellm runs the route in)
STREAMS = {
    "responses-openai": (
        "responses",
        "openai/gpt-4o-mini",
        responses_stream_body,
        ("sync", "async"),
    ),
    "responses-cometapi": (
        "responses",
        "cometapi/gpt-4o-mini",
        chat_stream_body,
        ("sync", "async"),
    ),
    "messages-anthropic": (
        "messages",
        "anthropic/claude-3-5-sonnet",
        messages_stream_body,
        ("async",),
    ),
    "messages-cometapi": ("messages", "cometapi/gpt-4o-mini", chat_stream_body, ("sync", "async")),
    "messages-openai": ("messages", "openai/gpt-4o-mini", responses_stream_body, ("sync", "async")),
}
STREAM_CASES = [(s, m) for s in sorted(STREAMS) for m in STREAMS[s][3]]
MESSAGES_TOOL = {"name": "multiply", "input_schema": TOOL["function"]["parameters"]}


def stream_call(
    shape: str, mode: str, base: str, settled: Callable[[], bool]
) -> BaseException | None:
    """Read a gated stream to its end (or its quarantine), then wait for litellm's loggers."""
    entry, model, _, _ = STREAMS[shape]
    kwargs: dict[str, Any] = {
        "model": model,
        # litellm appends /v1/messages to an anthropic/ base itself.
        "api_base": base.removesuffix("/v1") if model.startswith("anthropic/") else base,
        "api_key": "sk-logging",
        "num_retries": 0,
        "stream": True,
        "litellm_call_id": RECORDER.call_id,
    }
    if entry == "responses":
        kwargs["input"] = "7 times 8?"
        kwargs["tools"] = [{"type": "function", **TOOL["function"]}]
    else:
        kwargs["messages"] = USER
        kwargs["max_tokens"] = 64
        kwargs["tools"] = [MESSAGES_TOOL]
    gate = ToolGate([TOOL])
    try:
        if mode == "sync":
            try:
                for _ in getattr(gate, entry)(**kwargs):
                    pass
            finally:
                deadline = time.monotonic() + WAIT
                while not settled() and time.monotonic() < deadline:
                    time.sleep(0.02)
        else:

            async def go() -> None:
                try:
                    async for _ in await getattr(gate, "a" + entry)(**kwargs):
                        pass
                finally:
                    deadline = time.monotonic() + WAIT
                    while not settled() and time.monotonic() < deadline:
                        await asyncio.sleep(0.02)

            asyncio.run(go())
    except Exception as exc:
        return exc
    finally:
        gate.close()
    return None


def streamed(shape: str, arguments: str) -> Callable[[Any], Scripted]:
    body = STREAMS[shape][2](arguments)
    return lambda request: Scripted(body)


@pytest.mark.parametrize(("shape", "mode"), STREAM_CASES)
def test_a_released_stream_is_logged_as_success(recorder: Recorder, shape: str, mode: str) -> None:
    with FakeUpstream(streamed(shape, GOOD)) as upstream:
        error = stream_call(shape, mode, upstream.base_url, lambda: "success" in recorder.kinds())
    assert error is None, repr(error)
    time.sleep(0.3)
    assert "success" in recorder.kinds() and "failure" not in recorder.kinds(), recorder.kinds()
    assert any(CANARY in text for _, text in recorder.events)


@pytest.mark.parametrize(("shape", "mode"), STREAM_CASES)
def test_a_quarantined_stream_never_reaches_a_success_logger(
    recorder: Recorder, shape: str, mode: str
) -> None:
    with FakeUpstream(streamed(shape, BAD)) as upstream:
        error = stream_call(shape, mode, upstream.base_url, lambda: "failure" in recorder.kinds())
    assert isinstance(find_quarantine(error), SchemaRejected), repr(error)
    time.sleep(0.3)  # a success event, were one coming, has had its turn
    assert recorder.kinds() == {"failure"}, recorder.kinds()
    # One failure event: litellm's sync stream path runs its sync and its async loggers
    # (as it would for a success), each hears it once.
    assert len(set(recorder.hooks)) == len(recorder.hooks), recorder.hooks
    for _, text in recorder.events:
        assert CANARY not in text, "argument text reached litellm's loggers"
