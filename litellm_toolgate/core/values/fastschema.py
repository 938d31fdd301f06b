r"""The fast path of schema validation: jsonschema-rs may say "valid", jsonschema says the rest.

Theory of operation
-------------------
``jsonschema`` (pure Python) is the reference validator. It costs about 0.3 ms per kilobyte
of a document made of many small objects, so a 1 MB argument takes a quarter of a second or
more: far past what a gate may add to a stream, and long enough to stall an event loop.
``jsonschema-rs`` (Rust) answers the same question one to two orders of magnitude faster.

The split keeps every verdict the reference's own. A document the fast validator accepts is
accepted; any other document goes to ``jsonschema``, which decides, and names the failing
keyword and the path, exactly as before. Rejections, their keyword and path, and any
disagreement where the fast validator is the stricter one therefore cannot change. The one
thing the fast validator decides alone is *acceptance*, so it is used only for schemas
written entirely in a vocabulary where both implementations accept exactly the same
documents, which ``tests/test_schema_differential.py`` checks over every fixture schema and
hypothesis-generated documents:

* dialects Draft 7, 2019-09 and 2020-12 (the registry's default);
* the keywords in :data:`VETTED`; local ``$ref`` only (``#`` or a JSON Pointer), and no
  chain of references that leads back to itself: the reference recurses on such a schema
  until it gives up (the verdict is then "unevaluable", a rejection) where jsonschema-rs
  settles it, so a recursive schema stays with the reference;
* ``format`` as an annotation, as in the reference (``validate_formats=False``);
* ``pattern`` and ``patternProperties`` whose patterns jsonschema-rs runs exactly as
  ECMA-262 does (:func:`ecmaregex.rust_faithful`: no lookaround, ``\b``, ``\p{..}``, named
  group or surrogate; its ``\d``, ``\w``, ``\s``, ``.`` and ``$`` are ECMA's, as
  ``tests/test_ecmaregex.py`` checks against recorded JavaScript answers).

Left to ``jsonschema`` alone, on purpose: any other pattern, ``multipleOf`` (float division
against exact arithmetic), conditionals, ``contains``, ``propertyNames``, ``dependent*``,
``unevaluated*``, ``$id``, anchors and dynamic references, any keyword not listed, and older
drafts. The fast validator is built
``offline``: it never fetches anything (no I/O in the core), and a schema it cannot build
simply has no fast path.

The fast validator never reports anything: only its boolean is read, so no error of its
(whose messages quote the instance) can reach a record, a log or an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema_rs
from jsonschema import Draft7Validator, Draft201909Validator, Draft202012Validator

from .ecmaregex import rust_faithful

__all__ = ["VETTED", "fast_validator"]

_RUST: dict[type, Any] = {
    Draft7Validator: jsonschema_rs.Draft7Validator,
    Draft201909Validator: jsonschema_rs.Draft201909Validator,
    Draft202012Validator: jsonschema_rs.Draft202012Validator,
}

_SCHEMA = frozenset({"additionalProperties", "not", "items", "additionalItems"})
_SCHEMA_LISTS = frozenset({"anyOf", "allOf", "oneOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions"})
_VALUES = frozenset(
    {
        "type",
        "required",
        "enum",
        "const",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "minProperties",
        "maxProperties",
        "uniqueItems",
        "pattern",
        "format",
        "$ref",
        "$schema",
        "$comment",
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
VETTED = _SCHEMA | _SCHEMA_LISTS | _SCHEMA_MAPS | _VALUES
"""Every keyword a schema may use for the fast path to be taken."""


def _subschemas(node: dict[str, Any]) -> list[Any]:
    found: list[Any] = []
    for key, value in node.items():
        if key in _SCHEMA:
            # Draft 7 spells positional items as a list of schemas.
            found.extend(value if isinstance(value, list) else [value])
        elif key in _SCHEMA_LISTS:
            found.extend(value)
        elif key in _SCHEMA_MAPS:
            found.extend(value.values())
    return found


def _vetted(schema: Any) -> list[str] | None:
    """Every ``$ref`` in the schema, or None unless every (sub)schema uses only vetted
    keywords and local JSON Pointer references."""
    refs: list[str] = []
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict) or not VETTED.issuperset(node):
            return None
        if any(not isinstance(node[key], list) for key in _SCHEMA_LISTS.intersection(node)) or any(
            not isinstance(node[key], dict) for key in _SCHEMA_MAPS.intersection(node)
        ):
            return None
        # Patterns only where jsonschema-rs's regex answers exactly as ECMA-262 does.
        if "pattern" in node and not (
            isinstance(node["pattern"], str) and rust_faithful(node["pattern"])
        ):
            return None
        if "patternProperties" in node and not all(map(rust_faithful, node["patternProperties"])):
            return None
        ref = node.get("$ref")
        if ref is not None:
            if not isinstance(ref, str) or not (ref == "#" or ref.startswith("#/")) or "%" in ref:
                return None
            refs.append(ref)
        pending.extend(_subschemas(node))
    return refs


def _resolve(root: Any, ref: str) -> Any:
    node = root
    for token in ref[2:].split("/") if ref != "#" else []:
        key = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return _ABSENT
    return node


_ABSENT = object()


def _acyclic(root: Any, refs: list[str]) -> bool:
    """True when no chain of references leads back to where it started (and all resolve)."""
    done: set[str] = set()

    def visit(ref: str, path: frozenset[str]) -> bool:
        if ref in path:
            return False
        if ref in done:
            return True
        target = _resolve(root, ref)
        inner = None if target is _ABSENT else _vetted(target)
        if inner is None or not all(visit(r, path | {ref}) for r in inner):
            return False
        done.add(ref)
        return True

    try:
        return all(visit(ref, frozenset()) for ref in refs)
    except RecursionError:
        return False


def fast_validator(schema: dict[str, Any], dialect: type) -> Callable[[Any], bool] | None:
    """``is_valid`` of a jsonschema-rs validator for ``schema``, or None when there is none."""
    rust = _RUST.get(dialect)
    refs = _vetted(schema) if rust is not None else None
    if rust is None or refs is None or not _acyclic(schema, refs):
        return None
    try:
        validator = rust(schema, validate_formats=False, offline=True)
    except Exception:  # a schema it cannot build (or will not fetch for): no fast path
        return None
    is_valid: Callable[[Any], bool] = validator.is_valid
    return is_valid
