"""JSON Schema's pattern keywords with ECMA-262 semantics, for jsonschema.

jsonschema searches ``pattern`` and ``patternProperties`` (and, through the latter,
``additionalProperties``) with Python's ``re``. :func:`ecma_dialect` is a dialect with those
three keywords searching by :mod:`ecmaregex` instead, and :func:`schema_formats` the format
checker that the registry checks schemas with: the metaschema's ``format: regex`` marks
every place a pattern stands (``pattern``, and ``patternProperties`` names from Draft 6 on),
so an ECMA-262 ``regex`` format refuses, at registration, every pattern that cannot be run
exactly. :func:`pattern_problem` covers what the metaschemas leave out.

Verdicts never hold values: the errors raised here say only which keyword failed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

from jsonschema import Draft3Validator, Draft4Validator, FormatChecker, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from .ecmaregex import PatternError, compile_pattern, translate

__all__ = ["ecma_dialect", "pattern_problem", "schema_formats"]


def _is_ecma_pattern(instance: object) -> bool:
    if isinstance(instance, str):
        translate(instance)
    return True


@functools.cache
def schema_formats(dialect: type[Validator]) -> FormatChecker:
    """The dialect's own format checker for schemas, with ``regex`` read as ECMA-262."""
    checker = FormatChecker(formats=())
    checker.checkers = {
        **dialect.FORMAT_CHECKER.checkers,
        "regex": (_is_ecma_pattern, PatternError),
    }
    return checker


def pattern_problem(schema: dict[str, Any], canonical: str, dialect: type[Validator]) -> str | None:
    """What the metaschema check leaves to us: refuse what cannot be evaluated exactly."""
    if '"unevaluatedProperties":' in canonical and '"patternProperties":' in canonical:
        # jsonschema evaluates patternProperties inside unevaluatedProperties with Python's
        # re, in code that cannot be replaced keyword by keyword.
        return "unevaluatedProperties together with patternProperties is not supported"
    if dialect in (Draft3Validator, Draft4Validator):
        # Their metaschemas do not mark patternProperties names as regexes: check every
        # mapping under that key (data that merely looks like one is checked too: fail closed).
        pending: list[Any] = [schema]
        while pending:
            node = pending.pop()
            if isinstance(node, dict):
                names = node.get("patternProperties")
                if isinstance(names, dict) and not all(map(_translatable, names)):
                    return "a patternProperties name is not an ECMA-262 pattern it can run"
                pending.extend(node.values())
            elif isinstance(node, list):
                pending.extend(node)
    return None


def _translatable(pattern: str) -> bool:
    try:
        translate(pattern)
    except PatternError:
        return False
    return True


def _search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError("the string does not match the pattern")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {
        key
        for key in instance
        if key not in properties and not any(_search(pattern, key) for pattern in patterns)
    }
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        yield ValidationError("additional properties are not allowed")


@functools.cache
def ecma_dialect(dialect: type[Validator]) -> type[Validator]:
    """``dialect`` with ``pattern``, ``patternProperties`` and ``additionalProperties``
    searching by ECMA-262 rules."""
    extending: Callable[..., type[Validator]] = extend
    extended = extending(
        dialect,
        {
            "pattern": _pattern,
            "patternProperties": _pattern_properties,
            "additionalProperties": _additional_properties,
        },
    )
    return extended
