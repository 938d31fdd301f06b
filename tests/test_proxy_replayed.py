"""The proxy's ``/v1/responses`` on a route where litellm replays a whole result as events.

One real LiteLLM proxy (the ``guardrails`` example) runs for the module on 127.0.0.1 with an
``xai/`` deployment of a model litellm's model map does not know: litellm asks the loopback
upstream for a whole Responses result (no ``stream`` in the request) and replays it to the
client as events. The gate reads that whole body and judges it with litellm's events in the
proxy's stream hook: a valid call is released, a broken one refused with no event of a call
sent and no argument text in the answer.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
import yaml
from conftest import CANARY
from proxyproc import EXAMPLES, Proxy, prepare, require_proxy, running_proxy

from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

pytestmark = pytest.mark.proxy

require_proxy()

DEPLOYMENT = "xai-replayed"
TOOLS = EXAMPLES / "tools.json"
ARGS = '{"a": 7, "b": 8}'


def _body(arguments: str) -> bytes:
    item = {
        "id": "fc_1",
        "type": "function_call",
        "status": "completed",
        "call_id": "call_1",
        "name": "multiply",
        "arguments": arguments,
    }
    obj = {
        "id": "resp_1",
        "object": "response",
        "created_at": 1767225600,
        "status": "completed",
        "model": "grok-replayed",
        "output": [item],
    }
    return json.dumps(obj).encode()


def _answer(request: dict[str, Any]) -> Scripted:
    if request.get("stream"):  # not a whole result to replay: nothing the test expects
        return Scripted(b'{"error": {"message": "streamed"}}', status=400)
    said = str(request.get("input"))
    arguments = ARGS if "released" in said else '{"a": 7, "b": "' + CANARY + '"'
    return Scripted(_body(arguments), content_type="application/json")


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_answer) as server:
        yield server


@pytest.fixture(scope="module")
def proxy(upstream: FakeUpstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp("proxy-replayed")
    config = prepare("guardrails", folder)
    settings = yaml.safe_load(config.read_text())
    settings["model_list"].append(
        {
            "model_name": DEPLOYMENT,
            "litellm_params": {
                "model": "xai/grok-replayed",
                "api_base": "os.environ/TOOLGATE_UPSTREAM",
                "api_key": "sk-loopback-fake-upstream",
            },
            # The proxy puts its deployments in litellm's model map: this one says the
            # model does not stream, so litellm replays a whole result.
            "model_info": {"supports_native_streaming": False},
        }
    )
    config.write_text(yaml.safe_dump(settings))
    with running_proxy(config, upstream.base_url) as running:
        yield running


def _events(proxy: Proxy, said: str) -> tuple[list[Any], Any]:
    """The events the client got, and the refusal: an exception or an ``error`` or
    ``response.failed`` event (how the proxy hands a refusal to a Responses stream)."""
    proxy.ensure_running()
    client = openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)
    # The example's chat tools, in the Responses API's shape.
    tools = [{"type": "function", **t["function"]} for t in json.loads(TOOLS.read_text())]
    events: list[Any] = []
    try:
        for event in client.responses.create(
            model=DEPLOYMENT, input=said, tools=tools, stream=True
        ):
            events.append(event)
    except openai.APIError as exc:
        return events, exc
    errors = [e for e in events if e.type in ("error", "response.failed")]
    return events, errors[0] if errors else None


def _is_call_event(event: Any) -> bool:
    item = getattr(event, "item", None)
    return "function_call" in event.type or getattr(item, "type", "") == "function_call"


def test_a_replayed_result_is_judged_behind_the_proxy(proxy: Proxy, upstream: FakeUpstream) -> None:
    events, error = _events(proxy, "released: 7 x 8?")
    assert error is None, repr(error)
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(i.name, i.arguments) for i in done if i.type == "function_call"] == [
        ("multiply", ARGS)
    ]
    events, error = _events(proxy, "denied: 7 x 8?")
    assert error is not None, "released"
    assert not any(_is_call_event(e) for e in events), "a function-call event reached the client"
    assert "response.completed" not in [e.type for e in events]
    rendered = f"{error} {error!r} {getattr(error, 'body', '')!r} {events!r}"
    assert CANARY not in rendered
    assert "invalid_json" in rendered, rendered
    # Both were whole results litellm asked for, and replayed.
    assert [r.get("stream") for r in upstream.requests] == [None, None]
