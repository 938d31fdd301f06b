"""Waiting for an approver: a sync one on a daemon thread, an async one under a deadline.

The answer markers are sentinels the approval policy settles: ``NO_ANSWER`` (nobody answered
in time: expired) and ``FAILED`` (the approver raised; its exception is dropped here, since
it may quote the arguments).
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

NO_ANSWER = object()
FAILED = object()


def loop_running() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def is_async(ask: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(ask) or inspect.iscoroutinefunction(
        getattr(ask, "__call__", None)  # noqa: B004 (an object whose __call__ is async)
    )


async def awaited(answer: object) -> object:
    if inspect.isawaitable(answer):
        return await answer
    return answer


def wait_in_thread(ask: Callable[..., Any], request: object, timeout: float) -> object:
    """Run a sync ``ask`` on a daemon thread; ``NO_ANSWER`` if it is not back in time."""
    box: list[object] = []
    done = threading.Event()

    def run() -> None:
        try:
            answer = ask(request)
            if inspect.isawaitable(answer):
                answer = asyncio.run(awaited(answer))
            box.append(answer)
        except BaseException:
            box.append(FAILED)  # may quote the arguments: dropped
        finally:
            done.set()

    threading.Thread(target=run, name="toolgate-approval", daemon=True).start()
    if not done.wait(timeout):
        return NO_ANSWER
    return box[0] if box else FAILED
