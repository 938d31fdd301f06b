"""The gate's metrics and route escalation inside real LiteLLM proxy processes.

* One proxy with the gate (``metrics:`` on) and litellm's own ``prometheus`` callback, which
  serves the process-global registry on the proxy's ``/metrics``. A second process (this
  one) drives it with 330 streams at once: good streams, a tenth broken, and among them 30
  clients that leave mid-stream while the upstream is silent after its first text chunk.
  The counters on ``/metrics`` must equal what the clients counted, exactly, and the
  in-flight gauge must come back to 0.
* Two proxies sharing litellm's Redis cache (``cache_params: type: redis``, opt-in mode, so
  no answer is ever served from it) with ``escalation: take_out_of_routing: true``: a
  deployment that breaks its streams, driven through proxy A only, is taken out of routing
  by both (B never counted a fault itself), and comes back once the window has drained
  after it was fixed. A storm of policy denials on another deployment never trips it.

Needs litellm's proxy extra (``.venv-litellm-1.108.7``) and the Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from conftest import CASES, body_of, expected
from proxyproc import EXAMPLES, Proxy, proxy_missing, require_proxy, running_proxy

from litellm_toolgate.demo.serve import as_requested
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream

pytestmark = pytest.mark.proxy


def _prometheus_missing() -> str | None:
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        return "prometheus-client (the metrics extra) is not installed"
    return None


require_proxy(proxy_missing() or _prometheus_missing())

ROUTE = "cometapi/gpt-4o-mini"
GOOD = ["multiply_basic", "two_tools_interleaved", "text_only", "two_calls_interleaved"]
BAD = ["args_invalid_json", "done_without_finish", "disconnect_mid_arguments", "schema_wrong_type"]
LEAVE = "leave-mid-stream"
DENIED = "policy-denied-write"
_LEAVE_TEXT = answer_stream("a first line of text, then the upstream goes silent")


def _said(request: dict[str, Any]) -> str:
    content = request["messages"][-1]["content"]
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def _denied_stream() -> bytes:
    """A well-formed stream whose write_file call the example policy denies."""
    base = {"id": "chatcmpl-d", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return b"data: " + json.dumps({**base, "choices": [choice]}).encode() + b"\n\n"

    arguments = json.dumps({"path": "/etc/passwd", "content": "x"})
    call = {"index": 0, "id": "call_d", "type": "function", "function": {"name": "write_file"}}
    return b"".join(
        [
            event({"role": "assistant", "tool_calls": [call]}),
            event({"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]}),
            event({}, "tool_calls"),
            b"data: [DONE]\n\n",
        ]
    )  # fmt: skip


class Answers:
    """The fake upstream's answers; ``bad_model_broken`` switches the misbehaving deployment."""

    def __init__(self) -> None:
        self.bad_model_broken = True
        self.models: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict[str, Any]) -> Scripted:
        model = str(request.get("model"))
        with self._lock:
            self.models.append(model)
        name = _said(request)
        if name == LEAVE:
            # The first text chunk, then silence: a client that leaves now leaves mid-stream.
            first = _LEAVE_TEXT.index(b"\n\n") + 2
            return Scripted(_LEAVE_TEXT, stall_after=first)
        if name == DENIED:
            return as_requested(request, _denied_stream())
        if model == "bad-model" and self.bad_model_broken:
            name = "done_without_finish"
        case = CASES[name]
        transport = case.get("transport", {})
        return as_requested(
            request,
            body_of(case),
            disconnect_after=transport.get("disconnect_after"),
            stall_after=transport.get("stall_after"),
        )

    def count(self, model: str) -> int:
        with self._lock:
            return self.models.count(model)


def _tools() -> list[Any]:
    tools: list[Any] = json.loads((EXAMPLES / "tools.json").read_text())
    return tools


def _config(
    folder: Path, models: list[dict[str, Any]], gate: dict[str, Any], **litellm: Any
) -> Path:
    config = {
        "model_list": models,
        "guardrails": [
            {
                "guardrail_name": "toolgate",
                "litellm_params": {
                    "guardrail": "litellm_toolgate.ToolGateGuardrail",
                    "mode": "post_call",
                    "default_on": True,
                    "policy": "litellm_toolgate.demo.serve:workspace_policy",
                    "limits": {"idle_timeout": 120},
                    "tools": _tools(),
                    **gate,
                },
            }
        ],
        "litellm_settings": {"num_retries": 0, "callbacks": ["prometheus"], **litellm},
    }
    path = folder / "proxy.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    shutil.copy(Path(__file__).with_name("inflight_probe.py"), folder / "inflight_probe.py")
    return path


def _deployment(name: str, model: str) -> dict[str, Any]:
    return {
        "model_name": name,
        "litellm_params": {
            "model": f"cometapi/{model}",
            "api_base": "os.environ/TOOLGATE_UPSTREAM",
            "api_key": "sk-loopback-fake-upstream",
        },
    }


def scrape(proxy: Proxy) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the gate's series on the proxy's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    answer = httpx.get(
        f"{proxy.base_url}/metrics",
        headers={"Authorization": f"Bearer {proxy.key}"},
        timeout=30,
        follow_redirects=True,
    )
    assert answer.status_code == 200, answer.status_code
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(answer.text):
        for sample in family.samples:
            if sample.name.startswith("toolgate_"):
                samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def total(samples: dict[Any, float], name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)


# ---- load: the counters equal the client's count -------------------------------------------------
async def _one(client: openai.AsyncOpenAI, model: str, name: str) -> str | None:
    """None when the stream completed, else the error's text."""
    try:
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": name}], stream=True
        )
        async for _ in stream:
            pass
    except openai.APIError as exc:
        return str(exc)
    return None


async def _leave(client: openai.AsyncOpenAI) -> int:
    """Read the first chunk, then go away; the chunks seen."""
    stream = await client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": LEAVE}], stream=True
    )
    seen = 0
    async for _ in stream:
        seen += 1
        break
    await stream.close()
    return seen


async def _load(proxy: Proxy, names: list[str], leavers: int) -> tuple[list[Any], list[int]]:
    limits = httpx.Limits(max_connections=400, max_keepalive_connections=100)
    async with httpx.AsyncClient(limits=limits, timeout=180) as http:
        client = openai.AsyncOpenAI(
            base_url=proxy.base_url, api_key=proxy.key, max_retries=0, http_client=http
        )
        # The leavers go away while the load runs, among the other streams.
        outcomes = await asyncio.gather(
            *(_one(client, "gpt-4o-mini", n) for n in names),
            *(_leave(client) for _ in range(leavers)),
        )
        results = outcomes[: len(names)]
        return list(zip(names, results, strict=True)), list(outcomes[len(names) :])


@pytest.fixture(scope="module")
def answers() -> Answers:
    return Answers()


@pytest.fixture(scope="module")
def upstream(answers: Answers) -> Iterator[FakeUpstream]:
    with FakeUpstream(answers) as server:
        yield server


def test_metrics_equal_what_the_clients_counted(upstream: FakeUpstream, tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        [_deployment("gpt-4o-mini", "gpt-4o-mini")],
        {"metrics": {"routes": [ROUTE]}},
    )
    total_streams, leavers = 300, 30
    names = [
        BAD[i // 10 % len(BAD)] if i % 10 == 0 else GOOD[i % len(GOOD)]
        for i in range(total_streams)
    ]
    with running_proxy(config, upstream.base_url) as proxy:
        before = scrape(proxy)
        assert total(before, "toolgate_attempts_total") == 0
        results, left = asyncio.run(_load(proxy, names, leavers))
        assert left == [1] * leavers  # every leaver read its first chunk, then went away
        # What the clients counted: released streams, and each refusal by its reason.
        released = 0
        refused: dict[str, int] = {}
        for name, error in results:
            outcome, reason = expected(CASES[name])
            if outcome == "release":
                assert error is None, (name, error)
                released += 1
            else:
                assert error is not None and reason is not None and reason in error, (name, error)
                refused[reason] = refused.get(reason, 0) + 1
        # The proxy lets go of the leavers' streams on its own time: wait for it (bounded).
        deadline = time.monotonic() + 60
        while True:
            samples = scrape(proxy)
            settled = total(samples, "toolgate_attempts_total") == total_streams + leavers
            if settled and total(samples, "toolgate_streams_in_flight") == 0:
                break
            assert time.monotonic() < deadline, "the proxy did not settle in 60 s"
            time.sleep(0.5)
        assert total(samples, "toolgate_releases_total") == released
        assert total(samples, "toolgate_releases_total", route=ROUTE, wire="chat") == released
        assert total(samples, "toolgate_attempts_total", outcome="released") == released
        # Every leaver is one quarantine for the reader going away (local), never a
        # release and never a fault of the upstream's.
        refused["cancelled"] = leavers
        for reason, count in refused.items():
            assert total(samples, "toolgate_quarantines_total", reason=reason) == count, reason
        assert total(samples, "toolgate_quarantines_total") == sum(refused.values())
        assert total(samples, "toolgate_quarantines_total", reason="cancelled", party="local") == (
            leavers
        )
        assert total(samples, "toolgate_streams_in_flight") == 0
        # Histograms: one withheld-bytes observation per attempt that opened a call.
        assert total(samples, "toolgate_withheld_bytes_count") > 0
        assert total(samples, "toolgate_release_delay_seconds_count") > 0
        # Labels stay bounded: the one route, the chat wire, reasons from the enum.
        routes = {dict(ls).get("route") for (n, ls) in samples if n.startswith("toolgate_")}
        assert routes <= {ROUTE, None}
        assert proxy.alive()


# ---- escalation across two proxies sharing a Redis ----------------------------------------------
def _escalation(prefix: str) -> dict[str, Any]:
    return {
        # Long enough that the checks after the trip (a few dozen requests on a busy
        # machine) run inside one window: a tripped route's faults age out after it.
        "window_seconds": 40.0,
        "buckets": 10,
        "min_attempts": 6,
        "trip_rate": 0.5,
        "recover_rate": 0.1,
        "take_out_of_routing": True,
        "key_prefix": prefix,
        "sync_seconds": 0.2,
    }


async def _send(proxy: Proxy, model: str, name: str, count: int) -> list[str | None]:
    async with httpx.AsyncClient(timeout=120) as http:
        client = openai.AsyncOpenAI(
            base_url=proxy.base_url, api_key=proxy.key, max_retries=0, http_client=http
        )
        return [await _one(client, model, name) for _ in range(count)]


def _escalated(proxy: Proxy, route: str) -> float:
    return total(scrape(proxy), "toolgate_route_escalated", route=route)


def test_two_proxies_sharing_redis_take_a_bad_deployment_out_and_back(
    upstream: FakeUpstream, answers: Answers, tmp_path: Path
) -> None:
    redis = pytest.importorskip("redis")
    server = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=10)
    try:
        server.ping()
    except redis.RedisError:
        pytest.fail("no Redis on 127.0.0.1:6379")
    prefix = f"toolgate-test:{secrets.token_hex(6)}"
    models = [
        _deployment("gw", "good-model"),
        _deployment("gw", "bad-model"),
        _deployment("deny", "deny-model"),
    ]
    gate = {"escalation": _escalation(prefix), "metrics": {}}
    cache = {
        "cache": True,
        "cache_params": {"type": "redis", "host": "127.0.0.1", "port": 6379, "mode": "default_off"},
    }
    answers.bad_model_broken = True
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        folder.mkdir()
    with (
        running_proxy(_config(folders[0], models, gate, **cache), upstream.base_url) as a,
        running_proxy(_config(folders[1], models, gate, **cache), upstream.base_url) as b,
    ):
        try:
            # A policy-denial storm through A: local faults, never an escalation.
            denied = asyncio.run(_send(a, "deny", DENIED, 20))
            assert all(e is not None and "policy_denied" in e for e in denied), denied
            # The misbehaving deployment, through A only, until A takes it out.
            deadline = time.monotonic() + 120
            while _escalated(a, "cometapi/bad-model") != 1:
                assert time.monotonic() < deadline, "A never took the bad deployment out"
                asyncio.run(_send(a, "gw", "multiply_basic", 4))
            # B never saw a fault itself, yet it leaves the deployment out too.
            deadline = time.monotonic() + 30
            while _escalated(b, "cometapi/bad-model") != 1:
                assert time.monotonic() < deadline, "B never heard of the escalation"
                time.sleep(0.2)
            seen = answers.count("bad-model")
            for proxy in (a, b):
                results = asyncio.run(_send(proxy, "gw", "multiply_basic", 12))
                assert results == [None] * 12  # all answered by the good deployment
            assert answers.count("bad-model") == seen
            # The denials never tripped their route, on either proxy.
            for proxy in (a, b):
                assert _escalated(proxy, "cometapi/deny-model") == 0
                assert (
                    total(scrape(proxy), "toolgate_escalations_total", route="cometapi/deny-model")
                    == 0
                )
            results = asyncio.run(_send(b, "deny", DENIED, 2))
            assert all(e is not None and "policy_denied" in e for e in results)
            # Fixed: once the window has drained, both put it back into routing.
            answers.bad_model_broken = False
            deadline = time.monotonic() + 120
            while _escalated(a, "cometapi/bad-model") or _escalated(b, "cometapi/bad-model"):
                assert time.monotonic() < deadline, "the deployment never came back"
                time.sleep(0.5)
            for proxy in (a, b):
                before = answers.count("bad-model")
                results = asyncio.run(_send(proxy, "gw", "multiply_basic", 16))
                assert results == [None] * 16
                assert answers.count("bad-model") > before  # routed to it again
        finally:
            for key in server.scan_iter(match=f"{prefix}:*"):
                server.delete(key)
