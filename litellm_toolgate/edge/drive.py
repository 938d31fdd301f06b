"""An async iterator read by a sync caller: each step run on a private event loop thread.

litellm's sync Messages call on a model it bridges to the Responses API (``openai/``) sends
its request sync and then hands back an async iterator of Anthropic SSE bytes (its converter
reads the sync wire on worker threads). No sync caller can read that. The gate's sync
stream (:class:`~.stream.GatedStream`) reads it through :class:`DrivenStream`, which runs
every step on an event loop of its own, in a thread of its own, as litellm runs its own
async helpers from sync code: the caller's thread may itself be running a loop.

The loop and its thread end with the stream: at its end, at its first error, on
:meth:`DrivenStream.close`, or when the stream is let go.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from typing import Any


class DrivenStream:
    """A sync iterator over ``source`` (an async iterable), driven on a private loop."""

    def __init__(self, source: Any) -> None:
        self._it: AsyncIterator[Any] = source.__aiter__()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="toolgate-drive", daemon=True
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

    async def _aclose(self) -> None:
        closer = getattr(self._it, "aclose", None)
        if closer is not None:
            await closer()

    def close(self) -> None:
        """Close the source on its loop, then stop the loop and its thread."""
        if self._closed:
            return
        self._closed = True
        if threading.current_thread() is self._thread:
            # let go from a callback of its own loop: it can only be told to stop
            self._loop.call_soon_threadsafe(self._loop.stop)
            return
        try:
            asyncio.run_coroutine_threadsafe(self._aclose(), self._loop).result()
        except Exception:  # the source's own clean-up failed: the loop still ends
            pass
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
            self._loop.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            self.close()


__all__ = ["DrivenStream"]
