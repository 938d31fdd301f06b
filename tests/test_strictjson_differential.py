"""The fast strict parse (jiter, then checks on its value) against the specification.

``parse_arguments`` takes jiter's value only when the specification would accept the text
with that very value; every other text goes to the specification, which names the reason.
``parse_utf8_arguments`` does the same from the text's UTF-8 bytes (``surrogatepass``), the
form the gate withholds argument text in. So the three must agree exactly: the same texts
accepted, with equal values (types and the sign of zero included), the same refused, with
the same reason. Checked over the fixtures' argument texts, the property generators'
(tests/chatgen.py, also used by respgen), and edge cases built around every check jiter
does not make itself; tests/fuzz/fuzz_json_fast.py runs the same comparison under the
fuzzer. And nothing of jiter's own error (its message quotes the text) may reach the error
the gate raises.
"""

from __future__ import annotations

import json
import math
import random
import sys
import traceback
from pathlib import Path
from typing import Any

import chatgen
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))
import _common

from litellm_toolgate.core.values import strictjson
from litellm_toolgate.core.values.strictjson import (
    ArgumentsError,
    parse_arguments,
    parse_arguments_reference,
    parse_utf8_arguments,
)

SAFE = 2**53 - 1


def outcome(parse: Any, text: str, max_depth: int) -> tuple[str, Any]:
    try:
        return ("accepted", _common.typed(parse(text, max_depth=max_depth)))
    except ArgumentsError as error:
        return ("refused", error.reason)


def from_utf8(text: str, *, max_depth: int) -> dict[str, Any]:
    return parse_utf8_arguments(text.encode("utf-8", "surrogatepass"), max_depth=max_depth)


def assert_agree(text: str, max_depth: int = 64) -> None:
    fast = outcome(parse_arguments, text, max_depth)
    spec = outcome(parse_arguments_reference, text, max_depth)
    assert fast == spec, text[:200]
    assert outcome(from_utf8, text, max_depth) == spec, text[:200]


def test_the_fast_path_is_taken() -> None:
    calls = 0
    real = strictjson._parse

    def counting(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        return real(*args)

    strictjson._parse = counting
    try:
        assert parse_arguments('{"a": [1, 2.5, "x"], "b": {"c": null}}', max_depth=64)
        assert parse_arguments('{"s": "' + "x" * 100_000 + '"}', max_depth=64)
        assert from_utf8('{"s": "' + "é" * 50_000 + '", "n": [1, {"k": 2}]}', max_depth=64)
        rows = ",".join(['{"t": [1, 2.5], "s": "a"}'] * 2000)
        assert from_utf8('{"rows": [' + rows + "]}", max_depth=64)
    finally:
        strictjson._parse = real
    assert calls == 0


@pytest.mark.parametrize("text", [t.decode("utf-8", "surrogatepass") for t in _common.arguments()])
def test_fixture_arguments(text: str) -> None:
    assert_agree(text)


def test_generated_arguments() -> None:
    rng = random.Random(15)
    for _ in range(3000):
        name = rng.choice(["multiply", "write_file", "record", "search"])
        assert_agree(chatgen.argument_text(rng, name, hostile=True), max_depth=rng.choice([64, 3]))


EDGES = [
    *(str(n) for n in (SAFE, SAFE + 1, -SAFE, -SAFE - 1, 10**15, 10**16, 2**63, 2**64)),
    "-0", "0.0", "-0.0", "1e308", "1.7976931348623157e308", "1.7976931348623159e308", "1e309",
    "-1e309", "1e-400", "2.4703282292062327e-324", "2.4703282292062328e-324", "5e-324",
    "1E400", "1e+400", "123456789012345678", "0.1234567890123456789", "1" * 400,
    '"\\ud800"', '"\\udc00"', '"\\ud83d\\ude00"', '"\\uD83D\\uDE00"', '"\\ud83d\\u0041"',
    '"\\ud800\\ud800"', '"\ud800"', '"\udfff"', '"\\u0000"', '"\x7f"', '"\x1f"', '"\\/"',
    "NaN", "-Infinity", "Infinity", "true", "null", "[]", "{}", '{"k": 1, "k": 2}',
    '{"k": 1, "\\u006b": 2}', '[{"k": 1}, {"k": 1}]', "01", "1.", ".5", "+1", "1e", "-",
]  # fmt: skip
SHAPES = ['{{"a": {v}}}', '{{"a": [{v}, {v}]}}', '{{"a": {v}}} x', '\ufeff{{"a": {v}}}',
          ' \t\r\n{{"a": {v}}}\n', '{{"a": {v}}}\x0c', '[{v}]', '{v}', '{{"{v}": 1}}']  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_edge_values(shape: str) -> None:
    for edge in EDGES:
        assert_agree(shape.format(v=edge))


@pytest.mark.parametrize("max_depth", [1, 2, 3, 63, 64, 65])
def test_depth_around_the_limit(max_depth: int) -> None:
    for depth in (max_depth - 1, max_depth, max_depth + 1, 150, 250, 3000):
        for opener, closer in (("[", "]"), ('{"k": ', "}")):
            inner = opener * max(depth - 1, 0) + "1" + closer * max(depth - 1, 0)
            assert_agree('{"a": ' + inner + "}", max_depth)
    # Many openers, little depth (the walk decides), in a long text and in a short one.
    for rows in (3, 5000):
        assert_agree('{"rows": [' + ",".join(['{"t": [1, 2]}'] * rows) + "]}", max_depth)


@pytest.mark.parametrize("last", ["1", "9007199254740992", "1e309", "[[[[[[1]]]]]]", '"\\"]"'])
def test_long_dense_texts(last: str) -> None:
    # Many small objects in a long text: the scans decide, or the walk when they cannot.
    rows = ",".join(['{"t": [1, 2.5], "s": "a]"}'] * 4000)
    for max_depth in (3, 6, 64):
        assert_agree('{"rows": [' + rows + ', {"x": ' + last + "}]}", max_depth)


def test_long_texts_around_the_number_checks() -> None:
    pad = '"' + "x" * 40_000 + '"'
    for edge in ("9007199254740991", "9007199254740992", "1e309", "-1e309", "1.5", '"\\ud800"'):
        assert_agree('{"s": ' + pad + ', "n": [' + edge + "]}")


JSON_PIECES = ['{', '}', '[', ']', ',', ':', '"k"', '"\\u00e9"', '"\\ud800"', '"\\ud83d\\ude00"',
               '1', '-0', '9007199254740993', '1e400', '0.5', 'true', 'null', 'NaN', ' ',
               '"a"', '"a"', '\ufeff', '\ud800', '"\\\\"', '"\\"["', '"]}"',
               '"\\\\\\"]"']  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(JSON_PIECES), max_size=24).map("".join), st.sampled_from([2, 64]))
def test_generated_pieces(text: str, max_depth: int) -> None:
    assert_agree(text, max_depth)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=120, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values), st.booleans())
def test_generated_values(value: dict[str, Any], ascii_only: bool) -> None:
    assert_agree(json.dumps(value, ensure_ascii=ascii_only))


CANARY = "CANARY-5e1f"


@pytest.mark.parametrize("parse", [parse_arguments, from_utf8])
def test_jiter_error_leaves_no_trace(parse: Any) -> None:
    text = '{"' + CANARY + '": 1, "' + CANARY + '": 2}'
    with pytest.raises(ArgumentsError) as caught:
        parse(text, max_depth=64)
    error = caught.value
    assert error.reason.value == "duplicate_key"
    assert error.__cause__ is None and error.__context__ is None
    assert CANARY not in str(error) and CANARY not in repr(error)
    assert all(CANARY not in str(arg) for arg in error.args)
    # No frame of the traceback keeps jiter's error (its message names the key).
    for frame, _ in traceback.walk_tb(error.__traceback__):
        for local in frame.f_locals.values():
            assert not (isinstance(local, ValueError) and not isinstance(local, ArgumentsError))
            assert "Detected duplicate key" not in repr(local)


def test_lone_surrogate_bytes_anywhere_in_a_string() -> None:
    # The bytes surrogatepass makes of a literal lone surrogate, at every offset of strings
    # and keys long enough for jiter's wide string scanning: it checks its UTF-8 there too.
    for length in (1, 7, 15, 16, 17, 31, 32, 33, 64, 100):
        for at in sorted({0, 1, length // 2, length - 1}):
            for lone in ("\ud800", "\udbff", "\udc00", "\udfff"):
                chars = "a" * at + lone + "b" * (length - at - 1)
                assert_agree('{"s": "' + chars + '", "n": 1}')
                assert_agree('{"' + chars + '": 1}')
    assert outcome(from_utf8, '{"s": "x\ud800"}', 64) == ("refused", strictjson.R.INVALID_STRING)


def test_bytes_that_decode_to_no_text() -> None:
    with pytest.raises(ArgumentsError) as caught:
        parse_utf8_arguments(b'{"s": "\xff"}', max_depth=64)
    assert caught.value.reason is strictjson.R.INVALID_STRING
    assert caught.value.__context__ is None and caught.value.__cause__ is None
    with pytest.raises(TypeError):
        parse_utf8_arguments(bytearray(b"{}"), max_depth=64)  # type: ignore[arg-type]


def test_a_float_that_overflows_is_refused_on_both_paths() -> None:
    text = '{"s": "' + "x" * 20_000 + '", "n": 1e309}'
    assert outcome(parse_arguments, text, 64) == ("refused", strictjson.R.NUMBER_OUT_OF_RANGE)
    assert math.isinf(float("1e309"))


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth_of, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth_of, value), default=0)
    return 0


tricky_values = st.recursive(
    st.none() | st.integers(0, 9) | st.text('[]{}"\\ab', max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text('[]{}"\\k', max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@pytest.mark.parametrize("odd", ['"a[b"', '"\\\\"', '"\\"]"', '"x"', "[]", '"}{"'])
def test_the_bracket_scan_with_many_strings(odd: str) -> None:
    # Many strings without brackets (each an adjacent pair of quotes once reduced) and one
    # odd one out: the scan must still measure the nesting outside strings exactly.
    rows = ['{"k": "v", "t": ["x", "y"]}'] * 40
    for where in (0, 20, 39):
        value_text = "[" + ",".join([*rows[:where], "[" + odd + "]", *rows[where:]]) + "]"
        value = json.loads(value_text)
        data = ('{"rows": ' + value_text + "}").encode()
        for max_depth in range(1, 7):
            assert strictjson._shallow(data, max_depth) == (1 + depth_of(value) <= max_depth)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text('[]{}"\\k', max_size=3), tricky_values, max_size=3), st.booleans())
def test_the_bracket_scan_measures_depth(value: dict[str, Any], indent: bool) -> None:
    data = json.dumps(value, indent=1 if indent else None).encode()
    for max_depth in range(1, 7):
        assert strictjson._shallow(data, max_depth) == (depth_of(value) <= max_depth)
