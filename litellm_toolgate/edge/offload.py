"""Running a large decision off the event loop.

Concluding an attempt parses every withheld call and checks it against its schema. For a
few kilobytes that is tens of microseconds; for a call of megabytes it is milliseconds,
and on an event loop every other stream of that worker would wait for it. So an async
caller runs the decision on a worker thread once the withheld arguments pass
:data:`OFF_LOOP_BYTES`, and awaits it.

The worker cannot be interrupted. If the awaiting task is cancelled meanwhile, the
cancellation waits for the worker to finish before it propagates, so nothing else touches
the attempt while the worker does (the attempt is not thread-safe, and need not be).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
from collections.abc import Callable
from typing import TypeVar

from ..core.attempt import ChatAttempt

T = TypeVar("T")

OFF_LOOP_BYTES = 16 * 1024
"""Withheld argument bytes above which an async decision runs on a worker thread."""


@functools.cache
def _executor() -> concurrent.futures.ThreadPoolExecutor:
    # Threads start on first use only; two suffice, decisions are short and few.
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=2, thread_name_prefix="toolgate-decision"
    )


async def decide_off_loop(attempt: ChatAttempt, decide: Callable[[], T]) -> T:
    """``decide()``, on a worker thread when the attempt withholds enough to matter."""
    if attempt.argument_bytes <= OFF_LOOP_BYTES:
        return decide()
    job = _executor().submit(decide)
    cancelled = False
    try:
        return await asyncio.wrap_future(job)
    except asyncio.CancelledError:
        cancelled = True
    if cancelled:
        # A job that had not started is cancelled with the wrapper; a running one is
        # waited for, so the attempt is left alone until it is done.
        concurrent.futures.wait([job])
    raise asyncio.CancelledError
