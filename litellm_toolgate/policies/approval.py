"""Human approval as a gate policy, bound to what was approved, waited for with a timeout.

:class:`ApprovalPolicy` is a gate policy: for every call of the tools it covers it builds
an :class:`~litellm_toolgate.core.rules.approval.ApprovalRequest` (ids, digests and a text for the
human; no argument text unless the caller opts in) and calls the caller's ``ask`` with it,
sync or async, waiting at most ``timeout`` seconds. ``ask`` answers ``True``/``False`` (or a
:class:`PolicyDecision`, of which only ``approved`` counts). The answer becomes a
:class:`~litellm_toolgate.core.rules.approval.Grant` bound to the argument digest, the tool's
schema digest, the policy's ``version`` and an expiry (``ttl`` seconds after the answer).
No answer in time is a grant with status ``EXPIRED`` and a denial with reason
``approval_expired``, never a human's ``approval_denied``. An ``ask`` (or ``render``) that
raises or answers nonsense denies with ``approval_failed``; its exception is dropped, since
it may quote the arguments.

Where grants live: in this policy's own bounded memory, keyed by tool and call id, and, once
the tool loop has journaled the call, in the journal row's approval columns
(``Journal.record_approval``). A call whose grant still holds (same arguments, schema and
version, unexpired) is approved again without asking; any other is asked.

At the start of a call the loop calls :meth:`ApprovalPolicy.confirm` (or ``aconfirm``) with
the journal row: it binds the gate-time grant to the row, checks all four again
(:meth:`ApprovalPolicy.still_valid`) and asks again when it no longer holds.

Sync or async: an ``ask`` that is a coroutine function is awaited under
``asyncio.wait_for`` (the policy is then async: use it with ``acompletion``, or with the sync
calls outside an event loop). A sync ``ask`` runs on a daemon thread the policy waits on; on
a timeout the thread is left to finish and its answer is ignored. A sync ``ask`` blocks the
calling thread while it waits: under an event loop, give an async one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol

from ..core.errors import GateConfigError
from ..core.rules.approval import ApprovalRequest, Grant, describe, grant_holds
from ..core.rules.compose import DenyReason, GatePolicy, deny
from ..core.rules.journal import ApprovalStatus, JournalRow, argument_digest, schema_digest
from ..core.rules.policy import PolicyDecision, ReleasedCall, ToolCall, as_decision
from ..core.values.registry import ToolRegistry
from .approver import FAILED, NO_ANSWER, awaited, is_async, loop_running, wait_in_thread

__all__ = ["ApprovalPolicy", "ApprovalRequest", "Grant"]

Ask = Callable[[ApprovalRequest], Any]
"""``ask(request) -> bool | PolicyDecision``, or a coroutine function answering the same."""
Render = Callable[[ToolCall], str]


class ApprovalJournal(Protocol):
    """The part of the run journal an approval writes to."""

    def record_approval(
        self,
        key: str,
        *,
        status: ApprovalStatus,
        argument_digest: str,
        schema_digest: str,
        policy_version: str,
        expires_at: float | None,
    ) -> JournalRow: ...


_MAX_GRANTS = 10_000


class ApprovalPolicy(GatePolicy):
    """Ask a human (through ``ask``) before a call is released; see the module docstring.

    ``tools``: the tool declarations (chat or Responses shape, as given to the gate): the
    schema each grant is bound to. ``version``: this policy's version; change it when the
    rules a human approved under change, and every earlier grant stops holding. ``only``:
    the tools that need approval (default: all of ``tools``); other tools' calls pass, and a
    call of a covered name missing from ``tools`` is denied. ``hmac_key``: the key of the
    argument digests; give the journal's key so that digests agree.
    """

    def __init__(
        self,
        ask: Ask,
        *,
        tools: Any,
        version: str,
        timeout: float = 300.0,
        ttl: float = 900.0,
        only: Collection[str] | None = None,
        render: Render | None = None,
        show_arguments: bool = False,
        hmac_key: bytes | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not callable(ask):
            raise GateConfigError("ApprovalPolicy: ask must be a callable (sync or async)")
        if not isinstance(version, str) or not version:
            raise GateConfigError("ApprovalPolicy: version must be a non-empty string")
        for name, value in (("timeout", timeout), ("ttl", ttl)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise GateConfigError(f"ApprovalPolicy: {name} must be a positive number")
            if value == float("inf"):
                raise GateConfigError(f"ApprovalPolicy: {name} must be finite")
        if render is not None and not callable(render):
            raise GateConfigError("ApprovalPolicy: render must be a callable or None")
        if not isinstance(show_arguments, bool):
            raise GateConfigError("ApprovalPolicy: show_arguments must be True or False")
        if hmac_key is not None and (not isinstance(hmac_key, bytes) or not hmac_key):
            raise GateConfigError("ApprovalPolicy: hmac_key must be non-empty bytes or None")
        registry = ToolRegistry.from_tools(tools)
        self._schemas = {spec.name: schema_digest(dict(spec.schema)) for spec in registry}
        self._declared = {spec.name: spec.declared for spec in registry}
        covered = frozenset(self._schemas if only is None else only)
        if isinstance(only, str) or not all(isinstance(n, str) for n in covered):
            raise GateConfigError("ApprovalPolicy: only is a collection of tool names")
        self.ask = ask
        self.version = version
        self.timeout = float(timeout)
        self.ttl = float(ttl)
        self.only = covered
        self.render = render
        self.show_arguments = show_arguments
        self._hmac_key = hmac_key
        self._clock = clock
        self._async = is_async(ask)
        self._grants: OrderedDict[tuple[str, str], Grant] = OrderedDict()
        self._lock = threading.Lock()

    # -- the gate policy ------------------------------------------------------------------

    def __call__(self, call: ToolCall) -> PolicyDecision | Awaitable[PolicyDecision]:
        if call.name not in self.only:
            return PolicyDecision.approve()
        bound = self._bound(call)
        if isinstance(bound, PolicyDecision):
            return bound
        if self._async:
            return self._aask(call, bound, again=False, key=None, journal=None)
        return self._ask(call, bound, again=False, key=None, journal=None)

    # -- at the start of a journaled call -------------------------------------------------

    def still_valid(self, row: JournalRow, *, argument_digest: str, schema_digest: str) -> bool:
        """Whether the approval of ``row``'s call still holds for these digests, now.

        Reads the row's approval columns when it has them, else this policy's own grant for
        the row's call. Policy version and expiry are checked too.
        """
        grant = _grant_of(row) or self._grant(row.tool, row.call_id)
        return grant_holds(
            grant,
            argument_digest=argument_digest,
            schema_digest=schema_digest,
            policy_version=self.version,
            now=self._clock(),
        )

    def confirm(
        self,
        row: JournalRow,
        call: ToolCall | ReleasedCall,
        *,
        journal: ApprovalJournal | None = None,
        schema_digest: str | None = None,
    ) -> PolicyDecision:
        """At ``started``: the approval still holds, or the human is asked again (sync).

        With an async ``ask`` it runs the question to completion, so it cannot be called
        from inside an event loop: use :meth:`aconfirm` there (a ``GateConfigError``).
        """
        if self._async and loop_running():
            raise GateConfigError("ApprovalPolicy.confirm with an async ask: use aconfirm")
        prepared = self._prepare(row, call, journal, schema_digest)
        if isinstance(prepared, PolicyDecision):
            return prepared
        tool_call, bound = prepared
        if self._async:
            answer: PolicyDecision = asyncio.run(
                self._aask(tool_call, bound, again=True, key=row.idempotency_key, journal=journal)
            )
            return answer
        return self._ask(tool_call, bound, again=True, key=row.idempotency_key, journal=journal)

    async def aconfirm(
        self,
        row: JournalRow,
        call: ToolCall | ReleasedCall,
        *,
        journal: ApprovalJournal | None = None,
        schema_digest: str | None = None,
    ) -> PolicyDecision:
        """Async twin of :meth:`confirm`: the journal is written off the event loop, and a
        sync ``ask`` waits on its own thread."""
        if journal is None:
            prepared = self._prepare(row, call, journal, schema_digest)
        else:
            prepared = await asyncio.to_thread(self._prepare, row, call, journal, schema_digest)
        if isinstance(prepared, PolicyDecision):
            return prepared
        tool_call, bound = prepared
        key = row.idempotency_key
        if self._async:
            return await self._aask(tool_call, bound, again=True, key=key, journal=journal)
        return await asyncio.to_thread(
            self._ask, tool_call, bound, again=True, key=key, journal=journal
        )

    def _prepare(
        self,
        row: JournalRow,
        call: ToolCall | ReleasedCall,
        journal: ApprovalJournal | None,
        schema: str | None,
    ) -> PolicyDecision | tuple[ToolCall, tuple[str, str]]:
        if isinstance(call, ReleasedCall):
            call = ToolCall(row.attempt_id, call.index, call.call_id, call.name, call.value)
        if call.name not in self.only:
            return PolicyDecision.approve()
        bound = self._bound(call, reuse=False)
        if isinstance(bound, PolicyDecision):
            return bound
        digest, current_schema = bound
        current_schema = schema or current_schema
        # The gate-time grant goes into the row first, so that the row says what was approved.
        gate_time = self._grant(call.name, call.call_id)
        if journal is not None and row.approval_status is None and gate_time is not None:
            row = journal.record_approval(
                row.idempotency_key,
                status=gate_time.status,
                argument_digest=gate_time.argument_digest,
                schema_digest=gate_time.schema_digest,
                policy_version=gate_time.policy_version,
                expires_at=gate_time.expires_at,
            )
        if self.still_valid(row, argument_digest=digest, schema_digest=current_schema):
            return PolicyDecision.approve()
        return call, (digest, current_schema)

    # -- asking -----------------------------------------------------------------------------

    def _bound(self, call: ToolCall, *, reuse: bool = True) -> PolicyDecision | tuple[str, str]:
        """(argument digest, schema digest), or the decision when no human is needed."""
        schema = self._schemas.get(call.name)
        if schema is None:
            return deny(DenyReason.APPROVAL_UNKNOWN_TOOL)
        digest = argument_digest(dict(call.arguments), hmac_key=self._hmac_key)
        if reuse and grant_holds(
            self._grant(call.name, call.call_id),
            argument_digest=digest,
            schema_digest=schema,
            policy_version=self.version,
            now=self._clock(),
        ):
            return PolicyDecision.approve()
        return digest, schema

    def _request(self, call: ToolCall, bound: tuple[str, str], again: bool) -> ApprovalRequest:
        if self.render is None:
            shown = describe(call.name, call.arguments, self._declared.get(call.name, ()))
        else:
            shown = self.render(call)
            if not isinstance(shown, str):
                raise TypeError("render must return a str")
        return ApprovalRequest(
            tool=call.name,
            call_id=call.call_id,
            attempt_id=call.attempt_id,
            argument_digest=bound[0],
            schema_digest=bound[1],
            policy_version=self.version,
            again=again,
            shown=shown,
            arguments=call.arguments if self.show_arguments else None,
        )

    def _ask(
        self,
        call: ToolCall,
        bound: tuple[str, str],
        *,
        again: bool,
        key: str | None,
        journal: ApprovalJournal | None,
    ) -> PolicyDecision:
        request = self._safe_request(call, bound, again)
        answer = FAILED if request is None else wait_in_thread(self.ask, request, self.timeout)
        return self._settle(call, bound, answer, key, journal)

    async def _aask(
        self,
        call: ToolCall,
        bound: tuple[str, str],
        *,
        again: bool,
        key: str | None,
        journal: ApprovalJournal | None,
    ) -> PolicyDecision:
        request = self._safe_request(call, bound, again)
        answer: object = FAILED
        if request is not None:
            try:
                answer = await asyncio.wait_for(awaited(self.ask(request)), self.timeout)
            except TimeoutError:
                answer = NO_ANSWER
            except Exception:
                answer = FAILED  # may quote the arguments: dropped
        if journal is not None:
            return await asyncio.to_thread(self._settle, call, bound, answer, key, journal)
        return self._settle(call, bound, answer, key, journal)

    def _safe_request(
        self, call: ToolCall, bound: tuple[str, str], again: bool
    ) -> ApprovalRequest | None:
        try:
            return self._request(call, bound, again)
        except Exception:
            return None  # the renderer failed; its error may quote the arguments

    def _settle(
        self,
        call: ToolCall,
        bound: tuple[str, str],
        answer: object,
        key: str | None,
        journal: ApprovalJournal | None,
    ) -> PolicyDecision:
        if answer is FAILED:
            return deny(DenyReason.APPROVAL_FAILED)
        if answer is NO_ANSWER:
            status, decision = ApprovalStatus.EXPIRED, deny(DenyReason.APPROVAL_EXPIRED)
        else:
            verdict = as_decision(answer)
            if verdict is None:
                return deny(DenyReason.APPROVAL_FAILED)
            if verdict.approved:
                status, decision = ApprovalStatus.APPROVED, PolicyDecision.approve()
            else:
                status, decision = ApprovalStatus.DENIED, deny(DenyReason.APPROVAL_DENIED)
        now = self._clock()
        expires = now + self.ttl if status is ApprovalStatus.APPROVED else None
        grant = Grant(status, bound[0], bound[1], self.version, expires)
        self._keep(call.name, call.call_id, grant)
        if journal is not None and key is not None:
            journal.record_approval(
                key,
                status=status,
                argument_digest=grant.argument_digest,
                schema_digest=grant.schema_digest,
                policy_version=grant.policy_version,
                expires_at=grant.expires_at,
            )
        return decision

    # -- the in-memory grants -------------------------------------------------------------

    def grant(self, tool: str, call_id: str) -> Grant | None:
        """The latest grant this policy holds for a call (digests and status only)."""
        return self._grant(tool, call_id)

    def _grant(self, tool: str, call_id: str) -> Grant | None:
        with self._lock:
            return self._grants.get((tool, call_id))

    def _keep(self, tool: str, call_id: str, grant: Grant) -> None:
        with self._lock:
            grants = self._grants
            grants[(tool, call_id)] = grant
            grants.move_to_end((tool, call_id))
            while len(grants) > _MAX_GRANTS:
                grants.popitem(last=False)

    def __repr__(self) -> str:
        return f"ApprovalPolicy(version={self.version!r}, {len(self.only)} tools)"


def _grant_of(row: JournalRow) -> Grant | None:
    if row.approval_status is None:
        return None
    return Grant(
        row.approval_status,
        row.approval_argument_digest or "",
        row.approval_schema_digest or "",
        row.approval_policy_version or "",
        row.approval_expires_at,
    )
