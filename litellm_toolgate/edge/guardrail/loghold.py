"""litellm's success logging held until the gate decided, and a refusal logged as one.

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

The same hold serves ``ToolGate``'s chat streams and its whole answers, which litellm logs
before it hands them to the wrapper; :func:`settle` ends a whole call's hold however the call
ended (undecided: no success event).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import threading
import weakref
from typing import Any

from ...core.decision.attempt import Attempt
from ...core.errors import ToolCallQuarantined

HOLD_LIMIT = 300.0
_HELD = "_toolgate_held_for"  # the decision (of an attempt) the held handlers wait for
# Where litellm's logging object keeps the answer it assembled (or read) for its loggers.
_ANSWER_KEYS = ("complete_streaming_response", "async_complete_streaming_response", "response")


class _Decision:
    """Whether an attempt was decided, and the held async handlers waiting for it (each a
    future on its own event loop, woken from whichever thread decides).

    It is what the logging object holds, not the attempt: litellm keeps its logging object
    in reference cycles of its own after a stream ended, and an attempt held there would
    keep the stream's reading state until the next collection. So the decision keeps the
    attempt weakly, and what its held handlers need of it once decided (its quarantine and
    the sanitized record of a refusal) is taken at each decision."""

    __slots__ = ("attempt", "dropped", "event", "fault", "record", "waiters")

    def __init__(self, attempt: Attempt) -> None:
        self.attempt = weakref.ref(attempt)
        self.event = threading.Event()
        self.waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        # Ended without a decision (the call failed after litellm answered): no event.
        self.dropped = False
        self.fault: ToolCallQuarantined | None = None
        self.record: str | None = None

    def take(self, attempt: Attempt) -> None:
        """Keep what the held handlers need of ``attempt``, now decided."""
        self.fault = attempt.quarantined
        if self.fault is not None:
            self.record = json.dumps(attempt.summary(), separators=(",", ":"), default=str)

    def outcome(self) -> tuple[ToolCallQuarantined | None, str | None]:
        """The quarantine and the refusal's record: the attempt's own while it lives."""
        attempt = self.attempt()
        if attempt is None:
            return self.fault, self.record
        fault = attempt.quarantined
        if fault is None:
            return None, None
        return fault, json.dumps(attempt.summary(), separators=(",", ":"), default=str)


_decisions: weakref.WeakKeyDictionary[Attempt, _Decision] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _decision(attempt: Attempt) -> _Decision:
    with _lock:
        found = _decisions.get(attempt)
        if found is None:
            found = _decisions[attempt] = _Decision(attempt)
        return found


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def decided(attempt: Attempt) -> None:
    """The gate decided ``attempt`` (released or quarantined): held logging may go on."""
    decision = _decision(attempt)
    decision.take(attempt)
    with _lock:
        decision.event.set()
        waiters, decision.waiters = decision.waiters, []
    for loop, future in waiters:
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there
            loop.call_soon_threadsafe(_wake, future)


def settle(attempt: Attempt) -> None:
    """The call of ``attempt`` is over: its held logging goes on as decided, and if it ended
    undecided (something failed after litellm answered), with no success event at all."""
    if not attempt.decided:
        _decision(attempt).dropped = True
    decided(attempt)


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


def _sanitize(logging_obj: Any, record: str | None) -> None:
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    details["original_response"] = record
    for key in _ANSWER_KEYS:
        details.pop(key, None)


_SUCCESS = ("async_success_handler", "success_handler")  # held
_HANDLERS = (*_SUCCESS, "async_failure_handler", "failure_handler")  # all a held object needs


def hold(logging_obj: Any, attempt: Attempt) -> None:
    """Hold ``logging_obj``'s success handlers until ``attempt`` is decided (see the module
    docstring). A later call (a retried request on the same logging object) binds them to
    its own attempt, the one the loggers then hear of. Does nothing for an object that is
    not litellm's logging object.

    The handlers are held on the object's class, once (:class:`_Held`): looked up on a held
    object, a success handler is a function over that object that waits for the decision.
    Nothing is stored on the object but the attempt's decision (:class:`_Decision`, which
    keeps the attempt weakly), so it holds no function that holds it back (a cycle would
    keep litellm's copy of the answer until the garbage collector ran), nor the attempt,
    and whatever litellm queued the handler in (a logging thread's queue, a task) keeps the
    object, as a bound method would, until the handler ran: a whole answer's object has no
    other owner by then."""
    if logging_obj is None:
        return
    kind = type(logging_obj)
    if not all(callable(getattr(kind, name, None)) for name in _HANDLERS):
        return
    try:
        setattr(logging_obj, _HELD, _decision(attempt))
    except (AttributeError, TypeError):
        return
    for name in _SUCCESS:
        if not isinstance(vars(kind).get(name), _Held):
            try:
                setattr(kind, name, _Held(getattr(kind, name), name))
            except (AttributeError, TypeError):  # pragma: no cover - a class that refuses
                return


class _Held:
    """One success handler of litellm's logging class, held for the objects the gate holds
    (:data:`_HELD` set on the object): else the class's own, bound as always."""

    def __init__(self, own: Any, name: str) -> None:
        self.own = own
        self.asynchronous = name.startswith("async")

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.own
        current = vars(obj).get(_HELD) if hasattr(obj, "__dict__") else None
        if not isinstance(current, _Decision):
            return self.own.__get__(obj, owner)
        if self.asynchronous:
            return functools.partial(_held_async_success, obj, self.own)
        return functools.partial(_held_sync_success, obj, self.own)


async def _held_async_success(obj: Any, success: Any, *args: Any, **kwargs: Any) -> Any:
    decision: _Decision = vars(obj)[_HELD]
    if not await _decided_in_time(decision) or decision.dropped:
        return None  # undecided: no success event (fail closed)
    fault, record = decision.outcome()
    if fault is None:
        return await success(obj, *args, **kwargs)
    _sanitize(obj, record)
    with contextlib.suppress(Exception):
        await type(obj).async_failure_handler(obj, fault, "")
    return None


def _held_sync_success(obj: Any, success: Any, *args: Any, **kwargs: Any) -> Any:
    decision: _Decision = vars(obj)[_HELD]
    if not decision.event.wait(HOLD_LIMIT) or decision.dropped:
        return None  # undecided: no success event (fail closed)
    fault, record = decision.outcome()
    if fault is None:
        return success(obj, *args, **kwargs)
    _sanitize(obj, record)
    with contextlib.suppress(Exception):
        type(obj).failure_handler(obj, fault, "")
    return None


__all__ = ["HOLD_LIMIT", "decided", "hold", "settle"]
