"""What the policy sees and what it answers.

The policy runs after the schema: it gets each validated call (the parsed value included,
since path scope and command rules need it) and answers approve or deny with a reason. The
reason goes into the decision record and the logs, so it must not quote argument values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call that passed terminal, parse and schema. ``arguments`` is kept out of ``repr``.

    ``type`` is the Responses item type the call came as (``function_call`` for every chat
    tool call and Responses function call; ``custom_tool_call``, ``shell_call``,
    ``apply_patch_call``... or a hosted tool's report such as ``web_search_call``), and
    ``executor`` who runs it: ``client`` (the caller, once released) or ``server`` (the
    upstream already did; the item is a report, never released to run). A policy can
    allow ``web_search_call`` and deny ``shell_call``. For a structured item
    ``arguments`` is its action or operation; for a custom tool ``{"input": text}``.
    """

    attempt_id: str
    index: int
    call_id: str
    name: str
    arguments: Mapping[str, Any] = field(repr=False)
    type: str = "function_call"
    executor: str = "client"
    choice: int = 0
    """The chat choice the call came in (0 unless the request asked for ``n > 1``)."""


@dataclass(frozen=True, slots=True)
class PolicyDecision:
    approved: bool
    reason: str | None = None

    @classmethod
    def approve(cls, reason: str | None = None) -> PolicyDecision:
        if reason is None and cls is PolicyDecision:
            return _APPROVED  # immutable: one answer serves every call
        return cls(True, reason)

    @classmethod
    def deny(cls, reason: str) -> PolicyDecision:
        return cls(False, reason)


_APPROVED = PolicyDecision(True)
_DENIED = PolicyDecision(False)

PolicyResult = PolicyDecision | bool
Policy = Callable[[ToolCall], PolicyResult | Awaitable[PolicyResult]]
"""A sync or async callable; ``True``/``False`` are shorthands for approve/deny."""


def as_decision(result: object) -> PolicyDecision | None:
    """Normalize a policy's answer; None when the answer is not one the gate understands."""
    if isinstance(result, PolicyDecision):
        return result
    if isinstance(result, bool):
        return _APPROVED if result else _DENIED
    return None


class ReleasedCall:
    """A call released to the caller: ``arguments`` is the wire's text, byte for byte.

    The gate withholds argument text as UTF-8 bytes. ``arguments`` may be given as those
    bytes (``surrogatepass``); the text is then decoded when it is first read, so a release
    whose text nobody reads (a carrier that hands on the upstream's own events) never makes
    it. Immutable; ``repr`` shows neither the text nor the value.
    """

    __slots__ = ("_text", "_utf8", "call_id", "choice", "index", "name", "value")

    index: int
    choice: int
    """The chat choice the call came in (0 unless the request asked for ``n > 1``)."""
    call_id: str
    name: str
    value: Mapping[str, Any]
    _text: str | None
    _utf8: bytes | None

    def __init__(
        self,
        index: int,
        call_id: str,
        name: str,
        arguments: str | bytes,
        value: Mapping[str, Any],
        *,
        choice: int = 0,
    ) -> None:
        text, utf8 = (None, arguments) if isinstance(arguments, bytes) else (arguments, None)
        for slot, item in (
            ("index", index),
            ("choice", choice),
            ("call_id", call_id),
            ("name", name),
            ("value", value),
            ("_text", text),
            ("_utf8", utf8),
        ):
            object.__setattr__(self, slot, item)

    @property
    def arguments(self) -> str:
        text: str | None = self._text
        if text is None:
            utf8: bytes | None = self._utf8
            if utf8 is None:  # another thread decoded it just now (it sets the text first)
                text = self._text
                assert text is not None
                return text
            text = utf8.decode("utf-8", "surrogatepass")
            # The same text whichever thread decodes first; the bytes are not needed after.
            object.__setattr__(self, "_text", text)
            object.__setattr__(self, "_utf8", None)
        return text

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"ReleasedCall is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"ReleasedCall is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ReleasedCall):
            return NotImplemented
        return (self.index, self.choice, self.call_id, self.name, self.arguments, self.value) == (
            other.index,
            other.choice,
            other.call_id,
            other.name,
            other.arguments,
            other.value,
        )

    __hash__ = None  # type: ignore[assignment]  # its value is a dict

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        # Pickled and copied through the constructor (the slots refuse assignment).
        fields = (self.index, self.call_id, self.name, self.arguments, self.value, self.choice)
        return (_released_call, (fields,))

    def __repr__(self) -> str:
        choice = f", choice={self.choice!r}" if self.choice else ""
        return (
            f"ReleasedCall(index={self.index!r}{choice}, call_id={self.call_id!r}, "
            f"name={self.name!r})"
        )


def _released_call(fields: tuple[int, str, str, str, Mapping[str, Any], int]) -> ReleasedCall:
    """A :class:`ReleasedCall` from its pickled fields (see ``ReleasedCall.__reduce__``)."""
    index, call_id, name, arguments, value, choice = fields
    return ReleasedCall(index, call_id, name, arguments, value, choice=choice)
