"""The tool loop's OpenTelemetry spans and duration metric, when OpenTelemetry is installed.

Each call the loop takes up (``gate.run`` / ``gate.arun``, :mod:`.loop`) is one span named
after the GenAI semantic conventions, ``execute_tool {gen_ai.tool.name}``, with
``gen_ai.operation.name = "execute_tool"``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
``gen_ai.tool.type = "function"`` and, when the tool raised, ``error.type`` (its class name)
and an error status; plus the journal's side under ``toolgate.*``: the row's key, round,
effect, step, outcome and fencing token, the result's size, whether an approval was asked
at ``started`` and its answer, and whether the call was resumed. A resumed run is one span
``toolgate.resume`` around the calls it settles; the rows it reports as ambiguous are its
events (``toolgate.ambiguous_call``: call id, tool, step and key), with ``error.type =
AmbiguousCalls``.

Arguments and results are never on a span: the conventions allow them only on an explicit
opt-in, which this module does not implement. An exception is never recorded as an event
(its message may quote what the tool was given): only its class name.

The spans use the global tracer provider and are the current span while the tool runs, so
they are children of the caller's span and parents of any span the tool makes. With a
global meter provider, each tool's run (the executor alone) is recorded in the histogram
``gen_ai.execute_tool.duration`` (seconds) by tool name and ``error.type``. Without
``opentelemetry`` installed nothing is imported and every helper here does nothing.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

from ..core.rules.journal import AmbiguousCalls, JournalRow
from ..edge.traces import meter, tracer
from ..policies.approval import ApprovalPolicy
from ..policies.checks import members

DURATION = "gen_ai.execute_tool.duration"
RESUME_SPAN = "toolgate.resume"

_instruments: dict[str, Any] = {}


def _duration() -> Any:
    found = _instruments.get(DURATION, False)
    if found is False:
        m = meter()
        found = None
        if m is not None:
            found = m.create_histogram(
                DURATION, unit="s", description="Duration of a tool's run in the tool loop."
            )
        _instruments[DURATION] = found
    return found


class ToolRun:
    """What one ``execute_tool`` span is told; every method does nothing without a span."""

    __slots__ = ("_span", "_started", "name")

    def __init__(self, span: Any, name: str) -> None:
        self._span = span
        self.name = name
        self._started = 0.0

    def set(self, key: str, value: Any) -> None:
        if self._span is not None and value is not None:
            self._span.set_attribute(key, value)

    def row(self, row: JournalRow | None) -> None:
        """The journal row as it now stands (after each move)."""
        if row is None or self._span is None:
            return
        self.set("toolgate.journal.key", row.idempotency_key)
        self.set("toolgate.journal.step", row.step.value)
        self.set("toolgate.round", row.round)
        self.set("toolgate.tool.effect", row.effect.value)
        if row.outcome is not None:
            self.set("toolgate.outcome", row.outcome.value)
        if row.fencing_token is not None:
            self.set("toolgate.fencing_token", row.fencing_token)
        if row.result_size is not None:
            self.set("toolgate.result_bytes", row.result_size)
        if row.approval_status is not None:
            self.set("toolgate.approval.status", row.approval_status.value)

    def claimed(self, fencing_token: int) -> None:
        """The row was claimed: started, with this token (a kill from here on leaves it so)."""
        self.set("toolgate.journal.step", "started")
        self.set("toolgate.fencing_token", fencing_token)

    def approval(self, policy: Any, approved: bool) -> None:
        """The approval confirmed at ``started``: asked when an approval policy covers the
        tool (it holds still, or the human was asked again), and its answer."""
        asked = any(isinstance(m, ApprovalPolicy) and self.name in m.only for m in members(policy))
        self.set("toolgate.approval.asked", asked)
        if asked:
            self.set("toolgate.approval.answer", "approved" if approved else "denied")

    def tool_started(self) -> None:
        self._started = time.perf_counter()

    def tool_ended(self, error_type: str | None) -> None:
        """The executor returned (``error_type`` None) or raised an ``Exception``."""
        elapsed = time.perf_counter() - self._started
        histogram = _duration()
        if histogram is not None:
            labels = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": self.name}
            if error_type is not None:
                labels["error.type"] = error_type
            with contextlib.suppress(Exception):
                histogram.record(elapsed, labels)
        if error_type is not None and self._span is not None:
            from opentelemetry.trace import Status, StatusCode

            self.set("error.type", error_type)
            self._span.set_status(Status(StatusCode.ERROR))


@contextlib.contextmanager
def tool_run(run_id: str, name: str, call_id: str, *, resumed: bool) -> Iterator[ToolRun]:
    """The ``execute_tool`` span of one call, current while the loop handles the call."""
    found = tracer()
    if found is None:
        yield ToolRun(None, name)
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with found.start_as_current_span(
        f"execute_tool {name}",
        kind=SpanKind.INTERNAL,
        record_exception=False,  # an exception's message may quote the arguments
        set_status_on_exception=False,
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "toolgate.run_id": run_id,
            "toolgate.resumed": resumed,
        },
    ) as span:
        run = ToolRun(span if span.is_recording() else None, name)
        try:
            yield run
        except BaseException as exc:
            # The loop's own errors and a kill: the row is left as it is (started: ambiguous).
            run.set("error.type", type(exc).__name__)
            if span.is_recording():
                span.set_status(Status(StatusCode.ERROR))
            raise


@contextlib.contextmanager
def resume(run_id: str, rows: list[JournalRow]) -> Iterator[None]:
    """The ``toolgate.resume`` span of a resumed run: the calls it settles are its children;
    the rows it reports as ambiguous (:class:`AmbiguousCalls`) are its events."""
    found = tracer()
    if found is None:
        yield
        return
    from opentelemetry.trace import SpanKind, Status, StatusCode

    with found.start_as_current_span(
        RESUME_SPAN,
        kind=SpanKind.INTERNAL,
        record_exception=False,
        set_status_on_exception=False,
        attributes={
            "toolgate.run_id": run_id,
            "toolgate.resume.rows": len(rows),
            "toolgate.resume.unfinished": sum(1 for r in rows if not r.finished),
        },
    ) as span:
        try:
            yield
        except AmbiguousCalls as exc:
            if span.is_recording():
                span.set_attribute("error.type", "AmbiguousCalls")
                span.set_attribute("toolgate.ambiguous", len(exc.rows))
                for row in exc.rows:
                    span.add_event(
                        "toolgate.ambiguous_call",
                        {
                            "gen_ai.tool.call.id": row.call_id,
                            "toolgate.tool": row.tool,
                            "toolgate.journal.step": row.step.value,
                            "toolgate.journal.key": row.idempotency_key,
                            "toolgate.round": row.round,
                        },
                    )
                span.set_status(Status(StatusCode.ERROR))
            raise
        except BaseException as exc:
            if span.is_recording():
                span.set_attribute("error.type", type(exc).__name__)
                span.set_status(Status(StatusCode.ERROR))
            raise


__all__ = ["DURATION", "RESUME_SPAN", "ToolRun", "resume", "tool_run"]
