"""The sync Messages stream litellm hands back on its Responses bridge, read on the gate's
private event loop (``gate.messages(stream=True)`` on ``openai/``: edge/drive.py), leaks no
argument text and leaves nothing running.

litellm's sync ``anthropic.messages.create`` on ``openai/`` sends its request sync and then
hands back an async iterator of Anthropic SSE bytes; the gate reads it on a loop of its own,
in a thread named ``toolgate-drive`` (litellm's converter reads the sync wire on that loop's
worker threads). Every test here drives the real litellm against a loopback upstream whose
function-call arguments carry a canary made for that test, with every logger captured at
DEBUG and a ``CustomLogger`` in ``litellm.callbacks``, and checks:

- a quarantine is the gate's typed error, with its reason, and the canary is in none of its
  renderings, its records, the exceptions of its ``__cause__``/``__context__`` chain, nor the
  local variables of any frame of their tracebacks (walked through containers and
  attributes, and rendered with a bounded ``repr``);
- no log record carries the canary: the gate's and every other logger's at any level,
  litellm's own (``LiteLLM``...) above DEBUG (the README leaves litellm's DEBUG output,
  which prints response bodies, outside the promise; it is captured all the same); the
  gate's own frames in a logged exception's traceback hold none (litellm logs the gate's
  ``StreamQuarantined`` with its traceback); no exception reached ``sys.unraisablehook``
  or ``threading.excepthook`` with it;
- no event litellm handed its callbacks carries the canary (a quarantine is heard as a
  failure);
- the private loop is closed and its thread, and the worker threads of its default executor,
  have ended: after the quarantine, after the caller closed the stream early, and after it
  let go of the stream undecided (``del`` and a collection); closed or let go once the text
  before the call was handed out (the call's canary read on the wire, withheld) or unread.

One released stream goes the same way and is seen whole: the tool_use block delivered, the
canary in it and in litellm's success event, so the checks look where the text would be.
And read to its end with the collector off, the private loop's reader is gone with the
stream (it holds litellm's stream, and so a copy of the arguments).
"""

from __future__ import annotations

import gc
import json
import logging
import reprlib
import sys
import threading
import time
import traceback
import uuid
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import litellm
import pytest
from leakcheck import TESTS, assert_clean_exception, chain
from litellm.integrations.custom_logger import CustomLogger

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.edge import gate as gate_module
from litellm_toolgate.edge.drive import DrivenStream
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
GATE_CODE = str(Path(gate_module.__file__).resolve().parents[1])
LITELLM_OWN = frozenset({"LiteLLM", "LiteLLM Proxy", "LiteLLM Router"})
WAIT = 30.0
"""Bound on waiting for litellm's failure logging and for a thread to end (seconds)."""
MODEL = "openai/gpt-4o"
TOOL = {
    "name": "multiply",
    "input_schema": {
        "type": "object",
        "properties": {
            "a": {"type": "number"},
            "b": {"type": "number"},
            "note": {"type": "string"},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}


# ---- the wire: one function call on the Responses API, its arguments carrying the canary ----
def _sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def responses_body(arguments: str, text_first: str | None = None) -> bytes:
    """(``text_first``) a message with that text, then one function call, then the end."""
    base = {
        "id": "resp_drive",
        "object": "response",
        "created_at": 1,
        "model": "gpt-4o",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**base, "status": "in_progress"}}
    ]
    output: list[dict[str, Any]] = []
    if text_first is not None:
        part = {"type": "output_text", "text": text_first, "annotations": []}
        message = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
        text_at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
        events += [
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {**message, "status": "in_progress", "content": []},
            },
            {"type": "response.content_part.added", **text_at, "part": {**part, "text": ""}},
            {"type": "response.output_text.delta", **text_at, "delta": text_first},
            {"type": "response.output_text.done", **text_at, "text": text_first},
            {"type": "response.content_part.done", **text_at, "part": part},
            {
                "type": "response.output_item.done",
                "output_index": 0,
                "item": {**message, "content": [part]},
            },
        ]
        output.append({**message, "content": [part]})
    index = len(output)
    item = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_drive",
        "name": "multiply",
        "arguments": "",
        "status": "in_progress",
    }
    done = {**item, "arguments": arguments, "status": "completed"}
    at = {"item_id": "fc_1", "output_index": index}
    events += [
        {"type": "response.output_item.added", "output_index": index, "item": item},
        {"type": "response.function_call_arguments.delta", **at, "delta": arguments},
        {"type": "response.function_call_arguments.done", **at, "arguments": arguments},
        {"type": "response.output_item.done", "output_index": index, "item": done},
    ]
    output.append(done)
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    events.append(
        {
            "type": "response.completed",
            "response": {**base, "status": "completed", "output": output, "usage": usage},
        }
    )
    return _sse(events)


def good(canary: str) -> str:
    return json.dumps({"a": 7, "b": 8, "note": canary})


def cut_before_completed(body: bytes) -> bytes:
    """The body ended cleanly just before its terminal event."""
    return body[: body.index(b"event: response.completed")]


def with_malformed_line(body: bytes, canary: str) -> bytes:
    """A data line that is no JSON, holding the canary, before the arguments are done."""
    at = body.index(b"event: response.function_call_arguments.done")
    line = b'data: {"type": "response.output_text.delta", "delta": "' + canary.encode() + b"\n\n"
    return body[:at] + line + body[at:]


def _as_written(body: bytes, canary: str) -> dict[str, Any]:
    return {}


@dataclass
class Case:
    reason: QuarantineReason
    body: Callable[[str], bytes]  # the canary -> the body served
    options: Callable[[bytes, str], dict[str, Any]] = _as_written  # -> Scripted's options


CASES: dict[str, Case] = {
    # {"a": 7, "b": 8, "note": "CANARY  (the string and the object never closed)
    "invalid_json": Case(R.INVALID_JSON, lambda c: responses_body(good(c)[:-2])),
    "schema_invalid": Case(
        R.SCHEMA_INVALID, lambda c: responses_body(json.dumps({"a": 7, "b": 8, "c": c}))
    ),
    "no_terminal_event": Case(
        R.MISSING_FINISH, lambda c: cut_before_completed(responses_body(good(c)))
    ),
    "connection_dropped": Case(
        R.DISCONNECTED,
        lambda c: responses_body(good(c)),
        # the connection dropped just after the canary's first bytes went out
        lambda body, c: {"disconnect_after": body.index(c.encode()) + 4},
    ),
    "malformed_event": Case(
        R.MALFORMED_EVENT, lambda c: with_malformed_line(responses_body(good(c)), c)
    ),
}


class Upstream:
    def __init__(self) -> None:
        self.answer = Scripted(b"")
        self.server = FakeUpstream(lambda request: self.answer)


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    with up.server:
        yield up


@pytest.fixture
def gate() -> Iterator[ToolGate]:
    with ToolGate([TOOL]) as made:
        yield made


# ---- what is watched: litellm's callbacks, every logger, the private loops -------------------
class Recorder(CustomLogger):
    """Every event litellm hands its callbacks, as text (kind, call id, what it was handed)."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[tuple[str, str, str]] = []
        self._lock = threading.Lock()

    def _add(self, kind: str, *seen: Any) -> None:
        kwargs = next((s for s in seen if isinstance(s, dict)), {})
        call_id = str(kwargs.get("litellm_call_id", ""))
        with self._lock:
            self.events.append((kind, call_id, repr(seen)))

    def of(self, call_id: str) -> list[str]:
        with self._lock:
            return [kind for kind, cid, _ in self.events if cid == call_id]

    def texts(self) -> list[str]:
        with self._lock:
            return [text for _, _, text in self.events]

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        self._add("pre_api_call", model, messages, kwargs)

    def log_post_api_call(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("post_api_call", kwargs, response_obj)

    def log_stream_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("stream", kwargs, response_obj)

    async def async_log_stream_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        self._add("stream", kwargs, response_obj)

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


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._lock:
            self.records.append(record)


@dataclass
class Watch:
    """What one test saw: log records, unraisable and thread exceptions, the private loops."""

    canary: str
    call_id: str
    records: list[logging.LogRecord]
    hooked: list[str]
    driven: list[tuple[Any, threading.Thread]]
    streams: list[weakref.ref[DrivenStream]]
    threads_before: set[int]


@pytest.fixture
def watch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watch]:
    capture = _Capture()
    manager = logging.Logger.manager
    loggers = [logging.getLogger()] + [
        lg for lg in list(manager.loggerDict.values()) if isinstance(lg, logging.Logger)
    ]
    levels = [lg.level for lg in loggers]
    attached = [lg for lg in loggers if lg is loggers[0] or not lg.propagate]
    for lg in loggers:
        lg.setLevel(logging.DEBUG)
    for lg in attached:
        lg.addHandler(capture)

    hooked: list[str] = []

    def unraisable(raised: Any) -> None:
        shown = traceback.format_exception(raised.exc_value) if raised.exc_value else []
        hooked.append(f"{raised.err_msg!r} {raised.object!r} {''.join(shown)}")

    def excepthook(raised: Any) -> None:
        shown = traceback.format_exception(raised.exc_value) if raised.exc_value else []
        hooked.append(f"{raised.thread!r} {''.join(shown)}")

    monkeypatch.setattr(sys, "unraisablehook", unraisable)
    monkeypatch.setattr(threading, "excepthook", excepthook)

    # Every private loop the gate starts, with its thread (not the driven stream itself: a
    # test lets go of that and the loop must end with it).
    driven: list[tuple[Any, threading.Thread]] = []
    streams: list[weakref.ref[DrivenStream]] = []

    def recording(source: Any) -> DrivenStream:
        stream = DrivenStream(source)
        driven.append((stream._loop, stream._thread))
        streams.append(weakref.ref(stream))
        return stream

    monkeypatch.setattr(gate_module, "DrivenStream", recording)
    saved = litellm.callbacks
    litellm.callbacks = [RECORDER]
    seen = Watch(
        canary=f"CANARY-drive-{uuid.uuid4().hex[:12]}",
        call_id=f"call-drive-{uuid.uuid4()}",
        records=capture.records,
        hooked=hooked,
        driven=driven,
        streams=streams,
        threads_before={t.ident or 0 for t in threading.enumerate()},
    )
    try:
        yield seen
    finally:
        litellm.callbacks = saved
        for lg in attached:
            lg.removeHandler(capture)
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def kwargs_for(up: Upstream, watch: Watch) -> dict[str, Any]:
    return {
        "model": MODEL,
        "max_tokens": 64,
        "messages": [{"role": "user", "content": "7 times 8?"}],
        "tools": [TOOL],
        "api_base": up.server.base_url,
        "api_key": "sk-drive",
        "num_retries": 0,
        "stream": True,
        "litellm_call_id": watch.call_id,
    }


def serve(up: Upstream, case: Case, canary: str) -> None:
    body = case.body(canary)
    assert canary.encode() in body
    up.answer = Scripted(body, chunk_sizes=[7, 64], **case.options(body, canary))


# ---- the checks ---------------------------------------------------------------------------------
_SHOW = reprlib.Repr()
_SHOW.maxstring = _SHOW.maxother = 1 << 20
_SHOW.maxlevel = 8
_SHOW.maxdict = _SHOW.maxlist = _SHOW.maxtuple = _SHOW.maxset = _SHOW.maxdeque = 10_000


def _frames(tb: TracebackType | None) -> Iterator[Any]:
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def frames_rendered_with(exc: BaseException, canary: str, only: str = "") -> list[str]:
    """``frame:name`` of every local (of every frame of every traceback of ``exc``'s chain,
    the tests' own frames left out; ``only``: frames of code under that path) whose bounded
    ``repr`` shows the canary."""
    found = []
    for link in chain(exc):
        for frame in _frames(link.__traceback__):
            filename = frame.f_code.co_filename
            if filename.startswith(TESTS) or not filename.startswith(only):
                continue
            for name, value in frame.f_locals.items():
                try:
                    shown = _SHOW.repr(value)
                except Exception as failed:  # a repr that fails shows nothing
                    shown = type(failed).__name__
                if canary in shown:
                    found.append(f"{frame.f_code.co_name}:{name}")
    return found


def assert_clean_quarantine(exc: BaseException, canary: str, reason: QuarantineReason) -> None:
    assert isinstance(exc, ToolCallQuarantined), repr(exc)
    assert exc.reason is reason, exc.reason
    # str, repr, args, the chain (empty), the formatted traceback, the records, and every
    # frame's locals walked through containers and attributes (tests/leakcheck.py)
    assert_clean_exception(exc, canary)
    found = frames_rendered_with(exc, canary)
    assert not found, f"argument text in the repr of a traceback frame's locals: {found}"


def assert_clean_logs(watch: Watch, decided: bool = True) -> None:
    canary = watch.canary
    gc.collect()  # finalizers of what the call left in cycles run while the hooks are ours
    records = list(watch.records)
    if decided:  # the capture saw the gate's record of its decision
        assert any(r.name.startswith("litellm_toolgate") for r in records), "no gate record"
    for record in records:
        if record.name in LITELLM_OWN and record.levelno <= logging.DEBUG:
            continue  # litellm's DEBUG output prints bodies: outside the promise (README)
        where = f"{record.name} {record.levelname} {record.pathname}:{record.lineno}"
        assert canary not in record.getMessage(), where
        assert canary not in repr(record.args), where
        assert canary not in repr(record.__dict__), where
        if record.exc_info and record.exc_info[1] is not None:
            shown = "".join(traceback.format_exception(record.exc_info[1]))
            assert canary not in shown, where
    # A logged exception's frames, as an error tracker reporting log records ships them
    # (Sentry's logging integration, with local variables): the gate's own frames hold no
    # argument text. (litellm's frames hold litellm's objects, its answer among them.)
    for record in records:
        if record.exc_info and record.exc_info[1] is not None:
            found = frames_rendered_with(record.exc_info[1], canary, only=GATE_CODE)
            assert not found, f"argument text in a logged traceback's gate frames: {found}"
    for text in watch.hooked:
        assert canary not in text, "argument text reached an unraisable or thread exception hook"


def settle_callbacks(watch: Watch, kind: str | None) -> None:
    """Wait (bounded) for litellm's ``kind`` event of the call, then give a late one its turn."""
    deadline = time.monotonic() + WAIT
    while kind is not None and kind not in RECORDER.of(watch.call_id):
        if time.monotonic() > deadline:
            break
        time.sleep(0.02)
    time.sleep(0.3)


def assert_clean_callbacks(watch: Watch, expect_failure: bool) -> None:
    kinds = set(RECORDER.of(watch.call_id))
    assert "success" not in kinds, kinds
    if expect_failure:
        assert "failure" in kinds, kinds
    for text in RECORDER.texts():
        assert watch.canary not in text, "argument text reached litellm's callbacks"


def assert_nothing_running(watch: Watch) -> None:
    assert watch.driven, "the stream was not read on a private loop"
    for loop, thread in watch.driven:
        thread.join(WAIT)
        assert not thread.is_alive(), "the private loop's thread still runs"
        assert loop.is_closed(), "the private loop was not closed"
    # the private loops' default executors (litellm reads the sync wire on them)
    left = []
    for thread in threading.enumerate():
        if (thread.ident or 0) in watch.threads_before:
            continue
        if thread.name == "toolgate-drive" or thread.name.startswith("asyncio_"):
            thread.join(WAIT)
            if thread.is_alive():
                left.append(thread.name)
    assert not left, f"threads of a private loop still run: {left}"


def read_all(stream: Any) -> tuple[list[bytes], BaseException | None]:
    out: list[bytes] = []
    try:
        for piece in stream:
            out.append(piece)
    except Exception as exc:
        return out, exc
    return out, None


def tool_uses(pieces: list[bytes]) -> list[tuple[str, str, str]]:
    """(id, name, argument text) of every tool_use block in an Anthropic SSE byte stream."""
    calls: dict[int, list[str]] = {}
    for block in b"".join(pieces).decode().split("\n\n"):
        data = [line[6:] for line in block.split("\n") if line.startswith("data: ")]
        if not data:
            continue
        event = json.loads("\n".join(data))
        if event.get("type") == "content_block_start":
            if event["content_block"]["type"] == "tool_use":
                cb = event["content_block"]
                calls[event["index"]] = [cb["id"], cb["name"], ""]
        elif event.get("type") == "content_block_delta" and event["index"] in calls:
            calls[event["index"]][2] += event["delta"].get("partial_json", "")
    return [(i, n, a) for i, n, a in (calls[k] for k in sorted(calls))]


# ---- the tests ----------------------------------------------------------------------------------
def test_a_released_stream_is_seen_through_the_same_path(
    upstream: Upstream, watch: Watch, gate: ToolGate
) -> None:
    arguments = good(watch.canary)
    upstream.answer = Scripted(responses_body(arguments), chunk_sizes=[7, 64])
    out, error = read_all(gate.messages(**kwargs_for(upstream, watch)))
    assert error is None, repr(error)
    assert len(watch.driven) == 1, "the sync stream was not read on the private loop"
    assert [(i, n, json.loads(a)) for i, n, a in tool_uses(out)] == [
        ("call_drive", "multiply", json.loads(arguments))
    ]
    assert watch.canary.encode() in b"".join(out)  # released: the caller's to read
    settle_callbacks(watch, "success")
    assert "success" in RECORDER.of(watch.call_id)
    assert any(watch.canary in text for text in RECORDER.texts()), "the callbacks saw no call"
    assert any(r.name in LITELLM_OWN for r in watch.records), "litellm's loggers not captured"
    assert_nothing_running(watch)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_quarantine_read_on_the_private_loop_leaks_nothing(
    upstream: Upstream, watch: Watch, gate: ToolGate, name: str
) -> None:
    case = CASES[name]
    serve(upstream, case, watch.canary)
    out, error = read_all(gate.messages(**kwargs_for(upstream, watch)))
    assert error is not None, "a broken call was not quarantined"
    assert tool_uses(out) == [], "a tool_use block of a broken call was released"
    assert watch.canary.encode() not in b"".join(out)
    assert_clean_quarantine(error, watch.canary, case.reason)
    assert_nothing_running(watch)
    settle_callbacks(watch, "failure")
    assert_clean_callbacks(watch, expect_failure=True)
    assert_clean_logs(watch)


# Closed or let go part way: text came first and was handed out, the call after it (its
# canary on the wire, read in the same write) is withheld and not decided yet.
ARGUMENTS = {"broken": lambda c: good(c)[:-2], "valid": good}


def opened(
    gate: ToolGate, upstream: Upstream, watch: Watch, arguments: str, read: bool
) -> tuple[Any, list[bytes]]:
    body = responses_body(ARGUMENTS[arguments](watch.canary), text_first="Let me multiply.")
    upstream.answer = Scripted(body)
    stream = gate.messages(**kwargs_for(upstream, watch))
    out: list[bytes] = []
    while read and b'"text_delta"' not in b"".join(out):
        out.append(next(stream))
    return stream, out


@pytest.mark.parametrize("arguments", sorted(ARGUMENTS))
def test_a_stream_closed_early_leaks_nothing_and_ends_its_loop(
    upstream: Upstream, watch: Watch, gate: ToolGate, arguments: str
) -> None:
    stream, out = opened(gate, upstream, watch, arguments, read=True)
    stream.close()
    with pytest.raises(ToolCallQuarantined) as caught:  # a read after close: cancelled
        next(stream)
    assert tool_uses(out) == []
    assert_clean_quarantine(caught.value, watch.canary, R.CANCELLED)
    assert_nothing_running(watch)
    settle_callbacks(watch, None)
    assert_clean_callbacks(watch, expect_failure=False)
    assert_clean_logs(watch)


@pytest.mark.parametrize("read", [True, False], ids=["after-text", "unread"])
@pytest.mark.parametrize("arguments", sorted(ARGUMENTS))
def test_a_stream_let_go_undecided_leaks_nothing_and_ends_its_loop(
    upstream: Upstream, watch: Watch, gate: ToolGate, arguments: str, read: bool
) -> None:
    stream, out = opened(gate, upstream, watch, arguments, read)
    del stream
    gc.collect()
    assert tool_uses(out) == []
    assert_nothing_running(watch)
    settle_callbacks(watch, None)
    assert_clean_callbacks(watch, expect_failure=False)
    assert_clean_logs(watch, decided=False)


@pytest.mark.parametrize("arguments", sorted(ARGUMENTS))
def test_the_read_state_goes_with_the_stream_without_a_collection(
    upstream: Upstream, watch: Watch, gate: ToolGate, arguments: str
) -> None:
    """Read to its end (released or quarantined), the private loop's reader holds litellm's
    stream (and its copy of the arguments) no longer: freed as the stream ends, not at the
    next collection (a future's exception, whose traceback held the reader, was a cycle)."""
    upstream.answer = Scripted(responses_body(ARGUMENTS[arguments](watch.canary)))
    gc.collect()
    gc.disable()
    try:
        out, error = read_all(gate.messages(**kwargs_for(upstream, watch)))
        del error, out
        alive = [ref for ref in watch.streams if ref() is not None]
    finally:
        gc.enable()
    assert len(watch.streams) == 1
    assert not alive, "the private loop's reader outlived its stream until a collection"
    assert_nothing_running(watch)
