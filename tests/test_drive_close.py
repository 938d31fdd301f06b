"""How a :class:`~litellm_toolgate.edge.drive.DrivenStream` ends, whoever ends it.

Its source here is a plain async generator (the gate's own paths through it, over litellm,
are ``tests/test_drive_leaks.py``): the ways its ending can go wrong are the source's, not
litellm's. Closed from the caller's thread, closing waits a bounded time for the source to
close itself; let go on its own loop's thread (a collection that ran there), the source is
closed all the same; either way the loop is closed and its thread ends.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from litellm_toolgate.edge.drive import DrivenStream


class Source:
    """An async generator of three items that notes how its closing went."""

    def __init__(self, *, closing: str = "quick") -> None:
        self.closing = closing  # quick, hangs, deaf (ignores one cancel), fails
        self.closed = threading.Event()
        self.cancelled = threading.Event()

    async def items(self) -> AsyncIterator[int]:
        try:
            for n in range(3):
                yield n
        finally:
            await self._close()

    async def _close(self) -> None:
        try:
            if self.closing in ("hangs", "deaf"):
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    self.cancelled.set()
                    if self.closing == "hangs":
                        raise
                    await asyncio.sleep(0.2)  # deaf: carries on a little after the cancel
            if self.closing == "fails":
                raise RuntimeError("the source's clean-up failed")
        finally:
            self.closed.set()


def _ended(loop: Any, thread: threading.Thread) -> None:
    thread.join(timeout=30)
    assert not thread.is_alive(), "the private loop's thread outlived its stream"
    assert loop.is_closed(), "the private loop was left open"


@pytest.mark.parametrize("closing", ["quick", "fails"])
def test_closing_closes_the_source_and_ends_the_loop(closing: str) -> None:
    source = Source(closing=closing)
    stream = DrivenStream(source.items())
    assert next(stream) == 0
    stream.close()
    assert source.closed.is_set()
    _ended(stream._loop, stream._thread)
    with pytest.raises(StopIteration):  # a read after close
        next(stream)
    stream.close()  # a second close is nothing


@pytest.mark.parametrize("closing", ["hangs", "deaf"])
def test_a_source_that_will_not_close_holds_closing_a_bounded_time(closing: str) -> None:
    source = Source(closing=closing)
    stream = DrivenStream(source.items(), close_wait=0.3)
    assert next(stream) == 0
    started = time.monotonic()
    stream.close()
    took = time.monotonic() - started
    # Bounded by the close wait, then the loop's end cancels what is left (a generous
    # ceiling: the machine may be busy; the unbounded wait this replaces never returned).
    assert took < 20, took
    assert source.cancelled.is_set(), "the overrunning close was never cancelled"
    _ended(stream._loop, stream._thread)


def test_a_stream_read_to_its_end_ends_its_loop() -> None:
    source = Source()
    stream = DrivenStream(source.items())
    assert list(stream) == [0, 1, 2]
    assert source.closed.is_set()
    _ended(stream._loop, stream._thread)


@pytest.mark.parametrize("closing", ["quick", "hangs"])
def test_a_stream_let_go_on_its_own_loop_closes_its_source(closing: str) -> None:
    """The last reference goes on the loop's own thread (as when a collection runs there):
    the source is closed by a task of that loop, which is then closed by its thread."""
    source = Source(closing=closing)
    stream = DrivenStream(source.items(), close_wait=0.3)
    assert next(stream) == 0
    loop, thread = stream._loop, stream._thread
    holder = [stream]
    del stream
    dropped = threading.Event()

    def drop() -> None:
        holder.clear()  # the stream's last reference: let go here, on its loop's thread
        gc.collect()
        dropped.set()

    loop.call_soon_threadsafe(drop)
    assert dropped.wait(30)
    _ended(loop, thread)
    assert source.closed.is_set(), "the source was never closed"
