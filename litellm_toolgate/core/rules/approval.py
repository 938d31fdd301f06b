"""An approval bound to what was approved: the parts that are not I/O.

A human's yes is worth what it was given for. A :class:`Grant` keeps the four things it is
bound to: the argument digest (:func:`~.journal.argument_digest`: the canonical JSON's
keyed HMAC or SHA-256, never the text), the tool's schema digest, the approval policy's
version, and an expiry. :func:`grant_holds` checks all four again; any difference (other
arguments, a changed schema, a new policy version, an expired grant) means the approval no
longer holds and the human is asked again. A timeout is a grant with status ``EXPIRED``,
never ``DENIED``: nobody said no, and a report must not say somebody did.

What the approver sees is an :class:`ApprovalRequest`: ids, digests, the tool's name and
``shown``, a text for the human. ``shown`` is the output of the caller's ``render`` (the
caller decides what a human must see to judge, and owns that text), or by default
:func:`describe`'s summary: the argument names the schema declares, each value's JSON type
and size, and no value. ``arguments`` is only set when the caller opts in. Neither is in the
request's ``repr``, and the gate never logs a request.
"""

from __future__ import annotations

import hmac
import math
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from .journal import ApprovalStatus

__all__ = ["ApprovalRequest", "Grant", "describe", "grant_holds"]


@dataclass(frozen=True, slots=True)
class Grant:
    """An approver's answer, bound to what it answered for. Holds digests, never text."""

    status: ApprovalStatus
    argument_digest: str
    schema_digest: str
    policy_version: str
    expires_at: float | None
    """UTC epoch seconds after which an ``APPROVED`` grant no longer holds; None for the
    other statuses (a denial or a timeout never holds)."""


def grant_holds(
    grant: Grant | None,
    *,
    argument_digest: str,
    schema_digest: str,
    policy_version: str,
    now: float,
) -> bool:
    """True when ``grant`` approved exactly these arguments, schema and policy, unexpired."""
    if grant is None or grant.status is not ApprovalStatus.APPROVED:
        return False
    if grant.expires_at is None or not math.isfinite(grant.expires_at) or now >= grant.expires_at:
        return False
    return (
        hmac.compare_digest(grant.argument_digest, argument_digest)
        and hmac.compare_digest(grant.schema_digest, schema_digest)
        and grant.policy_version == policy_version
    )


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What the approver is given. ``shown`` and ``arguments`` are kept out of ``repr``."""

    tool: str
    call_id: str
    attempt_id: str
    argument_digest: str
    schema_digest: str
    policy_version: str
    again: bool
    """True when an earlier approval of this call no longer holds and the human is asked
    again (at the start of the run, say, after the arguments or the schema changed)."""
    shown: str = field(repr=False)
    """The text for the human: the caller's ``render(call)``, or :func:`describe`."""
    arguments: Mapping[str, Any] | None = field(default=None, repr=False)
    """The parsed arguments, only when the policy was built with ``show_arguments=True``."""


_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "number"),
    (str, "string"),
    (list, "array"),
    (Mapping, "object"),
)


def describe(tool: str, arguments: Mapping[str, Any], declared: Collection[str]) -> str:
    """A value-free summary: ``write_file(path: string[12], content: string[300])``.

    Only argument names the schema declares are named (a name the model made up is content:
    it is shown as ``*``); strings give their length, arrays and objects their item count.
    """
    parts: list[str] = []
    for key in sorted(arguments, key=lambda k: (k not in declared, k if k in declared else "")):
        parts.append(f"{key if key in declared else '*'}: {_shape(arguments[key])}")
    return f"{tool}({', '.join(parts)})"


def _shape(value: Any) -> str:
    if value is None:
        return "null"
    kind = next((name for t, name in _JSON_TYPES if isinstance(value, t)), "value")
    if isinstance(value, str | list | Mapping):
        return f"{kind}[{len(value)}]"
    return kind
