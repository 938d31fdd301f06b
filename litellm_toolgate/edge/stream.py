"""The gated stream the caller iterates: litellm's chunks, with tool calls withheld.

Text chunks pass through as litellm yields them; tool-call fragments and the finish are
withheld (see :mod:`.carriers.chat`; for ``gate.responses()`` the carrier is litellm's Responses
events, withheld per function-call item by :mod:`.carriers.responses`). When litellm's stream ends
the gate reads the wire to its end, concludes the attempt, runs the policy, and only then
yields one chunk holding every released call (arguments exactly as on the wire) followed by
the held chunks. Any fault raises :class:`ToolCallQuarantined` instead; nothing withheld is
ever yielded after that. The quarantine is raised through :func:`raise_clean`, outside
every ``except`` block and from a frame holding nothing but the stream, which by then has
let go of litellm's stream and of every withheld chunk: litellm's own error (which may quote
the body) is not chained to it, and no traceback frame holds argument text.

:class:`GatedStream` and :class:`AsyncGatedStream` are thin loops around the core's
:class:`~..core.gated.GatedItems`, which owns every decision: what is ready to hand out, what
a chunk from litellm becomes and what an ended stream concludes. They add what is litellm's
and I/O: reading its stream, closing the wire, running the policy (awaited, and off the
loop by the one offload rule, in the async face).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any, NoReturn

from ..core.decision.attempt import Attempt
from ..core.decision.gated import END, FAULT, MORE, CarrierAdapter, GatedItems
from ..core.errors import raise_clean
from ..core.rules.policy import Policy, ReleasedCall
from .carriers.chat import chat_carrier
from .guardrail import loghold
from .judge import ajudge, judge
from .logs import emit_records
from .offload import decide_off_loop
from .transport import WireTap


def _emit_and_release(attempt: Attempt) -> None:
    """The decision's records, then litellm's held success loggers let go."""
    emit_records(attempt)
    loghold.decided(attempt)


class _Base:
    """What the sync and async streams share: the tap and the core's gated items."""

    def __init__(
        self,
        tap: WireTap,
        policy: Policy | None,
        carrier: CarrierAdapter | None = None,
        wrapper: Any = None,
    ) -> None:
        self.tap = tap
        self.attempt: Attempt = tap.attempt
        self._policy = policy
        # litellm hands its success loggers (OpenTelemetry, Langfuse, ...) the answer it
        # assembled, arguments included, as soon as its own stream ends: before the gate
        # decided. For chat streams (litellm logs on a thread or task of its own) they wait
        # for the decision; a refusal reaches them as a failure with the sanitized record
        # (guardrail/loghold.py). litellm's Responses and Messages iterators run their
        # loggers inline, on the reader's own thread or task, before the last event reaches
        # the gate: ToolGate held those inline as the request was prepared (their handlers
        # are deferred to the decision, gate.py), and the guardrail's streams are held by
        # the guardrail; the decision lets them go.
        held = getattr(wrapper, "logging_obj", None) if carrier is None else None
        loghold.hold(held, tap.attempt)
        # Neither the logging object (it holds litellm's copy of the answer and its error
        # text) nor this stream (a cycle through the gated items) is kept by what is called
        # on the decision: both go when the caller lets go, without the garbage collector.
        decided = _emit_and_release
        # A chat stream's carrier: the request (sent by now) said how many choices it asked.
        chat = carrier or chat_carrier(tap.attempt.choices)
        self._gated = GatedItems(tap.attempt, chat, decided)

    def _forget_wrapper(self) -> None:
        raise NotImplementedError

    def _raise(self) -> NoReturn:
        # Nothing withheld is kept, and litellm's stream is let go, before the raise.
        fault = self._gated.drop()
        self._forget_wrapper()
        assert fault is not None
        raise_clean(fault)

    def _cancel(self) -> None:
        if self._gated.cancel():
            self._forget_wrapper()

    @property
    def attempt_id(self) -> str:
        return self.attempt.attempt_id

    @property
    def released(self) -> list[ReleasedCall]:
        """The calls this stream released, once it ended approved (else empty): the same
        ids, names and argument text the released items carry, with the validated values."""
        return list(self._gated.released)


class GatedStream(_Base):
    """Sync iterator over litellm's chunks with every tool call gated."""

    def __init__(
        self,
        wrapper: Any,
        tap: WireTap,
        policy: Policy | None,
        carrier: CarrierAdapter | None = None,
    ) -> None:
        super().__init__(tap, policy, carrier, wrapper)
        self._it: Iterator[Any] = iter(wrapper)

    def __iter__(self) -> GatedStream:
        return self

    def __next__(self) -> Any:
        item = self._advance()
        if item is FAULT:
            self._raise()
        return item

    def _advance(self) -> Any:
        while True:
            item = self._gated.ready()
            if item is END:
                raise StopIteration
            if item is MORE:
                item = self._pull()
            if item is not MORE:
                return item

    def _pull(self) -> Any:
        failed = False
        try:
            chunk = next(self._it)
        except StopIteration:
            self._finish()
            return MORE
        except Exception:
            failed = True
        if failed:
            self._gated.carrier_failed()
            self._finish()
            return MORE
        return self._gated.take(chunk)

    def _forget_wrapper(self) -> None:
        self._it = iter(())

    def _finish(self) -> None:
        self._close_wire()
        calls = self._gated.conclude()
        self._gated.decide(calls is not None and judge(self.attempt, calls, self._policy))

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
        super().__init__(tap, policy, carrier, wrapper)
        self._it: AsyncIterator[Any] = wrapper.__aiter__()

    def __aiter__(self) -> AsyncGatedStream:
        return self

    async def __anext__(self) -> Any:
        # One coroutine per item, the reading loop inline: the proxy's iterator hook awaits
        # this once per chunk, and every coroutine layer under it is resumed per chunk.
        gated = self._gated
        cancelled = False
        try:
            while True:
                item = gated.ready()
                if item is END:
                    raise StopAsyncIteration
                if item is not MORE:
                    break
                ended = failed = False
                try:
                    chunk = await self._it.__anext__()
                except StopAsyncIteration:
                    ended = True
                except Exception:
                    failed = True
                if ended or failed:
                    # Outside the except blocks: litellm's error is no context of what follows.
                    if failed:
                        gated.carrier_failed()
                    await self._finish()
                    continue
                item = gated.take(chunk)
                chunk = None  # this frame is in a quarantine's traceback: no chunk in it
                if item is not MORE:
                    break
        except asyncio.CancelledError:
            cancelled = True
        # Cancelled while reading or while the policy ran: nothing withheld goes out.
        if cancelled:
            self._cancel()
            await self._aclose_wire()
            raise asyncio.CancelledError
        if item is FAULT:
            self._raise()
        return item

    def _forget_wrapper(self) -> None:
        self._it = _EmptyAsync()

    async def _finish(self) -> None:
        await self._aclose_wire()
        calls = await decide_off_loop(self.attempt, self._gated.conclude)
        self._gated.decide(calls is not None and await ajudge(self.attempt, calls, self._policy))

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
