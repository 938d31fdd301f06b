"""What litellm's success loggers hear of a whole answer gated by ``ToolGate``.

litellm hands a whole (non-streamed) answer to its success loggers (OpenTelemetry,
Langfuse, a ``CustomLogger``) before it returns it to the wrapper, arguments included. The
wrapper holds those loggers from the moment the call's request is prepared until it decided:
a released answer is logged as success, as always; a quarantined one never reaches a success
logger, whose failure handlers get the quarantine and the sanitized record instead, with no
argument text. Sync and async, chat (litellm's own HTTP handler and the OpenAI SDK route) and
the Responses API, through the real litellm against a loopback upstream.
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
        self.call_id = ""
        self._lock = threading.Lock()

    def _add(self, kind: str, kwargs: Any, response: Any) -> None:
        with self._lock:
            if isinstance(kwargs, dict) and kwargs.get("litellm_call_id") == self.call_id:
                self.events.append((kind, f"{kwargs!r} {response!r}"))

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
        self._add("success", kwargs, response_obj)

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("failure", kwargs, response_obj)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("failure", kwargs, response_obj)


RECORDER = Recorder()  # one for the module: litellm keeps the first logger of a class it met


@pytest.fixture
def recorder() -> Iterator[Recorder]:
    saved = litellm.callbacks
    litellm.callbacks = [RECORDER]
    with RECORDER._lock:
        RECORDER.events.clear()
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
