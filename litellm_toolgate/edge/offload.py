"""Running a large decision off the event loop: the one rule every async decision follows.

Concluding an attempt parses every withheld call and checks it against its schema. For a
few kilobytes that is tens of microseconds; for a call of megabytes it is milliseconds, and
a schema rejection of such a call can take seconds; on an event loop every other stream of
that worker would wait for it. So every async decision (a gated stream's, a whole
response's, the withholding client's, the callback's) runs through :func:`decide_off_loop`:
on a worker thread once the withheld arguments pass :data:`OFF_LOOP_BYTES`, awaited.

The worker cannot be interrupted. If the awaiting task is cancelled meanwhile, a job that
had not started is dropped; a running one is awaited (without blocking the loop, and through
further cancellations) before the cancellation propagates, so nothing else touches the
attempt while the worker does (the attempt is not thread-safe, and need not be).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
from collections.abc import Callable
from typing import TypeVar

from ..core.decision.attempt import Attempt

T = TypeVar("T")

OFF_LOOP_BYTES = 16 * 1024
"""Withheld argument bytes above which an async decision runs on a worker thread."""


@functools.cache
def _executor() -> concurrent.futures.ThreadPoolExecutor:
    # Threads start on first use only; two suffice, decisions are short and few.
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=2, thread_name_prefix="toolgate-decision"
    )


async def decide_off_loop(attempt: Attempt, decide: Callable[[], T]) -> T:
    """``decide()``, on a worker thread when the attempt withholds enough to matter."""
    if attempt.argument_bytes <= OFF_LOOP_BYTES:
        return decide()
    job = _executor().submit(decide)
    done = asyncio.wrap_future(job)
    cancelled = False
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        cancelled = True
    if cancelled:
        job.cancel()  # drops a job that had not started; a running one goes on
        while not done.done():
            # Wait for the worker on the loop; a second cancellation is the same one.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait([done])
        if not done.cancelled():
            done.exception()  # retrieved: the worker's outcome is dropped with the task
    raise asyncio.CancelledError
