"""The quarantine as litellm expects a guardrail's refusal: one twin per family.

The core builds :class:`ToolCallQuarantined` and its families without knowing litellm. When a
quarantine has to travel *through* litellm to reach the caller (the gate as a callback, where
the transport raises inside litellm's stream or request), litellm would wrap a plain
exception in one of its own (``MidStreamFallbackError``, ``BadRequestError``, ...), print its
help banner, and let a ``Router`` re-send the request to another deployment. A guardrail
intervention is the one kind of exception litellm passes through unchanged and never retries:
an instance of its ``GuardrailRaisedException`` with a 4xx ``status_code`` other than 429.

So each family has a twin here that is both: ``except SchemaRejected`` (or any base up to
``ToolCallQuarantined``) catches it, with the same ``reason``, ``records``, ``attempt_id``
and message; litellm sees a guardrail intervention. ``status_code`` is the family's own where
that is already a 4xx (403, 413, 422) and 422 for the families the proxy answers with 5xx
(the proxy raises the core's classes and keeps those statuses). :class:`WireUnread` (a route
not gated, a wire not observed, a request refused before it was sent) has its twin too:
every reason the core has reaches a callback user as a family they can catch.

:func:`as_intervention` turns any core quarantine into its twin, freshly built, carrying no
chained exception.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import (
    ArgumentsRejected,
    CarrierMismatch,
    DuplicateCallId,
    Interrupted,
    LimitExceeded,
    LoopLimitExceeded,
    PolicyDenied,
    QuarantineReason,
    SchemaRejected,
    StreamFault,
    ToolCallQuarantined,
    WireUnread,
    quarantine,
)
from ..core.records.record import DecisionRecord
from .seam.symbols import GuardrailRaisedException

GUARDRAIL_NAME = "toolgate"


def set_guardrail_fields(
    error: GuardrailRaisedException, message: str, *, status_code: int, blocked_content: bool
) -> None:
    """Give a gate's ``GuardrailRaisedException`` litellm's fields for ``message``: its base
    ``__init__`` (run by the gate's own base, or not at all) leaves them wrong or unset."""
    error.guardrail_name = GUARDRAIL_NAME
    error.message = message
    error.blocked_content = blocked_content
    error.status_code = status_code
    error.args = (message,)


def _rebuild(
    reason: QuarantineReason,
    attempt_id: str,
    records: Sequence[DecisionRecord],
    call_index: int | None,
) -> ToolCallQuarantined:
    return _TWINS[reason.family](reason, attempt_id, records, call_index=call_index)


def _reduce(self: Any) -> tuple[object, ...]:
    return (_rebuild, (self.reason, self.attempt_id, self.records, self.call_index))


def _twin(family: type[ToolCallQuarantined]) -> type[ToolCallQuarantined]:
    status = family.status_code if 400 <= family.status_code < 500 else 422

    def __init__(
        self: Any,
        reason: QuarantineReason,
        attempt_id: str,
        records: Sequence[DecisionRecord] = (),
        *,
        call_index: int | None = None,
    ) -> None:
        # The core's message, exactly (ids, counts and a reason only).
        message = str(quarantine(reason, attempt_id, records, call_index=call_index))
        family.__init__(self, reason, attempt_id, records, call_index=call_index)
        # GuardrailRaisedException.__init__ ran next in the MRO, with that message as the
        # guardrail's name: put its fields right.
        set_guardrail_fields(self, message, status_code=status, blocked_content=True)

    twin = type(
        family.__name__,
        (family, GuardrailRaisedException),
        {
            "__init__": __init__,
            "__module__": __name__,
            "__qualname__": family.__name__,
            "__doc__": f"{family.__name__}, as a litellm guardrail intervention.",
            "status_code": status,
            "__reduce__": _reduce,
        },
    )
    return twin


_TWINS: dict[type[ToolCallQuarantined], type[ToolCallQuarantined]] = {
    family: _twin(family)
    for family in (
        StreamFault,
        Interrupted,
        ArgumentsRejected,
        SchemaRejected,
        PolicyDenied,
        LimitExceeded,
        LoopLimitExceeded,
        DuplicateCallId,
        CarrierMismatch,
        WireUnread,
    )
}


def as_intervention(fault: ToolCallQuarantined) -> ToolCallQuarantined:
    """``fault`` as its litellm-flavoured twin (a new object with the same fields)."""
    if isinstance(fault, GuardrailRaisedException):
        return fault
    return _rebuild(fault.reason, fault.attempt_id, fault.records, fault.call_index)


def is_intervention(error: BaseException) -> bool:
    return isinstance(error, ToolCallQuarantined) and isinstance(error, GuardrailRaisedException)


__all__ = ["GUARDRAIL_NAME", "as_intervention", "is_intervention", "set_guardrail_fields"]
