"""A request and its body into the attempt (core/decision/body.py, core/wires/chat.py).

No network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litellm_toolgate.core import (
    Attempt,
    Limits,
    QuarantineReason,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.decision.body import BodyReader
from litellm_toolgate.core.decision.state import StreamState
from litellm_toolgate.core.wires import chat as chat_wire

R = QuarantineReason
CHAT = Path(__file__).resolve().parent.parent / "fixtures" / "chat"
TOOLS = json.loads((CHAT / "manifest.json").read_text())["tools"]
STREAM = (CHAT / "multiply_basic.sse").read_bytes()
WHOLE = json.dumps(
    {
        "id": "chatcmpl-w",
        "object": "chat.completion",
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
        ],
    }
).encode()


def reader(streamed: bool, limits: Limits | None = None) -> BodyReader:
    attempt = Attempt(ToolRegistry.from_tools(TOOLS), limits)
    media = "text/event-stream" if streamed else "application/json"
    attempt.bind_response(content_type=media, streamed=streamed)
    return BodyReader(attempt, streamed=streamed)


@pytest.mark.parametrize(("streamed", "body"), [(True, STREAM), (False, WHOLE)])
def test_a_body_read_to_its_end_reaches_the_attempt_once(streamed: bool, body: bytes) -> None:
    read = reader(streamed)
    assert read.wants_drain
    assert all(read.feed(body[i : i + 7]) for i in range(0, len(body), 7))
    read.eof()
    read.eof()  # taken once
    assert read.ended and not read.wants_drain and not read.faulted
    calls = read.attempt.conclude()
    assert [c.name for c in calls] == (["multiply"] if streamed else [])


def test_the_kept_quarantine_holds_no_frame_of_the_piece_that_faulted() -> None:
    """The quarantine a feed keeps on the attempt has no traceback taking in the feeding
    frames, whose piece of wire holds argument text (an error tracker reads every frame's
    locals of an exception it is handed, and the edge hands this one on)."""
    import leakcheck

    read = reader(True)
    opened = {
        "id": "c",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "multiply", "arguments": ""},
                        }
                    ]
                },
            }
        ],
    }
    fragment = {
        "id": "c",
        "choices": [
            {
                "index": 0,
                "delta": {
                    "tool_calls": [
                        {"index": 0, "function": {"arguments": '{"a": "' + leakcheck.CANARY}}
                    ]
                },
            }
        ],
    }
    piece = b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in (opened, fragment))
    assert not read.feed(piece + b"data: {not json\n\n")
    fault = read.attempt.quarantined
    assert fault is not None and fault.reason is R.MALFORMED_EVENT
    assert leakcheck.find_in_frames(fault, leakcheck.CANARY) == []
    assert fault.__traceback__ is None


def test_a_fault_stops_the_feeding_and_is_kept_not_raised() -> None:
    read = reader(True)
    assert not read.feed(b"data: {not json\n\n")
    assert read.faulted and not read.wants_drain
    assert read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.MALFORMED_EVENT
    assert not read.feed(STREAM)
    read.eof()
    assert read.ended and read.attempt.state is StreamState.QUARANTINED


def test_a_stream_that_ends_without_its_terminal_is_quarantined_at_eof() -> None:
    read = reader(True)
    assert read.feed(STREAM[: len(STREAM) // 2])
    read.eof()
    assert read.faulted


def test_a_whole_body_past_the_limit_is_refused_and_dropped() -> None:
    read = reader(False, Limits(max_body_bytes=len(WHOLE) - 1))
    assert read.feed(WHOLE[:10])
    assert not read.feed(WHOLE[10:])
    assert read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.BODY_TOO_LARGE
    read.eof()
    assert read.attempt.quarantined.reason is R.BODY_TOO_LARGE


def test_a_body_that_is_no_utf8_is_refused_at_its_end() -> None:
    read = reader(False)
    assert read.feed(b"\xff" + WHOLE)
    read.eof()
    assert read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.INVALID_UTF8


@pytest.mark.parametrize("reason", [R.STALLED, R.DISCONNECTED])
def test_an_interrupted_body_ends_reading(reason: QuarantineReason) -> None:
    read = reader(False)
    assert read.feed(WHOLE[:10])
    read.interrupt(reason)
    assert read.ended and not read.wants_drain
    assert read.attempt.quarantined is not None and read.attempt.quarantined.reason is reason
    read.eof()  # nothing more: the body already ended
    assert read.attempt.quarantined.reason is reason


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        (
            b'{"model": "m", "n": 2, "tool_choice": "required", "tools": []}',
            {"n": 2, "tool_choice": "required"},
        ),
        (b'{"model": "m"}', {}),
        (b"", {}),
        (b"[1]", {}),
        (b"{not json", {}),
    ],
)
def test_a_chat_request_gives_the_attempt_the_fields_it_reads(
    body: bytes, fields: dict[str, object]
) -> None:
    assert chat_wire.request_fields(body) == fields
    attempt = Attempt(ToolRegistry.from_tools(TOOLS))
    refused = False  # n = 2 is read choice by choice (an n that is no count is refused)
    try:
        attempt.bind_request("/v1/chat/completions", chat_wire.request_fields(body))
    except ToolCallQuarantined as fault:
        assert refused and fault.reason is R.UNSUPPORTED_REQUEST
    else:
        assert not refused


def test_a_request_for_several_choices_is_refused_unsent_where_they_are_not_kept_apart() -> None:
    read = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
    read.bind_request("/v1/chat/completions", {"n": 1}, choices_gated=False)
    assert not read.refused
    gated = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
    gated.bind_request("/v1/chat/completions", {"n": 2})
    assert not gated.refused and gated.attempt.choices == 2
    refused = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
    # Kept on the attempt, not raised.
    refused.bind_request("/v1/chat/completions", {"n": 2}, choices_gated=False)
    assert refused.refused and refused.faulted
    assert not refused.bind_response(500, "text/event-stream", "/v1/chat/completions")


@pytest.mark.parametrize("n", [0, -1, True, False, 1.0, "2", 129, [2]])
def test_an_n_that_counts_no_choices_is_refused_unsent(n: object) -> None:
    read = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
    read.bind_request("/v1/chat/completions", {"n": n})
    assert read.refused


@pytest.mark.parametrize(
    ("streamed", "read", "expected"),
    [
        (True, None, 5.0),
        (True, 60.0, 5.0),
        (True, 2.0, 2.0),
        (False, None, None),
        (False, 60.0, 60.0),
    ],
)
def test_only_a_stream_has_its_read_timeout_lowered_to_the_idle_limit(
    streamed: bool, read: float | None, expected: float | None
) -> None:
    body = BodyReader(
        Attempt(ToolRegistry.from_tools(TOOLS), Limits(idle_timeout=5.0)), streamed=streamed
    )
    assert body.read_timeout(read) == expected


def test_only_a_successful_response_is_bound() -> None:
    for status in (199, 300, 404, 500):
        read = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
        assert not read.bind_response(status, "text/event-stream", "/v1/chat/completions")
        assert not read.attempt.observed
    read = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=True)
    assert read.bind_response(200, "text/event-stream", "/v1/chat/completions")
    assert read.attempt.observed and not read.faulted
    # A second response is a retry spliced onto the attempt: kept on it, not raised.
    assert read.bind_response(200, "text/event-stream", "/v1/chat/completions")
    assert read.faulted and read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.SPLICED_RESPONSE


def test_only_a_whole_body_read_to_its_end_has_arrived() -> None:
    streamed = reader(True)
    assert streamed.feed(STREAM)
    streamed.eof()
    assert not streamed.whole_body_arrived  # a stream's chunks may already be out
    whole = reader(False)
    assert whole.feed(WHOLE) and not whole.whole_body_arrived
    whole.eof()
    assert whole.whole_body_arrived
    unbound = BodyReader(Attempt(ToolRegistry.from_tools(TOOLS)), streamed=False)
    unbound.eof()
    assert not unbound.whole_body_arrived  # no response was read at all


def test_a_body_the_client_failed_on_is_a_carrier_mismatch_when_the_wire_passes() -> None:
    read = reader(False)
    assert read.feed(WHOLE)
    read.eof()
    read.refuse_unparsed()
    assert read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.CARRIER_MISMATCH


def test_the_wires_own_fault_wins_over_the_clients_failure() -> None:
    cut = reader(False)
    assert cut.feed(WHOLE[:-5])
    cut.eof()  # the body is no JSON: the attempt concludes for the wire's fault
    cut.refuse_unparsed()
    assert cut.attempt.quarantined is not None
    assert cut.attempt.quarantined.reason is not R.CARRIER_MISMATCH
    faulted = reader(True)
    assert not faulted.feed(b"data: {not json\n\n")
    faulted.refuse_unparsed()
    assert faulted.attempt.quarantined is not None
    assert faulted.attempt.quarantined.reason is R.MALFORMED_EVENT


def test_a_whole_body_whose_call_fails_its_checks_keeps_that_reason() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "multiply", "arguments": "{"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    body = {
        "id": "c",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
    }
    read = reader(False)
    assert read.feed(json.dumps(body).encode())
    read.eof()
    assert not read.faulted  # nothing concluded yet: the calls are checked at conclude
    read.refuse_unparsed()
    assert read.attempt.quarantined is not None
    assert read.attempt.quarantined.reason is R.INVALID_JSON


def test_an_attempts_summary_holds_its_outcome_and_sanitized_records() -> None:
    from litellm_toolgate.core.rules.policy import PolicyDecision

    read = reader(True)
    assert read.feed(STREAM)
    read.eof()
    attempt = read.attempt
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    attempt.release()
    summary = attempt.summary()
    assert summary["attempt_id"] == attempt.attempt_id
    assert (summary["outcome"], summary["reason"]) == ("released", None)
    assert [r["execution_state"] for r in summary["records"]] == ["released"]
    json.dumps(summary)  # JSON-ready as it is

    cut = reader(True)
    assert not cut.feed(b"data: {not json\n\n")
    summary = cut.attempt.summary()
    assert (summary["outcome"], summary["reason"]) == ("quarantined", "malformed_event")
