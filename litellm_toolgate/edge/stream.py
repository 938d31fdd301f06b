"""The gated stream the caller iterates: litellm's chunks, with tool calls withheld.

Text chunks pass through as litellm yields them; tool-call fragments and the finish are
withheld (see :mod:`carrier`; for ``gate.responses()`` the carrier is litellm's Responses
events, withheld per function-call item by :mod:`events`). When litellm's stream ends
the gate reads the wire to its end, concludes the attempt, runs the policy, and only then
yields one chunk holding every released call (arguments exactly as on the wire) followed by
the held chunks. Any fault raises :class:`ToolCallQuarantined` instead; nothing withheld is
ever yielded after that, and the raise happens outside every ``except`` block so litellm's
own error (which may quote the body) is not chained to it.

:class:`GatedStream` and :class:`AsyncGatedStream` are twins around :class:`_Base`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Iterator
from typing import Any, Protocol

from ..core.attempt import Carrier, ChatAttempt
from ..core.errors import QuarantineReason, ToolCallQuarantined
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


class _Base:
    def __init__(
        self, tap: WireTap, policy: Policy | None, carrier: CarrierAdapter | None = None
    ) -> None:
        self.tap = tap
        self.attempt: ChatAttempt = tap.attempt
        self._policy = policy
        self._chunks: CarrierAdapter = carrier or CarrierChunks()
        self._out: deque[Any] = deque()
        self._done = False
        self._logged = False

    def _log(self) -> None:
        if not self._logged:
            self._logged = True
            emit_records(self.attempt)

    def _fault(self) -> ToolCallQuarantined | None:
        fault = self.attempt.quarantined
        if fault is not None:
            self._done = True
            self._out.clear()
            self._log()
        return fault

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
            self._done = True
            self._out.clear()
            self._log()

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
        while True:
            if self._out:
                return self._out.popleft()
            fault = self._fault()
            if fault is not None:
                raise fault
            if self._done:
                raise StopIteration
            chunk, ended = self._pull()
            if ended:
                self._finish()
            elif chunk is not None:
                admitted = self._chunks.admit(chunk)
                fault = self._fault()
                if fault is not None:
                    raise fault
                if admitted is not None:
                    return admitted

    def _pull(self) -> tuple[Any, bool]:
        litellm_failed = False
        try:
            return next(self._it), False
        except StopIteration:
            return None, True
        except Exception:
            litellm_failed = True
        if litellm_failed and self.attempt.quarantined is None:
            # litellm gave up on a stream the wire did not fault: they disagree.
            self.attempt.interrupt(R.CARRIER_MISMATCH)
        return None, True

    def _finish(self) -> None:
        self._close_wire()
        calls = self._conclude()
        if calls is not None and judge(self.attempt, calls, self._policy):
            self._release()

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
    """Async twin of :class:`GatedStream`."""

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
            return await self._step()
        except asyncio.CancelledError:
            cancelled = True
        # Cancelled while reading or while the policy ran: nothing withheld goes out.
        if cancelled:
            self._cancel()
            await self._aclose_wire()
        raise asyncio.CancelledError

    async def _step(self) -> Any:
        while True:
            if self._out:
                return self._out.popleft()
            fault = self._fault()
            if fault is not None:
                raise fault
            if self._done:
                raise StopAsyncIteration
            chunk, ended = await self._pull()
            if ended:
                await self._finish()
            elif chunk is not None:
                admitted = self._chunks.admit(chunk)
                fault = self._fault()
                if fault is not None:
                    raise fault
                if admitted is not None:
                    return admitted

    async def _pull(self) -> tuple[Any, bool]:
        litellm_failed = False
        try:
            return await self._it.__anext__(), False
        except StopAsyncIteration:
            return None, True
        except Exception:
            litellm_failed = True
        if litellm_failed and self.attempt.quarantined is None:
            self.attempt.interrupt(R.CARRIER_MISMATCH)
        return None, True

    async def _finish(self) -> None:
        await self._aclose_wire()
        calls = await decide_off_loop(self.attempt, self._conclude)
        if calls is not None and await ajudge(self.attempt, calls, self._policy):
            self._release()

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
