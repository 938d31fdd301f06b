"""Responses items the server runs itself, and the calls the caller must run beside them.

Each shape is built here by hand, event by event, as its server streams it (the item shapes
of openai-python ``types/responses/``, and xAI's recorded X search stream): the hosted shell
in a container with skills, a server-run tool search that loads a tool the model then calls,
xAI's X search steps streamed as ``custom_tool_call`` items, a plain custom tool call. Each
is judged by the core whole and at random splits, and through the real litellm
(``ToolGate.responses`` / ``aresponses`` on ``openai/`` against the loopback upstream, one
byte per chunk), sync and async: the valid shape completes with only the caller's own calls
released, and its broken variants (cut before the terminal, an item finished without its
``output_item.done``, an item type nobody knows, a status the terminal contradicts) are
refused with the gate's typed reason and nothing of a call reaches the caller.
"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import litellm
import pytest
from conftest import CANARY, no_leak

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.core import Attempt, PolicyDecision, ToolRegistry
from litellm_toolgate.core.rules.policy import ToolCall
from litellm_toolgate.core.wires.responses_items import runs_on_server
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason
MULTIPLY = {
    "type": "function",
    "name": "multiply",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
}
HOSTED_SHELL = {
    "type": "shell",
    "environment": {
        "type": "container_auto",
        "skills": [{"type": "skill_reference", "skill_id": "skill_abc"}],
    },
}
ARGS = '{"a": 7, "b": 8}'


@dataclass
class Body:
    """One Responses SSE body, built event by event."""

    response_id: str = "resp_hosted_1"
    parts: list[bytes] = field(default_factory=list)
    listing: list[dict[str, Any]] = field(default_factory=list)
    seq: int = 0

    def event(self, kind: str, **fields: Any) -> None:
        payload = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        self.parts.append(f"event: {kind}\ndata: {json.dumps(payload)}\n\n".encode())

    def response(self, status: str, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": self.response_id, "object": "response", "created_at": 1767225600,
                "status": status, "model": "gpt-5", "output": output}  # fmt: skip

    def start(self) -> None:
        self.event("response.created", response=self.response("in_progress", []))
        self.event("response.in_progress", response=self.response("in_progress", []))

    def whole(self, index: int, item: dict[str, Any], *, done: bool = True) -> None:
        """An item that arrives whole: added in progress, done as it is listed."""
        self.event(
            "response.output_item.added",
            output_index=index,
            item={**item, "status": "in_progress"} if "status" in item else item,
        )
        if done:
            self.event("response.output_item.done", output_index=index, item=item)
        self.listing.append(item)

    def streamed(self, index: int, item: dict[str, Any], family: str, field_: str) -> None:
        """A call whose input streams as deltas, then its ``.done``, then the item's done."""
        text = item[field_]
        self.event(
            "response.output_item.added",
            output_index=index,
            item={**item, field_: "", "status": "in_progress"},
        )
        for at in range(0, len(text), 7):
            self.event(
                f"{family}.delta", item_id=item["id"], output_index=index, delta=text[at : at + 7]
            )
        self.event(f"{family}.done", item_id=item["id"], output_index=index, **{field_: text})
        self.event("response.output_item.done", output_index=index, item=item)
        self.listing.append(item)

    def message(self, index: int, text: str) -> None:
        item_id = f"msg_{index}"
        self.event(
            "response.output_item.added",
            output_index=index,
            item={"id": item_id, "type": "message", "status": "in_progress",
                  "role": "assistant", "content": []},
        )  # fmt: skip
        self.event(
            "response.output_text.delta",
            item_id=item_id,
            output_index=index,
            content_index=0,
            delta=text,
        )
        done = {"id": item_id, "type": "message", "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
        self.event("response.output_item.done", output_index=index, item=done)
        self.listing.append(done)

    def completed(self, listing: list[dict[str, Any]] | None = None) -> bytes:
        output = self.listing if listing is None else listing
        self.event("response.completed", response=self.response("completed", output))
        return self.body()

    def body(self) -> bytes:
        return b"".join(self.parts)


def function_call(index: int) -> dict[str, Any]:
    return {"id": f"fc_{index}", "type": "function_call", "call_id": f"call_{index}",
            "name": "multiply", "arguments": ARGS, "status": "completed"}  # fmt: skip


# ---- the shapes --------------------------------------------------------------------------------
def hosted_shell(b: Body, *, done: bool = True) -> None:
    """The hosted shell in a container: the server runs the command and streams its output
    (openai-python response_function_shell_tool_call.py, environment container_reference;
    response_shell_call_output_content_*_event.py; response_function_shell_tool_call_output.py)."""
    b.start()
    call = {"id": "sh_0", "type": "shell_call", "call_id": "call_sh", "status": "completed",
            "action": {"commands": [f"echo {CANARY}"], "timeout_ms": 5000},
            "environment": {"type": "container_reference", "container_id": "cntr_1"}}  # fmt: skip
    b.event(
        "response.output_item.added",
        output_index=0,
        item={**call, "status": "in_progress", "action": {"commands": []}},
    )
    b.event("response.shell_call_command.added", output_index=0, command_index=0, command="")
    b.event("response.shell_call_command.delta", output_index=0, command_index=0, delta="echo ")
    b.event(
        "response.shell_call_command.done",
        output_index=0,
        command_index=0,
        command=f"echo {CANARY}",
    )
    b.event("response.output_item.done", output_index=0, item=call)
    b.listing.append(call)
    out = [{"stdout": "56\n", "stderr": "", "outcome": {"type": "exit", "exit_code": 0}}]
    output = {"id": "sho_1", "type": "shell_call_output", "call_id": "call_sh",
              "status": "completed", "output": out}  # fmt: skip
    b.event(
        "response.output_item.added",
        output_index=1,
        item={**output, "status": "in_progress", "output": []},
    )
    b.event(
        "response.shell_call_output_content.delta",
        item_id="sho_1",
        output_index=1,
        command_index=0,
        delta={"stdout": "56\n"},
    )
    b.event(
        "response.shell_call_output_content.done",
        item_id="sho_1",
        output_index=1,
        command_index=0,
        output=out,
    )
    if done:
        b.event("response.output_item.done", output_index=1, item=output)
    b.listing.append(output)
    b.message(2, "It printed 56.")


def local_shell(b: Body, *, done: bool = True) -> None:
    """The shell tool with no environment: the model streams the command and the caller runs
    it (openai-python response_function_shell_tool_call.py; the shell_call_command events of
    vercel/ai's recorded openai-shell-tool stream)."""
    b.start()
    call = {"id": "sh_0", "type": "shell_call", "call_id": "call_sh", "status": "completed",
            "action": {"commands": [f"ls {CANARY}"], "max_output_length": 8912,
                       "timeout_ms": None}}  # fmt: skip
    b.event(
        "response.output_item.added",
        output_index=0,
        item={**call, "status": "in_progress",
              "action": {"commands": [], "max_output_length": None, "timeout_ms": None}},
    )  # fmt: skip
    b.event("response.shell_call_command.added", output_index=0, command_index=0, command="")
    for delta in ("ls", f" {CANARY}"):
        b.event("response.shell_call_command.delta", output_index=0, command_index=0, delta=delta)
    b.event(
        "response.shell_call_command.done", output_index=0, command_index=0, command=f"ls {CANARY}"
    )
    if done:
        b.event("response.output_item.done", output_index=0, item=call)
    b.listing.append(call)


def tool_search(b: Body, *, done: bool = True) -> None:
    """A search the server ran (execution "server") loads multiply; the model then calls it
    (openai-python response_tool_search_call.py, response_tool_search_output_item.py)."""
    b.start()
    b.whole(0, {"id": "ts_0", "type": "tool_search_call", "execution": "server",
                "call_id": None, "status": "completed",
                "arguments": {"query": "multiply numbers"}})  # fmt: skip
    b.whole(
        1,
        {"id": "tso_1", "type": "tool_search_output", "execution": "server", "call_id": None,
         "status": "completed", "tools": [MULTIPLY]},
        done=done,
    )  # fmt: skip
    b.streamed(2, function_call(2), "response.function_call_arguments", "arguments")


def x_search(b: Body, *, done: bool = True) -> None:
    """xAI's X search: each step a custom_tool_call xAI names and runs, then a web search
    report and the answer (the recorded xAI stream in vercel/ai's xai fixtures)."""
    b.response_id = "b7b464ea-cc85-d44a-0f2f-1f7320e703c3"
    b.start()
    query = json.dumps({"query": f"from:xai {CANARY}", "limit": 20, "mode": "Latest"})
    b.streamed(
        0,
        {"id": "ctc_x_0", "type": "custom_tool_call", "call_id": "xs_call_0",
         "name": "x_keyword_search", "input": query, "status": "completed"},
        "response.custom_tool_call_input",
        "input",
    )  # fmt: skip
    b.event(
        "response.output_item.added",
        output_index=1,
        item={"id": "ws_1", "type": "web_search_call", "status": "in_progress",
              "action": {"type": "search", "query": "", "sources": []}},
    )  # fmt: skip
    b.event("response.web_search_call.in_progress", item_id="ws_1", output_index=1)
    b.event("response.web_search_call.searching", item_id="ws_1", output_index=1)
    b.event("response.web_search_call.completed", item_id="ws_1", output_index=1)
    search = {"id": "ws_1", "type": "web_search_call", "status": "completed",
              "action": {"type": "search", "query": "", "sources": []}}  # fmt: skip
    if done:
        b.event("response.output_item.done", output_index=1, item=search)
    b.listing.append(search)
    b.message(2, "Here is what xAI posted.")


def custom_call(b: Body, *, done: bool = True) -> None:
    """A custom tool call: its type has no status (openai-python
    response_custom_tool_call.py), yet the server sends the added item's ``in_progress``
    again at ``output_item.done`` and in the listing; its events finish it."""
    b.start()
    item = {"id": "ctc_0", "type": "custom_tool_call", "call_id": "call_c0", "name": "run_sql",
            "input": f"SELECT 7 * 8 -- {CANARY}", "status": "in_progress"}  # fmt: skip
    b.event("response.output_item.added", output_index=0, item={**item, "input": ""})
    b.event(
        "response.custom_tool_call_input.delta",
        item_id="ctc_0",
        output_index=0,
        delta=item["input"],
    )
    b.event(
        "response.custom_tool_call_input.done", item_id="ctc_0", output_index=0, input=item["input"]
    )
    if done:
        b.event("response.output_item.done", output_index=0, item=item)
    b.listing.append(item)


@dataclass(frozen=True)
class Shape:
    build: Callable[..., None]
    tools: list[dict[str, Any]]
    seen: list[tuple[str, str, str]]  # (item type, executor, name) the policy sees
    released: list[str]  # the names released for the caller to run
    # The listing's index whose status the broken variant contradicts.
    contradicted: int


SHAPES = {
    "hosted_shell": Shape(
        hosted_shell,
        [HOSTED_SHELL, MULTIPLY],
        [("shell_call", "server", "shell"), ("shell_call_output", "server", "shell")],
        [],
        1,
    ),
    "local_shell": Shape(
        local_shell, [{"type": "shell"}], [("shell_call", "client", "shell")], ["shell"], 0
    ),
    "tool_search": Shape(
        tool_search,
        [{"type": "tool_search"}, MULTIPLY],
        [
            ("tool_search_call", "server", "tool_search"),
            ("tool_search_output", "server", "tool_search"),
            ("function_call", "client", "multiply"),
        ],
        ["multiply"],
        1,
    ),
    "x_search": Shape(
        x_search,
        [{"type": "x_search"}, MULTIPLY],
        [
            ("custom_tool_call", "server", "x_keyword_search"),
            ("web_search_call", "server", "web_search"),
        ],
        [],
        0,
    ),
    "custom_call": Shape(
        custom_call,
        [{"type": "custom", "name": "run_sql", "format": {"type": "text"}}],
        [("custom_tool_call", "client", "run_sql")],
        ["run_sql"],
        0,
    ),
}


def valid(name: str) -> bytes:
    b = Body()
    SHAPES[name].build(b)
    return b.completed()


def cut_before_terminal(name: str) -> bytes:
    b = Body()
    SHAPES[name].build(b)
    return b.body()


def without_item_done(name: str) -> bytes:
    b = Body()
    SHAPES[name].build(b, done=False)
    return b.completed()


def contradicted(name: str) -> bytes:
    b = Body()
    SHAPES[name].build(b)
    listing = [dict(item) for item in b.listing]
    listing[SHAPES[name].contradicted]["status"] = "incomplete"
    return b.completed(listing)


def unknown_item(name: str) -> bytes:
    b = Body()
    SHAPES[name].build(b)
    vendor = {"id": "vx_9", "type": "vendor_tool_call", "call_id": "call_v", "status": "completed"}
    b.whole(len(b.listing), vendor)
    return b.completed()


def another_response(name: str) -> bytes:
    """The terminal of another response spliced onto this one (its id differs)."""
    b = Body()
    SHAPES[name].build(b)
    b.response_id = "resp_other"
    return b.completed()


BROKEN: dict[str, tuple[Callable[[str], bytes], QuarantineReason]] = {
    "another_responses_terminal": (another_response, R.SPLICED_RESPONSE),
    "cut_before_terminal": (cut_before_terminal, R.MISSING_FINISH),
    "without_item_done": (without_item_done, R.INCOMPLETE_ITEM),
    "status_contradicts_terminal": (contradicted, R.INCOMPLETE_ITEM),
    "unknown_item": (unknown_item, R.UNSUPPORTED_TOOL_TYPE),
}


# ---- the core ----------------------------------------------------------------------------------
def core(
    data: list[bytes], tools: list[dict[str, Any]]
) -> tuple[list[ToolCall], list[Any], ToolCallQuarantined | None]:
    attempt = Attempt(ToolRegistry.from_tools(tools), attempt_id="att-hosted", clock=lambda: 0.0)
    seen: list[ToolCall] = []
    try:
        attempt.bind_response(content_type="text/event-stream", streamed=True, path="/responses")
        for piece in data:
            attempt.receive_bytes(piece)
        attempt.receive_eof()
        for call in attempt.conclude():
            seen.append(call)
            attempt.decide(call.index, PolicyDecision.approve())
        released = list(attempt.release())
    except ToolCallQuarantined as exc:
        return seen, [], exc
    return seen, released, None


def splits(data: bytes) -> list[list[bytes]]:
    rng = random.Random(len(data))
    out = [[data]]
    for _ in range(3):
        cuts = sorted(rng.sample(range(1, len(data)), 5))
        out.append([data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)])
    return out


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_valid_shape_releases_only_the_callers_calls(name: str) -> None:
    shape = SHAPES[name]
    for pieces in splits(valid(name)):
        seen, released, fault = core(pieces, shape.tools)
        assert fault is None, (name, fault)
        assert [(c.type, c.executor, c.name) for c in seen] == shape.seen
        assert [c.name for c in released] == shape.released


@pytest.mark.parametrize("variant", sorted(BROKEN))
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_broken_variant_is_refused(name: str, variant: str) -> None:
    make, reason = BROKEN[variant]
    for pieces in splits(make(name)):
        _, released, fault = core(pieces, SHAPES[name].tools)
        assert fault is not None and fault.reason is reason, (name, variant, fault)
        assert released == []
        no_leak(fault)


def answer_turn() -> bytes:
    """The model's next turn, once the caller ran the shell call: text only, a new response."""
    b = Body(response_id="resp_turn_2")
    b.start()
    b.message(0, "Here are the files on your Desktop.")
    return b.completed()


def test_two_turns_recorded_in_one_file_are_two_streams() -> None:
    """vercel/ai's openai-shell-tool.1.chunks.txt holds two streams one after the other: the
    turn that asks for a shell call, then (after the caller ran it) the model's answer, each
    from its own ``response.created`` with its own response id. Replayed as one stream it is a
    second response spliced onto the first, and refused as that; each turn alone, as its
    server sent it, is released."""
    first, second = valid("local_shell"), answer_turn()
    tools = SHAPES["local_shell"].tools
    for pieces in splits(first + second):
        _, released, fault = core(pieces, tools)
        assert fault is not None and fault.reason is R.SPLICED_RESPONSE, fault
        assert released == []
    for turn, names in ((first, ["shell"]), (second, [])):
        for pieces in splits(turn):
            _, released, fault = core(pieces, tools)
            assert fault is None, fault
            assert [c.name for c in released] == names


def test_who_runs_an_item_follows_the_declarations() -> None:
    hosted = ToolRegistry.from_tools([HOSTED_SHELL]).declared
    local = ToolRegistry.from_tools([{"type": "shell", "environment": {"type": "local"}}]).declared
    assert runs_on_server("shell_call", "shell", hosted)
    assert not runs_on_server("shell_call", "shell", local)
    xai = ToolRegistry.from_tools([{"type": "x_search"}]).declared
    assert runs_on_server("custom_tool_call", "x_keyword_search", xai)
    # A name xAI does not give its own search steps, or a custom tool the caller declared
    # by that name, stays the caller's (and an undeclared one is refused unknown_tool).
    assert not runs_on_server("custom_tool_call", "run_sql", xai)
    mine = ToolRegistry.from_tools(
        [{"type": "x_search"}, {"type": "custom", "name": "x_keyword_search"}]
    ).declared
    assert not runs_on_server("custom_tool_call", "x_keyword_search", mine)
    assert not runs_on_server("custom_tool_call", "x_keyword_search", frozenset())


def test_a_server_item_without_its_declaration_is_refused() -> None:
    # The hosted shell's output under a local shell: no declaration allows it.
    local = [{"type": "shell"}, MULTIPLY]
    _, released, fault = core([valid("hosted_shell")], local)
    assert fault is not None and fault.reason is R.UNKNOWN_TOOL and released == []
    # xAI's search step without x_search declared: an undeclared custom tool.
    _, released, fault = core([valid("x_search")], [MULTIPLY])
    assert fault is not None and fault.reason is R.UNKNOWN_TOOL and released == []


def test_a_tool_search_the_client_is_to_run_is_not_supported_yet() -> None:
    data = valid("tool_search").replace(b'"execution": "server"', b'"execution": "client"')
    _, released, fault = core([data], SHAPES["tool_search"].tools)
    assert fault is not None and fault.reason is R.UNSUPPORTED_TOOL_TYPE and released == []


# ---- through litellm ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def upstream() -> Any:
    with FakeUpstream() as server:
        yield server


def through_litellm(
    upstream: FakeUpstream, data: bytes, tools: list[dict[str, Any]], asynchronous: bool
) -> tuple[list[ToolCall], list[Any], ToolCallQuarantined | None]:
    seen: list[ToolCall] = []

    def policy(call: ToolCall) -> PolicyDecision:
        seen.append(call)
        return PolicyDecision.approve()

    upstream.enqueue(Scripted(data, chunk_sizes=[1]))
    kwargs: dict[str, Any] = {
        "model": "openai/gpt-4o-mini",
        "input": "What is 7 times 8?",
        "tools": tools,
        "api_base": upstream.base_url,
        "api_key": "sk-test",
        "stream": True,
    }
    events: list[Any] = []
    fault: ToolCallQuarantined | None = None
    with ToolGate(tools, policy=policy) as gate:

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
    return seen, events, fault


def kind(event: Any) -> str:
    return str(getattr(event.type, "value", event.type))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_the_valid_shape_through_litellm(
    upstream: FakeUpstream, name: str, asynchronous: bool
) -> None:
    shape = SHAPES[name]
    seen, events, fault = through_litellm(upstream, valid(name), shape.tools, asynchronous)
    assert fault is None, (name, fault)
    assert kind(events[-1]) == "response.completed"
    assert [(c.type, c.executor, c.name) for c in seen] == shape.seen
    done = [getattr(e.item, "type", None) for e in events if kind(e) == "response.output_item.done"]
    # Every item reaches the caller once the gate decided, each exactly once.
    assert len(done) == len(valid_listing(name))


def valid_listing(name: str) -> list[dict[str, Any]]:
    b = Body()
    SHAPES[name].build(b)
    return b.listing


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("variant", sorted(BROKEN))
@pytest.mark.parametrize("name", sorted(SHAPES))
def test_a_broken_variant_through_litellm(
    upstream: FakeUpstream, name: str, variant: str, asynchronous: bool
) -> None:
    make, reason = BROKEN[variant]
    _, events, fault = through_litellm(upstream, make(name), SHAPES[name].tools, asynchronous)
    assert fault is not None and fault.reason is reason, (name, variant, fault)
    no_leak(fault)
    kinds = [kind(e) for e in events]
    assert "response.completed" not in kinds
    # Nothing of a gated item reached the caller: only text, messages and lifecycle events.
    assert not [k for k in kinds if "_call" in k]
    items = [
        getattr(e.item, "type", None) for e in events if kind(e).startswith("response.output_item.")
    ]
    assert set(items) <= {"message"}
