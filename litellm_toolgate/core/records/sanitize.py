"""A recorded body with everything the model or the provider wrote taken out, structure kept.

:func:`sanitize_body` turns a body a route streamed (chat, Responses, Anthropic or Gemini SSE,
Ollama's newline-delimited JSON, Bedrock's AWS event-stream frames, or a whole JSON body)
into one that a fixture may keep:

* **argument values** become values of the same JSON type and byte length: every character
  of a string value becomes filler of the same UTF-8 width (``x``, ``é``, ``€``, ``😀``; an
  escape sequence becomes ``x``s of its length), every digit but ``0`` becomes ``1``;
  object keys, punctuation, whitespace, ``true``/``false``/``null`` stay. The replacement
  is a transducer fed one fragment at a time with its state carried per call, so the
  fragments keep their boundaries and their sizes, and the concatenation of the sanitized
  fragments is the sanitized concatenation (a ``.done`` copy still equals its deltas). A
  Responses copy of a call's arguments that differs from its deltas keeps differing (one
  filler character is changed where the originals first differ). Bare words that are not a
  JSON literal become ``x``s; a schema's own ``enum`` / ``const`` words stay.
* **ids** (``id``, ``call_id``, ``item_id``, ``tool_use_id``, ``toolUseId``, ``responseId``,
  ``system_fingerprint``, ...)
  become stable placeholders that keep the id's leading ``word_`` / ``word-`` and its
  length where it has room: equal ids stay equal, distinct ids stay distinct, so an identity
  conflict survives sanitizing.
* **text** (any other string value: content, deltas of text, error messages, thinking)
  becomes filler of the same byte length on the wire.
* the fields the gate reads to decide stay as they are: ``type``, ``object``, ``role``,
  ``finish_reason``, ``status``, ``stop_reason``, an error's ``code`` (any other ``code``,
  such as Gemini's ``executableCode``, is text), Gemini's ``finishReason`` and
  ``blockReason``, Ollama's ``done_reason``, Bedrock's ``stopReason``, a tool ``name`` the
  tools define (another name is the model's text: filler), ``model``, numbers outside
  arguments (indexes, token counts), booleans (Ollama's ``done``), every key, ``event:``
  names, ``[DONE]``, line endings and the blank lines between messages (SSE) or the lines
  (NDJSON).
* **frames** (Bedrock): each event-stream frame is cut out by its prelude, its payload
  sanitized as above and the frame written again with its lengths and both CRC32s computed
  for the new payload; a checksum that was wrong stays wrong. The headers keep their bytes
  but for the values of headers other than ``:event-type``, ``:content-type``,
  ``:message-type``, ``:exception-type`` and ``:error-code`` (strings become ``x``s, byte
  arrays and UUIDs zeros: an ``:error-message`` may quote). What cannot be read as a frame
  (a cut frame, a prelude whose checksum is wrong, and everything after it) becomes zero
  bytes of the same length: still no frame, and nothing the route sent.

Each JSON value is rewritten token by token on its raw text, so the route's own spelling
(spaces after colons, escapes, key order) is kept; only argument strings are decoded,
sanitized and encoded again (keeping ``\\u`` escapes when the route used them).

Booleans, ``null`` and object keys carry through: a value that is only a bit, and the
schema's own property names. Pure: no I/O, no state between calls.
"""

from __future__ import annotations

import json
import re
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .scrub import LITERALS, decoded, digit, fill_inner, filler, schema_words, scrub_arguments

__all__ = [
    "FRAMINGS",
    "SANITIZER_VERSION",
    "Sanitized",
    "sanitize_body",
    "schema_words",
    "scrub_arguments",
]

SANITIZER_VERSION = "3"  # 3: Gemini, Ollama (NDJSON) and Bedrock (event-stream frames)

FRAMINGS = ("SSE", "NDJSON", "AWS event-stream")
"""The framings a streamed body may have (a wire's ``WireSpec.framing``)."""

_ID_KEYS = frozenset(
    {
        "id",
        "call_id",
        "caller_id",
        "item_id",
        "tool_call_id",
        "tool_use_id",
        "toolUseId",
        "response_id",
        "responseId",
        "previous_response_id",
        "system_fingerprint",
    }
)
_KEPT_KEYS = frozenset(
    {
        "type",
        "object",
        "role",
        "finish_reason",
        "status",
        "stop_reason",
        "name",
        "model",
        "service_tier",
        "reason",
        "code",
        "event",
        "tool_choice",
        "truncation",
        "stop_sequence",
        "finishReason",
        "blockReason",
        "done_reason",
        "stopReason",
        "execution",  # who runs a Responses item (a tool search): "server" or "client"
    }
)
_OBJECT_ARGUMENT_KEYS = frozenset({"input", "args", "arguments"})
"""Keys whose value, when it is an object or array, is a call's arguments sent whole."""
_ARGUMENT_DELTA_TYPES = frozenset({"response.function_call_arguments.delta"})
_PREFIX = re.compile(r"[A-Za-z]{1,16}[_-]")
_LINE = re.compile(r"(\r\n|\r|\n)")


@dataclass(frozen=True)
class Sanitized:
    """A sanitized body and, for the one who sanitized it, the id placeholders given.

    ``ids`` maps each original id to its placeholder: it lets a recorder name the calls of
    its manifest by placeholder, and is never written anywhere.
    """

    body: bytes
    ids: dict[str, str]

    def __repr__(self) -> str:
        return f"Sanitized({len(self.body)} bytes, {len(self.ids)} ids)"


class _Ids:
    def __init__(self) -> None:
        self.map: dict[str, str] = {}

    def placeholder(self, value: str) -> str:
        if not value:
            return value
        known = self.map.get(value)
        if known is not None:
            return known
        match = _PREFIX.match(value)
        prefix = match.group(0) if match else ""
        number = str(len(self.map) + 1)
        width = max(len(value) - len(prefix), len(number))
        made = prefix + number.rjust(width, "0")
        while made in self.map.values() or made in self.map:
            number = str(int(number) + 100000)
            made = prefix + number.rjust(width, "0")
        self.map[value] = made
        return made


def _fill_raw(token: str) -> str:
    """A JSON string token's raw text with every character (escapes too) made filler."""
    return '"' + fill_inner(token[1:-1]) + '"'


Visit = Callable[[tuple[Any, ...], str, str], str]


def _walk(raw: str, visit: Visit) -> str:
    """Rewrite the scalar tokens of the JSON text ``raw``; keys and punctuation stay.

    ``visit(path, kind, token)`` returns the replacement for a value token (``kind``:
    ``string``, ``number`` or ``word``); ``path`` is its keys and indexes.
    """
    out: list[str] = []
    frames: list[list[Any]] = []  # [container, key or index, expecting a key]
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch in "{[":
            frames.append([ch, None if ch == "{" else 0, ch == "{"])
            out.append(ch)
            i += 1
        elif ch in "}]":
            if frames:
                frames.pop()
            out.append(ch)
            i += 1
        elif ch == ",":
            if frames:
                top = frames[-1]
                if top[0] == "{":
                    top[2] = True
                else:
                    top[1] += 1
            out.append(ch)
            i += 1
        elif ch == ":":
            if frames:
                frames[-1][2] = False
            out.append(ch)
            i += 1
        elif ch == '"':
            j = i + 1
            while j < n and raw[j] != '"':
                j += 2 if raw[j] == "\\" else 1
            token = raw[i : j + 1]
            i = j + 1
            if frames and frames[-1][0] == "{" and frames[-1][2]:
                try:
                    frames[-1][1] = json.loads(token)
                except ValueError:
                    frames[-1][1] = None
                out.append(token)
            else:
                out.append(visit(tuple(f[1] for f in frames), "string", token))
        elif ch in " \t\r\n":
            out.append(ch)
            i += 1
        else:
            j = i
            while j < n and raw[j] not in ',:{}[]" \t\r\n':
                j += 1
            token = raw[i:j]
            i = j
            kind = "number" if token[:1] in "-0123456789" else "word"
            out.append(visit(tuple(f[1] for f in frames), kind, token))
    return "".join(out)


def _at(data: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        if isinstance(data, dict) and isinstance(step, str):
            data = data.get(step)
        elif isinstance(data, list) and isinstance(step, int) and step < len(data):
            data = data[step]
        else:
            return None
    return data


_APART = {"x": "y", "1": "2", "é": "è", "€": "₤", "😀": "😁"}


def _kept_apart(clean: str, version: str, canonical: str) -> str:
    """``clean`` (the sanitized ``version``) made to differ from the sanitized ``canonical``
    where the originals first differ: a copy that disagreed keeps disagreeing."""
    for i, (a, b) in enumerate(zip(version, canonical, strict=False)):
        if a != b:
            return clean[:i] + _APART.get(clean[i], clean[i]) + clean[i + 1 :]
    return clean


def _family(data: Any, path: tuple[Any, ...], root_type: object) -> object | None:
    """The Responses item id a whole copy of a call's arguments belongs to, if any."""
    if not isinstance(data, dict):
        return None
    if root_type == "response.function_call_arguments.done" and path == ("arguments",):
        return data.get("item_id")
    if path == ("item", "arguments"):
        item = data.get("item")
        return item.get("id") if isinstance(item, dict) else None
    if len(path) == 4 and path[:2] == ("response", "output"):
        entry = _at(data, path[:3])
        return entry.get("id") if isinstance(entry, dict) else None
    return None


def _scrub_value(kind: str, token: str, keep: frozenset[str]) -> str:
    """A value inside an argument object held as JSON (an Anthropic ``input``)."""
    if kind == "string":
        return token if decoded(token[1:-1]) in keep else _fill_raw(token)
    if kind == "number":
        return "".join(digit(c) if c.isdigit() else c for c in token)
    return token if token in LITERALS else "x" * len(token)


class _Body:
    """One body's sanitizing, in two passes over the same messages: the first collects each
    streamed call's argument fragments (and numbers the ids), the second writes every
    fragment as its slice of the call's sanitized whole text."""

    def __init__(self, keep: frozenset[str], names: frozenset[str] | None) -> None:
        self.ids = _Ids()
        self.keep = keep
        self.names = names
        self.collecting = True
        self.parts: dict[object, list[str]] = {}
        self.clean: dict[object, str] = {}
        self.offsets: dict[object, int] = {}
        # Whole copies of a Responses call's arguments (``.done``, the items, the completed
        # response), by item id: copies that differ stay different once sanitized.
        self.copies: dict[object, list[str]] = {}
        self.copy_clean: dict[tuple[object, str], str] = {}

    def switch(self) -> None:
        """From collecting to writing."""
        self.collecting = False
        self.clean = {k: scrub_arguments("".join(v), self.keep) for k, v in self.parts.items()}
        self.offsets = dict.fromkeys(self.clean, 0)
        streamed = {
            key[1]: "".join(parts)
            for key, parts in self.parts.items()
            if isinstance(key, tuple) and key[0] == "responses"
        }
        for family, versions in self.copies.items():
            canonical = streamed.get(family, versions[0])
            base = scrub_arguments(canonical, self.keep)
            for version in versions:
                clean = scrub_arguments(version, self.keep)
                if version != canonical and clean == base:
                    clean = _kept_apart(clean, version, canonical)
                self.copy_clean[(family, version)] = clean

    def arguments(self, key: object | None, text: str) -> str:
        if key is None:
            return scrub_arguments(text, self.keep)
        if isinstance(key, tuple) and key[0] == "copy":
            if self.collecting:
                self.copies.setdefault(key[1], []).append(text)
                return text
            return self.copy_clean[(key[1], text)]
        if self.collecting:
            self.parts.setdefault(key, []).append(text)
            return text
        start = self.offsets[key]
        self.offsets[key] = start + len(text)
        return self.clean[key][start : start + len(text)]

    def json_text(self, raw: str) -> str:
        """One JSON document (an SSE message's data, or a whole body)."""
        try:
            data = json.loads(raw)
        except ValueError:
            return self.opaque(raw)

        def visit(path: tuple[Any, ...], kind: str, token: str) -> str:
            return self._value(data, path, kind, token)

        return _walk(raw, visit)

    def _value(self, data: Any, path: tuple[Any, ...], kind: str, token: str) -> str:
        for at, step in enumerate(path):
            # Inside an argument object sent whole: every value in place.
            if step in _OBJECT_ARGUMENT_KEYS and isinstance(
                _at(data, path[: at + 1]), (dict, list)
            ):
                return _scrub_value(kind, token, self.keep)
        if kind != "string":
            return token
        key = path[-1] if path and isinstance(path[-1], str) else ""
        if key in _ID_KEYS:
            return json.dumps(self.ids.placeholder(json.loads(token)))
        if key == "name" and self.names is not None and decoded(token[1:-1]) not in self.names:
            return _fill_raw(token)  # a name no tool has is the model's text
        if key == "code" and not any(isinstance(p, str) and "error" in p for p in path):
            return _fill_raw(token)  # a code that is no error's: program text (executableCode)
        if key in _KEPT_KEYS:
            return token
        argument_key = self._argument_key(data, path, key)
        if argument_key is not False:
            clean = self.arguments(argument_key, json.loads(token))
            return json.dumps(clean, ensure_ascii="\\u" in token)
        return _fill_raw(token)

    @staticmethod
    def _argument_key(data: Any, path: tuple[Any, ...], key: str) -> object | bool | None:
        """The stream key of an argument string (None: a whole copy), False for text."""
        root_type = data.get("type") if isinstance(data, dict) else None
        if key == "partial_json":
            return ("anthropic", data.get("index") if isinstance(data, dict) else None)
        if key == "input" and path[:2] == ("delta", "toolUse") and isinstance(data, dict):
            index = data.get("contentBlockIndex")
            return ("bedrock", index if isinstance(index, int) else None)
        if key == "delta" and root_type in _ARGUMENT_DELTA_TYPES:
            return ("responses", data.get("item_id"), data.get("output_index"))
        if key != "arguments":
            return False
        family = _family(data, path, root_type)
        if family is not None:
            return ("copy", family)
        if len(path) >= 5 and path[0] == "choices" and "tool_calls" in path:
            fragment = _at(data, path[: path.index("tool_calls") + 2])
            index = fragment.get("index") if isinstance(fragment, dict) else None
            if not isinstance(index, int):
                return None  # a whole call without an index: sanitized on its own
            return ("chat", path[1], index)
        if len(path) >= 3 and path[0] == "choices" and "function_call" in path:
            return ("chat-legacy", path[1])
        return None

    def opaque(self, text: str) -> str:
        """Text that is not JSON: letters and digits become filler, punctuation stays."""
        out: list[str] = []
        for c in text:
            if not c.isascii():
                out.append(filler(c))
            else:
                out.append(digit(c) if c.isdigit() else "x" if c.isalpha() else c)
        return "".join(out)

    def sse(self, text: str) -> str:
        parts = _LINE.split(text)  # lines at even positions, their endings at odd ones
        lines = parts[0::2]
        out = list(parts)
        i = 0
        while i < len(lines):
            if not lines[i].startswith("data:") or lines[i][5:].strip() == "[DONE]":
                out[2 * i] = self._line(lines[i])
                i += 1
                continue
            # Consecutive data lines are one message's data, joined by LF (the SSE rule).
            j = i
            while j < len(lines) and lines[j].startswith("data:"):
                j += 1
            spaces = [" " if line[5:6] == " " else "" for line in lines[i:j]]
            values = [line[5 + len(sp) :] for line, sp in zip(lines[i:j], spaces, strict=True)]
            clean = self.json_text("\n".join(values)).split("\n")
            if len(clean) != len(values):  # cannot happen: LFs are whitespace, kept
                clean = [self.opaque(v) for v in values]
            for k, (sp, value) in enumerate(zip(spaces, clean, strict=True)):
                out[2 * (i + k)] = f"data:{sp}{value}"
            i = j
        return "".join(out)

    def ndjson(self, text: str) -> str:
        """Newline-delimited JSON: each line one document; line ends and blank lines kept."""
        parts = _LINE.split(text)
        for i in range(0, len(parts), 2):
            if parts[i].strip():
                parts[i] = self.json_text(parts[i])
        return "".join(parts)

    def frames(self, body: bytes) -> bytes:
        """AWS event-stream frames: each payload sanitized, each frame written again."""
        out = bytearray()
        at, end = 0, len(body)
        while at < end:
            frame = _frame_at(body, at)
            if frame is None:
                break
            total, headers, payload, crc_held = frame
            clean = _encoded(self.json_text(_decoded(payload)))
            section = _clean_headers(headers)
            prelude = struct.pack(">II", 16 + len(section) + len(clean), len(section))
            head = prelude + struct.pack(">I", zlib.crc32(prelude)) + section + clean
            crc = zlib.crc32(head)
            out += head + struct.pack(">I", crc if crc_held else crc ^ 0xFFFFFFFF)
            at += total
        out += bytes(end - at)  # what is no frame: zeros, as long
        return bytes(out)

    def _line(self, line: str) -> str:
        if not line:
            return line
        if line.startswith(":"):
            return ":" + self.opaque(line[1:])
        name, colon, value = line.partition(":")
        if not colon:
            return self.opaque(line)
        space = " " if value.startswith(" ") else ""
        value = value[len(space) :]
        if name in ("event", "retry") or (name == "data" and value.strip() == "[DONE]"):
            return line
        if name == "id":
            return f"id:{space}{self.ids.placeholder(value)}"
        return f"{self.opaque(name)}:{space}{self.opaque(value)}"


# ---- AWS event-stream frames ------------------------------------------------------------------
_KEPT_HEADERS = frozenset(
    {":event-type", ":content-type", ":message-type", ":exception-type", ":error-code"}
)
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""Header value types of a fixed size (the format's, as :mod:`.eventstream` reads it)."""


def _frame_at(body: bytes, at: int) -> tuple[int, bytes, bytes, bool] | None:
    """The frame at ``at``: (total length, headers, payload, whether its message CRC held);
    None where no whole frame with a sound prelude starts there."""
    if len(body) - at < 12:
        return None
    total, headers, crc = struct.unpack_from(">III", body, at)
    if zlib.crc32(body[at : at + 8]) != crc or total < 16 or headers > total - 16:
        return None
    if at + total > len(body):
        return None
    frame = body[at : at + total]
    held = zlib.crc32(frame[:-4]) == struct.unpack_from(">I", frame, total - 4)[0]
    return total, frame[12 : 12 + headers], frame[12 + headers : -4], held


def _clean_headers(section: bytes) -> bytes:
    """The header section, every byte in place, but the values of headers that may carry
    text (see the module doc); a section that cannot be read becomes zeros."""
    out = bytearray(section)
    broken = bytes(len(section))
    at, end = 0, len(section)
    while at < end:
        size = section[at]
        name = section[at + 1 : at + 1 + size].decode("utf-8", "replace")
        at += 1 + size
        if size == 0 or at >= end:
            return broken
        kind = section[at]
        at += 1
        if kind in _FIXED:
            length = _FIXED[kind]
            blank = kind == 9  # a UUID
        elif kind in (6, 7):
            if at + 2 > end:
                return broken
            length = int.from_bytes(section[at : at + 2], "big")
            at += 2
            blank = name not in _KEPT_HEADERS
        else:
            return broken
        if at + length > end:
            return broken
        if blank:
            out[at : at + length] = b"x" * length if kind == 7 else bytes(length)
        at += length
    return bytes(out)


def _decoded(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _encoded(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def sanitize_body(
    body: bytes,
    *,
    streamed: bool = True,
    keep: frozenset[str] = frozenset(),
    names: frozenset[str] | None = None,
    framing: str = "SSE",
) -> Sanitized:
    """``body`` (when ``streamed``, framed as ``framing`` says: one of :data:`FRAMINGS`;
    else one JSON document) sanitized; see the module doc.

    ``keep``: argument string values that stay (:func:`schema_words` of the tools).
    ``names``: the tool names that stay; any other ``name`` value (a tool the model made up)
    becomes filler (None: every name stays). An undecodable byte stays undecodable (it
    becomes 0xFF).
    """
    if framing not in FRAMINGS:
        raise ValueError(f"framing must be one of {FRAMINGS}")
    state = _Body(keep, names)
    if streamed and framing == "AWS event-stream":
        state.frames(body)
        state.switch()
        return Sanitized(state.frames(body), dict(state.ids.map))
    text = _decoded(body)
    run: Callable[[str], str] = state.json_text
    if streamed:
        run = state.ndjson if framing == "NDJSON" else state.sse
    run(text)
    state.switch()
    return Sanitized(_encoded(run(text)), dict(state.ids.map))
