"""Responses item types beyond function calls, as real servers stream them: custom tools with
a grammar (lark, regex) checked against it, ``mcp_approval_request`` arguments parsed
strictly and shown to the policy, and the shapes the gate does not support yet (a shell call
or a tool search the server ran, answered in the same response) refused with that reason.

The core replays each fixture split at every byte offset; ``ToolGate.responses`` /
``aresponses`` read them through the real litellm from the loopback fake upstream one byte
per chunk. No argument text may appear in any error, record or log line (canary checks).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak
from wirecases import Fixtures

from litellm_toolgate import GateConfigError, QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.core import Attempt, PolicyDecision, ToolRegistry
from litellm_toolgate.core.rules.policy import ToolCall
from litellm_toolgate.core.values.grammar import format_of
from litellm_toolgate.core.wires.responses_items import ITEMS, NOT_SUPPORTED_YET, PASSING_ITEMS
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
ROOT = Path(__file__).resolve().parent.parent
RESPONSES = Fixtures("responses")
FIXTURES, MANIFEST, CASES = RESPONSES.folder, RESPONSES.manifest, RESPONSES.cases
REGISTRY = RESPONSES.registry
NAMES = [
    "custom_grammar_lark",
    "custom_grammar_lark_refused",
    "custom_grammar_regex",
    "custom_grammar_regex_refused",
    "mcp_approval_request",
    "mcp_approval_request_bad_arguments",
    "shell_call_run_by_server",
    "program_call_waiting",
    "program_call_waiting_strict",
    "program_call_in_progress_after_program_ended",
    "program_call_in_progress",
    "program_call_in_progress_strict",
    "program_call_listed_incomplete",
    "program_call_without_item_done",
    "direct_call_in_progress_at_done",
    "program_call_cut_before_completed",
]
# What the policy sees for each released case: (item type, executor, name, arguments).
SEEN = {
    "custom_grammar_lark": (
        "custom_tool_call",
        "client",
        "select_product",
        {"input": "SELECT 7 * 8 AS product"},
    ),
    "custom_grammar_regex": ("custom_tool_call", "client", "set_timer", {"input": "07:30"}),
    "program_call_waiting": ("function_call", "client", "multiply", {"a": 7, "b": 8}),
    "program_call_waiting_strict": ("function_call", "client", "multiply", {"a": 7, "b": 8}),
    "program_call_in_progress": ("function_call", "client", "multiply", {"a": 7, "b": 8}),
    "program_call_in_progress_strict": ("function_call", "client", "multiply", {"a": 7, "b": 8}),
    "mcp_approval_request": (
        "mcp_approval_request",
        "server",
        "mcp_approval_request",
        {
            "arguments": {"title": "7 times 8", "labels": ["math"]},
            "id": "mcpr_placeholder",
            "name": "create_issue",
            "server_label": "tracker",
            "type": "mcp_approval_request",
        },
    ),
}


def core_replay(pieces: list[bytes], route: str = "") -> tuple[list[ToolCall], list[Any], Any]:
    attempt = Attempt(REGISTRY, attempt_id="att-items", clock=lambda: 0.0, route=route)
    seen: list[ToolCall] = []
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True, path="/responses")
        for piece in pieces:
            attempt.receive_bytes(piece)
        attempt.receive_eof()
        for call in attempt.conclude():
            seen.append(call)
            attempt.decide(call.index, PolicyDecision.approve())
        released = list(attempt.release())
    except ToolCallQuarantined as exc:
        return seen, [], exc
    return seen, released, None


def expect(name: str, seen: list[ToolCall], released: list[Any], fault: Any) -> None:
    case = CASES[name]
    if case["expect"] == "quarantine":
        assert fault is not None, name
        assert fault.reason is R(case["reason"]), (name, fault.reason)
        assert released == []
        no_leak(fault)
        return
    assert fault is None, (name, fault)
    kind, executor, tool, arguments = SEEN[name]
    [call] = seen
    assert (call.type, call.executor, call.name) == (kind, executor, tool)
    got = dict(call.arguments)
    if "id" in arguments:
        got["id"] = "mcpr_placeholder"
    assert got == arguments
    # A server report is shown to the policy, never released as a call to run.
    assert len(released) == (1 if executor == "client" else 0)


@pytest.mark.parametrize("name", NAMES)
def test_the_core_at_every_byte_split(name: str) -> None:
    data = (FIXTURES / CASES[name]["body"]).read_bytes()
    route = CASES[name].get("route", "")
    expect(name, *core_replay([data], route))
    for cut in range(1, len(data)):
        expect(name, *core_replay([data[:cut], data[cut:]], route))


@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", NAMES)
def test_through_toolgate_one_byte_at_a_time(
    upstream: FakeUpstream, name: str, asynchronous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    seen: list[ToolCall] = []

    def policy(call: ToolCall) -> PolicyDecision:
        seen.append(call)
        return PolicyDecision.approve()

    data = (FIXTURES / CASES[name]["body"]).read_bytes()
    upstream.enqueue(Scripted(data, chunk_sizes=[1]))
    # A case recorded for a strict route runs natively with the openai/ profile switched off.
    route = CASES[name].get("route", "openai/gpt-4o-mini")
    profiles = {} if route.startswith("openai/") else {"openai/gpt-4o-mini": "strict"}
    kwargs: dict[str, Any] = {
        "model": route if route.startswith("openai/") else "openai/gpt-4o-mini",
        "input": "What is 7 times 8?",
        "tools": MANIFEST["tools"],
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
    }
    events: list[Any] = []
    fault: ToolCallQuarantined | None = None
    caplog.set_level(logging.DEBUG, logger="litellm_toolgate")
    with ToolGate(MANIFEST["tools"], policy=policy, route_profiles=profiles) as gate:

        async def go() -> None:
            async for event in await gate.aresponses(**kwargs):
                events.append(event)

        try:
            if asynchronous:
                asyncio.run(go())
            else:
                events.extend(gate.responses(**kwargs))
        except ToolCallQuarantined as exc:
            fault = exc
    kinds = [str(getattr(e.type, "value", e.type)) for e in events]
    released = [
        e
        for e, k in zip(events, kinds, strict=True)
        if k == "response.output_item.done"
        and getattr(e.item, "type", None) in ("custom_tool_call", "function_call")
    ]
    if CASES[name]["expect"] == "release":
        assert kinds[-1] == "response.completed"
    else:
        assert "response.completed" not in kinds
        # Nothing of a gated item reached the caller (a program item, no tool, passes live).
        assert not [k for k in kinds if "_call" in k]
        assert all(
            getattr(e.item, "type", None) in PASSING_ITEMS
            for e, k in zip(events, kinds, strict=True)
            if k.startswith("response.output_item.")
        )
    expect(name, seen, released, fault)
    assert CANARY not in caplog.text


# ---- grammars ---------------------------------------------------------------------------------
def custom(form: Any) -> dict[str, Any]:
    return {"type": "custom", "name": "t", "format": form}


@pytest.mark.parametrize(
    "form",
    [
        {"type": "grammar", "syntax": "lark", "definition": "start: ("},
        # a reduce/reduce conflict: LALR(1) cannot build it (Earley would, in cubic time)
        {"type": "grammar", "syntax": "lark", "definition": 'start: a | b\na: "x"\nb: "x"'},
        {"type": "grammar", "syntax": "lark", "definition": 'other: "a"'},
        {"type": "grammar", "syntax": "regex", "definition": "(a"},
        {"type": "grammar", "syntax": "regex", "definition": "(a)\\1"},
        {"type": "grammar", "syntax": "ebnf", "definition": 'start: "a"'},
        {"type": "grammar", "syntax": "lark", "definition": ""},
        {"type": "regex", "definition": "a"},
        "text",
    ],
)
def test_a_grammar_that_cannot_be_checked_is_refused_at_registration(form: Any) -> None:
    with pytest.raises(GateConfigError):
        ToolRegistry.from_tools([custom(form)])
    with pytest.raises(GateConfigError):
        ToolGate([custom(form)])


def test_a_text_format_or_none_declares_no_grammar() -> None:
    registry = ToolRegistry.from_tools(
        [custom({"type": "text"}), {"type": "custom", "name": "u"}, {"type": "shell"}]
    )
    assert dict(registry.grammars) == {}
    assert {"custom:t", "custom:u"} <= registry.declared


@pytest.mark.parametrize(
    ("syntax", "definition", "text", "accepted"),
    [
        ("regex", "[0-9]+", "123", True),
        ("regex", "[0-9]+", "123\n", False),  # ECMA: no match before a final newline
        ("regex", "[0-9]+", "x123", False),  # a full match, not a search
        ("regex", "\\d+", "\u0663", False),  # ECMA \d is ASCII digits only
        ("regex", "^a|b$", "ab", False),
        ("lark", 'start: "a"+', "aaa", True),
        ("lark", 'start: "a"+', "aab", False),
        ("lark", 'start: "a"+', "", False),
        ("lark", 'start: x ("," x)*\nx: /[a-z]+/', "ab,cd", True),
        ("lark", 'start: x ("," x)*\nx: /[a-z]+/', "ab,,cd", False),
    ],
)
def test_grammar_verdicts(syntax: str, definition: str, text: str, accepted: bool) -> None:
    form = {"type": "grammar", "syntax": syntax, "definition": definition}
    grammar = format_of("t", {"format": form})
    assert grammar is not None
    assert grammar.accepts(text) is accepted


def test_a_lark_grammar_is_checked_in_linear_time() -> None:
    # Earley took about 15 s on 100 characters of this ambiguous grammar, and 30 s on 20,000
    # repetitions of "a"; LALR answers both at once (generous bounds for a busy machine).
    import time

    ambiguous = format_of(
        "t",
        {"format": {"type": "grammar", "syntax": "lark", "definition": 'start: e\ne: e e | "a"'}},
    )
    repeated = format_of(
        "t", {"format": {"type": "grammar", "syntax": "lark", "definition": 'start: "a"+'}}
    )
    assert ambiguous is not None and repeated is not None
    started = time.perf_counter()
    assert ambiguous.accepts("a" * 200)
    assert repeated.accepts("a" * 20_000)
    assert not repeated.accepts("a" * 20_000 + "b")
    assert time.perf_counter() - started < 10


def test_a_refused_grammar_input_keeps_no_text() -> None:
    _, _, fault = core_replay([(FIXTURES / "custom_grammar_lark_refused.sse").read_bytes()])
    assert fault is not None and fault.reason is R.SCHEMA_INVALID
    [record] = fault.records
    assert (record.schema_keyword, record.schema_path) == ("grammar", "/input")
    assert record.item_type == "custom_tool_call"
    assert fault.__cause__ is None and fault.__context__ is None


def test_unsupported_item_types_are_named_and_documented() -> None:
    doc = (ROOT / "docs" / "responses.md").read_text(encoding="utf-8")
    for kind in NOT_SUPPORTED_YET:
        assert kind not in ITEMS
        assert f"`{kind}`" in doc, kind
    assert ITEMS["mcp_approval_request"].field == "arguments"
