"""The Gemini, Ollama, Bedrock and Vertex AI deployments gated in real LiteLLM proxies, driven
with the ``openai`` client.

One proxy per example config (``config_examples/proxy_gemini.yaml``, ``proxy_ollama.yaml``,
``proxy_bedrock.yaml``, ``proxy_vertex.yaml``: each a ``guardrails:`` entry), in front of a
FakeUpstream that answers with the wire's recordings (``fixtures/<wire>``) in the order they
are queued and notes the path each request went to. On each deployment, streamed and whole:
a good answer arrives with exactly its calls; a broken one is refused (an HTTP error before
the first chunk, or the proxy's error frame after it), no tool call handed out and its
argument text in no error; and each answer was asked for exactly once, at the deployment's
own path. The Vertex proxy gets its Google token from the loopback token endpoint of
``tests/vertexauth.py`` (a throwaway service account's file), never from the upstream.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``), like ``test_proxy_e2e.py``.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import openai
import pytest
from conftest import CANARY
from proxyproc import EXAMPLES, Proxy, require_proxy, running_proxy
from vertexauth import LOCATION, PROJECT, TOKENS, credentials
from wirecases import Fixtures

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, request_path

pytestmark = pytest.mark.proxy
require_proxy()

GEMINI, OLLAMA = Fixtures("gemini"), Fixtures("ollama")
BEDROCK, ANTHROPIC = Fixtures("bedrock"), Fixtures("anthropic")


@dataclass(frozen=True)
class Deployment:
    """One ``model_name`` of a config: its recordings, the (good, broken) streamed and whole
    cases, the media type of its streamed body and a piece of the path litellm calls."""

    fixtures: Fixtures
    streamed: tuple[str, str]
    whole: tuple[str, str]
    path: str
    media: str = "text/event-stream"
    ids: bool = False
    """Whether litellm hands over the wire's call ids (Bedrock's toolUseId) unchanged."""


def _vertex_env(folder: Path) -> dict[str, str]:
    account = folder / "service-account.json"
    account.write_text(credentials())
    return {
        "VERTEX_CREDENTIALS": str(account),
        "VERTEX_PROJECT": PROJECT,
        "VERTEX_LOCATION": LOCATION,
    }


@dataclass(frozen=True)
class Config:
    """One example config, the environment its proxy needs and its deployments."""

    file: str
    deployments: dict[str, Deployment]
    tools: int
    """How many of the manifest's tools (multiply first) the example config declares."""
    env: Callable[[Path], dict[str, str]] = field(default=lambda folder: {})


CONFIGS = {
    "gemini": Config(
        "proxy_gemini.yaml",
        {
            "gemini-flash": Deployment(
                GEMINI,
                ("multiply_basic", "arguments_schema_invalid"),
                ("whole_multiply", "whole_max_tokens"),
                "/models/gemini-2.5-flash:",
            )
        },
        tools=1,
        env=lambda folder: {"GEMINI_API_KEY": "test-key"},  # loopback: no real key
    ),
    "ollama": Config(
        "proxy_ollama.yaml",
        {
            "qwen3": Deployment(
                OLLAMA,
                ("multiply_basic", "arguments_schema_invalid"),
                ("whole_multiply", "whole_cut_by_length"),
                "/api/chat",
                media="application/x-ndjson",
            )
        },
        tools=1,
    ),
    "bedrock": Config(
        "proxy_bedrock.yaml",
        {
            "claude": Deployment(
                BEDROCK,
                ("multiply_basic", "schema_invalid"),
                ("whole_two_calls", "whole_max_tokens_with_call"),
                "/converse",
                media="application/vnd.amazon.eventstream",
                ids=True,
            )
        },
        tools=2,
        env=lambda folder: {
            "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
            "AWS_SECRET_ACCESS_KEY": "not-a-secret",
            "AWS_REGION_NAME": "us-east-1",
        },
    ),
    "vertex": Config(
        "proxy_vertex.yaml",
        {
            "vertex-gemini": Deployment(
                GEMINI,
                ("multiply_basic", "arguments_schema_invalid"),
                ("whole_multiply", "whole_max_tokens"),
                f"/projects/{PROJECT}/locations/{LOCATION}/publishers/google/models/gemini-2.5-flash:",
            ),
            "vertex-claude": Deployment(
                ANTHROPIC,
                ("multiply_basic", "arguments_truncated"),
                ("whole_tool_use", "whole_max_tokens"),
                f"/projects/{PROJECT}/locations/{LOCATION}"
                "/publishers/anthropic/models/claude-sonnet-4@20250514:",
            ),
        },
        tools=2,
        env=_vertex_env,
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


@dataclass
class Served:
    config: Config
    proxy: Proxy
    paths: _Paths


@pytest.fixture(scope="module", params=list(CONFIGS))
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    config = CONFIGS[request.param]
    paths = _Paths()
    folder = tmp_path_factory.mktemp(f"proxy_{request.param}")
    path = folder / config.file
    shutil.copy(EXAMPLES / config.file, path)
    with FakeUpstream(paths) as upstream, pytest.MonkeyPatch.context() as patch:
        for name, value in config.env(folder).items():
            patch.setenv(name, value)
        with running_proxy(path, upstream.root_url) as proxy:
            yield Served(config, proxy, paths)


def _ask(served: Served, model: str, name: str, *, stream: bool) -> tuple[list[Any], Any]:
    """What the client got (its chunks, or the whole response) and the error it raised."""
    deployment = served.config.deployments[model]
    kind = deployment.media if stream else "application/json"
    body = deployment.fixtures.body(name)
    served.paths.queue.append(Scripted(body, content_type=kind, chunk_sizes=[5, 64]))
    served.proxy.ensure_running()
    client = openai.OpenAI(base_url=served.proxy.base_url, api_key=served.proxy.key, max_retries=0)
    tools = deployment.fixtures.manifest["tools"][: served.config.tools]
    got: list[Any] = []
    try:
        result = client.chat.completions.create(
            model=model,
            messages=[{"role": "user", "content": "What is 7 times 8? Use multiply."}],
            tools=tools,
            stream=stream,
        )
        if stream:
            got.extend(result)
        else:
            got.append(result)
    except openai.APIError as exc:
        return got, exc
    return got, None


def _calls(got: list[Any], *, stream: bool) -> list[tuple[str | None, str | None, str]]:
    """(id, name, arguments) of every call handed out, in order."""
    if not stream:
        message = got[0].choices[0].message
        return [(tc.id, tc.function.name, tc.function.arguments) for tc in message.tool_calls or []]
    calls: dict[int, list[Any]] = {}
    for chunk in got:
        for choice in chunk.choices:
            for tc in choice.delta.tool_calls or []:
                call = calls.setdefault(tc.index, [None, None, ""])
                call[0] = call[0] or tc.id
                call[1] = call[1] or tc.function.name
                call[2] += tc.function.arguments or ""
    return [(c[0], c[1], c[2]) for _, c in sorted(calls.items())]


def _refused(error: Any, reason: str) -> None:
    """An HTTP error with the quarantine's status before the first chunk went out, or the
    proxy's error frame after it (the ``openai`` client raises it as an ``APIError``)."""
    assert isinstance(error, openai.APIError), repr(error)
    if isinstance(error, openai.APIStatusError):
        assert error.status_code >= 400, error.status_code
    assert reason in str(error), (reason, str(error))
    assert CANARY not in str(error) and CANARY not in repr(error.body)


def _wanted(deployment: Deployment, name: str) -> list[tuple[str | None, str, Any]]:
    return [
        (
            c.get("call_id", c.get("id")) if deployment.ids else None,
            c["name"],
            json.loads(c["arguments"]),
        )
        for c in deployment.fixtures.cases[name]["calls"]
    ]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_good_released_and_broken_refused(served: Served, stream: bool) -> None:
    for model, deployment in served.config.deployments.items():
        good, bad = deployment.streamed if stream else deployment.whole
        sent = len(served.paths.seen)
        got, error = _ask(served, model, good, stream=stream)
        assert error is None, (model, repr(error))
        if stream:
            finishes = [c.choices[0].finish_reason for c in got if c.choices]
            assert finishes[-1] == "tool_calls", (model, finishes)
        calls = [
            (i if deployment.ids else None, n, json.loads(a))
            for i, n, a in _calls(got, stream=stream)
        ]
        assert calls == _wanted(deployment, good), model

        got, error = _ask(served, model, bad, stream=stream)
        _refused(error, deployment.fixtures.cases[bad]["reason"])
        assert (got == []) if not stream else (_calls(got, stream=True) == [])
        # Two model requests, each at the deployment's own path.
        assert len(served.paths.seen) == sent + 2, (model, served.paths.seen[sent:])
        assert all(deployment.path in p for p in served.paths.seen[sent:]), served.paths.seen[sent:]
    if served.config.file == "proxy_vertex.yaml":
        # The Google token went to the token endpoint, never to the upstream.
        assert TOKENS and not any("token" in p for p in served.paths.seen)


def _responses(served: Served, model: str, name: str, *, stream: bool) -> tuple[list[Any], Any]:
    """``/v1/responses`` on a deployment: the events (or the whole response) and the error."""
    deployment = served.config.deployments[model]
    kind = deployment.media if stream else "application/json"
    served.paths.queue.append(
        Scripted(deployment.fixtures.body(name), content_type=kind, chunk_sizes=[5, 64])
    )
    served.proxy.ensure_running()
    client = openai.OpenAI(base_url=served.proxy.base_url, api_key=served.proxy.key, max_retries=0)
    tools = [
        {"type": "function", **t["function"]}
        for t in deployment.fixtures.manifest["tools"][: served.config.tools]
    ]
    got: list[Any] = []
    try:
        result = client.responses.create(
            model=model, input="What is 7 times 8? Use multiply.", tools=tools, stream=stream
        )
        if stream:
            got.extend(result)
        else:
            got.append(result)
    except openai.APIError as exc:
        return got, exc
    return got, None


def _items(got: list[Any], *, stream: bool) -> list[tuple[str, str, Any]]:
    """(call id, name, argument value) of every function-call item handed out."""
    if stream:
        done = [e.item for e in got if e.type == "response.output_item.done"]
    else:
        done = list(got[0].output)
    return [(i.call_id, i.name, json.loads(i.arguments)) for i in done if i.type == "function_call"]


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_responses_reach_the_caller_under_the_gate_s_identities(
    served: Served, stream: bool
) -> None:
    """``/v1/responses`` on Gemini's wire, a whole Ollama body and Bedrock's Converse:
    litellm bridges them to chat and keeps an id the wire sends (Converse always sends
    one), so the gate writes its identity of each call sent without one into the body it
    releases; the client gets the calls under the ids the gate's records name, and a
    broken body is refused. A streamed Ollama call, whose ids
    litellm draws whatever the line says, is refused before it is sent."""
    for model, deployment in served.config.deployments.items():
        good, bad = deployment.streamed if stream else deployment.whole
        sent = len(served.paths.seen)
        if stream and deployment.fixtures is OLLAMA:
            got, error = _responses(served, model, good, stream=True)
            served.paths.queue.clear()
            assert isinstance(error, openai.APIStatusError), repr(error)
            assert error.status_code == 501 and "use ToolGate" in str(error)
            assert len(served.paths.seen) == sent  # refused before sending
            continue
        got, error = _responses(served, model, good, stream=stream)
        assert error is None, (model, repr(error))
        assert _items(got, stream=stream) == [
            (c["call_id"], c["name"], json.loads(c["arguments"]))
            for c in deployment.fixtures.cases[good]["calls"]
        ], model
        got, error = _responses(served, model, bad, stream=stream)
        reason = deployment.fixtures.cases[bad]["reason"]
        if stream:
            # Once the stream began, litellm's proxy ends it with response.failed, the
            # quarantine its error; before, an HTTP error.
            failed = [e.response.error for e in got if e.type == "response.failed"]
            assert error is not None or len(failed) == 1, (model, [e.type for e in got])
            if error is None:
                assert reason in failed[0].message and CANARY not in str(failed[0])
            else:
                _refused(error, reason)
            assert not [e for e in got if e.type == "response.completed"]
            assert not [e for e in got if "function_call" in repr(getattr(e, "item", None))]
            assert CANARY not in repr(got)
        else:
            _refused(error, reason)
            assert got == []
        assert len(served.paths.seen) == sent + 2, (model, served.paths.seen[sent:])
