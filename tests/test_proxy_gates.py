"""Two ``guardrails:`` entries of the gate in a real LiteLLM proxy decide one request together.

A global entry (the guardrails example, ``default_on: true``) and a team's narrower one
(``default_on: false``: only requests naming ``team`` select it, whose ``multiply`` allows
``a`` up to 5 only). A request selecting only the global entry is judged by it alone; one
selecting both is released only when both would release it, and otherwise refused with the
quarantine the stricter entry gives, streamed and whole, before anything of the call went
out. Needs litellm's proxy extra, like tests/test_proxy_e2e.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml
from conftest import CANARY, CASES, body_of
from proxyproc import Proxy, prepare, require_proxy, running_proxy

from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy
require_proxy()

TEAM = {"guardrails": ["team"]}
NARROW_MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number", "maximum": 5}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
}


def _answer(request: dict[str, Any]) -> Scripted:
    return as_requested(request, body_of(CASES[str(request["messages"][-1]["content"])]))


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_answer) as server:
        yield server


@pytest.fixture(scope="module")
def two_entries(
    upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    config = prepare("guardrails", tmp_path_factory.mktemp("proxy-two-gates"))
    settings = yaml.safe_load(config.read_text())
    settings["guardrails"].append(
        {
            "guardrail_name": "team",
            "litellm_params": {
                "guardrail": "litellm_toolgate.ToolGateGuardrail",
                "mode": "post_call",
                "default_on": False,
                "tools": [NARROW_MULTIPLY],
            },
        }
    )
    config.write_text(yaml.safe_dump(settings))
    with running_proxy(config, upstream.base_url) as running:
        yield running


def _ask(proxy: Proxy, name: str, extra: dict[str, Any] | None, stream: bool) -> tuple[Any, Any]:
    """What the client got (a whole response, or the chunks that arrived) and the error."""
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    messages = [{"role": "user", "content": name}]
    chunks: list[Any] = []
    try:
        if not stream:
            whole = client.chat.completions.create(
                model="gpt-4o-mini", messages=messages, extra_body=extra
            )
            return whole, None
        for chunk in client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, extra_body=extra
        ):
            chunks.append(chunk)
    except openai.APIError as exc:
        return chunks, exc
    return chunks, None


def _arguments(result: Any, stream: bool) -> str:
    if not stream:
        return "".join(tc.function.arguments for tc in result.choices[0].message.tool_calls or [])
    return "".join(
        tc.function.arguments or ""
        for chunk in result
        for choice in chunk.choices
        for tc in choice.delta.tool_calls or []
    )


@pytest.mark.parametrize("stream", [True, False])
def test_a_request_selecting_both_entries_is_released_only_if_both_release_it(
    two_entries: Proxy, stream: bool
) -> None:
    result, error = _ask(two_entries, "multiply_basic", None, stream)
    assert error is None, error  # the global entry alone: a = 7 is a number
    assert _arguments(result, stream).replace(" ", "") == '{"a":7,"b":8}'
    result, error = _ask(two_entries, "multiply_basic", TEAM, stream)
    # Refused: an HTTP 422 before the first chunk, or the proxy's error frame after it.
    assert isinstance(error, openai.APIError), (result, error)
    assert "schema_invalid" in str(error)
    assert not isinstance(error, openai.APIStatusError) or error.status_code == 422
    assert CANARY not in f"{error} {error.body!r}"
    if stream:
        assert _arguments(result, stream) == ""  # nothing of the call went out


@pytest.mark.parametrize("stream", [True, False])
def test_a_call_either_entry_refuses_is_refused(two_entries: Proxy, stream: bool) -> None:
    # The global entry refuses what the team's would allow (an unknown tool to both here).
    result, error = _ask(two_entries, "unknown_tool", TEAM, stream)
    assert isinstance(error, openai.APIError), (result, error)
    assert "unknown_tool" in str(error)
    if stream:
        assert _arguments(result, stream) == ""
