"""An async iterator read by a sync caller: each step run on a private event loop thread.

litellm's sync Messages call on a model it bridges to the Responses API (``openai/``) sends
its request sync and then hands back an async iterator of Anthropic SSE bytes (its converter
reads the sync wire on worker threads). No sync caller can read that. The gate's sync
stream (:class:`~.stream.GatedStream`) reads it through :class:`DrivenStream`, which runs
every step on an event loop of its own, in a thread of its own, as litellm runs its own
async helpers from sync code: the caller's thread may itself be running a loop.

The loop and its thread end with the stream: at its end, at its first error, on
:meth:`DrivenStream.close`, or when the stream is let go, from any thread, its own included
(the garbage collector may let it go there). The source gets a bounded time to close
itself; whatever is still running on the loop then is cancelled, and the loop is closed by
its own thread, however it was stopped.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any

# How long closing waits for the source to close itself (litellm's stream closing its
# response, the gate's tap draining what is left of the body within its limits), and then
# for what is left on the loop to finish once cancelled.
_CLOSE_WAIT = 30.0
_CANCEL_WAIT = 5.0


def _run(loop: asyncio.AbstractEventLoop) -> None:
    """The private thread: the loop until it is stopped, then its end, on this thread."""
    try:
        loop.run_forever()
    finally:
        try:
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.wait(pending, timeout=_CANCEL_WAIT))
            loop.run_until_complete(asyncio.wait_for(loop.shutdown_asyncgens(), _CANCEL_WAIT))
        except Exception:  # a clean-up that failed or overran: the loop still ends
            pass
        finally:
            loop.close()


class DrivenStream:
    """A sync iterator over ``source`` (an async iterable), driven on a private loop."""

    def __init__(self, source: Any, *, close_wait: float = _CLOSE_WAIT) -> None:
        self._it: AsyncIterator[Any] = source.__aiter__()
        self._close_wait = close_wait
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=_run, args=(self._loop,), name="toolgate-drive", daemon=True
        )
        self._thread.start()
        self._closed = False

    def __iter__(self) -> DrivenStream:
        return self

    async def _step(self) -> Any:
        return await self._it.__anext__()

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        future = asyncio.run_coroutine_threadsafe(self._step(), self._loop)
        try:
            return future.result()
        except StopAsyncIteration:
            self.close()
            raise StopIteration from None
        except BaseException:
            self.close()
            raise
        finally:
            # The future holds its outcome, an exception whose traceback holds this frame
            # (and the source's frames, and through self the source): not a cycle to wait
            # for the garbage collector on.
            del future

    async def _aclose_then_stop(self) -> None:
        """Close the source, waiting at most ``close_wait`` (one that overruns is left to the
        loop's end, which cancels it), then stop the loop."""
        try:
            closer = getattr(self._it, "aclose", None)
            if closer is not None:
                closing = asyncio.ensure_future(closer())
                await asyncio.wait((closing,), timeout=self._close_wait)
                if closing.done() and not closing.cancelled():
                    closing.exception()  # the source's own clean-up failed: the loop still ends
        finally:
            self._loop.stop()

    def close(self) -> None:
        """Close the source on its loop (waiting at most ``close_wait`` seconds for it), then
        stop the loop; its thread closes it and ends."""
        if self._closed:
            return
        self._closed = True
        if threading.current_thread() is self._thread:
            # Let go from a callback of its own loop (the garbage collector ran there): the
            # source is closed by a task of the loop, which then stops it.
            self._loop.create_task(self._aclose_then_stop())
            return
        asyncio.run_coroutine_threadsafe(self._aclose_then_stop(), self._loop)
        self._thread.join()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


__all__ = ["DrivenStream"]
