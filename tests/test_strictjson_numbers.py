"""The strict parse leaves its number hooks out only when no number can be out of range.

Whether the hooks run is decided by scanning the text window by window; these cases put
the out-of-range number on either side of, and across, a window boundary, in long texts.
"""

from __future__ import annotations

import json

import pytest

from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.core.values.strictjson import _WINDOW, ArgumentsError, parse_arguments


@pytest.mark.parametrize("offset", [-40, -20, -12, -8, -3, 0, 5, 40])
@pytest.mark.parametrize("number", ["9007199254740992", "-9007199254740993", "1e309", "2E+400"])
def test_out_of_range_numbers_near_a_window_boundary(offset: int, number: str) -> None:
    head = '{"pad": "' + "x" * (_WINDOW + offset) + '", "n": '
    with pytest.raises(ArgumentsError) as caught:
        parse_arguments(head + number + "}", max_depth=8)
    assert caught.value.reason is QuarantineReason.NUMBER_OUT_OF_RANGE


def test_long_digit_runs_inside_strings_keep_numbers_exact() -> None:
    text = json.dumps({"id": "12345678901234567890", "n": 9007199254740991, "f": 0.1})
    assert parse_arguments(text, max_depth=8) == {
        "id": "12345678901234567890",
        "n": 9007199254740991,
        "f": 0.1,
    }


def test_numbers_are_the_decoders_own_when_no_hook_is_needed() -> None:
    value = parse_arguments('{"a": 123456789012345, "b": 1.5e99, "c": -0.0}', max_depth=8)
    assert value == {"a": 123456789012345, "b": 1.5e99, "c": -0.0}
    assert type(value["a"]) is int and type(value["b"]) is float
