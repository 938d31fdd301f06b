"""The registry's costs under hostile input: a rejection stops at its first error, and the
validator cache, keyed by client-supplied schema text, is bounded in bytes."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

from litellm_toolgate.core.values import registry
from litellm_toolgate.core.values.registry import SchemaVerdict, ToolSpec

ROWS = {
    "type": "object",
    "properties": {
        "rows": {
            "type": "array",
            "items": {"type": "object", "properties": {"id": {"type": "integer"}}},
        }
    },
}


class CountingValidator:
    """Hands on the real validator's errors and counts how many were taken."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.taken = 0

    def iter_errors(self, value: Any) -> Iterator[Any]:
        for error in self.inner.iter_errors(value):
            self.taken += 1
            yield error


def test_a_rejection_takes_only_the_first_error() -> None:
    spec = ToolSpec.build("t", ROWS)
    counting = CountingValidator(spec.validator)
    spec = dataclasses.replace(spec, validator=counting, fast=None)  # type: ignore[arg-type]
    document = {"rows": [{"id": "not an integer"}] * 5000}
    assert spec.validate(document) == SchemaVerdict("type", "/rows/0/id")
    assert counting.taken == 1  # before: all 5000 were built to pick the best one


def test_the_first_error_still_descends_into_any_of() -> None:
    spec = ToolSpec.build(
        "t",
        {
            "type": "object",
            "properties": {
                "choice": {"anyOf": [{"type": "integer"}, {"type": "object", "required": ["k"]}]}
            },
        },
    )
    assert spec.validate({"choice": {}}) == SchemaVerdict("required", "/choice")


def canonical(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, allow_nan=False, separators=(",", ":"))


def test_the_validator_cache_is_bounded_in_bytes() -> None:
    cache = registry._CompiledCache(entries=256, charge_limit=4 * 1024 * 1024)
    # Each schema is about 20 KB of text: 256 of them would be kept by a count bound alone.
    for n in range(40):
        schema = {"type": "object", "description": f"{n}" + "x" * 20_000}
        compiled = cache(canonical(schema))
        assert not isinstance(compiled, str)
    info = cache.cache_info()
    assert info.misses == 40
    assert 0 < info.currsize < 40
    assert cache.charged <= 4 * 1024 * 1024
    # The most recent one is still there; the oldest ones were dropped.
    cache(canonical({"type": "object", "description": "39" + "x" * 20_000}))
    assert cache.cache_info().hits == 1


def test_a_schema_too_large_to_keep_is_compiled_but_not_kept() -> None:
    cache = registry._CompiledCache(entries=256, charge_limit=1024 * 1024)
    huge = canonical({"type": "object", "description": "x" * 100_000})
    assert not isinstance(cache(huge), str)
    assert cache.cache_info().currsize == 0 and cache.charged == 0


def test_the_module_cache_has_a_byte_bound() -> None:
    assert isinstance(registry._compile, registry._CompiledCache)
    assert registry._CACHE_BYTES <= 64 * 1024 * 1024
