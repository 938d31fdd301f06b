"""jsonschema-rs (the fast path) against jsonschema (the reference), document by document.

The registry lets jsonschema-rs accept a document on its own (see ``core/values/fastschema.py``),
so for every schema that takes the fast path the two must accept exactly the same
documents. Beyond that, both must reject with the same failing keywords at the same
instance paths, and the verdict the registry reports must be the reference's own, with a
path that holds no instance value. Checked over every fixture schema, the benchmark's
schemas, and schemas that use each vetted keyword, with documents drawn from the schema
itself (mostly valid, then mutated) and arbitrary JSON.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from typing import Any

import jsonschema_rs
import pytest
from conftest import MANIFEST
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema.exceptions import best_match

from litellm_toolgate.core.values.fastschema import VETTED
from litellm_toolgate.core.values.registry import ToolSpec, _dialect_of

SAFE = 2**53 - 1

ROWS = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "maxLength": 20},
        "rows": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "integer", "minimum": 0},
                    "kind": {"enum": ["a", "b", 1, None]},
                    "value": {"type": "number", "exclusiveMaximum": 100},
                    "ok": {"type": "boolean"},
                    "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
                    "note": {"type": ["string", "null"], "minLength": 2},
                },
                "required": ["id", "kind"],
                "additionalProperties": False,
            },
            "minItems": 1,
            "maxItems": 4,
        },
    },
    "required": ["title", "rows"],
}

KEYWORDS = {
    "type": "object",
    "$defs": {
        "point": {
            "type": "object",
            "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
            "required": ["x"],
            "minProperties": 1,
            "maxProperties": 2,
        },
        "name": {"type": "string", "minLength": 1, "maxLength": 3, "format": "email"},
    },
    "properties": {
        "p": {"$ref": "#/$defs/point"},
        "n": {"$ref": "#/$defs/name"},
        "c": {"const": 1},
        "e": {"enum": [0, 1.5, True, "x", [1, 2], {"k": 1}]},
        "any": {"anyOf": [{"type": "integer", "maximum": 3}, {"type": "string"}]},
        "one": {"oneOf": [{"type": "number", "minimum": 0}, {"type": "integer", "maximum": 5}]},
        "all": {"allOf": [{"type": "number"}, {"exclusiveMinimum": -1, "maximum": 10}]},
        "not": {"not": {"type": "string"}},
        "tuple": {"type": "array", "prefixItems": [{"type": "string"}, {"type": "number"}]},
        "u": {"type": "array", "uniqueItems": True},
        "f": False,
        "t": True,
    },
    "additionalProperties": {"type": ["integer", "boolean"]},
}

DRAFT7 = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {"leaf": {"type": "number", "exclusiveMinimum": 0}},
    "properties": {
        "items": {"type": "array", "items": [{"type": "string"}, {"$ref": "#/definitions/leaf"}]},
        "more": {"type": "array", "items": {"type": "integer"}, "additionalItems": False},
    },
}

PATTERNS = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,7}$"},
        "digits": {"type": "string", "pattern": r"^\d+$"},
        "word": {"type": "string", "pattern": r"^\w+\s?$"},
        "line": {"type": "string", "pattern": "^a.c$|^x$"},
        "env": {
            "type": "object",
            "patternProperties": {"^[A-Z_]+$": {"type": "string"}, r"^x\d$": {"type": "integer"}},
            "additionalProperties": False,
        },
    },
}

SCHEMAS: dict[str, dict[str, Any]] = {
    **{
        f"fixture {tool['function']['name']}": tool["function"]["parameters"]
        for tool in MANIFEST["tools"]
    },
    "rows": ROWS,
    "every keyword": KEYWORDS,
    "draft 7": DRAFT7,
    "patterns": PATTERNS,
    "open object": {"type": "object"},
}


def _resolve(root: dict[str, Any], ref: str) -> dict[str, Any]:
    node: Any = root
    for token in ref[2:].split("/"):
        node = node[token]
    return node  # type: ignore[no-any-return]


def json_values() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-SAFE, SAFE)
        | st.sampled_from([0, 1, -1, 1.0, 0.5, 1.5, 3, 5, 10, 100, -1.0])
        | st.floats(allow_nan=False, allow_infinity=False)
        | st.text(max_size=6)
        | st.sampled_from(["", "a", "x", "ab", "abcd", "a@b"])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(st.sampled_from(["x", "y", "k", "id", "a", "zz"]), inner, max_size=3)
        ),
        max_leaves=8,
    )


def from_schema(schema: Any, root: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Documents shaped by the schema: mostly valid, sometimes not (no guarantee either way)."""
    if not isinstance(schema, dict) or depth > 6:
        return json_values()
    if "$ref" in schema:
        return from_schema(_resolve(root, schema["$ref"]), root, depth + 1)
    if "const" in schema:
        return st.just(copy.deepcopy(schema["const"]))
    if "enum" in schema:
        return st.sampled_from([copy.deepcopy(v) for v in schema["enum"]])
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return st.one_of([from_schema(s, root, depth + 1) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([from_schema({**schema, "type": k}, root, depth) for k in kind])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        fixed = st.fixed_dictionaries(
            {k: from_schema(props[k], root, depth + 1) for k in required},
            optional={k: from_schema(props[k], root, depth + 1) for k in optional},
        )
        patterned = schema.get("patternProperties", {})
        if not patterned:
            return fixed
        # Keys that match a pattern (by its ECMA-262 translation) and near misses of them.
        keys = st.one_of([near(pattern) for pattern in patterned])
        extra = st.dictionaries(keys, json_values() | st.text(max_size=3), max_size=3)
        return st.tuples(fixed, extra).map(lambda pair: {**pair[1], **pair[0]})
    if kind == "array":
        items = schema.get("items", {})
        if isinstance(items, list) or "prefixItems" in schema:
            firsts = items if isinstance(items, list) else schema["prefixItems"]
            return st.tuples(*[from_schema(s, root, depth + 1) for s in firsts]).map(list)
        return st.lists(
            from_schema(items, root, depth + 1),
            min_size=schema.get("minItems", 0),
            max_size=min(schema.get("maxItems", 3), 3),
        )
    if kind == "string":
        if "pattern" in schema:
            return near(schema["pattern"])
        return st.text(min_size=schema.get("minLength", 0), max_size=schema.get("maxLength", 8))
    if kind == "integer":
        low = schema.get("minimum", -20)
        high = schema.get("maximum", 20)
        return st.integers(low, max(low, high)) | st.integers(low, max(low, high)).map(float)
    if kind == "number":
        return st.floats(-200, 200, allow_nan=False) | st.integers(-200, 200)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values()


TRICKY = "az09_-AZ \n\r\t.\u00e9\u0661\u00a0\ufeff\u0085\u2028"


@functools.cache
def near(pattern: str) -> st.SearchStrategy[str]:
    """Strings that match the pattern read by Python's rules (so also the near misses where
    Python and ECMA-262 differ: a final newline, Unicode digits), the same with a tricky
    character added, and noise."""
    matching = st.from_regex(pattern)
    return st.one_of(
        matching,
        st.tuples(matching, st.sampled_from(TRICKY)).map("".join),
        st.text(TRICKY, max_size=6),
    )


def mutate(doc: Any, data: st.DataObject) -> Any:
    """Change one place in a document: the near misses where validators may disagree."""
    if isinstance(doc, dict) and doc and data.draw(st.booleans()):
        key = data.draw(st.sampled_from(sorted(doc)))
        return {**doc, key: mutate(doc[key], data)}
    if isinstance(doc, list) and doc and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], mutate(doc[i], data), *doc[i + 1 :]]
    return data.draw(json_values())


_RUST: dict[str, Any] = {}


def keyword_paths_rs(name: str, doc: Any) -> set[tuple[str, tuple[Any, ...]]]:
    validator = _RUST.get(name)
    if validator is None:
        validator = _RUST[name] = jsonschema_rs.validator_for(
            SCHEMAS[name], validate_formats=False, offline=True
        )
    found = set()
    for error in validator.iter_errors(doc):
        if type(error.kind).__name__ == "FalseSchema":
            # The reference reports a `false` subschema without an instance path.
            found.add(("false", ()))
        else:
            found.add((error.schema_path[-1], tuple(error.instance_path)))
    return found


def keyword_paths_reference(spec: ToolSpec, doc: Any) -> set[tuple[str, tuple[Any, ...]]]:
    return {
        (e.validator, tuple(e.absolute_path)) if isinstance(e.validator, str) else ("false", ())
        for e in spec.validator.iter_errors(doc)
    }


def schema_keywords(schema: Any) -> set[str]:
    if isinstance(schema, list):
        return set().union(*(schema_keywords(s) for s in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    found = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs", "definitions"):
            found |= schema_keywords(list(value.values()))
        elif key not in ("enum", "const", "required", "default", "examples"):
            found |= schema_keywords(value)
    return found


def test_the_schemas_cover_every_vetted_keyword() -> None:
    used = set().union(*(schema_keywords(s) for s in SCHEMAS.values()))
    missing = VETTED - used - {"$schema", "$comment", "title", "description", "default"}
    missing -= {"examples", "deprecated", "readOnly", "writeOnly"}
    assert not missing


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_every_schema_here_takes_the_fast_path(name: str) -> None:
    assert ToolSpec.build("t", SCHEMAS[name]).fast is not None


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_both_validators_agree(name: str, data: st.DataObject) -> None:
    schema = SCHEMAS[name]
    spec = ToolSpec.build("t", schema)
    reference = dataclasses.replace(spec, fast=None)
    shaped = data.draw(from_schema(schema, schema))
    doc = data.draw(st.sampled_from([shaped, mutate(shaped, data), data.draw(json_values())]))

    assert spec.fast is not None
    reference_accepts = best_match(spec.validator.iter_errors(doc)) is None
    # 1. The same documents are accepted (and so rejected).
    assert spec.fast(doc) is reference_accepts
    # 2. Rejected with the same failing keywords at the same instance paths.
    assert keyword_paths_rs(name, doc) == keyword_paths_reference(spec, doc)
    # 3. The registry's verdict is the reference's own, and its path holds no values.
    verdict = spec.validate(doc)
    assert verdict == reference.validate(doc)
    if verdict is not None:
        tokens = verdict.path.split("/")[1:]
        assert all(t == "*" or t.isdigit() or t in spec.declared for t in tokens)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"p": {"type": "string", "pattern": r"\ba"}}},
        {"type": "object", "patternProperties": {r"^\p{L}": {"type": "string"}}},
        {"type": "object", "properties": {"n": {"multipleOf": 0.1}}},
        {"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}},
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"$defs": {"t": {"properties": {"c": {"items": {"$ref": "#/$defs/t"}}}}}},
        {"properties": {"p": {"$ref": "https://example.invalid/schema.json"}}},
        {"properties": {"p": {"$ref": "#/$defs/missing"}}},
        {"$id": "https://example.invalid/s", "type": "object"},
        {"$schema": "http://json-schema.org/draft-04/schema#", "type": "object"},
        {"type": "object", "x-vendor": {"type": "string"}},
    ],
    ids=[
        "pattern",
        "patternProperties",
        "multipleOf",
        "conditional",
        "self reference",
        "reference loop",
        "recursive definition",
        "remote reference",
        "missing reference",
        "$id",
        "draft 4",
        "unknown keyword",
    ],
)
def test_schemas_outside_the_vetted_vocabulary_use_the_reference_alone(
    schema: dict[str, Any],
) -> None:
    assert _dialect_of(schema) is not None
    spec = ToolSpec.build("t", schema)
    assert spec.fast is None
