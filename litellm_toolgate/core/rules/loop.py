"""The tool loop's rules, sans-I/O: its bounds, the call-id rule, and the conversation.

``gate.run`` (the edge, :mod:`litellm_toolgate.run.loop`) streams rounds through the gate
and runs the released calls. What it decides without I/O lives here:

- :class:`LoopLimits`: rounds (model requests) per run, calls per round, calls per run. The
  defaults follow the specification: at most three model requests, four calls a round, and
  the last request must answer in text, so at most eight calls a run.
- :func:`check_round`: whether a round's released calls may run at all. A round past the
  bounds, or one reusing a call id seen anywhere earlier in the run (or twice in itself), is
  refused whole: nothing of it is decided or run.
- :func:`pending_calls`: on a resume, the calls of the conversation's last model turn that
  have no result yet (chat: the last assistant message's ``tool_calls`` without a ``role:
  "tool"`` answer; Responses: the trailing ``function_call`` items without a
  ``function_call_output``). The journal never holds argument text; the conversation the
  caller kept is where a resumed call's arguments come from.
- :func:`result_text` and :func:`result_digest`: what a tool's return value becomes for the
  model, and its digest for the journal (never the text itself).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from ..errors import GateConfigError, QuarantineReason
from .journal import JournalRow

R = QuarantineReason


@dataclass(frozen=True, slots=True)
class LoopLimits:
    """Bounds of one run. Every field must be a positive integer."""

    max_rounds: int = 3
    """Model requests one run may make; the last one must answer without calls."""
    max_calls_per_round: int = 4
    """Released calls one model turn may carry."""
    max_calls: int = 8
    """Released calls one run may carry in all (resumed rounds included)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise GateConfigError(f"LoopLimits.{f.name} must be a positive integer")


def check_round(
    limits: LoopLimits,
    round_index: int,
    call_ids: Sequence[str],
    seen: Iterable[str],
    calls_so_far: int,
) -> QuarantineReason | None:
    """Why the calls one round released may not run, or None when they may.

    ``seen``: every call id used earlier in the run; ``calls_so_far``: how many calls the run
    released before this round. A round without calls is always fine (the final answer).
    """
    if not call_ids:
        return None
    if round_index >= limits.max_rounds - 1:
        return R.TOO_MANY_ROUNDS
    if len(call_ids) > limits.max_calls_per_round:
        return R.TOO_MANY_CALLS_IN_ROUND
    if calls_so_far + len(call_ids) > limits.max_calls:
        return R.TOO_MANY_CALLS_IN_RUN
    earlier = set(seen)
    if len(set(call_ids)) != len(call_ids) or not earlier.isdisjoint(call_ids):
        return R.CALL_ID_REUSED
    return None


@dataclass(frozen=True, slots=True)
class PendingCall:
    """A call of the conversation's last model turn that has no result yet."""

    call_id: str
    name: str
    arguments: str

    def __repr__(self) -> str:
        return f"PendingCall(call_id={self.call_id!r}, name={self.name!r})"


def _get(item: Any, key: str) -> Any:
    return item.get(key) if isinstance(item, Mapping) else getattr(item, key, None)


def pending_calls(conversation: Sequence[Any], *, api: str) -> list[PendingCall]:
    """The last model turn's calls that no result answers yet (see the module's text)."""
    if api == "chat":
        return _pending_chat(conversation)
    return _pending_responses(conversation)


def _pending_chat(messages: Sequence[Any]) -> list[PendingCall]:
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if _get(message, "role") != "assistant" or not _get(message, "tool_calls"):
            continue
        answered = {
            _get(m, "tool_call_id") for m in messages[position + 1 :] if _get(m, "role") == "tool"
        }
        calls = []
        for call in _get(message, "tool_calls"):
            function = _get(call, "function")
            if _get(call, "id") not in answered:
                calls.append(
                    PendingCall(
                        str(_get(call, "id")),
                        str(_get(function, "name")),
                        str(_get(function, "arguments") or ""),
                    )
                )
        return calls
    return []


def _pending_responses(items: Sequence[Any]) -> list[PendingCall]:
    answered = {_get(i, "call_id") for i in items if _get(i, "type") == "function_call_output"}
    calls: list[PendingCall] = []
    # The last model turn: the trailing run of model output items and their outputs.
    for item in reversed(items):
        kind = _get(item, "type")
        if kind == "function_call":
            if _get(item, "call_id") not in answered:
                calls.append(
                    PendingCall(
                        str(_get(item, "call_id")),
                        str(_get(item, "name")),
                        str(_get(item, "arguments") or ""),
                    )
                )
        elif kind not in ("function_call_output", "reasoning", "message") or (
            kind == "message" and _get(item, "role") != "assistant"
        ):
            break
    calls.reverse()
    return calls


def result_text(value: Any) -> str:
    """What a tool's return value becomes for the model: a string as it is, anything else
    as JSON (no NaN or infinities: a value that cannot be JSON is the tool's failure)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))


def result_digest(text: str, *, hmac_key: bytes | None) -> str:
    """A full-length digest of a result's text for the journal (keyed where a key is set)."""
    data = text.encode("utf-8", "surrogatepass")
    if hmac_key is not None:
        return "hmac-sha256:" + hmac.new(hmac_key, data, hashlib.sha256).hexdigest()
    return "sha256:" + hashlib.sha256(data).hexdigest()


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


__all__ = [
    "RunResult",
    "LoopLimits",
    "PendingCall",
    "check_round",
    "pending_calls",
    "result_digest",
    "result_text",
]
