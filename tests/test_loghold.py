"""The proxy's held success logging (``edge/guardrail/loghold.py``), on a stand-in logging object.

The held handlers wait for the gate's decision without polling: a decision made on another
thread wakes the waiting handler; a released attempt is logged as a success, a refused one
as a failure with the sanitized record in place of the answer; an attempt nobody decides in
``HOLD_LIMIT`` is logged as neither. The logging object keeps the attempt's decision, not
the attempt (litellm keeps that object in reference cycles after a proxy stream): a decided
attempt gone before the handler runs is logged all the same. The real proxy's path is in
tests/test_proxy_routes.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import threading
import weakref
from typing import Any

import pytest

from litellm_toolgate import ToolCallQuarantined, ToolGate
from litellm_toolgate.demo.run import MULTIPLY
from litellm_toolgate.edge.guardrail import loghold

CANARY = "CANARY-loghold-7d1"


class Logging:
    """What the held handlers use of litellm's logging object."""

    def __init__(self) -> None:
        self.model_call_details: dict[str, Any] = {"response": CANARY}
        self.heard: list[tuple[str, Any]] = []

    async def async_success_handler(self, *args: Any, **kwargs: Any) -> None:
        self.heard.append(("success", None))

    def success_handler(self, *args: Any, **kwargs: Any) -> None:
        self.heard.append(("success", None))

    async def async_failure_handler(self, exception: Any, traceback: str) -> None:
        self.heard.append(("failure", exception))

    def failure_handler(self, exception: Any, traceback: str) -> None:
        self.heard.append(("failure", exception))


def _attempt(refused: bool) -> Any:
    attempt = ToolGate(tools=[MULTIPLY]).new_attempt()
    if refused:
        with contextlib.suppress(ToolCallQuarantined):
            attempt.conclude()
    return attempt


@pytest.mark.parametrize("refused", [False, True])
def test_an_async_handler_waits_for_a_decision_made_on_another_thread(refused: bool) -> None:
    log, attempt = Logging(), _attempt(refused)
    loghold.hold(log, attempt)

    async def go() -> None:
        handler = asyncio.ensure_future(log.async_success_handler())
        await asyncio.sleep(0.05)
        assert log.heard == [] and not handler.done()  # held
        threading.Timer(0.05, loghold.decided, [attempt]).start()
        await asyncio.wait_for(handler, 10)

    asyncio.run(go())
    if refused:
        assert [kind for kind, _ in log.heard] == ["failure"]
        assert log.heard[0][1] is attempt.quarantined
        assert CANARY not in repr(log.model_call_details)
    else:
        assert log.heard == [("success", None)]


def test_a_sync_handler_waits_too() -> None:
    log, attempt = Logging(), _attempt(refused=True)
    loghold.hold(log, attempt)
    threading.Timer(0.05, loghold.decided, [attempt]).start()
    log.success_handler()
    assert [kind for kind, _ in log.heard] == ["failure"]


def test_nothing_is_logged_for_an_attempt_nobody_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loghold, "HOLD_LIMIT", 0.1)
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt)
    asyncio.run(log.async_success_handler())
    log.success_handler()
    assert log.heard == []
    loghold.decided(attempt)  # a late decision wakes nobody and logs nothing
    assert log.heard == []


def test_a_decision_made_before_the_handler_runs_lets_it_through_at_once() -> None:
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt)
    loghold.decided(attempt)
    asyncio.run(asyncio.wait_for(log.async_success_handler(), 1))
    assert log.heard == [("success", None)]


def test_the_logging_object_does_not_keep_the_attempt() -> None:
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt)
    gone = weakref.ref(attempt)
    del attempt
    gc.collect()
    assert gone() is None


@pytest.mark.parametrize("refused", [False, True])
def test_a_decided_attempt_gone_before_its_handlers_is_logged_as_decided(refused: bool) -> None:
    log, attempt = Logging(), _attempt(refused)
    fault = attempt.quarantined
    if fault is not None:
        # A raised quarantine's traceback reaches the frames that raised it, the attempt's
        # among them (a cycle left to the collector): cleared, so the attempt can go here.
        fault.with_traceback(None)
    loghold.hold(log, attempt)
    loghold.decided(attempt)
    gone = weakref.ref(attempt)
    del attempt
    gc.collect()
    assert gone() is None
    asyncio.run(asyncio.wait_for(log.async_success_handler(), 10))
    log.success_handler()
    if not refused:
        assert log.heard == [("success", None), ("success", None)]
        return
    assert [kind for kind, _ in log.heard] == ["failure", "failure"]
    assert log.heard[0][1] is fault and log.heard[1][1] is fault
    record = json.loads(log.model_call_details["original_response"])
    assert record["outcome"] == "quarantined"
    assert CANARY not in repr(log.model_call_details)


def test_an_attempt_gone_undecided_logs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loghold, "HOLD_LIMIT", 0.1)
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt)
    del attempt
    gc.collect()
    asyncio.run(log.async_success_handler())
    log.success_handler()
    assert log.heard == []
