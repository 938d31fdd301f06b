"""Tool registration (both shapes, every config error), the validator cache, and verdicts."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.values.registry import (
    UNEVALUABLE,
    SchemaVerdict,
    ToolRegistry,
    ToolSpec,
    _compile,
)

CANARY = C = "CANARY-9d41c0"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string"},
        "lines": {"type": "array", "items": {"type": "integer"}},
        "a/b~c": {"type": "integer"},
        "mode": {"enum": ["read", "write"]},
        "never": False,
        "point": {"$ref": "#/$defs/point"},
        "env": {
            "type": "object",
            "patternProperties": {"^[A-Z0-9_]+$": {"type": "string"}},
            "additionalProperties": False,
        },
        "extra": {"type": "object", "additionalProperties": {"type": "integer"}},
        "choice": {"anyOf": [{"type": "integer"}, {"type": "object", "required": ["kind"]}]},
    },
    "required": ["path"],
    "additionalProperties": False,
    "$defs": {"point": {"type": "object", "properties": {"x": {"type": "number"}}}},
}


def chat(name: str, parameters: Any = SCHEMA, **more: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters, **more}}


def responses(name: str, parameters: Any = SCHEMA, **more: Any) -> dict[str, Any]:
    return {"type": "function", "name": name, "parameters": parameters, **more}


@pytest.fixture(params=[chat, responses], ids=["chat", "responses"])
def spec(request: pytest.FixtureRequest) -> ToolSpec:
    shape = request.param
    registry = ToolRegistry.from_tools([shape("edit", description="d", strict=True)])
    found = registry.get("edit")
    assert found is not None
    return found


# ---- registration ------------------------------------------------------------------------


def test_both_shapes_register() -> None:
    registry = ToolRegistry.from_tools([chat("a"), responses("b")])
    assert len(registry) == 2
    assert registry.names == frozenset({"a", "b"})
    assert "a" in registry and "b" in registry
    assert "c" not in registry and 5 not in registry
    assert registry.get("c") is None
    assert [s.name for s in registry] == ["a", "b"]
    assert repr(registry) == "ToolRegistry(['a', 'b'])"
    a, b = registry.get("a"), registry.get("b")
    assert a is not None and b is not None
    assert a.schema == b.schema == SCHEMA


def test_empty_registry() -> None:
    assert len(ToolRegistry()) == 0
    assert len(ToolRegistry.from_tools([])) == 0
    assert len(ToolRegistry.from_tools(iter(()))) == 0


@pytest.mark.parametrize("shape", [chat, responses])
def test_missing_parameters_means_any_object(shape: Any) -> None:
    tool = shape("t")
    del (tool["function"] if shape is chat else tool)["parameters"]
    spec = ToolRegistry.from_tools([tool]).get("t")
    assert spec is not None
    assert dict(spec.schema) == {"type": "object"}
    assert spec.validate({"anything": [1, {"goes": None}]}) is None
    assert spec.validate(["not", "an", "object"]) == SchemaVerdict("type", "")


class Unserialisable:
    pass


def cyclic() -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    schema["default"] = schema
    return schema


def nested_not(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"not": schema}
    return schema


CONFIG_ERRORS: list[tuple[str, Any, str]] = [
    ("tools is a mapping", chat("a"), "tools must be a list"),
    ("tools is a string", "tools", "tools must be a list"),
    ("tools is None", None, "tools must be a list"),
    ("tool not a mapping", [chat("a"), "b"], "tools[1] is not a mapping"),
    ("other tool type", [{"type": "teleport"}], "tools[0]: only tools of type 'function'"),
    ("other tool type, named", [{"type": "teleport", "name": "grep"}], "tool 'grep': only tools"),
    ("custom tool without a name", [{"type": "custom"}], "tools[0]: a custom tool needs"),
    ("type missing", [{"function": {"name": "f"}}], "tool 'f': only tools of type 'function'"),
    ("function not a mapping", [{"type": "function", "function": "f"}], "tools[0]: 'function'"),
    ("name missing (chat)", [{"type": "function", "function": {}}], "tools[0]: the function"),
    ("name missing (responses)", [{"type": "function"}], "tools[0]: the function needs"),
    ("name empty", [responses("")], "tools[0]: the function needs a non-empty string 'name'"),
    ("name not a string", [responses(7)], "tools[0]: the function needs"),  # type: ignore[arg-type]
    ("duplicate name", [chat("a"), responses("b"), responses("a")], "tool 'a' is declared more"),
    ("parameters None", [chat("a", None)], "tool 'a': 'parameters' must be a JSON Schema object"),
    ("parameters a list", [responses("a", [])], "tool 'a': 'parameters' must be"),
    ("parameters a bool", [responses("a", True)], "tool 'a': 'parameters' must be"),
    (
        "bad type name",
        [chat("a", {"type": "objekt"})],
        "fails the Draft202012Validator metaschema at $.type (anyOf)",
    ),
    (
        "bad nested keyword",
        [chat("a", {"properties": {"n": {"minLength": -1}}})],
        "metaschema at $.properties.n.minLength (minimum)",
    ),
    ("required not an array", [chat("a", {"required": "x"})], "metaschema at $.required (type)"),
    ("bad regex", [chat("a", {"pattern": "("})], "metaschema at $.pattern (format)"),
    ("2020-12 rejects array items", [chat("a", {"items": [{"type": "string"}]})], "$.items"),
    (
        "unknown $schema",
        [chat("a", {"$schema": "https://example.com/nope"})],
        "tool 'a': parameters are not a usable schema: its $schema names no dialect",
    ),
    ("$schema not a string", [chat("a", {"$schema": 5})], "names no dialect"),
    (
        "not JSON data",
        [chat("a", {"default": Unserialisable()})],
        "tool 'a': parameters are not JSON data",
    ),
    ("NaN in schema", [chat("a", {"maximum": float("nan")})], "parameters are not JSON data"),
    ("cycle in schema", [chat("a", cyclic())], "parameters are not JSON data"),
    ("huge integer in schema", [chat("a", {"maximum": 10**5000})], "parameters are not JSON data"),
    (
        "mixed key types",
        [chat("a", {"properties": {1: {}, "b": {}}})],
        "parameters are not JSON data",
    ),
    ("too deep to check", [chat("a", nested_not(400))], "nested too deeply to check"),
]


@pytest.mark.parametrize(
    ("tools", "message"),
    [(t, m) for _, t, m in CONFIG_ERRORS],
    ids=[i for i, _, _ in CONFIG_ERRORS],
)
def test_config_errors(tools: Any, message: str) -> None:
    caught: GateConfigError | None = None
    try:
        ToolRegistry.from_tools(tools)
    except GateConfigError as err:
        caught = err
    assert caught is not None
    assert message in str(caught)
    assert isinstance(caught, ValueError)
    # Raised outside any except block: no jsonschema/json error rides along.
    assert caught.__context__ is None and caught.__cause__ is None


def test_declared_dialect_is_used() -> None:
    tuple_items = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "items": [{"type": "string"}],
    }
    spec = ToolSpec.build("t", tuple_items)
    assert isinstance(spec.validator, Draft7Validator)
    assert spec.validate(["ok", 5]) is None
    assert spec.validate([5]) == SchemaVerdict("type", "/0")
    assert isinstance(ToolSpec.build("u", {"type": "object"}).validator, Draft202012Validator)


def test_format_is_not_asserted() -> None:
    spec = ToolSpec.build("t", {"properties": {"e": {"type": "string", "format": "email"}}})
    assert spec.validate({"e": "not an email"}) is None


def test_mappings_that_are_not_dicts_are_accepted() -> None:
    params = MappingProxyType({"type": "object", "properties": MappingProxyType({"n": {}})})
    spec = ToolRegistry.from_tools([MappingProxyType(chat("t", params))]).get("t")
    assert spec is not None
    assert spec.declared == frozenset({"n"})


# ---- the validator cache ------------------------------------------------------------------


def test_identical_schemas_share_one_validator() -> None:
    first = ToolRegistry.from_tools([chat("a")])
    hits = _compile.cache_info().hits
    reordered = dict(reversed(list(copy.deepcopy(SCHEMA).items())))
    second = ToolRegistry.from_tools([responses("a", reordered), responses("b")])
    a1, a2, b2 = first.get("a"), second.get("a"), second.get("b")
    assert a1 is not None and a2 is not None and b2 is not None
    assert a1.validator is a2.validator is b2.validator
    assert a1.schema is not SCHEMA
    assert _compile.cache_info().hits >= hits + 2
    other = ToolSpec.build("c", {**SCHEMA, "minProperties": 1})
    assert other.validator is not a1.validator


def test_later_mutation_of_the_callers_schema_has_no_effect() -> None:
    params = copy.deepcopy(SCHEMA)
    spec = ToolSpec.build("t", params)
    params["properties"]["path"]["type"] = "integer"
    params["required"].append("mode")
    assert spec.validate({"path": "x"}) is None
    assert spec.schema["properties"]["path"] == {"type": "string"}


def test_failures_are_reported_every_time() -> None:
    for _ in range(2):
        with pytest.raises(GateConfigError, match="metaschema"):
            ToolSpec.build("t", {"type": 5})


# ---- verdicts ---------------------------------------------------------------------------

VERDICTS: list[tuple[str, Any, SchemaVerdict | None]] = [
    ("valid", {"path": C}, None),
    (
        "valid everything",
        {
            "path": "p",
            "lines": [1, 2],
            "a/b~c": 3,
            "mode": "read",
            "point": {"x": 1.5},
            "env": {"HOME": C},
            "extra": {C: 1},
            "choice": {"kind": C},
        },
        None,
    ),
    ("not an object", [C], SchemaVerdict("type", "")),
    ("required missing", {"mode": "read"}, SchemaVerdict("required", "")),
    ("wrong type", {"path": 5}, SchemaVerdict("type", "/path")),
    ("array index kept", {"path": "p", "lines": [1, C]}, SchemaVerdict("type", "/lines/1")),
    ("pointer escaping", {"path": "p", "a/b~c": C}, SchemaVerdict("type", "/a~1b~0c")),
    ("enum", {"path": "p", "mode": C}, SchemaVerdict("enum", "/mode")),
    # jsonschema (4.26) drops the path of an error raised by a `false` subschema.
    ("false subschema", {"path": "p", "never": C}, SchemaVerdict("false", "")),
    ("$ref", {"path": "p", "point": {"x": C}}, SchemaVerdict("type", "/point/x")),
    ("undeclared key at top", {"path": "p", C: 1}, SchemaVerdict("additionalProperties", "")),
    (
        "patternProperties key",
        {"path": "p", "env": {C.upper().replace("-", "_"): 5}},
        SchemaVerdict("type", "/env/*"),
    ),
    (
        "additionalProperties false below",
        {"path": "p", "env": {C: "v"}},
        SchemaVerdict("additionalProperties", "/env"),
    ),
    (
        "additionalProperties schema",
        {"path": "p", "extra": {C: "v"}},
        SchemaVerdict("type", "/extra/*"),
    ),
    (
        "undeclared key with ~ and /",
        {"path": "p", "extra": {"~/" + C: "v"}},
        SchemaVerdict("type", "/extra/*"),
    ),
    ("anyOf descends", {"path": "p", "choice": {C: 1}}, SchemaVerdict("required", "/choice")),
]


@pytest.mark.parametrize(
    ("value", "expected"), [(v, e) for _, v, e in VERDICTS], ids=[i for i, _, _ in VERDICTS]
)
def test_verdicts(spec: ToolSpec, value: Any, expected: SchemaVerdict | None) -> None:
    verdict = spec.validate(value)
    assert verdict == expected
    assert CANARY not in repr(verdict)
    assert CANARY.upper().replace("-", "_") not in repr(verdict)


def test_key_named_by_required_only_is_shown() -> None:
    spec = ToolSpec.build("t", {"required": ["mode"], "additionalProperties": {"type": "string"}})
    assert spec.validate({"mode": 1}) == SchemaVerdict("type", "/mode")
    assert spec.validate({"mode": "m", "other": 1}) == SchemaVerdict("type", "/*")


def test_names_in_non_schema_places_are_tolerated() -> None:
    spec = ToolSpec.build(
        "t", {"const": {"properties": 1, "required": 2}, "examples": [{"required": ["z"]}]}
    )
    assert spec.declared == frozenset({"z"})


@pytest.mark.parametrize(
    "schema",
    [
        {"$ref": "#"},
        {"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"},
        {"properties": {"p": {"$ref": "https://example.invalid/schema.json"}}},
    ],
    ids=["self reference", "reference loop", "unresolvable reference"],
)
def test_validation_never_raises(schema: Mapping[str, Any]) -> None:
    spec = ToolSpec.build("t", schema)
    verdict = spec.validate({"p": CANARY})
    assert verdict == UNEVALUABLE
    assert CANARY not in repr(verdict)


def test_verdict_is_deterministic(spec: ToolSpec) -> None:
    value = {"path": 1, "lines": ["x"], "mode": "z", CANARY: 0}
    assert len({spec.validate(value) for _ in range(20)}) == 1


# ---- all_of: several gates' registries judging one call together ---------------------------
def _tool(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": parameters}}


def test_all_of_knows_only_the_tools_every_registry_knows() -> None:
    wide = ToolRegistry.from_tools([_tool("a", {}), _tool("b", {})])
    narrow = ToolRegistry.from_tools([_tool("b", {})])
    both = ToolRegistry.all_of([wide, narrow])
    assert both.names == frozenset({"b"})
    assert ToolRegistry.all_of([narrow, wide]).names == frozenset({"b"})


def test_all_of_a_value_must_pass_every_schema_and_the_first_failure_is_named() -> None:
    low = ToolRegistry.from_tools([_tool("t", {"properties": {"n": {"maximum": 5}}})])
    even = ToolRegistry.from_tools([_tool("t", {"properties": {"n": {"multipleOf": 2}}})])
    typed = ToolRegistry.from_tools([_tool("t", {"properties": {"n": {"type": "integer"}}})])
    spec = ToolRegistry.all_of([low, ToolRegistry.all_of([even, typed])]).get("t")
    assert spec is not None
    assert spec.validate({"n": 4}) is None
    assert spec.validate({"n": 6}) == SchemaVerdict("maximum", "/n")
    assert spec.validate({"n": 3}) == SchemaVerdict("multipleOf", "/n")
    assert spec.validate({"n": "4"}) == SchemaVerdict("type", "/n")


def test_all_of_custom_tools_with_different_grammars_are_left_out() -> None:
    def custom(name: str, pattern: str | None) -> dict[str, Any]:
        tool: dict[str, Any] = {"type": "custom", "name": name}
        if pattern is not None:
            tool["format"] = {"type": "grammar", "syntax": "regex", "definition": pattern}
        return tool

    one = ToolRegistry.from_tools([custom("x", "a+"), custom("y", None), custom("z", "b")])
    two = ToolRegistry.from_tools([custom("x", "c+"), custom("y", "d"), custom("z", "b")])
    both = ToolRegistry.all_of([one, two])
    assert "custom:x" not in both.declared  # two grammars cannot be one: refused
    assert "custom:y" in both.declared and both.grammars["y"].accepts("d")
    assert both.grammars["z"] is one.grammars["z"]


def test_all_of_needs_a_registry() -> None:
    with pytest.raises(GateConfigError):
        ToolRegistry.all_of([])


def test_the_tightest_limits_take_each_lowest_value() -> None:
    from litellm_toolgate import Limits

    tight = Limits.tightest([Limits(max_calls=3), Limits(idle_timeout=5.0, max_calls=9)])
    assert (tight.max_calls, tight.idle_timeout) == (3, 5.0)
    assert tight.max_body_bytes == Limits().max_body_bytes
    assert Limits.tightest([]) == Limits()
