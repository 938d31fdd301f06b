"""``gate.run`` / ``await gate.arun``: the bounded tool loop, journaled.

Each round is one gated stream (``gate.completion`` / ``gate.responses`` and their async
twins, so every route the gate gates is a route the loop runs on): its text goes to
``on_text`` as it arrives; when it ends, the released calls are checked against the run's
bounds and call ids (:mod:`..core.loop`: a round past them raises its typed quarantine and
runs nothing), then each is **decided** in the journal (all of the round's calls first),
**claimed** (the atomic compare-and-set that hands out the fencing token), **run**, and
**finished**; its result goes back to the model with the matching id. A round without calls
ends the run.

Conversation state and resume. The journal never holds argument or result text. The
conversation is the caller's: ``checkpoint(conversation)`` is called with the whole list
after each model turn (the assistant message, or the Responses output items, before any of
its calls is decided) and after each result appended. A run resumed with the same
``run_id`` and the last checkpointed conversation re-derives the turn's calls without a
result (:func:`..core.loop.pending_calls`), matches them to their journal rows by call id
(and argument digest), and applies each tool's ambiguous-row rule to the rows a crash left
decided or started (:mod:`.tools`); a pending turn none of whose calls was journaled is
dropped and asked again (nothing of it ran). A tool that raises gives a ``failed`` row
(its error class only) and the ``tool_error`` text to the model.

One driver per run. Before anything is asked of the model the run's lease is taken in the
journal (:class:`~.state.RunDriver`): a second process resuming the same run id gets
``RunBusy`` (or waits, with ``wait_for_run=seconds``), and every move of this driver
carries the lease, so a driver that stalled past it and was taken over commits nothing
more (``RunLeaseLost``). The run's bounds are counted from the journal's rows: read right
after the lease is taken (a driver that takes a run over goes on with its count), then
each row as this driver's move committed it (:class:`~.state.FencedJournal`: while the
lease is held, no other driver commits a row of the run). A conversation older than the
journal (calls journaled that it never mentions) is refused (``ConversationBehind``), never
asked of the model again.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

from ..core.errors import QuarantineReason, ToolGateError
from ..core.rules.journal import Claim, JournalRow, Outcome, Step
from ..core.rules.loop import result_text
from ..policies.checks import aconfirm_at_start, confirm_at_start
from . import traces
from .state import (
    NOT_APPROVED,
    NOT_AVAILABLE,
    NOT_JOURNALED,
    TOOL_ERROR,
    FencedJournal,
    LoopCall,
    RunDriver,
    RunResult,
    RunState,
    behind,
    kind_of,
    output_items,
    released_calls,
)


# ---- the sync driver ---------------------------------------------------------------------
def run(gate: Any, options: dict[str, Any]) -> RunResult:
    """The loop, sync (see the module's text); ``gate.run(**options)`` calls it. The
    conversation is taken out of ``options`` (no frame keeps it but the run's own)."""
    outcome = _run_sync(gate, options)
    if isinstance(outcome, RunResult):
        return outcome
    _raise_bare(outcome)


def _run_sync(gate: Any, options: dict[str, Any]) -> RunResult | ToolGateError:
    state = RunState(gate, options, asynchronous=False)
    driver = _driver(state)
    try:
        return _Sync(state, driver.acquire(), driver).run()
    except ToolGateError as exc:
        return exc  # raised again by run(), from a frame that holds no conversation
    finally:
        try:
            driver.release()
        finally:
            if state.owns_journal:
                state.journal.close()


def _driver(state: RunState) -> RunDriver:
    return RunDriver(state.journal, state.run_id, state.run_lease_seconds, state.wait_for_run)


def _raise_bare(error: ToolGateError) -> NoReturn:
    """Raise the library's own error with no history (see ``raise_clean``): the frames it
    passed through hold the conversation, whose tool calls carry argument text."""
    error.__traceback__ = None
    error.__cause__ = None
    error.__context__ = None
    error.__suppress_context__ = False
    raise error


def _unsettled_row(s: RunState, call: LoopCall) -> JournalRow | None:
    """The row of a resumed call that its tool's ambiguous rule must settle; None when the
    call is answered without running (no row of its own, or already finished)."""
    row = call.row
    if row is None:
        s.append_result(call.call_id, NOT_JOURNALED)
    elif row.finished:
        s.append_result(call.call_id, NOT_AVAILABLE)
    else:
        return row
    return None


class _Sync:
    def __init__(self, state: RunState, journal: FencedJournal, driver: RunDriver) -> None:
        self.s = state
        self.j = journal
        self.driver = driver

    def run(self) -> RunResult:
        s = self.s
        rows = self.j.rows  # read when the lease was taken
        behind(s.run_id, rows, s.conversation, s.api)
        seen = {r.call_id for r in rows}
        next_round = 0
        if rows:
            with traces.resume(s.run_id, rows):
                calls = s.plan_resume(rows)
                seen.update(c.call_id for c in calls)
                for call in calls:
                    self.resolve(call)
            next_round = max(r.round for r in rows) + 1
        for rounds, round_index in enumerate(range(next_round, s.limits.max_rounds), start=1):
            if s.before_round is not None:
                s.before_round(round_index)
            self.driver.live()
            text, stream, output = self.stream_round()
            calls = released_calls(stream)
            if not calls:
                return RunResult(text, rounds, self.j.rows, list(s.conversation))
            ids = [c.call_id for c in calls]
            # The run's count: the journal's rows (see FencedJournal.rows).
            s.check(round_index, ids, seen, len(self.j.rows), stream)
            seen.update(ids)
            s.append_turn(text, calls, output)
            for call in calls:
                call.row = self.j.decide(s.new_call(call, round_index, stream.attempt_id))
            for call in calls:
                self.execute(call)
        # Only a resumed run whose journal already holds its last round gets here.
        s.refuse(QuarantineReason.TOO_MANY_ROUNDS, f"resume-{s.run_id}")
        raise AssertionError("refused")  # pragma: no cover (refuse raises)

    def stream_round(self) -> tuple[str, Any, list[Any] | None]:
        s = self.s
        text: list[str] = []
        output: list[Any] | None = None
        if s.api == "chat":
            stream = s.gate.completion(**s.round_request())
            for chunk in stream:
                for choice in chunk.choices:
                    piece = choice.delta.content
                    if piece:
                        text.append(piece)
                        if s.on_text is not None:
                            s.on_text(piece)
        else:
            stream = s.gate.responses(**s.round_request())
            for event in stream:
                kind = kind_of(event)
                if kind == "response.output_text.delta":
                    text.append(event.delta)
                    if s.on_text is not None:
                        s.on_text(event.delta)
                elif kind == "response.completed":
                    output = output_items(event.response)
        return "".join(text), stream, output

    def execute(
        self, call: LoopCall, *, retry_expired: bool = False, resumed: bool = False
    ) -> None:
        with traces.tool_run(self.s.run_id, call.name, call.call_id, resumed=resumed) as run:
            self._execute(call, run, retry_expired)

    def _execute(self, call: LoopCall, run: traces.ToolRun, retry_expired: bool) -> None:
        s = self.s
        assert call.row is not None
        run.row(call.row)
        # Between decide and claim: the approval is confirmed against the row (asked again
        # if it no longer holds) and the path scopes resolve the tool's arguments again.
        tool_call = s.tool_call(call)
        arguments = None
        # A resumed row already started takes no new approval columns (the table allows them
        # at decided only): it is confirmed, and asked again, without writing them.
        journal = self.j if call.row.step is Step.DECIDED else None
        approved = confirm_at_start(s.gate.policy, call.row, tool_call, journal=journal).approved
        run.approval(s.gate.policy, approved)
        if approved:
            arguments = s.arguments_or_none(tool_call)
        if arguments is None:
            run.row(self.not_run(call))
            return
        call.value = arguments
        claim: Claim = self.j.claim(
            call.row.idempotency_key, lease_seconds=s.lease_seconds, retry_expired=retry_expired
        )
        tool = s.executors[call.name]
        context = s.context(call, call.row, claim.fencing_token)
        run.claimed(claim.fencing_token)
        failed: str | None = None
        content = ""
        run.tool_started()
        try:
            value = (
                tool.fn(call.value, context=context) if tool.wants_context else tool.fn(call.value)
            )
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            content = result_text(value)
        except Exception as exc:  # the tool's failure is a failed row, never the run's
            failed = type(exc).__name__
            content = s.failure_text(call.name, exc)
        run.tool_ended(failed)
        if failed is None:
            done = self.j.finish(claim, Outcome.SUCCEEDED, **s.finished_fields(content))
        else:
            done = self.j.finish(claim, Outcome.FAILED, error_class=failed)
        run.row(done)
        s.append_result(call.call_id, content)

    def not_run(self, call: LoopCall) -> JournalRow:
        assert call.row is not None
        key, reason = call.row.idempotency_key, "refused at start: approval or path check"
        if call.row.step is Step.DECIDED:
            row: JournalRow = self.j.skip(key, reason=reason)
        else:
            row = self.j.reconcile(key, reason=reason)
        self.s.append_result(call.call_id, NOT_APPROVED)
        return row

    def resolve(self, call: LoopCall) -> None:
        """A call of the resumed turn: run it, or not, by its row and its tool's rule."""
        s = self.s
        row = _unsettled_row(s, call)
        if row is None:
            return
        tool = s.executors[call.name]
        run_again = True
        if tool.on_ambiguous == "ask":
            assert tool.ask is not None
            run_again = bool(_sync_value(tool.ask(row)))
        elif tool.on_ambiguous == "verify":
            assert tool.verify is not None
            ran = _sync_value(tool.verify(s.context(call, row, row.fencing_token or 0)))
            run_again = not ran
            if ran:
                self.j.reconcile(row.idempotency_key, reason="verify: the call ran")
        if not run_again:
            if tool.on_ambiguous == "ask":
                self.j.reconcile(row.idempotency_key, reason="ask: not run again")
            s.append_result(call.call_id, NOT_AVAILABLE)
            return
        _wait_for_lease(row)
        self.execute(call, retry_expired=row.step is Step.STARTED, resumed=True)


def _wait_for_lease(row: JournalRow) -> None:
    """A started row is claimed again only once its lease expired (its worker may live)."""
    if row.step is Step.STARTED and row.lease_expires_at is not None:
        delay = row.lease_expires_at - time.time()
        if delay > 0:
            time.sleep(delay + 0.05)


async def _await_lease(row: JournalRow) -> None:
    if row.step is Step.STARTED and row.lease_expires_at is not None:
        delay = row.lease_expires_at - time.time()
        if delay > 0:
            await asyncio.sleep(delay + 0.05)


async def _awaited(value: Awaitable[Any]) -> Any:
    return await value


def _sync_value(value: Any) -> Any:
    if inspect.isawaitable(value):
        return asyncio.run(_awaited(value))
    return value


async def _async_value(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


# ---- the async driver --------------------------------------------------------------------
async def arun(gate: Any, options: dict[str, Any]) -> RunResult:
    """The loop, async: the same steps, the journal's calls off the event loop."""
    outcome = await _arun(gate, options)
    if isinstance(outcome, RunResult):
        return outcome
    _raise_bare(outcome)


async def _arun(gate: Any, options: dict[str, Any]) -> RunResult | ToolGateError:
    state = RunState(gate, options, asynchronous=True)
    driver = _driver(state)
    try:
        return await _Async(state, await driver.aacquire(), driver).run()
    except ToolGateError as exc:
        return exc
    finally:
        try:
            await asyncio.to_thread(driver.release)
        finally:
            if state.owns_journal:
                await asyncio.to_thread(state.journal.close)


class _Async:
    def __init__(self, state: RunState, journal: FencedJournal, driver: RunDriver) -> None:
        self.s = state
        self.j = journal
        self.driver = driver

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    async def run(self) -> RunResult:
        s = self.s
        rows = self.j.rows  # read when the lease was taken
        behind(s.run_id, rows, s.conversation, s.api)
        seen = {r.call_id for r in rows}
        next_round = 0
        if rows:
            with traces.resume(s.run_id, rows):
                calls = s.plan_resume(rows)
                seen.update(c.call_id for c in calls)
                for call in calls:
                    await self.resolve(call)
            next_round = max(r.round for r in rows) + 1
        for rounds, round_index in enumerate(range(next_round, s.limits.max_rounds), start=1):
            if s.before_round is not None:
                await _async_value(s.before_round(round_index))
            if self.driver.stalled():
                await self.call(self.driver.live)
            text, stream, output = await self.stream_round()
            calls = released_calls(stream)
            if not calls:
                return RunResult(text, rounds, self.j.rows, list(s.conversation))
            ids = [c.call_id for c in calls]
            # The run's count: the journal's rows (see FencedJournal.rows).
            s.check(round_index, ids, seen, len(self.j.rows), stream)
            seen.update(ids)
            s.append_turn(text, calls, output)
            for call in calls:
                new = s.new_call(call, round_index, stream.attempt_id)
                call.row = await self.call(self.j.decide, new)
            for call in calls:
                await self.execute(call)
        s.refuse(QuarantineReason.TOO_MANY_ROUNDS, f"resume-{s.run_id}")
        raise AssertionError("refused")  # pragma: no cover (refuse raises)

    async def stream_round(self) -> tuple[str, Any, list[Any] | None]:
        s = self.s
        text: list[str] = []
        output: list[Any] | None = None
        if s.api == "chat":
            stream = await s.gate.acompletion(**s.round_request())
            async for chunk in stream:
                for choice in chunk.choices:
                    piece = choice.delta.content
                    if piece:
                        text.append(piece)
                        if s.on_text is not None:
                            await _async_value(s.on_text(piece))
        else:
            stream = await s.gate.aresponses(**s.round_request())
            async for event in stream:
                kind = kind_of(event)
                if kind == "response.output_text.delta":
                    text.append(event.delta)
                    if s.on_text is not None:
                        await _async_value(s.on_text(event.delta))
                elif kind == "response.completed":
                    output = output_items(event.response)
        return "".join(text), stream, output

    async def execute(
        self, call: LoopCall, *, retry_expired: bool = False, resumed: bool = False
    ) -> None:
        with traces.tool_run(self.s.run_id, call.name, call.call_id, resumed=resumed) as run:
            await self._execute(call, run, retry_expired)

    async def _execute(self, call: LoopCall, run: traces.ToolRun, retry_expired: bool) -> None:
        s = self.s
        assert call.row is not None
        run.row(call.row)
        tool_call = s.tool_call(call)
        arguments = None
        journal = self.j if call.row.step is Step.DECIDED else None
        decision = await aconfirm_at_start(s.gate.policy, call.row, tool_call, journal=journal)
        run.approval(s.gate.policy, decision.approved)
        if decision.approved:
            arguments = await self.call(s.arguments_or_none, tool_call)
        if arguments is None:
            run.row(await self.not_run(call))
            return
        call.value = arguments
        claim: Claim = await self.call(
            self.j.claim,
            call.row.idempotency_key,
            lease_seconds=s.lease_seconds,
            retry_expired=retry_expired,
        )
        tool = s.executors[call.name]
        context = s.context(call, call.row, claim.fencing_token)
        run.claimed(claim.fencing_token)
        failed: str | None = None
        content = ""
        run.tool_started()
        try:
            kwargs = {"context": context} if tool.wants_context else {}
            if inspect.iscoroutinefunction(tool.fn):
                value = await tool.fn(call.value, **kwargs)
            else:
                value = await _async_value(await asyncio.to_thread(tool.fn, call.value, **kwargs))
            content = result_text(value)
        except Exception as exc:  # the tool's failure is a failed row, never the run's
            failed = type(exc).__name__
            content = s.failure_text(call.name, exc)
        run.tool_ended(failed)
        if failed is None:
            fields = s.finished_fields(content)
            done = await self.call(self.j.finish, claim, Outcome.SUCCEEDED, **fields)
        else:
            done = await self.call(self.j.finish, claim, Outcome.FAILED, error_class=failed)
        run.row(done)
        s.append_result(call.call_id, content)

    async def not_run(self, call: LoopCall) -> JournalRow:
        assert call.row is not None
        key, reason = call.row.idempotency_key, "refused at start: approval or path check"
        if call.row.step is Step.DECIDED:
            row: JournalRow = await self.call(self.j.skip, key, reason=reason)
        else:
            row = await self.call(self.j.reconcile, key, reason=reason)
        self.s.append_result(call.call_id, NOT_APPROVED)
        return row

    async def resolve(self, call: LoopCall) -> None:
        s = self.s
        row = _unsettled_row(s, call)
        if row is None:
            return
        tool = s.executors[call.name]
        run_again = True
        if tool.on_ambiguous == "ask":
            assert tool.ask is not None
            run_again = bool(await _async_value(tool.ask(row)))
        elif tool.on_ambiguous == "verify":
            assert tool.verify is not None
            ran = await _async_value(tool.verify(s.context(call, row, row.fencing_token or 0)))
            run_again = not ran
            if ran:
                await self.call(
                    self.j.reconcile, row.idempotency_key, reason="verify: the call ran"
                )
        if not run_again:
            if tool.on_ambiguous == "ask":
                await self.call(self.j.reconcile, row.idempotency_key, reason="ask: not run again")
            s.append_result(call.call_id, NOT_AVAILABLE)
            return
        await _await_lease(row)
        await self.execute(call, retry_expired=row.step is Step.STARTED, resumed=True)


__all__ = [
    "NOT_APPROVED",
    "NOT_AVAILABLE",
    "NOT_JOURNALED",
    "TOOL_ERROR",
    "RunResult",
    "arun",
    "run",
]
