"""An independent reference for what the gate may release, written from the specification.

The property tests and the fuzz harnesses judge the gate against this module, so it shares
no code with ``litellm_toolgate``: its event-stream reader follows the WHATWG rules line by
line over the whole decoded body, its JSON reader is a small recursive-descent parser of
RFC 8259 (not the stdlib decoder the gate drives through hooks), and schemas are checked by
calling jsonschema directly. It is slow and simple on purpose; it only has to be right.

:func:`judge` answers for one whole response body: the calls that must be released, in
index order, as ``(index, id, name, arguments, value)``, or ``None`` when the attempt must
be quarantined. The rules are the README's: the upstream's ``finish_reason``, then
``[DONE]``, then a clean end; only choice 0; identities pinned by the first fragment; the
finish reason agreeing with the calls; each call's arguments exactly one strict JSON object
valid against its tool's schema; and the policy's yes.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from jsonschema import Draft202012Validator

SAFE_INTEGER = 2**53 - 1
MAX_DEPTH = 64

Released = tuple[int, str, str, str, dict[str, Any]]


class Reject(Exception):
    """The reference found a reason not to release."""


# ---- the event stream --------------------------------------------------------------------


def sse_messages(body: bytes) -> list[tuple[str, str]] | None:
    """``(event type, data)`` of every dispatched message; None for invalid UTF-8."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = re.split("\r\n|\r|\n", text)
    lines.pop()  # the unterminated last line is discarded at the end of the stream
    out: list[tuple[str, str]] = []
    event, data = "", None
    for line in lines:
        if line == "":
            if data is not None:
                out.append((event, data))
            event, data = "", None
        elif line.startswith(":"):
            continue
        else:
            name, colon, value = line.partition(":")
            if colon and value.startswith(" "):
                value = value[1:]
            if name == "data":
                data = value if data is None else data + "\n" + value
            elif name == "event":
                event = value
    return out


# ---- strict JSON (RFC 8259, plus the gate's interoperability rules) ------------------------

_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_WS = " \t\n\r"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def ws(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in _WS:
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, literal: str) -> None:
        if not self.text.startswith(literal, self.pos):
            raise Reject("syntax")
        self.pos += len(literal)

    def value(self, depth: int) -> Any:
        self.ws()
        c = self.peek()
        if c == "{":
            return self.obj(depth + 1)
        if c == "[":
            return self.arr(depth + 1)
        if c == '"':
            return self.string()
        for literal, result in (("true", True), ("false", False), ("null", None)):
            if self.text.startswith(literal, self.pos):
                self.pos += len(literal)
                return result
        return self.number()

    def obj(self, depth: int) -> dict[str, Any]:
        if depth > MAX_DEPTH:
            raise Reject("depth")
        self.expect("{")
        out: dict[str, Any] = {}
        self.ws()
        if self.peek() == "}":
            self.pos += 1
            return out
        while True:
            self.ws()
            if self.peek() != '"':
                raise Reject("key")
            key = self.string()
            if key in out:
                raise Reject("duplicate key")
            self.ws()
            self.expect(":")
            out[key] = self.value(depth)
            self.ws()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("}")
            return out

    def arr(self, depth: int) -> list[Any]:
        if depth > MAX_DEPTH:
            raise Reject("depth")
        self.expect("[")
        out: list[Any] = []
        self.ws()
        if self.peek() == "]":
            self.pos += 1
            return out
        while True:
            out.append(self.value(depth))
            self.ws()
            if self.peek() == ",":
                self.pos += 1
                continue
            self.expect("]")
            return out

    def string(self) -> str:
        self.expect('"')
        out: list[str] = []
        while True:
            if self.pos >= len(self.text):
                raise Reject("unterminated string")
            c = self.text[self.pos]
            self.pos += 1
            if c == '"':
                break
            if c < " ":
                raise Reject("control character")
            if "\ud800" <= c <= "\udfff":
                raise Reject("literal surrogate")  # no UTF-8 encoder carries it
            if c != "\\":
                out.append(c)
                continue
            e = self.text[self.pos : self.pos + 1]
            self.pos += 1
            if e in _ESCAPES:
                out.append(_ESCAPES[e])
            elif e == "u":
                out.append(self.unicode_escape())
            else:
                raise Reject("escape")
        return "".join(out)

    def unicode_escape(self) -> str:
        code = self.hex4()
        if 0xD800 <= code <= 0xDBFF and self.text.startswith("\\u", self.pos):
            self.pos += 2
            low = self.hex4()
            if 0xDC00 <= low <= 0xDFFF:
                return chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00))
            raise Reject("lone surrogate")
        if 0xD800 <= code <= 0xDFFF:
            raise Reject("lone surrogate")
        return chr(code)

    def hex4(self) -> int:
        digits = self.text[self.pos : self.pos + 4]
        if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
            raise Reject("escape")
        self.pos += 4
        return int(digits, 16)

    def number(self) -> int | float:
        match = _NUMBER.match(self.text, self.pos)
        if match is None or match.end() == self.pos:
            raise Reject("syntax")
        self.pos = match.end()
        literal = match.group(0)
        if match.group(1) is None and match.group(2) is None:
            if len(literal.lstrip("-")) > 16:
                raise Reject("integer range")
            number = int(literal)
            if abs(number) > SAFE_INTEGER:
                raise Reject("integer range")
            return number
        result = float(literal)
        if math.isinf(result):
            raise Reject("float range")
        return result


def strict_object(text: str) -> dict[str, Any]:
    """``text`` as exactly one JSON object under the gate's rules, or :class:`Reject`."""
    parser = _Parser(text)
    parser.ws()
    if parser.peek() != "{":
        raise Reject("not an object")
    value = parser.value(0)
    parser.ws()
    if parser.pos != len(text):
        raise Reject("trailing data")
    assert isinstance(value, dict)
    return value


# ---- the chat protocol and the decision --------------------------------------------------


def judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool] = lambda name, value: True,
) -> list[Released] | None:
    """The calls the gate must release for this streamed body, or None for a quarantine."""
    try:
        return _judge(body, schemas, policy)
    except Reject:
        return None


def _judge(
    body: bytes,
    schemas: Mapping[str, Mapping[str, Any]],
    policy: Callable[[str, dict[str, Any]], bool],
) -> list[Released]:
    messages = sse_messages(body)
    if messages is None:
        raise Reject("utf-8")
    stage = "receiving"  # then "finished" (finish reason seen), then "done" ([DONE] seen)
    finish: str | None = None
    calls: dict[int, list[Any]] = {}  # index -> [id, name, [fragments]]
    ids: set[str] = set()
    named = False  # the response id was seen (its first sighting is content)

    def content() -> None:
        if stage != "receiving":
            raise Reject("content after the finish")

    for event, data in messages:
        if stage == "done":
            raise Reject("a message after [DONE]")
        if event not in ("", "message"):
            if event == "error":
                raise Reject("error event")
            continue
        if data == "[DONE]":
            if stage != "finished":
                raise Reject("[DONE] without a finish")
            stage = "done"
            continue
        try:
            chunk = json.loads(data)
        except (ValueError, RecursionError):
            raise Reject("chunk is not JSON") from None
        if not isinstance(chunk, dict):
            raise Reject("chunk is not an object")
        if chunk.get("error") is not None:
            raise Reject("error object")
        rid = chunk.get("id")
        if isinstance(rid, str) and rid and not named:
            named = True
            content()
        choices = chunk.get("choices", [])
        if not isinstance(choices, list):
            raise Reject("choices")
        for choice in choices:
            if not isinstance(choice, dict):
                raise Reject("choice")
            index = choice.get("index", 0)
            if isinstance(index, bool) or index != 0:
                raise Reject("another choice")
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise Reject("delta")
            if delta.get("refusal"):
                raise Reject("refusal")
            if delta.get("function_call") is not None:
                raise Reject("legacy function call")
            text = delta.get("content")
            if text is not None and not isinstance(text, str):
                raise Reject("content")
            if text:
                content()
            fragments = delta.get("tool_calls")
            if fragments is not None and not isinstance(fragments, list):
                raise Reject("tool_calls")
            for fragment in fragments or []:
                _fragment(fragment, calls, ids, content)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                content()
                stage, finish = "finished", reason
            elif reason is not None:
                raise Reject("finish_reason")
    if stage != "done":
        raise Reject("no terminal")
    if bool(calls) != (finish == "tool_calls"):
        raise Reject("finish reason disagrees with the calls")
    out: list[Released] = []
    for index in sorted(calls):
        call_id, name, parts = calls[index]
        arguments = "".join(parts)
        value = strict_object(arguments)
        if name not in schemas:
            raise Reject("unknown tool")
        if not Draft202012Validator(schemas[name]).is_valid(value):
            raise Reject("schema")
        if not policy(name, value):
            raise Reject("policy")
        out.append((index, call_id, name, arguments, value))
    return out


def _fragment(
    fragment: Any, calls: dict[int, list[Any]], ids: set[str], content: Callable[[], None]
) -> None:
    if not isinstance(fragment, dict):
        raise Reject("fragment")
    index = fragment.get("index")
    if type(index) is not int or index < 0:
        raise Reject("call index")
    if fragment.get("type") not in (None, "function"):
        raise Reject("tool type")
    function = fragment.get("function") or {}
    if not isinstance(function, dict):
        raise Reject("function")
    call_id, name, arguments = fragment.get("id"), function.get("name"), function.get("arguments")
    if any(v is not None and not isinstance(v, str) for v in (call_id, name, arguments)):
        raise Reject("fragment field types")
    if index not in calls:
        if not call_id or not name or call_id in ids:
            raise Reject("identity")
        content()
        calls[index] = [call_id, name, []]
        ids.add(call_id)
    elif (call_id and call_id != calls[index][0]) or (name and name != calls[index][1]):
        raise Reject("identity changed")
    if arguments:
        content()
        calls[index][2].append(arguments)
