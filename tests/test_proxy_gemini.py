"""One ``gemini/`` deployment gated in a real LiteLLM proxy, driven with the ``openai`` client.

One proxy from ``config_examples/proxy_gemini.yaml`` (a ``guardrails:`` entry) in front of a
FakeUpstream that answers with Gemini fixtures (``fixtures/gemini``) in the order they are
queued. A good stream arrives with its call; a broken one (arguments the tool's schema
refuses) is refused, no tool call handed out and its argument text in no error; a whole
response the same (a call cut by ``MAX_TOKENS``).

Needs litellm's proxy extra (``.venv-litellm-1.108.7``), like ``test_proxy_e2e.py``.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from conftest import CANARY
from proxyproc import EXAMPLES, Proxy, proxy_missing, running_proxy
from wirecases import Fixtures

from litellm_toolgate.demo.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy

_MISSING = proxy_missing()
if _MISSING is not None:
    if os.environ.get("TOOLGATE_REQUIRE_PROXY"):
        raise RuntimeError(f"TOOLGATE_REQUIRE_PROXY is set but {_MISSING}")
    pytest.skip(_MISSING, allow_module_level=True)

GEMINI = Fixtures("gemini")
TOOLS = GEMINI.manifest["tools"][:1]  # multiply, as the example config declares


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp("proxy_gemini")
    config = folder / "proxy_gemini.yaml"
    shutil.copy(EXAMPLES / config.name, config)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GEMINI_API_KEY", "test-key")  # the upstream is loopback: no real key
        with running_proxy(config, upstream.root_url) as running:
            yield running


def _client(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)


def _ask(proxy: Proxy, upstream: FakeUpstream, name: str, *, stream: bool) -> tuple[Any, Any]:
    """What the client got (its chunks, or the whole response) and the error it raised."""
    kind = "text/event-stream" if stream else "application/json"
    upstream.enqueue(Scripted(GEMINI.body(name), content_type=kind, chunk_sizes=[5, 64]))
    got: list[Any] = []
    try:
        result = _client(proxy).chat.completions.create(
            model="gemini-flash",
            messages=[{"role": "user", "content": "What is 7 times 8? Use multiply."}],
            tools=TOOLS,
            stream=stream,
        )
        if stream:
            got.extend(result)
        else:
            got.append(result)
    except openai.APIError as exc:
        return got, exc
    return got, None


def _stream_calls(chunks: list[Any]) -> list[tuple[str | None, str]]:
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, ""])
                call[0] = call[0] or tc.function.name
                call[1] += tc.function.arguments or ""
    return [(c[0], c[1]) for _, c in sorted(calls.items())]


def _refused(error: Any, reason: str) -> None:
    """An HTTP error with the quarantine's status before the first chunk went out, or the
    proxy's error frame after it (the ``openai`` client raises it as an ``APIError``)."""
    assert isinstance(error, openai.APIError), repr(error)
    if isinstance(error, openai.APIStatusError):
        assert error.status_code >= 400, error.status_code
    assert reason in str(error), (reason, str(error))
    assert CANARY not in str(error) and CANARY not in repr(error.body)


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_good_released_and_broken_refused(
    proxy: Proxy, upstream: FakeUpstream, stream: bool
) -> None:
    good = "multiply_basic" if stream else "whole_multiply"
    got, error = _ask(proxy, upstream, good, stream=stream)
    assert error is None, repr(error)
    if stream:
        calls = _stream_calls(got)
        assert got[-1].choices[0].finish_reason == "tool_calls"
    else:
        message = got[0].choices[0].message
        calls = [(tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]
    assert [(n, json.loads(a)) for n, a in calls] == [("multiply", {"a": 7, "b": 8})]

    bad = "arguments_schema_invalid" if stream else "whole_max_tokens"
    got, error = _ask(proxy, upstream, bad, stream=stream)
    _refused(error, GEMINI.cases[bad]["reason"])
    assert got == [] if not stream else _stream_calls(got) == []
