"""Two ``vertex_ai/`` deployments gated in one real LiteLLM proxy, driven with the ``openai``
client.

One proxy from ``config_examples/proxy_vertex.yaml`` (a ``guardrails:`` entry) with a Gemini
and a Claude deployment on Vertex AI, in front of a FakeUpstream that answers with Gemini
(``fixtures/gemini``) and Anthropic (``fixtures/anthropic``) recordings in the order they are
queued. The proxy gets its Google token from the loopback token endpoint of
tests/vertexauth.py (a throwaway service account's JSON file). On each deployment a good
answer arrives with its call; a broken one is refused, no tool call handed out and its
argument text in no error; streamed and whole.

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
from vertexauth import LOCATION, PROJECT, TOKENS, credentials
from wirecases import Fixtures

from litellm_toolgate.demo.upstream import FakeUpstream, Scripted, request_path

pytestmark = pytest.mark.proxy

_MISSING = proxy_missing()
if _MISSING is not None:
    if os.environ.get("TOOLGATE_REQUIRE_PROXY"):
        raise RuntimeError(f"TOOLGATE_REQUIRE_PROXY is set but {_MISSING}")
    pytest.skip(_MISSING, allow_module_level=True)

GEMINI = Fixtures("gemini")
ANTHROPIC = Fixtures("anthropic")
TOOLS = GEMINI.manifest["tools"][:2]  # multiply and write_file, as the example declares
# deployment: (recordings, (good, broken) streamed, (good, broken) whole, the path it calls)
DEPLOYMENTS = {
    "vertex-gemini": (
        GEMINI,
        ("multiply_basic", "arguments_schema_invalid"),
        ("whole_multiply", "whole_max_tokens"),
        "/publishers/google/models/gemini-2.5-flash:",
    ),
    "vertex-claude": (
        ANTHROPIC,
        ("multiply_basic", "arguments_truncated"),
        ("whole_tool_use", "whole_max_tokens"),
        "/publishers/anthropic/models/claude-sonnet-4@20250514:",
    ),
}


class _Paths:
    """Serves the queue, and notes the path of each request."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        self.queue: list[Scripted] = []

    def __call__(self, payload: dict[str, Any]) -> Scripted:
        self.seen.append(request_path())
        return self.queue.pop(0)


@pytest.fixture(scope="module")
def paths() -> _Paths:
    return _Paths()


@pytest.fixture(scope="module")
def upstream(paths: _Paths) -> Iterator[FakeUpstream]:
    with FakeUpstream(paths) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, upstream: FakeUpstream) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp("proxy_vertex")
    config = folder / "proxy_vertex.yaml"
    shutil.copy(EXAMPLES / config.name, config)
    account = folder / "service-account.json"
    account.write_text(credentials())
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VERTEX_CREDENTIALS", str(account))
        patch.setenv("VERTEX_PROJECT", PROJECT)
        patch.setenv("VERTEX_LOCATION", LOCATION)
        with running_proxy(config, upstream.root_url) as running:
            yield running


def _ask(proxy: Proxy, paths: _Paths, model: str, body: bytes, *, stream: bool) -> tuple[Any, Any]:
    """What the client got (its chunks, or the whole response) and the error it raised."""
    kind = "text/event-stream" if stream else "application/json"
    paths.queue.append(Scripted(body, content_type=kind, chunk_sizes=[5, 64]))
    proxy.ensure_running()
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0)
    got: list[Any] = []
    try:
        result = client.chat.completions.create(
            model=model,
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
@pytest.mark.parametrize("model", DEPLOYMENTS)
def test_good_released_and_broken_refused(
    proxy: Proxy, upstream: FakeUpstream, paths: _Paths, model: str, stream: bool
) -> None:
    fixtures, streamed, whole, path = DEPLOYMENTS[model]
    good, bad = streamed if stream else whole
    sent = len(paths.seen)
    got, error = _ask(proxy, paths, model, fixtures.body(good), stream=stream)
    assert error is None, repr(error)
    if stream:
        calls = _stream_calls(got)
        assert got[-1].choices[0].finish_reason == "tool_calls"
    else:
        message = got[0].choices[0].message
        calls = [(tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]
    want = [(c["name"], json.loads(c["arguments"])) for c in fixtures.cases[good]["calls"]]
    assert [(n, json.loads(a)) for n, a in calls] == want

    got, error = _ask(proxy, paths, model, fixtures.body(bad), stream=stream)
    _refused(error, fixtures.cases[bad]["reason"])
    assert got == [] if not stream else _stream_calls(got) == []
    # Two model requests, each at Vertex's path for the deployment; the Google token went to
    # the token endpoint, never to the upstream.
    assert len(paths.seen) == sent + 2
    assert all(f"/projects/{PROJECT}/locations/{LOCATION}" in p for p in paths.seen[sent:])
    assert all(path in p for p in paths.seen[sent:])
    assert TOKENS and not any("token" in p for p in paths.seen)
