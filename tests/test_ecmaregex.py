"""JSON Schema ``pattern`` with ECMA-262 semantics: the translation against a JavaScript
engine's recorded answers, the registry on both validation paths, and refusals at
registration."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest
from ecma_cases import ANSWERS, PATTERNS, STRINGS, ask_engine
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.values.ecmaregex import PatternError, rust_faithful, translate
from litellm_toolgate.core.values.fastschema import fast_validator
from litellm_toolgate.core.values.registry import ToolRegistry, ToolSpec

RECORDED: dict[str, Any] = json.loads(ANSWERS.read_text())
assert RECORDED["strings"] == STRINGS, "tests/ecma262_answers.json is stale: regenerate it"
assert list(RECORDED["answers"]) == PATTERNS, "tests/ecma262_answers.json is stale"


def ours(pattern: str, strings: list[str]) -> str | None:
    try:
        compiled = re.compile(translate(pattern).python)
    except PatternError:
        return None
    return "".join("1" if compiled.search(s) else "0" for s in strings)


# What the translation refuses although the engine runs it: backreferences (ECMA and
# Python disagree on groups that took no part) and a lookbehind Python cannot run.
REFUSED_ON_PURPOSE = {r"(?<n>a)\k<n>", r"(a)\1", r"\1(a)", "(?<=a+)b"}


@pytest.mark.parametrize("pattern", PATTERNS)
def test_translation_agrees_with_the_recorded_engine(pattern: str) -> None:
    expected = RECORDED["answers"][pattern]
    if pattern in REFUSED_ON_PURPOSE:
        assert expected is not None and ours(pattern, STRINGS) is None
        return
    assert ours(pattern, STRINGS) == expected


def test_every_refusal_names_the_problem_not_a_crash() -> None:
    for pattern in PATTERNS:
        try:
            translate(pattern)
        except PatternError as error:
            assert str(error)


def tool(parameters: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "function", "function": {"name": "t", "parameters": parameters}}]


def spec_of(parameters: dict[str, Any]) -> ToolSpec:
    found = ToolRegistry.from_tools(tool(parameters)).get("t")
    assert found is not None
    return found


def string_schema(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        ("^[a-z]+$", "abc\n"),  # $ is the end of the input, not before a final newline
        (r"^\d+$", "\u0661\u0662\u0663"),  # \d is ASCII
        (r"^\w+$", "caf\u00e9"),  # \w is ASCII
        (r"^\s$", "\u0085"),  # \s is ECMA's WhiteSpace and LineTerminator
        ("^a.c$", "a\u2028c"),  # . excludes every line terminator
    ],
)
def test_python_re_would_accept_but_ecma_refuses(pattern: str, value: str) -> None:
    assert re.search(pattern, value)  # what the gate did before
    verdict = spec_of(string_schema(pattern)).validate({"s": value})
    assert verdict is not None and verdict.keyword == "pattern" and verdict.path == "/s"


@pytest.mark.parametrize(
    ("pattern", "value"),
    [
        (r"^\s$", "\ufeff"),  # ZWNBSP is ECMA white space
        (r"\bx", "\u00e9x"),  # \b is between ASCII word and non-word characters
        (r"^\p{Lu}$", "\u00c9"),  # Python's re has no \p
    ],
)
def test_python_re_would_refuse_but_ecma_accepts(pattern: str, value: str) -> None:
    assert not _python_accepts(pattern, value)
    assert spec_of(string_schema(pattern)).validate({"s": value}) is None


def _python_accepts(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return False


def test_pattern_properties_and_additional_properties_search_by_ecma() -> None:
    spec = spec_of(
        {
            "type": "object",
            "patternProperties": {r"^x_\d$": {"type": "integer"}},
            "additionalProperties": False,
        }
    )
    assert spec.validate({"x_1": 1}) is None
    for key in ("x_1\n", "x_\u0661"):
        verdict = spec.validate({key: 1})
        assert verdict is not None and verdict.keyword == "additionalProperties"
    verdict = spec.validate({"x_1": "s"})
    assert verdict is not None and verdict.keyword == "type"


def test_property_names_pattern_is_ecma() -> None:
    spec = spec_of({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}})
    assert spec.validate({"ab": 1}) is None
    assert spec.validate({"ab\n": 1}) is not None


@pytest.mark.parametrize(
    "parameters",
    [
        string_schema("(?i)abc"),
        string_schema(r"\z"),
        string_schema(r"(a)\1"),
        string_schema("]"),
        {"type": "object", "patternProperties": {"a{": {}}},
        {"type": "object", "patternProperties": {"^a": {}}, "unevaluatedProperties": False},
        {
            "$schema": "http://json-schema.org/draft-04/schema#",
            "type": "object",
            "patternProperties": {r"\1": {}},
        },
    ],
)
def test_patterns_that_cannot_be_run_exactly_fail_at_registration(
    parameters: dict[str, Any],
) -> None:
    with pytest.raises(GateConfigError):
        ToolRegistry.from_tools(tool(parameters))


def test_ecma_patterns_python_cannot_read_are_accepted() -> None:
    spec = spec_of(string_schema(r"^(?<year>\d{4})-\u{2D}\p{Nd}$"))
    assert spec.validate({"s": "2024--1"}) is None
    assert spec.validate({"s": "2024--x"}) is not None


# A live engine, when there is one: random patterns from pieces, random strings.
PIECES = [
    "a", "b", ".", r"\d", r"\w", r"\s", r"\D", r"\W", r"\S", "^", "$", "[a-c]", "[^a]",
    r"[\s\d]", "(a|b)", "(?:ab)", "*", "+", "?", "{1,2}", "*?", r"\u00e9", r"\x41", "-", "|",
    r"\b", r"\B", "(?=a)", "(?!b)", r"\.", r"\n", "é", "1",
]  # fmt: skip
ALPHABET = "ab1 \n\r\u00e9\u0661\u00a0\ufeff\u0085\u2028A_.-x\t"


# jsonschema-rs: only patterns it runs exactly as ECMA-262 may take its accept path.
@pytest.mark.parametrize("pattern", PATTERNS)
def test_rust_agrees_on_plain_patterns(pattern: str) -> None:
    assert_rust_agrees(pattern, STRINGS)


def assert_rust_agrees(pattern: str, strings: list[str]) -> None:
    """Where the registry would let jsonschema-rs accept, it answers as ECMA-262 does."""
    if not rust_faithful(pattern):
        return
    try:
        validator = jsonschema_rs.Draft202012Validator(
            {"type": "string", "pattern": pattern}, validate_formats=False
        )
    except jsonschema_rs.ValidationError:
        # It cannot build the pattern: such a schema gets no fast path at all.
        assert fast_validator(string_schema(pattern), Draft202012Validator) is None
        return
    got = "".join("1" if validator.is_valid(s) else "0" for s in strings)
    assert got == ours(pattern, strings), pattern


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(PIECES), max_size=7).map("".join),
    st.lists(st.text(ALPHABET, max_size=6), min_size=10, max_size=10),
)
def test_rust_agrees_on_random_plain_patterns(pattern: str, strings: list[str]) -> None:
    assert_rust_agrees(pattern, strings)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.lists(st.sampled_from(PIECES), max_size=6).map("".join), min_size=5, max_size=5),
    st.lists(st.text(ALPHABET, max_size=6), min_size=10, max_size=10),
)
def test_live_engine_agrees(patterns: list[str], strings: list[str]) -> None:
    answers = ask_engine(patterns, strings)
    if answers is None:
        pytest.skip("no JavaScript engine on the PATH; the recorded answers still ran")
    for pattern, expected in zip(patterns, answers, strict=True):
        assert ours(pattern, strings) == expected, pattern
