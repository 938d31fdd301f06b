"""The gate inside a real LiteLLM proxy process, driven with the ``openai`` client.

For each YAML style of ``config_examples/`` (``litellm_settings.callbacks`` and a
``guardrails:`` entry) one proxy is started on 127.0.0.1 for the module, in front of a
FakeUpstream on another loopback port that serves the chat fixture named in the request.
Every fixture is streamed through it: valid ones arrive with their calls byte for byte,
every broken one is refused (an HTTP error with the quarantine's status before the first
chunk, the proxy's SSE error frame after it) with no tool-call fragment delivered and no
argument text in the error. Whole responses are checked the same way. A load test sends 200
concurrent streams (then 50 more), a tenth of them broken, beside clients that go away
mid-stream or before any answer, and checks memory, health, and that the gate's in-flight
count in the proxy process (read through the test-only ``inflight_probe`` callback) is back
at zero after each round.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``); ``scripts/test.sh`` leaves this file
out of the run on the environment without it and says so, and sets TOOLGATE_REQUIRE_PROXY on
the other, where a missing proxy is then an error rather than a skip.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from conftest import CANARY, CASES, body_of, expected
from proxyproc import EXAMPLES, Proxy, prepare, require_proxy, running_proxy

from litellm_toolgate import QuarantineReason
from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy

require_proxy()

MODEL = "gpt-4o-mini"
DENIED = "policy-denied-write"
NON_STREAMED_OK = ["multiply_basic", "two_tools_interleaved", "text_only", "write_file_unicode"]
NON_STREAMED_BAD = [
    "args_invalid_json",
    "args_trailing_value",
    "args_duplicate_key",
    "args_nan",
    "schema_wrong_type",
    "unknown_tool",
    "calls_with_finish_stop",
    "tool_calls_finish_without_calls",
]


def _denied_stream() -> bytes:
    """A well-formed stream whose write_file call the example policy denies."""
    arguments = json.dumps({"path": f"/etc/{CANARY}/passwd", "content": f"x {CANARY}"})
    base = {
        "id": "chatcmpl-denied",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
    }

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    call = {"index": 0, "id": "call_denied", "type": "function"}
    return b"".join(
        [
            event({"role": "assistant", "content": ""}),
            event({"tool_calls": [{**call, "function": {"name": "write_file", "arguments": ""}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:20]}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": arguments[20:]}}]}),
            event({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )


UNCONVERTIBLE = "whole-body-litellm-cannot-convert"


def _unconvertible_body() -> bytes:
    """A whole chat result the gate approves but litellm cannot convert (``usage`` is no
    object); litellm's own error would quote it, arguments included."""
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "multiply", "arguments": json.dumps({"a": 7, "b": 8})},
    }
    value = {
        "id": "chatcmpl-unconvertible",
        "object": "chat.completion",
        "created": 1,
        "model": MODEL,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": CANARY, "tool_calls": [call]},
                "finish_reason": "tool_calls",
            }
        ],
        "usage": "x",
    }
    return json.dumps(value).encode()


def _said(content: Any) -> str:
    """The text of a message's content: a string, or a list of text parts."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _answer(request: dict[str, Any]) -> Scripted:
    if "input" in request:
        return _native_answer(request)
    name = _said(request["messages"][-1]["content"])
    if name == DENIED:
        return as_requested(request, _denied_stream())
    if name == UNCONVERTIBLE:
        return Scripted(_unconvertible_body(), content_type="application/json")
    case = CASES[name]
    transport = case.get("transport", {})
    return as_requested(
        request,
        body_of(case),
        disconnect_after=transport.get("disconnect_after"),
        stall_after=transport.get("stall_after"),
    )


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_answer) as server:
        yield server


@pytest.fixture(scope="module", params=["callbacks", "guardrails"])
def proxy(
    request: pytest.FixtureRequest, upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp(f"proxy-{request.param}")
    with running_proxy(prepare(request.param, folder), upstream.base_url) as running:
        yield running


def _client(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)


def _stream(proxy: Proxy, name: str) -> tuple[list[Any], BaseException | None]:
    chunks: list[Any] = []
    try:
        for chunk in _client(proxy).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": name}], stream=True
        ):
            chunks.append(chunk)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


def _calls(chunks: list[Any]) -> list[dict[str, Any]]:
    return [
        {
            "index": tc.index,
            "id": tc.id,
            "name": tc.function.name,
            "arguments": tc.function.arguments,
        }
        for chunk in chunks
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    ]


def _text(chunks: list[Any]) -> str:
    return "".join(choice.delta.content or "" for c in chunks for choice in c.choices)


def _check_refusal(error: BaseException | None, reason: str, *, streamed: bool) -> None:
    """A refusal names the reason, carries the family's status, and no argument text."""
    assert isinstance(error, openai.APIError), f"expected a refusal, got {error!r}"
    rendered = f"{error} {error!r} {error.body!r}"
    assert CANARY not in rendered
    assert reason in str(error)
    if isinstance(error, openai.APIStatusError):
        # Refused before the first chunk (or a whole response): a real HTTP error.
        assert error.status_code == QuarantineReason(reason).family.status_code
        assert CANARY not in error.response.text
    else:
        assert streamed, "a whole response is refused with an HTTP status"


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_fixture_streamed_through_the_proxy(proxy: Proxy, name: str) -> None:
    case = CASES[name]
    outcome, reason = expected(case)
    chunks, error = _stream(proxy, name)
    if outcome == "release":
        assert error is None, f"{name}: refused: {error}"
        assert _calls(chunks) == case["calls"]
        assert _text(chunks) == case["text"]
    else:
        assert reason is not None
        _check_refusal(error, reason, streamed=True)
        assert _calls(chunks) == [], "a tool-call fragment reached the client"
        assert case["text"].startswith(_text(chunks))


@pytest.mark.parametrize("name", NON_STREAMED_OK + NON_STREAMED_BAD)
def test_whole_responses_through_the_proxy(proxy: Proxy, name: str) -> None:
    case = CASES[name]
    client = _client(proxy)
    messages = [{"role": "user", "content": name}]
    if case["expect"] == "release":
        response = client.chat.completions.create(model=MODEL, messages=messages)
        message = response.choices[0].message
        got = [
            {"index": i, "id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
            for i, tc in enumerate(message.tool_calls or [])
        ]
        assert got == case["calls"]
        assert (message.content or "") == case["text"]
    else:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=MODEL, messages=messages)
        _check_refusal(caught.value, case["reason"], streamed=False)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_the_policy_from_yaml_denies(proxy: Proxy, stream: bool) -> None:
    if stream:
        chunks, error = _stream(proxy, DENIED)
        assert _calls(chunks) == []
    else:
        error = None
        try:
            _client(proxy).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": DENIED}]
            )
        except openai.APIError as exc:
            error = exc
    _check_refusal(error, "policy_denied", streamed=stream)


def test_a_whole_body_litellm_cannot_convert_is_refused_typed(proxy: Proxy) -> None:
    """Approved by the gate, refused by litellm's converter: a typed refusal, not litellm's
    own error (which quotes the body)."""
    with pytest.raises(openai.APIStatusError) as caught:
        _client(proxy).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": UNCONVERTIBLE}]
        )
    _check_refusal(caught.value, "carrier_mismatch", streamed=False)


def test_requests_must_carry_the_master_key(proxy: Proxy) -> None:
    response = httpx.post(
        f"{proxy.base_url}/chat/completions",
        json={"model": MODEL, "messages": [{"role": "user", "content": "multiply_basic"}]},
        headers={"Authorization": "Bearer sk-wrong"},
        timeout=30,
    )
    assert response.status_code in (400, 401, 403)


# ---- load ------------------------------------------------------------------------------------
GOOD = ["multiply_basic", "two_tools_interleaved", "text_only", "two_calls_interleaved"]
BAD = ["args_invalid_json", "done_without_finish", "disconnect_mid_arguments", "schema_wrong_type"]


async def _one(
    client: openai.AsyncOpenAI, name: str, headers: dict[str, str] | None = None
) -> tuple[str, list[Any], str | None]:
    chunks: list[Any] = []
    try:
        stream = await client.chat.completions.create(
            extra_headers=headers,
            model=MODEL,
            messages=[{"role": "user", "content": name}],
            stream=True,
        )
        async for chunk in stream:
            chunks.append(chunk)
    except openai.APIError as exc:
        return name, chunks, str(exc)
    return name, chunks, None


async def _gone(client: openai.AsyncOpenAI, name: str, after: int | None) -> None:
    """A client that goes away: after ``after`` chunks, or (None) while the request is out."""
    task = asyncio.ensure_future(_read_some(client, name, after))
    if after is None:
        await asyncio.sleep(0.01)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, openai.APIError):
        await task


async def _read_some(client: openai.AsyncOpenAI, name: str, after: int | None) -> None:
    stream = await client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": name}], stream=True
    )
    seen = 0
    async for _ in stream:
        seen += 1
        if after is not None and seen >= after:
            break
    await stream.close()


async def _load(proxy: Proxy, total: int) -> list[tuple[str, list[Any], str | None]]:
    names = [BAD[i // 10 % len(BAD)] if i % 10 == 0 else GOOD[i % len(GOOD)] for i in range(total)]
    limits = httpx.Limits(max_connections=2 * total, max_keepalive_connections=total)
    async with httpx.AsyncClient(limits=limits, timeout=120) as http:
        client = openai.AsyncOpenAI(
            base_url=proxy.base_url, api_key=proxy.key, max_retries=0, http_client=http
        )
        # Beside them, clients that go away mid-stream or before any answer came back.
        gone = [_gone(client, GOOD[i % len(GOOD)], (1, None)[i % 2]) for i in range(total // 10)]
        results = await asyncio.gather(*(_one(client, name) for name in names), *gone)
        return [r for r in results if r is not None]


def _settled(proxy: Proxy, deadline: float = 30.0) -> int:
    """The gate's in-flight count once the proxy has let go of every request (or the time
    is up): the taps of finished, failed and abandoned requests must all be gone."""
    end = time.monotonic() + deadline
    while (count := proxy.in_flight()) and time.monotonic() < end:
        time.sleep(0.2)
    return count


@pytest.mark.parametrize("proxy", ["guardrails"], indirect=True)  # once is enough
def test_two_hundred_concurrent_streams(proxy: Proxy) -> None:
    rounds = [proxy.rss_bytes()]
    assert proxy.in_flight() == 0
    for total in (200, 50):
        results = asyncio.run(_load(proxy, total))
        gc.collect()
        rounds.append(proxy.rss_bytes())
        # Every request the gate took in is let go: answered, refused, or abandoned.
        assert _settled(proxy) == 0
        good = [r for r in results if r[0] in GOOD]
        bad = [r for r in results if r[0] in BAD]
        assert len(bad) == total // 10 and len(good) == total - total // 10
        for name, chunks, error in good:
            assert error is None, f"{name}: {error}"
            assert _calls(chunks) == CASES[name]["calls"]
        for name, chunks, error in bad:
            assert error is not None and CASES[name]["reason"] in error
            assert CANARY not in error
            assert _calls(chunks) == []
    assert proxy.alive()
    # Memory is bounded. 200 concurrent streams raise the proxy's high-water mark once
    # (about 160 MiB here); a second, smaller round fits under that mark, so growth after
    # it means retained streams. The total stays far from what an unbounded buffer takes.
    print("proxy RSS MiB before, after 200, after 50 more:", [r >> 20 for r in rounds])
    before, first, second = rounds
    assert first - before < 512 * 1024 * 1024, rounds
    assert second - first < 32 * 1024 * 1024, rounds
    assert second < 2 * 1024**3
    chunks, error = _stream(proxy, "multiply_basic")
    assert error is None and _calls(chunks) == CASES["multiply_basic"]["calls"]


def test_requests_sharing_a_call_id_are_judged_on_their_own_wire(proxy: Proxy) -> None:
    """``x-litellm-call-id`` is the client's: equal values must not swap the gate's taps."""
    names = [GOOD[i % 2] if i % 2 else BAD[i % 3] for i in range(24)]
    same = {"x-litellm-call-id": "same-for-all"}

    async def run() -> list[tuple[str, list[Any], str | None]]:
        async with httpx.AsyncClient(timeout=120) as http:
            client = openai.AsyncOpenAI(
                base_url=proxy.base_url, api_key=proxy.key, max_retries=0, http_client=http
            )
            return await asyncio.gather(*(_one(client, n, same) for n in names))

    for name, chunks, error in asyncio.run(run()):
        if name in GOOD:
            assert error is None, f"{name}: {error}"
            assert _calls(chunks) == CASES[name]["calls"]
        else:
            assert error is not None and CASES[name]["reason"] in error, (name, error)
            assert _calls(chunks) == []


def test_a_bad_setting_stops_the_proxy_at_start_up() -> None:
    """The proxy's own guardrail start-up, in process: a bad setting must stop it.

    The proxy logs a guardrail whose constructor raises ValueError or TypeError and starts
    without it; GuardrailConfigError is neither, so it ends the start-up (checked by hand
    with a real proxy: "Application startup failed", exit status 3).
    """
    from litellm.proxy.guardrails.init_guardrails import init_guardrails_v2

    from litellm_toolgate import GuardrailConfigError

    config = yaml.safe_load((EXAMPLES / "proxy_guardrails.yaml").read_text())
    guardrail = config["guardrails"][0]
    guardrail["litellm_params"]["limits"]["max_callz"] = 3
    with pytest.raises(GuardrailConfigError, match="max_callz"):
        init_guardrails_v2([guardrail], config_file_path=str(EXAMPLES / "proxy_guardrails.yaml"))


def test_a_misspelt_key_stops_a_real_proxy(tmp_path: Path) -> None:
    """A real ``litellm --config`` start whose guardrail entry misspells ``policy``."""
    config = prepare("guardrails", tmp_path)
    text = config.read_text()
    assert "      policy: " in text
    config.write_text(text.replace("      policy: ", "      polcy: ", 1))
    with (
        pytest.raises(RuntimeError, match="exited at start-up") as caught,
        running_proxy(config, "http://127.0.0.1:9/v1"),
    ):
        raise AssertionError("the proxy started with a misspelt setting")
    assert "polcy" in str(caught.value)


# ---- the Responses API: /v1/responses, bridged and native ------------------------------------
NATIVE = "gpt-4o-mini-native"  # openai/ with the upstream as api_base: Responses SSE on the wire
RESPONSES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
R_MANIFEST = json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))
R_CASES = {c["name"]: c for c in R_MANIFEST["cases"]}
R_CALL_EVENTS = {"response.function_call_arguments.delta", "response.function_call_arguments.done"}


def _completed_response(sse: bytes) -> dict[str, Any]:
    """The response object a fixture's ``response.completed`` carries: its whole-body form."""
    for line in sse.decode().splitlines():
        if line.startswith("data:") and '"response.completed"' in line:
            return dict(json.loads(line[5:])["response"])
    raise AssertionError("no response.completed in the fixture")


def _native_answer(request: dict[str, Any]) -> Scripted:
    items = request["input"]
    name = _said(items if isinstance(items, str) else items[-1]["content"])
    if name in R_CASES:
        data = (RESPONSES / R_CASES[name]["body"]).read_bytes()
    else:  # a whole response made to order: "whole:<status>:<arguments>"
        _, status, arguments = name.split(":", 2)
        data = _whole_native(status, arguments)
    if request.get("stream") is True:
        return Scripted(data, chunk_sizes=[7, 64, 3])
    if name in R_CASES:
        data = json.dumps(_completed_response(data)).encode()
    return Scripted(data, content_type="application/json")


def _whole_native(status: str, arguments: str) -> bytes:
    item = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": arguments,
    }
    return json.dumps(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1767225600,
            "status": status,
            "model": MODEL,
            "output": [item],
        }
    ).encode()


def _kind(event: Any) -> str:
    return str(getattr(event, "type", ""))


def _is_call_event(event: Any) -> bool:
    item = getattr(event, "item", None)
    return _kind(event) in R_CALL_EVENTS or (
        _kind(event).startswith("response.output_item.")
        and getattr(item, "type", None) == "function_call"
    )


def _released(events: list[Any]) -> list[dict[str, Any]]:
    return [
        {k: getattr(e.item, k) for k in ("call_id", "name", "arguments")}
        for e in events
        if _kind(e) == "response.output_item.done" and _is_call_event(e)
    ]


def _responses_stream(proxy: Proxy, model: str, name: str) -> tuple[list[Any], Any]:
    """The events the client got, and the refusal: an exception or an ``error`` event."""
    events: list[Any] = []
    try:
        for event in _client(proxy).responses.create(
            model=model, input=name, tools=R_MANIFEST["tools"], stream=True
        ):
            events.append(event)
    except openai.APIError as exc:
        return events, exc
    errors = [e for e in events if _kind(e) in ("error", "response.failed")]
    return events, errors[0] if errors else None


def _check_responses_refusal(events: list[Any], error: Any, reason: str) -> None:
    assert error is not None, f"released {_released(events)!r}"
    assert not [e for e in events if _is_call_event(e)], "a function-call event reached the client"
    assert "response.completed" not in [_kind(e) for e in events]
    rendered = f"{error} {error!r} {getattr(error, 'body', '')!r}"
    assert CANARY not in rendered
    assert reason in rendered, rendered
    if isinstance(error, openai.APIStatusError):
        assert error.status_code == QuarantineReason(reason).family.status_code
        assert CANARY not in error.response.text


# Cases recorded for another route's profile run in the core suite under that route.
R_NATIVE = sorted(n for n, c in R_CASES.items() if c.get("route", "openai/").startswith("openai/"))
# The proxy's gate reads its tools from config_examples/tools.json, which declares function
# tools only: a client item of another type is a call of a tool nobody declared there.
UNDECLARED_ON_THE_PROXY = {"custom_tool_call", "apply_patch_call", "apply_patch_bad_diff"}
UNDECLARED_ON_THE_PROXY |= {"shell_call", "computer_call_batch"}
UNDECLARED_ON_THE_PROXY |= {"custom_grammar_lark", "custom_grammar_lark_refused"}
UNDECLARED_ON_THE_PROXY |= {"custom_grammar_regex", "custom_grammar_regex_refused"}


@pytest.mark.parametrize("name", R_NATIVE)
def test_responses_native_streamed_through_the_proxy(proxy: Proxy, name: str) -> None:
    case = R_CASES[name]
    events, error = _responses_stream(proxy, NATIVE, name)
    if name in UNDECLARED_ON_THE_PROXY:
        _check_responses_refusal(events, error, "unknown_tool")
    elif case["expect"] == "release":
        assert error is None, f"{name}: refused: {error}"
        assert _released(events) == case.get("calls", [])
        assert _kind(events[-1]) == "response.completed"
    else:
        _check_responses_refusal(events, error, case["reason"])


BRIDGED = [
    "multiply_basic",
    "text_only",
    "args_invalid_json",
    "unknown_tool",
    "done_without_finish",
]


@pytest.mark.parametrize("name", BRIDGED)
def test_responses_bridged_streamed_through_the_proxy(proxy: Proxy, name: str) -> None:
    """``/v1/responses`` on the cometapi model: litellm bridges to chat, the wire is chat SSE."""
    case = CASES[name]
    outcome, reason = expected(case)
    events, error = _responses_stream(proxy, MODEL, name)
    if outcome == "release":
        assert error is None, f"{name}: refused: {error}"
        want = [
            {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
            for c in case["calls"]
        ]
        assert _released(events) == want
    else:
        assert reason is not None
        _check_responses_refusal(events, error, reason)


@pytest.mark.parametrize(
    ("model", "name", "reason"),
    [
        (NATIVE, "multiply_basic", None),
        (NATIVE, "whole:completed:" + '{"a": 7, "b": "' + CANARY, "invalid_json"),
        (NATIVE, "whole:incomplete:" + '{"a": 7, "b": 8}', "response_incomplete"),
        (MODEL, "multiply_basic", None),
        (MODEL, "args_invalid_json", "invalid_json"),
        (MODEL, "unknown_tool", "unknown_tool"),
    ],
    ids=[
        "native-ok",
        "native-json",
        "native-incomplete",
        "bridged-ok",
        "bridged-json",
        "bridged-unknown",
    ],
)
def test_responses_whole_through_the_proxy(
    proxy: Proxy, model: str, name: str, reason: str | None
) -> None:
    client = _client(proxy)
    if reason is None:
        response = client.responses.create(model=model, input=name, tools=R_MANIFEST["tools"])
        calls = [
            {"call_id": i.call_id, "name": i.name, "arguments": i.arguments}
            for i in response.output
            if i.type == "function_call"
        ]
        assert (
            calls
            == [
                {"call_id": c["id"], "name": c["name"], "arguments": c["arguments"]}
                for c in CASES["multiply_basic"]["calls"]
            ]
            if model == MODEL
            else R_CASES["multiply_basic"]["calls"]
        )
        return
    with pytest.raises(openai.APIStatusError) as caught:
        client.responses.create(model=model, input=name, tools=R_MANIFEST["tools"])
    _check_responses_refusal([], caught.value, reason)


# ---- litellm's guardrail conventions: default_on: false, selected per request --------------
OPT_IN = {"guardrails": ["toolgate"]}  # the request names the guardrail (its guardrail_name)
# What plain litellm hands over as finished, and the gate refuses: faults of the arguments
# (found at the end), and faults of the wire (found while streaming, where the gate cuts the
# body short when it gates the request). The first two also as whole responses.
WHOLE_UNGATED = ["args_trailing_value", "schema_wrong_type"]
PASSED_UNGATED = [
    *WHOLE_UNGATED,
    "fragment_after_finish",
    "data_after_done",
    "identity_conflict_id",
    "malformed_data_line",
]


@pytest.fixture(scope="module")
def opt_in_proxy(
    upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    """The guardrails example with ``default_on: false``: only requests naming it are gated."""
    config = prepare("guardrails", tmp_path_factory.mktemp("proxy-opt-in"))
    text = config.read_text()
    assert "default_on: true" in text
    config.write_text(text.replace("default_on: true", "default_on: false"))
    with running_proxy(config, upstream.base_url) as running:
        yield running


def _gate_lines(proxy: Proxy) -> list[str]:
    """The gate's own log lines in the proxy's output (its WARNING records: quarantines)."""
    text = proxy.log.read_text(errors="replace")
    return [
        line for line in text.splitlines() if "toolgate call" in line or "toolgate attempt" in line
    ]


def _opt_in_stream(proxy: Proxy, name: str, extra: dict[str, Any] | None) -> tuple[list[Any], Any]:
    chunks: list[Any] = []
    try:
        for chunk in _client(proxy).chat.completions.create(
            model=MODEL,
            messages=[{"role": "user", "content": name}],
            stream=True,
            extra_body=extra,
        ):
            chunks.append(chunk)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


@pytest.mark.parametrize("name", PASSED_UNGATED)
def test_a_request_that_does_not_select_the_gate_passes_untouched(
    opt_in_proxy: Proxy, name: str
) -> None:
    before = _gate_lines(opt_in_proxy)
    chunks, error = _opt_in_stream(opt_in_proxy, name, None)
    assert error is None, f"the gate ran on a request that did not select it: {error}"
    assert _calls(chunks), "litellm's tool call did not reach the client"
    if name in WHOLE_UNGATED:
        whole = _client(opt_in_proxy).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": name}]
        )
        assert whole.choices[0].message.tool_calls
    assert _gate_lines(opt_in_proxy) == before, "the gate recorded a request it did not gate"


@pytest.mark.parametrize("name", PASSED_UNGATED)
def test_a_request_that_selects_the_gate_is_gated_as_always(opt_in_proxy: Proxy, name: str) -> None:
    before = len(_gate_lines(opt_in_proxy))
    chunks, error = _opt_in_stream(opt_in_proxy, name, OPT_IN)
    _check_refusal(error, CASES[name]["reason"], streamed=True)
    assert _calls(chunks) == []
    # The refusal is in the gate's log (so the check that an unselected request left no
    # line there can see a line when there is one).
    assert len(_gate_lines(opt_in_proxy)) > before
    if name in WHOLE_UNGATED:
        with pytest.raises(openai.APIStatusError) as caught:
            _client(opt_in_proxy).chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": name}], extra_body=OPT_IN
            )
        _check_refusal(caught.value, CASES[name]["reason"], streamed=False)
    chunks, error = _opt_in_stream(opt_in_proxy, "multiply_basic", OPT_IN)
    assert error is None and _calls(chunks) == CASES["multiply_basic"]["calls"]


# ---- chat on an openai/ deployment: litellm calls through the OpenAI SDK ----------------------
# The gate hands litellm an openai.AsyncOpenAI on a tapped transport there (a litellm handler
# would fail inside litellm). The SDK parses the stream itself, so the outcome is the wire's.
SDK_CASES = [
    "multiply_basic",
    "two_tools_interleaved",
    "args_invalid_json",
    "unknown_tool",
    "done_without_finish",
]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("name", SDK_CASES)
def test_chat_on_an_openai_deployment(proxy: Proxy, name: str, stream: bool) -> None:
    case = CASES[name]
    messages = [{"role": "user", "content": name}]
    client = _client(proxy)
    if stream:
        chunks: list[Any] = []
        error: BaseException | None = None
        try:
            for chunk in client.chat.completions.create(
                model=NATIVE, messages=messages, stream=True
            ):
                chunks.append(chunk)
        except openai.APIError as exc:
            error = exc
        if case["expect"] == "release":
            assert error is None, f"{name}: refused: {error}"
            assert _calls(chunks) == case["calls"]
        else:
            _check_refusal(error, case["reason"], streamed=True)
            assert _calls(chunks) == []
        return
    if case["expect"] == "release":
        message = client.chat.completions.create(model=NATIVE, messages=messages).choices[0].message
        got = [
            {"index": i, "id": tc.id, "name": tc.function.name, "arguments": tc.function.arguments}
            for i, tc in enumerate(message.tool_calls or [])
        ]
        assert got == case["calls"]
    else:
        with pytest.raises(openai.APIStatusError) as caught:
            client.chat.completions.create(model=NATIVE, messages=messages)
        _check_refusal(caught.value, case["reason"], streamed=False)
