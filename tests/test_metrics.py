"""The gate's metrics and route escalation in one process: real litellm, a real Redis.

* Attempts gated through the real litellm against the loopback upstream are counted once
  each, by route, wire, reason, family and party, on a private registry.
* Label values stay bounded whatever model names callers send.
* Settings are strict: an unknown key or a wrong type stops start-up with the setting named.
* Escalation: two windows sharing the Redis on 127.0.0.1:6379 (a unique key prefix) trip
  together on remote faults seen by one of them, never on policy denials, and recover once
  the window drained; without a Redis each process counts alone.
* The dashboard in ``config_examples/`` queries only series and labels the gate exports:
  the declared ones, and those a scrape of the process's exporter shows after real traffic.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import CASES, RecordingObserver, body_of
from loopback import call, kwargs, run

from litellm_toolgate import ToolGate
from litellm_toolgate.core.decision.state import Wire
from litellm_toolgate.core.errors import GateConfigError, QuarantineReason
from litellm_toolgate.core.records.metrics import (
    OVERFLOW,
    AttemptOutcome,
    DecidedBatch,
    Observer,
    queued,
)
from litellm_toolgate.edge.config import GateSettings
from litellm_toolgate.edge.guardrail.callback import GuardrailConfigError, ToolGateGuardrail
from litellm_toolgate.edge.logs import observers
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted
from litellm_toolgate.operate.escalation import EscalationSettings, RouteEscalation

prometheus_client = pytest.importorskip("prometheus_client")
from litellm_toolgate.operate.metrics import (  # noqa: E402
    FOLD_EVERY,
    METRIC_LABELS,
    PrometheusExporter,
)

ROOT = Path(__file__).resolve().parent.parent
TOOLS = json.loads((ROOT / "config_examples" / "tools.json").read_text())


@pytest.fixture
def exporter() -> Iterator[PrometheusExporter]:
    made = PrometheusExporter(prometheus_client.CollectorRegistry(), ["cometapi/gpt-4o-mini"], 3)
    observers.add(made)
    try:
        yield made
    finally:
        observers.remove(made)


def value(exporter: PrometheusExporter, name: str, **labels: str) -> float:
    total = 0.0
    for family in exporter.registry.collect():
        for sample in family.samples:
            if sample.name == name and labels.items() <= sample.labels.items():
                total += sample.value
    return total


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_gated_attempts_are_counted_once_by_reason(
    exporter: PrometheusExporter, asynchronous: bool
) -> None:
    gate = ToolGate(TOOLS)
    names = ["multiply_basic", "two_calls_interleaved", "done_without_finish", "args_invalid_json"]
    with FakeUpstream() as upstream:
        for name in names:
            upstream.enqueue(Scripted(body_of(CASES[name])))
            run(gate, upstream, asynchronous)
    route = "cometapi/gpt-4o-mini"
    assert value(exporter, "toolgate_attempts_total") == 4
    assert value(exporter, "toolgate_releases_total", route=route, wire="chat") == 2
    assert value(exporter, "toolgate_attempts_total", outcome="quarantined") == 2
    missing = {"reason": "missing_finish", "family": "StreamFault", "party": "remote"}
    assert value(exporter, "toolgate_quarantines_total", route=route, **missing) == 1
    assert value(exporter, "toolgate_quarantines_total", reason="invalid_json") == 1
    assert value(exporter, "toolgate_withheld_bytes_count") == 4
    assert value(exporter, "toolgate_release_delay_seconds_count") == 2
    assert value(exporter, "toolgate_decision_seconds_count") >= 2


def _outcome(route: str, reason: str | None = None, party: str | None = None) -> AttemptOutcome:
    """A chat attempt with one call that opened 10 ms before the decision."""
    fault = None if reason is None else QuarantineReason(reason)
    assert party == (None if fault is None else fault.party.value)  # as the caller means
    return AttemptOutcome(route, Wire.CHAT, fault, 1, 10, 0.001, 0.01)


def _tell(observer: Observer, *outcomes: AttemptOutcome) -> None:
    """Hand ``observer`` a batch, as a drain does."""
    observer.attempts_decided(DecidedBatch.of(outcomes))


def test_label_cardinality_stays_bounded_under_many_model_names(
    exporter: PrometheusExporter,
) -> None:
    for i in range(2000):
        _tell(exporter, _outcome(f"openai/model-{i}"))
        _tell(exporter, _outcome(f"openai/model-{i}", "missing_done", "remote"))
    routes = set()
    series = 0
    for family in exporter.registry.collect():
        for sample in family.samples:
            series += 1
            if "route" in sample.labels:
                routes.add(sample.labels["route"])
    # The named route (unused here), three others, then the overflow value.
    assert routes == {"openai/model-0", "openai/model-1", "openai/model-2", OVERFLOW}
    assert series < 100
    assert value(exporter, "toolgate_attempts_total") == 4000
    assert value(exporter, "toolgate_attempts_total", route=OVERFLOW) == 4000 - 6


def test_queued_outcomes_are_all_counted_across_threads_and_scrapes(
    exporter: PrometheusExporter,
) -> None:
    """Outcomes are queued on the decision's path and binned in batches and at scrapes:
    none is lost or counted twice while threads decide and a scraper collects meanwhile."""
    import threading

    per_thread = 3 * FOLD_EVERY + 7  # batches folded by the deciders, and a remainder
    seen: list[float] = []
    stop = threading.Event()

    def decide() -> None:
        for _ in range(per_thread):
            # What a decided attempt does (core/decision/attempt.py), then where it goes out
            # (edge/logs.py::emit_records).
            observers.decided.extend(queued(_outcome("cometapi/gpt-4o-mini")))
            if observers.due():
                observers.drain()

    def scrape() -> None:
        while not stop.is_set():
            seen.append(value(exporter, "toolgate_attempts_total"))

    scraper = threading.Thread(target=scrape)
    scraper.start()
    threads = [threading.Thread(target=decide) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    stop.set()
    scraper.join()
    assert seen == sorted(seen)  # a scrape never sees fewer than an earlier one
    assert value(exporter, "toolgate_attempts_total") == 4 * per_thread
    assert value(exporter, "toolgate_withheld_bytes_count") == 4 * per_thread
    assert value(exporter, "toolgate_release_delay_seconds_count") == 4 * per_thread


def test_the_exported_series_are_the_documented_ones(exporter: PrometheusExporter) -> None:
    _tell(exporter, _outcome("cometapi/gpt-4o-mini"))
    _tell(exporter, _outcome("cometapi/gpt-4o-mini", "missing_done", "remote"))
    exporter.stream_started("r")
    exporter.route_transition("cometapi/gpt-4o-mini", "tripped")
    families = {(f.name, f.type) for f in exporter.registry.collect()}
    named = {name + "_total" if kind == "counter" else name for name, kind in families}
    assert named == set(METRIC_LABELS)
    for name, kind in families:
        assert name.startswith("toolgate_")
        if name.endswith(("_seconds", "_bytes")):
            assert kind == "histogram"
    text = prometheus_client.generate_latest(exporter.registry).decode()
    assert "toolgate_attempts_total{" in text and "_total_total" not in text


# ---- settings --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"metrics": {"prot": 9000}}, "metrics.prot"),
        ({"metrics": {"port": "9000"}}, "metrics.port"),
        ({"metrics": {"port": 70000}}, "metrics.port"),
        ({"metrics": {"max_routes": True}}, "metrics.max_routes"),
        ({"escalation": {"windw_seconds": 60}}, "escalation.windw_seconds"),
        ({"escalation": {"min_attempts": "20"}}, "escalation.min_attempts"),
        ({"escalation": {"trip_rate": 2}}, "escalation.trip_rate"),
        ({"escalation": {"take_out_of_routing": "yes"}}, "escalation.take_out_of_routing"),
        ({"escalation": {"shared": "redis"}}, "escalation.shared"),
        ({"escalation": {"hook": "no_colon"}}, "escalation.hook"),
    ],
)
def test_a_wrong_setting_stops_start_up(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(GuardrailConfigError, match=re.escape(named)):
        ToolGateGuardrail(TOOLS, **settings)


def test_a_recovery_rate_not_below_the_trip_rate_stops_start_up() -> None:
    with pytest.raises(GuardrailConfigError, match="recover_rate"):
        ToolGateGuardrail(TOOLS, escalation={"trip_rate": 0.3, "recover_rate": 0.3})
    with pytest.raises(GuardrailConfigError, match="cannot be imported"):
        ToolGateGuardrail(TOOLS, escalation={"hook": "no.such.module:alert"})


def test_settings_from_yaml_take_both_sections() -> None:
    settings = GateSettings.from_mapping(
        {
            "tools": TOOLS,
            "metrics": {"routes": ["cometapi/gpt-4o-mini"]},
            "escalation": {"window_seconds": 30, "min_attempts": 5, "trip_rate": 0.4},
        }
    )
    assert settings.escalation is not None and settings.escalation.window_seconds == 30.0
    assert settings.metrics is not None and settings.metrics.port is None


# ---- escalation -------------------------------------------------------------------------------
class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


RULE = {"window_seconds": 10.0, "buckets": 5, "min_attempts": 4, "trip_rate": 0.5}


def _escalation(clock: Clock, redis: Any, prefix: str, **extra: Any) -> RouteEscalation:
    settings = EscalationSettings(
        **RULE, recover_rate=0.1, take_out_of_routing=True, key_prefix=prefix, **extra
    )
    alerts: list[dict[str, Any]] = []
    escalation = RouteEscalation(settings, hook=alerts.append, redis=redis, clock=clock)
    escalation.hook_alerts = alerts  # type: ignore[attr-defined]
    return escalation


BAD = "cometapi/bad"
DEPLOYMENTS = [
    {"model_name": "gw", "litellm_params": {"model": "cometapi/good"}},
    {"model_name": "gw", "litellm_params": {"model": BAD}},
]


def test_one_process_alone_trips_logs_once_and_recovers(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    escalation = _escalation(clock, None, "unused")
    assert not escalation.shared
    caplog.set_level(logging.INFO, logger="litellm_toolgate")
    for _ in range(3):
        _tell(escalation, _outcome(BAD, "missing_done", "remote"))
    assert escalation.filter(DEPLOYMENTS) == DEPLOYMENTS  # under min_attempts
    for _ in range(5):
        _tell(escalation, _outcome(BAD, "missing_done", "remote"))
    assert escalation.filter(DEPLOYMENTS) == DEPLOYMENTS[:1]
    alerts = [r.toolgate_alert for r in caplog.records if hasattr(r, "toolgate_alert")]
    assert [a["transition"] for a in alerts] == ["tripped"]  # one alert, not one per fault
    assert alerts[0]["route"] == BAD and alerts[0]["remote_faults"] == 4
    assert escalation.hook_alerts == alerts  # type: ignore[attr-defined]
    clock.now += 5
    assert escalation.filter(DEPLOYMENTS) == DEPLOYMENTS[:1]  # still inside the window
    clock.now += 6
    assert escalation.filter(DEPLOYMENTS) == DEPLOYMENTS  # drained: back in routing
    alerts = [r.toolgate_alert for r in caplog.records if hasattr(r, "toolgate_alert")]
    assert [a["transition"] for a in alerts] == ["tripped", "recovered"]


def test_a_hook_may_ask_the_escalation_and_change_the_observers() -> None:
    """The hook is called after the judging lock is let go: asking the escalation what is out
    of routing (which judges again) or adding and removing an observer from it returns, on
    the thread that decided the attempt, and sees the transition made."""
    import threading

    clock = Clock()
    escalation = _escalation(clock, None, "unused")
    seen: list[Any] = []
    extra = RecordingObserver()

    def hook(alert: dict[str, Any]) -> None:
        seen.append((alert["transition"], escalation.filter(DEPLOYMENTS)))
        observers.add(extra)
        observers.remove(extra)

    escalation.hook = hook

    def decide() -> None:
        for _ in range(8):
            _tell(escalation, _outcome(BAD, "missing_done", "remote"))
        clock.now += 11
        escalation.refresh()

    worker = threading.Thread(target=decide, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "the hook deadlocked the escalation"
    assert seen == [("tripped", DEPLOYMENTS[:1]), ("recovered", DEPLOYMENTS)]
    assert extra not in observers.listening


def test_policy_denials_and_cancellations_never_trip() -> None:
    escalation = _escalation(Clock(), None, "unused")
    for reason in ["policy_denied", "cancelled", "too_many_calls"] * 20:
        _tell(escalation, _outcome(BAD, reason, "local"))
    assert escalation.tripped == frozenset()
    assert escalation.filter(DEPLOYMENTS) == DEPLOYMENTS


@pytest.fixture
def redis_client() -> Iterator[tuple[Any, str]]:
    redis = pytest.importorskip("redis")
    client = redis.Redis(host="127.0.0.1", port=6379, socket_timeout=10)
    try:
        client.ping()
    except redis.RedisError:
        pytest.fail("no Redis on 127.0.0.1:6379")
    prefix = f"toolgate-test:{secrets.token_hex(8)}"
    yield client, prefix
    for key in client.scan_iter(match=f"{prefix}:*"):
        client.delete(key)


def test_two_processes_share_the_window_through_redis(redis_client: tuple[Any, str]) -> None:
    client, prefix = redis_client
    clock = Clock()
    a = _escalation(clock, client, prefix, sync_seconds=60)  # synced by hand below
    b = _escalation(clock, client, prefix, sync_seconds=60)
    try:
        assert a.shared and b.shared
        # Denials through A: traffic, never faults.
        for _ in range(10):
            _tell(a, _outcome(BAD, "policy_denied", "local"))
        a.sync()
        b.sync()
        assert a.tripped == b.tripped == frozenset()
        # Faults through A only, fewer than min_attempts on their own in either process...
        for _ in range(12):
            _tell(a, _outcome(BAD, "missing_done", "remote"))
        assert a.tripped == frozenset()  # judged on the fleet's totals, at the next sync
        a.sync()
        b.sync()
        # ...and both take the route out: B counted nothing itself.
        assert a.tripped == b.tripped == {BAD}
        assert b.filter(DEPLOYMENTS) == DEPLOYMENTS[:1]
        # The window drains in Redis too: both put it back.
        clock.now += 11
        a.sync()
        b.sync()
        assert a.tripped == b.tripped == frozenset()
        assert b.filter(DEPLOYMENTS) == DEPLOYMENTS
        # Every key has an expiry: nothing stays behind in a shared Redis.
        keys = list(client.scan_iter(match=f"{prefix}:*"))
        assert keys and all(client.ttl(k) > 0 for k in keys)
    finally:
        a.close()
        b.close()


def test_a_redis_that_fails_falls_back_to_this_process(redis_client: tuple[Any, str]) -> None:
    redis = pytest.importorskip("redis")
    dead = redis.Redis(host="127.0.0.1", port=1, socket_timeout=1, socket_connect_timeout=1)
    clock = Clock()
    escalation = _escalation(clock, dead, "dead", sync_seconds=60)
    try:
        for _ in range(6):
            _tell(escalation, _outcome(BAD, "missing_done", "remote"))
        escalation.sync()  # fails: from now on judged here
        _tell(escalation, _outcome(BAD, "missing_done", "remote"))
        assert escalation.tripped == {BAD}
    finally:
        escalation.close()


# ---- the dashboard ----------------------------------------------------------------------------
DASHBOARD = ROOT / "config_examples" / "grafana_toolgate.json"
_HISTOGRAM_PARTS = ("_bucket", "_sum", "_count")


def _queries(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, item in node.items():
            if key in ("expr", "query") and isinstance(item, str) and "toolgate_" in item:
                yield item
            else:
                yield from _queries(item)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)


def _labels_of(metric: str) -> set[str] | None:
    if metric in METRIC_LABELS:
        return set(METRIC_LABELS[metric])
    for part in _HISTOGRAM_PARTS:
        base = metric.removesuffix(part)
        if base != metric and base in METRIC_LABELS:
            return set(METRIC_LABELS[base]) | ({"le"} if part == "_bucket" else set())
    return None


def _used_labels(query: str) -> set[str]:
    """The label names a query selects on, groups by or lists values of."""
    used = set()
    for selector in re.findall(r"\{([^}]*)\}", query):
        used |= set(re.findall(r"([a-z_]+)\s*(?:=~|!~|!=|=)", selector))
    for grouping in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", query):
        used |= {g.strip() for g in grouping.split(",") if g.strip()}
    used |= set(re.findall(r"label_values\(\s*toolgate_[a-z_]+\s*,\s*([a-z_]+)", query))
    return used


def _dashboard_queries() -> list[tuple[str, set[str], set[str]]]:
    """Each dashboard query with the metric names and the label names it uses."""
    out = []
    for query in _queries(json.loads(DASHBOARD.read_text())):
        metrics = set(re.findall(r"\btoolgate_[a-z_]+", query))
        assert metrics, query
        out.append((query, metrics, _used_labels(query)))
    assert len(out) >= 8
    return out


def test_the_dashboard_queries_only_what_the_gate_exports() -> None:
    for query, metrics, used in _dashboard_queries():
        allowed: set[str] = set()
        for metric in metrics:
            labels = _labels_of(metric)
            assert labels is not None, f"{metric} is not exported: {query}"
            allowed |= labels
        assert used <= allowed, f"{used - allowed} not on {metrics}: {query}"


def _scraped_series(text: str) -> dict[str, set[str]]:
    """Each sample name of a text exposition and the label names its samples carry."""
    from prometheus_client.parser import text_string_to_metric_families

    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


def test_the_dashboard_queries_series_a_scrape_of_real_traffic_shows() -> None:
    """Released, quarantined and refused attempts through the real litellm, and a route
    escalated by its remote faults, reach the process's exporter; its ``/metrics`` page,
    scraped over loopback, holds every metric and label each dashboard query uses (not only
    the declared ones: what the collector really writes)."""
    import socket

    import httpx

    from litellm_toolgate.operate.metrics import MetricsSettings, enable_metrics

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    route = "cometapi/gpt-4o-mini"
    made = enable_metrics(MetricsSettings(port=port, routes=[route]))
    settings = EscalationSettings(window_seconds=60.0, min_attempts=2, trip_rate=0.5, shared="off")
    escalation = RouteEscalation(settings, hook=None, redis=None)
    observers.add(escalation)
    gate = ToolGate(TOOLS)
    try:
        with FakeUpstream() as upstream:
            outcomes = []
            for name, asynchronous in [
                ("multiply_basic", False),
                ("multiply_basic", True),
                ("args_invalid_json", True),
                ("done_without_finish", False),
                ("done_without_finish", True),
            ]:
                upstream.enqueue(Scripted(body_of(CASES[name])))
                _, fault = run(gate, upstream, asynchronous)
                outcomes.append(None if fault is None else fault.reason.value)
            # Refused before anything was sent: an n that is no count of choices.
            _, refused = call(
                gate.completion, gate.acompletion, kwargs(upstream, n=129), asynchronous=False
            )
        assert outcomes == [None, None, "invalid_json", "missing_finish", "missing_finish"]
        assert refused is not None and refused.reason is QuarantineReason.UNSUPPORTED_REQUEST
        assert escalation.tripped == {route}
        observers.drain()
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
    finally:
        observers.remove(escalation)
        escalation.close()
        observers.remove(made)
    series = _scraped_series(text)
    # The traffic is there: each outcome, the refusal's reason, the escalated route.
    for line in (
        'outcome="released"',
        'outcome="quarantined"',
        'reason="unsupported_request"',
        'reason="missing_finish"',
        f'toolgate_route_escalated{{route="{route}"}} 1.0',
        'transition="tripped"',
    ):
        assert line in text, line
    for query, metrics, used in _dashboard_queries():
        labels: set[str] = set()
        for metric in metrics:
            assert metric in series, f"{metric} is not in the scrape: {query}"
            labels |= series[metric]
        assert used <= labels, f"{used - labels} not on {metrics} in the scrape: {query}"


def test_the_dashboard_test_catches_a_wrong_label() -> None:
    # The check above can fail: a query with a label the gate does not export.
    assert "model" not in METRIC_LABELS["toolgate_quarantines_total"]
    assert _labels_of("toolgate_refusals_total") is None
    assert _labels_of("toolgate_decision_seconds_bucket") == {"wire", "le"}


def test_config_errors_are_typed() -> None:
    with pytest.raises(GateConfigError):
        EscalationSettings(trip_rate=0.2, recover_rate=0.2).rule()


def test_histogram_buckets_follow_the_le_rule(exporter: PrometheusExporter) -> None:
    # A value equal to a bound falls in that bound's bucket (Prometheus: le, "less or equal").
    for seconds in (0.0001, 0.00010001, 1.0):
        outcome = _outcome("cometapi/gpt-4o-mini")._replace(decision_seconds=seconds)
        _tell(exporter, outcome)
    bucket = "toolgate_decision_seconds_bucket"
    assert value(exporter, bucket, le="0.0001") == 1
    assert value(exporter, bucket, le="0.00025") == 2
    assert value(exporter, bucket, le="0.5") == 2
    assert value(exporter, bucket, le="+Inf") == 3
    assert value(exporter, "toolgate_decision_seconds_count") == 3
    assert value(exporter, "toolgate_decision_seconds_sum") == pytest.approx(1.00020001)


def test_a_settings_file_takes_both_sections(tmp_path: Path) -> None:
    (tmp_path / "tools.json").write_text(json.dumps(TOOLS))
    (tmp_path / "toolgate.yaml").write_text(
        "tools_file: tools.json\n"
        "metrics: {routes: [cometapi/x], max_routes: 5}\n"
        "escalation: {window_seconds: 30, min_attempts: 5, trip_rate: 0.4, shared: 'off'}\n"
    )
    gate = ToolGateGuardrail.from_settings_file(tmp_path / "toolgate.yaml")
    try:
        assert gate.escalation is not None and not gate.escalation.shared
        assert gate.escalation.rule.window == 30.0 and gate.escalation.rule.min_attempts == 5
    finally:
        if gate.escalation is not None:
            observers.remove(gate.escalation)
    (tmp_path / "toolgate.yaml").write_text(
        "tools_file: tools.json\nescalation: {window_seconds: 30, min_atempts: 5}\n"
    )
    with pytest.raises(GuardrailConfigError, match=re.escape("escalation.min_atempts")):
        ToolGateGuardrail.from_settings_file(tmp_path / "toolgate.yaml")


def test_metrics_on_a_port_of_their_own() -> None:
    import socket

    import httpx

    from litellm_toolgate.operate.metrics import MetricsSettings, enable_metrics

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    made = enable_metrics(MetricsSettings(port=port, routes=["cometapi/gpt-4o-mini"]))
    try:
        assert enable_metrics(MetricsSettings()) is made  # one exporter per process
        _tell(made, _outcome("cometapi/gpt-4o-mini", "missing_done", "remote"))
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=30).text
        assert 'toolgate_quarantines_total{family="StreamFault",party="remote"' in text
        # A port that cannot be served stops start-up, named.
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen()
            taken = int(busy.getsockname()[1])
            with pytest.raises(GateConfigError, match=f"127.0.0.1:{taken}"):
                enable_metrics(MetricsSettings(port=taken))
    finally:
        observers.remove(made)


def test_a_batch_of_several_wires_routes_and_reasons_is_binned_per_series(
    exporter: PrometheusExporter,
) -> None:
    """One fold over a mixed batch (the common batch is one cell): each wire's histograms
    take only its own attempts with calls, the delay only released ones."""
    chat = _outcome("cometapi/gpt-4o-mini")
    responses = Wire.RESPONSES
    outcomes = [
        chat,
        chat._replace(route="openai/gpt-4o"),
        _outcome("cometapi/gpt-4o-mini", "missing_done", "remote"),
        chat._replace(wire=responses, withheld_bytes=5000, release_delay_seconds=3.0),
        chat._replace(wire=responses, calls=0, withheld_bytes=0, release_delay_seconds=None),
        chat._replace(release_delay_seconds=None),  # made by hand: a call, but no delay
    ]
    for outcome in outcomes:
        _tell(exporter, outcome)
    assert value(exporter, "toolgate_attempts_total") == 6
    assert value(exporter, "toolgate_releases_total", wire="chat") == 3
    assert value(exporter, "toolgate_releases_total", route="openai/gpt-4o") == 1
    assert value(exporter, "toolgate_quarantines_total", reason="missing_done") == 1
    assert value(exporter, "toolgate_releases_total", wire="responses") == 2
    assert value(exporter, "toolgate_withheld_bytes_count", wire="chat") == 4
    assert value(exporter, "toolgate_withheld_bytes_count", wire="responses") == 1
    assert value(exporter, "toolgate_withheld_bytes_sum", wire="responses") == 5000
    assert value(exporter, "toolgate_release_delay_seconds_count", wire="chat") == 2
    assert value(exporter, "toolgate_release_delay_seconds_sum", wire="responses") == 3.0
    assert value(exporter, "toolgate_decision_seconds_count") == 5
