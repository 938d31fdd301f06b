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
import time
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


# ---- inline: litellm's Responses and Messages iterators log on the reader's own path ------
def _wait_heard(log: Logging, count: int) -> None:
    deadline = time.monotonic() + 10
    while len(log.heard) < count and time.monotonic() < deadline:
        time.sleep(0.01)


@pytest.mark.parametrize("refused", [False, True])
def test_an_inline_handler_called_before_the_decision_is_made_after_it(refused: bool) -> None:
    log, attempt = Logging(), _attempt(refused)
    loghold.hold(log, attempt, inline=True)
    # The reader's own thread, a private loop for the async handler: neither waits.
    asyncio.run(asyncio.wait_for(log.async_success_handler(), 1))
    log.success_handler()
    assert log.heard == []
    loghold.decided(attempt)
    _wait_heard(log, 2)
    if refused:
        assert [kind for kind, _ in log.heard] == ["failure", "failure"]
        assert all(fault is attempt.quarantined for _, fault in log.heard)
        assert CANARY not in repr(log.model_call_details)
    else:
        assert log.heard == [("success", None), ("success", None)]


def test_an_inline_async_handler_is_made_on_its_own_loop_while_it_runs() -> None:
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt, inline=True)

    async def go() -> None:
        await asyncio.wait_for(log.async_success_handler(), 1)
        assert log.heard == []
        loghold.decided(attempt)
        for _ in range(200):
            if log.heard:
                break
            await asyncio.sleep(0.01)

    asyncio.run(go())
    assert log.heard == [("success", None)]


def test_an_inline_hold_settled_undecided_or_let_go_logs_nothing() -> None:
    log, attempt = Logging(), _attempt(refused=False)
    loghold.hold(log, attempt, inline=True)
    log.success_handler()
    loghold.settle(attempt)  # undecided: the deferred call is never made
    time.sleep(0.1)
    assert log.heard == []
    # A stream let go of undecided: its attempt goes (the held object keeps it weakly), and
    # a handler called after that hears nothing.
    other, dropped = Logging(), _attempt(refused=False)
    loghold.hold(other, dropped, inline=True)
    other.success_handler()
    gone = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert gone() is None, "the deferred call kept its attempt"
    other.success_handler()
    asyncio.run(asyncio.wait_for(other.async_success_handler(), 1))
    assert other.heard == []
