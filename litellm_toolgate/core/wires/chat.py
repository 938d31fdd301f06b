"""The chat-completions wire: what may pass before the decision, and what a request may ask.

The normalizer (``core/chat.py``) reads every chunk in full. The withholding client needs a
cheaper, one-sided answer for each chunk it is about to pass on: does it carry only visible
text (role, content, reasoning) for choice 0, nothing of a tool call, no finish reason? That
answer lives here, once: :func:`passes_live`. A chunk it does not pass is held until the
gate decided.

Calls hide on this wire only in ``delta.tool_calls``, the legacy ``delta.function_call``
and, in a whole body, ``message.tool_calls``; any delta key other than the visible-text ones
is held, so a call in a field the gate does not know cannot pass live either.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import QuarantineReason

VISIBLE_DELTA_KEYS = frozenset({"role", "content", "refusal", "reasoning_content"})
"""Delta fields that carry only what the caller reads (a refusal is a fault, found later)."""

LITELLM_VISIBLE_DELTA_FIELDS: tuple[str, ...] = (
    *sorted(VISIBLE_DELTA_KEYS - {"refusal"}),
    "thinking_blocks",
    "audio",
    "images",
)
"""The same rule read on litellm's chat chunks: the fields of a delta that make a chunk worth
handing on once its tool calls are taken out (``edge/carrier.py``).

They are the wire's visible fields less ``refusal`` (a refusal with text is a fault on the
wire, so its chunk is never handed on), plus the fields litellm itself fills from other
providers' wires: ``thinking_blocks`` (reasoning), ``audio`` and ``images``. ``content``
comes first: it is the field most chunks carry, and the check stops at the first one set.
"""


def passes_live(chunk: Mapping[str, Any]) -> bool:
    """Whether a chat chunk holds nothing the gate withholds: text, role or usage only."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return False
        if choice.get("finish_reason") is not None:
            return False
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return False
        if any(v is not None for k, v in delta.items() if k not in VISIBLE_DELTA_KEYS):
            return False
    return True


REQUEST_FIELDS = ("n", "tool_choice")
"""The top-level fields of a chat request the gate reads (``Attempt.bind_request``)."""


def request_fields(body: bytes) -> dict[str, object]:
    """The :data:`REQUEST_FIELDS` a chat request body holds; none when it is no JSON object."""
    try:
        value = json.loads(body) if body else None
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: value[k] for k in REQUEST_FIELDS if k in value}


def request_fault(fields: Mapping[str, Any]) -> QuarantineReason | None:
    """Why a chat request cannot be gated as asked, before it is sent; None when it can.

    ``n`` greater than one asks for several choices, each with its own calls and terminal.
    The gate reads choice 0 only, so such a request is refused before any byte goes out,
    rather than refusing a stream after another choice's text was already shown.
    """
    n = fields.get("n")
    if n is None or n == 1:
        return None
    return QuarantineReason.UNSUPPORTED_REQUEST
