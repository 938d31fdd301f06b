"""The transition tables (core/decision/state.py) and the attempt machine built on them.

The machine is core/decision/attempt.py.

Streams are written by hand here, message by message, so that each test shows exactly which
wire event moves the attempt where. The fixture replays live in test_core_fixtures.py.
"""

from __future__ import annotations

import dataclasses
import hmac
import itertools
import json
import pickle
import tracemalloc
from collections.abc import Callable, Iterator
from hashlib import sha256
from pathlib import Path
from typing import Any

import pytest

from litellm_toolgate.core import (
    ArgumentsRejected,
    Attempt,
    Carrier,
    CarrierCall,
    CarrierMismatch,
    DuplicateCallId,
    GateConfigError,
    Interrupted,
    LimitExceeded,
    Limits,
    LoopLimitExceeded,
    Party,
    PolicyDecision,
    PolicyDenied,
    QuarantineReason,
    SchemaRejected,
    StreamFault,
    ToolCallQuarantined,
    ToolGateError,
    ToolRegistry,
    WireUnread,
)
from litellm_toolgate.core.decision.events import (
    ArgumentDelta,
    CallStarted,
    DoneMarker,
    Finish,
    Metadata,
    ResponseStarted,
    StreamError,
    TextDelta,
    Unknown,
)
from litellm_toolgate.core.decision.limits import KIB, MIB
from litellm_toolgate.core.decision.state import (
    CALL_TABLES,
    STREAM_TABLE,
    STREAM_TABLES,
    CallInput,
    CallState,
    StreamInput,
    StreamState,
    TransitionError,
    Wire,
    next_call_state,
    next_stream_state,
)
from litellm_toolgate.core.errors import quarantine
from litellm_toolgate.core.framing.sse import SSEDecoder
from litellm_toolgate.core.rules.policy import ToolCall, as_decision
from litellm_toolgate.core.wires.chat import ChatNormalizer

R = QuarantineReason
S = StreamState
SI = StreamInput
CS = CallState
CI = CallInput

MULTIPLY = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
WRITE_FILE = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
    "additionalProperties": False,
}
ENV = {
    "type": "object",
    "properties": {"vars": {"type": "object", "additionalProperties": {"type": "string"}}},
}
REGISTRY = ToolRegistry.from_tools(
    [
        {"type": "function", "function": {"name": "multiply", "parameters": MULTIPLY}},
        {"type": "function", "function": {"name": "write_file", "parameters": WRITE_FILE}},
        {"type": "function", "function": {"name": "set_env", "parameters": ENV}},
        {"type": "function", "function": {"name": "anything"}},
    ]
)
CANARY = "CANARY-7f3a9c"
SSE = "text/event-stream"
RESPONSES_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"

# ---- building streams ---------------------------------------------------------------------


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **top: Any) -> bytes:
    return sse({**top, "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]})


def opens(index: int = 0, call_id: str = "call-a", name: str = "multiply", args: str = "") -> bytes:
    fragment = {
        "index": index,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": args},
    }
    return chunk({"tool_calls": [fragment]})


def more(index: int, fragment: str) -> bytes:
    return chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})


FINISH_CALLS = chunk(finish="tool_calls")
FINISH_STOP = chunk(finish="stop")
USAGE = sse({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
DONE = b"data: [DONE]\n\n"


def stream(*calls: tuple[int, str, str, str], text: str = "", finish: str | None = None) -> bytes:
    """A complete, well-formed stream: (index, id, name, arguments) per call."""
    out = [chunk({"role": "assistant", "content": ""}, id="resp-1")]
    if text:
        out.append(chunk({"content": text}))
    for index, call_id, name, arguments in calls:
        half = len(arguments) // 2
        out += [opens(index, call_id, name, arguments[:half]), more(index, arguments[half:])]
    out += [chunk(finish=finish or ("tool_calls" if calls else "stop")), USAGE, DONE]
    return b"".join(out)


GOOD_ARGS = '{"a": 7, "b": 8}'
ONE_CALL = stream((0, "call-a", "multiply", GOOD_ARGS))
TWO_CALLS = stream((0, "call-a", "multiply", GOOD_ARGS), (1, "call-b", "multiply", '{"a":1,"b":2}'))


def bound(limits: Limits | None = None, **kwargs: Any) -> Attempt:
    attempt = Attempt(REGISTRY, limits, attempt_id=kwargs.pop("attempt_id", "att-t"), **kwargs)
    attempt.bind_response(content_type=SSE, streamed=True)
    return attempt


def finish_and_release(attempt: Attempt, carrier: Carrier | None = None) -> list[Any]:
    attempt.receive_eof()
    for call in attempt.conclude(carrier):
        attempt.decide(call.index, PolicyDecision.approve())
    return attempt.release()


def run(body: bytes, limits: Limits | None = None, **kwargs: Any) -> Attempt:
    attempt = bound(limits, **kwargs)
    attempt.receive_bytes(body)
    finish_and_release(attempt)
    return attempt


def fault_of(action: Callable[[], object]) -> ToolCallQuarantined:
    with pytest.raises(ToolCallQuarantined) as info:
        action()
    return info.value


def quarantined(body: bytes, limits: Limits | None = None, **kwargs: Any) -> ToolCallQuarantined:
    attempt = bound(limits, **kwargs)
    fault = fault_of(lambda: (attempt.receive_bytes(body), finish_and_release(attempt)))
    assert attempt.quarantined is fault
    assert attempt.state is S.QUARANTINED
    return fault


# ---- the tables themselves ----------------------------------------------------------------


WIRES = list(Wire)


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.value)
@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, SI)))
def test_stream_table_is_total_or_a_named_transition_error(state: S, event: SI, wire: Wire) -> None:
    table = STREAM_TABLES[wire]
    if (state, event) in table:
        assert next_stream_state(state, event, wire) is table[(state, event)]
        return
    with pytest.raises(TransitionError) as info:
        next_stream_state(state, event, wire)
    assert str(info.value) == f"stream in state {state.value} cannot take {event.value}"
    assert info.value.__context__ is None


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.value)
@pytest.mark.parametrize(("state", "event"), list(itertools.product(CS, CI)))
def test_call_table_is_total_or_a_named_transition_error(state: CS, event: CI, wire: Wire) -> None:
    table = CALL_TABLES[wire]
    if (state, event) in table:
        assert next_call_state(state, event, wire) is table[(state, event)]
        return
    with pytest.raises(TransitionError) as info:
        next_call_state(state, event, wire)
    assert str(info.value) == f"call in state {state.value} cannot take {event.value}"
    assert info.value.__context__ is None


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.value)
def test_terminal_states_accept_nothing(wire: Wire) -> None:
    for state in (S.QUARANTINED, S.RELEASED):
        assert not [key for key in STREAM_TABLES[wire] if key[0] is state]
        for event in SI:
            with pytest.raises(TransitionError):
                next_stream_state(state, event, wire)
    for call_state in (CS.QUARANTINED, CS.RELEASED):
        assert not [key for key in CALL_TABLES[wire] if key[0] is call_state]
        for call_event in CI:
            with pytest.raises(TransitionError):
                next_call_state(call_state, call_event, wire)


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.value)
def test_only_policy_approved_calls_reach_released(wire: Wire) -> None:
    calls, streams = CALL_TABLES[wire], STREAM_TABLES[wire]
    into_released = [key for key, to in calls.items() if to is CS.RELEASED]
    assert into_released == [(CS.POLICY_APPROVED, CI.RELEASE)]
    for state in CS:
        if state is CS.POLICY_APPROVED:
            assert next_call_state(state, CI.RELEASE, wire) is CS.RELEASED
        else:
            with pytest.raises(TransitionError):
                next_call_state(state, CI.RELEASE, wire)
    # Likewise only a CLOSED stream can be released, and nothing but RELEASE gets it there.
    assert [key for key, to in streams.items() if to is S.RELEASED] == [(S.CLOSED, SI.RELEASE)]
    assert all(to is not S.QUARANTINED for to in streams.values())


STAGES = {
    Wire.CHAT: (CI.ARGUMENTS, CI.ARGUMENTS, CI.TERMINAL),
    Wire.RESPONSES: (CI.ARGUMENTS, CI.ARGUMENTS, CI.ARGUMENTS_DONE, CI.ITEM_DONE, CI.TERMINAL),
    Wire.ANTHROPIC: (CI.ARGUMENTS, CI.ARGUMENTS, CI.ITEM_DONE, CI.TERMINAL),
    Wire.OLLAMA: (CI.ARGUMENTS, CI.TERMINAL),  # a call arrives whole: its one fragment
    Wire.GEMINI: (CI.ARGUMENTS, CI.TERMINAL),  # a functionCall part arrives whole too
    Wire.BEDROCK: (CI.ARGUMENTS, CI.ARGUMENTS, CI.ITEM_DONE, CI.TERMINAL),  # contentBlockStop
    Wire.COHERE: (CI.ARGUMENTS, CI.ARGUMENTS, CI.ITEM_DONE, CI.TERMINAL),  # tool-call-end
    Wire.WATSONX: (CI.ARGUMENTS, CI.ARGUMENTS, CI.TERMINAL),  # as chat
}


@pytest.mark.parametrize("wire", WIRES, ids=lambda w: w.value)
def test_the_call_pipeline_has_no_shortcut(wire: Wire) -> None:
    state = CS.ITEM_OPEN
    for event in (*STAGES[wire], CI.PARSED, CI.SCHEMA_VALID, CI.APPROVED):
        outcome = next_call_state(state, event, wire)
        assert isinstance(outcome, CS)
        state = outcome
    assert state is CS.POLICY_APPROVED
    assert next_call_state(state, CI.RELEASE, wire) is CS.RELEASED
    # Every entry moves forward by exactly one of the wire's stages (or stays while
    # arguments arrive); an entry that is a reason moves nowhere.
    order = [s for s in CS if any(s in key or s == to for key, to in CALL_TABLES[wire].items())]
    for (src, _), dst in CALL_TABLES[wire].items():
        if isinstance(dst, CS):
            assert order.index(dst) - order.index(src) in (0, 1)


def test_responses_stages_cannot_be_skipped_or_repeated() -> None:
    """A Responses call that skips a stage, or sees one again, is a named fault."""
    W = Wire.RESPONSES
    assert next_call_state(CS.ITEM_OPEN, CI.ITEM_DONE, W) is R.INCOMPLETE_ITEM
    assert next_call_state(CS.ITEM_OPEN, CI.TERMINAL, W) is R.INCOMPLETE_ITEM
    assert next_call_state(CS.ARGUMENTS_DONE, CI.TERMINAL, W) is R.INCOMPLETE_ITEM
    assert next_call_state(CS.ARGUMENTS_DONE, CI.ARGUMENTS, W) is R.EVENT_AFTER_TERMINAL
    assert next_call_state(CS.ITEM_DONE, CI.ITEM_DONE, W) is R.EVENT_AFTER_TERMINAL
    # The chat wire has no such stages: its calls go straight to the terminal.
    assert next_call_state(CS.ITEM_OPEN, CI.TERMINAL) is CS.ITEM_TERMINAL
    with pytest.raises(TransitionError):
        next_call_state(CS.ITEM_OPEN, CI.ARGUMENTS_DONE)


def test_transition_error_is_a_gate_error_but_not_a_quarantine() -> None:
    assert issubclass(TransitionError, ToolGateError)
    assert not issubclass(TransitionError, ToolCallQuarantined)


# ---- every stream table entry, reached through an attempt ---------------------------------

# One message per input; each produces that input as its first event. The prefixes open
# call 0 first, so that ARGUMENTS has a call to go to and CALL opens a second one.
MESSAGE: dict[SI, bytes] = {
    SI.RESPONSE: sse({"id": "resp-late", "choices": []}),
    SI.TEXT: chunk({"content": "hello"}),
    SI.CALL: opens(1, "call-b"),
    SI.ARGUMENTS: more(0, '{"a"'),
    SI.FINISH: chunk(finish="tool_calls"),
    SI.DONE: DONE,
    SI.METADATA: USAGE,
    SI.UNKNOWN: b"event: ping\ndata: {}\n\n",
    SI.ERROR: b"event: error\ndata: {}\n\n",
}
PREFIX: dict[S, bytes] = {
    S.RECEIVING: opens(0, "call-a"),
    S.FINISHED: opens(0, "call-a") + FINISH_CALLS,
    S.DONE: opens(0, "call-a") + FINISH_CALLS + DONE,
}
EVENT_INPUT: dict[type, SI] = {
    ResponseStarted: SI.RESPONSE,
    TextDelta: SI.TEXT,
    CallStarted: SI.CALL,
    ArgumentDelta: SI.ARGUMENTS,
    Finish: SI.FINISH,
    DoneMarker: SI.DONE,
    Metadata: SI.METADATA,
    StreamError: SI.ERROR,
    Unknown: SI.UNKNOWN,
}


@pytest.mark.parametrize("event", list(MESSAGE))
def test_each_message_yields_its_input_first(event: SI) -> None:
    decoder, normalizer = SSEDecoder(max_event_bytes=MIB), ChatNormalizer()
    for message in decoder.feed(opens(0, "call-a")):
        normalizer.message(message)
    (message,) = decoder.feed(MESSAGE[event])
    produced = normalizer.message(message)
    assert EVENT_INPUT[type(produced[0])] is event


def _entry_id(key: tuple[S, SI]) -> str:
    return f"{key[0].value}+{key[1].value}"


@pytest.mark.parametrize("key", list(STREAM_TABLE), ids=_entry_id)
def test_every_stream_table_entry_through_an_attempt(key: tuple[S, SI]) -> None:
    state, event = key
    expected = STREAM_TABLE[key]
    if state is S.CLOSED:
        attempt = bound()
        attempt.receive_bytes(ONE_CALL)
        attempt.receive_eof()
        assert attempt.state is S.CLOSED
        calls = attempt.conclude()
        if event is SI.CONCLUDE:
            assert attempt.state is expected is S.CLOSED
            return
        for call in calls:
            attempt.decide(call.index, PolicyDecision.approve())
        assert len(attempt.release()) == 1
        assert attempt.state is expected is S.RELEASED
        return
    attempt = bound()
    attempt.receive_bytes(PREFIX[state])
    assert attempt.state is state

    def act() -> None:
        if event is SI.EOF:
            attempt.receive_eof()
        elif event is SI.CONCLUDE:
            attempt.conclude()
        else:
            attempt.receive_bytes(MESSAGE[event])

    if isinstance(expected, QuarantineReason):
        fault = fault_of(act)
        assert fault.reason is expected
        assert attempt.state is S.QUARANTINED
    else:
        act()
        assert attempt.state is expected


def test_every_stream_state_but_released_and_quarantined_is_reached_before_release() -> None:
    attempt = bound()
    seen = [attempt.state]
    for piece in (opens(), more(0, GOOD_ARGS), FINISH_CALLS, USAGE, DONE):
        attempt.receive_bytes(piece)
        seen.append(attempt.state)
    attempt.receive_eof()
    seen.append(attempt.state)
    assert list(dict.fromkeys(seen)) == [S.RECEIVING, S.FINISHED, S.DONE, S.CLOSED]


def test_call_states_along_the_way() -> None:
    """White-box: the call's own state at each stage of a good attempt."""
    attempt = bound()
    attempt.receive_bytes(opens(0, "call-a", "multiply", '{"a": 7,'))
    assert attempt._calls[0].state is CS.ITEM_OPEN
    attempt.receive_bytes(more(0, ' "b": 8}') + FINISH_CALLS + DONE)
    assert attempt._calls[0].state is CS.ITEM_OPEN
    attempt.receive_eof()
    (call,) = attempt.conclude()
    assert attempt._calls[0].state is CS.SCHEMA_VALID
    attempt.decide(call.index, PolicyDecision.approve())
    assert attempt._calls[0].state is CS.POLICY_APPROVED
    attempt.release()
    assert attempt._calls[0].state is CS.RELEASED


def test_misuse_of_the_attempt_surfaces_as_transition_errors() -> None:
    """Calls out of order are caller bugs: TransitionError, naming the state and the input."""
    attempt = bound()
    attempt.receive_bytes(ONE_CALL)
    with pytest.raises(TransitionError, match="call in state item_open cannot take approved"):
        attempt.decide(0, PolicyDecision.approve())
    attempt.receive_eof()
    with pytest.raises(TransitionError, match="stream in state closed cannot take eof"):
        attempt.receive_eof()
    (call,) = attempt.conclude()
    with pytest.raises(TransitionError, match="call in state schema_valid cannot take release"):
        attempt.release()
    attempt.decide(call.index, PolicyDecision.approve())
    with pytest.raises(TransitionError, match="policy_approved cannot take approved"):
        attempt.decide(call.index, PolicyDecision.approve())
    assert attempt.quarantined is None
    assert [c.call_id for c in attempt.release()] == ["call-a"]
    # A text-only stream still open cannot be released either.
    text_only = bound()
    text_only.receive_bytes(chunk({"content": "hi"}))
    with pytest.raises(TransitionError, match="stream in state receiving cannot take release"):
        text_only.release()


# ---- binding the response -----------------------------------------------------------------


def test_a_second_response_is_a_spliced_retry() -> None:
    attempt = bound()
    attempt.receive_bytes(opens())
    fault = fault_of(lambda: attempt.bind_response(content_type=SSE, streamed=True))
    assert fault.reason is R.SPLICED_RESPONSE
    assert isinstance(fault, StreamFault)
    assert [r.error_class for r in fault.records] == ["spliced_response"]


@pytest.mark.parametrize(
    ("content_type", "streamed", "ok"),
    [
        ("text/event-stream", True, True),
        ("Text/Event-Stream; charset=utf-8", True, True),
        ("application/json", False, True),
        (" application/json ; charset=utf-8", False, True),
        ("application/json", True, False),
        ("text/event-stream", False, False),
        ("text/plain", True, False),
        ("", True, False),
        ("application/x-ndjson", False, False),
    ],
)
def test_media_type_must_match_the_mode(content_type: str, streamed: bool, ok: bool) -> None:
    attempt = Attempt(REGISTRY)
    if ok:
        attempt.bind_response(content_type=content_type, streamed=streamed)
        assert attempt.observed and attempt.quarantined is None
    else:
        fault = fault_of(
            lambda: attempt.bind_response(content_type=content_type, streamed=streamed)
        )
        assert fault.reason is R.UNSUPPORTED_WIRE
        assert attempt.observed


def test_conclude_without_a_bound_response_is_wire_not_observed() -> None:
    attempt = Attempt(REGISTRY)
    assert not attempt.observed
    fault = fault_of(attempt.conclude)
    assert fault.reason is R.WIRE_NOT_OBSERVED
    assert isinstance(fault, WireUnread)
    assert fault.party is Party.LOCAL


def test_introspection_of_a_good_attempt() -> None:
    attempt = bound(route="gpt-test")
    assert attempt.response_id is None and attempt.finish_reason is None
    events = attempt.receive_bytes(TWO_CALLS)
    assert attempt.bytes_seen == len(TWO_CALLS)
    assert attempt.open_calls == 2
    assert attempt.response_id == "resp-1"
    assert attempt.finish_reason == "tool_calls"
    assert attempt.events == TWO_CALLS.count(b"data: ")
    assert attempt.argument_bytes == len(GOOD_ARGS) + len('{"a":1,"b":2}')
    assert [type(e) for e in events[:2]] == [ResponseStarted, Metadata]
    released = finish_and_release(attempt)
    assert [(c.index, c.call_id, c.name, c.arguments) for c in released] == [
        (0, "call-a", "multiply", GOOD_ARGS),
        (1, "call-b", "multiply", '{"a":1,"b":2}'),
    ]
    assert released[0].value == {"a": 7, "b": 8}
    assert "7" not in repr(released[0])
    assert attempt.run_id == "att-t"
    assert {r.model_route for r in attempt.records()} == {"gpt-test"}


# The end of the body is an input (receive_eof), never assumed by conclude(). Each row: the
# wire, the body fed, whether its end was fed, and the outcome of conclude(). Formerly
# conclude() made up a clean end itself, so a body the gate never saw end was released.
_RESPONSES_GOOD = (RESPONSES_FIXTURES / "multiply_basic.sse").read_bytes()
END_OF_BODY_CASES = [
    ("chat", ONE_CALL, True, None),
    ("chat", ONE_CALL, False, R.DISCONNECTED),
    ("chat", opens() + FINISH_CALLS, False, R.DISCONNECTED),
    ("chat", opens() + FINISH_CALLS, True, R.MISSING_DONE),
    ("chat", opens(), False, R.DISCONNECTED),
    ("chat", ONE_CALL + b"\xe2\x82", False, R.DISCONNECTED),
    ("chat", ONE_CALL + b"\xe2\x82", True, R.INVALID_UTF8),
    ("responses", _RESPONSES_GOOD, True, None),
    ("responses", _RESPONSES_GOOD, False, R.DISCONNECTED),
]


@pytest.mark.parametrize(("wire", "body", "eof", "outcome"), END_OF_BODY_CASES)
def test_conclude_takes_the_end_of_the_body_as_an_input(
    wire: str, body: bytes, eof: bool, outcome: QuarantineReason | None
) -> None:
    attempt = Attempt(REGISTRY, attempt_id="att-t")
    path = "/v1/responses" if wire == "responses" else "/v1/chat/completions"
    attempt.bind_response(content_type=SSE, streamed=True, path=path)
    attempt.receive_bytes(body)

    def decide() -> list[Any]:
        if eof:
            attempt.receive_eof()
        return attempt.conclude()

    if outcome is None:
        for call in decide():
            attempt.decide(call.index, PolicyDecision.approve())
        assert len(attempt.release()) == 1
    else:
        assert fault_of(decide).reason is outcome
        assert attempt.state is S.QUARANTINED


def test_truncated_utf8_at_eof_is_invalid_utf8() -> None:
    fault = quarantined(ONE_CALL + b"\xe2\x82")
    assert fault.reason is R.INVALID_UTF8


def test_an_undispatched_message_after_done_is_discarded() -> None:
    """Per SSE, a message without its blank line is dropped at the end of the body."""
    attempt = run(ONE_CALL + b'data: {"choices": [{"index": 0, "delta": {"content": "x"}}]}\n')
    assert attempt.state is S.RELEASED


# ---- what the chat normalizer refuses, through an attempt ---------------------------------

CHOICE = {"index": 0, "delta": {}, "finish_reason": None}


def choice(**fields: Any) -> bytes:
    return sse({"choices": [{**CHOICE, **fields}]})


def fragment(**fields: Any) -> bytes:
    return choice(delta={"tool_calls": [fields]})


FIRST = {"index": 0, "id": "call-a", "function": {"name": "multiply"}}

WIRE_FAULTS: list[tuple[str, bytes, QuarantineReason, int | None]] = [
    ("not json", b"data: {oops\n\n", R.MALFORMED_EVENT, None),
    ("json array", b"data: [1]\n\n", R.MALFORMED_EVENT, None),
    ("too deep for json", b"data: " + b"[" * 100_000 + b"\n\n", R.MALFORMED_EVENT, None),
    ("choices not a list", sse({"choices": {"0": {}}}), R.MALFORMED_EVENT, None),
    ("choice not an object", sse({"choices": [3]}), R.MALFORMED_EVENT, None),
    ("choice index 1", choice(index=1), R.UNEXPECTED_CHOICE, None),
    ("choice index false", choice(index=False), R.UNEXPECTED_CHOICE, None),
    ("choice index true", choice(index=True), R.UNEXPECTED_CHOICE, None),
    ("delta not an object", choice(delta="hi"), R.MALFORMED_EVENT, None),
    ("refusal", choice(delta={"refusal": "no"}), R.REFUSAL, None),
    ("function_call", choice(delta={"function_call": {"name": "x"}}), R.LEGACY_FUNCTION_CALL, None),
    ("content not text", choice(delta={"content": ["x"]}), R.MALFORMED_EVENT, None),
    ("tool_calls not a list", choice(delta={"tool_calls": {}}), R.MALFORMED_EVENT, None),
    ("finish_reason number", choice(finish_reason=1), R.MALFORMED_EVENT, None),
    ("finish_reason empty", choice(finish_reason=""), R.MALFORMED_EVENT, None),
    ("error object", sse({"error": {"type": "server_error", "message": "x"}}), R.ERROR_EVENT, None),
    ("error with odd type", sse({"error": {"type": 5}}), R.ERROR_EVENT, None),
    ("error as a string", sse({"error": "boom"}), R.ERROR_EVENT, None),
    ("event: error", b"event: error\ndata: {}\n\n", R.ERROR_EVENT, None),
    ("fragment not an object", choice(delta={"tool_calls": ["x"]}), R.MALFORMED_EVENT, None),
    ("index missing", fragment(id="c", function={"name": "multiply"}), R.INVALID_CALL_INDEX, None),
    ("index bool", fragment(**{**FIRST, "index": False}), R.INVALID_CALL_INDEX, None),
    ("index float", fragment(**{**FIRST, "index": 0.0}), R.INVALID_CALL_INDEX, None),
    ("index negative", fragment(**{**FIRST, "index": -1}), R.INVALID_CALL_INDEX, None),
    ("type custom", fragment(**FIRST, type="custom"), R.UNSUPPORTED_TOOL_TYPE, 0),
    ("function not an object", fragment(index=0, id="c", function="f"), R.MALFORMED_EVENT, 0),
    ("id not a string", fragment(**{**FIRST, "id": 7}), R.MALFORMED_EVENT, 0),
    ("name not a string", fragment(index=0, id="c", function={"name": 1}), R.MALFORMED_EVENT, 0),
    (
        "arguments not a string",
        fragment(index=0, id="c", function={"name": "multiply", "arguments": {}}),
        R.MALFORMED_EVENT,
        0,
    ),
    ("no id", fragment(index=0, function={"name": "multiply"}), R.MISSING_CALL_IDENTITY, 0),
    ("empty name", fragment(index=0, id="c", function={"name": ""}), R.MISSING_CALL_IDENTITY, 0),
    (
        "later id differs",
        fragment(**FIRST) + fragment(index=0, id="call-z"),
        R.IDENTITY_CONFLICT,
        0,
    ),
    (
        "later name differs",
        fragment(**FIRST) + fragment(index=0, function={"name": "write_file"}),
        R.IDENTITY_CONFLICT,
        0,
    ),
    ("id reused", fragment(**FIRST) + fragment(**{**FIRST, "index": 1}), R.IDENTITY_CONFLICT, 1),
]


@pytest.mark.parametrize(
    ("body", "reason", "index"), [w[1:] for w in WIRE_FAULTS], ids=[w[0] for w in WIRE_FAULTS]
)
def test_wire_faults(body: bytes, reason: QuarantineReason, index: int | None) -> None:
    attempt = bound()
    fault = fault_of(lambda: attempt.receive_bytes(body))
    assert fault.reason is reason
    assert fault.call_index == index
    assert isinstance(fault, StreamFault)
    assert fault.status_code == 502
    assert fault.__context__ is None and fault.__cause__ is None


def test_what_the_normalizer_tolerates() -> None:
    """Absent, null or empty values where the protocol allows them; event: message is data."""
    body = b"".join(
        [
            sse({"error": None, "choices": [{"delta": None}]}),  # index defaults to 0
            choice(delta={"content": "", "refusal": "", "function_call": None}),
            b"event: message\n" + choice(delta={"content": "hi"}),
            fragment(**FIRST, type="function"),
            fragment(index=0, id="call-a", function={"name": "multiply", "arguments": "{"}),
            fragment(index=0, id="", function={"name": None, "arguments": '"a":1,'}),
            fragment(index=0, function=None),
            fragment(index=0, id=None, function={"arguments": '"b":2}'}),
            b"event: " + b"p" * 100 + b"\ndata: {}\n\n",
            sse({"id": "ignored-late-id", "choices": []}),
            FINISH_CALLS,
            DONE,
        ]
    )
    attempt = bound()
    events = attempt.receive_bytes(body)
    unknown = [e for e in events if isinstance(e, Unknown)]
    assert unknown == [Unknown("p" * 64)]
    assert attempt.unknown_events == 1
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["hi"]
    assert [e for e in events if isinstance(e, ResponseStarted)] == [
        ResponseStarted("ignored-late-id")
    ]
    (released,) = finish_and_release(attempt)
    assert released.arguments == '{"a":1,"b":2}'


# ---- limits ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field", [f.name for f in dataclasses.fields(Limits)], ids=lambda name: name
)
@pytest.mark.parametrize("bad", [0, -1, True, "5", None])
def test_limits_must_be_positive_numbers(field: str, bad: Any) -> None:
    with pytest.raises(GateConfigError, match=field):
        Limits(**{field: bad})


def test_limits_defaults() -> None:
    limits = Limits()
    assert limits.max_argument_bytes == 2 * MIB
    assert Limits(idle_timeout=0.5).idle_timeout == 0.5
    assert isinstance(GateConfigError("x"), ValueError)


def test_max_calls() -> None:
    body = stream((0, "c0", "multiply", GOOD_ARGS), (1, "c1", "multiply", GOOD_ARGS))
    run(body, Limits(max_calls=2))
    fault = quarantined(body, Limits(max_calls=1))
    assert fault.reason is R.TOO_MANY_CALLS
    assert fault.call_index == 1
    assert [r.call_id for r in fault.records] == ["c0"]


def test_max_argument_bytes_counts_utf8_bytes() -> None:
    arguments = '{"path": "é", "content": ""}'
    size = len(arguments.encode())
    assert size == len(arguments) + 1
    body = stream((0, "c0", "write_file", arguments))
    run(body, Limits(max_argument_bytes=size))
    fault = quarantined(body, Limits(max_argument_bytes=size - 1))
    assert fault.reason is R.ARGUMENTS_TOO_LARGE
    assert isinstance(fault, LimitExceeded) and fault.status_code == 413
    assert fault.party is Party.LOCAL
    assert fault.call_index == 0
    assert fault.records[0].error_class == "arguments_too_large"


def test_max_total_argument_bytes() -> None:
    body = TWO_CALLS
    identities = len("call-a") + len("multiply") + len("call-b") + len("multiply")
    total = len(GOOD_ARGS) + len('{"a":1,"b":2}') + identities
    run(body, Limits(max_total_argument_bytes=total))
    fault = quarantined(body, Limits(max_total_argument_bytes=total - 1))
    assert fault.reason is R.TOTAL_ARGUMENTS_TOO_LARGE
    assert fault.call_index == 1


def test_call_ids_and_names_count_against_the_total() -> None:
    """An upstream cannot pin max_calls ids (or names) of max_event_bytes each: they are
    held to the end like the arguments, and counted with them."""
    big = "i" * 5000
    body = stream(*((n, f"{n}{big}", "multiply", GOOD_ARGS) for n in range(3)))
    limits = Limits(max_total_argument_bytes=12_000, max_event_bytes=8000)
    fault = quarantined(body, limits)
    assert fault.reason is R.TOTAL_ARGUMENTS_TOO_LARGE
    assert fault.call_index == 2  # the third id crosses 12,000 before its arguments arrive
    named = stream((0, "c", "n" * 7000, GOOD_ARGS))
    fault = quarantined(named, Limits(max_total_argument_bytes=6000, max_event_bytes=8000))
    assert fault.reason is R.TOTAL_ARGUMENTS_TOO_LARGE and fault.call_index == 0


def test_max_events_excludes_comments() -> None:
    body = b": keep-alive\n\n" * 5 + ONE_CALL
    messages = ONE_CALL.count(b"data: ")
    run(body, Limits(max_events=messages))
    fault = quarantined(body, Limits(max_events=messages - 1))
    assert fault.reason is R.TOO_MANY_EVENTS


def test_max_events_is_the_same_limit_however_the_body_is_split() -> None:
    """The limit is counted per piece fed: the event past it faults wherever the pieces
    end, and a fault of an event before it comes first."""
    texts = b"".join(chunk({"content": f"t{i}"}) for i in range(12))
    body = texts + chunk(finish="stop") + b"data: [DONE]\n\n"
    events = body.count(b"data: ")

    def fed(pieces: list[bytes], limits: Limits) -> tuple[Attempt, R | None]:
        attempt = bound(limits)
        try:
            for piece in pieces:
                attempt.receive_bytes(piece)
        except ToolCallQuarantined as fault:
            return attempt, fault.reason
        return attempt, None

    for size in (1, 7, 40, len(texts) // 3, len(body)):
        pieces = [body[i : i + size] for i in range(0, len(body), size)]
        attempt, reason = fed(pieces, Limits(max_events=events))
        assert reason is None and attempt.events == events
        for limit in (events - 1, 5):
            attempt, reason = fed(pieces, Limits(max_events=limit))
            assert reason is R.TOO_MANY_EVENTS and attempt.events == limit + 1
        # The fourth text is over the text limit: that fault, not the event count's.
        assert fed(pieces, Limits(max_events=5, max_text_bytes=7))[1] is R.TEXT_TOO_LARGE


def test_max_event_bytes() -> None:
    line = max(len(piece) for piece in ONE_CALL.split(b"\n"))
    run(ONE_CALL, Limits(max_event_bytes=line))
    fault = quarantined(ONE_CALL, Limits(max_event_bytes=line - 10))
    assert fault.reason is R.EVENT_TOO_LARGE


def test_event_too_large_records_do_not_depend_on_the_split() -> None:
    """Regression: a decoder fault used to drop the messages completed earlier in the same
    piece, so the call opened before an oversized line had a record only when fed in pieces."""
    body = opens(0, "call-a", "multiply", "{") + b"data: " + b"x" * 300 + b"\n\n"
    limits = Limits(max_event_bytes=250)
    whole = bound(limits, clock=lambda: 0.0)
    fault_whole = fault_of(lambda: whole.receive_bytes(body))
    bytewise = bound(limits, clock=lambda: 0.0)

    def feed() -> None:
        for i in range(len(body)):
            bytewise.receive_bytes(body[i : i + 1])

    fault_bytewise = fault_of(feed)
    assert fault_whole.reason is fault_bytewise.reason is R.EVENT_TOO_LARGE
    assert [r.call_id for r in fault_whole.records] == ["call-a"]
    same = [
        [r.model_dump(exclude={"observed_at"}) for r in fault.records]
        for fault in (fault_whole, fault_bytewise)
    ]
    assert same[0] == same[1]


def test_max_text_bytes_counts_utf8_bytes() -> None:
    body = stream(text="héllo")  # 6 bytes
    run(body, Limits(max_text_bytes=6))
    fault = quarantined(body, Limits(max_text_bytes=5))
    assert fault.reason is R.TEXT_TOO_LARGE
    assert fault.records == ()


def test_max_json_depth() -> None:
    body = stream((0, "c0", "anything", '{"a": {"b": {}}}'))
    run(body, Limits(max_json_depth=3))
    fault = quarantined(body, Limits(max_json_depth=2))
    assert fault.reason is R.DEPTH_EXCEEDED
    assert isinstance(fault, ArgumentsRejected)
    assert fault.records[0].json_status == "invalid"


def argument_flood(total: int, piece: int = 64 * KIB) -> Iterator[bytes]:
    """A write_file call whose content never ends: ``total`` bytes of fragments."""
    yield opens(0, "call-flood", "write_file", '{"path": "a", "content": "')
    event = more(0, "x" * 1000)
    block = event * (piece // len(event))
    for _ in range(total // len(block)):
        yield block


def test_argument_flood_quarantines_early_and_memory_stays_bounded() -> None:
    limit = 1 * MIB
    attempt = bound(Limits(max_argument_bytes=limit))
    fed = 0
    fault: ToolCallQuarantined | None = None
    tracemalloc.start()
    try:
        for block in argument_flood(50 * MIB):
            try:
                attempt.receive_bytes(block)
            except ToolCallQuarantined as exc:
                fault = exc
                break
            fed += len(block)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert fault is not None and fault.reason is R.ARGUMENTS_TOO_LARGE
    assert fed < limit * 1.2, "stopped reading as soon as the limit was passed"
    assert peak < 4 * limit, f"peak {peak} bytes"
    # White-box: the withheld fragments were dropped at the fault.
    assert not attempt._calls[0].buffer
    assert attempt._calls[0].arguments is None
    # Later input is refused at once, without being decoded.
    seen = attempt.bytes_seen
    block = next(itertools.islice(argument_flood(MIB), 1, None))
    for _ in range(100):
        assert fault_of(lambda: attempt.receive_bytes(block)) is fault
    assert attempt.bytes_seen == seen
    assert fault_of(attempt.receive_eof) is fault


# ---- non-streamed bodies --------------------------------------------------------------------


def body(message: dict[str, Any], finish: str | None = "tool_calls", **top: Any) -> bytes:
    doc = {"id": "resp-9", "object": "chat.completion", **top}
    doc.setdefault("choices", [{"index": 0, "message": message, "finish_reason": finish}])
    return json.dumps(doc).encode()


def calls_message(*arguments: str, name: str = "multiply") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call-{i}", "type": "function", "function": {"name": name, "arguments": a}}
            for i, a in enumerate(arguments)
        ],
    }


def non_streamed(data: bytes, limits: Limits | None = None) -> Attempt:
    attempt = Attempt(REGISTRY, limits, attempt_id="att-ns")
    attempt.bind_response(content_type="application/json", streamed=False)
    attempt.receive_body(data)
    return attempt


def test_non_streamed_good_calls_are_released_by_list_position() -> None:
    attempt = non_streamed(body(calls_message(GOOD_ARGS, '{"a": 1, "b": 2}')))
    assert attempt.state is S.CLOSED
    assert attempt.response_id == "resp-9"
    calls = attempt.conclude()
    assert [(c.index, c.call_id) for c in calls] == [(0, "call-0"), (1, "call-1")]
    assert calls[1].arguments == {"a": 1, "b": 2}
    for call in calls:
        attempt.decide(call.index, PolicyDecision.approve())
    assert [c.arguments for c in attempt.release()] == [GOOD_ARGS, '{"a": 1, "b": 2}']


def test_non_streamed_text_answer() -> None:
    attempt = non_streamed(body({"role": "assistant", "content": "56"}, finish="stop"))
    assert attempt.conclude() == []
    assert attempt.release() == []


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (body(calls_message('{"a": 7,')), R.INVALID_JSON),
        (body(calls_message('{"a": 7, "b": "8"}')), R.SCHEMA_INVALID),
        (body(calls_message(GOOD_ARGS), finish=None), R.MISSING_FINISH),
        (body(calls_message(GOOD_ARGS), finish="stop"), R.FINISH_REASON_MISMATCH),
        (body({}, choices=[]), R.MISSING_FINISH),
        (body({}, error={"type": "rate_limit"}), R.ERROR_EVENT),
        (body({"role": "assistant", "refusal": "no"}, finish="stop"), R.REFUSAL),
        (b"not json", R.MALFORMED_EVENT),
        (b'{"choices": [{"message": {"content": "caf\xe9"}}]}', R.INVALID_UTF8),
    ],
    ids=[
        "bad-json", "schema", "no-finish", "finish-stop", "no-choices", "error", "refusal",
        "not-json", "latin1",
    ],
)  # fmt: skip
def test_non_streamed_bad_bodies(data: bytes, reason: QuarantineReason) -> None:
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="application/json", streamed=False)
    fault = fault_of(lambda: (attempt.receive_body(data), attempt.conclude()))
    assert fault.reason is reason
    assert fault.__context__ is None


def test_non_streamed_body_too_large() -> None:
    data = body(calls_message(GOOD_ARGS))
    non_streamed(data, Limits(max_body_bytes=len(data)))
    attempt = Attempt(REGISTRY, Limits(max_body_bytes=len(data) - 1))
    attempt.bind_response(content_type="application/json", streamed=False)
    fault = fault_of(lambda: attempt.receive_body(data))
    assert fault.reason is R.BODY_TOO_LARGE
    assert isinstance(fault, LimitExceeded)
    assert fault.records == ()  # refused before a byte of it was read


# ---- policy ---------------------------------------------------------------------------------


def concluded(data: bytes = ONE_CALL, **kwargs: Any) -> tuple[Attempt, list[ToolCall]]:
    attempt = bound(**kwargs)
    attempt.receive_bytes(data)
    attempt.receive_eof()
    return attempt, attempt.conclude()


def test_policy_denied() -> None:
    attempt, _ = concluded(TWO_CALLS)
    attempt.decide(0, PolicyDecision.approve("fine"), elapsed=0.002)
    fault = fault_of(lambda: attempt.decide(1, PolicyDecision.deny("x" * 500), elapsed=0.5))
    assert fault.reason is R.POLICY_DENIED
    assert isinstance(fault, PolicyDenied) and fault.status_code == 403
    assert fault.party is Party.LOCAL
    assert fault.call_index == 1
    first, second = fault.records
    assert (first.policy_status, first.policy_reason, first.policy_ms) == ("approved", "fine", 2.0)
    assert (second.policy_status, second.policy_reason) == ("denied", "x" * 200)
    assert second.policy_ms == 500.0
    assert (first.error_class, second.error_class) == ("policy_denied", "policy_denied")
    assert fault_of(attempt.release) is fault


def test_policy_failure_is_policy_error() -> None:
    attempt, calls = concluded()
    fault = fault_of(lambda: attempt.decide(calls[0].index, None))
    assert fault.reason is R.POLICY_ERROR
    assert isinstance(fault, PolicyDenied)
    assert fault.records[0].policy_status == "error"
    assert fault.records[0].policy_reason is None


def test_tool_call_hides_its_arguments() -> None:
    _, (call,) = concluded()
    assert call.arguments == {"a": 7, "b": 8}
    assert "arguments" not in repr(call)


def test_policy_answers_are_normalized() -> None:
    assert as_decision(True) == PolicyDecision(True)
    assert as_decision(False) == PolicyDecision(False)
    assert as_decision(PolicyDecision.deny("no")) == PolicyDecision(False, "no")
    assert as_decision(PolicyDecision.approve()) == PolicyDecision(True, None)
    for odd in (None, 1, "yes", object()):
        assert as_decision(odd) is None


# ---- the carrier cross-check ----------------------------------------------------------------

GOOD_CARRIER = Carrier(
    {
        0: CarrierCall("call-a", "multiply", GOOD_ARGS),
        1: CarrierCall("call-b", "multiply", '{"a":1,"b":2}'),
    },
    "tool_calls",
)


def with_call(index: int, **change: Any) -> Carrier:
    calls = dict(GOOD_CARRIER.calls)
    calls[index] = dataclasses.replace(calls[index], **change)
    return dataclasses.replace(GOOD_CARRIER, calls=calls)


def test_a_faithful_carrier_passes() -> None:
    attempt = bound()
    attempt.receive_bytes(TWO_CALLS)
    assert len(finish_and_release(attempt, GOOD_CARRIER)) == 2


@pytest.mark.parametrize(
    "carrier",
    [
        with_call(1, arguments='{"a":1,"b":3}'),
        with_call(0, arguments=GOOD_ARGS.replace(" ", "")),
        with_call(0, call_id="call-x"),
        with_call(0, call_id=None),
        with_call(1, name="write_file"),
        dataclasses.replace(GOOD_CARRIER, calls={**GOOD_CARRIER.calls, 2: GOOD_CARRIER.calls[0]}),
        dataclasses.replace(GOOD_CARRIER, calls={0: GOOD_CARRIER.calls[0]}),
        dataclasses.replace(GOOD_CARRIER, finish_reason="stop"),
        dataclasses.replace(GOOD_CARRIER, finish_reason=None),
        dataclasses.replace(GOOD_CARRIER, foreign=True),
    ],
    ids=[
        "arguments", "whitespace", "id", "no-id", "name", "extra-index", "missing-index",
        "finish-stop", "finish-none", "foreign",
    ],
)  # fmt: skip
def test_carrier_mismatch(carrier: Carrier) -> None:
    attempt = bound()
    attempt.receive_bytes(TWO_CALLS)
    attempt.receive_eof()
    fault = fault_of(lambda: attempt.conclude(carrier))
    assert fault.reason is R.CARRIER_MISMATCH
    assert isinstance(fault, CarrierMismatch) and fault.status_code == 502
    assert fault.party is Party.REMOTE
    assert all(r.json_status == "not_parsed" for r in fault.records)


def test_carrier_call_hides_its_arguments() -> None:
    assert GOOD_ARGS not in repr(GOOD_CARRIER)


# ---- interruption -----------------------------------------------------------------------------


def test_interrupt_quarantines_an_open_attempt() -> None:
    for reason in (R.DISCONNECTED, R.STALLED, R.CANCELLED):
        attempt = bound()
        attempt.receive_bytes(opens(0, "call-a", "multiply", '{"a"'))
        fault = attempt.interrupt(reason)
        assert fault is not None and fault.reason is reason
        assert isinstance(fault, Interrupted) and fault.status_code == 504
        assert fault_of(attempt.receive_eof) is fault
        assert attempt.interrupt(R.STALLED) is fault  # the first fault wins


def test_interrupt_between_conclude_and_release_still_quarantines() -> None:
    attempt, calls = concluded()
    attempt.decide(calls[0].index, PolicyDecision.approve())
    fault = attempt.interrupt(R.CANCELLED)
    assert fault is not None and fault.party is Party.LOCAL
    assert fault.records[0].policy_status == "approved"
    assert fault_of(attempt.release) is fault


def test_interrupt_after_release_returns_none() -> None:
    attempt = run(ONE_CALL)
    assert attempt.state is S.RELEASED
    assert attempt.interrupt(R.DISCONNECTED) is None
    assert attempt.quarantined is None
    assert attempt.records()[0].execution_state == "released"


# ---- decision records -------------------------------------------------------------------------


class Ticking:
    """A clock that advances one second per reading."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_one_record_per_call_in_index_order() -> None:
    body = stream((1, "c1", "multiply", GOOD_ARGS), (0, "c0", "multiply", GOOD_ARGS))
    attempt = run(body, run_id="run-1", route="r")
    records = attempt.records()
    assert [(r.item_id, r.call_id) for r in records] == [("att-t.0.0", "c0"), ("att-t.0.1", "c1")]
    for record in records:
        assert record.run_id == "run-1" and record.attempt_id == "att-t"
        assert record.response_id == "resp-1"
        assert record.stream_event == "terminal"
        assert record.tool_name == "multiply"
        assert record.buffer_bytes == len(GOOD_ARGS)
        assert record.terminal_seen is True
        assert (record.json_status, record.trailing_data) == ("valid", False)
        assert (record.schema_status, record.schema_keyword, record.schema_path) == (
            "valid",
            None,
            None,
        )
        assert record.policy_status == "approved"
        assert record.execution_state == "released"
        assert record.error_class is None
        assert record.content_hmac is None


def test_text_only_attempt_has_no_records() -> None:
    assert run(stream(text="hi")).records() == []


def test_records_time_the_call_with_the_injected_clock() -> None:
    attempt = run(ONE_CALL, clock=Ticking())
    (record,) = attempt.records()
    assert record.stream_ms > 0 and record.validation_ms == 1000.0
    # A fault after the terminal keeps the stream time measured at the terminal.
    late = bound(clock=Ticking())
    late.receive_bytes(stream((0, "c0", "multiply", '{"a": 1}')))
    late.receive_eof()
    timed = late.records()[0].stream_ms
    fault = fault_of(late.conclude)
    assert fault.records[0].stream_ms == timed


def test_stream_event_tracks_the_last_touch() -> None:
    attempt = bound()
    attempt.receive_bytes(opens())
    assert attempt.records()[0].stream_event == "call_started"
    attempt.receive_bytes(more(0, "{"))
    assert attempt.records()[0].stream_event == "argument_delta"
    attempt.receive_bytes(FINISH_CALLS)
    assert attempt.records()[0].stream_event == "finish"


def test_unregistered_tool_name_is_not_recorded() -> None:
    fault = quarantined(stream((0, "c0", CANARY, GOOD_ARGS)))
    assert fault.reason is R.UNKNOWN_TOOL
    assert isinstance(fault, SchemaRejected) and fault.status_code == 422
    (record,) = fault.records
    assert record.tool_name is None
    assert record.schema_status == "unknown_tool"
    assert CANARY not in record.model_dump_json()


def test_tool_categories_replace_registered_names() -> None:
    attempt = run(ONE_CALL, tool_categories={"multiply": "math"})
    assert attempt.records()[0].tool_name == "math"


def test_schema_failure_records_keyword_and_redacted_path() -> None:
    arguments = json.dumps({"vars": {CANARY: 5}})
    fault = quarantined(stream((0, "c0", "set_env", arguments)))
    assert fault.reason is R.SCHEMA_INVALID
    (record,) = fault.records
    assert (record.schema_keyword, record.schema_path) == ("type", "/vars/*")
    assert (record.json_status, record.schema_status) == ("valid", "invalid")
    assert CANARY not in record.model_dump_json()


def test_schema_path_names_declared_keys_and_indices_only() -> None:
    fault = quarantined(stream((0, "c0", "multiply", '{"a": 7, "b": "8"}')))
    assert (fault.records[0].schema_keyword, fault.records[0].schema_path) == ("type", "/b")
    extra = quarantined(stream((0, "c0", "multiply", '{"a": 7, "b": 8, "zz": 1}')))
    assert extra.records[0].schema_keyword == "additionalProperties"
    assert extra.records[0].schema_path == ""


def test_trailing_data_is_recorded() -> None:
    fault = quarantined(stream((0, "c0", "multiply", GOOD_ARGS + " {}")))
    assert fault.reason is R.TRAILING_DATA
    assert (fault.records[0].json_status, fault.records[0].trailing_data) == ("invalid", True)
    other = quarantined(stream((0, "c0", "multiply", "[1]")))
    assert (other.records[0].json_status, other.records[0].trailing_data) == ("invalid", False)


def test_first_failing_call_names_the_quarantine_and_each_call_keeps_its_own_error() -> None:
    body = stream(
        (0, "c0", "multiply", GOOD_ARGS),
        (1, "c1", "multiply", '{"a": 1'),
        (2, "c2", "nope", GOOD_ARGS),
    )
    fault = quarantined(body)
    assert fault.reason is R.INVALID_JSON and fault.call_index == 1
    assert [r.error_class for r in fault.records] == [
        "invalid_json",
        "invalid_json",
        "unknown_tool",
    ]
    assert [r.schema_status for r in fault.records] == ["valid", "not_checked", "unknown_tool"]


@pytest.mark.parametrize("arguments", [GOOD_ARGS, '{"path": "café/日本", "content": "☕ 😀"}'])
def test_content_hmac_only_with_a_key(arguments: str) -> None:
    name = "multiply" if arguments == GOOD_ARGS else "write_file"
    data = stream((0, "c0", name, arguments))
    assert run(data).records()[0].content_hmac is None
    key = b"k" * 32
    digest = run(data, hmac_key=key).records()[0].content_hmac
    assert digest == hmac.new(key, arguments.encode("utf-8"), sha256).hexdigest()
    assert digest != sha256(arguments.encode()).hexdigest()
    # Before the terminal nothing is hashed; a failing call still gets its digest.
    early = bound(hmac_key=key)
    early.receive_bytes(opens(0, "c0", name, arguments))
    assert fault_of(early.receive_eof).records[0].content_hmac is None
    bad = quarantined(stream((0, "c0", "nope", arguments)), hmac_key=key)
    assert bad.records[0].content_hmac == digest


# ---- exceptions: families, status codes, parties, pickling -------------------------------------

LOCAL = Party.LOCAL
REMOTE = Party.REMOTE
FAMILY: dict[str, tuple[type[ToolCallQuarantined], int, Party]] = {
    "invalid_utf8": (StreamFault, 502, REMOTE),
    "malformed_event": (StreamFault, 502, REMOTE),
    "error_event": (StreamFault, 502, REMOTE),
    "missing_finish": (StreamFault, 502, REMOTE),
    "missing_done": (StreamFault, 502, REMOTE),
    "event_after_terminal": (StreamFault, 502, REMOTE),
    "finish_reason_mismatch": (StreamFault, 502, REMOTE),
    "unexpected_choice": (StreamFault, 502, REMOTE),
    "refusal": (StreamFault, 502, REMOTE),
    "legacy_function_call": (StreamFault, 502, REMOTE),
    "invalid_call_index": (StreamFault, 502, REMOTE),
    "missing_call_identity": (StreamFault, 502, REMOTE),
    "identity_conflict": (StreamFault, 502, REMOTE),
    "unsupported_tool_type": (StreamFault, 502, REMOTE),
    "spliced_response": (StreamFault, 502, REMOTE),
    "unsupported_wire": (StreamFault, 502, REMOTE),
    "route_not_gated": (WireUnread, 501, LOCAL),
    "wire_not_observed": (WireUnread, 501, LOCAL),
    "unsupported_request": (WireUnread, 501, LOCAL),
    "incomplete_item": (StreamFault, 502, REMOTE),
    "item_mismatch": (StreamFault, 502, REMOTE),
    "response_incomplete": (StreamFault, 502, REMOTE),
    "disconnected": (Interrupted, 504, REMOTE),
    "stalled": (Interrupted, 504, REMOTE),
    "cancelled": (Interrupted, 504, LOCAL),
    "invalid_json": (ArgumentsRejected, 422, REMOTE),
    "trailing_data": (ArgumentsRejected, 422, REMOTE),
    "not_an_object": (ArgumentsRejected, 422, REMOTE),
    "duplicate_key": (ArgumentsRejected, 422, REMOTE),
    "number_out_of_range": (ArgumentsRejected, 422, REMOTE),
    "invalid_string": (ArgumentsRejected, 422, REMOTE),
    "depth_exceeded": (ArgumentsRejected, 422, REMOTE),
    "unknown_tool": (SchemaRejected, 422, REMOTE),
    "schema_invalid": (SchemaRejected, 422, REMOTE),
    "policy_denied": (PolicyDenied, 403, LOCAL),
    "policy_error": (PolicyDenied, 403, LOCAL),
    "too_many_calls": (LimitExceeded, 413, LOCAL),
    "arguments_too_large": (LimitExceeded, 413, LOCAL),
    "total_arguments_too_large": (LimitExceeded, 413, LOCAL),
    "too_many_events": (LimitExceeded, 413, LOCAL),
    "event_too_large": (LimitExceeded, 413, LOCAL),
    "text_too_large": (LimitExceeded, 413, LOCAL),
    "body_too_large": (LimitExceeded, 413, LOCAL),
    "carrier_mismatch": (CarrierMismatch, 502, REMOTE),
    "too_many_rounds": (LoopLimitExceeded, 413, LOCAL),
    "too_many_calls_in_round": (LoopLimitExceeded, 413, LOCAL),
    "too_many_calls_in_run": (LoopLimitExceeded, 413, LOCAL),
    "call_id_reused": (DuplicateCallId, 502, REMOTE),
}


def test_every_reason_is_in_the_expected_table() -> None:
    assert set(FAMILY) == {r.value for r in R}


@pytest.mark.parametrize("reason", list(R), ids=lambda r: r.value)
def test_family_status_and_party(reason: QuarantineReason) -> None:
    family, status, party = FAMILY[reason.value]
    assert reason.family is family
    assert reason.party is party
    exc = quarantine(reason, "att-1", (), call_index=3)
    assert type(exc) is family
    assert isinstance(exc, ToolCallQuarantined) and isinstance(exc, ToolGateError)
    assert exc.status_code == status
    assert exc.party is party
    assert str(exc) == (
        f"attempt att-1 quarantined: {reason.value} ({party.value}, tool index 3); "
        "0 tool call(s) withheld, none released"
    )
    assert repr(exc) == f"{family.__name__}(reason={reason.value!r}, attempt_id='att-1', records=0)"
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is family
    assert (copy.reason, copy.attempt_id, copy.records, copy.call_index) == (reason, "att-1", (), 3)
    assert str(copy) == str(exc)


def test_a_real_quarantine_pickles_with_its_records() -> None:
    fault = quarantined(TWO_CALLS.replace(b'\\"b\\":2}', b'\\"b\\":2'))
    assert fault.reason is R.INVALID_JSON and len(fault.records) == 2
    assert "tool index 1" in str(fault)
    copy = pickle.loads(pickle.dumps(fault))
    assert type(copy) is ArgumentsRejected
    assert copy.records == fault.records
    assert (copy.reason, copy.attempt_id, copy.call_index) == (
        fault.reason,
        fault.attempt_id,
        fault.call_index,
    )
    assert str(copy) == str(fault) and repr(copy) == repr(fault)


def test_message_without_tool_index() -> None:
    exc = quarantine(R.MISSING_DONE, "att-2")
    assert str(exc).startswith("attempt att-2 quarantined: missing_done (remote); ")
    assert exc.call_index is None


def test_attempt_ids_are_opaque_and_unique() -> None:
    a, b = Attempt(REGISTRY), Attempt(REGISTRY)
    assert a.attempt_id != b.attempt_id
    assert a.attempt_id.startswith("att-") and a.run_id == a.attempt_id


# ---- misuse by the edge is a TransitionError, never a half-done release ----------------------
def test_release_is_all_or_nothing() -> None:
    two = stream((0, "call-a", "multiply", GOOD_ARGS), (1, "call-b", "multiply", GOOD_ARGS))
    attempt = bound()
    attempt.receive_bytes(two)
    attempt.receive_eof()
    first, _second = attempt.conclude()
    attempt.decide(first.index, PolicyDecision.approve())
    with pytest.raises(TransitionError):
        attempt.release()  # call 1 was never decided
    assert attempt.state is S.CLOSED
    assert {r.execution_state for r in attempt.records()} == {"withheld"}
    attempt.decide(1, PolicyDecision.approve())
    assert [c.index for c in attempt.release()] == [0, 1]


def test_deciding_an_index_that_was_never_opened_is_a_transition_error() -> None:
    attempt = bound()
    attempt.receive_bytes(ONE_CALL)
    attempt.receive_eof()
    attempt.conclude()
    with pytest.raises(TransitionError, match="index 7"):
        attempt.decide(7, PolicyDecision.approve())


def test_bytes_after_the_end_of_the_body_are_a_transition_error() -> None:
    attempt = bound()
    attempt.receive_bytes(ONE_CALL)
    attempt.receive_eof()
    with pytest.raises(TransitionError, match="closed"):
        attempt.receive_bytes(b"data: [DONE]\n\n")
