"""The gated stream the caller iterates: litellm's chunks, with tool calls withheld.

Text chunks pass through as litellm yields them; tool-call fragments and the finish are
withheld (see :mod:`carrier`; for ``gate.responses()`` the carrier is litellm's Responses
events, withheld per function-call item by :mod:`events`). When litellm's stream ends
the gate reads the wire to its end, concludes the attempt, runs the policy, and only then
yields one chunk holding every released call (arguments exactly as on the wire) followed by
the held chunks. Any fault raises :class:`ToolCallQuarantined` instead; nothing withheld is
ever yielded after that. The quarantine is raised through :func:`raise_clean`, outside
every ``except`` block and from a frame holding nothing but the stream, which by then has
let go of litellm's stream and of every withheld chunk: litellm's own error (which may quote
the body) is not chained to it, and no traceback frame holds argument text.

:class:`GatedStream` and :class:`AsyncGatedStream` are thin loops around :class:`_Base`,
which owns every decision: what is ready to hand out (:meth:`_Base._ready`), what a chunk
from litellm becomes (:meth:`_Base._take`) and what an ended stream concludes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any, NoReturn, Protocol

from ..core.attempt import Attempt, Carrier
from ..core.errors import QuarantineReason, ToolCallQuarantined, raise_clean
from ..core.policy import Policy, ReleasedCall, ToolCall
from .carrier import CarrierChunks
from .logs import emit_records
from .offload import decide_off_loop
from .policy import ajudge, judge
from .transport import WireTap

R = QuarantineReason


class CarrierAdapter(Protocol):
    """What a gated stream needs from its carrier: admit, assemble, release."""

    def admit(self, item: Any) -> Any | None: ...

    def carrier(self) -> Carrier: ...

    def release(self, released: list[ReleasedCall]) -> list[Any]: ...


class _Dropped:
    """The carrier of a quarantined stream: it holds nothing and takes nothing."""

    def admit(self, item: Any) -> Any | None:
        return None

    def carrier(self) -> Carrier:
        return Carrier({}, None)

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        return []


_MORE = object()  # nothing is ready: read the next chunk from litellm
_END = object()  # the stream is over
_FAULT = object()  # the attempt is quarantined: raise it


class _Base:
    def __init__(
        self, tap: WireTap, policy: Policy | None, carrier: CarrierAdapter | None = None
    ) -> None:
        self.tap = tap
        self.attempt: Attempt = tap.attempt
        self._policy = policy
        self._chunks: CarrierAdapter = carrier or CarrierChunks()
        self._out: deque[Any] = deque()
        self._done = False
        self._logged = False

    def _log(self) -> None:
        if not self._logged:
            self._logged = True
            emit_records(self.attempt)

    def _ready(self) -> Any:
        """A chunk to hand out, or ``_FAULT``, ``_END`` or ``_MORE``."""
        if self._out:
            return self._out.popleft()
        if self.attempt.quarantined is not None:
            self._drop()
            return _FAULT
        return _END if self._done else _MORE

    def _take(self, chunk: Any) -> Any:
        """What one chunk from litellm becomes: a chunk to hand out, or ``_MORE``."""
        admitted = self._chunks.admit(chunk)
        if self.attempt.quarantined is not None:
            return _FAULT
        return _MORE if admitted is None else admitted

    def _drop(self) -> None:
        """Quarantined: nothing withheld is kept, and litellm's stream is let go."""
        self._done = True
        self._out.clear()
        self._chunks = _Dropped()
        self._forget_wrapper()
        self._log()

    def _forget_wrapper(self) -> None:
        raise NotImplementedError

    def _raise(self) -> NoReturn:
        fault = self.attempt.quarantined
        assert fault is not None
        self._drop()
        raise_clean(fault)

    def _litellm_failed(self) -> None:
        if self.attempt.quarantined is None:
            # litellm gave up on a stream the wire did not fault: they disagree.
            self.attempt.interrupt(R.CARRIER_MISMATCH)

    def _conclude(self) -> list[ToolCall] | None:
        """Conclude the attempt; None when it was quarantined."""
        try:
            return self.attempt.conclude(self._chunks.carrier())
        except ToolCallQuarantined:
            return None

    def _release(self) -> None:
        released = self.attempt.release()
        self._out.extend(self._chunks.release(released))
        self._done = True
        self._log()

    def _cancel(self) -> None:
        if not self._done:
            self.attempt.interrupt(R.CANCELLED)
            self._drop()

    @property
    def attempt_id(self) -> str:
        return self.attempt.attempt_id


class GatedStream(_Base):
    """Sync iterator over litellm's chunks with every tool call gated."""

    def __init__(
        self,
        wrapper: Any,
        tap: WireTap,
        policy: Policy | None,
        carrier: CarrierAdapter | None = None,
    ) -> None:
        super().__init__(tap, policy, carrier)
        self._it: Iterator[Any] = iter(wrapper)

    def __iter__(self) -> GatedStream:
        return self

    def __next__(self) -> Any:
        item = self._advance()
        if item is _FAULT:
            self._raise()
        return item

    def _advance(self) -> Any:
        while True:
            item = self._ready()
            if item is _END:
                raise StopIteration
            if item is _MORE:
                item = self._pull()
            if item is not _MORE:
                return item

    def _pull(self) -> Any:
        failed = False
        try:
            chunk = next(self._it)
        except StopIteration:
            self._finish()
            return _MORE
        except Exception:
            failed = True
        if failed:
            self._litellm_failed()
            self._finish()
            return _MORE
        return self._take(chunk)

    def _forget_wrapper(self) -> None:
        self._it = iter(())

    def _finish(self) -> None:
        self._close_wire()
        calls = self._conclude()
        if calls is not None and judge(self.attempt, calls, self._policy):
            self._release()
        self._done = True

    def _close_wire(self) -> None:
        if self.tap.close_sync is not None:
            self.tap.close_sync()

    def close(self) -> None:
        """Stop reading: nothing withheld is released, the record says cancelled."""
        self._cancel()
        self._close_wire()

    def __enter__(self) -> GatedStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncGatedStream(_Base):
    """Async twin of :class:`GatedStream`: the same loop, awaiting where it reads."""

    def __init__(
        self,
        wrapper: Any,
        tap: WireTap,
        policy: Policy | None,
        carrier: CarrierAdapter | None = None,
    ) -> None:
        super().__init__(tap, policy, carrier)
        self._it: AsyncIterator[Any] = wrapper.__aiter__()

    def __aiter__(self) -> AsyncGatedStream:
        return self

    async def __anext__(self) -> Any:
        cancelled = False
        try:
            item = await self._advance()
        except asyncio.CancelledError:
            cancelled = True
        # Cancelled while reading or while the policy ran: nothing withheld goes out.
        if cancelled:
            self._cancel()
            await self._aclose_wire()
            raise asyncio.CancelledError
        if item is _FAULT:
            self._raise()
        return item

    async def _advance(self) -> Any:
        while True:
            item = self._ready()
            if item is _END:
                raise StopAsyncIteration
            if item is _MORE:
                item = await self._pull()
            if item is not _MORE:
                return item

    async def _pull(self) -> Any:
        failed = False
        try:
            chunk = await self._it.__anext__()
        except StopAsyncIteration:
            await self._finish()
            return _MORE
        except Exception:
            failed = True
        if failed:
            self._litellm_failed()
            await self._finish()
            return _MORE
        return self._take(chunk)

    def _forget_wrapper(self) -> None:
        self._it = _EmptyAsync()

    async def _finish(self) -> None:
        await self._aclose_wire()
        calls = await decide_off_loop(self.attempt, self._conclude)
        if calls is not None and await ajudge(self.attempt, calls, self._policy):
            self._release()
        self._done = True

    async def _aclose_wire(self) -> None:
        if self.tap.close_async is not None:
            await self.tap.close_async()

    async def aclose(self) -> None:
        """Stop reading: nothing withheld is released, the record says cancelled."""
        self._cancel()
        await self._aclose_wire()

    async def __aenter__(self) -> AsyncGatedStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _EmptyAsync:
    def __aiter__(self) -> _EmptyAsync:
        return self

    async def __anext__(self) -> Any:
        raise StopAsyncIteration
