"""Strict argument parsing: every refusal, the accepted forms, and that nothing leaks."""

from __future__ import annotations

import json
import pickle
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_toolgate.core.errors import GateConfigError, QuarantineReason
from litellm_toolgate.core.values.strictjson import ArgumentsError, parse_arguments

R = QuarantineReason
CANARY = "CANARY-5e3b1d"
DEPTH = 3


def refusal(text: str, max_depth: int = DEPTH) -> ArgumentsError:
    """Parse ``text`` expecting a refusal; return it (caught here, inspected outside)."""
    caught: ArgumentsError | None = None
    try:
        parse_arguments(text, max_depth=max_depth)
    except ArgumentsError as err:
        caught = err
    assert caught is not None, "expected a refusal"
    return caught


def assert_no_leak(err: BaseException, *secrets: str) -> None:
    """No secret in str/repr/args/attributes of the error or anything chained to it."""
    assert err.__cause__ is None
    assert err.__context__ is None
    chain: list[BaseException | None] = [err]
    while chain:
        e = chain.pop()
        if e is None:
            continue
        views = [str(e), repr(e), repr(e.args), *map(str, e.args)]
        views.append(repr(getattr(e, "__dict__", {})))
        for secret in secrets:
            assert all(secret not in view for view in views), type(e).__name__
        chain += [e.__cause__, e.__context__]


C = CANARY
REFUSALS: list[tuple[str, str, QuarantineReason]] = [
    # Not JSON at all, or not strict JSON.
    ("empty", "", R.INVALID_JSON),
    ("whitespace only", " \t\r\n ", R.INVALID_JSON),
    ("bare word", C, R.INVALID_JSON),
    ("unterminated string", f'{{"k": "{C}', R.INVALID_JSON),
    ("unterminated object", f'{{"k": "{C}"', R.INVALID_JSON),
    ("single quotes", f"{{'{C}': 1}}", R.INVALID_JSON),
    ("trailing comma", f'{{"{C}": 1,}}', R.INVALID_JSON),
    ("NaN", f'{{"{C}": NaN}}', R.INVALID_JSON),
    ("Infinity", f'{{"{C}": Infinity}}', R.INVALID_JSON),
    ("-Infinity", f'{{"{C}": -Infinity}}', R.INVALID_JSON),
    ("leading BOM", f'\ufeff{{"{C}": 1}}', R.INVALID_JSON),
    ("vertical tab is not JSON whitespace", f'\x0b{{"{C}": 1}}', R.INVALID_JSON),
    ("nbsp is not JSON whitespace", f'\u00a0{{"{C}": 1}}', R.INVALID_JSON),
    ("raw control character", f'{{"k": "{C}\x01"}}', R.INVALID_JSON),
    ("invalid escape", f'{{"k": "{C}\\x41"}}', R.INVALID_JSON),
    ("leading zero", f'{{"{C}": 01}}', R.INVALID_JSON),
    ("leading plus", f'{{"{C}": +1}}', R.INVALID_JSON),
    ("bare fraction", f'{{"{C}": .5}}', R.INVALID_JSON),
    ("comment", f'{{"{C}": 1 /* c */}}', R.INVALID_JSON),
    ("stray closer", f'{{"{C}": 1]]]]]]', R.INVALID_JSON),
    ("unterminated string with brackets", f'{{"{C}": "[[[[[[[[', R.INVALID_JSON),
    ("unterminated string, backslash", f'{{"{C}": "[[[[[[[[\\', R.INVALID_JSON),
    # One value, then more.
    ("two objects", f'{{"a": 1}}{{"{C}": 2}}', R.TRAILING_DATA),
    ("word after", f'{{"a": 1}} {C}', R.TRAILING_DATA),
    ("closer after", '{"a": 1}]', R.TRAILING_DATA),
    ("opener after", '{"a": 1} {', R.TRAILING_DATA),
    ("form feed after", '{"a": 1}\x0c', R.TRAILING_DATA),
    ("nbsp after", '{"a": 1}\u00a0', R.TRAILING_DATA),
    ("NUL after", '{"a": 1}\x00', R.TRAILING_DATA),
    ("invalid JSON after", f'{{"a": 1}} {{"{C}": NaN', R.TRAILING_DATA),
    ("leading zero at top", "01", R.TRAILING_DATA),
    # A JSON value, but not an object.
    ("array", f'["{C}"]', R.NOT_AN_OBJECT),
    ("string", f'"{C}"', R.NOT_AN_OBJECT),
    ("integer", "12", R.NOT_AN_OBJECT),
    ("float", "-1.5", R.NOT_AN_OBJECT),
    ("true", "true", R.NOT_AN_OBJECT),
    ("null", " null ", R.NOT_AN_OBJECT),
    ("deep array at top", "[[1]]", R.NOT_AN_OBJECT),
    # Duplicate keys, at any depth.
    ("top-level duplicate", f'{{"{C}": 1, "{C}": 2}}', R.DUPLICATE_KEY),
    ("duplicate in nested object", f'{{"a": {{"{C}": 1, "{C}": 1}}}}', R.DUPLICATE_KEY),
    ("duplicate inside array", f'{{"a": [{{"k": "{C}", "k": 0}}]}}', R.DUPLICATE_KEY),
    ("duplicate via escape", f'{{"{C}": 1, "\\u0061": 2, "a": 3}}', R.DUPLICATE_KEY),
    # Numbers.
    ("double overflow", f'{{"{C}": 1e400}}', R.NUMBER_OUT_OF_RANGE),
    ("negative double overflow", f'{{"{C}": -1e400}}', R.NUMBER_OUT_OF_RANGE),
    ("overflow inside array", f'{{"{C}": [1, 1.5e309]}}', R.NUMBER_OUT_OF_RANGE),
    ("long mantissa overflow", f'{{"{C}": 1{"0" * 400}.0}}', R.NUMBER_OUT_OF_RANGE),
    ("2**53", f'{{"{C}": 9007199254740992}}', R.NUMBER_OUT_OF_RANGE),
    ("-(2**53)", f'{{"{C}": -9007199254740992}}', R.NUMBER_OUT_OF_RANGE),
    ("17 digits", f'{{"{C}": 10000000000000000}}', R.NUMBER_OUT_OF_RANGE),
    ("5000-digit integer", f'{{"{C}": {"7" * 5000}}}', R.NUMBER_OUT_OF_RANGE),
    ("5000-digit negative integer", f'{{"{C}": -{"7" * 5000}}}', R.NUMBER_OUT_OF_RANGE),
    # Lone surrogates, escaped or literal, in values or keys.
    ("lone high in value", f'{{"{C}": "x\\ud800"}}', R.INVALID_STRING),
    ("lone low in value", f'{{"{C}": "\\uDC00x"}}', R.INVALID_STRING),
    ("high then non-low", f'{{"{C}": "\\ud800\\u0041"}}', R.INVALID_STRING),
    ("reversed pair", f'{{"{C}": "\\ude00\\ud83d"}}', R.INVALID_STRING),
    ("lone surrogate in key", f'{{"{C}\\udfff": 1}}', R.INVALID_STRING),
    ("lone surrogate in nested array", f'{{"{C}": [["ok", "\\ud800"]]}}', R.INVALID_STRING),
    ("lone surrogate in nested key", f'{{"a": [{{"\\ud800": "{C}"}}]}}', R.INVALID_STRING),
    ("literal surrogate", f'{{"{C}": "\ud800"}}', R.INVALID_STRING),
    # Depth (max_depth = 3; the top-level object is depth 1).
    ("objects 4 deep", f'{{"a": {{"b": {{"c": {{"{C}": 1}}}}}}}}', R.DEPTH_EXCEEDED),
    ("arrays 4 deep", f'{{"{C}": [[[]]]}}', R.DEPTH_EXCEEDED),
    ("deep and invalid", f'{{"{C}": [[[[[[', R.INVALID_JSON),
    ("deep with a lone surrogate", f'{{"{C}": [[[["\\ud800"]]]]}}', R.DEPTH_EXCEEDED),
    ("lone surrogate at allowed depth", f'{{"{C}": [[1, "\\ud800"]], "b": []}}', R.INVALID_STRING),
    ("100,000 [", "[" * 100_000, R.DEPTH_EXCEEDED),
    ("100,000 {", '{"a":' * 100_000, R.DEPTH_EXCEEDED),
    ("100,000 balanced", "[" * 100_000 + "]" * 100_000, R.DEPTH_EXCEEDED),
]


@pytest.mark.parametrize(
    ("text", "reason"), [(t, r) for _, t, r in REFUSALS], ids=[i for i, _, _ in REFUSALS]
)
def test_refusals(text: str, reason: QuarantineReason) -> None:
    err = refusal(text)
    assert err.reason is reason
    assert str(err) == reason.value
    assert err.args == (reason.value,)
    assert repr(err) == f"ArgumentsError({reason.value!r})"
    assert_no_leak(err, CANARY)


def test_every_argument_reason_is_exercised() -> None:
    family = {r for r in QuarantineReason if r.family.__name__ == "ArgumentsRejected"}
    assert {r for _, _, r in REFUSALS} == family


ACCEPTED: list[tuple[str, str, dict[str, Any]]] = [
    ("plain", '{"a": 1}', {"a": 1}),
    ("empty object", "{}", {}),
    ("JSON whitespace around", ' \t\r\n{"a":1}\n\t\r ', {"a": 1}),
    ("depth exactly 3", '{"a": {"b": [1]}}', {"a": {"b": [1]}}),
    ("brackets inside strings", '{"a": "[[[[{{{{", "b": "]]]}}"}', {"a": "[[[[{{{{", "b": "]]]}}"}),
    ("escaped quote before brackets", r'{"a": "\"[[[[[[\\"}', {"a": '"[[[[[[\\'}),
    (
        "max safe integers",
        '{"a": 9007199254740991, "b": -9007199254740991}',
        {"a": 2**53 - 1, "b": -(2**53 - 1)},
    ),
    ("big float is a float", '{"a": 1e300, "b": 9007199254740993.0}', {"a": 1e300, "b": 2.0**53}),
    ("underflow rounds to zero", '{"a": 1e-400}', {"a": 0.0}),
    ("negative zero", '{"a": -0, "b": -0.0}', {"a": 0, "b": -0.0}),
    ("literals", '{"t": true, "f": false, "n": null}', {"t": True, "f": False, "n": None}),
    ("surrogate pair escape", '{"n": 1, "e": "\\ud83d\\ude00"}', {"n": 1, "e": "\U0001f600"}),
    (
        "deep, with a pair",
        '{"e": [["\\ud83d\\ude00", 2]], "f": []}',
        {"e": [["\U0001f600", 2]], "f": []},
    ),
    ("escaped backslash then u", '{"e": "\\\\ud800"}', {"e": "\\ud800"}),
    ("unicode", '{"名前": "値"}', {"名前": "値"}),
    ("same key in siblings", '{"a": {"k": 1}, "b": {"k": 2}}', {"a": {"k": 1}, "b": {"k": 2}}),
]


@pytest.mark.parametrize(
    ("text", "expected"), [(t, e) for _, t, e in ACCEPTED], ids=[i for i, _, _ in ACCEPTED]
)
def test_accepted(text: str, expected: dict[str, Any]) -> None:
    assert parse_arguments(text, max_depth=DEPTH) == expected


def test_depth_boundary_follows_max_depth() -> None:
    nested = '{"a": ' * 10 + "1" + "}" * 10
    assert parse_arguments(nested, max_depth=10)
    assert refusal(nested, max_depth=9).reason is R.DEPTH_EXCEEDED


def test_depth_beyond_interpreter_recursion_is_refused() -> None:
    # A max_depth above the recursion limit lets the decoder itself give up.
    text = '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert refusal(text, max_depth=10**6).reason is R.DEPTH_EXCEEDED


@pytest.mark.parametrize("max_depth", [0, -1, True, 2.5, "3"])
def test_max_depth_must_be_a_positive_int(max_depth: Any) -> None:
    with pytest.raises(GateConfigError):
        parse_arguments("{}", max_depth=max_depth)


def test_text_must_be_str() -> None:
    with pytest.raises(TypeError):
        parse_arguments(b"{}", max_depth=DEPTH)  # type: ignore[arg-type]


def test_refusal_pickles_with_its_reason() -> None:
    err = pickle.loads(pickle.dumps(ArgumentsError(R.DUPLICATE_KEY)))
    assert isinstance(err, ArgumentsError)
    assert err.reason is R.DUPLICATE_KEY


def test_deep_input_is_quick() -> None:
    started = time.perf_counter()
    for text in ("[" * 100_000, '{"a":' * 100_000, "{" * 1_000_000):
        refusal(text, max_depth=64)
    assert time.perf_counter() - started < 10  # a hang guard, not a speed target


def test_megabyte_document() -> None:
    content = f"# {CANARY}\n" + "x = [1, 2]\n" * 100_000
    doc: dict[str, Any] = {"path": "src/x.py", "content": content}
    doc["rows"] = [{"i": i, "v": [i, str(i)]} for i in range(2_000)]
    assert parse_arguments(json.dumps(doc), max_depth=64) == doc
    assert parse_arguments(json.dumps(doc, indent=2), max_depth=64) == doc


# ---- properties --------------------------------------------------------------------------

SAFE_INT = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
FINITE = st.floats(allow_nan=False, allow_infinity=False)
JSON_SCALARS = st.none() | st.booleans() | SAFE_INT | FINITE | st.text()
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=30,
)
OBJECTS = st.dictionaries(st.text(), JSON_VALUES, max_size=8)


@settings(max_examples=150)
@given(OBJECTS, st.booleans(), st.sampled_from([None, 0, 2]))
def test_round_trip(doc: dict[str, Any], ascii_only: bool, indent: int | None) -> None:
    text = json.dumps(doc, ensure_ascii=ascii_only, indent=indent)
    assert parse_arguments(text, max_depth=64) == doc


@settings(max_examples=100)
@given(OBJECTS, st.text(alphabet=" \t\r\n", max_size=3), st.sampled_from(["x", "{}", "]", "1"]))
def test_anything_after_the_object_is_trailing(doc: dict[str, Any], gap: str, junk: str) -> None:
    assert refusal(json.dumps(doc) + gap + junk, max_depth=64).reason is R.TRAILING_DATA


JSONISH = st.text(alphabet='{}[]",:0123456789.eE-+truefalsnNI\\ud800 \n\t' + CANARY, max_size=60)


@settings(max_examples=500)
@given(JSONISH | st.text(max_size=60))
def test_never_raises_anything_else(text: str) -> None:
    try:
        parse_arguments(text, max_depth=4)
    except ArgumentsError as err:
        assert_no_leak(err, CANARY)
