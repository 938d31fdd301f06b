"""What the caller of ``gate.messages()`` is handed: Anthropic events, tool blocks withheld.

litellm's Anthropic-format entry point (``litellm.anthropic.messages.create`` /
``acreate``, what the proxy's ``/v1/messages`` calls) yields the Anthropic SSE stream as
bytes: passed through from an ``anthropic/`` upstream (in whatever pieces the socket gave),
or made by litellm, one event per piece, from a chat-completions upstream. Here those bytes
are the carrier. They are decoded into events again and classified by the core
(:class:`~litellm_toolgate.core.wires.anthropic.EventClassifier`): ``message_start``, ``ping`` and
the events of text and thinking blocks pass as they come; from the first event of any other
block (``tool_use`` above all), of the terminal (``message_delta``, ``message_stop``,
``error``) or of an unknown type, everything is held, so the caller's content blocks keep
their order. While holding, :class:`AnthropicEvents` assembles each tool block as the carrier
shows it (keyed by block index) for the attempt to compare with the wire. After the attempt
released, the held events go out in their original order: the caller sees the tool blocks
right before ``message_delta`` and ``message_stop``. On a quarantine nothing held goes out.

Each event goes out as ``event: <type>`` + its ``data`` line(s), the way it arrived. No I/O.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

from ...core.decision.attempt import Carrier, CarrierCall
from ...core.errors import Fault
from ...core.framing.sse import SSEDecoder, SSEMessage
from ...core.rules.policy import ReleasedCall
from ...core.wires.anthropic import LIVE_KINDS, TOOL_USE, EventClassifier

# litellm's carrier is decoded with limits of its own; the wire's limits bound the wire.
_MAX_EVENT_BYTES = 16 * 1024 * 1024


@dataclass
class _Assembled:
    call_id: str | None
    name: str | None
    start_input: str
    fragments: list[str] = field(default_factory=list)

    @property
    def arguments(self) -> str:
        return "".join(self.fragments) if self.fragments else self.start_input


def _encode(message: SSEMessage) -> bytes:
    head = f"event: {message.event}\n" if message.event else ""
    lines = "".join(f"data: {line}\n" for line in message.data.split("\n"))
    return f"{head}{lines}\n".encode()


class AnthropicEvents:
    """Withholds an Anthropic event stream (bytes) from the first tool block on. No I/O."""

    def __init__(self) -> None:
        self._decoder = SSEDecoder(max_event_bytes=_MAX_EVENT_BYTES)
        self._classifier = EventClassifier()
        self.calls: dict[int, _Assembled] = {}
        self.held: list[bytes] = []
        self.holding = False
        self.finish_reason: str | None = None
        self.foreign = False
        self._flushed = False

    def admit(self, item: Any) -> bytes | None:
        """The bytes to pass on now (whole events only), or None."""
        if isinstance(item, str):
            item = item.encode()
        if not isinstance(item, bytes | bytearray):
            self.foreign = True  # not an SSE byte stream: nothing the check can read
            self.holding = True
            return None
        passed = [self._message(m) for m in self._feed(bytes(item))]
        out = b"".join(p for p in passed if p is not None)
        return out or None

    def _feed(self, data: bytes) -> list[SSEMessage]:
        messages: list[SSEMessage] = []
        with contextlib.suppress(Fault):
            messages = self._decoder.feed(data)
        if self._decoder.error is not None:
            self.foreign = self.holding = True  # the carrier broke SSE: nothing more passes
        return messages

    def _message(self, message: SSEMessage) -> bytes | None:
        encoded = _encode(message)
        try:
            obj = json.loads(message.data)
        except ValueError:
            obj = None
        if not isinstance(obj, dict):
            self.foreign = True
            obj = {}
        kind = self._classifier.classify(obj)
        if message.event == "error":
            kind = "terminal"
        if kind == "call":
            self._assemble(obj)
        elif obj.get("type") == "message_delta":
            delta = obj.get("delta")
            stop = delta.get("stop_reason") if isinstance(delta, dict) else None
            if stop is not None:
                self.finish_reason = stop if self.finish_reason is None else "<repeated>"
        if self.holding or kind not in LIVE_KINDS:
            self.holding = True
            self.held.append(encoded)
            return None
        return encoded

    def _assemble(self, obj: dict[str, Any]) -> None:
        index = obj.get("index")
        kind = obj.get("type")
        if not isinstance(index, int):
            self.foreign = True
            return
        if kind == "content_block_start":
            block = obj.get("content_block") or {}
            if block.get("type") != TOOL_USE or index in self.calls:
                self.foreign = True  # a server tool or an unknown block: never released
                return
            value = block.get("input")
            start = "{}" if value in ({}, None) else json.dumps(value, ensure_ascii=False)
            self.calls[index] = _Assembled(block.get("id"), block.get("name"), start)
        elif kind == "content_block_delta":
            call = self.calls.get(index)
            delta = obj.get("delta") or {}
            if call is None or delta.get("type") != "input_json_delta":
                self.foreign = True
                return
            fragment = delta.get("partial_json")
            if not isinstance(fragment, str):
                self.foreign = True
            elif fragment:
                if call.start_input != "{}":
                    self.foreign = True
                call.fragments.append(fragment)

    def carrier(self) -> Carrier:
        if not self._flushed:
            self._flushed = True
            # A carrier that ends inside an event broke off: it disagrees with a clean wire.
            if self._decoder.error is not None or self._decoder.pending:
                self.foreign = True
        return Carrier(
            {i: CarrierCall(c.call_id, c.name, c.arguments) for i, c in self.calls.items()},
            self.finish_reason,
            foreign=self.foreign,
            kind="anthropic",
        )

    def release(self, released: list[ReleasedCall]) -> list[bytes]:
        # The held events are litellm's own, their tool blocks just found equal to the wire.
        return list(self.held)


def message_carrier(result: Any) -> Carrier:
    """What litellm made of a whole (``stream=False``) Anthropic message, for the check."""
    body = result if isinstance(result, dict) else getattr(result, "__dict__", {})
    content = body.get("content")
    calls: dict[int, CarrierCall] = {}
    foreign = not isinstance(content, list)
    for index, block in enumerate(content if isinstance(content, list) else []):
        kind = block.get("type") if isinstance(block, dict) else getattr(block, "type", None)
        if kind in ("text", "thinking", "redacted_thinking"):
            continue
        if kind != TOOL_USE or not isinstance(block, dict):
            foreign = True
            continue
        calls[index] = CarrierCall(
            block.get("id"), block.get("name"), json.dumps(block.get("input"), ensure_ascii=False)
        )
    stop = body.get("stop_reason")
    return Carrier(
        calls, stop if isinstance(stop, str) else None, foreign=foreign, kind="anthropic"
    )
