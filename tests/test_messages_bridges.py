"""Claude's entry point on every bridge litellm takes, in process, real litellm on loopback.

``litellm.anthropic.messages.create`` / ``acreate`` serve a model natively (``anthropic/``),
bridged to chat completions (``cometapi/``, ``azure/`` and every other chat route) or bridged
to the Responses API (``openai/``). The first tests pin which upstream path litellm really
calls for each route class (a litellm that changes its bridge fails here, and the gate
refuses a request sent to a path it was not set up for). The others drive each way in
(``gate.amessages`` / ``gate.messages``, the callback's ``acreate`` / ``create``) on the
bridges: good answers arrive exactly, broken ones are quarantined, typed, with no tool_use
block and no argument text in any error.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest
from conftest import CANARY, body_of
from conftest import CASES as CHAT_CASES

from litellm_toolgate import (
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.demo.serve import json_body_of
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

litellm.suppress_debug_info = True
ROOT = Path(__file__).resolve().parent.parent
RESPONSES = ROOT / "fixtures" / "responses"
ANTHROPIC = ROOT / "fixtures" / "anthropic"
RESPONSES_CASES = {
    c["name"]: c for c in json.loads((RESPONSES / "manifest.json").read_text())["cases"]
}
TOOLS = [
    {
        "name": "multiply",
        "input_schema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
    {
        "name": "write_file",
        "input_schema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
]
GOOD_RESPONSES = ["multiply_basic", "two_calls_interleaved", "write_file_unicode", "text_only"]
# Broken function calls on the Responses wire: not JSON, a trailing value, schema-invalid, a
# delta/done mismatch, a completed listing that differs, incomplete, no terminal, ...
BROKEN_RESPONSES = [
    "truncated_arguments_all_stages_agree",
    "arguments_trailing_data",
    "arguments_schema_invalid",
    "done_disagrees_with_deltas",
    "item_done_disagrees",
    "completed_changes_arguments",
    "completed_drops_a_call",
    "response_incomplete",
    "eof_without_completed",
    "error_event",
    "unknown_tool",
]
# Whole Responses bodies (the completed response) that are broken in themselves.
BROKEN_WHOLE = [
    "truncated_arguments_all_stages_agree",
    "arguments_trailing_data",
    "arguments_schema_invalid",
    "unknown_tool",
    "completed_status_incomplete",
]
# The two shapes litellm's chat -> Anthropic bridge garbles: refused as carrier_mismatch.
GARBLED_BY_THE_CHAT_BRIDGE = ["two_calls_interleaved", "two_tools_interleaved", "name_repeated"]
BROKEN_CHAT_WHOLE = ["args_invalid_json", "args_not_an_object", "args_trailing_value"]


class Upstream:
    """A FakeUpstream that answers the fixture it is told to, and records the paths."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.fixture: tuple[str, str] = ("responses", "multiply_basic")
        self.server = FakeUpstream(self._answer)

    def _answer(self, request: dict[str, Any]) -> Scripted:
        self.paths.append(request_path())
        kind, name = self.fixture
        if kind == "either":  # multiply_basic in the wire of whichever path litellm took
            kind = "responses" if request_path().endswith("/responses") else "chat"
        stream = request.get("stream") is True
        if kind == "responses":
            body = (RESPONSES / RESPONSES_CASES[name]["body"]).read_bytes()
            if stream:
                return Scripted(body, chunk_sizes=[7, 64])
            for line in body.decode().splitlines():
                if line.startswith("data:") and '"response.completed"' in line:
                    whole = json.dumps(json.loads(line[5:])["response"]).encode()
                    return Scripted(whole, content_type="application/json")
            return Scripted(b'{"error": "no whole form"}', content_type="application/json")
        if kind == "anthropic":
            return Scripted((ANTHROPIC / f"{name}.sse").read_bytes(), chunk_sizes=[5, 61])
        body = body_of(CHAT_CASES[name])
        if stream:
            return Scripted(body, chunk_sizes=[7, 90])
        return Scripted(json_body_of(body), content_type="application/json")


@pytest.fixture(scope="module")
def upstream() -> Iterator[Upstream]:
    up = Upstream()
    with up.server:
        yield up


@pytest.fixture
def callback() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(TOOLS)
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


def _args(upstream: Upstream, model: str, stream: bool) -> dict[str, Any]:
    base = upstream.server.root_url if model.startswith("anthropic/") else upstream.server.base_url
    return {
        "model": model,
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "go"}],
        "tools": TOOLS,
        "api_base": base,
        "api_key": "sk-test",
        "stream": stream,
    }


def _blocks(pieces: list[Any]) -> list[tuple[str, str, Any]]:
    """(id, name, input) of every tool_use block in an Anthropic SSE byte stream."""
    calls: dict[int, list[Any]] = {}
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
    return [(i, n, json.loads(a or "{}")) for i, n, a in (calls[k] for k in sorted(calls))]


def _want(name: str) -> list[tuple[str, str, Any]]:
    """The fixture's calls in the order litellm's blocks show them (by output index)."""
    body = (RESPONSES / RESPONSES_CASES[name]["body"]).read_text()
    calls = RESPONSES_CASES[name].get("calls", [])
    calls = sorted(calls, key=lambda c: body.index(c["call_id"]))
    return [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in calls]


def _whole_blocks(message: Any) -> list[tuple[str, str, Any]]:
    return [(b["id"], b["name"], b["input"]) for b in message["content"] if b["type"] == "tool_use"]


def _clean(error: BaseException) -> None:
    seen: BaseException | None = error
    while seen is not None:
        for shown in (str(seen), repr(seen), repr(seen.args)):
            assert CANARY not in shown
            assert '"a": 7' not in shown and '"a":7' not in shown
        seen = seen.__cause__ or seen.__context__


async def _acreate(**kwargs: Any) -> tuple[list[Any], BaseException | None]:
    out: list[Any] = []
    try:
        result = await litellm.anthropic.messages.acreate(**kwargs)
        if kwargs["stream"]:
            async for piece in result:
                out.append(piece)
        else:
            out.append(result)
    except Exception as exc:
        return out, exc
    return out, None


async def _amessages(gate: ToolGate, **kwargs: Any) -> tuple[list[Any], BaseException | None]:
    out: list[Any] = []
    try:
        result = await gate.amessages(**kwargs)
        if kwargs["stream"]:
            async for piece in result:
                out.append(piece)
        else:
            out.append(result)
    except Exception as exc:
        return out, exc
    return out, None


# ---- the facts: which upstream path litellm calls for each route class ----------------------
@pytest.mark.parametrize(
    ("model", "bridge", "path", "fixture"),
    [
        ("anthropic/claude-x", "NATIVE", "/v1/messages", ("anthropic", "multiply_basic")),
        ("cometapi/gpt-4o-mini", "CHAT", "/v1/chat/completions", ("chat", "multiply_basic")),
        ("groq/llama-3.1-8b-instant", "CHAT", "/v1/chat/completions", ("chat", "text_only")),
        ("openai/gpt-4o", "RESPONSES", "/v1/responses", ("responses", "multiply_basic")),
    ],
)
def test_litellm_takes_this_bridge(
    upstream: Upstream, model: str, bridge: str, path: str, fixture: tuple[str, str]
) -> None:
    """Plain litellm, no gate: the path the upstream saw is the bridge the gate expects."""
    from litellm_toolgate.edge.bridges import Bridge, messages_bridge

    upstream.fixture = fixture
    kwargs = _args(upstream, model, True)
    assert messages_bridge(kwargs) is Bridge[bridge]
    upstream.paths.clear()
    asyncio.run(_acreate(**kwargs))
    assert upstream.paths == [path]


def test_azure_is_bridged_to_chat(upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm_toolgate.edge.bridges import Bridge, messages_bridge

    monkeypatch.setenv("AZURE_API_VERSION", "2024-10-21")
    upstream.fixture = ("chat", "text_only")
    kwargs = _args(upstream, "azure/gpt-4o", True)
    assert messages_bridge(kwargs) is Bridge.CHAT
    upstream.paths.clear()
    asyncio.run(_acreate(**kwargs))
    assert len(upstream.paths) == 1 and upstream.paths[0].endswith("/chat/completions")


def test_litellms_opt_out_is_followed(upstream: Upstream) -> None:
    """litellm's own setting sends openai/ to chat completions: the gate asks litellm per
    request, so it sets up for the chat wire and gates it."""
    from litellm_toolgate.edge.bridges import Bridge, messages_bridge

    upstream.fixture = ("chat", "multiply_basic")
    saved = litellm.use_chat_completions_url_for_anthropic_messages
    litellm.use_chat_completions_url_for_anthropic_messages = True
    try:
        kwargs = _args(upstream, "openai/gpt-4o", True)
        assert messages_bridge(kwargs) is Bridge.CHAT
        upstream.paths.clear()
        pieces, error = asyncio.run(_amessages(ToolGate(TOOLS), **kwargs))
    finally:
        litellm.use_chat_completions_url_for_anthropic_messages = saved
    assert error is None, error
    assert upstream.paths == ["/v1/chat/completions"]
    call = CHAT_CASES["multiply_basic"]["calls"][0]
    assert _blocks(pieces) == [(call["id"], call["name"], json.loads(call["arguments"]))]


def test_a_request_on_another_bridge_is_refused_unsent(
    upstream: Upstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Had litellm said one bridge and taken another, the request goes out on a path the
    gate was not set up for: refused before it is sent."""
    from litellm_toolgate.core.errors import QuarantineReason
    from litellm_toolgate.edge import gate as gate_module
    from litellm_toolgate.edge.bridges import Bridge

    monkeypatch.setattr(gate_module, "messages_bridge", lambda kwargs: Bridge.RESPONSES)
    upstream.fixture = ("chat", "multiply_basic")
    upstream.paths.clear()
    _, error = asyncio.run(
        _amessages(ToolGate(TOOLS), **_args(upstream, "cometapi/gpt-4o-mini", True))
    )
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert error.reason is QuarantineReason.ROUTE_NOT_GATED
    assert upstream.paths == []


# ---- 1. the Responses bridge under the callback (acreate, stream) ---------------------------
@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", GOOD_RESPONSES + BROKEN_RESPONSES)
def test_callback_acreate_stream_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("responses", name)
    upstream.paths.clear()
    pieces, error = asyncio.run(_acreate(**_args(upstream, "openai/gpt-4o", True)))
    assert upstream.paths == ["/v1/responses"]
    if name in GOOD_RESPONSES:
        assert error is None, error
        assert _blocks(pieces) == _want(name)
        return
    assert _blocks(pieces) == [], "a tool_use block of a broken call was released"
    body = b"".join(pieces)
    if error is None:
        # litellm's bridge may hand the quarantine over as its stream's error event.
        assert b"event: error" in body and b"quarantined" in body
    else:
        assert isinstance(find_quarantine(error), ToolCallQuarantined), repr(error)
        _clean(error)
    assert CANARY.encode() not in body


# ---- 2. the chat bridge under the callback: litellm's garbled blocks refused ----------------
@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", GARBLED_BY_THE_CHAT_BRIDGE)
def test_callback_acreate_stream_garbled_by_the_chat_bridge(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("chat", name)
    pieces, error = asyncio.run(_acreate(**_args(upstream, "cometapi/gpt-4o-mini", True)))
    assert _blocks(pieces) == [], "litellm's garbled tool_use blocks were released"
    body = b"".join(pieces)
    if error is None:
        assert b"event: error" in body and b"quarantined: carrier_mismatch" in body
    else:
        fault = find_quarantine(error)
        assert isinstance(fault, ToolCallQuarantined) and fault.reason.value == "carrier_mismatch"


@pytest.mark.usefixtures("callback")
def test_callback_acreate_stream_chat_bridge_good(upstream: Upstream) -> None:
    upstream.fixture = ("chat", "multiply_basic")
    pieces, error = asyncio.run(_acreate(**_args(upstream, "cometapi/gpt-4o-mini", True)))
    assert error is None, error
    call = CHAT_CASES["multiply_basic"]["calls"][0]
    assert _blocks(pieces) == [(call["id"], call["name"], json.loads(call["arguments"]))]


# ---- 3. good answers delivered, typed refusals: gate.messages/amessages, callback whole ----
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_calls_interleaved", "arguments_trailing_data"]
)
def test_gate_amessages_on_the_responses_bridge(
    upstream: Upstream, name: str, stream: bool
) -> None:
    upstream.fixture = ("responses", name)
    out, error = asyncio.run(
        _amessages(ToolGate(TOOLS), **_args(upstream, "openai/gpt-4o", stream))
    )
    if RESPONSES_CASES[name]["expect"] == "release":
        assert error is None, error
        assert (_blocks(out) if stream else _whole_blocks(out[0])) == _want(name)
    else:
        assert isinstance(error, ToolCallQuarantined), repr(error)
        assert (_blocks(out) if stream else out) == []
        _clean(error)


def _messages(gate: ToolGate, **kwargs: Any) -> tuple[list[Any], BaseException | None]:
    out: list[Any] = []
    try:
        for piece in gate.messages(**kwargs):
            out.append(piece)
    except Exception as exc:
        return out, exc
    return out, None


@pytest.mark.parametrize("name", GOOD_RESPONSES + BROKEN_RESPONSES)
def test_gate_messages_stream_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    """litellm's sync stream on the Responses bridge is an async iterator: the gate reads it
    on a loop of its own and hands the sync caller a gated sync stream."""
    upstream.fixture = ("responses", name)
    upstream.paths.clear()
    out, error = _messages(ToolGate(TOOLS), **_args(upstream, "openai/gpt-4o", True))
    assert upstream.paths == ["/v1/responses"]
    # the private loop's thread ended with the stream
    assert not [t for t in threading.enumerate() if t.name == "toolgate-drive"]
    if name in GOOD_RESPONSES:
        assert error is None, error
        assert _blocks(out) == _want(name)
        return
    assert isinstance(error, ToolCallQuarantined), repr(error)
    assert _blocks(out) == [], "a tool_use block of a broken call was released"
    assert CANARY.encode() not in b"".join(out)
    _clean(error)


def test_gate_messages_stream_on_the_responses_bridge_closed_early(upstream: Upstream) -> None:
    """A caller that stops reading and closes the stream: nothing withheld is released, and
    the private loop's thread ends."""
    upstream.fixture = ("responses", "multiply_basic")
    stream = ToolGate(TOOLS).messages(**_args(upstream, "openai/gpt-4o", True))
    first = next(stream)
    stream.close()
    with pytest.raises(ToolCallQuarantined) as caught:  # read after close: the cancellation
        next(stream)
    assert caught.value.reason.value == "cancelled"
    assert _blocks([first]) == []
    assert not [t for t in threading.enumerate() if t.name == "toolgate-drive"]


def test_gate_messages_stream_on_the_responses_bridge_inside_a_running_loop(
    upstream: Upstream,
) -> None:
    """The sync call made from code a loop is running (a sync helper in async code)."""
    upstream.fixture = ("responses", "multiply_basic")

    async def inside() -> tuple[list[Any], BaseException | None]:
        return _messages(ToolGate(TOOLS), **_args(upstream, "openai/gpt-4o", True))

    out, error = asyncio.run(inside())
    assert error is None, error
    assert _blocks(out) == _want("multiply_basic")


@pytest.mark.parametrize("name", ["multiply_basic", "arguments_trailing_data"])
def test_gate_messages_whole_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("responses", name)
    kwargs = _args(upstream, "openai/gpt-4o", False)
    if RESPONSES_CASES[name]["expect"] == "release":
        assert _whole_blocks(ToolGate(TOOLS).messages(**kwargs)) == _want(name)
        return
    with pytest.raises(ToolCallQuarantined) as caught:
        ToolGate(TOOLS).messages(**kwargs)
    _clean(caught.value)


@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", ["multiply_basic", "two_calls_interleaved", *BROKEN_WHOLE])
def test_callback_acreate_whole_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("responses", name)
    out, error = asyncio.run(_acreate(**_args(upstream, "openai/gpt-4o", False)))
    if RESPONSES_CASES[name]["expect"] == "release":
        assert error is None, error
        assert _whole_blocks(out[0]) == _want(name)
    else:
        assert isinstance(find_quarantine(error), ToolCallQuarantined), repr(error)
        assert out == []
        _clean(error)  # type: ignore[arg-type]


# ---- 4. a whole bridged body litellm's converter fails on: typed, no argument text ---------
@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", BROKEN_CHAT_WHOLE)
def test_callback_acreate_whole_chat_bridge_broken_arguments(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("chat", name)
    out, error = asyncio.run(_acreate(**_args(upstream, "cometapi/gpt-4o-mini", False)))
    assert out == []
    assert isinstance(find_quarantine(error), ToolCallQuarantined), repr(error)
    _clean(error)  # type: ignore[arg-type]
    assert "Arguments:" not in str(error)


# ---- sync create under the callback on the bridges -------------------------------------------
@pytest.mark.usefixtures("callback")
def test_callback_sync_create_stream_on_the_chat_bridge_is_refused_unsent(
    upstream: Upstream,
) -> None:
    """litellm's sync Messages adapter on the chat bridge ends its stream quietly on any
    error: refused, typed."""
    from litellm_toolgate import UngatedCallRefused

    upstream.fixture = ("chat", "multiply_basic")
    upstream.paths.clear()
    with pytest.raises(UngatedCallRefused):
        list(litellm.anthropic.messages.create(**_args(upstream, "cometapi/gpt-4o-mini", True)))
    assert upstream.paths == []


@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", GOOD_RESPONSES + BROKEN_RESPONSES)
def test_callback_sync_create_stream_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    """Sync create(stream=True) on openai/: litellm sends the request sync and hands back its
    async Messages iterator, which reads the claimed wire on worker threads. Gated as on
    acreate: good answers exactly, a broken call never as a tool_use block, the quarantine
    as the stream's error event (or raised, typed), no argument text."""
    upstream.fixture = ("responses", name)
    upstream.paths.clear()
    pieces: list[Any] = []
    error: BaseException | None = None
    try:
        result = litellm.anthropic.messages.create(**_args(upstream, "openai/gpt-4o", True))

        async def read() -> None:
            async for piece in result:
                pieces.append(piece)

        asyncio.run(read())
    except Exception as exc:
        error = exc
    assert upstream.paths == ["/v1/responses"]
    if name in GOOD_RESPONSES:
        assert error is None, error
        assert _blocks(pieces) == _want(name)
        return
    assert _blocks(pieces) == [], "a tool_use block of a broken call was released"
    body = b"".join(pieces)
    if error is None:
        assert b"event: error" in body and b"quarantined" in body
    else:
        assert isinstance(find_quarantine(error), ToolCallQuarantined), repr(error)
        _clean(error)
    assert CANARY.encode() not in body


@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", ["multiply_basic", "arguments_trailing_data"])
def test_callback_sync_create_whole_on_the_responses_bridge(upstream: Upstream, name: str) -> None:
    upstream.fixture = ("responses", name)
    kwargs = _args(upstream, "openai/gpt-4o", False)
    if RESPONSES_CASES[name]["expect"] == "release":
        assert _whole_blocks(litellm.anthropic.messages.create(**kwargs)) == _want(name)
        return
    with pytest.raises(Exception) as caught:
        litellm.anthropic.messages.create(**kwargs)
    assert isinstance(find_quarantine(caught.value), ToolCallQuarantined), repr(caught.value)
    _clean(caught.value)


# Every chat fixture through the callback's acreate stream on the chat bridge.
CHAT_BRIDGED = sorted(n for n, c in CHAT_CASES.items() if "transport" not in c)


@pytest.mark.usefixtures("callback")
@pytest.mark.parametrize("name", CHAT_BRIDGED)
def test_callback_acreate_stream_chat_bridge_every_fixture(upstream: Upstream, name: str) -> None:
    case = CHAT_CASES[name]
    # The wire's outcome: withheld on the wire, litellm is handed each message on one data
    # line, so what litellm misreads on the raw wire (a data line split in two) it reads here.
    outcome = "quarantine" if name in GARBLED_BY_THE_CHAT_BRIDGE else case["expect"]
    upstream.fixture = ("chat", name)
    pieces, error = asyncio.run(_acreate(**_args(upstream, "cometapi/gpt-4o-mini", True)))
    body = b"".join(pieces)
    if outcome == "release":
        assert error is None and b"event: error" not in body, (error, body[-300:])
        want = [(c["id"], c["name"], json.loads(c["arguments"])) for c in case.get("calls", [])]
        assert _blocks(pieces) == want
    else:
        assert _blocks(pieces) == []
        assert error is not None or b"quarantined" in body
    assert CANARY.encode() not in body or outcome == "release"


# ---- azure/: bridged to chat, through litellm's Azure OpenAI client -------------------------
@pytest.mark.parametrize("way", ["gate", "callback"])
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", ["multiply_basic", "args_invalid_json"])
def test_azure_behind_messages(upstream: Upstream, way: str, stream: bool, name: str) -> None:
    upstream.fixture = ("chat", name)
    kwargs = {**_args(upstream, "azure/gpt-4o", stream), "api_version": "2024-10-21"}
    kwargs["api_base"] = upstream.server.root_url
    if way == "gate":
        out, error = asyncio.run(_amessages(ToolGate(TOOLS), **kwargs))
    else:
        saved = litellm.callbacks
        with ToolGateGuardrail(TOOLS) as gate:
            litellm.callbacks = [gate]
            try:
                out, error = asyncio.run(_acreate(**kwargs))
            finally:
                litellm.callbacks = saved
    blocks = _blocks(out) if stream else [] if error else _whole_blocks(out[0])
    if CHAT_CASES[name]["expect"] == "release":
        assert error is None, error
        call = CHAT_CASES[name]["calls"][0]
        assert blocks == [(call["id"], call["name"], json.loads(call["arguments"]))]
        return
    assert blocks == []
    if error is None:  # the callback's stream: litellm's error event carries the quarantine
        assert stream and b"quarantined" in b"".join(out)
    else:
        assert isinstance(find_quarantine(error), ToolCallQuarantined), repr(error)
        _clean(error)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_stop_sequences_on_openai_follow_litellm(upstream: Upstream, stream: bool) -> None:
    """litellm 1.110.2 sends an openai/ request with stop_sequences to chat completions,
    1.108.7 to the Responses API: the gate follows litellm's own decision either way."""
    from litellm_toolgate.edge.bridges import Bridge, messages_bridge

    upstream.fixture = ("either", "multiply_basic")
    kwargs = {**_args(upstream, "openai/gpt-4o", stream), "stop_sequences": ["END"]}
    bridge = messages_bridge(kwargs)
    upstream.paths.clear()
    out, error = asyncio.run(_amessages(ToolGate(TOOLS), **kwargs))
    assert error is None, error
    path = "/v1/responses" if bridge is Bridge.RESPONSES else "/v1/chat/completions"
    assert upstream.paths == [path]
    blocks = _blocks(out) if stream else _whole_blocks(out[0])
    assert [(n, a) for _, n, a in blocks] == [("multiply", {"a": 7, "b": 8})]
