"""Argument text made into filler of the same JSON structure, character by character.

:func:`scrub_arguments` is the part of the recording sanitizer (:mod:`.sanitize`) that reads
a call's argument text: a JSON document, or the start of one, or not JSON at all. Object keys,
punctuation, whitespace and the literals ``true`` / ``false`` / ``null`` stay; every
character of a string value becomes filler of the same UTF-8 width (an escape sequence,
``x``s of its length), every digit but ``0`` a ``1``, any other bare word ``x``s. The result
has as many characters as the text, each as wide, so a fragment maps to the slice of the
result at the same offsets. Pure.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..wires.responses_items import _PATCH_OPERATIONS

__all__ = [
    "LITERALS",
    "decoded",
    "digit",
    "fill_inner",
    "filler",
    "schema_words",
    "scrub_arguments",
]

LITERALS = ("true", "false", "null", "NaN", "Infinity")
_FILLER = {1: "x", 2: "é", 3: "€", 4: "😀"}


def filler(ch: str) -> str:
    code = ord(ch)
    if 0xD800 <= code < 0xE000:
        # An undecodable byte (kept as a surrogate escape) stays undecodable: 0xFF.
        return "\udcff" if 0xDC80 <= code <= 0xDCFF else "x"
    return _FILLER[len(ch.encode("utf-8"))]


def digit(ch: str) -> str:
    return "0" if ch == "0" else "1"


def scrub_arguments(text: str, keep: frozenset[str] = frozenset()) -> str:
    """One call's whole argument text, sanitized (see the module doc).

    The result has as many characters as ``text``, each of the same UTF-8 width, so a
    fragment of the text maps to the slice of the result at the same offsets. A string value
    equal to one of ``keep`` (the schemas' own ``enum`` / ``const`` words) stays.
    """
    out: list[str] = []
    stack: list[list[Any]] = []  # [container, expecting a key]
    word = ""
    number = False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        top = stack[-1] if stack else None
        if ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            raw = text[i + 1 : min(j, n)]
            closed = j < n
            is_key = top is not None and top[0] == "{" and top[1]
            out.append('"')
            if is_key or (closed and decoded(raw) in keep):
                out.append(raw)
            else:
                out.append(fill_inner(raw))
            if closed:
                out.append('"')
            i = j + 1
            word, number = "", False
            continue
        i += 1
        last_word, word = word, ""
        was_number, number = number, False
        if ch in "{[":
            stack.append([ch, ch == "{"])
        elif ch in "}]":
            if stack:
                stack.pop()
        elif ch == ",":
            if top is not None and top[0] == "{":
                top[1] = True
        elif ch == ":":
            if top is not None and top[0] == "{":
                top[1] = False
        elif ch.isdigit() and ch.isascii():
            number = True
            ch = digit(ch)
        elif (ch in "eE" and was_number) or ch in "-+.":
            number = True
        elif ch.isalpha():
            grown = last_word + ch
            if any(lit.startswith(grown) for lit in LITERALS):
                word = grown
            else:
                word = "\0"  # the rest of this word is not a literal either
                ch = "x" if ch.isascii() else filler(ch)
        elif not ch.isascii():
            ch = filler(ch)
        out.append(ch)
    return "".join(out)


def decoded(raw: str) -> str | None:
    try:
        value = json.loads('"' + raw + '"')
    except ValueError:
        return None
    return value if isinstance(value, str) else None


def fill_inner(inner: str) -> str:
    """The raw inside of a JSON string, every character (escapes too) made filler."""
    out: list[str] = []
    i = 0
    while i < len(inner):
        ch = inner[i]
        if ch == "\\":
            length = 6 if inner[i + 1 : i + 2] == "u" else 2
            out.append("x" * len(inner[i : i + length]))
            i += length
            continue
        out.append(filler(ch))
        i += 1
    return "".join(out)


def schema_words(schemas: Iterable[Any]) -> frozenset[str]:
    """The strings the schemas themselves name as ``enum`` members or ``const`` values (and
    the built-in tools' operation names): argument values that are the schema's words, not
    the model's, and stay when sanitized."""
    words: set[str] = set(_PATCH_OPERATIONS)

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "enum" and isinstance(value, (list, tuple)):
                    words.update(v for v in value if isinstance(v, str))
                elif key == "const" and isinstance(value, str):
                    words.add(value)
                else:
                    walk(value)
        elif isinstance(node, (list, tuple)):
            for value in node:
                walk(value)

    for schema in schemas:
        walk(schema)
    return frozenset(words)
