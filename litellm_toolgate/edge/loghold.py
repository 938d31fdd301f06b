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
import time
import weakref
from typing import Any

from ..core.attempt import Attempt
from ..core.errors import ToolCallQuarantined

HOLD_LIMIT = 300.0
_POLL = 0.01
_HELD = "_toolgate_held"
# Where litellm's logging object keeps the answer it assembled (or read) for its loggers.
_ANSWER_KEYS = ("complete_streaming_response", "async_complete_streaming_response", "response")

_decisions: weakref.WeakKeyDictionary[Attempt, threading.Event] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _event(attempt: Attempt) -> threading.Event:
    with _lock:
        event = _decisions.get(attempt)
        if event is None:
            event = _decisions[attempt] = threading.Event()
        return event


def decided(attempt: Attempt) -> None:
    """The gate decided ``attempt`` (released or quarantined): held logging may go on."""
    _event(attempt).set()


def _refusal(attempt: Attempt, waited: bool) -> ToolCallQuarantined | None:
    """None when the attempt was released; its quarantine otherwise (or, undecided, a
    quarantine of its own: the gate never lets an undecided stream log a success)."""
    if waited and attempt.quarantined is None:
        return None
    fault = attempt.quarantined
    if fault is None:
        with contextlib.suppress(ToolCallQuarantined):
            attempt.conclude()
        fault = attempt.quarantined
    return fault


def _sanitize(logging_obj: Any, attempt: Attempt) -> None:
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    details["original_response"] = json.dumps(attempt.summary(), separators=(",", ":"), default=str)
    for key in _ANSWER_KEYS:
        details.pop(key, None)


def hold(logging_obj: Any, attempt: Attempt) -> None:
    """Hold ``logging_obj``'s success handlers until ``attempt`` is decided (see the module
    docstring). Does nothing for an object that is not litellm's logging object, or one held
    already."""
    if logging_obj is None or getattr(logging_obj, _HELD, False):
        return
    try:
        async_success: Any = logging_obj.async_success_handler
        sync_success: Any = logging_obj.success_handler
        async_failure: Any = logging_obj.async_failure_handler
        sync_failure: Any = logging_obj.failure_handler
    except AttributeError:
        return
    if not all(callable(f) for f in (async_success, sync_success, async_failure, sync_failure)):
        return
    event = _event(attempt)

    async def held_async_success(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + HOLD_LIMIT
        while not event.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(_POLL)
        fault = _refusal(attempt, event.is_set())
        if fault is None:
            return await async_success(*args, **kwargs)
        _sanitize(logging_obj, attempt)
        with contextlib.suppress(Exception):
            await async_failure(fault, "")
        return None

    def held_sync_success(*args: Any, **kwargs: Any) -> Any:
        fault = _refusal(attempt, event.wait(HOLD_LIMIT))
        if fault is None:
            return sync_success(*args, **kwargs)
        _sanitize(logging_obj, attempt)
        with contextlib.suppress(Exception):
            sync_failure(fault, "")
        return None

    try:
        logging_obj.async_success_handler = held_async_success
        logging_obj.success_handler = held_sync_success
        setattr(logging_obj, _HELD, True)
    except (AttributeError, TypeError):
        return


__all__ = ["HOLD_LIMIT", "decided", "hold"]
