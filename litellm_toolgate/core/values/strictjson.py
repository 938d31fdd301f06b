"""Strict parsing of one tool call's argument text into exactly one JSON object.

Theory of operation
-------------------
A model's ``arguments`` string is accepted only if it is exactly one RFC 8259 JSON value,
surrounded by nothing but JSON whitespace (space, tab, LF, CR), and that value is an object.
Beyond the grammar, we refuse what RFC 8259 forbids or leaves to the implementation, because a
tool and the gate could otherwise read the same text differently:

* ``NaN``, ``Infinity`` and ``-Infinity`` (a Python extension, not JSON), a leading BOM, empty
  or whitespace-only text: ``INVALID_JSON``;
* a complete value followed by anything but whitespace: ``TRAILING_DATA``;
* a top-level value that is not an object: ``NOT_AN_OBJECT``;
* the same key twice in one object, at any depth (parsers disagree on which one wins):
  ``DUPLICATE_KEY``;
* numbers that overflow a double, and integers outside the interoperable range
  +-(2**53 - 1) of RFC 8259 section 6: ``NUMBER_OUT_OF_RANGE``;
* strings or keys holding a lone surrogate (from an escape such as ``"\\ud800"`` or a literal
  one in the text); no UTF-8 encoder will carry them: ``INVALID_STRING``;
* nesting deeper than ``max_depth``, the top-level object being depth 1: ``DEPTH_EXCEEDED``.

Two parsers, one answer
-----------------------
:func:`parse_arguments` first asks jiter (pydantic-core's parser, in Rust: 4x to 30x faster
than the stdlib here) and takes its value only when the specification below would accept
the text with that very value; any other text goes to the specification, which then decides
and names the reason. jiter itself refuses duplicate keys (after unescaping), NaN and
infinities, a BOM, trailing data, raw control characters, lone surrogates (escaped, or the
bytes ``surrogatepass`` makes of a literal one: it checks its UTF-8) and every grammar
error, and rounds floats exactly as Python does. What it does not check (depth, integers
past 2**53 - 1, a float that overflowed to infinity) is checked by whichever is cheaper for
the text at hand (see ``_accept_fast``): a walk of its value with no Python step per node
(a long text of few nodes, such as one long string), or byte scans of the text, which
settle most texts without a walk (many small objects). :func:`parse_utf8_arguments` is the
same parse for the text's UTF-8 bytes, the form the gate withholds argument text in: jiter
reads the bytes as they are, and the text is decoded only if the specification must
decide. :func:`parse_arguments_reference` is the specification alone; tests and a fuzz
harness hold the three to the same answers. jiter's messages quote the text (a duplicated
key, by name): its errors are dropped where they are caught and never chained.

The specification
-----------------
The work is done by the stdlib's C decoder; Python only runs in its hooks (one call per
object, and one per number when the text holds a digit run long enough to be out of range)
and never loops over characters. ``raw_decode`` tells where the value
ends, so trailing data is told apart from a syntax error. After decoding, cheap whole-text
tests (``str.count``, ``str.isascii``, one regex with a literal prefix) decide whether a walk
over the decoded value is needed at all: only when the text holds more openers than
``max_depth`` (depth) or a surrogate escape (lone or paired, which only the decoded value
tells apart). A literal surrogate needs no walk: once decoding succeeded it can only be
inside a string. A large argument is usually one long string, which costs no walk.

Absurd nesting never reaches the walk: the C decoder enters the interpreter's recursion guard
once per level, so 100,000 ``[`` stop with a ``RecursionError`` after about
``sys.getrecursionlimit()`` levels, in well under a millisecond; it is reported as
``DEPTH_EXCEEDED``. (So is a legal depth beyond that guard, when ``max_depth`` is set above
it.) This relies on the recursion limit being one the C stack can hold, as all of CPython does.

Secrecy: the argument text may hold source code or secrets. :class:`ArgumentsError` carries
only a :class:`QuarantineReason`. Decoder errors (``JSONDecodeError.doc`` is the whole text)
are caught, reduced to a reason, and the new error is raised after the ``except`` block has
been left, so nothing of the text ends up in ``__cause__`` or ``__context__`` either.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from itertools import chain, compress, repeat
from operator import is_, not_
from typing import Any, NoReturn

import jiter

from ..errors import Fault, GateConfigError, QuarantineReason

__all__ = [
    "ArgumentsError",
    "parse_arguments",
    "parse_arguments_reference",
    "parse_utf8_arguments",
]

R = QuarantineReason

_JSON_WHITESPACE = " \t\n\r"
_MAX_SAFE_INTEGER = 2**53 - 1
# A JSON integer has no leading zeros, so more digits than this is out of range for sure;
# checking the length first keeps int() away from huge digit strings (slow, and beyond
# 4300 digits a ValueError from the int-string conversion limit).
_MAX_SAFE_DIGITS = len(str(_MAX_SAFE_INTEGER))
# Any surrogate code point in decoded text is lone: the decoder merges escaped pairs.
_SURROGATE = re.compile("[\ud800-\udfff]")
# An escape in the surrogate range (JSON spells it only with a lowercase u).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
# What a number needs to be out of range (see parse_arguments), searched for in the text's
# bytes with every digit mapped to "0" and "E" to "e": bytes.translate and `in` are C loops
# over the buffer, about 1.5 ns a byte, where a regex for the same runs ~100x slower.
# Signs are deleted, so "e+000" and "e-000" read "e000" (deleting can only join runs, so
# the test can only say "at risk" more often, never less).
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789E", b"000000000e")
_MARKS = bytes.maketrans(b"123456789E[{", b"000000000e((")
_SIGNS = b"+-"
_SIXTEEN_DIGITS = b"0" * 16
_EXPONENT = b"e000"
_WINDOW = 64 * 1024
# Texts this short are scanned first: a few microseconds at most.
_SCAN_FIRST = 4 * 1024
# Scanning a byte costs about a fortieth of walking a node (measured on CPython 3.11).
_BYTES_PER_NODE = 40
_BRACKETS = bytes.maketrans(b"{[}]", b"(())")
_NOT_STRUCTURE = bytes(set(range(256)) - set(b'"[]{}'))
_CONTAINERS = frozenset({dict, list})
_STRINGS = frozenset({str})


class ArgumentsError(Fault):
    """The argument text is not exactly one strict JSON object.

    The message and ``args`` are only ``reason.value``; never any of the text.
    """


def parse_arguments(text: str, *, max_depth: int) -> dict[str, Any]:
    """Parse ``text`` as exactly one JSON object, or raise :class:`ArgumentsError`."""
    _check_call(text, max_depth)
    # surrogatepass never fails; jiter refuses the bytes a lone surrogate becomes.
    accepted = _accept_fast(text.encode("utf-8", "surrogatepass"), max_depth)
    if accepted is not None:
        return accepted
    return _parse(text, max_depth)


def parse_utf8_arguments(data: bytes, *, max_depth: int) -> dict[str, Any]:
    """:func:`parse_arguments` of ``data.decode("utf-8", "surrogatepass")``, read from the
    bytes: the form the gate withholds argument text in, so the text is made only when the
    specification has to decide. Bytes that decode to no text (never the gate's own, which
    come from encoding text) are ``INVALID_STRING``."""
    if type(data) is not bytes:
        raise TypeError("argument bytes must be bytes")
    if type(max_depth) is not int:
        _check_call("", max_depth)
    elif max_depth < 1:
        raise GateConfigError("max_depth must be a positive integer")
    accepted = _accept_fast(data, max_depth)
    if accepted is not None:
        return accepted
    text: str | None = None
    # The decode error's .object is the whole of data: dropped here, raised after.
    with contextlib.suppress(UnicodeDecodeError):
        text = data.decode("utf-8", "surrogatepass")
    if text is None:
        raise ArgumentsError(R.INVALID_STRING)
    return _parse(text, max_depth)


def parse_arguments_reference(text: str, *, max_depth: int) -> dict[str, Any]:
    """The specification alone, without the fast path: what :func:`parse_arguments` equals."""
    _check_call(text, max_depth)
    return _parse(text, max_depth)


def _check_call(text: str, max_depth: int) -> None:
    if not isinstance(text, str):
        raise TypeError("argument text must be a str")
    if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < 1:
        raise GateConfigError("max_depth must be a positive integer")


def _accept_fast(data: bytes, max_depth: int) -> dict[str, Any] | None:
    """jiter's value when the specification accepts the text ``data`` encodes with that
    very value, else None: the specification then decides, and names the reason.

    jiter refuses duplicate keys (after unescaping, at any depth), NaN and infinities, a BOM,
    trailing data, control characters in strings, lone surrogates (escaped, or the bytes
    ``surrogatepass`` makes of a literal one) and every other grammar error, and its floats
    are correctly rounded, as Python's are. What it does not check (depth, integers past
    2**53 - 1, a float that overflows to infinity) is checked on its value or its text.
    """
    value: Any = None
    # jiter's messages quote the input (a duplicated key, by name): the error is dropped in
    # the except clause, and the fall-back is taken after it has been left.
    try:
        value = jiter.from_json(data, allow_inf_nan=False, catch_duplicate_keys=True)
    except ValueError:
        value = None
    if type(value) is not dict:
        return None
    # Two ways to check what jiter leaves, both exact: scans of the bytes (1 to 3 ns a byte)
    # and a walk of the value (50 to 120 ns a node). A short text is scanned; a long
    # one is walked unless it turns out dense in nodes (many small objects), then scanned.
    # When a scan cannot rule the problem out, the walk decides.
    size = len(data)
    if size <= _SCAN_FIRST:
        return value if _scanned(data, max_depth) or _within_limits(value, max_depth) else None
    settled = _within_limits(value, max_depth, size)
    if settled is None:
        settled = _scanned(data, max_depth) or bool(_within_limits(value, max_depth))
    return value if settled else None


def _scanned(data: bytes, max_depth: int) -> bool:
    """True when scans of the bytes show no number out of range and no nesting deeper than
    ``max_depth`` (False: they cannot rule it out). A text of one window is mapped once:
    every digit to "0", "E" to "e", both openers to "(", signs deleted (see
    :func:`_numbers_at_risk`); fewer "(" than ``max_depth`` then settle the depth without
    :func:`_shallow` (strings may hold some: the count can only be too high)."""
    if len(data) > _WINDOW:
        return not _numbers_at_risk(data) and _shallow(data, max_depth)
    marks = data.translate(_MARKS, _SIGNS)
    if _SIXTEEN_DIGITS in marks or _EXPONENT in marks:
        return False
    return marks.count(b"(") <= max_depth or _shallow(data, max_depth)


def _shallow(data: bytes, max_depth: int) -> bool:
    """Whether valid JSON text nests no deeper than ``max_depth``, by bytes operations only.

    Escaped backslashes and quotes are removed, so every remaining quote opens or closes a
    string, and only quotes and brackets are kept. Fewer openers than ``max_depth`` settle
    it. Otherwise the strings are taken out: when none holds a bracket, each is an adjacent
    pair of quotes (the pairs ``count`` finds, left to right, cover every quote exactly
    then); else the text between quotes is dropped. Each pass of removing ``()`` pairs from
    the brackets left takes one level off the deepest nesting.
    """
    if b"\\" in data:
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = data.translate(_BRACKETS, _NOT_STRUCTURE)
    if brackets.count(b"(") <= max_depth:
        return True
    quotes = brackets.count(b'"')
    if quotes:
        if quotes == 2 * brackets.count(b'""'):
            brackets = brackets.translate(None, b'"')
        else:
            brackets = b"".join(brackets.split(b'"')[::2])
    for _ in range(max_depth):
        if not brackets:
            return True
        brackets = brackets.replace(b"()", b"")
    return not brackets


def _within_limits(root: dict[str, Any], max_depth: int, budget: int | None = None) -> bool | None:
    """Depth and number range of a decoded value, level by level, with no Python step per
    node (as in :func:`_inspect`): only the kinds present on a level are looked at. With a
    ``budget`` (the text's size in bytes), None when the walk would cost more than scanning
    the text (then the scans are cheaper)."""
    objects: list[Any] = [root]
    arrays: list[Any] = []
    depth = 1
    if budget is not None:
        budget //= _BYTES_PER_NODE
    while True:
        if budget is not None:
            # This level's children, counted before they are gathered; and when its first
            # child is a container, the next level guessed from it (many rows alike): a
            # walk that would run out of budget a level later is not started.
            count = sum(map(len, objects)) + sum(map(len, arrays))
            budget -= count
            first = (
                next(iter(objects[0].values()), None) if objects else next(iter(arrays[0]), None)
            )
            if budget < 0 or (isinstance(first, dict | list) and count * len(first) > budget):
                return None
        if depth == 1:
            children = list(root.values())
        else:
            children = list(
                chain(chain.from_iterable(map(dict.values, objects)), chain.from_iterable(arrays))
            )
        kinds = list(map(type, children))
        present = set(kinds)
        if int in present:
            ints = list(compress(children, map(is_, kinds, repeat(int))))
            if max(ints) > _MAX_SAFE_INTEGER or min(ints) < -_MAX_SAFE_INTEGER:
                return False
        if float in present:
            floats = list(compress(children, map(is_, kinds, repeat(float))))
            if max(floats) == math.inf or min(floats) == -math.inf:
                return False
        if dict not in present and list not in present:
            return True
        if depth == max_depth:  # the containers among the children are one level deeper
            return False
        objects = list(compress(children, map(is_, kinds, repeat(dict))))
        arrays = list(compress(children, map(is_, kinds, repeat(list))))
        depth += 1


def _parse(text: str, max_depth: int) -> dict[str, Any]:
    """The specification: the stdlib's C decoder with hooks, then the whole-text checks."""
    reason: QuarantineReason | None = None
    value: Any = None
    # A fresh decoder per call: the C scanner keeps a per-scanner key memo, not worth
    # sharing between threads for the microseconds it costs to build.
    # The number hooks cost a Python call per number. Only a run of 16 digits or an exponent
    # of 3 digits can spell an integer past 2**53 - 1 or a double that overflows (15 digits
    # stay below 10**15, and without a 3-digit exponent a value stays below 10**114), so when
    # the text has neither, the C decoder's own int() and float() give the same values.
    risky = _numbers_at_risk_in_text(text)
    decoder = json.JSONDecoder(
        object_pairs_hook=_unique_object,
        parse_float=_finite_float if risky else None,
        parse_int=_safe_int if risky else None,
        parse_constant=_refuse_constant,
    )
    start = len(text) - len(text.lstrip(_JSON_WHITESPACE))
    try:
        value, end = decoder.raw_decode(text, start)
    except ArgumentsError as refusal:  # from one of our hooks
        reason = refusal.reason
    except ValueError:  # JSONDecodeError: its .doc is the whole text; must not escape
        reason = R.INVALID_JSON
    except RecursionError:  # the interpreter's guard stopped absurd nesting
        reason = R.DEPTH_EXCEEDED
    else:
        if len(text.rstrip(_JSON_WHITESPACE)) != end:
            reason = R.TRAILING_DATA
        elif not isinstance(value, dict):
            reason = R.NOT_AN_OBJECT
        elif not text.isascii() and _SURROGATE.search(text):
            reason = R.INVALID_STRING
        else:
            # Fewer openers than max_depth cannot nest deeper than it: no walk for depth.
            deep = text.count("[") + text.count("{") > max_depth
            escaped = _SURROGATE_ESCAPE.search(text) is not None
            if deep or escaped:
                reason = _inspect(value, max_depth, strings=escaped)
    # Raised here, outside every except block, so no decoder error becomes __context__.
    if reason is not None:
        raise ArgumentsError(reason)
    return value  # type: ignore[no-any-return]


def _numbers_at_risk(data: bytes) -> bool:
    """Whether the text ``data`` encodes holds a 16-digit run or a 3-digit exponent (see
    parse_arguments).

    Window by window, so the copies stay small next to the text; windows overlap by 15
    bytes, so a pattern (at most 16 long) that straddles a boundary is still seen whole.
    """
    for start in range(0, len(data), _WINDOW):
        window = data if len(data) <= _WINDOW else data[start : start + _WINDOW + 15]
        digits = window.translate(_DIGITS_AS_ZERO, _SIGNS)
        if _SIXTEEN_DIGITS in digits or _EXPONENT in digits:
            return True
    return False


def _numbers_at_risk_in_text(text: str) -> bool:
    """:func:`_numbers_at_risk` of a text, encoded window by window (characters this time)."""
    for start in range(0, len(text), _WINDOW):
        if _numbers_at_risk(text[start : start + _WINDOW + 15].encode("utf-8", "surrogatepass")):
            return True
    return False


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ArgumentsError(R.DUPLICATE_KEY)
    return obj


def _safe_int(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_SAFE_DIGITS:
        raise ArgumentsError(R.NUMBER_OUT_OF_RANGE)
    number = int(digits)
    if abs(number) > _MAX_SAFE_INTEGER:
        raise ArgumentsError(R.NUMBER_OUT_OF_RANGE)
    return number


def _finite_float(literal: str) -> float:
    number = float(literal)
    # The grammar admits no NaN or infinity here, so an infinite result is an overflow.
    if math.isinf(number):
        raise ArgumentsError(R.NUMBER_OUT_OF_RANGE)
    return number


def _refuse_constant(name: str) -> NoReturn:
    raise ArgumentsError(R.INVALID_JSON)


def _inspect(root: dict[str, Any], max_depth: int, *, strings: bool) -> QuarantineReason | None:
    """Walk the decoded value level by level for depth and, if asked, lone surrogates.

    Each level is handled whole by C-level iterators, with no Python step per node or per
    child: the level's objects and arrays are told apart by type, all their children are
    chained into one list and sorted by type, and the containers among them are the next
    level. All strings and keys are searched in one pass at the end.
    """
    level: list[Any] = [root]
    texts: list[str] = []
    depth = 1
    while level:
        if depth > max_depth:
            return R.DEPTH_EXCEEDED
        # The decoder builds exact dicts and lists, so a container is one or the other.
        is_object = list(map(is_, map(type, level), repeat(dict)))
        objects = list(compress(level, is_object))
        arrays = compress(level, map(not_, is_object))
        children = list(
            chain(chain.from_iterable(map(dict.values, objects)), chain.from_iterable(arrays))
        )
        kinds = list(map(type, children))
        if strings:
            texts += compress(children, map(_STRINGS.__contains__, kinds))
            texts += chain.from_iterable(objects)
        level = list(compress(children, map(_CONTAINERS.__contains__, kinds)))
        depth += 1
    if strings and _SURROGATE.search("".join(texts)):
        return R.INVALID_STRING
    return None
