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

litellm's Responses and Anthropic-messages stream iterators log inline instead: on the
reader's own thread (a private event loop for the async handlers) or in a task the iterator
awaits before its stream ends, that is before the last event reaches the gate. Held there
(``hold(..., inline=True)``), a success handler called before the decision does not wait (the
decision could not come): the call is kept, with its arguments, and made once the gate decided
(:func:`decided`), as a held handler would have made it then: released, litellm's own;
refused, the failure handler with the sanitized record; undecided (the stream dropped or
settled undecided), never. An async handler runs as a task on the loop that called it while
that loop runs, else on a thread of its own; a sync one on a thread of its own.
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

    def gone(self) -> bool:
        """Undecided, and its attempt let go of: nothing can decide it any more."""
        return self.attempt() is None and not self.event.is_set()


class _Inline:
    """The decision an object held inline (``hold(..., inline=True)``) waits for."""

    __slots__ = ("decision",)

    def __init__(self, decision: _Decision) -> None:
        self.decision = decision


class _Deferred:
    """One success handler an inline iterator called before the decision, kept to be made
    once it is made: the loop it was called on (async), the object and litellm's handler."""

    __slots__ = ("args", "asynchronous", "kwargs", "loop", "obj", "own")

    def __init__(self, asynchronous: bool, obj: Any, own: Any, args: Any, kwargs: Any) -> None:
        self.asynchronous, self.obj, self.own, self.args, self.kwargs = (
            asynchronous,
            obj,
            own,
            args,
            kwargs,
        )
        self.loop: asyncio.AbstractEventLoop | None = None
        if asynchronous:
            with contextlib.suppress(RuntimeError):
                self.loop = asyncio.get_running_loop()


_decisions: weakref.WeakKeyDictionary[Attempt, _Decision] = weakref.WeakKeyDictionary()
# Inline handlers called before their attempt's decision, made once it is made. Kept by the
# attempt (each holds its logging object, which holds the decision): they go with an
# attempt let go of undecided, with no cycle through the object.
_deferred: weakref.WeakKeyDictionary[Attempt, list[_Deferred]] = weakref.WeakKeyDictionary()
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
        deferred = _deferred.pop(attempt, [])
    for loop, future in waiters:
        with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits there
            loop.call_soon_threadsafe(_wake, future)
    if decision.dropped:
        return  # undecided: the deferred handlers are never made
    for call in deferred:
        _make(call)


_tasks: set[asyncio.Task[Any]] = set()  # deferred handlers running as tasks, kept till done


def _make(call: _Deferred) -> None:
    """Make a deferred handler call, the decision made: as the held handler would."""
    if not call.asynchronous:
        runner: Any = functools.partial(_held_sync_success, call.obj, call.own)
    else:
        if call.loop is not None and call.loop.is_running():
            try:
                call.loop.call_soon_threadsafe(_spawn, call)
                return
            except RuntimeError:  # closed meanwhile: on a thread of its own, as below
                pass
        runner = functools.partial(_run_async, call.obj, call.own)
    threading.Thread(
        target=runner, args=call.args, kwargs=call.kwargs, name="toolgate-log", daemon=True
    ).start()


def _run_async(obj: Any, own: Any, *args: Any, **kwargs: Any) -> None:
    asyncio.run(_held_async_success(obj, own, *args, **kwargs))


def _spawn(call: _Deferred) -> None:
    assert call.loop is not None
    task = call.loop.create_task(_held_async_success(call.obj, call.own, *call.args, **call.kwargs))
    _tasks.add(task)
    task.add_done_callback(_tasks.discard)


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


def hold(logging_obj: Any, attempt: Attempt, *, inline: bool = False) -> None:
    """Hold ``logging_obj``'s success handlers until ``attempt`` is decided (see the module
    docstring; ``inline``: for an iterator that logs on the reader's own path, handlers
    called before the decision are deferred, not waited for). A later call (a retried
    request on the same logging object) binds them to its own attempt, the one the loggers
    then hear of. Does nothing for an object that is not litellm's logging object.

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
        decision = _decision(attempt)
        setattr(logging_obj, _HELD, _Inline(decision) if inline else decision)
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
        if isinstance(current, _Inline):
            decision = current.decision
            if decision.gone():  # the stream went undecided: no event
                return _nothing_async if self.asynchronous else _nothing
            if not decision.event.is_set():
                return functools.partial(_defer, decision, self.asynchronous, obj, self.own)
        elif not isinstance(current, _Decision):
            return self.own.__get__(obj, owner)
        if self.asynchronous:
            return functools.partial(_held_async_success, obj, self.own)
        return functools.partial(_held_sync_success, obj, self.own)


def _nothing(*args: Any, **kwargs: Any) -> None:
    return None


async def _nothing_async(*args: Any, **kwargs: Any) -> None:
    return None


def _defer(
    decision: _Decision, asynchronous: bool, obj: Any, own: Any, *args: Any, **kwargs: Any
) -> Any:
    """An inline handler called before the decision: kept for :func:`decided` to make (an
    async one answers at once with a coroutine that does nothing)."""
    call = _Deferred(asynchronous, obj, own, args, kwargs)
    attempt = decision.attempt()
    with _lock:
        if attempt is None and not decision.event.is_set():
            return _nothing_async() if asynchronous else None  # gone undecided: no event
        if attempt is not None and not decision.event.is_set():
            _deferred.setdefault(attempt, []).append(call)
            return _nothing_async() if asynchronous else None
    # Decided meanwhile: made now, as a held handler would be.
    if asynchronous:
        return _held_async_success(obj, own, *args, **kwargs)
    return _held_sync_success(obj, own, *args, **kwargs)


def _decision_of(obj: Any) -> _Decision:
    current = vars(obj)[_HELD]
    return current.decision if isinstance(current, _Inline) else current


async def _held_async_success(obj: Any, success: Any, *args: Any, **kwargs: Any) -> Any:
    decision = _decision_of(obj)
    if decision.gone():
        return None  # undecided, and nothing can decide it any more: no success event
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
    decision = _decision_of(obj)
    if decision.gone():
        return None  # undecided, and nothing can decide it any more: no success event
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
