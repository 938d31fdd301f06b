"""The Anthropic Messages wire: what each block and event is, and what may pass live.

A message is a sequence of content blocks, each opened by ``content_block_start`` (which
names the block's type), fed by ``content_block_delta`` events and closed by
``content_block_stop``; ``message_delta`` carries the stop reason and ``message_stop`` ends
the message. The tables here say, once, for the normalizer (``core/anthropic.py``), the
withholding client and the ``/v1/messages`` carrier alike:

* which block types are text that may reach the caller before the decision
  (:data:`PASSING_BLOCKS`); ``tool_use`` is the one block type the gate gates; every other
  type (server tools, unknown blocks) is refused by the normalizer and held by the carriers;
* which delta type belongs to which block type (:data:`DELTA_OWNERS`);
* what kind each event is (:class:`EventClassifier`), and so what may pass live
  (:data:`LIVE_KINDS`): lifecycle events and the events of a text block. A call, the
  terminal events and anything unknown are held;
* when the stop reason contradicts the blocks streamed (:func:`stop_reason_fault`).

Calls hide on this wire only in blocks: a block whose start the classifier did not see as
text is held, whatever its type, so a call in a block the gate does not know cannot pass.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from ..errors import QuarantineReason

TOOL_USE = "tool_use"
"""The block type of a call the caller runs, and the stop reason that releases calls."""

PASSING_BLOCKS = frozenset({"text", "thinking", "redacted_thinking"})
"""Block types that carry only what the caller reads (thinking is never looked into)."""

DELTA_OWNERS = {
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
    "input_json_delta": TOOL_USE,
}
"""The block type each delta type belongs to."""

BLOCK_EVENTS = frozenset({"content_block_start", "content_block_delta", "content_block_stop"})
CONTENT_EVENTS = BLOCK_EVENTS | {"message_delta"}
LIFECYCLE_EVENTS = frozenset({"message_start", "ping"})
TERMINAL_EVENTS = frozenset({"message_delta", "message_stop", "error"})

Kind = Literal["lifecycle", "text", "call", "terminal", "unknown"]
LIVE_KINDS: frozenset[Kind] = frozenset({"lifecycle", "text"})
"""The kinds of event that may reach the caller before the decision."""


def stop_reason_fault(stop_reason: str | None, calls: bool) -> QuarantineReason | None:
    """Whether the wire's ``stop_reason`` contradicts the tool blocks it streamed.

    Tool blocks are released only under ``tool_use``; ``tool_use`` without a tool block is
    a contradiction too. A ``refusal`` stop with tool blocks is a refusal.
    """
    if calls == (stop_reason == TOOL_USE):
        return None
    return (
        QuarantineReason.REFUSAL
        if stop_reason == "refusal"
        else (QuarantineReason.FINISH_REASON_MISMATCH)
    )


class EventClassifier:
    """What kind each event of one Anthropic stream is, for a carrier that withholds.

    ``"lifecycle"`` (``message_start``, ``ping``) and ``"text"`` (every event of a block of
    :data:`PASSING_BLOCKS`) may pass; ``"call"`` (every event of any other block:
    ``tool_use``, server tools, unknown types, or a block this classifier never saw start),
    ``"terminal"`` (``message_delta``, ``message_stop``, ``error``) and ``"unknown"`` events
    are held. Stateful: a block's type is learnt from its ``content_block_start``.
    """

    def __init__(self) -> None:
        self._text_blocks: set[int] = set()

    def classify(self, obj: Mapping[str, Any]) -> Kind:
        kind = obj.get("type")
        if kind in LIFECYCLE_EVENTS:
            return "lifecycle"
        if kind in TERMINAL_EVENTS:
            return "terminal"
        index = obj.get("index")
        if kind == "content_block_start":
            block = obj.get("content_block")
            block_type = block.get("type") if isinstance(block, dict) else None
            if block_type in PASSING_BLOCKS and isinstance(index, int):
                self._text_blocks.add(index)
                return "text"
            return "call"
        if kind in BLOCK_EVENTS:
            return "text" if index in self._text_blocks else "call"
        return "unknown"

    def passes_live(self, obj: Mapping[str, Any]) -> bool:
        """Whether this event may reach the caller before the decision."""
        return self.classify(obj) in LIVE_KINDS
