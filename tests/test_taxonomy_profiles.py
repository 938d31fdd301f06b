"""The Responses item taxonomy as the policy sees it, the route profiles, and chat ``n > 1``.

Core cases run the sans-I/O attempt on recorded fixtures (``fixtures/responses``) and on
small chat bodies in the shapes the profiles name; the ``n > 1`` refusal runs through
``ToolGate`` and litellm against a loopback upstream, which must receive nothing.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import litellm
import pytest

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.core import Attempt, PolicyDecision, ToolRegistry
from litellm_toolgate.core.decision.profiles import PROFILES, Deviation, profile_for
from litellm_toolgate.core.rules.policy import ToolCall
from litellm_toolgate.core.wires.responses import passes_live
from litellm_toolgate.core.wires.responses_items import ITEMS, Executor, check_input
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "responses"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
REGISTRY = ToolRegistry.from_tools(MANIFEST["tools"])
MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}
CHAT_REGISTRY = ToolRegistry.from_tools([MULTIPLY])


def run_responses(name: str, policy: Any = None, route: str = "") -> tuple[list[ToolCall], Any]:
    """Replay a Responses fixture; the calls the policy saw, and the fault (or None)."""
    attempt = Attempt(REGISTRY, attempt_id="att-t", route=route)
    seen: list[ToolCall] = []
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True, path="/responses")
        attempt.receive_bytes((FIXTURES / CASES[name]["body"]).read_bytes())
        attempt.receive_eof()
        for call in attempt.conclude():
            seen.append(call)
            attempt.decide(call.index, policy(call) if policy else PolicyDecision.approve())
        attempt.release()
    except ToolCallQuarantined as exc:
        return seen, exc
    return seen, None


# ---- the taxonomy ------------------------------------------------------------------------
def test_the_policy_sees_every_gated_item_with_its_type_and_executor() -> None:
    seen, fault = run_responses("web_search_then_call")
    assert fault is None
    assert [(c.type, c.executor, c.name) for c in seen] == [
        ("web_search_call", "server", "web_search"),
        ("function_call", "client", "multiply"),
    ]


def test_a_deployment_can_allow_web_search_and_deny_shell() -> None:
    def policy(call: ToolCall) -> PolicyDecision:
        return PolicyDecision(call.type != "shell_call", "no shell")

    assert run_responses("web_search_then_call", policy)[1] is None
    fault = run_responses("shell_call", policy)[1]
    assert fault is not None and fault.reason is R.POLICY_DENIED


def test_a_server_report_is_never_released_as_a_call() -> None:
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="text/event-stream", streamed=True, path="/responses")
    attempt.receive_bytes((FIXTURES / CASES["web_search_then_call"]["body"]).read_bytes())
    attempt.receive_eof()
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    assert [c.name for c in attempt.release()] == ["multiply"]
    records = attempt.records()
    assert [r.execution_state for r in records] == ["released", "released"]
    assert [(r.item_type, r.executor, r.tool_name) for r in records] == [
        ("web_search_call", "server", "web_search"),
        ("function_call", "client", "multiply"),
    ]


def test_a_client_item_nobody_declared_is_an_unknown_tool() -> None:
    attempt = Attempt(ToolRegistry.from_tools([MULTIPLY]))
    attempt.bind_response(content_type="text/event-stream", streamed=True, path="/responses")
    attempt.receive_bytes((FIXTURES / CASES["shell_call"]["body"]).read_bytes())
    attempt.receive_eof()
    with pytest.raises(ToolCallQuarantined) as caught:
        attempt.conclude()
    assert caught.value.reason is R.UNKNOWN_TOOL


def test_the_patch_refusal_names_no_content() -> None:
    fault = run_responses("apply_patch_bad_diff")[1]
    assert fault is not None and fault.reason is R.SCHEMA_INVALID
    record = fault.records[0]
    assert (record.schema_keyword, record.schema_path) == ("operation", "/diff")
    assert "CANARY" not in record.model_dump_json() and "CANARY" not in repr(fault)


@pytest.mark.parametrize(
    ("kind", "value", "fault"),
    [
        ("apply_patch_call", {"type": "create_file", "path": "a", "diff": "+x\n+y\n"}, None),
        ("apply_patch_call", {"type": "create_file", "path": "a", "diff": "x\n"}, "/diff"),
        ("apply_patch_call", {"type": "update_file", "path": "a", "diff": " ctx\n"}, "/diff"),
        ("apply_patch_call", {"type": "delete_file", "path": "a"}, None),
        ("apply_patch_call", {"type": "delete_file", "path": "a", "diff": "+x"}, "/diff"),
        ("apply_patch_call", {"type": "rename_file", "path": "a"}, "/type"),
        ("apply_patch_call", {"type": "update_file", "path": "", "diff": "+x"}, "/path"),
        ("local_shell_call", {"type": "exec", "command": ["ls", "-l"]}, None),
        ("local_shell_call", {"type": "exec", "command": "ls -l"}, "/command"),
        ("local_shell_call", {"type": "exec", "command": []}, "/command"),
        ("shell_call", {"commands": ["ls"], "timeout_ms": -1}, "/timeout_ms"),
        ("computer_call", {"action": {"type": "click", "x": 1, "y": 2}}, None),
        ("computer_call", {"action": {"type": "format_disk"}}, "/action"),
        ("computer_call", {"actions": [{"type": "move"}, {"type": "screenshot"}]}, None),
        ("computer_call", {"actions": [{"type": "move"}, {"type": "erase"}]}, "/actions"),
        ("computer_call", {"actions": []}, "/"),
        ("computer_call", {}, "/"),
    ],
)
def test_structured_inputs(kind: str, value: dict[str, Any], fault: str | None) -> None:
    assert check_input(kind, value) == fault


def test_the_taxonomy_covers_the_issue_item_types() -> None:
    client = {"function_call", "custom_tool_call", "local_shell_call", "shell_call"}
    client |= {"apply_patch_call", "computer_call"}
    server = {"web_search_call", "file_search_call", "code_interpreter_call"}
    server |= {"image_generation_call", "mcp_list_tools", "mcp_call", "mcp_approval_request"}
    server |= {"tool_search_call", "tool_search_output", "shell_call_output"}
    nobody = {"message", "reasoning", "compaction", "program", "program_output"}
    for kinds, who in ((client, Executor.CLIENT), (server, Executor.SERVER), (nobody, None)):
        for kind in kinds:
            assert ITEMS[kind].executor is (who or Executor.NOBODY), kind
    assert set(ITEMS) == client | server | nobody


def test_a_lifecycle_event_hiding_a_call_does_not_pass_live() -> None:
    hidden = {"type": "function_call", "id": "fc", "call_id": "c", "name": "multiply"}
    plain = {"type": "response.in_progress", "response": {"id": "r", "output": []}}
    hiding = {"type": "response.in_progress", "response": {"id": "r", "output": [hidden]}}
    assert passes_live(plain) and not passes_live(hiding)
    assert not passes_live({"type": "response.vendor.thing", "item": hidden})


# ---- profiles ----------------------------------------------------------------------------
def test_every_profile_entry_has_citations_and_a_fixture() -> None:
    for profile in PROFILES.values():
        for entry in profile.entries:
            assert entry.citations and all(c.startswith("https://") for c in entry.citations)
            wire_dir, name = entry.fixture.split("/")
            assert (ROOT / "fixtures" / wire_dir / f"{name}.sse").is_file(), entry.fixture
    assert profile_for("gpt-4o").entries == ()
    assert profile_for("cometapi/gpt-4o").entries == ()
    assert profile_for("Mistral/large").accepts(Deviation.CONTENT_AS_PARTS)


@pytest.mark.parametrize(
    ("name", "strict_reason"),
    [
        ("lm_studio_arguments_only_in_done", R.ITEM_MISMATCH),
        ("copilot_rotating_response_id", R.SPLICED_RESPONSE),
    ],
)
def test_a_responses_profile_releases_only_on_its_route(name: str, strict_reason: Any) -> None:
    seen, fault = run_responses(name, route=CASES[name]["route"])
    assert fault is None and [c.name for c in seen] == [c["name"] for c in CASES[name]["calls"]]
    fault = run_responses(name, route="cometapi/x")[1]
    assert fault is not None and fault.reason is strict_reason


def chunk(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> bytes:
    payload = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1}
    payload["choices"] = [{"index": index, "delta": delta, "finish_reason": finish}]
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


CALL = {"id": "call_1", "type": "function", "function": {"name": "multiply"}}
INDEXED = {**CALL, "index": 0, "function": {"name": "multiply", "arguments": '{"a": 7, "b": 8}'}}
STOP_WITH_CALL = (
    chunk({"role": "assistant", "tool_calls": [INDEXED]}) + chunk({}, "stop") + b"data: [DONE]\n\n"
)


def run_chat(body: bytes, route: str, request: dict[str, Any] | None = None) -> Any:
    attempt = Attempt(CHAT_REGISTRY, route=route)
    try:
        attempt.bind_request("/v1/chat/completions", request or {})
        attempt.bind_response(content_type="text/event-stream", streamed=True)
        attempt.receive_bytes(body)
        attempt.receive_eof()
        calls = attempt.conclude()
        for call in calls:
            attempt.decide(call.index, PolicyDecision.approve())
        return attempt.release()
    except ToolCallQuarantined as exc:
        return exc.reason


NAMED = {"type": "function", "function": {"name": "multiply"}}


@pytest.mark.parametrize(
    ("route", "tool_choice", "released"),
    [
        ("openai/gpt-4o", NAMED, True),
        ("openai/gpt-4o", "required", True),
        ("openai/gpt-4o", "auto", False),
        ("openai/gpt-4o", None, False),
        ("hosted_vllm/qwen", NAMED, True),
        ("hosted_vllm/qwen", "required", False),
        ("cometapi/gpt-4o", NAMED, False),
        ("gpt-4o", NAMED, False),
    ],
)
def test_forced_tool_choice_stop(route: str, tool_choice: Any, released: bool) -> None:
    outcome = run_chat(STOP_WITH_CALL, route, {"tool_choice": tool_choice})
    if released:
        assert [c.name for c in outcome] == ["multiply"]
    else:
        assert outcome is R.FINISH_REASON_MISMATCH


def test_forced_tool_choice_never_relaxes_the_call_itself() -> None:
    bad = {**INDEXED, "function": {"name": "multiply", "arguments": '{"a": "7"}'}}
    body = chunk({"tool_calls": [bad]}) + chunk({}, "stop") + b"data: [DONE]\n\n"
    assert run_chat(body, "openai/gpt-4o", {"tool_choice": NAMED}) is R.SCHEMA_INVALID
    text_only = chunk({"content": "hi"}) + chunk({}, "stop") + b"data: [DONE]\n\n"
    assert run_chat(text_only, "openai/gpt-4o", {"tool_choice": NAMED}) == []


WHOLE = [
    {"id": "call_a", "function": {"name": "multiply", "arguments": '{"a": 7, "b": 8}'}},
    {"id": "call_b", "function": {"name": "multiply", "arguments": '{"a": 1, "b": 2}'}},
]
MISTRAL = (
    chunk({"role": "assistant", "content": [{"type": "thinking", "thinking": [{"type": "text"}]}]})
    + chunk({"content": [{"type": "text", "text": "Computing."}]})
    + chunk({"tool_calls": [WHOLE[0]]})
    + chunk({"tool_calls": [WHOLE[1]]}, "tool_calls")
    + b"data: [DONE]\n\n"
)


def test_mistral_whole_calls_and_typed_parts_on_its_route_only() -> None:
    released = run_chat(MISTRAL, "mistral/magistral-medium-latest")
    assert [(c.index, c.call_id) for c in released] == [(0, "call_a"), (1, "call_b")]
    assert run_chat(MISTRAL, "openai/gpt-4o") is R.MALFORMED_EVENT
    repeated = chunk({"tool_calls": [WHOLE[0]]}) + chunk({"tool_calls": [WHOLE[0]]}, "tool_calls")
    assert run_chat(repeated + b"data: [DONE]\n\n", "mistral/x") is R.IDENTITY_CONFLICT
    no_args = chunk({"tool_calls": [CALL]}, "tool_calls") + b"data: [DONE]\n\n"
    assert run_chat(no_args, "mistral/x") is R.MISSING_CALL_IDENTITY


# ---- chat n > 1 --------------------------------------------------------------------------
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_n_greater_than_one_is_gated_choice_by_choice(asynchronous: bool) -> None:
    """Once refused unsent, a chat request for ``n = 2`` is now sent and read choice by
    choice: here choice 1 never sends its own finish, so the stream is cut
    (``tests/test_gate_choices.py`` has the rest)."""
    import asyncio

    two = chunk({"content": "a"}) + chunk({"content": "b"}, index=1)
    gate = ToolGate([MULTIPLY])
    with FakeUpstream() as upstream:
        upstream.enqueue(Scripted(two + chunk({}, "stop") + b"data: [DONE]\n\n"))
        kwargs: dict[str, Any] = {
            "model": "cometapi/gpt-4o",
            "messages": [{"role": "user", "content": "hi"}],
            "api_base": upstream.base_url,
            "api_key": "sk-test",
            "stream": True,
            "n": 2,
        }
        with pytest.raises(ToolCallQuarantined) as caught:
            if asynchronous:

                async def go() -> None:
                    async for _ in await gate.acompletion(**kwargs):
                        pass

                asyncio.run(go())
            else:
                for _ in gate.completion(**kwargs):
                    pass
        assert [r.get("n") for r in upstream.requests] == [2]
    assert caught.value.reason is R.MISSING_FINISH


PROFILE_FIXTURES = ROOT / "fixtures" / "profiles"
PROFILE_CASES = json.loads((PROFILE_FIXTURES / "manifest.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", PROFILE_CASES["cases"], ids=lambda c: c["name"])
def test_profile_fixtures_release_on_their_route_and_not_elsewhere(case: dict[str, Any]) -> None:
    body = (PROFILE_FIXTURES / case["body"]).read_bytes()
    released = run_chat(body, case["route"], case.get("request"))
    assert isinstance(released, list), released
    assert run_chat(body, "cometapi/x", case.get("request")) is R(case["strict"])


def completed_body(name: str) -> bytes:
    """The whole-body form of a fixture: the response its ``response.completed`` carries."""
    for line in (FIXTURES / CASES[name]["body"]).read_text(encoding="utf-8").splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            return json.dumps(json.loads(line[5:])["response"]).encode()
    raise AssertionError(name)


@pytest.mark.parametrize(
    "name",
    ["web_search_then_call", "custom_tool_call", "apply_patch_call", "shell_call",
     "message_and_compaction", "program_items"],
)  # fmt: skip
def test_whole_bodies_follow_the_same_taxonomy(name: str) -> None:
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="application/json", streamed=False, path="/responses")
    attempt.receive_body(completed_body(name))
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    released = [
        {"call_id": c.call_id, "name": c.name, "arguments": c.arguments} for c in attempt.release()
    ]
    assert released == CASES[name].get("released", CASES[name]["calls"])


def test_a_whole_body_listing_a_call_incomplete_is_refused() -> None:
    body = json.loads(completed_body("multiply_basic"))
    for item in body["output"]:
        if item["type"] == "function_call":
            item["status"] = "incomplete"
    attempt = Attempt(REGISTRY)
    attempt.bind_response(content_type="application/json", streamed=False, path="/responses")
    with pytest.raises(ToolCallQuarantined) as caught:
        attempt.receive_body(json.dumps(body).encode())
    assert caught.value.reason is R.INCOMPLETE_ITEM


# ---- the profiles end to end: ToolGate over litellm, against a loopback upstream ---------------
def _chat_through_gate(
    gate: ToolGate, model: str, body: bytes, asynchronous: bool, **extra: Any
) -> tuple[list[Any], ToolCallQuarantined | None]:
    import asyncio

    with FakeUpstream() as upstream:
        upstream.enqueue(Scripted(body, chunk_sizes=[5, 64, 3]))
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [{"role": "user", "content": "What is 7 times 8?"}],
            "tools": copy.deepcopy([MULTIPLY]),  # litellm's mistral/ route edits its tools
            "api_base": upstream.base_url,
            "api_key": "sk-test",
            "stream": True,
            **extra,
        }
        chunks: list[Any] = []
        try:
            if asynchronous:

                async def go() -> None:
                    async for piece in await gate.acompletion(**kwargs):
                        chunks.append(piece)

                asyncio.run(go())
            else:
                chunks.extend(gate.completion(**kwargs))
        except ToolCallQuarantined as exc:
            return chunks, exc
    return chunks, None


def _calls(chunks: list[Any]) -> list[tuple[str | None, str | None]]:
    found = []
    for piece in chunks:
        for call in piece.choices[0].delta.tool_calls or []:
            found.append((call.id, call.function.name))
    return [f for f in found if f[0]]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_forced_choice_stop_through_the_gate(asynchronous: bool) -> None:
    case = next(c for c in PROFILE_CASES["cases"] if c["name"] == "forced_choice_stop_with_calls")
    body = (PROFILE_FIXTURES / case["body"]).read_bytes()
    gate = ToolGate([MULTIPLY])
    forced = {"tool_choice": case["request"]["tool_choice"]}
    chunks, error = _chat_through_gate(gate, "hosted_vllm/qwen3", body, asynchronous, **forced)
    assert error is None and _calls(chunks) == [("call_forced", "multiply")]
    chunks, error = _chat_through_gate(gate, "hosted_vllm/qwen3", body, asynchronous)
    assert error is not None and error.reason is R.FINISH_REASON_MISMATCH
    assert _calls(chunks) == []


async def _drain(gate: ToolGate, kwargs: dict[str, Any], events: list[Any]) -> None:
    async for event in await gate.aresponses(**kwargs):
        events.append(event)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_lm_studio_behind_openai_through_the_gate(asynchronous: bool) -> None:
    import asyncio

    data = (FIXTURES / CASES["lm_studio_arguments_only_in_done"]["body"]).read_bytes()
    named = ToolGate(MANIFEST["tools"], route_profiles={"openai/gpt-4o-mini": "lm_studio"})
    outcomes = []
    for gate in (named, ToolGate(MANIFEST["tools"])):
        with FakeUpstream() as upstream:
            upstream.enqueue(Scripted(data, chunk_sizes=[7, 64, 3]))
            kwargs: dict[str, Any] = {
                "model": "openai/gpt-4o-mini",
                "input": "write the notes",
                "tools": MANIFEST["tools"],
                "api_base": upstream.base_url,
                "api_key": "sk-test",
                "stream": True,
            }
            events: list[Any] = []
            try:
                if asynchronous:
                    asyncio.run(_drain(gate, kwargs, events))
                else:
                    events.extend(gate.responses(**kwargs))
                outcomes.append(str(getattr(events[-1].type, "value", events[-1].type)))
            except ToolCallQuarantined as exc:
                outcomes.append(exc.reason.value)
    assert outcomes == ["response.completed", "item_mismatch"]


def test_route_profiles_are_checked_at_start_up() -> None:
    from litellm_toolgate.core.errors import GateConfigError

    with pytest.raises(GateConfigError):
        ToolGate([MULTIPLY], route_profiles={"openai/x": "lmstudio"})
    with pytest.raises(GateConfigError):
        ToolGate([MULTIPLY], route_profiles=["lm_studio"])  # type: ignore[arg-type]


MISTRAL_CASES = [c for c in PROFILE_CASES["cases"] if c["route"].startswith("mistral/")]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("case", MISTRAL_CASES, ids=lambda c: c["name"])
def test_mistral_shapes_through_the_gate(case: dict[str, Any], asynchronous: bool) -> None:
    body = (PROFILE_FIXTURES / case["body"]).read_bytes()
    gate = ToolGate([MULTIPLY])
    chunks, error = _chat_through_gate(gate, case["route"], body, asynchronous)
    assert error is None, error
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    if case["name"] == "mistral_content_parts":
        assert text == "56." and _calls(chunks) == []
    else:
        assert _calls(chunks) == [("Dq1", "multiply")]
    # The same bytes on a route without the profile: refused, no call handed out.
    chunks, error = _chat_through_gate(gate, "hosted_vllm/x", body, asynchronous)
    assert error is not None and error.reason is R(case["strict"]) and _calls(chunks) == []


def test_the_documentation_tables_name_every_item_type_and_every_citation() -> None:
    doc = (ROOT / "docs" / "responses.md").read_text(encoding="utf-8")
    for kind in ITEMS:
        assert f"`{kind}`" in doc, kind
    for profile in PROFILES.values():
        assert f"`{profile.route}/`" in doc, profile.route
        for entry in profile.entries:
            for citation in entry.citations:
                assert citation in doc, citation
