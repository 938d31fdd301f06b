"""The proxy's other doors: the MCP gateway, pass-through routes, text completions, what
litellm's loggers hear of a refused stream, and every route of the proxy classified.

One real LiteLLM proxy (the ``guardrails`` example) runs for the module on 127.0.0.1, in
front of a loopback FakeUpstream, with a tiny MCP server on loopback in its ``mcp_servers``
(its one tool writes a marker file), a ``pass_through_endpoints`` entry, the ``/openai`` and
``/anthropic`` pass-through routes pointed at the upstream, and a test-only logger callback
(``recorder``) that appends what litellm's success and failure events carry to a file.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``).
"""

from __future__ import annotations

import json
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from conftest import CANARY, CASES, body_of
from proxyproc import Proxy, free_port, prepare, require_proxy, running_proxy

from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, request_path

pytestmark = pytest.mark.proxy

require_proxy()

MODEL = "gpt-4o-mini"
MCP_TOOL = {
    "type": "mcp",
    "server_label": "marker",
    "server_url": "litellm_proxy/mcp/marker",
    "require_approval": "never",
}
PASS_THROUGH = "/toolgate-pt"
TEXT_ANSWER = "a plain text answer"


def _chat_call(name: str, arguments: str) -> bytes:
    """A well-formed chat stream of one call of ``name`` with ``arguments``."""
    base = {"id": "chatcmpl-rt", "object": "chat.completion.chunk", "created": 1, "model": MODEL}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    call = {"index": 0, "id": "call_rt", "type": "function"}
    return b"".join(
        [
            event({"role": "assistant", "content": ""}),
            event({"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": arguments[:12]}}]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": arguments[12:]}}]}),
            event({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )


def _said(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def _anthropic_message() -> bytes:
    """An Anthropic message whose tool_use breaks write_file's schema (``path`` a number)."""
    return json.dumps(
        {
            "id": "msg_rt",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "content": [
                {
                    "type": "tool_use",
                    "id": "toolu_rt",
                    "name": "write_file",
                    "input": {"path": 7, "content": CANARY},
                }
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": 5, "output_tokens": 5},
        }
    ).encode()


NATIVE = "gpt-4o-mini-native"  # openai/ at the upstream: Responses SSE on the wire
RESPONSES = Path(__file__).resolve().parent.parent / "fixtures" / "responses"
# A native Responses stream the gate refuses (item_mismatch), argument text with the canary.
NATIVE_REFUSED = next(
    case
    for case in json.loads((RESPONSES / "manifest.json").read_text(encoding="utf-8"))["cases"]
    if case["name"] == "completed_drops_a_call"
)


def _answer(request: dict[str, Any]) -> Scripted:
    if "input" in request:  # the native Responses route
        items = request["input"]
        said = _said(items if isinstance(items, str) else items[-1]["content"])
        assert said.startswith("denied:") and request.get("stream") is True, said
        body = (RESPONSES / NATIVE_REFUSED["body"]).read_bytes()
        return Scripted(body, chunk_sizes=[7, 64, 3])
    if request_path().endswith("/messages"):
        return Scripted(_anthropic_message(), content_type="application/json")
    tools = [t.get("function", t) for t in request.get("tools") or [] if isinstance(t, dict)]
    names = [str(t.get("name", "")) for t in tools]
    messages = request.get("messages") or []
    said = _said(messages[-1]["content"]) if messages else ""
    marker = [n for n in names if "write_marker" in n]
    if marker and messages and messages[-1].get("role") == "user":
        # The MCP gateway's turn: call the MCP tool (litellm would run it on the server).
        return as_requested(request, _chat_call(marker[0], json.dumps({"text": CANARY})))
    if said.startswith("denied:"):
        arguments = json.dumps({"path": f"/etc/{CANARY}/passwd", "content": f"x {CANARY}"})
        return as_requested(request, _chat_call("write_file", arguments))
    if said.startswith("released:"):
        return as_requested(request, body_of(CASES["multiply_basic"]))
    if said == "passthrough-bad":
        return as_requested(request, body_of(CASES["schema_wrong_type"]))
    return as_requested(request, answer_stream(TEXT_ANSWER, model=MODEL))


MCP_SERVER = """
import pathlib, sys
from mcp.server.mcpserver import MCPServer

port, marker = int(sys.argv[1]), pathlib.Path(sys.argv[2])
server = MCPServer("marker")


@server.tool()
def write_marker(text: str) -> str:
    \"\"\"Write text into the marker file.\"\"\"
    marker.write_text(text)
    return "written"


server.run("streamable-http", host="127.0.0.1", port=port)
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(_answer) as server:
        yield server


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """A loopback MCP server whose tool ``write_marker`` writes the marker file."""
    folder = tmp_path_factory.mktemp("mcp")
    script, marker = folder / "server.py", folder / "marker.txt"
    script.write_text(MCP_SERVER)
    port = free_port()
    with (folder / "server.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, str(script), str(port), str(marker)], stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError((folder / "server.log").read_text()) from None
                time.sleep(0.2)
        yield port, marker
    finally:
        process.kill()
        process.wait(timeout=30)


RECORDER = """
import json, os
from litellm.integrations.custom_logger import CustomLogger

PATH = os.environ["TOOLGATE_TEST_LOG_RECORD"]


class Recorder(CustomLogger):
    def _write(self, kind, kwargs, response_obj):
        line = json.dumps(
            {"kind": kind, "kwargs": repr(kwargs), "response": repr(response_obj)}, default=repr
        )
        with open(PATH, "a", encoding="utf-8") as out:
            out.write(line + "\\n")

    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        self._write("success", kwargs, response_obj)

    async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
        self._write("failure", kwargs, response_obj)


recorder = Recorder()
"""


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("records") / "events.jsonl"


@pytest.fixture(scope="module")
def proxy(
    upstream: FakeUpstream,
    mcp_server: tuple[int, Path],
    records: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Proxy]:
    folder = tmp_path_factory.mktemp("proxy-routes")
    config = prepare("guardrails", folder)
    (folder / "recorder.py").write_text(RECORDER)
    settings = yaml.safe_load(config.read_text())
    settings["litellm_settings"]["callbacks"] = ["inflight_probe.probe", "recorder.recorder"]
    settings["mcp_servers"] = {
        "marker": {"url": f"http://127.0.0.1:{mcp_server[0]}/mcp", "transport": "http"}
    }
    settings.setdefault("general_settings", {})["pass_through_endpoints"] = [
        {"path": PASS_THROUGH, "target": f"{upstream.base_url}/chat/completions"}
    ]
    config.write_text(yaml.safe_dump(settings))
    env = {
        "OPENAI_API_BASE": upstream.root_url,
        "OPENAI_API_KEY": "sk-loopback-fake-upstream",
        "ANTHROPIC_API_BASE": upstream.root_url,
        "ANTHROPIC_API_KEY": "sk-loopback-fake-upstream",
        "TOOLGATE_TEST_LOG_RECORD": str(records),
    }
    with running_proxy(config, upstream.base_url, env) as running:
        yield running


def _client(proxy: Proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.base_url, api_key=proxy.key, max_retries=0, timeout=60)


def _headers(proxy: Proxy) -> dict[str, str]:
    return {"Authorization": f"Bearer {proxy.key}"}


# ---- 1. the MCP gateway ----------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("api", ["chat", "responses"])
def test_mcp_tools_are_refused_before_sending(
    proxy: Proxy, upstream: FakeUpstream, mcp_server: tuple[int, Path], api: str, stream: bool
) -> None:
    """litellm's MCP gateway would run the model's call on the MCP server before the gate
    saw it: the request is refused before anything is sent, to the upstream or the server."""
    marker = mcp_server[1]
    before = len(upstream.requests)
    client = _client(proxy)
    with pytest.raises(openai.APIStatusError) as caught:
        if api == "chat":
            answer: Any = client.chat.completions.create(
                model=MODEL,
                messages=[{"role": "user", "content": "write the marker"}],
                tools=[MCP_TOOL],  # type: ignore[list-item]
                stream=stream,
            )
        else:
            answer = client.responses.create(
                model=MODEL,
                input="write the marker",
                tools=[MCP_TOOL],  # type: ignore[list-item]
                stream=stream,
            )
        if stream:
            list(answer)
    assert caught.value.status_code == 400, caught.value
    assert "MCP tools" in str(caught.value)
    assert CANARY not in caught.value.response.text
    assert len(upstream.requests) == before, "the upstream got the request"
    assert not marker.exists(), "the MCP server ran the model's call"


# ---- 2. pass-through routes ------------------------------------------------------------------
def _chat_body(stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "stream": stream,
        "messages": [{"role": "user", "content": "passthrough-bad"}],
    }


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    "route", [PASS_THROUGH, "/openai/v1/chat/completions", "/anthropic/v1/messages"]
)
def test_pass_through_routes_are_refused_before_sending(
    proxy: Proxy, upstream: FakeUpstream, route: str, stream: bool
) -> None:
    """A pass-through route forwards the provider's body as it is (on today's code a
    schema-invalid call with HTTP 200): the gate refuses it before it is sent."""
    body = _chat_body(stream)
    if route.startswith("/anthropic"):
        body = {**body, "max_tokens": 64, "model": "claude-3-5-sonnet-latest"}
    before = len(upstream.requests)
    response = httpx.post(
        f"{proxy.base_url}{route}", json=body, headers=_headers(proxy), timeout=60
    )
    assert response.status_code == 400, response.text[:500]
    assert "toolgate" in response.text and "pass_through_endpoint" in response.text
    assert CANARY not in response.text
    assert len(upstream.requests) == before, "the upstream got the request"


def test_the_gated_route_refuses_the_same_call(proxy: Proxy) -> None:
    """The same schema-invalid call on /v1/chat/completions: gated and refused (422)."""
    response = httpx.post(
        f"{proxy.base_url}/v1/chat/completions",
        json=_chat_body(False),
        headers=_headers(proxy),
        timeout=60,
    )
    assert response.status_code == 422, response.text[:500]


# ---- 7. what litellm's loggers hear of a refused stream -------------------------------------
def _read(records: Path) -> list[dict[str, Any]]:
    if not records.exists():
        return []
    # The proxy's recorder may be writing a line as it is read: only whole lines count.
    text = records.read_text(encoding="utf-8")
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def _wait_for(records: Path, nonce: str, kind: str | None, deadline: float = 60.0) -> None:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if any(
            nonce in r["kwargs"] and (kind is None or r["kind"] == kind) for r in _read(records)
        ):
            return
        time.sleep(0.2)


def _refused_stream(proxy: Proxy, api: str, said: str) -> None:
    """Stream ``said`` on ``api``; the gate must refuse it (an error, whatever its form)."""
    client = _client(proxy)
    if api == "chat-whole":
        with pytest.raises(openai.APIStatusError):
            client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": said}]
            )
        return
    if api == "responses-whole":
        with pytest.raises(openai.APIStatusError):
            client.responses.create(model=MODEL, input=said)
        return
    if api == "chat":
        with pytest.raises(openai.APIError):
            for _ in client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": said}], stream=True
            ):
                pass
        return
    if api.startswith("responses"):
        model = NATIVE if api == "responses-native" else MODEL
        events: list[Any] = []
        try:
            events.extend(client.responses.create(model=model, input=said, stream=True))
        except openai.APIError:
            return
        kinds = [str(getattr(e, "type", "")) for e in events]
        assert "response.completed" not in kinds and (
            "response.failed" in kinds or "error" in kinds
        )
        return
    body = {
        "model": MODEL,
        "max_tokens": 64,
        "stream": True,
        "messages": [{"role": "user", "content": said}],
    }
    with httpx.stream(
        "POST", f"{proxy.base_url}/v1/messages", json=body, headers=_headers(proxy), timeout=60
    ) as response:
        text = response.read().decode(errors="replace")
    assert response.status_code != 200 or "error" in text, text[:500]
    assert "tool_use" not in text


@pytest.mark.parametrize(
    "api", ["chat", "responses", "responses-native", "messages", "chat-whole", "responses-whole"]
)
def test_a_refused_stream_reaches_the_loggers_as_a_failure(
    proxy: Proxy, records: Path, api: str
) -> None:
    """A stream the gate refused is no success for litellm's loggers (Langfuse, OTel, the
    spend log): no success event, a failure event, and no argument text in either. A
    whole response the gate refused is not logged as a success either."""
    streamed = not api.endswith("-whole")
    refused, released = f"denied:{secrets.token_hex(6)}", f"released:{secrets.token_hex(6)}"
    _refused_stream(proxy, api, refused)
    # A stream the gate released, as a control: its success event reaches the recorder.
    calls = list(
        _client(proxy).chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": released}], stream=True
        )
    )
    assert calls
    _wait_for(records, released, "success")
    _wait_for(records, refused, "failure" if streamed else None, 5.0)
    time.sleep(1.0)  # a success event dispatched late would land by now
    seen = _read(records)
    assert [r for r in seen if released in r["kwargs"] and r["kind"] == "success"], "no control"
    about = [r for r in seen if refused in r["kwargs"]]
    assert [r["kind"] for r in about if r["kind"] == "success"] == [], "logged as a success"
    if streamed:  # (a whole refusal is raised by the proxy's success hook: no event at all)
        assert [r for r in about if r["kind"] == "failure"], "the refusal reached no logger"
    for record in seen:
        assert CANARY not in json.dumps(record), f"argument text in a {record['kind']} event"


# ---- 8. text completions --------------------------------------------------------------------
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_text_completions_pass_untouched(proxy: Proxy, stream: bool) -> None:
    client = _client(proxy)
    if stream:
        text = "".join(
            choice.text or ""
            for chunk in client.completions.create(model=MODEL, prompt="say it", stream=True)
            for choice in chunk.choices
        )
    else:
        text = client.completions.create(model=MODEL, prompt="say it").choices[0].text
    assert text == TEXT_ANSWER


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_a_text_completion_asking_for_tools_is_refused_before_sending(
    proxy: Proxy, upstream: FakeUpstream, stream: bool
) -> None:
    tools = [{"type": "function", "function": {"name": "multiply", "parameters": {}}}]
    before = len(upstream.requests)
    response = httpx.post(
        f"{proxy.base_url}/v1/completions",
        json={"model": MODEL, "prompt": "say it", "stream": stream, "tools": tools},
        headers=_headers(proxy),
        timeout=60,
    )
    assert response.status_code == 400, response.text[:500]
    assert "text completion that asks for tools" in response.text
    assert len(upstream.requests) == before


# ---- every route of the proxy, classified ---------------------------------------------------
def _proxy_route_paths() -> set[str]:
    """Every path of litellm's proxy app, its lazily registered features included."""
    from litellm.proxy import proxy_server

    app = proxy_server.app
    try:
        from litellm.proxy._lazy_features import register_all_features
    except ImportError:  # a litellm without lazy features registers everything at import
        pass
    else:
        register_all_features(app)
    paths: set[str] = set()
    for route in app.routes:
        contexts = getattr(route, "effective_route_contexts", None)
        if callable(contexts):  # FastAPI's included router: its routes
            # (A websocket route's context has no path of its own: its route's.)
            paths.update(str(c.path or c.original_route.path) for c in contexts())
        else:
            paths.add(str(route.path))  # type: ignore[attr-defined]
    return paths


def test_every_proxy_route_is_classified() -> None:
    """A route of litellm's proxy that the project's table does not name fails here, so a
    route a future litellm adds is classified (gated, refused, untouched) before it ships."""
    from litellm_toolgate.edge.guardrail.proxyroutes import route_handling

    paths = _proxy_route_paths()
    assert len(paths) > 300, "litellm's route table was not read"
    for must in ("/v1/chat/completions", "/v1/messages", "/anthropic/{endpoint:path}"):
        assert must in paths
    unclassified = sorted(p for p in paths if route_handling(p) is None)
    assert unclassified == [], (
        f"routes no row of edge/guardrail/proxyroutes.py names: {unclassified}"
    )


@pytest.mark.parametrize(
    ("path", "how"),
    [
        ("/v1/chat/completions", "gated"),
        ("/chat/completions", "gated"),
        ("/v1/responses", "gated"),
        ("/v1/messages", "gated"),
        ("/v1/completions", "not a model turn"),
        ("/openai/v1/chat/completions", "refused before sending"),
        ("/anthropic/v1/messages", "refused before sending"),
        ("/v1/realtime", "refused before sending"),
        ("/v1/threads/{thread_id}/runs", "refused before sending"),
        ("/v1/threads/{thread_id}/messages", "not a model turn"),
        ("/v1/batches", "not a model turn"),
        ("/v1/assistants", "not a model turn"),
        ("/mcp/", "not a model turn"),
        ("/v1/embeddings", "not a model turn"),
        ("/openai/v1/files", "not a model turn"),
        ("/{provider}/v1/batches", "not a model turn"),
    ],
)
def test_the_route_table_rows(path: str, how: str) -> None:
    from litellm_toolgate.edge.guardrail.proxyroutes import route_handling

    found = route_handling(path)
    assert found is not None and found.value == how


def test_the_routes_the_gate_is_not_reached_on() -> None:
    """Assistants runs and batches: litellm runs no hook of the gate's there (docs say so)."""
    from litellm_toolgate.edge.guardrail.proxyroutes import route_reached

    assert not route_reached("/v1/threads/{thread_id}/runs")
    assert not route_reached("/v1/threads/thread_1/runs")
    assert not route_reached("/v1/batches")
    assert route_reached("/v1/chat/completions") and route_reached("/anthropic/v1/messages")


@pytest.mark.parametrize(
    ("path", "how"),
    [
        ("/litellm/v1/chat/completions", "gated"),
        ("/a/b/v1/completions", "not a model turn"),
        ("/litellm/openai/v1/chat/completions", "refused before sending"),
        ("/openai/v1/chat/completions", "refused before sending"),
        ("/a/b/c/d/v1/chat/completions", None),
        ("/nothing-here", None),
    ],
)
def test_a_served_path_behind_a_root_path(path: str, how: str | None) -> None:
    """A proxy with a root path (SERVER_ROOT_PATH) serves its routes under it."""
    from litellm_toolgate.edge.guardrail.proxyroutes import served_route_handling

    found = served_route_handling(path)
    assert (None if found is None else found.value) == how
