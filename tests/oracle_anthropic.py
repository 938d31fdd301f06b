"""An independent reference for what the gate may release from an Anthropic Messages stream.

Written from ``docs/anthropic.md``'s rules, sharing no code with ``litellm_toolgate``: it
reuses only :mod:`oracle`'s own event-stream reader and strict JSON parser, and checks
schemas with jsonschema directly. It reads the whole decoded body and keeps its own record
of every content block.

:func:`judge` answers for one body: the calls that must be released, in block-index order,
as ``(index, id, name, arguments, value)``, or ``None`` for a quarantine. The rules:

* every message is a JSON object whose string ``type`` names the event, equal to the SSE
  ``event`` name when one is given (or that name is ``message``); a message named ``error``
  and an ``error`` event are errors;
* ``message_start`` comes once, before any block, ``message_delta`` or ``message_stop``;
  its message is an object with a non-empty string ``id`` and no content;
* ``content_block_start`` opens a non-negative integer index once, before the stop reason:
  ``text`` (its ``text`` a string if given), ``thinking``, ``redacted_thinking``, or
  ``tool_use`` with non-empty string ``id`` (unique) and ``name`` and an ``input`` equal to
  ``{}``; any other type is refused;
* deltas and stops name an open block; ``input_json_delta`` (a string ``partial_json``)
  belongs to tool blocks, ``text_delta`` (a string ``text``) and ``citations_delta`` to text,
  ``thinking_delta`` and ``signature_delta`` to thinking; an unknown delta type is refused on
  a tool block and ignored on others;
* ``message_delta`` finds every block stopped; a non-null ``stop_reason`` is a non-empty
  string, given once; ``message_stop`` follows it; then nothing but the end of the body;
* tool blocks are released only under ``stop_reason`` ``tool_use``, which needs at least one;
  at most 64 of them;
* a block's arguments are its ``partial_json`` strings joined, or ``{}`` when they are
  empty; each is one strict JSON object, valid against its tool's schema, approved by the
  policy.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from oracle import Reject, Released, sse_messages, strict_object

MAX_CALLS = 64
DELTA_OWNER = {
    "input_json_delta": "tool_use",
    "text_delta": "text",
    "citations_delta": "text",
    "thinking_delta": "thinking",
    "signature_delta": "thinking",
}
BLOCKS = {"text", "thinking", "redacted_thinking", "tool_use"}


def judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[Released] | None:
    """The calls the gate must release for this Anthropic body, or None for a quarantine."""
    try:
        return _Judge().run(body, schemas, policy)
    except Reject:
        return None


def _nonempty(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise Reject("not a non-empty string")
    return value


class _Judge:
    def __init__(self) -> None:
        self.started = False
        self.stage = "streaming"  # then "stopped" (a stop_reason), then "done" (message_stop)
        self.stop_reason: str | None = None
        self.kinds: dict[int, str] = {}
        self.open: set[int] = set()
        self.tools: dict[int, tuple[str, str, list[str]]] = {}
        self.ids: set[str] = set()

    def run(
        self,
        body: bytes,
        schemas: Mapping[str, Mapping[str, Any]],
        policy: Callable[[str, dict[str, Any]], bool],
    ) -> list[Released]:
        messages = sse_messages(body)
        if messages is None:
            raise Reject("utf-8")
        for name, data in messages:
            if self.stage == "done":
                raise Reject("a message after message_stop")
            if name == "error":
                raise Reject("error event")
            try:
                obj = json.loads(data)
            except (ValueError, RecursionError):
                raise Reject("not JSON") from None
            if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
                raise Reject("not an event")
            if name not in ("", "message", obj["type"]):
                raise Reject("event name disagrees")
            self.event(obj["type"], obj)
        if self.stage != "done":
            raise Reject("no message_stop")
        if bool(self.tools) != (self.stop_reason == "tool_use"):
            raise Reject("stop reason against the tool blocks")
        if len(self.tools) > MAX_CALLS:
            raise Reject("too many calls")
        out: list[Released] = []
        for index in sorted(self.tools):
            call_id, tool, parts = self.tools[index]
            arguments = "".join(parts) or "{}"
            value = strict_object(arguments)
            if tool not in schemas:
                raise Reject("unknown tool")
            if not Draft202012Validator(schemas[tool]).is_valid(value):
                raise Reject("schema")
            if not policy(tool, value):
                raise Reject("policy")
            out.append((index, call_id, tool, arguments, value))
        return out

    def event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "error":
            raise Reject("error")
        if kind == "message_start":
            if self.started:
                raise Reject("a second message_start")
            message = obj.get("message")
            if not isinstance(message, dict):
                raise Reject("message")
            _nonempty(message.get("id"))
            if message.get("content") not in (None, []):
                raise Reject("content in message_start")
            self.started = True
            return
        if kind in ("ping",) or kind not in (
            "content_block_start",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop",
        ):
            return  # ping and unknown events
        if not self.started:
            raise Reject("before message_start")
        if kind == "message_stop":
            if self.stage != "stopped":
                raise Reject("message_stop without a stop_reason")
            self.stage = "done"
        elif kind == "message_delta":
            if self.open:
                raise Reject("a block still open")
            delta = obj.get("delta")
            if not isinstance(delta, dict):
                raise Reject("delta")
            if delta.get("stop_reason") is not None:
                if self.stage != "streaming":
                    raise Reject("a second stop_reason")
                self.stop_reason = _nonempty(delta["stop_reason"])
                self.stage = "stopped"
        else:
            if self.stage != "streaming":
                raise Reject("a block event after the stop_reason")
            index = obj.get("index")
            if type(index) is not int or index < 0:
                raise Reject("index")
            getattr(self, kind)(index, obj)

    def content_block_start(self, index: int, obj: dict[str, Any]) -> None:
        block = obj.get("content_block")
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise Reject("block")
        if index in self.kinds:
            raise Reject("index reused")
        kind = block["type"]
        if kind not in BLOCKS:
            raise Reject("a block the gate cannot gate")
        if kind == "text" and not isinstance(block.get("text", ""), str | None):
            raise Reject("text")
        if kind == "tool_use":
            call_id, name = block.get("id"), block.get("name")
            for field in (call_id, name):
                if field is not None and not isinstance(field, str):
                    raise Reject("identity type")
            call_id, name = _nonempty(call_id), _nonempty(name)
            if call_id in self.ids:
                raise Reject("id taken")
            if not isinstance(block.get("input"), dict) or block["input"]:
                raise Reject("start input")
            self.ids.add(call_id)
            self.tools[index] = (call_id, name, [])
        self.kinds[index] = kind
        self.open.add(index)

    def content_block_delta(self, index: int, obj: dict[str, Any]) -> None:
        if index not in self.open:
            raise Reject("delta for a block not open")
        delta = obj.get("delta")
        if not isinstance(delta, dict) or not isinstance(delta.get("type"), str):
            raise Reject("delta")
        owner = DELTA_OWNER.get(delta["type"])
        if owner is None:
            if self.kinds[index] == "tool_use":
                raise Reject("unknown delta on a tool block")
            return
        if owner != self.kinds[index]:
            raise Reject("delta on the wrong block")
        if delta["type"] == "input_json_delta":
            if not isinstance(delta.get("partial_json"), str):
                raise Reject("partial_json")
            self.tools[index][2].append(delta["partial_json"])
        elif delta["type"] == "text_delta" and not isinstance(delta.get("text"), str):
            raise Reject("text")

    def content_block_stop(self, index: int, obj: dict[str, Any]) -> None:
        if index not in self.open:
            raise Reject("stop for a block not open")
        self.open.discard(index)
