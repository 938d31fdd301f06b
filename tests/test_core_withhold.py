"""The core's withholding on the wire (core/decision/withhold.py), by its public API, no network.

Each wire's recorded bodies are fed to an attempt and a :class:`Withholder` side by side, as
the edge's transport does, whole and one byte at a time: what goes out live must be exactly
the messages before the first call, the rest must come out only on release, and every
message must come out re-encoded as one ASCII ``data:`` line of the same value.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from conftest import CANARY
from leakcheck import find_in

from litellm_toolgate.core import (
    Attempt,
    PolicyDecision,
    QuarantineReason,
    ToolRegistry,
    Wire,
    find_quarantine,
)
from litellm_toolgate.core.decision.state import StreamState
from litellm_toolgate.core.decision.withhold import Check, Withholder
from litellm_toolgate.core.errors import quarantine
from litellm_toolgate.core.framing.sse import SSEDecoder, SSEMessage

R = QuarantineReason
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
PATHS = {
    "chat": "/v1/chat/completions",
    "responses": "/v1/responses",
    "anthropic": "/v1/messages",
}
# The first message of each wire's multiply_basic body that belongs to the call.
CALL_MARKS = {"chat": '"tool_calls"', "responses": '"function_call"', "anthropic": '"tool_use"'}


def tools(wire: str) -> list[dict[str, Any]]:
    manifest = json.loads((FIXTURES / wire / "manifest.json").read_text())
    return list(manifest["tools"])


def messages(body: bytes) -> list[SSEMessage]:
    decoder = SSEDecoder(max_event_bytes=1 << 20)
    return [*decoder.feed(body), *decoder.flush()]


class Told:
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    def __call__(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)


def holder(
    wire: str,
    *,
    streamed: bool = True,
    whole_here: bool = False,
    checks: Mapping[Wire, Check | None] | None = None,
    body_check: Check | None = None,
) -> tuple[Attempt, Withholder, Told]:
    attempt = Attempt(ToolRegistry.from_tools(tools(wire)))
    media = "text/event-stream" if streamed else "application/json"
    attempt.bind_response(content_type=media, streamed=streamed, path=PATHS[wire])
    told = Told()
    held = Withholder(
        attempt,
        streamed=streamed,
        whole_here=whole_here,
        checks=checks,
        body_check=body_check,
        on_decided=told,
    )
    return attempt, held, told


def stream(held: Withholder, pieces: list[bytes]) -> list[bytes]:
    """Feed the attempt and then the withholder, as the edge does; what went out live."""
    live: list[bytes] = []
    for piece in pieces:
        held.attempt.receive_bytes(piece)
        live += held.feed(piece)
    held.attempt.receive_eof()
    return live


def end_cleanly(held: Withholder, wire: str) -> None:
    """Feed the attempt alone a clean text-only body, so that what the withholder was fed by
    hand (which the attempt would refuse) can be released."""
    held.attempt.receive_bytes((FIXTURES / wire / "text_only.sse").read_bytes())
    held.attempt.receive_eof()


def approve(held: Withholder) -> list[bytes]:
    held.begin_decision()
    calls = held.conclude()
    assert calls is not None
    for call in calls:
        held.attempt.decide(call.index, PolicyDecision.approve())
    held.check_whole(True)
    return held.release(True)


@pytest.mark.parametrize("wire", sorted(PATHS))
@pytest.mark.parametrize("bytewise", [False, True], ids=["whole", "bytewise"])
def test_text_passes_live_and_the_call_is_held_to_release(wire: str, bytewise: bool) -> None:
    body = (FIXTURES / wire / "multiply_basic.sse").read_bytes()
    attempt, held, told = holder(wire)
    pieces = [body[i : i + 1] for i in range(len(body))] if bytewise else [body]
    live = stream(held, pieces)
    original = messages(body)
    first_call = next(i for i, m in enumerate(original) if CALL_MARKS[wire] in m.data)
    assert len(live) == first_call > 0
    assert held.passed_live and not told.attempts
    released = approve(held)
    assert attempt.state is StreamState.RELEASED and told.attempts == [attempt]
    out = [*live, *released]
    for piece in out:
        # One message per piece, ASCII, one data line; the name kept on the Anthropic wire.
        assert piece.isascii() and piece.endswith(b"\n\n") and piece.count(b"data: ") == 1
    again = messages(b"".join(out))
    assert [m.data if m.data == "[DONE]" else json.loads(m.data) for m in again] == [
        m.data if m.data == "[DONE]" else json.loads(m.data) for m in original
    ]
    names = [m.event for m in again]
    assert names == ([m.event for m in original] if wire == "anthropic" else [""] * len(again))


def test_unicode_is_reencoded_as_ascii_of_the_same_value() -> None:
    body = (FIXTURES / "chat" / "raw_u2028_in_string.sse").read_bytes()
    _, held, _ = holder("chat")
    live = stream(held, [body])
    out = b"".join([*live, *approve(held)])
    assert out.isascii()
    assert [m.data for m in messages(out)][-1] == "[DONE]"
    assert [json.loads(m.data) for m in messages(out)[:-1]] == [
        json.loads(m.data) for m in messages(body)[:-1]
    ]


def test_chat_reads_unnamed_messages_only_and_never_passes_an_error_live() -> None:
    _, held, _ = holder("chat")
    named = b'event: ping\ndata: {"choices": []}\n\n'
    assert held.feed(named) == []
    assert held.feed(b'event: message\ndata: {"choices": []}\n\n') == [b'data: {"choices":[]}\n\n']
    end_cleanly(held, "chat")
    assert approve(held) == []  # nothing was held: the named message was dropped
    _, held, _ = holder("responses")
    error = b'event: error\ndata: {"type": "response.output_text.delta"}\n\n'
    assert held.feed(error) == []  # by its name alone it is an error: held
    end_cleanly(held, "responses")
    assert approve(held) == [b'data: {"type":"response.output_text.delta"}\n\n']


@pytest.mark.parametrize(
    ("data", "encoded"),
    [("[DONE]", b"data: [DONE]\n\n"), ("", b"data: null\n\n"), ("[1]", b"data: [1]\n\n")],
)
def test_what_is_no_object_is_held_as_it_is(data: str, encoded: bytes) -> None:
    asked: list[Mapping[str, Any]] = []

    def check(value: Mapping[str, Any]) -> bool:
        asked.append(value)
        return True

    _, held, _ = holder("chat", checks={Wire.CHAT: check})
    assert held.feed(f"data: {data}\n\n".encode()) == []
    assert held.feed(b'data: {"choices": []}\n\n') == []  # held: something is held before it
    assert asked == [{"choices": []}]  # the client's parser is asked of objects only
    end_cleanly(held, "chat")
    assert approve(held) == [encoded, b'data: {"choices":[]}\n\n']


def test_a_message_the_client_cannot_parse_refuses_the_attempt_and_drops_the_held() -> None:
    asked: list[Mapping[str, Any]] = []

    def check(value: Mapping[str, Any]) -> bool:
        asked.append(value)
        return "bad" not in value

    attempt, held, told = holder("chat", checks={Wire.CHAT: check})
    live = held.feed(
        b'data: {"choices": []}\n\n'
        b'data: {"choices": [{"index": 0, "delta": {"tool_calls": []}}]}\n\n'
        b'data: {"bad": 1}\n\ndata: {"choices": []}\n\n'
    )
    assert live == [b'data: {"choices":[]}\n\n']
    assert len(asked) == 3  # the message after the refused one is never looked at
    assert attempt.quarantined is not None and attempt.quarantined.reason is R.CARRIER_MISMATCH
    held.begin_decision()
    assert held.conclude() is None
    assert held.release(False) == [] and told.attempts == [attempt]


# A call message with the canary in its arguments, and the start of another, unfinished.
CANARY_CALL = (
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", '
    b'"type": "function", "function": {"name": "multiply", "arguments": "{\\"a\\": \\"'
    + CANARY.encode()
    + b'\\""}}]}}]}\n\n'
)
CANARY_UNFINISHED = (
    b'data: {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, '
    b'"function": {"arguments": "' + CANARY.encode()
)


@pytest.mark.parametrize("end", ["refused_after", "refused_here", "cancelled", "released"])
def test_a_settled_holder_keeps_nothing_of_the_body(end: str) -> None:
    """Once the attempt's fate is settled (refused, by the tap or by the holder's own check;
    cancelled; released), the holder keeps no byte of the body: held messages, data values
    for the carrier and the framer's unfinished message go. A traceback whose frame shows the
    holder's stream (httpx's reader's ``self``) would otherwise carry argument text."""
    attempt = Attempt(ToolRegistry.from_tools(tools("chat")))
    attempt.bind_response(content_type="text/event-stream", streamed=True, path=PATHS["chat"])
    carried: list[list[Any]] = []

    def carrier_of(values: list[Any]) -> Any:
        carried.append(values)
        raise AssertionError("a refused body is never carried")

    held = Withholder(
        attempt,
        streamed=True,
        checks={Wire.CHAT: lambda value: "bad" not in value},
        # Values are kept for a carrier only where there is one; released, the owner's
        # carrier (none here) would have taken them already.
        carrier_of=None if end == "released" else carrier_of,
    )
    tail = b'data: {"bad": 1}\n\n' if end == "refused_here" else b""
    assert held.feed(CANARY_CALL + tail + CANARY_UNFINISHED) == []
    if end != "refused_here":
        assert find_in(held, "held", depth=16), "the test's body never reached the holder"
    if end == "refused_after":  # the tap refused a later piece
        attempt.interrupt(R.DISCONNECTED)
        assert held.feed(b'", "more": "' + CANARY.encode() + b'"}}]}}]}\n\n') == []
        held.begin_decision()
        assert held.conclude() is None and held.release(False) == []
    elif end == "refused_here":
        assert attempt.quarantined is not None
        assert attempt.quarantined.reason is R.CARRIER_MISMATCH
    elif end == "cancelled":
        held.cancel()
    else:
        end_cleanly(held, "chat")  # the attempt alone is fed a clean body, to be released
        released = approve(held)
        assert released and CANARY.encode() in b"".join(released)
    assert find_in(held, "held", depth=16) == []
    assert carried == []  # a refused body is never carried


def test_a_message_that_is_no_json_is_never_passed_on() -> None:
    # The attempt refuses such a message first; the withholder fails closed on its own too.
    attempt, held, _ = holder("anthropic")
    assert held.feed(b'event: ping\ndata: {"type": "ping"}\n\nevent: x\ndata: {nope\n\n') == [
        b'event: ping\ndata: {"type":"ping"}\n\n'
    ]
    assert attempt.quarantined is not None and attempt.quarantined.reason is R.MALFORMED_EVENT
    assert held.release(True) == []


def test_a_whole_body_is_held_whole_and_judged_by_its_owner_later() -> None:
    whole = json.dumps(
        {
            "id": "chatcmpl-w",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()
    attempt, held, told = holder("chat", streamed=False, body_check=lambda value: True)
    assert held.feed(whole[:10]) == [] and held.feed(whole[10:]) == []
    attempt.receive_body(whole)
    held.begin_decision()
    assert held.conclude() == []  # the owner concludes against the client's result
    held.check_whole(True)
    assert held.release(True) == [whole[:10], whole[10:]]
    assert attempt.state is not StreamState.RELEASED and not told.attempts


def test_a_whole_body_judged_here_is_released_here() -> None:
    whole = (FIXTURES / "anthropic" / "whole_tool_use.json").read_bytes()
    attempt, held, told = holder("anthropic", streamed=False, whole_here=True)
    assert held.feed(whole) == []
    attempt.receive_body(whole)
    released = approve(held)
    assert released == [whole] and attempt.state is StreamState.RELEASED
    assert told.attempts == [attempt]


@pytest.mark.parametrize("body", [b'{"choices": []}', b"[]", b"{nope"])
def test_an_approved_whole_chat_body_the_converter_refuses_is_quarantined(body: bytes) -> None:
    attempt, held, told = holder("chat", streamed=False, body_check=lambda value: False)
    held.feed(body)
    held.check_whole(True)
    refused = body.startswith(b'{"')  # only an object is asked; the attempt judges the rest
    assert (attempt.quarantined is not None) is refused
    assert held.release(True) == ([] if refused else [body])
    assert told.attempts == ([attempt] if refused else [])


def test_cancel_before_the_decision_refuses_the_attempt_once() -> None:
    attempt, held, told = holder("chat")
    held.feed(b'data: {"choices": [{"index": 0, "delta": {"tool_calls": []}}]}\n\n')
    held.cancel()
    held.cancel()
    assert attempt.quarantined is not None and attempt.quarantined.reason is R.CANCELLED
    assert held.decided and told.attempts == [attempt]
    assert held.release(True) == []


def test_cancel_after_the_decision_began_changes_nothing() -> None:
    attempt, held, told = holder("chat")
    held.begin_decision()
    held.cancel()
    assert attempt.quarantined is None and not told.attempts
    # The body never ended: concluding refuses it, and nothing goes out.
    assert held.conclude() is None
    assert attempt.quarantined is not None and attempt.quarantined.reason is R.DISCONNECTED
    assert held.release(False) == [] and told.attempts == [attempt]


def test_a_cancel_after_someone_else_released_the_attempt_tells_nobody() -> None:
    attempt, held, told = holder("chat")
    end_cleanly(held, "chat")
    assert attempt.conclude() == [] and attempt.release() == []
    held.cancel()
    assert attempt.quarantined is None and not told.attempts


def test_without_an_owner_nothing_is_told() -> None:
    attempt = Attempt(ToolRegistry.from_tools(tools("chat")))
    attempt.bind_response(content_type="text/event-stream", streamed=True, path=PATHS["chat"])
    held = Withholder(attempt, streamed=True)
    held.cancel()
    assert attempt.quarantined is not None


# What the core may not reach: the client library, the HTTP client, the network, the edge.
FORBIDDEN = {"litellm", "httpx", "openai", "anthropic", "socket", "asyncio", "sqlite3", "psycopg"}


def imported(path: Path) -> set[str]:
    """Every module ``path`` imports, relative imports resolved to absolute names."""
    package = path.relative_to(ROOT).with_suffix("").parts[:-1]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            names.add(".".join([*base, *filter(None, [node.module])]))
    return names


def test_the_core_imports_nothing_of_the_edge_or_of_io() -> None:
    core = sorted((ROOT / "litellm_toolgate" / "core").rglob("*.py"))
    assert ROOT / "litellm_toolgate" / "core" / "decision" / "withhold.py" in core
    for path in core:
        names = imported(path)
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, (path.name, name)
        assert all(
            not n.startswith("litellm_toolgate.") or n.startswith("litellm_toolgate.core")
            for n in names
        ), path.name


def test_find_quarantine_walks_causes_and_contexts_and_stops_at_a_cycle() -> None:
    fault = quarantine(R.CANCELLED, "att-1")
    outer, middle = RuntimeError("outer"), ValueError("middle")
    outer.__cause__, middle.__context__ = middle, fault
    assert find_quarantine(outer) is fault and find_quarantine(fault) is fault
    looped_a, looped_b = RuntimeError("a"), RuntimeError("b")
    looped_a.__context__, looped_b.__context__ = looped_b, looped_a
    assert find_quarantine(looped_a) is None and find_quarantine(None) is None


def _identified(wire: str, name: str, path: str, *, identify: bool) -> tuple[Any, list[bytes]]:
    """What a withholder releases of a good recording, asked to write identities or not."""
    body = (FIXTURES / wire / name).read_bytes()
    streamed = not name.endswith(".json")
    attempt = Attempt(ToolRegistry.from_tools(tools(wire)))
    media = {"gemini": "text/event-stream", "ollama": "application/x-ndjson"}[wire]
    attempt.bind_response(
        content_type=media if streamed else "application/json", streamed=streamed, path=path
    )
    held = Withholder(attempt, streamed=streamed, whole_here=True, identify=identify)
    live = stream(held, [body]) if streamed else held.feed(body)
    if not streamed:
        attempt.receive_body(body)
    released = live + approve(held)
    assert attempt.state is StreamState.RELEASED
    return body, released


GEMINI = "/v1beta/models/gemini-2.5-flash:streamGenerateContent"


@pytest.mark.parametrize(
    ("wire", "name", "path"),
    [
        ("gemini", "multiply_basic.sse", GEMINI),
        ("gemini", "two_calls_two_messages.sse", GEMINI),
        ("gemini", "whole_multiply.json", GEMINI.replace(":streamG", ":g")),
        ("ollama", "whole_without_id.json", "/api/chat"),
    ],
)
def test_identities_are_written_into_what_is_released_only_when_asked(
    wire: str, name: str, path: str
) -> None:
    """Asked to (litellm's Responses bridge), each call sent without an id goes out with the
    gate's identity of it, every other value as it was; not asked, nothing is written."""
    body, released = _identified(wire, name, path, identify=True)
    values = [json.loads(m.data) for m in messages(b"".join(released)) if m.data]
    if wire == "ollama" or not name.endswith(".sse"):
        values = [json.loads(b"".join(released))]
    if wire == "gemini":
        calls = [
            p["functionCall"]
            for v in values
            for c in v.get("candidates", [])
            for p in c.get("content", {}).get("parts", [])
            if "functionCall" in p
        ]
    else:
        calls = [c for v in values for c in v["message"].get("tool_calls", [])]
    prefix = f"{wire}-call-"
    assert [c.pop("id") for c in calls] == [f"{prefix}{i}" for i in range(len(calls))]
    assert calls  # each recording has calls
    # With the ids taken off again: the same values as the wire's, in order.
    original = (
        [json.loads(m.data) for m in messages(body) if m.data]
        if name.endswith(".sse")
        else [json.loads(body)]
    )
    assert values == original
    _, plain = _identified(wire, name, path, identify=False)
    assert f'"{prefix}'.encode() not in b"".join(plain)
