"""One run of the tool loop: its settings, conversation, journal rows and resume plan.

:class:`RunState` is what the sync and async drivers of :mod:`.loop` share: the checked
settings of ``gate.run`` (a wrong one is a :class:`GateConfigError` before anything is
sent), the conversation and its checkpoints, the journal's new rows, the checks at
``started`` (the approval confirmed against the row, the path scopes' arguments resolved
again), and the resume plan (:meth:`RunState.plan_resume`). It does no waiting of its own:
what it calls is the journal (sync) and the caller's callbacks.

One driver per run: :class:`RunDriver` holds the run's lease in the journal from before the
first model request to the end of the run (``RunBusy`` for a second driver, or a wait when
``wait_for_run`` says so), passes it to every move (:class:`FencedJournal`: a driver whose
lease was taken over commits nothing more) and keeps it alive: each move renews it once a
third of it has passed (in the move's own transaction), and a heartbeat thread renews it
between moves (a long tool call, an approval, a model round).
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.errors import GateConfigError, QuarantineReason, quarantine, raise_clean
from ..core.rules.journal import (
    AmbiguousCalls,
    ConversationBehind,
    JournalRow,
    NewCall,
    RunBusy,
    RunLease,
    RunLeaseLost,
    argument_digest,
)
from ..core.rules.loop import (
    LoopLimits,
    PendingCall,
    RunResult,
    check_round,
    pending_calls,
    result_digest,
)
from ..core.rules.policy import ToolCall
from ..policies.checks import tool_arguments
from ..policies.paths import PathRefused
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


RUN_LEASE_SECONDS = 30.0
"""The run lease's default length: renewed by each move once a third has passed, and by a
heartbeat between moves; what a crashed driver's run waits before another may take it
(unless the driver was a process of this machine that is gone: then at once)."""


@dataclass
class LoopCall:
    """A call about to run: from this round's release, or re-derived on resume."""

    call_id: str
    name: str
    arguments: str
    value: dict[str, Any]
    row: JournalRow | None = None
    index: int = 0

    def __repr__(self) -> str:
        return f"LoopCall(call_id={self.call_id!r}, name={self.name!r})"


class RunState:
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
        if not callable(getattr(journal, "begin_run", None)):
            raise GateConfigError(
                "run needs a journal with run leases (begin_run): one from open_journal"
            )
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
        self.lease_seconds = _seconds(options.pop("lease_seconds", 60.0), "lease_seconds")
        self.run_lease_seconds = _seconds(
            options.pop("run_lease_seconds", RUN_LEASE_SECONDS), "run_lease_seconds"
        )
        wait = options.pop("wait_for_run", None)
        self.wait_for_run = 0.0 if wait is None else _seconds(wait, "wait_for_run", zero=True)
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
    def new_call(self, call: LoopCall, round_index: int, attempt_id: str) -> NewCall:
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

    def context(self, call: LoopCall, row: JournalRow, token: int) -> ToolContext:
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

    def tool_call(self, call: LoopCall) -> ToolCall:
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
    def plan_resume(self, rows: list[JournalRow]) -> list[LoopCall]:
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

    def _resumed(self, pending: PendingCall, row: JournalRow | None) -> LoopCall:
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
        return LoopCall(pending.call_id, pending.name, pending.arguments, value, row)

    def _drop_pending_turn(self) -> None:
        if self.api == "chat":
            while self.conversation and self.conversation[-1].get("role") != "assistant":
                self.conversation.pop()
            if self.conversation:
                self.conversation.pop()
        else:
            while self.conversation and kind_of(self.conversation[-1]) in (
                "function_call",
                "function_call_output",
                "reasoning",
                "message",
            ):
                if kind_of(self.conversation[-1]) == "message" and (
                    field_of(self.conversation[-1], "role") != "assistant"
                ):
                    break
                self.conversation.pop()


def behind(run_id: str, rows: Sequence[JournalRow], conversation: Sequence[Any], api: str) -> None:
    """``ConversationBehind`` when the journal holds calls of the run that the conversation
    never mentions (it is older than the run: another driver went on from it)."""
    if not rows:
        return
    mentioned = call_ids_in(conversation, api=api)
    missing = [r.call_id for r in rows if r.call_id not in mentioned]
    if missing:
        raise ConversationBehind(run_id, missing)


def call_ids_in(conversation: Sequence[Any], *, api: str) -> set[str]:
    """Every call id of a model turn in the conversation."""
    ids: set[str] = set()
    for item in conversation:
        if api == "chat":
            for call in field_of(item, "tool_calls") or ():
                ids.add(str(field_of(call, "id")))
        elif kind_of(item) == "function_call":
            ids.add(str(field_of(item, "call_id")))
    return ids


class FencedJournal:
    """The journal as one driver of a run moves it: every move carries the run lease (the
    store commits it only while the lease is current, and renews it when due), and so does
    the read of the run's rows (``RunLeaseLost`` there too). Other reads and ``check_token``
    go to the journal as they are.

    ``rows`` is the run as the journal holds it: read once, right after the lease was
    taken (``begin_run``), then each row as a move of this driver committed it (while the
    lease is held no other driver can commit a row of the run, so this is the journal's
    count, not a count of its own): the run's bounds are checked against it, and
    ``RunResult.rows`` is it."""

    def __init__(self, journal: Any, lease: RunLease, rows: Sequence[JournalRow]) -> None:
        self._journal = journal
        self.lease = lease
        self._rows: dict[str, JournalRow] = {r.idempotency_key: r for r in rows}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._journal, name)

    @property
    def rows(self) -> list[JournalRow]:
        return sorted(self._rows.values(), key=_row_order)

    def _kept(self, row: JournalRow) -> JournalRow:
        self._rows[row.idempotency_key] = row
        return row

    def calls(self, run_id: str) -> list[JournalRow]:
        rows: list[JournalRow] = self._journal.calls(run_id, run=self.lease)
        self._rows = {r.idempotency_key: r for r in rows}
        return rows

    def decide(self, call: NewCall) -> JournalRow:
        return self._kept(self._journal.decide(call, run=self.lease))

    def record_approval(self, key: str, **fields: Any) -> JournalRow:
        return self._kept(self._journal.record_approval(key, **fields, run=self.lease))

    def claim(self, key: str, **fields: Any) -> Any:
        return self._journal.claim(key, **fields, run=self.lease)

    def finish(self, claim: Any, outcome: Any, **fields: Any) -> JournalRow:
        return self._kept(self._journal.finish(claim, outcome, **fields, run=self.lease))

    def skip(self, key: str, *, reason: str) -> JournalRow:
        return self._kept(self._journal.skip(key, reason=reason, run=self.lease))

    def reconcile(self, key: str, *, reason: str) -> JournalRow:
        return self._kept(self._journal.reconcile(key, reason=reason, run=self.lease))


def _row_order(row: JournalRow) -> tuple[int, float, str]:
    return (row.round, row.decided_at, row.call_id)


class RunDriver:
    """This process's hold on one run (see the module's text). ``acquire`` (or
    ``aacquire``) takes the lease, waiting up to ``wait_for_run`` seconds for another
    driver's to end; ``live`` is called before each model round; ``release`` ends it."""

    def __init__(self, journal: Any, run_id: str, lease_seconds: float, wait: float) -> None:
        self.journal = journal
        self.run_id = run_id
        self.lease_seconds = lease_seconds
        self.wait = wait
        self.lease: RunLease | None = None
        # Leases are written with the journal's clock: compare them with the same one.
        self.clock = getattr(journal, "clock", time.time)
        self._stop = threading.Event()
        self._lost = False
        self._beat: threading.Thread | None = None

    def _pause(self, deadline: float, busy: RunBusy | None) -> float:
        """How long to sleep before the next try; re-raises ``busy`` past the deadline."""
        left = deadline - time.monotonic()
        if left <= 0:
            assert busy is not None
            raise busy
        return min(left, 0.05 + random.random() * 0.2)

    def acquire(self) -> FencedJournal:
        deadline = time.monotonic() + self.wait
        while True:
            try:
                return self._held(
                    *self.journal.begin_run(self.run_id, lease_seconds=self.lease_seconds)
                )
            except RunBusy as busy:
                time.sleep(self._pause(deadline, busy))

    async def aacquire(self) -> FencedJournal:
        import asyncio

        deadline = time.monotonic() + self.wait
        while True:
            try:
                taken = await asyncio.to_thread(
                    self.journal.begin_run, self.run_id, lease_seconds=self.lease_seconds
                )
                return self._held(*taken)
            except RunBusy as busy:
                await asyncio.sleep(self._pause(deadline, busy))

    def _held(self, lease: RunLease, rows: Sequence[JournalRow]) -> FencedJournal:
        self.lease = lease
        self._beat = threading.Thread(
            target=self._heartbeat, name=f"toolgate-run-lease-{lease.token}", daemon=True
        )
        self._beat.start()
        return FencedJournal(self.journal, lease, rows)

    def _heartbeat(self) -> None:
        lease = self.lease
        assert lease is not None
        while not self._stop.wait(lease.lease_seconds / 6):
            if not lease.renewal_due(self.clock()):
                continue  # a move renewed it
            try:
                self.journal.renew_run(lease)
            except RunLeaseLost:
                self._lost = True  # the next move is refused by the store as well
                return
            except Exception:  # a store hiccup: the next beat tries again
                continue

    def stalled(self) -> bool:
        """Before a model round: ``RunLeaseLost`` if the heartbeat found the run taken
        over; True when the lease is (nearly) at its end, so this process stalled (the
        heartbeat did not run) and must renew it before asking the model anything."""
        lease = self.lease
        assert lease is not None
        if self._lost:
            raise RunLeaseLost(self.run_id, lease.token, None)
        return self.clock() >= lease.expires_at - lease.lease_seconds / 6

    def live(self) -> None:
        """Before a model round: the lease is still this driver's, or ``RunLeaseLost``
        (the model is not asked for a run this process no longer drives)."""
        if self.stalled():
            assert self.lease is not None
            self.journal.renew_run(self.lease)

    def release(self) -> None:
        """Stop the heartbeat and end the lease (when it is still this driver's)."""
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        if self.lease is not None and not self._lost:
            # Not released (the store failed): the lease ends at its expiry.
            with contextlib.suppress(Exception):
                self.journal.release_run(self.lease)


def _seconds(value: Any, name: str, *, zero: bool = False) -> float:
    """A number of seconds, finite, below a day (and above zero unless ``zero``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GateConfigError(f"{name} must be a number of seconds")
    low_ok = value >= 0 if zero else value > 0
    if not (low_ok and math.isfinite(value) and value < 86_400):
        raise GateConfigError(
            f"{name} must be between 0 and 86400 seconds" + (" (0: do not wait)" if zero else "")
        )
    return float(value)


def by_id_call(calls: list[LoopCall], call_id: str) -> LoopCall:
    return next(c for c in calls if c.call_id == call_id)


def _optional(value: Any, name: str) -> Any:
    if value is not None and not callable(value):
        raise GateConfigError(f"{name} must be a callable or None")
    return value


def field_of(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, Mapping) else getattr(item, name, None)


def kind_of(item: Any) -> str:
    value = field_of(item, "type")
    return str(getattr(value, "value", value))


def output_items(response: Any) -> list[Any]:
    """A completed response's output items as the next request's input: every field the
    response carried (reasoning and ``encrypted_content`` included), none left ``None``."""
    items = []
    for item in field_of(response, "output") or []:
        if isinstance(item, Mapping):
            items.append({k: v for k, v in item.items() if v is not None})
        else:
            items.append(item.model_dump(exclude_none=True))
    return items


def released_calls(stream: Any) -> list[LoopCall]:
    return [
        LoopCall(c.call_id, c.name, c.arguments, dict(c.value), index=c.index)
        for c in stream.released
    ]


__all__ = [
    "RUN_LEASE_SECONDS",
    "FencedJournal",
    "RunDriver",
    "behind",
    "NOT_APPROVED",
    "NOT_AVAILABLE",
    "NOT_JOURNALED",
    "TOOL_ERROR",
    "LoopCall",
    "RunResult",
    "RunState",
    "field_of",
    "kind_of",
    "output_items",
    "released_calls",
]
