"""A proxy stream's success logging held until the gate decided, and a refusal logged as one.

litellm reports a proxy stream to its success loggers (``async_log_success_event``: Langfuse,
OpenTelemetry, the spend log, ...) once litellm's own stream ended, with the assembled answer,
arguments included: also when the gate then refuses the stream and the client gets an error
(litellm dispatches it from its stream wrapper, in a task of its own or after the proxy's
stream hooks ended). So for each stream the gate takes up, the request's logging object gets
its success handlers held (:func:`hold`): they wait for the gate's decision
(:func:`decided`). Released: litellm's own handlers run as always. Refused (or no decision in
:data:`HOLD_LIMIT` seconds): no success event at all; the refusal goes to litellm's failure
handlers instead, with the quarantine (ids and a reason, no argument text) as the exception
and the attempt's sanitized record where litellm keeps the raw answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import weakref
from typing import Any

from ...core.decision.attempt import Attempt

HOLD_LIMIT = 300.0
_HELD = "_toolgate_held_for"  # the attempt the held handlers wait for
_WRAPPED = "_toolgate_held"
# Where litellm's logging object keeps the answer it assembled (or read) for its loggers.
_ANSWER_KEYS = ("complete_streaming_response", "async_complete_streaming_response", "response")


class _Decision:
    """Whether an attempt was decided, and the held async handlers waiting for it (each a
    future on its own event loop, woken from whichever thread decides)."""

    __slots__ = ("event", "waiters")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []


_decisions: weakref.WeakKeyDictionary[Attempt, _Decision] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _decision(attempt: Attempt) -> _Decision:
    with _lock:
        found = _decisions.get(attempt)
        if found is None:
            found = _decisions[attempt] = _Decision()
        return found


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def decided(attempt: Attempt) -> None:
    """The gate decided ``attempt`` (released or quarantined): held logging may go on."""
    decision = _decision(attempt)
    with _lock:
        decision.event.set()
        waiters, decision.waiters = decision.waiters, []
    for loop, future in waiters:
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there
            loop.call_soon_threadsafe(_wake, future)


async def _decided_in_time(decision: _Decision) -> bool:
    """Wait, without holding the loop, until the decision is made or HOLD_LIMIT passed."""
    loop = asyncio.get_running_loop()
    with _lock:
        if decision.event.is_set():
            return True
        waiter = (loop, loop.create_future())
        decision.waiters.append(waiter)
    try:
        await asyncio.wait_for(waiter[1], HOLD_LIMIT)
    except TimeoutError:
        with _lock, contextlib.suppress(ValueError):
            decision.waiters.remove(waiter)
    return decision.event.is_set()


def _sanitize(logging_obj: Any, attempt: Attempt) -> None:
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    details["original_response"] = json.dumps(attempt.summary(), separators=(",", ":"), default=str)
    for key in _ANSWER_KEYS:
        details.pop(key, None)


def hold(logging_obj: Any, attempt: Attempt) -> None:
    """Hold ``logging_obj``'s success handlers until ``attempt`` is decided (see the module
    docstring). The handlers are replaced once per object; a later call (a retried request
    on the same logging object) binds them to its own attempt, the one the loggers then
    hear of. Does nothing for an object that is not litellm's logging object."""
    if logging_obj is None:
        return
    try:
        setattr(logging_obj, _HELD, attempt)
    except (AttributeError, TypeError):
        return
    if getattr(logging_obj, _WRAPPED, False):
        return
    # The class's own handlers, called with the object: a bound method, or a closure over
    # the object, kept on the object would make a cycle that keeps litellm's copy of the
    # answer alive until the garbage collector runs. The object is reached weakly.
    kind = type(logging_obj)
    try:
        async_success: Any = kind.async_success_handler
        sync_success: Any = kind.success_handler
        async_failure: Any = kind.async_failure_handler
        sync_failure: Any = kind.failure_handler
        owner = weakref.ref(logging_obj)
    except (AttributeError, TypeError):
        return
    if not all(callable(f) for f in (async_success, sync_success, async_failure, sync_failure)):
        return

    def bound(obj: Any) -> tuple[Attempt, _Decision]:
        current: Attempt = getattr(obj, _HELD)
        return current, _decision(current)

    async def held_async_success(*args: Any, **kwargs: Any) -> Any:
        obj = owner()
        if obj is None:
            return None
        current, decision = bound(obj)
        if not await _decided_in_time(decision):
            return None  # undecided: no success event (fail closed)
        fault = current.quarantined
        if fault is None:
            return await async_success(obj, *args, **kwargs)
        _sanitize(obj, current)
        with contextlib.suppress(Exception):
            await async_failure(obj, fault, "")
        return None

    def held_sync_success(*args: Any, **kwargs: Any) -> Any:
        obj = owner()
        if obj is None:
            return None
        current, decision = bound(obj)
        if not decision.event.wait(HOLD_LIMIT):
            return None  # undecided: no success event (fail closed)
        fault = current.quarantined
        if fault is None:
            return sync_success(obj, *args, **kwargs)
        _sanitize(obj, current)
        with contextlib.suppress(Exception):
            sync_failure(obj, fault, "")
        return None

    try:
        logging_obj.async_success_handler = held_async_success
        logging_obj.success_handler = held_sync_success
        setattr(logging_obj, _WRAPPED, True)
    except (AttributeError, TypeError):
        return


__all__ = ["HOLD_LIMIT", "decided", "hold"]
