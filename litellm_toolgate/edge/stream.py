"""The gated stream the caller iterates: litellm's chunks, with tool calls withheld.

Text chunks pass through as litellm yields them. Every tool-call fragment is taken out of
its chunk (and kept only to cross-check litellm's assembly against the wire); the chunk
that carries the finish reason, and anything after it, is held. When litellm's stream ends
the gate reads the wire to its end, concludes the attempt, runs the policy, and only then
yields one chunk holding every released call (arguments exactly as on the wire) followed by
the held chunks. Any fault raises :class:`ToolCallQuarantined` instead; nothing withheld is
ever yielded after that, and the raise happens outside every ``except`` block so litellm's
own error (which may quote the body) is not chained to it.

:class:`GatedStream` and :class:`AsyncGatedStream` are twins around :class:`_Chunks`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

from ..core.attempt import Carrier, CarrierCall, ChatAttempt
from ..core.errors import QuarantineReason, ToolCallQuarantined
from ..core.policy import Policy, PolicyDecision, ReleasedCall, ToolCall, as_decision
from .logs import emit_records
from .transport import WireTap

R = QuarantineReason
_VISIBLE = ("content", "role", "reasoning_content", "thinking_blocks", "audio", "images")


@dataclass
class _Assembled:
    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)


class _Chunks:
    """Withholds tool-call fragments and the finish; builds the release. No I/O."""

    def __init__(self) -> None:
        self.calls: dict[int, _Assembled] = {}
        self.held: list[Any] = []
        self.finish_reason: str | None = None
        self.foreign = False

    def admit(self, chunk: Any) -> Any | None:
        """The chunk to pass on now, or None when it is withheld or held."""
        withheld = False
        choices = getattr(chunk, "choices", None) or []
        if any(getattr(choice, "index", 0) != 0 for choice in choices):
            # Only choice 0 is gated; another choice is withheld whole and fails the check.
            self.foreign = True
            return None
        for choice in choices:
            delta = getattr(choice, "delta", None)
            if delta is not None:
                withheld |= self._strip(delta)
            finish = getattr(choice, "finish_reason", None)
            if finish:
                self.finish_reason = finish if self.finish_reason is None else "<repeated>"
                self.held.append(chunk)
                return None
        if self.held:
            self.held.append(chunk)
            return None
        if (
            withheld
            and not any(getattr(c.delta, f, None) for c in chunk.choices for f in _VISIBLE)
            and not getattr(chunk, "usage", None)
        ):
            return None
        return chunk

    def _strip(self, delta: Any) -> bool:
        stripped = False
        if getattr(delta, "function_call", None) is not None:
            self.foreign = True
            delta.function_call = None
            stripped = True
        for fragment in getattr(delta, "tool_calls", None) or []:
            index = getattr(fragment, "index", None)
            if not isinstance(index, int):
                self.foreign = True
                continue
            call = self.calls.setdefault(index, _Assembled())
            call.call_id = call.call_id or getattr(fragment, "id", None)
            function = getattr(fragment, "function", None)
            name = getattr(function, "name", None)
            call.name = call.name or name
            arguments = getattr(function, "arguments", None)
            if arguments:
                call.fragments.append(arguments)
        if getattr(delta, "tool_calls", None) is not None:
            delta.tool_calls = None
            stripped = True
        return stripped

    def carrier(self) -> Carrier | None:
        if self.foreign:
            return Carrier({-1: CarrierCall(None, None, "")}, self.finish_reason)
        return Carrier(
            {
                i: CarrierCall(c.call_id, c.name, "".join(c.fragments))
                for i, c in self.calls.items()
            },
            self.finish_reason,
        )

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        if not released:
            return list(self.held)
        template = self.held[0]
        chunk = ModelResponseStream(
            id=template.id,
            created=template.created,
            model=template.model,
            choices=[
                StreamingChoices(
                    index=0,
                    finish_reason=None,
                    delta=Delta(
                        content=None,
                        tool_calls=[
                            ChatCompletionDeltaToolCall(
                                id=call.call_id,
                                type="function",
                                index=call.index,
                                function=Function(name=call.name, arguments=call.arguments),
                            )
                            for call in released
                        ],
                    ),
                )
            ],
        )
        return [chunk, *self.held]


PolicyRunner = Callable[[ToolCall], PolicyDecision | None]


def _sync_policy(policy: Policy | None) -> PolicyRunner:
    def run(call: ToolCall) -> PolicyDecision | None:
        if policy is None:
            return PolicyDecision.approve()
        failed = False
        result: object = None
        try:
            result = policy(call)
            if inspect.isawaitable(result):
                result = _run_awaitable(result)
        except Exception:
            failed = True
        return None if failed else as_decision(result)

    return run


def _run_awaitable(awaitable: Awaitable[object]) -> object:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def wait() -> object:
            return await awaitable

        return asyncio.run(wait())
    # An async policy cannot be awaited from sync code running inside an event loop.
    if inspect.iscoroutine(awaitable):
        awaitable.close()
    raise RuntimeError("async policy called from a running event loop; use acompletion")


async def _async_policy(policy: Policy | None, call: ToolCall) -> PolicyDecision | None:
    if policy is None:
        return PolicyDecision.approve()
    failed = False
    result: object = None
    try:
        result = policy(call)
        if inspect.isawaitable(result):
            result = await result
    except Exception:
        failed = True
    return None if failed else as_decision(result)


class _Base:
    def __init__(self, wrapper: Any, tap: WireTap, policy: Policy | None) -> None:
        self.wrapper = wrapper
        self.tap = tap
        self.attempt: ChatAttempt = tap.attempt
        self._policy = policy
        self._chunks = _Chunks()
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

    def _decide(self, call: ToolCall, decision: PolicyDecision | None, elapsed: float) -> bool:
        try:
            self.attempt.decide(call.index, decision, elapsed)
        except ToolCallQuarantined:
            return False
        return True

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

    def __init__(self, wrapper: Any, tap: WireTap, policy: Policy | None) -> None:
        super().__init__(wrapper, tap, policy)
        self._it: Iterator[Any] = iter(wrapper)
        self._run_policy = _sync_policy(policy)

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
        if calls is None:
            return
        for call in calls:
            started = time.monotonic()
            decision = self._run_policy(call)
            if not self._decide(call, decision, time.monotonic() - started):
                return
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

    def __init__(self, wrapper: Any, tap: WireTap, policy: Policy | None) -> None:
        super().__init__(wrapper, tap, policy)
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
        calls = self._conclude()
        if calls is None:
            return
        for call in calls:
            started = time.monotonic()
            decision = await _async_policy(self._policy, call)
            if not self._decide(call, decision, time.monotonic() - started):
                return
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
