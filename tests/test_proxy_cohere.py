"""A ``cohere/`` deployment behind a real LiteLLM proxy gated by the ``guardrails:`` entry.

The proxy runs every call async. litellm's Cohere handler drops the ``client=`` the gate
hands an async call, so the gate claims litellm's own client for the call by a one-time
token in its ``extra_headers`` (``sync/tokenclaim.py``, ``docs/cohere.md``): a whole call is
gated (every whole recording of ``fixtures/cohere`` gives the manifest's outcome: its exact
calls, or an HTTP error with the quarantine's reason and no argument text), the token never
reaches the upstream, and each answer was asked for exactly once. A stream is refused with
the gate's typed status (501) for litellm's Cohere stream reader, and never goes upstream.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml
from conftest import CANARY
from proxyproc import Proxy, prepare, require_proxy, running_proxy
from wirecases import Fixtures

from litellm_toolgate.edge.sync.tokenclaim import TOKEN_HEADER
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_header

require_proxy()
COHERE = Fixtures("cohere")
CASES = COHERE.cases


class Served:
    """The answers queued for the upstream, and the token header each request carried."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.tokens: list[str | None] = []

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.tokens.append(request_header(TOKEN_HEADER))
        return self.queue.popleft()


@pytest.fixture(scope="module")
def served() -> Served:
    return Served()


@pytest.fixture(scope="module")
def upstream(served: Served) -> Iterator[FakeUpstream]:
    with FakeUpstream(served) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp("proxy-cohere")
    config = prepare("guardrails", folder)
    settings = yaml.safe_load(config.read_text())
    settings["model_list"].append(
        {
            "model_name": "command-a",
            "litellm_params": {
                "model": "cohere/command-a-03-2025",
                "api_base": upstream.root_url + "/v2/chat",
                "api_key": "throwaway",
            },
        }
    )
    config.write_text(yaml.safe_dump(settings))
    with running_proxy(config, upstream.base_url) as running:
        yield running


def _ask(proxy: Proxy, *, stream: bool) -> Any:
    proxy.ensure_running()
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    tools: Any = COHERE.manifest["tools"]
    answer: Any = client.chat.completions.create(
        model="command-a",
        messages=[{"role": "user", "content": "What is 7 times 8?"}],
        tools=tools,
        stream=stream,
    )
    return list(answer) if stream else answer


def test_a_streamed_call_is_refused_unsent(proxy: Proxy, upstream: FakeUpstream) -> None:
    sent = len(upstream.requests)
    with pytest.raises(openai.APIStatusError) as info:
        _ask(proxy, stream=True)
    assert info.value.status_code == 501, info.value
    assert "reads each SSE line as bare JSON" in str(info.value), info.value
    assert len(upstream.requests) == sent, "the refused request reached the upstream"


@pytest.mark.parametrize("name", COHERE.whole)
def test_every_whole_body_is_gated(
    proxy: Proxy, upstream: FakeUpstream, served: Served, name: str
) -> None:
    case = CASES[name]
    served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
    sent = len(upstream.requests)
    try:
        answer, error = _ask(proxy, stream=False), None
    except openai.APIError as exc:
        answer, error = None, exc
    assert len(upstream.requests) == sent + 1
    assert served.tokens[-1] is None, "the gate's token reached the upstream"
    if case["expect"] == "release":
        assert error is None, (name, repr(error))
        calls = answer.choices[0].message.tool_calls or []
        got = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls]
        wanted = [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case["calls"]]
        assert got == wanted
        return
    assert isinstance(error, openai.APIStatusError), repr(error)
    assert error.status_code >= 400, error.status_code
    assert case["reason"] in str(error), (case["reason"], str(error))
    assert CANARY not in str(error) and CANARY not in repr(error.body)


@pytest.mark.parametrize("name", ["whole_two_calls", "whole_duplicate_key", "whole_max_tokens"])
def test_a_whole_responses_call_is_gated(
    proxy: Proxy, upstream: FakeUpstream, served: Served, name: str
) -> None:
    """``/v1/responses``: litellm bridges it to a Cohere chat call; its function-call items
    are cross-checked with the wire (by call id, name and arguments)."""
    case = CASES[name]
    served.queue.append(Scripted(COHERE.body(name), content_type="application/json"))
    proxy.ensure_running()
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    tools: Any = [{"type": "function", **t["function"]} for t in COHERE.manifest["tools"]]
    sent = len(upstream.requests)
    try:
        answer: Any = client.responses.create(model="command-a", input="7 x 8?", tools=tools)
        error = None
    except openai.APIError as exc:
        answer, error = None, exc
    assert len(upstream.requests) == sent + 1
    assert served.tokens[-1] is None, "the gate's token reached the upstream"
    if case["expect"] == "release":
        assert error is None, (name, repr(error))
        items = [o for o in answer.output if o.type == "function_call"]
        got = [(o.call_id, o.name, json.loads(o.arguments)) for o in items]
        wanted = [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in case["calls"]]
        assert got == wanted
        return
    assert isinstance(error, openai.APIStatusError), repr(error)
    assert case["reason"] in str(error), (case["reason"], str(error))
    assert CANARY not in str(error) and CANARY not in repr(error.body)
