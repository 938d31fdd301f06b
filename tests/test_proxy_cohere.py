"""A ``cohere/`` deployment behind a real LiteLLM proxy gated by the ``guardrails:`` entry:
refused before anything goes upstream, streamed and whole.

The proxy runs every call async, and the gate hands an async call its client as ``client=``,
which litellm's Cohere handler drops (``edge/routes.py``, ``docs/cohere.md``): the gate
could not see the wire, so a whole call is refused with the gate's typed status (501) and
that reason, a stream for litellm's Cohere stream reader, and the upstream never hears of
either.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml
from proxyproc import Proxy, prepare, require_proxy, running_proxy
from wirecases import Fixtures

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

require_proxy()
COHERE = Fixtures("cohere")


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    answer = Scripted(COHERE.body("whole_multiply"), content_type="application/json")
    with FakeUpstream(lambda request: answer) as server:
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


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_cohere_deployment_is_refused_unsent(
    proxy: Proxy, upstream: FakeUpstream, stream: bool
) -> None:
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    tools: Any = COHERE.manifest["tools"]
    sent = len(upstream.requests)
    with pytest.raises(openai.APIStatusError) as info:
        answer: Any = client.chat.completions.create(
            model="command-a",
            messages=[{"role": "user", "content": "What is 7 times 8?"}],
            tools=tools,
            stream=stream,
        )
        if stream:
            list(answer)
    assert info.value.status_code == 501, info.value
    # A stream is refused for litellm's Cohere stream reader first; a whole call for the
    # client= that litellm's Cohere handler drops.
    why = "reads each SSE line as bare JSON" if stream else "drops the call's client="
    assert why in str(info.value), info.value
    assert len(upstream.requests) == sent, "the refused request reached the upstream"
