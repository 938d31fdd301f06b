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
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import GateConfigError, QuarantineReason, quarantine, raise_clean
from ..core.journal import (
    AmbiguousCalls,
    Claim,
    JournalRow,
    NewCall,
    Outcome,
    Step,
    argument_digest,
)
from ..core.loop import (
    LoopLimits,
    PendingCall,
    check_round,
    pending_calls,
    result_digest,
    result_text,
)
from ..core.policy import ToolCall
from .atstart import aconfirm_at_start, confirm_at_start, tool_arguments
from .pathscope import PathRefused
from .tools import ToolContext, check_executors

TOOL_ERROR = '{"error": "the tool failed"}'
"""What the model gets for a tool that raised, by default: no traceback, no message."""
NOT_AVAILABLE = '{"error": "the call was interrupted; its result is not available"}'
"""What the model gets for a resumed call that is not run again (reconciled, verified or
finished before its result reached the conversation)."""
NOT_JOURNALED = '{"error": "the call was not run: it was not journaled before an interruption"}'
"""What the model gets, on a resume, for a call of a journaled turn that has no row itself
(the process died between two of the turn's decides): it is not run (nothing proves the
gate released it), and the model may ask for it again."""
NOT_APPROVED = '{"error": "the call was not run: its approval or path check no longer holds"}'
"""What the model gets for a call the policy refused at ``started`` (see ``confirm_at_start``)."""


@dataclass(frozen=True)
class RunResult:
    """What a run ends with: the final text, the rounds it made, the journal's rows of the
    run, and the conversation (with every model turn and result)."""

    text: str
    rounds: int
    rows: list[JournalRow]
    conversation: list[Any]

    def __repr__(self) -> str:
        return (
            f"RunResult(rounds={self.rounds}, rows={len(self.rows)}, text={len(self.text)} chars)"
        )


@dataclass
class _Call:
    """A call about to run: from this round's release, or re-derived on resume."""

    call_id: str
    name: str
    arguments: str
    value: dict[str, Any]
    row: JournalRow | None = None
    index: int = 0

    def __repr__(self) -> str:
        return f"_Call(call_id={self.call_id!r}, name={self.name!r})"


class _Run:
    """One run's settings and state, shared by the sync and async drivers."""

    def __init__(self, gate: Any, options: dict[str, Any], *, asynchronous: bool) -> None:
        self.gate = gate
        api = options.pop("api", "chat")
        if api not in ("chat", "responses"):
            raise GateConfigError("api must be 'chat' or 'responses'")
        self.api: str = api
        self.executors = check_executors(options.pop("executors", None))
        journal = options.pop("journal", None)
        self.owns_journal = isinstance(journal, str)
        if isinstance(journal, str):
            from .journal import open_journal

            journal = open_journal(journal)
        if journal is None:
            raise GateConfigError("run needs journal= (a Journal or a URL: sqlite:///...)")
        self.journal = journal
        run_id = options.pop("run_id", None)
        if not isinstance(run_id, str) or not run_id:
            raise GateConfigError("run needs run_id= (resume a run by passing the same one)")
        self.run_id = run_id
        limits = options.pop("limits", None) or LoopLimits()
        if not isinstance(limits, LoopLimits):
            raise GateConfigError("limits must be a litellm_toolgate.LoopLimits")
        self.limits = limits
        self.on_text = _optional(options.pop("on_text", None), "on_text")
        self.checkpoint = _optional(options.pop("checkpoint", None), "checkpoint")
        self.before_round = _optional(options.pop("before_round", None), "before_round")
        self.tool_error = _optional(options.pop("tool_error", None), "tool_error")
        self.lease_seconds = float(options.pop("lease_seconds", 60.0))
        if not 0 < self.lease_seconds < 86_400:
            raise GateConfigError("lease_seconds must be between 0 and 86400")
        key = "messages" if api == "chat" else "input"
        if options.get("stream") is not None:
            raise GateConfigError("run streams every round itself: do not pass stream=")
        conversation = options.pop(key, None)
        if not isinstance(conversation, list):
            raise GateConfigError(f"run needs {key}= (a list) for api={api!r}")
        self.conversation: list[Any] = list(conversation)
        self.key = key
        self.request = options
        self.route = str(options.get("model", ""))
        self._check_tools(options.get("tools"))
        self.asynchronous = asynchronous

    def _check_tools(self, tools: Any) -> None:
        names: set[str] = set()
        if tools is not None:
            for tool in tools:
                function = tool.get("function") if isinstance(tool, Mapping) else None
                name = function.get("name") if isinstance(function, Mapping) else None
                names.add(str(name if name is not None else tool.get("name")))
        elif self.gate.registry is not None:
            names = set(self.gate.registry.names)
        missing = sorted(names - set(self.executors))
        if missing:
            raise GateConfigError(f"no executor for tool(s) {missing}: every tool needs a Tool")

    # ---- the conversation ------------------------------------------------------------------
    def round_request(self) -> dict[str, Any]:
        return {**self.request, self.key: list(self.conversation), "stream": True}

    def append_turn(self, text: str, released: Sequence[Any], output: list[Any] | None) -> None:
        if self.api == "chat":
            calls = [
                {
                    "id": c.call_id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in released
            ]
            self.conversation.append(
                {"role": "assistant", "content": text or None, "tool_calls": calls}
            )
        else:
            self.conversation.extend(output or [])
        self.save()

    def append_result(self, call_id: str, content: str) -> None:
        if self.api == "chat":
            self.conversation.append({"role": "tool", "tool_call_id": call_id, "content": content})
        else:
            self.conversation.append(
                {"type": "function_call_output", "call_id": call_id, "output": content}
            )
        self.save()

    def save(self) -> None:
        if self.checkpoint is not None:
            self.checkpoint(list(self.conversation))

    # ---- journal rows ----------------------------------------------------------------------
    def new_call(self, call: _Call, round_index: int, attempt_id: str) -> NewCall:
        tool = self.executors[call.name]
        return NewCall(
            run_id=self.run_id,
            attempt_id=attempt_id,
            round=round_index,
            route=self.route,
            call_id=call.call_id,
            tool=self.gate.tool_categories.get(call.name, call.name),
            effect=tool.effect,
            argument_digest=argument_digest(call.arguments, hmac_key=self.gate.hmac_key),
        )

    def context(self, call: _Call, row: JournalRow, token: int) -> ToolContext:
        return ToolContext(
            run_id=self.run_id,
            round=row.round,
            call_id=call.call_id,
            tool=call.name,
            idempotency_key=row.idempotency_key,
            fencing_token=token,
            check_token=self.journal.check_token,
        )

    def finished_fields(self, content: str) -> dict[str, Any]:
        return {
            "result_size": len(content.encode("utf-8", "surrogatepass")),
            "result_digest": result_digest(content, hmac_key=self.gate.hmac_key),
        }

    def tool_call(self, call: _Call) -> ToolCall:
        """The call as the gate's policy sees it, for the checks at ``started``."""
        assert call.row is not None
        return ToolCall(call.row.attempt_id, call.index, call.call_id, call.name, call.value)

    def arguments_or_none(self, tool_call: ToolCall) -> dict[str, Any] | None:
        """What the tool is given (every path scope's paths resolved again now), or None
        when a path no longer resolves inside its root."""
        refused = False
        try:
            return tool_arguments(self.gate.policy, tool_call)
        except PathRefused:
            refused = True  # names the declaration and the reason, never the path
        assert refused
        return None

    def failure_text(self, name: str, exc: BaseException) -> str:
        if self.tool_error is None:
            return TOOL_ERROR
        return str(self.tool_error(name, exc))

    # ---- a round's released calls ------------------------------------------------------------
    def check(
        self, round_index: int, ids: list[str], seen: set[str], total: int, stream: Any
    ) -> None:
        reason = check_round(self.limits, round_index, ids, seen, total)
        if reason is not None:
            self.refuse(reason, stream.attempt_id, stream.attempt.records())

    @staticmethod
    def refuse(reason: QuarantineReason, attempt_id: str, records: Any = ()) -> None:
        raise_clean(quarantine(reason, attempt_id, records))

    # ---- resume ----------------------------------------------------------------------------
    def plan_resume(self, rows: list[JournalRow]) -> list[_Call]:
        """The calls to finish before the next round; :class:`AmbiguousCalls` for rows
        that cannot be resolved (rule ``fail``, or no call in the conversation to run them
        from)."""
        by_id = {r.call_id: r for r in rows}
        pending = pending_calls(self.conversation, api=self.api)
        journaled = [p for p in pending if p.call_id in by_id]
        if pending and not journaled:
            # Nothing of that turn was decided, so nothing of it ran: ask again.
            self._drop_pending_turn()
            pending = []
        calls = [self._resumed(p, by_id.get(p.call_id)) for p in pending]
        matched = {c.call_id for c in calls}
        stuck = [
            r
            for r in rows
            if not r.finished
            and (
                r.call_id not in matched
                or self.executors[by_id_call(calls, r.call_id).name].on_ambiguous == "fail"
            )
        ]
        if stuck:
            raise AmbiguousCalls(self.run_id, stuck)
        return calls

    def _resumed(self, pending: PendingCall, row: JournalRow | None) -> _Call:
        if pending.name not in self.executors:
            raise GateConfigError(f"no executor for tool {pending.name!r} of the resumed turn")
        try:
            value = json.loads(pending.arguments)
        except ValueError:
            value = None
        digest_ok = row is None or (
            isinstance(value, dict)
            and argument_digest(pending.arguments, hmac_key=self.gate.hmac_key)
            == row.argument_digest
        )
        if not isinstance(value, dict) or not digest_ok:
            # Not the call that was journaled (or not one the gate released): never run it.
            raise AmbiguousCalls(self.run_id, [row] if row is not None else [])
        return _Call(pending.call_id, pending.name, pending.arguments, value, row)

    def _drop_pending_turn(self) -> None:
        if self.api == "chat":
            while self.conversation and self.conversation[-1].get("role") != "assistant":
                self.conversation.pop()
            if self.conversation:
                self.conversation.pop()
        else:
            while self.conversation and _kind(self.conversation[-1]) in (
                "function_call",
                "function_call_output",
                "reasoning",
                "message",
            ):
                if _kind(self.conversation[-1]) == "message" and (
                    _field(self.conversation[-1], "role") != "assistant"
                ):
                    break
                self.conversation.pop()


def by_id_call(calls: list[_Call], call_id: str) -> _Call:
    return next(c for c in calls if c.call_id == call_id)


def _optional(value: Any, name: str) -> Any:
    if value is not None and not callable(value):
        raise GateConfigError(f"{name} must be a callable or None")
    return value


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def _kind(item: Any) -> str:
    value = _field(item, "type")
    return str(getattr(value, "value", value))


def _output_items(response: Any) -> list[Any]:
    """A completed response's output items as the next request's input: every field the
    response carried (reasoning and ``encrypted_content`` included), none left ``None``."""
    items = []
    for item in _field(response, "output") or []:
        if isinstance(item, Mapping):
            items.append({k: v for k, v in item.items() if v is not None})
        else:
            items.append(item.model_dump(exclude_none=True))
    return items


def _released_calls(stream: Any) -> list[_Call]:
    return [
        _Call(c.call_id, c.name, c.arguments, dict(c.value), index=c.index) for c in stream.released
    ]


# ---- the sync driver ---------------------------------------------------------------------
def run(gate: Any, **options: Any) -> RunResult:
    """The loop, sync (see the module's text); ``gate.run(...)`` calls it."""
    state = _Run(gate, options, asynchronous=False)
    try:
        return _Sync(state).run()
    finally:
        if state.owns_journal:
            state.journal.close()


class _Sync:
    def __init__(self, state: _Run) -> None:
        self.s = state
        self.j = state.journal

    def run(self) -> RunResult:
        s = self.s
        rows = self.j.calls(s.run_id)
        seen = {r.call_id for r in rows}
        total = len(rows)
        next_round = 0
        if rows:
            calls = s.plan_resume(rows)
            seen.update(c.call_id for c in calls)
            for call in calls:
                self.resolve(call)
            next_round = max(r.round for r in rows) + 1
        for rounds, round_index in enumerate(range(next_round, s.limits.max_rounds), start=1):
            if s.before_round is not None:
                s.before_round(round_index)
            text, stream, output = self.stream_round()
            calls = _released_calls(stream)
            if not calls:
                return RunResult(text, rounds, self.j.calls(s.run_id), list(s.conversation))
            ids = [c.call_id for c in calls]
            s.check(round_index, ids, seen, total, stream)
            seen.update(ids)
            total += len(ids)
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
                kind = _kind(event)
                if kind == "response.output_text.delta":
                    text.append(event.delta)
                    if s.on_text is not None:
                        s.on_text(event.delta)
                elif kind == "response.completed":
                    output = _output_items(event.response)
        return "".join(text), stream, output

    def execute(self, call: _Call, *, retry_expired: bool = False) -> None:
        s = self.s
        assert call.row is not None
        # Between decide and claim: the approval is confirmed against the row (asked again
        # if it no longer holds) and the path scopes resolve the tool's arguments again.
        tool_call = s.tool_call(call)
        arguments = None
        # A resumed row already started takes no new approval columns (the table allows them
        # at decided only): it is confirmed, and asked again, without writing them.
        journal = self.j if call.row.step is Step.DECIDED else None
        if confirm_at_start(s.gate.policy, call.row, tool_call, journal=journal).approved:
            arguments = s.arguments_or_none(tool_call)
        if arguments is None:
            self.not_run(call)
            return
        call.value = arguments
        claim: Claim = self.j.claim(
            call.row.idempotency_key, lease_seconds=s.lease_seconds, retry_expired=retry_expired
        )
        tool = s.executors[call.name]
        context = s.context(call, call.row, claim.fencing_token)
        failed: str | None = None
        content = ""
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
        if failed is None:
            self.j.finish(claim, Outcome.SUCCEEDED, **s.finished_fields(content))
        else:
            self.j.finish(claim, Outcome.FAILED, error_class=failed)
        s.append_result(call.call_id, content)

    def not_run(self, call: _Call) -> None:
        assert call.row is not None
        key, reason = call.row.idempotency_key, "refused at start: approval or path check"
        if call.row.step is Step.DECIDED:
            self.j.skip(key, reason=reason)
        else:
            self.j.reconcile(key, reason=reason)
        self.s.append_result(call.call_id, NOT_APPROVED)

    def resolve(self, call: _Call) -> None:
        """A call of the resumed turn: run it, or not, by its row and its tool's rule."""
        s = self.s
        row = call.row
        if row is None:
            s.append_result(call.call_id, NOT_JOURNALED)
            return
        if row.finished:
            s.append_result(call.call_id, NOT_AVAILABLE)
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
        self.execute(call, retry_expired=row.step is Step.STARTED)


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
async def arun(gate: Any, **options: Any) -> RunResult:
    """The loop, async: the same steps, the journal's calls off the event loop."""
    state = _Run(gate, options, asynchronous=True)
    try:
        return await _Async(state).run()
    finally:
        if state.owns_journal:
            await asyncio.to_thread(state.journal.close)


class _Async:
    def __init__(self, state: _Run) -> None:
        self.s = state
        self.j = state.journal

    async def call(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(method, *args, **kwargs)

    async def run(self) -> RunResult:
        s = self.s
        rows = await self.call(self.j.calls, s.run_id)
        seen = {r.call_id for r in rows}
        total = len(rows)
        next_round = 0
        if rows:
            calls = s.plan_resume(rows)
            seen.update(c.call_id for c in calls)
            for call in calls:
                await self.resolve(call)
            next_round = max(r.round for r in rows) + 1
        for rounds, round_index in enumerate(range(next_round, s.limits.max_rounds), start=1):
            if s.before_round is not None:
                await _async_value(s.before_round(round_index))
            text, stream, output = await self.stream_round()
            calls = _released_calls(stream)
            if not calls:
                rows = await self.call(self.j.calls, s.run_id)
                return RunResult(text, rounds, rows, list(s.conversation))
            ids = [c.call_id for c in calls]
            s.check(round_index, ids, seen, total, stream)
            seen.update(ids)
            total += len(ids)
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
                kind = _kind(event)
                if kind == "response.output_text.delta":
                    text.append(event.delta)
                    if s.on_text is not None:
                        await _async_value(s.on_text(event.delta))
                elif kind == "response.completed":
                    output = _output_items(event.response)
        return "".join(text), stream, output

    async def execute(self, call: _Call, *, retry_expired: bool = False) -> None:
        s = self.s
        assert call.row is not None
        tool_call = s.tool_call(call)
        arguments = None
        journal = self.j if call.row.step is Step.DECIDED else None
        decision = await aconfirm_at_start(s.gate.policy, call.row, tool_call, journal=journal)
        if decision.approved:
            arguments = await self.call(s.arguments_or_none, tool_call)
        if arguments is None:
            await self.not_run(call)
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
        failed: str | None = None
        content = ""
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
        if failed is None:
            await self.call(self.j.finish, claim, Outcome.SUCCEEDED, **s.finished_fields(content))
        else:
            await self.call(self.j.finish, claim, Outcome.FAILED, error_class=failed)
        s.append_result(call.call_id, content)

    async def not_run(self, call: _Call) -> None:
        assert call.row is not None
        key, reason = call.row.idempotency_key, "refused at start: approval or path check"
        if call.row.step is Step.DECIDED:
            await self.call(self.j.skip, key, reason=reason)
        else:
            await self.call(self.j.reconcile, key, reason=reason)
        self.s.append_result(call.call_id, NOT_APPROVED)

    async def resolve(self, call: _Call) -> None:
        s = self.s
        row = call.row
        if row is None:
            s.append_result(call.call_id, NOT_JOURNALED)
            return
        if row.finished:
            s.append_result(call.call_id, NOT_AVAILABLE)
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
        await self.execute(call, retry_expired=row.step is Step.STARTED)


__all__ = [
    "NOT_APPROVED",
    "NOT_AVAILABLE",
    "NOT_JOURNALED",
    "TOOL_ERROR",
    "RunResult",
    "arun",
    "run",
]
