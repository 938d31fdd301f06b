"""The wire's JSON read (jiter first) against json.loads, its specification.

``load_object`` reads every data line of every wire. It asks jiter first and takes its
value only when it is an object; anything jiter refuses goes to json.loads
(``load_object_reference``), which decides. So the two must agree exactly: the same lines
accepted, with equal values (types and the sign of zero included), the same refused.
Checked over every data line of the recorded streams, edge cases around what the two
parsers do differently (nesting, numbers, surrogates, duplicate keys), and generated
texts; tests/fuzz/fuzz_wire_json.py runs the same comparison under the fuzzer.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).parent / "fuzz"))
import _common

from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.core.wires import loads
from litellm_toolgate.core.wires.loads import WireFault, load_object, load_object_reference


def outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return ("accepted", _common.typed(load(text)))
    except WireFault as fault:
        return ("refused", fault.reason)


def assert_agree(text: str) -> None:
    assert outcome(load_object, text) == outcome(load_object_reference, text), text[:200]


def recorded_lines() -> list[str]:
    """Every recorded data line that is UTF-8 (the decoder refuses the others first)."""
    texts = []
    for line in _common.data_lines():
        try:
            texts.append(line.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return texts


def test_every_recorded_data_line() -> None:
    lines = recorded_lines()
    assert len(lines) > 500
    for line in lines:
        assert_agree(line)


def test_the_fast_path_is_taken() -> None:
    calls = 0
    real = loads.load_object_reference

    def counting(data: str) -> dict[str, Any]:
        nonlocal calls
        calls += 1
        return real(data)

    # Lines of ordinary chunks: objects, with nothing jiter leaves to json.loads.
    ordinary = [line for line in recorded_lines() if line.startswith('{"') and "\\u" not in line]
    assert len(ordinary) > 300
    loads.load_object_reference = counting
    try:
        for line in ordinary:
            try:
                load_object(line)
            except WireFault:
                continue
    finally:
        loads.load_object_reference = real
    assert calls < len(ordinary) // 20  # the odd malformed fixture line, no more


EDGES = [
    *(str(n) for n in (2**53, 2**63, 2**64, 10**30)), "-0", "0.0", "-0.0", "1e308",
    "1.7976931348623159e308", "1e309", "-1e309", "1e-400", "2.4703282292062327e-324",
    "2.4703282292062328e-324", "5e-324", "1E400", "0.1234567890123456789", "1" * 4300,
    "1" * 4301, "1" * 4300 + ".5", "0." + "1" * 5000, '"\\ud800"', '"\\udc00"',
    '"\\ud83d\\ude00"', '"\\ud83d\\u0041"', '"\\ud800\\ud800"', '"\ud800"', '"\\u0000"', '"\x7f"',
    '"\x1f"', '"\t"', '"\\/"', '"\\x"', "NaN", "-Infinity", "Infinity", "nan", "inf", "true",
    "null", "[]", "{}", '{"k": 1, "k": 2}', '{"k": 1, "\\u006b": 2}', "01", "1.", ".5", "+1",
    "1e", "-", "[1,]", '{"a":1,}', "tru",
]  # fmt: skip
SHAPES = ['{{"a": {v}}}', '{{"a": [{v}, {v}]}}', '{{"a": {v}}} x', '\ufeff{{"a": {v}}}',
          ' \t\r\n{{"a": {v}}}\n', '{{"a": {v}}}\x0c', '[{v}]', '{v}', '{{"{v}": 1}}',
          '{{"choices": [{{"index": {v}, "delta": {{"content": "x"}}}}]}}']  # fmt: skip


@pytest.mark.parametrize("shape", SHAPES)
def test_edge_values(shape: str) -> None:
    for edge in EDGES:
        assert_agree(shape.format(v=edge))


@pytest.mark.parametrize("depth", [1, 199, 200, 201, 202, 300, 5000])
def test_nesting(depth: int) -> None:
    for opener, closer in (("[", "]"), ('{"k": ', "}")):
        assert_agree('{"a": ' + opener * depth + "1" + closer * depth + "}")


JSON_PIECES = ['{', '}', '[', ']', ',', ':', '"k"', '"\\u00e9"', '"\\ud800"', '"\\ud83d\\ude00"',
               '1', '-0', '9007199254740993', '1e400', '0.5', 'true', 'null', 'NaN', ' ',
               '"a"', '\ufeff', '\ud800', '"\\\\"', '"\\"["', '"]}"']  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(JSON_PIECES), max_size=24).map("".join))
def test_generated_pieces(text: str) -> None:
    assert_agree(text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values), st.booleans())
def test_generated_values(value: dict[str, Any], ascii_only: bool) -> None:
    assert_agree(json.dumps(value, ensure_ascii=ascii_only))


CANARY = "CANARY-77c1"


def test_a_refused_line_leaves_no_trace_of_either_parser() -> None:
    text = '{"' + CANARY + '": "\\ud800x", ' + CANARY + "}"
    with pytest.raises(WireFault) as caught:
        load_object(text)
    error = caught.value
    assert error.reason is QuarantineReason.MALFORMED_EVENT
    assert error.__cause__ is None and error.__context__ is None
    assert CANARY not in str(error) and CANARY not in repr(error)
    for frame, _ in traceback.walk_tb(error.__traceback__):
        for local in frame.f_locals.values():
            assert not (isinstance(local, ValueError) and not isinstance(local, WireFault))
