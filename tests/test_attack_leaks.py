"""Every quarantine reason, reached through the real litellm, leaks no argument text.

For each reason there is a case whose wire (or policy) carries the canary where that
reason's own error would quote it: the text a JSON error holds, the value a schema error
names, the model's made-up tool name, the policy's exception, the bytes around a bad UTF-8
sequence, the line the SSE decoder was assembling at a limit. Each runs through
``gate.completion`` and ``gate.acompletion`` (the Responses wire's own reasons through
``gate.responses`` and ``gate.aresponses`` on the native route; respx at the httpx edge)
with every logger captured at DEBUG (tests/leakcheck.py), and the quarantine, its chain,
its records and every log record must be free of the canary. The last test checks that
together with the fault-injection suite every reason is covered, bar one the public API
cannot reach.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CANARY, MANIFEST, Pieces
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger

from litellm_toolgate import (
    Limits,
    PolicyDecision,
    QuarantineReason,
    ToolCall,
    ToolCallQuarantined,
    ToolGate,
)

litellm.suppress_debug_info = True
# respx answers at httpx's edge: litellm's async handlers on httpx (conftest).
pytestmark = pytest.mark.usefixtures("litellm_on_httpx")
R = QuarantineReason
C = CANARY
URL = "http://upstream.test/v1/chat/completions"
BASE: dict[str, Any] = {
    "model": "cometapi/gpt-4o-mini",
    "messages": [{"role": "user", "content": "go"}],
    "api_base": "http://upstream.test/v1",
    "api_key": "sk-test",
}
ARGS = json.dumps({"path": f"src/{C}.py", "content": f"# {C}\n"})


HEAD = {"id": "chatcmpl-leak", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def delta(d: dict[str, Any], finish: str | None = None, index: int = 0) -> bytes:
    choice = {"index": index, "delta": d, "finish_reason": finish}
    return sse({**HEAD, "choices": [choice]})


def opening(arguments: str, index: int = 0, cid: str = "call_1", name: str = "write_file") -> bytes:
    fragment = {
        "index": index,
        "id": cid,
        "type": "function",
        "function": {"name": name, "arguments": arguments},
    }
    return delta({"tool_calls": [fragment]})


FINISH = delta({}, "tool_calls")
DONE = b"data: [DONE]\n\n"
END = FINISH + DONE
WRITE = opening(ARGS)


@dataclass
class Case:
    body: bytes
    reason: QuarantineReason
    limits: Limits | None = None
    policy: Any = None
    content_type: str = "text/event-stream"
    cut: int | None = None
    error: type[Exception] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def deny(call: ToolCall) -> PolicyDecision:
    return PolicyDecision.deny("outside the workspace")


def explode(call: ToolCall) -> bool:
    raise ValueError(f"cannot write {call.arguments['path']}")


# One chunk over two data lines: valid SSE and JSON, but litellm reads it line by line.
_WHOLE = json.dumps(
    {
        **HEAD,
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "write_file", "arguments": ARGS},
                        }
                    ]
                },
            }
        ],
    }
)
SPLIT = ("data: " + _WHOLE.replace(', "choices"', '\ndata: , "choices"', 1) + "\n\n").encode()

CASES: dict[str, Case] = {
    "invalid_json": Case(opening(f'{{"path": "{C}", ') + END, R.INVALID_JSON),
    "trailing_data": Case(opening(ARGS + f' {{"x": "{C}"}}') + END, R.TRAILING_DATA),
    "not_an_object": Case(opening(json.dumps([C])) + END, R.NOT_AN_OBJECT),
    "duplicate_key": Case(opening(f'{{"path": "{C}", "path": "{C}"}}') + END, R.DUPLICATE_KEY),
    "number_out_of_range": Case(
        opening(f'{{"path": "{C}", "content": 1e999}}') + END, R.NUMBER_OUT_OF_RANGE
    ),
    "invalid_string": Case(
        opening(f'{{"path": "\\ud800{C}", "content": ""}}') + END, R.INVALID_STRING
    ),
    "depth_exceeded": Case(
        opening(f'{{"path": "{C}", "content": ' + "[" * 70 + "]" * 70 + "}") + END, R.DEPTH_EXCEEDED
    ),
    "schema_invalid": Case(opening(json.dumps({"path": C})) + END, R.SCHEMA_INVALID),
    "unknown_tool": Case(opening(ARGS, name=f"tool_{C}") + END, R.UNKNOWN_TOOL),
    "policy_denied": Case(WRITE + END, R.POLICY_DENIED, policy=deny),
    "policy_error": Case(WRITE + END, R.POLICY_ERROR, policy=explode),
    "malformed_event": Case(WRITE + b"data: {" + C.encode() + b"\n\n" + END, R.MALFORMED_EVENT),
    "invalid_utf8": Case(WRITE + b"data: \xff" + C.encode() + b"\n\n" + END, R.INVALID_UTF8),
    "error_event": Case(
        WRITE + sse({"error": {"message": C, "type": "server_error"}}) + END, R.ERROR_EVENT
    ),
    "missing_finish": Case(WRITE + DONE, R.MISSING_FINISH),
    "missing_done": Case(WRITE + FINISH, R.MISSING_DONE),
    "event_after_terminal": Case(
        WRITE + FINISH + opening(ARGS, 1, "call_2") + DONE, R.EVENT_AFTER_TERMINAL
    ),
    "finish_reason_mismatch": Case(WRITE + delta({}, "stop") + DONE, R.FINISH_REASON_MISMATCH),
    "unexpected_choice": Case(WRITE + delta({"content": C}, index=1) + END, R.UNEXPECTED_CHOICE),
    "refusal": Case(WRITE + delta({"refusal": C}) + END, R.REFUSAL),
    "legacy_function_call": Case(
        delta({"function_call": {"name": "write_file", "arguments": ARGS}}) + END,
        R.LEGACY_FUNCTION_CALL,
    ),
    "invalid_call_index": Case(WRITE + opening(ARGS, -1, "call_2") + END, R.INVALID_CALL_INDEX),
    "missing_call_identity": Case(WRITE + opening(ARGS, 1, "") + END, R.MISSING_CALL_IDENTITY),
    "identity_conflict": Case(WRITE + opening(ARGS, 0, "call_9") + END, R.IDENTITY_CONFLICT),
    "unsupported_tool_type": Case(
        WRITE
        + delta(
            {"tool_calls": [{"index": 1, "id": "c2", "type": "custom", "custom": {"input": C}}]}
        )
        + END,
        R.UNSUPPORTED_TOOL_TYPE,
    ),
    "too_many_calls": Case(
        WRITE + opening(ARGS, 1, "call_2") + END, R.TOO_MANY_CALLS, Limits(max_calls=1)
    ),
    "arguments_too_large": Case(WRITE + END, R.ARGUMENTS_TOO_LARGE, Limits(max_argument_bytes=16)),
    "total_arguments_too_large": Case(
        WRITE + opening(ARGS, 1, "call_2") + END,
        R.TOTAL_ARGUMENTS_TOO_LARGE,
        Limits(max_total_argument_bytes=len(ARGS) + 8),
    ),
    "too_many_events": Case(WRITE + WRITE + END, R.TOO_MANY_EVENTS, Limits(max_events=1)),
    "event_too_large": Case(WRITE + END, R.EVENT_TOO_LARGE, Limits(max_event_bytes=64)),
    "text_too_large": Case(
        delta({"content": C * 4}) + END, R.TEXT_TOO_LARGE, Limits(max_text_bytes=16)
    ),
    "carrier_mismatch": Case(SPLIT + END, R.CARRIER_MISMATCH),
    "disconnected": Case(WRITE + END, R.DISCONNECTED, cut=len(WRITE) - 10),
    "stalled": Case(WRITE + END, R.STALLED, cut=len(WRITE) - 10, error=httpx.ReadTimeout),
    "unsupported_wire": Case(
        json.dumps({"choices": [{"message": {"content": C}}]}).encode(),
        R.UNSUPPORTED_WIRE,
        content_type="application/json",
    ),
}


def run(case: Case, asynchronous: bool) -> tuple[list[Any], BaseException | None]:
    gate = ToolGate(MANIFEST["tools"], policy=case.policy, limits=case.limits)
    chunks: list[Any] = []

    def respond(request: httpx.Request) -> httpx.Response:
        stream = Pieces([case.body], cut=case.cut, error=case.error)
        return httpx.Response(200, headers={"content-type": case.content_type}, stream=stream)

    async def go_async() -> None:
        async for chunk in await gate.acompletion(stream=True, **BASE):
            chunks.append(chunk)

    error: BaseException | None = None
    with respx.mock as router:
        router.post(URL).mock(side_effect=respond)
        try:
            if asynchronous:
                asyncio.run(go_async())
            else:
                chunks.extend(gate.completion(stream=True, **BASE))
        except Exception as exc:
            error = exc
    return chunks, error


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", list(CASES))
def test_no_quarantine_path_leaks_the_arguments(name: str, asynchronous: bool) -> None:
    case = CASES[name]
    assert C.encode() in case.body, "the canary must be on the wire for this to prove anything"
    with every_logger() as logs:
        chunks, error = run(case, asynchronous)
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is case.reason
    assert not [tc for c in chunks for ch in c.choices for tc in (ch.delta.tool_calls or [])]
    assert_clean_exception(error)
    assert_clean_logs(logs)
    ours = [r for r in logs if r.name == "litellm_toolgate"]
    assert ours, "the gate logs its decision"
    assert {r.levelname for r in ours} == {"WARNING"}


def test_the_async_streams_frames_hold_no_chunk_of_litellms_at_the_raise() -> None:
    """A stream whose call has no finish before ``[DONE]``: the quarantine is raised from the
    gated stream's own frame, which by then holds none of litellm's chunks (the last one read
    carried the arguments; leakcheck's frame walk stops above a chunk's fields)."""
    gate = ToolGate(MANIFEST["tools"])

    async def go() -> None:
        async for _ in await gate.acompletion(stream=True, **BASE):
            pass

    with respx.mock as router:
        router.post(URL).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Pieces([WRITE + DONE])
            )
        )
        with pytest.raises(ToolCallQuarantined) as info:
            asyncio.run(go())
    tb = info.value.__traceback__
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    ours = [f for f in frames if f.f_code.co_filename.endswith("litellm_toolgate/edge/stream.py")]
    assert ours, "the quarantine is raised through the gated stream"
    for frame in ours:
        kinds = {name: type(value).__name__ for name, value in frame.f_locals.items()}
        assert "ModelResponseStream" not in kinds.values(), kinds
    assert_clean_exception(info.value)


def test_a_cancelled_stream_leaks_nothing() -> None:
    gate = ToolGate(MANIFEST["tools"])
    body = delta({"content": "hi"}) + WRITE + END
    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Pieces([body])
            )
        )
        with gate.completion(stream=True, **BASE) as stream:
            next(stream)
        with pytest.raises(ToolCallQuarantined) as info:
            next(stream)
    assert info.value.reason is R.CANCELLED
    assert_clean_exception(info.value)
    assert_clean_logs(logs)


def test_an_oversized_body_leaks_nothing() -> None:
    gate = ToolGate(MANIFEST["tools"], limits=Limits(max_body_bytes=64))
    body = {"choices": [{"index": 0, "message": {"content": C * 20}, "finish_reason": "stop"}]}
    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(return_value=httpx.Response(200, json=body))
        with pytest.raises(ToolCallQuarantined) as info:
            gate.completion(**BASE)
    assert info.value.reason is R.BODY_TOO_LARGE
    assert_clean_exception(info.value)
    assert_clean_logs(logs)


def test_a_stream_the_gate_never_saw_leaks_nothing() -> None:
    gate = ToolGate(MANIFEST["tools"])
    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(
            return_value=httpx.Response(
                200, headers={"content-type": "text/event-stream"}, stream=Pieces([WRITE + END])
            )
        )
        stream = litellm.completion(stream=True, **BASE)
        with pytest.raises(ToolCallQuarantined) as info:
            list(gate.guard(stream, gate.http_client()))
    assert info.value.reason is R.WIRE_NOT_OBSERVED
    assert_clean_exception(info.value)
    assert_clean_logs(logs)


# ---- the Responses wire (native route: litellm reads /responses itself) -----------------
RESPONSES_URL = "http://upstream.test/v1/responses"
RESPONSES_BASE: dict[str, Any] = {**BASE, "model": "openai/gpt-4o-mini", "input": "go"}
del RESPONSES_BASE["messages"]
_RESP = {"id": "resp_leak", "object": "response", "created_at": 1, "model": "m"}
_ITEM = {"id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "write_file"}


def event(kind: str, **fields: Any) -> bytes:
    body = json.dumps({"type": kind, **fields})
    return f"event: {kind}\ndata: {body}\n\n".encode()


def response(status: str, output: list[Any]) -> dict[str, Any]:
    return {**_RESP, "status": status, "output": output}


def item(arguments: str, status: str) -> dict[str, Any]:
    return {**_ITEM, "arguments": arguments, "status": status}


R_START = event("response.created", response=response("in_progress", []))
R_ADDED = event("response.output_item.added", output_index=0, item=item("", "in_progress"))
R_DELTA = event(
    "response.function_call_arguments.delta", output_index=0, item_id="fc_1", delta=ARGS
)


def r_args_done(arguments: str) -> bytes:
    return event(
        "response.function_call_arguments.done",
        output_index=0,
        item_id="fc_1",
        arguments=arguments,
    )


R_ITEM_DONE = event("response.output_item.done", output_index=0, item=item(ARGS, "completed"))
R_COMPLETED = event("response.completed", response=response("completed", [item(ARGS, "completed")]))

RESPONSES_CASES: dict[str, Case] = {
    # .done repeats the arguments with the canary swapped out: what was streamed differs.
    "item_mismatch": Case(
        R_START + R_ADDED + R_DELTA + r_args_done(ARGS.replace(C, "x")) + R_ITEM_DONE + R_COMPLETED,
        R.ITEM_MISMATCH,
    ),
    "incomplete_item": Case(
        R_START + R_ADDED + R_DELTA + R_ITEM_DONE + R_COMPLETED, R.INCOMPLETE_ITEM
    ),
    "response_incomplete": Case(
        R_START
        + R_ADDED
        + R_DELTA
        + event("response.incomplete", response=response("incomplete", [item(ARGS, "incomplete")])),
        R.RESPONSE_INCOMPLETE,
    ),
}


def run_responses(case: Case, asynchronous: bool) -> tuple[list[Any], BaseException | None]:
    gate = ToolGate(MANIFEST["tools"], policy=case.policy, limits=case.limits)
    events: list[Any] = []

    def respond(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces([case.body])
        )

    async def go_async() -> None:
        async for e in await gate.aresponses(stream=True, **RESPONSES_BASE):
            events.append(e)

    error: BaseException | None = None
    with respx.mock as router:
        router.post(RESPONSES_URL).mock(side_effect=respond)
        try:
            if asynchronous:
                asyncio.run(go_async())
            else:
                events.extend(gate.responses(stream=True, **RESPONSES_BASE))
        except Exception as exc:
            error = exc
    return events, error


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", list(RESPONSES_CASES))
def test_no_responses_quarantine_leaks_the_arguments(name: str, asynchronous: bool) -> None:
    case = RESPONSES_CASES[name]
    assert C.encode() in case.body, "the canary must be on the wire for this to prove anything"
    with every_logger() as logs:
        events, error = run_responses(case, asynchronous)
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is case.reason
    assert not [e for e in events if "function_call" in getattr(e, "type", "")]
    assert not [
        e for e in events if getattr(getattr(e, "item", None), "type", "") == "function_call"
    ]
    assert_clean_exception(error)
    assert_clean_logs(logs)


# Reached only by a second successful HTTP response on one attempt, which the public API
# never produces (each call gets its own attempt); the core's tests cover it.
CORE_ONLY = {R.SPLICED_RESPONSE}


def test_every_reason_is_covered() -> None:
    covered = {case.reason for case in (*CASES.values(), *RESPONSES_CASES.values())}
    covered |= {R.CANCELLED, R.BODY_TOO_LARGE, R.WIRE_NOT_OBSERVED}
    # Refused before the request is sent (test_taxonomy_profiles): no wire, no argument text.
    covered |= {R.UNSUPPORTED_REQUEST}
    covered |= {R.ROUTE_NOT_GATED}  # a path the gate does not read: tests/test_routes.py
    # The tool loop's own bounds and call-id rule: tests/test_loop.py
    covered |= {R.TOO_MANY_ROUNDS, R.TOO_MANY_CALLS_IN_ROUND, R.TOO_MANY_CALLS_IN_RUN}
    covered |= {R.CALL_ID_REUSED}
    assert covered | CORE_ONLY == set(QuarantineReason)


# ---- litellm's own error, and every later raise -----------------------------------------
# A chunk the gate accepts but litellm cannot parse ("created" is not an integer): litellm
# raises an error that quotes the chunk, arguments and all. The wire then faults while that
# error is being handled (litellm closes the body, the gate drains it and finds a malformed
# event). The quarantine must not have litellm's error (or anything else) in its chain.
_UNPARSABLE = sse(
    {
        **HEAD,
        "created": f"{C}",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "write_file", "arguments": ARGS},
                        }
                    ]
                },
                "finish_reason": None,
            }
        ],
    }
)
_AFTER = b"data: {broken\n\n" + END
BRIDGED_BASE: dict[str, Any] = {**BASE, "input": "go"}
del BRIDGED_BASE["messages"]


def _gate_call(gate: ToolGate, api: str, asynchronous: bool, stream: bool) -> Any:
    base = BRIDGED_BASE if api == "responses" else BASE
    if not asynchronous:
        call = gate.responses if api == "responses" else gate.completion
        result = call(stream=stream, **base)
        return list(result) if stream else result

    async def go() -> Any:
        call = gate.aresponses if api == "responses" else gate.acompletion
        result = await call(stream=stream, **base)
        return [c async for c in result] if stream else result

    return asyncio.run(go())


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_litellm_errors_stay_out_of_the_quarantine_chain(api: str, asynchronous: bool) -> None:
    gate = ToolGate(MANIFEST["tools"])

    def respond(request: httpx.Request) -> httpx.Response:
        stream = Pieces([_UNPARSABLE, _AFTER])
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=stream)

    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(side_effect=respond)
        with pytest.raises(ToolCallQuarantined) as info:
            _gate_call(gate, api, asynchronous, stream=True)
    assert info.value.reason is R.MALFORMED_EVENT
    assert_clean_exception(info.value)
    assert_clean_logs(logs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_whole_response_quarantine_has_a_clean_chain(api: str, asynchronous: bool) -> None:
    gate = ToolGate(MANIFEST["tools"])
    body = json.dumps(
        {
            "id": "chatcmpl-leak",
            "object": "chat.completion",
            "created": 1,
            "model": "m",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "tool_calls": [
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "write_file", "arguments": ARGS},
                            }
                        ],
                    },
                }
            ],
        }
    ).encode()

    def respond(request: httpx.Request) -> httpx.Response:
        stream = Pieces([body], cut=len(body) - 20)
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=stream)

    with every_logger() as logs, respx.mock as router:
        router.post(URL).mock(side_effect=respond)
        with pytest.raises(ToolCallQuarantined) as info:
            _gate_call(gate, api, asynchronous, stream=False)
    assert info.value.reason is R.DISCONNECTED
    assert_clean_exception(info.value)
    assert_clean_logs(logs)


def test_whole_response_rejected_by_the_schema_keeps_no_arguments_in_frames() -> None:
    gate = ToolGate(MANIFEST["tools"])
    body = {
        "id": "chatcmpl-leak",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {
                                "name": "write_file",
                                "arguments": json.dumps({"path": C}),
                            },
                        }
                    ],
                },
            }
        ],
    }

    async def go() -> Any:
        return await gate.acompletion(**BASE)

    for run_it in (lambda: gate.completion(**BASE), lambda: asyncio.run(go())):
        with respx.mock as router:
            router.post(URL).mock(return_value=httpx.Response(200, json=body))
            with pytest.raises(ToolCallQuarantined) as info:
                run_it()
        assert info.value.reason is R.SCHEMA_INVALID
        assert_clean_exception(info.value)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_every_later_raise_is_clean(asynchronous: bool) -> None:
    """A second next(), and next() after close(): the same quarantine, raised fresh."""
    gate = ToolGate(MANIFEST["tools"])
    bad = opening(f'{{"path": "{C}", ') + END
    good = delta({"content": "hi"}) + WRITE + END

    def respond(body: bytes) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, stream=Pieces([body])
        )

    async def drive(body: bytes, close_first: bool) -> list[BaseException]:
        raised: list[BaseException] = []
        stream = await gate.acompletion(stream=True, **BASE)
        if close_first:
            await stream.__anext__()
            await stream.aclose()
        for _ in range(3):
            try:
                await stream.__anext__()
            except ToolCallQuarantined as exc:
                raised.append(exc)
            except StopAsyncIteration:
                pass
        return raised

    def drive_sync(body: bytes, close_first: bool) -> list[BaseException]:
        raised: list[BaseException] = []
        stream = gate.completion(stream=True, **BASE)
        if close_first:
            next(stream)
            stream.close()
        for _ in range(3):
            try:
                next(stream)
            except ToolCallQuarantined as exc:
                raised.append(exc)
            except StopIteration:
                pass
        return raised

    for body, close_first, reason in ((bad, False, R.INVALID_JSON), (good, True, R.CANCELLED)):
        with respx.mock as router:
            router.post(URL).mock(return_value=respond(body))
            if asynchronous:
                raised = asyncio.run(drive(body, close_first))
            else:
                raised = drive_sync(body, close_first)
        assert raised and all(exc is raised[0] for exc in raised)
        assert raised[0].reason is reason  # type: ignore[attr-defined]
        for exc in raised:
            assert_clean_exception(exc)
