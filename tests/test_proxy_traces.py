"""The gate's decisions in a real LiteLLM proxy's traces: the proxy runs litellm's ``otel``
callback, exporting over OTLP/HTTP to a loopback collector this test runs; a released and
a quarantined stream each show as a ``toolgate.decision`` span beside litellm's ``guardrail``
span, and the canary in the refused call's arguments is in no span the proxy exported."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import CANARY
from proxyproc import Proxy, prepare, proxy_missing, require_proxy, running_proxy


def _otlp_missing() -> str | None:
    try:
        import opentelemetry.exporter.otlp.proto.http  # noqa: F401
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2  # noqa: F401
    except ImportError:
        return "opentelemetry-exporter-otlp-proto-http is not installed"
    return None


require_proxy(proxy_missing() or _otlp_missing())

pytestmark = pytest.mark.proxy


class Collector(ThreadingHTTPServer):
    """An OTLP/HTTP (protobuf) trace receiver on 127.0.0.1 that keeps every span it is sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Receive)
        self.spans: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"

    def named(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return [s for s in self.spans if s["name"] == name]


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind) if kind else None


class _Receive(BaseHTTPRequestHandler):
    server: Collector

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        spans = [
            {
                "name": span.name,
                "trace_id": span.trace_id.hex(),
                "span_id": span.span_id.hex(),
                "parent_id": span.parent_span_id.hex(),
                "attributes": {a.key: _value(a.value) for a in span.attributes},
                "events": [
                    (e.name, {a.key: _value(a.value) for a in e.attributes}) for e in span.events
                ],
            }
            for resource in request.resource_spans
            for scope in resource.scope_spans
            for span in scope.spans
        ]
        with self.server.lock:
            self.server.spans.extend(spans)
            self.server.raw.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _answer(request: Any) -> Any:
    from litellm_toolgate.loopback.upstream import Scripted, calls_stream

    last = json.dumps(request.get("messages", [])[-1:])
    arguments = '{"a": 7, "b": 8}' if "good" in last else json.dumps({"a": 7, "b": 8, "c": CANARY})
    return Scripted(calls_stream([("call_1", "multiply", arguments)]))


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, collector: Collector) -> Iterator[Proxy]:
    from litellm_toolgate.loopback.upstream import FakeUpstream

    folder: Path = tmp_path_factory.mktemp("proxy-traces")
    config = prepare("guardrails", folder)
    text = config.read_text()
    old = "litellm_settings:\n  callbacks: [inflight_probe.probe]\n"
    assert old in text
    config.write_text(
        text.replace(old, 'litellm_settings:\n  callbacks: [inflight_probe.probe, "otel"]\n')
    )
    env = {"OTEL_EXPORTER": "otlp_http", "OTEL_ENDPOINT": collector.endpoint}
    with (
        FakeUpstream(_answer) as upstream,
        running_proxy(config, upstream.base_url, env) as running,
    ):
        yield running


def _stream(proxy: Proxy, word: str) -> tuple[int, str]:
    body = {
        "model": "gpt-4o-mini",
        "stream": True,
        "messages": [{"role": "user", "content": f"multiply, {word}"}],
    }
    headers = {"Authorization": f"Bearer {proxy.key}"}
    with (
        httpx.Client(timeout=120) as client,
        client.stream(
            "POST", f"{proxy.base_url}/v1/chat/completions", json=body, headers=headers
        ) as response,
    ):
        return response.status_code, response.read().decode()


def _decision(collector: Collector, outcome: str, known: set[str]) -> dict[str, Any]:
    deadline = time.monotonic() + 90  # litellm exports in batches, seconds apart
    while time.monotonic() < deadline:
        for span in collector.named("toolgate.decision"):
            if span["span_id"] not in known and span["attributes"]["toolgate.outcome"] == outcome:
                return span
        time.sleep(0.2)
    raise AssertionError(f"no {outcome} toolgate.decision span was exported")


def test_the_proxy_s_trace_shows_each_decision(proxy: Proxy, collector: Collector) -> None:
    known = {s["span_id"] for s in collector.named("toolgate.decision")}
    status, text = _stream(proxy, "good")
    assert status == 200 and '"multiply"' in text
    released = _decision(collector, "released", known)
    assert released["attributes"]["toolgate.tool_names"] == ("multiply",)
    assert released["attributes"]["toolgate.route"] == "cometapi/gpt-4o-mini"

    status, text = _stream(proxy, "bad")
    assert CANARY not in text
    refused = _decision(collector, "quarantined", known)
    attributes = refused["attributes"]
    assert attributes["toolgate.reason"] == "schema_invalid"
    assert attributes["toolgate.party"] == "remote"
    assert attributes["error.type"] == "SchemaRejected"
    ((event, fields),) = refused["events"]
    assert event == "toolgate.call" and fields["gen_ai.tool.call.id"] == "call_1"

    # In the proxy request's trace, beside litellm's own spans of that request.
    with collector.lock:
        same = {s["name"] for s in collector.spans if s["trace_id"] == refused["trace_id"]}
    assert "litellm_request" in same, sorted(same)

    # litellm's guardrail span for that attempt: guardrail_intervened.
    attempt = attributes["toolgate.attempt_id"]
    deadline = time.monotonic() + 90
    guardrails: list[dict[str, Any]] = []
    while not guardrails and time.monotonic() < deadline:
        guardrails = [
            g
            for g in collector.named("guardrail")
            if attempt in str(g["attributes"].get("guardrail_response"))
        ]
        time.sleep(0.2)
    assert guardrails and {g["attributes"]["guardrail_status"] for g in guardrails} == {
        "guardrail_intervened"
    }
    with collector.lock:
        assert not any(CANARY.encode() in raw for raw in collector.raw), "argument text exported"
