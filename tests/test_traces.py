"""What a trace shows of the gate, with the real OpenTelemetry SDK and the real litellm over
loopback HTTP: one ``toolgate.decision`` span per decided attempt (released, quarantined,
refused before sending) on the callback and the ``ToolGate`` paths, sync and async, streamed
and whole, beside litellm's own ``guardrail`` span; one ``execute_tool {name}`` span per call
of ``gate.run`` / ``gate.arun``, the resume span and its ambiguous rows, the duration
histogram; every span under the caller's; and no argument text anywhere in a span's name,
attributes or events (a canary in the arguments, and in a tool's error and result).

The SDK's providers are process-global and can be set once: the first test that needs them
sets them (an in-memory exporter and metric reader), every test reads only its own trace.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import litellm
import pytest
from conftest import CANARY, ROOT
from loopback import multiply_whole_body

pytest.importorskip("opentelemetry.sdk")

from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from litellm_toolgate import (
    PolicyDenied,
    SchemaRejected,
    ToolCallQuarantined,
    ToolGate,
    ToolGateGuardrail,
    find_quarantine,
)
from litellm_toolgate.core.rules.journal import AmbiguousCalls
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, calls_stream
from litellm_toolgate.run.journal import open_journal
from litellm_toolgate.run.tools import Tool

litellm.suppress_debug_info = True

TOOL = {
    "type": "function",
    "function": {
        "name": "multiply",
        "parameters": {
            "type": "object",
            "properties": {
                "a": {"type": "number"},
                "b": {"type": "number"},
                "note": {"type": "string"},
            },
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
GOOD = json.dumps({"a": 7, "b": 8, "note": CANARY})  # valid: released
BAD = json.dumps({"a": 7, "b": 8, "c": CANARY})  # an unknown key: schema_invalid
USER = [{"role": "user", "content": "7 times 8?"}]

_SDK: dict[str, Any] = {}


def sdk() -> tuple[InMemorySpanExporter, InMemoryMetricReader]:
    """The process's global tracer and meter providers, set once, in memory."""
    if not _SDK:
        exporter = InMemorySpanExporter()
        provider = trace.get_tracer_provider()
        if not isinstance(provider, TracerProvider):
            provider = TracerProvider()
            trace.set_tracer_provider(provider)
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        _SDK.update(exporter=exporter, reader=reader)
    return _SDK["exporter"], _SDK["reader"]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter, _ = sdk()
    exporter.clear()
    yield exporter
    exporter.clear()


@pytest.fixture
def otel_callback() -> Iterator[Any]:
    """litellm's own OpenTelemetry logger, on the global provider the test reads."""
    from litellm.integrations.opentelemetry import OpenTelemetry, OpenTelemetryConfig

    exporter, _ = sdk()
    logger = OpenTelemetry(config=OpenTelemetryConfig(exporter=exporter))
    saved = (litellm.callbacks, list(litellm.service_callback))
    yield logger
    litellm.callbacks = saved[0]
    litellm.service_callback[:] = saved[1]
    for name in dir(litellm):
        value = getattr(litellm, name, None)
        if isinstance(value, list):
            value[:] = [
                cb for cb in value if not isinstance(cb, ToolGateGuardrail) and cb is not logger
            ]


def trace_of(
    exporter: InMemorySpanExporter, root: Any, want: Callable[[list[Any]], bool]
) -> list[ReadableSpan]:
    """The finished spans of ``root``'s trace, once ``want`` holds of them (litellm logs on
    threads and tasks of its own: wait for it, generously, never for a fixed time)."""
    trace_id = root.get_span_context().trace_id
    deadline = time.monotonic() + 30
    while True:
        found = [s for s in exporter.get_finished_spans() if s.context.trace_id == trace_id]
        if want(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def guardrail_spans(exporter: InMemorySpanExporter, attempt_id: str) -> list[ReadableSpan]:
    deadline = time.monotonic() + 30
    while True:
        found = [
            s
            for s in exporter.get_finished_spans()
            if s.name == "guardrail"
            and attempt_id in str(dict(s.attributes or {}).get("guardrail_response"))
        ]
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def named(found: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def no_canary(found: list[ReadableSpan]) -> None:
    """No span's name, attributes, events or links hold the canary."""
    for span in found:
        assert CANARY not in span.to_json(), f"argument text on span {span.name}"


def answer(arguments: str, streamed: bool) -> Callable[[Any], Scripted]:
    if streamed:
        return lambda request: Scripted(calls_stream([("call_1", "multiply", arguments)]))
    return lambda request: Scripted(multiply_whole_body(arguments), content_type="application/json")


def call(
    way: str,
    mode: str,
    streamed: bool,
    base: str,
    settled: Callable[[], bool] = lambda: True,
    **extra: Any,
) -> BaseException | None:
    """One gated call, read to its end; the error it raised, if any. Async, the event loop
    runs on until ``settled()`` (litellm logs in tasks of its own, which a closed loop ends)."""
    kwargs = {
        "model": "cometapi/gpt-4o-mini",
        "messages": USER,
        "stream": streamed,
        "api_base": base,
        "api_key": "sk-traces",
        "num_retries": 0,
        **extra,
    }
    entry: Any = litellm if way == "callback" else ToolGate([TOOL])
    try:
        if mode == "sync":
            result = entry.completion(**kwargs)
            if streamed:
                for _ in result:
                    pass
        else:

            async def go() -> None:
                try:
                    result = await entry.acompletion(**kwargs)
                    if streamed:
                        async for _ in result:
                            pass
                finally:
                    deadline = time.monotonic() + 30
                    while not settled() and time.monotonic() < deadline:
                        await asyncio.sleep(0.05)

            asyncio.run(go())
    except Exception as exc:
        return exc
    return None


def child_of(span: ReadableSpan, parent: Any) -> bool:
    return span.parent is not None and span.parent.span_id == parent.get_span_context().span_id


# ---- decisions -------------------------------------------------------------------------------
@pytest.mark.parametrize("streamed", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("way", ["callback", "wrapper"])
@pytest.mark.parametrize("outcome", ["released", "quarantined"])
def test_every_decision_is_a_span_under_the_callers(  # noqa: PLR0917
    spans: InMemorySpanExporter,
    otel_callback: Any,
    monkeypatch: pytest.MonkeyPatch,
    outcome: str,
    way: str,
    mode: str,
    streamed: bool,
) -> None:
    if way == "callback":
        litellm.callbacks = [ToolGateGuardrail([TOOL]), otel_callback]
    else:
        litellm.callbacks = [otel_callback]
    arguments = GOOD if outcome == "released" else BAD
    tracer = trace.get_tracer("tests")
    with FakeUpstream(answer(arguments, streamed)) as upstream:

        def settled() -> bool:
            return way == "wrapper" or any(
                s.name == "guardrail" for s in spans.get_finished_spans()
            )

        with tracer.start_as_current_span("caller") as caller:
            error = call(way, mode, streamed, upstream.base_url, settled)

        found = trace_of(spans, caller, lambda f: bool(named(f, "toolgate.decision")))
    (decision,) = named(found, "toolgate.decision")
    assert child_of(decision, caller)
    attributes = dict(decision.attributes or {})
    assert attributes["toolgate.route"] == "cometapi/gpt-4o-mini"
    assert attributes["toolgate.wire"] == "chat" and attributes["toolgate.calls"] == 1
    assert attributes["toolgate.tool_names"] == ("multiply",)
    assert attributes["toolgate.response_seen"] is True
    (event,) = decision.events
    assert event.name == "toolgate.call"
    assert dict(event.attributes or {})["gen_ai.tool.call.id"] == "call_1"
    assert dict(event.attributes or {})["gen_ai.tool.name"] == "multiply"
    if outcome == "released":
        assert error is None, repr(error)
        assert attributes["toolgate.outcome"] == "released"
        assert "toolgate.reason" not in attributes
        assert decision.status.status_code is not StatusCode.ERROR
        # Released arguments are the caller's: litellm's spans may record them (its content
        # capture); the gate's own spans never do.
        no_canary([s for s in found if s.name in ("toolgate.decision", "guardrail")])
    else:
        assert isinstance(find_quarantine(error), SchemaRejected), repr(error)
        assert attributes["toolgate.outcome"] == "quarantined"
        assert attributes["toolgate.reason"] == "schema_invalid"
        assert attributes["toolgate.family"] == "SchemaRejected"
        assert attributes["toolgate.party"] == "remote"
        assert attributes["error.type"] == "SchemaRejected"
        assert decision.status.status_code is StatusCode.ERROR
        # Withheld arguments reach no span: the gate's, litellm's or the caller's.
        no_canary(found)
    if way == "callback":
        # litellm's own guardrail span (under its litellm_request span: on the sync path that
        # one starts a trace of its own), found by the attempt id in its guardrail_response.
        attempt_id = str(attributes["toolgate.attempt_id"])
        guardrails = guardrail_spans(spans, attempt_id)
        assert guardrails, "litellm's own guardrail span"
        no_canary(guardrails)
        status = "success" if outcome == "released" else "guardrail_intervened"
        assert {dict(g.attributes or {})["guardrail_status"] for g in guardrails} == {status}
        assert {dict(g.attributes or {})["guardrail_name"] for g in guardrails} == {"toolgate"}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("way", ["callback", "wrapper"])
def test_a_call_refused_before_sending_is_a_span(
    spans: InMemorySpanExporter, otel_callback: Any, way: str, mode: str
) -> None:
    litellm.callbacks = (
        [ToolGateGuardrail([TOOL]), otel_callback] if way == "callback" else [otel_callback]
    )
    tracer = trace.get_tracer("tests")
    with FakeUpstream(answer(BAD, True)) as upstream:
        with tracer.start_as_current_span("caller") as caller:
            # An n the gate takes for no count of choices: refused before sending.
            error = call(way, mode, True, upstream.base_url, n=129)
        found = trace_of(spans, caller, lambda f: bool(named(f, "toolgate.decision")))
        assert upstream.requests == [], "nothing was sent"
    fault = find_quarantine(error)
    assert isinstance(fault, ToolCallQuarantined), repr(error)
    (decision,) = named(found, "toolgate.decision")
    assert child_of(decision, caller)
    attributes = dict(decision.attributes or {})
    assert attributes["toolgate.outcome"] == "quarantined"
    assert attributes["toolgate.reason"] == fault.reason.value == "unsupported_request"
    assert attributes["toolgate.party"] == "local"
    assert attributes["toolgate.response_seen"] is False
    assert attributes["toolgate.calls"] == 0 and decision.events == ()
    no_canary(found)


def test_a_policy_denial_carries_no_policy_reason(
    spans: InMemorySpanExporter, otel_callback: Any
) -> None:
    """The policy's own reason may quote the arguments: it stays out of the gate's span."""
    from litellm_toolgate import PolicyDecision

    def policy(call: Any) -> PolicyDecision:
        return PolicyDecision.deny(f"refused: {call.arguments['note']}")

    litellm.callbacks = [otel_callback]
    tracer = trace.get_tracer("tests")
    with FakeUpstream(answer(GOOD, True)) as upstream:
        with tracer.start_as_current_span("caller") as caller:
            try:
                for _ in ToolGate([TOOL], policy=policy).completion(
                    model="cometapi/gpt-4o-mini",
                    messages=USER,
                    stream=True,
                    api_base=upstream.base_url,
                    api_key="sk",
                ):
                    pass
            except PolicyDenied:
                pass
            else:
                raise AssertionError("not denied")
        found = trace_of(spans, caller, lambda f: bool(named(f, "toolgate.decision")))
    (decision,) = named(found, "toolgate.decision")
    assert dict(decision.attributes or {})["toolgate.reason"] == "policy_denied"
    assert dict(decision.events[0].attributes or {})["toolgate.policy_status"] == "denied"
    no_canary(found)


# ---- tool runs -----------------------------------------------------------------------------
def run(asynchronous: bool, gate: ToolGate, **options: Any) -> Any:
    if asynchronous:
        return asyncio.run(gate.arun(**options))
    return gate.run(**options)


def histogram_points(name: str) -> list[Any]:
    _, reader = sdk()
    data = reader.get_metrics_data()
    points: list[Any] = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    assert metric.unit == "s"
                    points.extend(metric.data.data_points)
    return points


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_each_tool_run_is_an_execute_tool_span(
    spans: InMemorySpanExporter, asynchronous: bool
) -> None:
    sdk()
    outcomes = iter(["ok", "fail"])

    def multiply(arguments: dict[str, Any]) -> dict[str, Any]:
        if next(outcomes) == "fail":
            raise ValueError(f"cannot: {arguments['note']}")  # the canary in the message
        return {"value": arguments["a"] * arguments["b"], "echo": arguments["note"]}

    before = sum(p.count for p in histogram_points("gen_ai.execute_tool.duration"))
    tracer = trace.get_tracer("tests")
    with FakeUpstream() as upstream, open_journal("sqlite:///:memory:") as journal:
        upstream.enqueue(
            Scripted(calls_stream([("c1", "multiply", GOOD), ("c2", "multiply", GOOD)])),
            Scripted(answer_stream("56, and the second failed.")),
        )
        with tracer.start_as_current_span("caller") as caller:
            result = run(
                asynchronous,
                ToolGate([TOOL]),
                messages=list(USER),
                executors={"multiply": Tool(multiply, effect="idempotent")},
                journal=journal,
                run_id=f"run-traces-{asynchronous}",
                model="cometapi/gpt-4o-mini",
                api_base=upstream.base_url,
                api_key="sk",
            )
        found = trace_of(spans, caller, lambda f: len(named(f, "execute_tool multiply")) == 2)
    assert result.text == "56, and the second failed."
    ok, failed = sorted(named(found, "execute_tool multiply"), key=lambda s: s.start_time or 0)
    rows = {row.call_id: row for row in result.rows}
    for span, call_id in ((ok, "c1"), (failed, "c2")):
        attributes = dict(span.attributes or {})
        assert child_of(span, caller)
        assert attributes["gen_ai.operation.name"] == "execute_tool"
        assert attributes["gen_ai.tool.name"] == "multiply"
        assert attributes["gen_ai.tool.call.id"] == call_id
        assert attributes["gen_ai.tool.type"] == "function"
        assert attributes["toolgate.journal.key"] == rows[call_id].idempotency_key
        assert attributes["toolgate.tool.effect"] == "idempotent"
        assert attributes["toolgate.journal.step"] == "finished"
        assert attributes["toolgate.round"] == 0 and attributes["toolgate.resumed"] is False
        assert attributes["toolgate.approval.asked"] is False
        assert attributes["toolgate.fencing_token"] == rows[call_id].fencing_token
    assert dict(ok.attributes or {})["toolgate.outcome"] == "succeeded"
    assert "error.type" not in dict(ok.attributes or {})
    assert dict(failed.attributes or {})["toolgate.outcome"] == "failed"
    assert dict(failed.attributes or {})["error.type"] == "ValueError"
    assert failed.status.status_code is StatusCode.ERROR and failed.events == ()
    # The round's decision is a span too, under the caller (one per model request).
    decisions = named(found, "toolgate.decision")
    assert len(decisions) == 2 and all(child_of(d, caller) for d in decisions)
    no_canary(found)
    points = histogram_points("gen_ai.execute_tool.duration")
    assert sum(p.count for p in points) == before + 2
    failing = [p for p in points if dict(p.attributes).get("error.type") == "ValueError"]
    assert failing and dict(failing[0].attributes)["gen_ai.tool.name"] == "multiply"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_approval_asked_and_answered_are_on_the_span(
    spans: InMemorySpanExporter, asynchronous: bool
) -> None:
    from litellm_toolgate.policies import ApprovalPolicy

    answers = iter([True, False])
    now = [1000.0]

    def ask(request: Any) -> bool:
        return next(answers)

    def clock() -> float:
        # Each reading is a minute later: the grant (a second long) has expired by the start,
        # however fast the machine.
        now[0] += 60.0
        return now[0]

    policy = ApprovalPolicy(ask, tools=[TOOL], version="v1", ttl=1.0, clock=clock)
    tracer = trace.get_tracer("tests")
    with FakeUpstream() as upstream, open_journal("sqlite:///:memory:") as journal:
        upstream.enqueue(
            Scripted(calls_stream([("c1", "multiply", '{"a": 7, "b": 8}')])),
            Scripted(answer_stream("not run")),
        )
        with tracer.start_as_current_span("caller") as caller:
            result = run(
                asynchronous,
                ToolGate([TOOL], policy=policy),
                messages=list(USER),
                executors={"multiply": Tool(lambda a: 56, effect="read_only")},
                journal=journal,
                run_id=f"run-approval-{asynchronous}",
                model="cometapi/gpt-4o-mini",
                api_base=upstream.base_url,
                api_key="sk",
            )
        found = trace_of(spans, caller, lambda f: bool(named(f, "execute_tool multiply")))
    (span,) = named(found, "execute_tool multiply")
    attributes = dict(span.attributes or {})
    # Approved when the gate released it; the grant had expired at start: asked again, no.
    assert attributes["toolgate.approval.asked"] is True
    assert attributes["toolgate.approval.answer"] == "denied"
    assert attributes["toolgate.approval.status"] == result.rows[0].approval_status.value
    assert attributes["toolgate.outcome"] == "skipped" == result.rows[0].outcome.value


class Crash(BaseException):
    """Stands in for the process dying."""


@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_a_resume_reports_its_ambiguous_rows_as_events(
    spans: InMemorySpanExporter, asynchronous: bool
) -> None:
    sdk()

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    saved: list[list[Any]] = []
    tracer = trace.get_tracer("tests")
    options: dict[str, Any] = {
        "model": "cometapi/gpt-4o-mini",
        "api_key": "sk",
        "run_id": f"run-resume-{asynchronous}",
    }
    with FakeUpstream() as upstream, open_journal("sqlite:///:memory:") as journal:
        upstream.enqueue(Scripted(calls_stream([("c1", "multiply", GOOD)])))
        options.update(journal=journal, api_base=upstream.base_url)
        with tracer.start_as_current_span("first") as first, pytest.raises(Crash):
            ToolGate([TOOL]).run(
                messages=list(USER),
                executors={"multiply": Tool(dies, effect="non_idempotent")},
                checkpoint=saved.append,
                **options,
            )
        crashed = trace_of(spans, first, lambda f: bool(named(f, "execute_tool multiply")))
        (span,) = named(crashed, "execute_tool multiply")
        assert dict(span.attributes or {})["error.type"] == "Crash"
        assert dict(span.attributes or {})["toolgate.journal.step"] == "started"
        with tracer.start_as_current_span("resume") as again, pytest.raises(AmbiguousCalls):
            run(
                asynchronous,
                ToolGate([TOOL]),
                messages=saved[-1],
                executors={"multiply": Tool(lambda a: 56, effect="non_idempotent")},
                **options,
            )
        found = trace_of(spans, again, lambda f: bool(named(f, "toolgate.resume")))
        (row,) = journal.ambiguous(options["run_id"])
    (resume,) = named(found, "toolgate.resume")
    assert child_of(resume, again) and resume.status.status_code is StatusCode.ERROR
    attributes = dict(resume.attributes or {})
    assert attributes["error.type"] == "AmbiguousCalls" and attributes["toolgate.ambiguous"] == 1
    (event,) = resume.events
    assert event.name == "toolgate.ambiguous_call"
    assert dict(event.attributes or {}) == {
        "gen_ai.tool.call.id": "c1",
        "toolgate.tool": "multiply",
        "toolgate.journal.step": "started",
        "toolgate.journal.key": row.idempotency_key,
        "toolgate.round": 0,
    }
    assert named(found, "execute_tool multiply") == []
    no_canary(crashed + found)


def test_a_resumed_call_run_again_is_marked_resumed(spans: InMemorySpanExporter) -> None:
    sdk()
    saved: list[list[Any]] = []

    def dies(arguments: dict[str, Any]) -> Any:
        raise Crash

    tracer = trace.get_tracer("tests")
    with FakeUpstream() as upstream, open_journal("sqlite:///:memory:") as journal:
        upstream.enqueue(
            Scripted(calls_stream([("c1", "multiply", GOOD)])), Scripted(answer_stream("56"))
        )
        options: dict[str, Any] = {
            "model": "cometapi/gpt-4o-mini",
            "api_key": "sk",
            "api_base": upstream.base_url,
            "journal": journal,
            "run_id": "run-resumed",
            "lease_seconds": 0.2,
        }
        with pytest.raises(Crash):
            ToolGate([TOOL]).run(
                messages=list(USER),
                executors={"multiply": Tool(dies, effect="idempotent")},
                checkpoint=saved.append,
                **options,
            )
        with tracer.start_as_current_span("resume") as again:
            ToolGate([TOOL]).run(
                messages=saved[-1],
                executors={
                    "multiply": Tool(
                        lambda a: 56, effect="idempotent", on_ambiguous="retry_with_key"
                    )
                },
                **options,
            )
        found = trace_of(spans, again, lambda f: bool(named(f, "execute_tool multiply")))
    (resume,) = named(found, "toolgate.resume")
    (span,) = named(found, "execute_tool multiply")
    assert child_of(span, resume) and resume.status.status_code is not StatusCode.ERROR
    assert dict(span.attributes or {})["toolgate.resumed"] is True
    assert dict(span.attributes or {})["toolgate.outcome"] == "succeeded"
    no_canary(found)


# ---- without OpenTelemetry -------------------------------------------------------------------
HIDDEN = r"""
import sys

class Hide:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError("hidden by the test: " + name)
        return None

sys.meta_path.insert(0, Hide())

from litellm_toolgate import Tool, ToolGate, open_journal
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, calls_stream

TOOLS = [{"type": "function", "function": {"name": "multiply", "parameters": {"type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}]
with FakeUpstream() as upstream, open_journal("sqlite:///:memory:") as journal:
    upstream.enqueue(Scripted(calls_stream([("c1", "multiply", '{"a": 7, "b": 8}')])),
                     Scripted(answer_stream("56")))
    result = ToolGate(TOOLS).run(
        model="cometapi/gpt-4o-mini", api_base=upstream.base_url, api_key="sk",
        messages=[{"role": "user", "content": "7 times 8?"}], run_id="r",
        executors={"multiply": Tool(lambda a: a["a"] * a["b"], effect="read_only")},
        journal=journal)
print(result.text, result.rows[0].outcome.value)
print(sorted(m for m in sys.modules if m.split(".")[0] == "opentelemetry"))
"""


def test_the_loop_runs_without_opentelemetry() -> None:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    done = subprocess.run(
        [sys.executable, "-c", HIDDEN],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-2:] == ["56 succeeded", "[]"]
