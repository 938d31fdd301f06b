"""JSON Schema ``pattern`` with ECMA-262 semantics, on Python's ``re``.

Theory of operation
-------------------
JSON Schema's ``pattern`` and ``patternProperties`` are ECMA-262 regular expressions, built
with the ``u`` flag (2020-12 core, "Regular Expressions"), searched anywhere in the string
(unanchored). Python's ``re`` reads the same text differently in ways that matter for an
allow-list: ``$`` also matches before a final ``\\n``, and ``\\d``, ``\\w``, ``\\s``, ``\\b``
follow Unicode rather than ECMA's fixed sets, so ``^[a-z]+$`` accepts ``"abc\\n"`` and
``^\\d+$`` accepts Arabic-Indic digits.

:func:`translate` parses a pattern by the ECMA-262 ``u``-mode grammar and writes an
equivalent Python pattern in which nothing is left to Python's reading: every literal is an
escape, every class escape is spelt as its ECMA set of code points, ``^``/``$`` become
``\\A``/``\\Z``, ``.`` is "anything but a line terminator", ``\\b`` is a lookaround over
ECMA's word set, and capturing groups become non-capturing ones (only match/no-match is
asked). What cannot be carried over exactly is refused with :class:`PatternError`, and the
registry turns that into a configuration error at registration, never a verdict mid-stream:

* backreferences (``\\1``, ``\\k<name>``): ECMA and Python disagree on groups that did not
  take part in the match;
* ``\\p{...}`` other than a General_Category value (scripts, binary properties);
* a lookbehind that Python cannot run (not of fixed width), a repeat count over 65535;
* everything the ``u`` grammar itself rejects (a lone ``{``, ``}`` or ``]``, an identity
  escape of a letter, ``\\z``, ``(?i)``, a quantified lookahead, ``[\\d-x]``, ...).

``\\p{gc}`` uses this Python's Unicode tables (as any ECMA engine uses its own version).
Lone surrogates never reach a pattern search: the strict parser refuses them in arguments.

:func:`rust_faithful` tells whether jsonschema-rs (which translates ECMA patterns into its
own engine) accepts exactly what the translation accepts: only for patterns without
assertions other than ``^``/``$``, without ``\\p``, named groups and surrogates, as
``tests/test_ecmaregex.py`` checks by differential testing against jsonschema-rs.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["PatternError", "Translation", "compile_pattern", "rust_faithful", "translate"]

_MAX = 0x10FFFF
_MAX_REPEAT = 65535
# Compiled patterns kept. Patterns come from client-supplied schemas, so only short ones
# are cached: memory stays bounded by count x length.
_CACHE_SIZE = 128
_CACHED_LENGTH = 1024

Ranges = tuple[tuple[int, int], ...]

_DIGIT: Ranges = ((0x30, 0x39),)
_WORD: Ranges = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
# WhiteSpace and LineTerminator of ECMA-262: TAB VT FF SP NBSP ZWNBSP, the Zs category,
# LF CR LS PS.
_SPACE: Ranges = (
    (0x09, 0x0D),
    (0x20, 0x20),
    (0xA0, 0xA0),
    (0x1680, 0x1680),
    (0x2000, 0x200A),
    (0x2028, 0x2029),
    (0x202F, 0x202F),
    (0x205F, 0x205F),
    (0x3000, 0x3000),
    (0xFEFF, 0xFEFF),
)
_LINE_TERMINATORS: Ranges = ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))
_SYNTAX = frozenset("^$\\.*+?()[]{}|")
_CONTROL = {"f": 0x0C, "n": 0x0A, "r": 0x0D, "t": 0x09, "v": 0x0B}
_HEX = frozenset("0123456789abcdefABCDEF")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_$")
_NAME_REST = _NAME_START | frozenset("0123456789")

_CATEGORY_GROUPS = {
    "L": ("Lu", "Ll", "Lt", "Lm", "Lo"),
    "LC": ("Lu", "Ll", "Lt"),
    "M": ("Mn", "Mc", "Me"),
    "N": ("Nd", "Nl", "No"),
    "P": ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"),
    "S": ("Sm", "Sc", "Sk", "So"),
    "Z": ("Zs", "Zl", "Zp"),
    "C": ("Cc", "Cf", "Cs", "Co", "Cn"),
}
_CATEGORY_NAMES = {
    "Letter": "L", "Cased_Letter": "LC", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll",
    "Titlecase_Letter": "Lt", "Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M",
    "Combining_Mark": "M", "Nonspacing_Mark": "Mn", "Spacing_Mark": "Mc",
    "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "digit": "Nd",
    "Letter_Number": "Nl", "Other_Number": "No", "Punctuation": "P", "punct": "P",
    "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd", "Open_Punctuation": "Ps",
    "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
    "Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc",
    "Modifier_Symbol": "Sk", "Other_Symbol": "So", "Separator": "Z",
    "Space_Separator": "Zs", "Line_Separator": "Zl", "Paragraph_Separator": "Zp",
    "Other": "C", "Control": "Cc", "cntrl": "Cc", "Format": "Cf", "Surrogate": "Cs",
    "Private_Use": "Co", "Unassigned": "Cn",
}  # fmt: skip


class PatternError(ValueError):
    """The pattern is not ECMA-262 (``u`` mode), or not one this module can run exactly."""


@dataclass(frozen=True, slots=True)
class Translation:
    python: str
    """The Python ``re`` pattern with the same matches."""
    plain: bool
    """No lookaround, ``\\b``/``\\B``, ``\\p``, named group or surrogate: see rust_faithful."""


def translate(pattern: str) -> Translation:
    """The Python equivalent of an ECMA-262 ``u``-mode pattern, or :class:`PatternError`."""
    if not isinstance(pattern, str):
        raise PatternError("a pattern must be a string")
    parser = _Parser(pattern)
    try:
        python = parser.disjunction()
    except RecursionError:
        raise PatternError("the pattern nests too deeply") from None
    if parser.pos != len(pattern):
        raise PatternError("unbalanced ')'")
    try:
        re.compile(python)
    except (re.error, OverflowError, RecursionError):
        raise PatternError("the pattern cannot be run with ECMA-262 semantics") from None
    return Translation(python, parser.plain)


def compile_pattern(pattern: str) -> re.Pattern[str]:
    """The compiled translation of ``pattern`` (cached for short patterns)."""
    if len(pattern) <= _CACHED_LENGTH:
        return _compiled(pattern)
    return re.compile(translate(pattern).python)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(translate(pattern).python)


def rust_faithful(pattern: str) -> bool:
    """Whether jsonschema-rs accepts exactly the strings the translation accepts."""
    try:
        return translate(pattern).plain
    except PatternError:
        return False


class _Parser:
    """Recursive descent over the ECMA-262 ``u``-mode Pattern grammar, writing Python."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.plain = True
        self.names: set[str] = set()

    def peek(self, offset: int = 0) -> str:
        at = self.pos + offset
        return self.text[at] if at < len(self.text) else ""

    def take(self) -> str:
        char = self.peek()
        if not char:
            raise PatternError("the pattern ends too early")
        self.pos += 1
        return char

    def expect(self, char: str) -> None:
        if self.take() != char:
            raise PatternError(f"expected {char!r}")

    def disjunction(self) -> str:
        alternatives = [self.alternative()]
        while self.peek() == "|":
            self.pos += 1
            alternatives.append(self.alternative())
        return "|".join(alternatives)

    def alternative(self) -> str:
        terms: list[str] = []
        while self.peek() not in ("", "|", ")"):
            terms.append(self.term())
        return "".join(terms)

    def term(self) -> str:
        char = self.peek()
        assertion = self.assertion()
        if assertion is not None:
            if self.peek() in ("*", "+", "?", "{"):
                raise PatternError("an assertion cannot be quantified")
            return assertion
        atom = self.atom()
        quantifier = self.quantifier()
        if quantifier is None and char != "(":
            return atom
        return f"(?:{atom}){quantifier or ''}"

    def assertion(self) -> str | None:
        text, pos = self.text, self.pos
        if text.startswith("^", pos):
            self.pos += 1
            return r"\A"
        if text.startswith("$", pos):
            self.pos += 1
            return r"\Z"
        if text.startswith((r"\b", r"\B"), pos):
            self.pos += 2
            self.plain = False
            word = _class(_WORD)
            if text[pos + 1] == "b":
                return f"(?:(?<={word})(?!{word})|(?<!{word})(?={word}))"
            return f"(?:(?<={word})(?={word})|(?<!{word})(?!{word}))"
        for opener in ("(?=", "(?!", "(?<=", "(?<!"):
            if text.startswith(opener, pos):
                self.pos += len(opener)
                self.plain = False
                inner = self.disjunction()
                self.expect(")")
                return f"{opener}{inner})"
        return None

    def quantifier(self) -> str | None:
        char = self.peek()
        if char in ("*", "+", "?"):
            self.pos += 1
            found = char
        elif char == "{":
            self.pos += 1
            low = self.number()
            high: int | None = low
            if self.peek() == ",":
                self.pos += 1
                high = None if self.peek() == "}" else self.number()
            self.expect("}")
            if high is not None and high < low:
                raise PatternError("numbers out of order in a {} quantifier")
            if max(low, high or 0) > _MAX_REPEAT:
                raise PatternError("a repeat count is too large")
            found = f"{{{low},{'' if high is None else high}}}"
        else:
            return None
        if self.peek() == "?":
            self.pos += 1
            found += "?"
        return found

    def number(self) -> int:
        start = self.pos
        while self.peek().isascii() and self.peek().isdigit():
            self.pos += 1
        if start == self.pos:
            raise PatternError("a {} quantifier needs a number")
        return int(self.text[start : self.pos])

    def atom(self) -> str:
        char = self.take()
        if char == ".":
            return _class(_complement(_LINE_TERMINATORS))
        if char == "(":
            if self.peek() == "?":
                if self.text.startswith("?:", self.pos):
                    self.pos += 2
                elif self.text.startswith("?<", self.pos):
                    self.pos += 2
                    self.group_name()
                else:
                    raise PatternError("unknown group syntax")
            inner = self.disjunction()
            self.expect(")")
            return inner
        if char == "[":
            return _class(self.character_class())
        if char == "\\":
            ranges = self.escape(in_class=False)
            return _class(ranges)
        if char in _SYNTAX:
            raise PatternError(f"{char!r} cannot stand here")
        return _literal(self.code_point(char))

    def group_name(self) -> None:
        start = self.pos
        while self.peek() in _NAME_REST and self.peek():
            self.pos += 1
        name = self.text[start : self.pos]
        if not name or name[0] not in _NAME_START:
            raise PatternError("a group name this module cannot read")
        if name in self.names:
            raise PatternError("a group name is used twice")
        self.names.add(name)
        self.plain = False
        self.expect(">")

    def code_point(self, char: str) -> int:
        if 0xD800 <= ord(char) <= 0xDFFF:
            self.plain = False
        return ord(char)

    def character_class(self) -> Ranges:
        negate = self.peek() == "^"
        if negate:
            self.pos += 1
        found: list[tuple[int, int]] = []
        while self.peek() != "]":
            first = self.class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.pos += 1
                last = self.class_atom()
                if len(first) != 1 or len(last) != 1 or first[0][0] != first[0][1]:
                    raise PatternError("a class escape cannot bound a range")
                if last[0][0] != last[0][1]:
                    raise PatternError("a class escape cannot bound a range")
                if first[0][0] > last[0][0]:
                    raise PatternError("range out of order in a character class")
                found.append((first[0][0], last[0][0]))
            else:
                found.extend(first)
        self.expect("]")
        merged = _merge(found)
        return _complement(merged) if negate else merged

    def class_atom(self) -> Ranges:
        char = self.take()
        if char != "\\":
            point = self.code_point(char)
            return ((point, point),)
        if self.peek() == "b":
            self.pos += 1
            return ((0x08, 0x08),)
        if self.peek() == "-":
            self.pos += 1
            return ((0x2D, 0x2D),)
        return self.escape(in_class=True)

    def escape(self, *, in_class: bool) -> Ranges:
        """After a backslash: a class escape or a character escape, as code-point ranges."""
        char = self.take()
        sets = {"d": _DIGIT, "w": _WORD, "s": _SPACE}
        if char in sets:
            return sets[char]
        if char.lower() in sets:
            return _complement(sets[char.lower()])
        if char in ("p", "P"):
            self.plain = False
            ranges = self.property()
            return ranges if char == "p" else _complement(ranges)
        point = self.character_escape(char)
        if 0xD800 <= point <= 0xDFFF:
            self.plain = False
        return ((point, point),)

    def character_escape(self, char: str) -> int:
        if char in _CONTROL:
            return _CONTROL[char]
        if char == "c":
            letter = self.take()
            if not ("a" <= letter.lower() <= "z"):
                raise PatternError(r"\c needs an ASCII letter")
            return ord(letter) % 32
        if char == "0":
            if self.peek().isascii() and self.peek().isdigit():
                raise PatternError("a decimal escape after \\0")
            return 0
        if (char.isascii() and char.isdigit()) or char == "k":
            raise PatternError("backreferences cannot be run with ECMA-262 semantics")
        if char == "x":
            return self.hex_digits(2)
        if char == "u":
            return self.unicode_escape()
        if char in _SYNTAX or char == "/":
            return ord(char)
        raise PatternError("an identity escape the u flag does not allow")

    def hex_digits(self, count: int) -> int:
        digits = self.text[self.pos : self.pos + count]
        if len(digits) != count or not _HEX.issuperset(digits):
            raise PatternError("a malformed hexadecimal escape")
        self.pos += count
        return int(digits, 16)

    def unicode_escape(self) -> int:
        if self.peek() == "{":
            end = self.text.find("}", self.pos)
            digits = self.text[self.pos + 1 : end] if end > 0 else ""
            if not digits or not _HEX.issuperset(digits) or int(digits, 16) > _MAX:
                raise PatternError(r"a malformed \u{...} escape")
            self.pos = end + 1
            return int(digits, 16)
        point = self.hex_digits(4)
        # In u mode an escaped surrogate pair is one code point.
        if 0xD800 <= point <= 0xDBFF and self.text.startswith("\\u", self.pos):
            save = self.pos
            self.pos += 2
            try:
                low = self.hex_digits(4)
            except PatternError:
                low = -1
            if 0xDC00 <= low <= 0xDFFF:
                return 0x10000 + ((point - 0xD800) << 10) + (low - 0xDC00)
            self.pos = save
        return point

    def property(self) -> Ranges:
        if self.peek() != "{":
            raise PatternError(r"\p needs {...}")
        end = self.text.find("}", self.pos)
        if end < 0:
            raise PatternError(r"an unterminated \p{...}")
        body = self.text[self.pos + 1 : end]
        self.pos = end + 1
        name, _, value = body.rpartition("=")
        if name not in ("", "General_Category", "gc"):
            raise PatternError(r"only General_Category values are supported in \p{...}")
        category = _CATEGORY_NAMES.get(value, value)
        if category not in _categories():
            raise PatternError(r"an unknown General_Category in \p{...}")
        return _categories()[category]


@functools.cache
def _categories() -> dict[str, Ranges]:
    """Code-point ranges of every General_Category value and group (built once, on use)."""
    found: dict[str, list[tuple[int, int]]] = {}
    start, current = 0, unicodedata.category("\0")
    for point in range(1, _MAX + 2):
        category = unicodedata.category(chr(point)) if point <= _MAX else ""
        if category != current:
            found.setdefault(current, []).append((start, point - 1))
            start, current = point, category
    table: dict[str, Ranges] = {name: tuple(ranges) for name, ranges in found.items()}
    for group, members in _CATEGORY_GROUPS.items():
        table[group] = _merge([r for member in members for r in table.get(member, ())])
    return table


def _merge(ranges: list[tuple[int, int]] | Ranges) -> Ranges:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return tuple(merged)


def _complement(ranges: Ranges) -> Ranges:
    result: list[tuple[int, int]] = []
    next_low = 0
    for low, high in _merge(ranges):
        if low > next_low:
            result.append((next_low, low - 1))
        next_low = high + 1
    if next_low <= _MAX:
        result.append((next_low, _MAX))
    return tuple(result)


def _escape(point: int) -> str:
    if point < 0x80 and chr(point).isalnum():
        return chr(point)
    if point < 0x100:
        return f"\\x{point:02x}"
    if point < 0x10000:
        return f"\\u{point:04x}"
    return f"\\U{point:08x}"


def _literal(point: int) -> str:
    return _escape(point)


def _class(ranges: Ranges) -> str:
    if not ranges:
        return "(?!)"
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _escape(ranges[0][0])
    parts = (
        _escape(low) if low == high else f"{_escape(low)}-{_escape(high)}" for low, high in ranges
    )
    return "[" + "".join(parts) + "]"
