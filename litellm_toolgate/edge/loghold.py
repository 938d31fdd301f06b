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

HOLD_LIMIT = 300.0
_POLL = 0.01
_HELD = "_toolgate_held_for"  # the attempt the held handlers wait for
_WRAPPED = "_toolgate_held"
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
    try:
        async_success: Any = logging_obj.async_success_handler
        sync_success: Any = logging_obj.success_handler
        async_failure: Any = logging_obj.async_failure_handler
        sync_failure: Any = logging_obj.failure_handler
    except AttributeError:
        return
    if not all(callable(f) for f in (async_success, sync_success, async_failure, sync_failure)):
        return

    def bound() -> tuple[Attempt, threading.Event]:
        current: Attempt = getattr(logging_obj, _HELD)
        return current, _event(current)

    async def held_async_success(*args: Any, **kwargs: Any) -> Any:
        current, event = bound()
        deadline = time.monotonic() + HOLD_LIMIT
        while not event.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(_POLL)
        if not event.is_set():
            return None  # undecided: no success event (fail closed)
        fault = current.quarantined
        if fault is None:
            return await async_success(*args, **kwargs)
        _sanitize(logging_obj, current)
        with contextlib.suppress(Exception):
            await async_failure(fault, "")
        return None

    def held_sync_success(*args: Any, **kwargs: Any) -> Any:
        current, event = bound()
        if not event.wait(HOLD_LIMIT):
            return None  # undecided: no success event (fail closed)
        fault = current.quarantined
        if fault is None:
            return sync_success(*args, **kwargs)
        _sanitize(logging_obj, current)
        with contextlib.suppress(Exception):
            sync_failure(fault, "")
        return None

    try:
        logging_obj.async_success_handler = held_async_success
        logging_obj.success_handler = held_sync_success
        setattr(logging_obj, _WRAPPED, True)
    except (AttributeError, TypeError):
        return


__all__ = ["HOLD_LIMIT", "decided", "hold"]
