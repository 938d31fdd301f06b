"""Nothing the model wrote leaks out of the gate: not in exceptions, records or logs.

Several fixtures carry the canary string inside tool-call arguments (and one in a path the
schema refuses). Every quarantine is checked for it in its message, repr, args and its whole
exception chain (which the core must leave empty), and every decision record and every log
line that ``emit_records`` writes is checked too.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from conftest import CANARY, CASES, MANIFEST, body_of
from leakcheck import assert_clean_exception

from litellm_toolgate.core import (
    Attempt,
    Limits,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.edge.logs import emit_records

TOOLS = [
    *MANIFEST["tools"],
    {
        "type": "function",
        "function": {
            "name": "set_env",
            "parameters": {
                "type": "object",
                "properties": {
                    "vars": {"type": "object", "additionalProperties": {"type": "string"}}
                },
            },
        },
    },
]
REGISTRY = ToolRegistry.from_tools(TOOLS)
TRANSPORT = {
    "disconnect_after": QuarantineReason.DISCONNECTED,
    "stall_after": QuarantineReason.STALLED,
}
QUARANTINES = sorted(name for name, case in CASES.items() if case["expect"] == "quarantine")
WITH_CANARY = sorted(name for name in CASES if CANARY.encode() in body_of(CASES[name]))


def replay_case(
    case: dict[str, Any], hmac_key: bytes | None = None, *, bytewise: bool = False
) -> Attempt:
    """Run one manifest case to its end (release or quarantine); return the attempt."""
    body = body_of(case)
    interruption = None
    for key, reason in TRANSPORT.items():
        if key in (case.get("transport") or {}):
            body, interruption = body[: case["transport"][key]], reason
    attempt = Attempt(REGISTRY, hmac_key=hmac_key)
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True)
        for piece in [body[i : i + 1] for i in range(len(body))] if bytewise else [body]:
            attempt.receive_bytes(piece)
        if interruption is not None:
            attempt.interrupt(interruption)
        else:
            attempt.receive_eof()
            for call in attempt.conclude():
                attempt.decide(call.index, PolicyDecision.approve())
            attempt.release()
    except ToolCallQuarantined:
        pass
    return attempt


def assert_clean_logs(attempt: Attempt, caplog: pytest.LogCaptureFixture) -> None:
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        emit_records(attempt)
    assert caplog.records, "emit_records logs at least one line per attempt"
    for log in caplog.records:
        assert log.name == "litellm_toolgate"
        assert CANARY not in log.getMessage()
        assert CANARY not in repr(log.args)
        assert CANARY not in json.dumps(log.__dict__.get("toolgate"), default=str)
        assert CANARY not in repr(log.__dict__)
    assert CANARY not in caplog.text


def test_the_canary_is_really_in_the_fixtures() -> None:
    """Without this the absence checks below would prove nothing."""
    assert len(WITH_CANARY) >= 10
    assert {n for n in WITH_CANARY if CASES[n]["expect"] == "quarantine"}


@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
@pytest.mark.parametrize("name", QUARANTINES)
def test_quarantine_leaks_nothing(
    name: str, bytewise: bool, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = replay_case(CASES[name], hmac_key=b"key", bytewise=bytewise)
    fault = attempt.quarantined
    assert fault is not None and fault.reason.value == CASES[name]["reason"]
    assert_clean_exception(fault)
    for record in attempt.records():
        assert CANARY not in record.model_dump_json()
    assert_clean_logs(attempt, caplog)
    levels = {log.levelno for log in caplog.records}
    assert levels == {logging.WARNING}


@pytest.mark.parametrize("name", sorted(set(CASES) - set(QUARANTINES)))
def test_released_records_and_logs_leak_nothing(
    name: str, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = replay_case(CASES[name], hmac_key=b"key")
    assert attempt.quarantined is None
    for record in attempt.records():
        assert CANARY not in record.model_dump_json()
        assert record.content_hmac is not None
    assert_clean_logs(attempt, caplog)
    assert {log.levelno for log in caplog.records} == {logging.INFO}


# Quarantines raised from inside the core's own error handling (decoder, JSON, schema), with
# the canary placed where each of those errors would quote it.


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def call(name: str, arguments: str) -> bytes:
    fragment = {"index": 0, "id": "call-1", "function": {"name": name, "arguments": arguments}}
    return sse({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]})


END = sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
END += b"data: [DONE]\n\n"
C = CANARY

R = QuarantineReason
NUMBERS = f'{{"a": 1e999, "b": "{C}"}}'
CRAFTED: dict[str, tuple[bytes, QuarantineReason]] = {
    "json error quoting the text": (call("write_file", f'{{"path": "{C}", '), R.INVALID_JSON),
    "duplicate key": (call("multiply", f'{{"{C}": 1, "{C}": 2}}'), R.DUPLICATE_KEY),
    "number out of range": (call("multiply", NUMBERS), R.NUMBER_OUT_OF_RANGE),
    "lone surrogate": (call("multiply", f'{{"a": "\\ud800{C}"}}'), R.INVALID_STRING),
    "schema error quoting the value": (
        call("multiply", f'{{"a": "{C}", "b": 1}}'),
        R.SCHEMA_INVALID,
    ),
    "schema error at a made-up key": (
        call("set_env", json.dumps({"vars": {C: 1}})),
        R.SCHEMA_INVALID,
    ),
    "extra property": (call("multiply", json.dumps({"a": 1, "b": 2, C: 3})), R.SCHEMA_INVALID),
    "unknown tool named by the model": (call(C, "{}"), R.UNKNOWN_TOOL),
    "not json on the wire": (f"data: {{{C}\n\n".encode(), R.MALFORMED_EVENT),
    "invalid utf-8": (call("write_file", C) + b"data: \xff" + C.encode() + b"\n\n", R.INVALID_UTF8),
    "unknown choice": (
        sse({"choices": [{"index": 1, "delta": {"content": C}}]}),
        R.UNEXPECTED_CHOICE,
    ),
    "refusal text": (sse({"choices": [{"index": 0, "delta": {"refusal": C}}]}), R.REFUSAL),
    "error event message": (sse({"error": {"message": C, "type": "server_error"}}), R.ERROR_EVENT),
}


@pytest.mark.parametrize("name", list(CRAFTED))
def test_core_errors_leave_no_context(name: str, caplog: pytest.LogCaptureFixture) -> None:
    body, reason = CRAFTED[name]
    attempt = Attempt(REGISTRY, hmac_key=b"key")
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.receive_bytes(body + END)
        attempt.receive_eof()
        attempt.conclude()
    assert info.value.reason is reason
    assert_clean_exception(info.value)
    assert_clean_logs(attempt, caplog)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"choices": [{"message": {"content": "\xff' + C.encode() + b'"}}]}', "invalid_utf8"),
        (b'{"choices": [' + C.encode() + b"]}", "malformed_event"),
        (b"[" * 50_000 + C.encode(), "malformed_event"),
    ],
    ids=["utf8", "json", "deep"],
)
def test_non_streamed_errors_leave_no_context(
    data: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="application/json", streamed=False)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.receive_body(data)
    assert info.value.reason.value == reason
    assert_clean_exception(info.value)
    assert_clean_logs(attempt, caplog)


def test_limit_quarantines_leave_no_context(caplog: pytest.LogCaptureFixture) -> None:
    attempt = Attempt(REGISTRY, Limits(max_event_bytes=64))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.receive_bytes(call("write_file", C * 10))
    assert info.value.reason is QuarantineReason.EVENT_TOO_LARGE
    assert_clean_exception(info.value)
    assert_clean_logs(attempt, caplog)


def test_policy_reason_is_the_policy_s_own_words(caplog: pytest.LogCaptureFixture) -> None:
    """The gate records the policy's reason as given; a policy that quotes nothing leaks
    nothing, even when the arguments carry the canary."""
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    attempt.receive_bytes(call("write_file", json.dumps({"path": C, "content": C})) + END)
    attempt.receive_eof()
    (tool_call,) = attempt.conclude()
    assert C in repr(tool_call.arguments)  # the policy does see the value
    with pytest.raises(ToolCallQuarantined) as info:
        attempt.decide(tool_call.index, PolicyDecision.deny("path outside the workspace"))
    assert_clean_exception(info.value)
    assert C not in repr(tool_call)
    assert_clean_logs(attempt, caplog)
