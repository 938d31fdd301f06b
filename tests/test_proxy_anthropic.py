"""The proxy's ``/v1/messages`` gated, driven with the real ``anthropic`` client.

One proxy from ``config_examples/proxy_anthropic.yaml`` runs for the module, in front of a
FakeUpstream that serves the fixture the request names: ``claude-sonnet-4-5`` is an
``anthropic/`` deployment (Anthropic SSE on the wire, ``fixtures/anthropic``),
``gpt-4o-mini`` a ``cometapi/`` one (chat SSE on the wire, ``fixtures/chat``; the client sees
Anthropic events litellm made), ``gpt-4o`` an ``openai/`` one, which litellm bridges to the
upstream's Responses API (``fixtures/responses``). Both ``client.messages.stream(...)`` and
``client.messages.create(...)``. A valid stream arrives with its tool_use blocks; a broken
one is refused: before any event went out as an HTTP error (``anthropic.APIStatusError``,
the quarantine's status), after text went out as the proxy's error frame, which the
``anthropic`` client raises as ``anthropic.APIStatusError`` too; never a tool_use block.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``), like ``test_proxy_e2e.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CANARY, expected
from conftest import CASES as CHAT_CASES
from proxyproc import EXAMPLES, IDLE_TIMEOUT, Proxy, require_proxy, running_proxy

from litellm_toolgate.demo.serve import demo_answer, json_body_of
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy

require_proxy()

import anthropic  # noqa: E402  (after the skip: the proxy environment has it)
import openai  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "anthropic"
CHAT = ROOT / "fixtures" / "chat"
RESPONSES = ROOT / "fixtures" / "responses"
RESPONSES_CASES = {
    c["name"]: c
    for c in json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))["cases"]
}
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
STREAMED = sorted(n for n, c in CASES.items() if c["streamed"])
TOOLS = [
    {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
    for t in MANIFEST["tools"]
]
# As through gate.messages(): litellm's bridge mixes interleaved chat calls and splits a
# call whose fragments repeat its name; the gate refuses what it made.
BRIDGED_OVERRIDES = {
    "two_tools_interleaved": ("quarantine", "carrier_mismatch"),
    "two_calls_interleaved": ("quarantine", "carrier_mismatch"),
    "name_repeated": ("quarantine", "carrier_mismatch"),
}
BRIDGED = [
    "multiply_basic",
    "text_only",
    "two_tools_interleaved",
    "two_calls_interleaved",
    "name_repeated",
    "write_file_unicode",
    "args_invalid_json",
    "args_duplicate_key",
    "length_mid_arguments",
    "done_without_finish",
    "eof_without_finish_or_done",
    "error_event_midstream",
    "unknown_tool",
    "schema_wrong_type",
]


def _last_text(request: dict[str, Any]) -> str:
    items = request.get("messages") or request.get("input")
    if isinstance(items, str):
        return items
    content = items[-1]["content"]
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content)


def _scripted(request: dict[str, Any]) -> Scripted:
    if ":" not in _last_text(request):
        return demo_answer(request)  # what ``toolgate fake-upstream`` answers
    route, name = _last_text(request).split(":", 1)
    stream = request.get("stream") is True
    if route == "responses":
        body = (RESPONSES / RESPONSES_CASES[name]["body"]).read_bytes()
        if stream:
            return Scripted(body, chunk_sizes=[7, 90])
        for line in body.decode().splitlines():
            if line.startswith("data:") and '"response.completed"' in line:
                whole = json.dumps(json.loads(line[5:])["response"]).encode()
                return Scripted(whole, content_type="application/json")
        raise AssertionError(f"{name} has no whole form")
    if route == "anthropic":
        body = (FIXTURES / CASES[name]["body"]).read_bytes()
        if CASES[name]["streamed"]:
            return Scripted(body, chunk_sizes=[5, 61])
        return Scripted(body, content_type="application/json")
    body = (CHAT / CHAT_CASES[name]["body"]).read_bytes()
    if stream:
        return Scripted(body, chunk_sizes=[7, 90])
    return Scripted(json_body_of(body), content_type="application/json")


@pytest.fixture(scope="module")
def scripted_upstream() -> Iterator[FakeUpstream]:
    """The module's FakeUpstream (``_scripted``), its ``requests`` read by the tests."""
    with FakeUpstream(_scripted) as served:
        yield served


@pytest.fixture(scope="module")
def proxy(
    tmp_path_factory: pytest.TempPathFactory, scripted_upstream: FakeUpstream
) -> Iterator[Proxy]:
    upstream = scripted_upstream
    folder = tmp_path_factory.mktemp("proxy_anthropic")
    config = folder / "proxy_anthropic.yaml"
    shutil.copy(EXAMPLES / config.name, config)
    text = config.read_text()
    assert "idle_timeout: 30" in text
    config.write_text(text.replace("idle_timeout: 30", f"idle_timeout: {IDLE_TIMEOUT}"))
    saved = os.environ.get("TOOLGATE_ANTHROPIC_UPSTREAM")
    os.environ["TOOLGATE_ANTHROPIC_UPSTREAM"] = upstream.root_url
    try:
        with running_proxy(config, upstream.base_url) as running:
            yield running
    finally:
        if saved is None:
            os.environ.pop("TOOLGATE_ANTHROPIC_UPSTREAM", None)
        else:
            os.environ["TOOLGATE_ANTHROPIC_UPSTREAM"] = saved


def _client(proxy: Proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)


def _stream(proxy: Proxy, model: str, prompt: str) -> tuple[list[Any], Any, BaseException | None]:
    """Every event the client saw, the final message (if any) and the error it raised."""
    events: list[Any] = []
    try:
        with _client(proxy).messages.stream(
            model=model,
            max_tokens=1024,
            messages=[{"role": "user", "content": prompt}],
            tools=TOOLS,  # type: ignore[arg-type]
        ) as stream:
            for event in stream:
                events.append(event)
            return events, stream.get_final_message(), None
    except anthropic.APIError as exc:
        return events, None, exc


def _tool_events(events: list[Any]) -> list[Any]:
    return [
        e
        for e in events
        if getattr(getattr(e, "content_block", None), "type", None) == "tool_use"
        or getattr(getattr(e, "delta", None), "type", None) == "input_json_delta"
    ]


def _released(message: Any) -> list[dict[str, Any]]:
    return [
        {"call_id": b.id, "name": b.name, "arguments": b.input}
        for b in message.content
        if b.type == "tool_use"
    ]


def _check_refusal(events: list[Any], error: BaseException | None, what: str) -> None:
    # message_start always goes out first, so the proxy reports the refusal as its
    # ``event: error`` frame, which the client raises as APIStatusError.
    assert isinstance(error, anthropic.APIStatusError), f"{what}: {error!r}"
    assert "quarantined" in str(error)
    assert _tool_events(events) == [], f"{what}: a tool_use block reached the client"
    assert CANARY not in str(error)


@pytest.mark.parametrize("name", STREAMED)
def test_anthropic_deployment_stream(proxy: Proxy, name: str) -> None:
    case = CASES[name]
    events, final, error = _stream(proxy, "claude-sonnet-4-5", f"anthropic:{name}")
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        want = [{**c, "arguments": json.loads(c["arguments"])} for c in case["calls"]]
        assert _released(final) == want
    else:
        _check_refusal(events, error, name)


@pytest.mark.parametrize("name", ["whole_tool_use", "whole_max_tokens", "whole_schema_invalid"])
def test_anthropic_deployment_create(proxy: Proxy, name: str) -> None:
    case = CASES[name]
    client = _client(proxy)
    kwargs: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": f"anthropic:{name}"}],
        "tools": TOOLS,
    }
    if case["expect"] == "release":
        message = client.messages.create(**kwargs)
        want = [{**c, "arguments": json.loads(c["arguments"])} for c in case["calls"]]
        assert _released(message) == want
    else:
        with pytest.raises(anthropic.APIStatusError) as info:
            client.messages.create(**kwargs)
        assert CANARY not in str(info.value)


@pytest.mark.parametrize("name", BRIDGED)
def test_chat_deployment_behind_messages(proxy: Proxy, name: str) -> None:
    case = CHAT_CASES[name]
    outcome, _ = BRIDGED_OVERRIDES.get(name) or expected(case)
    events, final, error = _stream(proxy, "gpt-4o-mini", f"chat:{name}")
    if outcome == "release":
        assert error is None, f"{name}: {error!r}"
        want = [
            {"call_id": c["id"], "name": c["name"], "arguments": json.loads(c["arguments"])}
            for c in case.get("calls", [])
        ]
        assert _released(final) == want
    else:
        _check_refusal(events, error, name)


@pytest.mark.parametrize("name", ["multiply_basic", "args_invalid_json"])
def test_chat_deployment_behind_messages_create(proxy: Proxy, name: str) -> None:
    case = CHAT_CASES[name]
    client = _client(proxy)
    kwargs: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": f"chat:{name}"}],
        "tools": TOOLS,
    }
    if case["expect"] == "release":
        message = client.messages.create(**kwargs)
        assert [b.name for b in message.content if b.type == "tool_use"] == ["multiply"]
    else:
        with pytest.raises(anthropic.APIStatusError):
            client.messages.create(**kwargs)


def test_the_example_against_toolgate_fake_upstream(proxy: Proxy) -> None:
    """The demo's own answers (no fixture named): the tool loop runs through /v1/messages."""
    client = _client(proxy)
    question = [{"role": "user", "content": "What is 7 times 8? Use multiply."}]
    first = client.messages.create(
        model="claude-sonnet-4-5", max_tokens=256, messages=question, tools=TOOLS[:1]
    )
    use = next(b for b in first.content if b.type == "tool_use")
    assert (use.name, use.input) == ("multiply", {"a": 7, "b": 8})
    result = {"type": "tool_result", "tool_use_id": use.id, "content": '{"value": 56}'}
    with (
        client.messages.stream(
            model="claude-sonnet-4-5",
            max_tokens=256,
            messages=[
                *question,
                {"role": "assistant", "content": first.content},
                {"role": "user", "content": [result]},
            ],  # type: ignore[list-item]
            tools=TOOLS[:1],  # type: ignore[list-item]
        ) as stream
    ):
        assert "".join(stream.text_stream) == "7 times 8 is 56."


@pytest.mark.parametrize("name", ["multiply_basic", "stop_max_tokens", "server_tool_use"])
def test_anthropic_deployment_behind_chat_completions(proxy: Proxy, name: str) -> None:
    """/v1/chat/completions in front of the anthropic/ deployment: chat chunks carry it."""
    import openai

    case = CASES[name]
    client = openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=proxy.key, max_retries=0)
    calls: list[Any] = []
    error: BaseException | None = None
    try:
        for chunk in client.chat.completions.create(
            model="claude-sonnet-4-5",
            messages=[{"role": "user", "content": f"anthropic:{name}"}],
            stream=True,
        ):
            for choice in chunk.choices:
                calls += choice.delta.tool_calls or []
    except openai.APIError as exc:
        error = exc
    if case["expect"] == "release":
        assert error is None, error
        assert [(c.id, c.function.name, c.function.arguments) for c in calls] == [
            (c["call_id"], c["name"], c["arguments"]) for c in case["calls"]
        ]
    else:
        assert error is not None and calls == []
        assert "quarantined" in str(error) and CANARY not in str(error)


@pytest.mark.parametrize(
    ("model", "prompt"),
    [
        ("claude-sonnet-4-5", "anthropic:interleaved_blocks"),
        ("claude-sonnet-4-5", "anthropic:stop_max_tokens"),
        ("gpt-4o-mini", "chat:multiply_basic"),
        ("gpt-4o-mini", "chat:args_invalid_json"),
    ],
)
def test_the_async_client(proxy: Proxy, model: str, prompt: str) -> None:
    """``anthropic.AsyncAnthropic``: the same outcomes, stream and create."""
    route, name = prompt.split(":", 1)
    case = CASES[name] if route == "anthropic" else CHAT_CASES[name]
    client = anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)
    kwargs: dict[str, Any] = {
        "model": model,
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": prompt}],
        "tools": TOOLS,
    }

    async def go() -> tuple[list[Any], Any, BaseException | None]:
        events: list[Any] = []
        try:
            async with client.messages.stream(**kwargs) as stream:
                async for event in stream:
                    events.append(event)
                return events, await stream.get_final_message(), None
        except anthropic.APIError as exc:
            return events, None, exc

    events, final, error = asyncio.run(go())
    if case["expect"] == "release":
        assert error is None, error
        want = [
            (c.get("call_id") or c.get("id"), c["name"], json.loads(c["arguments"]))
            for c in case["calls"]
        ]
        assert [(c["call_id"], c["name"], c["arguments"]) for c in _released(final)] == want
    else:
        _check_refusal(events, error, prompt)


# ---- the Responses bridge (openai/) and what a quarantined bridged request shows -----------
GOOD_RESPONSES = ["multiply_basic", "two_calls_interleaved", "write_file_unicode", "text_only"]
BROKEN_RESPONSES = [
    "truncated_arguments_all_stages_agree",
    "arguments_trailing_data",
    "arguments_schema_invalid",
    "done_disagrees_with_deltas",
    "completed_changes_arguments",
    "response_incomplete",
    "eof_without_completed",
    "unknown_tool",
]
BROKEN_RESPONSES_WHOLE = [
    "truncated_arguments_all_stages_agree",
    "arguments_trailing_data",
    "arguments_schema_invalid",
    "unknown_tool",
]
BROKEN_CHAT_WHOLE = ["args_invalid_json", "args_not_an_object", "args_trailing_value"]


def _responses_calls(name: str) -> list[dict[str, Any]]:
    """The fixture's calls in the order litellm's blocks show them (by output index)."""
    body = (RESPONSES / RESPONSES_CASES[name]["body"]).read_text()
    calls = sorted(RESPONSES_CASES[name].get("calls", []), key=lambda c: body.index(c["call_id"]))
    return [{**c, "arguments": json.loads(c["arguments"])} for c in calls]


def _argument_texts(route: str, name: str) -> list[str]:
    """Distinctive argument text of a fixture's calls, as it is on the wire."""
    if route == "responses":
        body = (RESPONSES / RESPONSES_CASES[name]["body"]).read_text()
    elif route == "anthropic":
        body = (FIXTURES / CASES[name]["body"]).read_text()
    else:
        body = (CHAT / CHAT_CASES[name]["body"]).read_text()
    texts = [CANARY]
    for line in body.splitlines():
        if not line.startswith("data:") or "[DONE]" in line:
            continue
        event = json.loads(line[5:])
        delta = event.get("delta")
        if isinstance(delta, dict) and len(delta.get("partial_json") or "") >= 8:
            texts.append(delta["partial_json"])
        for piece in (
            event.get("delta"),
            event.get("arguments"),
            (event.get("item") or {}).get("arguments"),
        ):
            if isinstance(piece, str) and len(piece) >= 8:
                texts.append(piece)
        for choice in event.get("choices") or []:
            for call in (choice.get("delta") or {}).get("tool_calls") or []:
                text = (call.get("function") or {}).get("arguments") or ""
                if len(text) >= 8:
                    texts.append(text)
    return texts


def _shown_no_arguments(texts: list[str], shown: str) -> None:
    for text in texts:
        assert text not in shown, "argument text reached the client"


@pytest.mark.parametrize("name", GOOD_RESPONSES + BROKEN_RESPONSES)
def test_responses_deployment_behind_messages(proxy: Proxy, name: str) -> None:
    events, final, error = _stream(proxy, "gpt-4o", f"responses:{name}")
    if name in GOOD_RESPONSES:
        assert error is None, f"{name}: {error!r}"
        assert _released(final) == _responses_calls(name)
    else:
        _check_refusal(events, error, name)
        _shown_no_arguments(_argument_texts("responses", name), str(error))


@pytest.mark.parametrize(
    "name", ["multiply_basic", "two_calls_interleaved", *BROKEN_RESPONSES_WHOLE]
)
def test_responses_deployment_behind_messages_create(proxy: Proxy, name: str) -> None:
    kwargs: dict[str, Any] = {
        "model": "gpt-4o",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": f"responses:{name}"}],
        "tools": TOOLS,
    }
    if RESPONSES_CASES[name]["expect"] == "release":
        assert _released(_client(proxy).messages.create(**kwargs)) == _responses_calls(name)
        return
    with pytest.raises(anthropic.APIStatusError) as info:
        _client(proxy).messages.create(**kwargs)
    assert 400 <= info.value.status_code < 500, info.value
    assert "quarantined" in str(info.value)
    _shown_no_arguments(_argument_texts("responses", name), str(info.value))


@pytest.mark.parametrize("name", BROKEN_CHAT_WHOLE)
def test_chat_bridge_whole_broken_arguments_typed(proxy: Proxy, name: str) -> None:
    """litellm's chat -> Anthropic converter fails on these arguments, quoting them: the gate
    decides on the raw body first, so the client gets the quarantine, never the text."""
    kwargs: dict[str, Any] = {
        "model": "gpt-4o-mini",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": f"chat:{name}"}],
        "tools": TOOLS,
    }
    with pytest.raises(anthropic.APIStatusError) as info:
        _client(proxy).messages.create(**kwargs)
    # The gate's own refusal (a guardrail intervention: never re-sent by litellm's router),
    # with its status, not litellm's converter failing with a 500.
    assert 400 <= info.value.status_code < 500, info.value
    assert "quarantined: carrier_mismatch" in str(info.value)
    assert "Arguments:" not in str(info.value)
    _shown_no_arguments(_argument_texts("chat", name), str(info.value))


def _whole_tool_blocks(name: str) -> list[dict[str, Any]]:
    body = json.loads((FIXTURES / CASES[name]["body"]).read_text())
    return [b for b in body["content"] if b["type"] == "tool_use"]


# Every route class behind /v1/messages, stream and whole, with a quarantined request.
CANARY_CASES = [
    ("claude-sonnet-4-5", "anthropic", "arguments_schema_invalid"),
    ("gpt-4o-mini", "chat", "args_invalid_json"),
    ("gpt-4o-mini", "chat", "args_trailing_value"),
    ("gpt-4o", "responses", "arguments_trailing_data"),
    ("gpt-4o", "responses", "truncated_arguments_all_stages_agree"),
]


def test_canary_no_argument_text_in_errors_or_the_proxy_log(proxy: Proxy) -> None:
    texts: list[str] = [CANARY]
    for model, route, name in CANARY_CASES:
        prompt = f"{route}:{name}"
        texts += _argument_texts(route, name)
        events, _, error = _stream(proxy, model, prompt)
        assert error is not None and "quarantined" in str(error), (prompt, error)
        assert _tool_events(events) == []
        shown = [str(error)]
        whole = "whole_schema_invalid" if route == "anthropic" else name
        if route == "anthropic":
            texts += [json.dumps(b["input"]) for b in _whole_tool_blocks(whole)]
        with pytest.raises(anthropic.APIStatusError) as info:
            _client(proxy).messages.create(
                model=model,
                max_tokens=1024,
                messages=[{"role": "user", "content": f"{route}:{whole}"}],
                tools=TOOLS,  # type: ignore[arg-type]
            )
        shown.append(str(info.value))
        for text in shown:
            _shown_no_arguments(texts, text)
    log = proxy.log.read_text(errors="replace")
    for text in texts:
        assert text not in log, "argument text reached the proxy log"


RESPONSES_ON_ANTHROPIC = [
    "multiply_basic",
    "text_only",
    "arguments_schema_invalid",
    "unknown_tool",
    "arguments_duplicate_key",
    "arguments_truncated",
    "max_tokens_mid_arguments",
    "malformed_data",
    "eof_mid_arguments",
    "whole_tool_use",
    "whole_schema_invalid",
]


@pytest.mark.parametrize("name", RESPONSES_ON_ANTHROPIC)
def test_responses_on_the_anthropic_deployment(
    proxy: Proxy, scripted_upstream: FakeUpstream, name: str
) -> None:
    """``/v1/responses`` on the ``anthropic/`` deployment: litellm bridges it to chat over the
    Messages stream, and the gate cross-checks litellm's Responses events (a whole body:
    litellm's bridge run over the held body) with the wire. A valid answer arrives with the
    wire's calls under the wire's ids; a broken one is refused (an HTTP error, or the proxy's
    error event once events went out) with the quarantine's reason, and nothing of a
    function call (no item, no argument text) reaches the client."""
    case = CASES[name]
    stream = bool(case["streamed"])
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)
    tools = [
        {"type": "function", "name": t["name"], "parameters": t["input_schema"]} for t in TOOLS
    ]
    sent = len(scripted_upstream.requests)
    events: list[Any] = []
    whole: Any = None
    error: BaseException | None = None
    try:
        made = client.responses.create(
            model="claude-sonnet-4-5",
            input=f"anthropic:{name}",
            tools=tools,  # type: ignore[arg-type]
            stream=stream,
        )
        if stream:
            events.extend(made)  # type: ignore[arg-type]
        else:
            whole = made
    except openai.APIError as exc:
        error = exc
    # A refusal after the first events went out arrives as the proxy's error event.
    error = error or next((e for e in events if e.type in ("error", "response.failed")), None)
    assert len(scripted_upstream.requests) == sent + 1  # the wire's own chat call, once
    done = [e.item for e in events if e.type == "response.output_item.done"]
    if whole is not None:
        done = list(whole.output)
    calls = [
        {"call_id": i.call_id, "name": i.name, "arguments": i.arguments}
        for i in done
        if i.type == "function_call"
    ]
    if case["expect"] == "release":
        assert error is None, f"{name}: {error!r}"
        want = case.get("calls", [])
        if stream:
            assert calls == want
            assert events[-1].type == "response.completed"
        else:  # a whole body's input object, serialized again by litellm: the same value
            assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in calls] == [
                (c["call_id"], c["name"], json.loads(c["arguments"])) for c in want
            ]
    else:
        assert error is not None, f"{name}: released {calls!r}"
        rendered = f"{error} {error!r}"
        assert "quarantined" in rendered and case["reason"] in rendered, rendered
        assert calls == [] and whole is None
        assert not [e for e in events if "function_call" in e.type]
        assert "response.completed" not in [e.type for e in events]
        assert CANARY not in rendered
