"""The tools a request declares, each with its compiled JSON Schema validator.

Theory of operation
-------------------
:meth:`ToolRegistry.from_tools` reads the request's ``tools`` in either shape litellm passes
on: chat-completions ``{"type": "function", "function": {"name", "parameters", ...}}`` or
Responses ``{"type": "function", "name", "parameters", ...}``. A missing ``parameters`` means
``{"type": "object"}``. Anything else that is wrong (not a mapping, another tool type, a
missing or duplicate name, a schema that is not JSON or fails its metaschema) is a
:class:`GateConfigError` naming the tool, raised at registration, never mid-stream.

Dialect: the schema's ``$schema`` if it names one jsonschema knows (an unknown one is a config
error rather than a silent fallback), else Draft 2020-12. ``format`` is *not* asserted: no
format checker is passed, so it stays an annotation, as the drafts specify by default and as
providers treat it; a gate stricter than the tool's own consumer would reject good calls.

Patterns (``pattern``, ``patternProperties``, and through them ``additionalProperties`` and
``propertyNames``) are ECMA-262 regular expressions, searched with ECMA-262 semantics (see
:mod:`ecmaregex`), never with Python's ``re`` rules. A pattern that cannot be run exactly is
a :class:`GateConfigError` at registration.

Compiling is the costly part and callers rebuild a registry from the same ``tools`` on every
request, so validators live in a module-level LRU, bounded in entries and in bytes, keyed by
the schema's canonical JSON
(``json.dumps(sort_keys=True)``). The validator is built from that canonical text, not from
the caller's object: key order cannot change which error is reported, and later mutation of
the caller's dicts cannot reach it. ``ToolSpec.schema`` is that shared copy: read-only.

Speed: when the schema allows it, a jsonschema-rs validator answers first and a document it
accepts is accepted at once; every other document is judged by jsonschema exactly as before,
so every verdict is still jsonschema's (see :mod:`fastschema` for which schemas qualify and
why that cannot change an outcome).

Verdicts never hold values. :meth:`ToolSpec.validate` returns the failing keyword and a JSON
Pointer into the arguments, in which every object key that the schema does not itself name
(in some ``properties`` or ``required``) is replaced by ``*``: keys the model made up are
content. The error is the first one jsonschema's evaluation meets (so a rejection costs no
more than evaluating up to it), descended into ``anyOf``/``oneOf`` by
:func:`jsonschema.exceptions.best_match`; deterministic for a given schema and value.
Validation never raises: if evaluation itself fails (an unresolvable ``$ref``, a
self-referential schema recursing without end), the verdict is :data:`UNEVALUABLE` (keyword
``"error"``, path ``""``) and the call fails closed. A ``false`` subschema has no keyword; its
verdict uses ``"false"``.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from jsonschema import Draft201909Validator, Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

from ..errors import GateConfigError
from ..wires.responses_items import DECLARED_TOOL_TYPES, declaration
from .ecmaschema import ecma_dialect, pattern_problem, schema_formats
from .fastschema import fast_validator
from .grammar import Grammar, format_of

__all__ = ["UNEVALUABLE", "SchemaVerdict", "ToolRegistry", "ToolSpec"]

# Distinct schemas kept compiled. A deployment sees a handful of tool sets, re-sent on every
# request; 256 covers many agents at once. The schema text is the client's, so the cache is
# bounded in bytes too: each entry is charged its text times _CHARGE_PER_BYTE plus a fixed
# _CHARGE_PER_ENTRY (measured: a compiled entry holds 11-40 bytes of Python objects per byte
# of canonical text, plus jsonschema-rs's own allocations), within _CACHE_BYTES; an entry
# charged more than a quarter of that is compiled for its request and not kept.
# Validators are shared between registries and threads: validating does not change them.
_CACHE_SIZE = 256
_CACHE_BYTES = 64 * 1024 * 1024
_CHARGE_PER_BYTE = 48
_CHARGE_PER_ENTRY = 32 * 1024
_OPEN_OBJECT: Mapping[str, Any] = MappingProxyType({"type": "object"})


@dataclass(frozen=True, slots=True)
class SchemaVerdict:
    """Why a value failed its schema. Holds no value, only schema vocabulary and positions."""

    keyword: str
    """The failing JSON Schema keyword, e.g. ``"required"`` or ``"type"``."""
    path: str
    """RFC 6901 pointer into the arguments; undeclared keys are ``*``, indices kept."""


UNEVALUABLE = SchemaVerdict("error", "")
"""The verdict when the validator itself failed on a value: treated as a schema failure."""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One registered tool: its name, its (canonical, read-only) schema and validator."""

    name: str
    schema: Mapping[str, Any]
    validator: Validator = field(repr=False, compare=False)
    declared: frozenset[str] = field(default=frozenset(), repr=False)
    """Property names the schema itself spells out; only these appear in verdict paths."""
    fast: Callable[[Any], bool] | None = field(default=None, repr=False, compare=False)
    """jsonschema-rs's ``is_valid`` for this schema, when it qualifies (see fastschema)."""
    also: tuple[ToolSpec, ...] = field(default=(), repr=False, compare=False)
    """Further specs of the same tool the value must satisfy too (:meth:`ToolRegistry.all_of`:
    the tool as each of several gates registered it)."""

    @classmethod
    def build(cls, name: str, parameters: Mapping[str, Any]) -> ToolSpec:
        """Compile (or reuse) the validator for ``parameters``; GateConfigError if unusable."""
        canonical: str | None = None
        # Not JSON data: an unserialisable object, NaN, a cycle, an over-long integer. The
        # error is raised below, once no exception is being handled.
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            canonical = json.dumps(
                parameters,
                sort_keys=True,
                allow_nan=False,
                separators=(",", ":"),
                default=_mapping_as_dict,
            )
        if canonical is None:
            raise GateConfigError(f"tool {name!r}: parameters are not JSON data")
        compiled = _compile(canonical)
        if isinstance(compiled, str):
            raise GateConfigError(f"tool {name!r}: parameters are not a usable schema: {compiled}")
        schema, validator, declared, fast = compiled
        return cls(name, MappingProxyType(schema), validator, declared, fast)

    def validate(self, value: Any) -> SchemaVerdict | None:
        """``None`` if ``value`` satisfies the schema (and every spec in :attr:`also`), else
        the verdict of the first schema's best error."""
        verdict = self._validate_own(value)
        for other in self.also:
            if verdict is not None:
                break
            verdict = other.validate(value)
        return verdict

    def _validate_own(self, value: Any) -> SchemaVerdict | None:
        if self.fast is not None:
            # Any failure of the fast path just leaves the decision to the reference.
            try:
                accepted = self.fast(value)
            except Exception:
                accepted = False
            if accepted is True:
                return None
        try:
            # The first error jsonschema meets, not the best of all of them: a rejection
            # stops there instead of evaluating (and keeping) every other error of a large
            # document. best_match on that one error still descends into anyOf/oneOf.
            error = best_match(itertools.islice(self.validator.iter_errors(value), 1))
        except Exception:  # fail closed; the exception may quote the value, so drop it here
            return UNEVALUABLE
        if error is None:
            return None
        # Only a `false` subschema yields an error without a keyword.
        keyword = error.validator if isinstance(error.validator, str) else "false"
        return SchemaVerdict(keyword, _pointer(error.absolute_path, self.declared))


class ToolRegistry:
    """The request's tools by name. Immutable once built."""

    __slots__ = ("_specs", "declared", "grammars")

    def __init__(
        self,
        specs: Iterable[ToolSpec] = (),
        declared: Iterable[str] = (),
        grammars: Mapping[str, Grammar] | None = None,
    ) -> None:
        # Non-function tools the request declares, by type (``shell``, ``web_search``) and,
        # for custom tools, ``custom:<name>``: what a Responses item may be a call of.
        self.declared = frozenset(declared)
        # The custom tools that declare a grammar, by name (core/values/grammar.py): their input
        # must be a sentence of it. A custom tool of the text format has no entry.
        self.grammars: Mapping[str, Grammar] = MappingProxyType(dict(grammars or {}))
        table: dict[str, ToolSpec] = {}
        for spec in specs:
            if spec.name in table:
                raise GateConfigError(f"tool {spec.name!r} is declared more than once")
            table[spec.name] = spec
        self._specs: dict[str, ToolSpec] = table  # never handed out: read-only by design

    @classmethod
    def from_tools(cls, tools: Iterable[Mapping[str, Any]]) -> ToolRegistry:
        """Build from a request's ``tools`` (chat-completions, Responses or Anthropic shape)."""
        if not isinstance(tools, Iterable) or isinstance(tools, str | bytes | Mapping):
            raise GateConfigError("tools must be a list of tool definitions")
        specs: list[ToolSpec] = []
        declared: list[str] = []
        grammars: dict[str, Grammar] = {}
        for index, tool in enumerate(tools):
            other = _declared_of(index, tool)
            if other is None:
                specs.append(_spec_of(index, tool))
                continue
            declared.append(other)
            if other.startswith("custom:") and "format" in tool:
                grammar = format_of(f"tools[{index}] ({other[7:]!r})", tool)
                if grammar is not None:
                    grammars[other[7:]] = grammar
        return cls(specs, declared, grammars)

    @classmethod
    def all_of(cls, registries: Iterable[ToolRegistry]) -> ToolRegistry:
        """The tools every one of ``registries`` has, each valid only where it is valid for
        every one of them: a call is known to the result only if each registry knows it, and
        its value must pass each registry's schema of it (the first failing one's verdict is
        the call's). A custom tool whose registries name different grammars is left out:
        one grammar cannot stand for two, so its calls are unknown (refused)."""
        members = list(registries)
        if not members:
            raise GateConfigError("ToolRegistry.all_of needs at least one registry")
        first, rest = members[0], members[1:]
        specs = [
            replace(spec, also=spec.also + tuple(o for r in rest for o in r._chain(spec.name)))
            for spec in first
            if all(spec.name in r for r in rest)
        ]
        declared = set(first.declared.intersection(*(r.declared for r in rest)))
        grammars: dict[str, Grammar] = {}
        for entry in sorted(d for d in declared if d.startswith("custom:")):
            name = entry[7:]
            named = {id(g): g for r in members if (g := r.grammars.get(name)) is not None}
            if len(named) > 1:
                declared.discard(entry)
            elif named:
                grammars[name] = next(iter(named.values()))
        return cls(specs, declared, grammars)

    def _chain(self, name: str) -> tuple[ToolSpec, ...]:
        spec = self._specs[name]
        return (replace(spec, also=()), *spec.also)

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    @property
    def names(self) -> frozenset[str]:
        return frozenset(self._specs)

    def __repr__(self) -> str:
        return f"ToolRegistry({sorted(self._specs)!r})"


def _spec_of(index: int, tool: object) -> ToolSpec:
    if not isinstance(tool, Mapping):
        raise GateConfigError(f"tools[{index}] is not a mapping")
    # Chat-completions nests the definition under "function"; Responses keeps it flat.
    body = tool.get("function", tool)
    label = _label(index, body)
    # Anthropic Messages keeps it flat too, its schema under "input_schema" and its type
    # absent or "custom" (any other type is a server tool, which the caller never runs).
    anthropic = "input_schema" in tool and "function" not in tool
    if tool.get("type") != "function" and not (anthropic and tool.get("type") in (None, "custom")):
        raise GateConfigError(f"{label}: only tools of type 'function' can be gated")
    if not isinstance(body, Mapping):
        raise GateConfigError(f"{label}: 'function' must be a mapping")
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise GateConfigError(f"{label}: the function needs a non-empty string 'name'")
    parameters = body.get("input_schema" if anthropic else "parameters", _OPEN_OBJECT)
    if not isinstance(parameters, Mapping):
        raise GateConfigError(f"{label}: 'parameters' must be a JSON Schema object")
    return ToolSpec.build(name, parameters)


def _declared_of(index: int, tool: object) -> str | None:
    """A non-function tool the Responses taxonomy knows, as a declaration; None otherwise."""
    kind = tool.get("type") if isinstance(tool, Mapping) else None
    if kind not in DECLARED_TOOL_TYPES:
        return None  # a function tool, or a type nobody knows: _spec_of judges it
    assert isinstance(tool, Mapping)
    if kind != "custom":
        return declaration(tool)
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise GateConfigError(f"tools[{index}]: a custom tool needs a non-empty string 'name'")
    return f"custom:{name}"


def _label(index: int, body: object) -> str:
    """How messages name a tool: by its name when it has a usable one, else by position."""
    name = body.get("name") if isinstance(body, Mapping) else None
    return f"tool {name!r}" if isinstance(name, str) and name else f"tools[{index}]"


def _mapping_as_dict(obj: object) -> dict[Any, Any]:
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError("not JSON data")


_Compiled = tuple[dict[str, Any], Validator, frozenset[str], Callable[[Any], bool] | None] | str


class _CompiledCache:
    """Least-recently-used cache of :func:`_compile_uncached`, bounded in entries and bytes.

    ``cache_info()`` and ``cache_clear()`` as for :func:`functools.lru_cache`.
    """

    def __init__(self, entries: int, charge_limit: int) -> None:
        self._entries = entries
        self._limit = charge_limit
        self._table: OrderedDict[str, tuple[_Compiled, int]] = OrderedDict()
        self._charged = 0
        self._hits = self._misses = 0
        self._lock = threading.Lock()

    def __call__(self, canonical: str) -> _Compiled:
        with self._lock:
            found = self._table.get(canonical)
            if found is not None:
                self._table.move_to_end(canonical)
                self._hits += 1
                return found[0]
            self._misses += 1
        # Compiled outside the lock: two threads may both compile a new schema; one wins.
        compiled = _compile_uncached(canonical)
        charge = len(canonical) * _CHARGE_PER_BYTE + _CHARGE_PER_ENTRY
        if charge > self._limit // 4:
            return compiled
        with self._lock:
            if canonical not in self._table:
                self._table[canonical] = (compiled, charge)
                self._charged += charge
            while len(self._table) > self._entries or self._charged > self._limit:
                _, (_, freed) = self._table.popitem(last=False)
                self._charged -= freed
        return compiled

    def cache_info(self) -> functools._CacheInfo:
        with self._lock:
            return functools._CacheInfo(self._hits, self._misses, self._entries, len(self._table))

    @property
    def charged(self) -> int:
        """Bytes charged for the entries kept now."""
        return self._charged

    def cache_clear(self) -> None:
        with self._lock:
            self._table.clear()
            self._charged = self._hits = self._misses = 0


def _compile_uncached(canonical: str) -> _Compiled:
    """Validator for one canonical schema text, or why there can be none (cached too)."""
    schema: dict[str, Any] = json.loads(canonical)
    dialect = _dialect_of(schema)
    if dialect is None:
        return "its $schema names no dialect this jsonschema knows"
    problem: str | None = None
    try:
        # (The protocol's stub lacks the format_checker parameter every dialect has.)
        check_schema: Callable[..., None] = dialect.check_schema
        check_schema(schema, format_checker=schema_formats(dialect))
    except SchemaError as err:
        problem = f"it fails the {dialect.__name__} metaschema at {err.json_path} ({err.validator})"
    except RecursionError:
        problem = "it is nested too deeply to check"
    if problem is None:
        problem = pattern_problem(schema, canonical, dialect)
    if problem is not None:
        return problem
    # The fast validator gets its own copy: nothing it does can reach the reference's schema.
    fast = fast_validator(json.loads(canonical), dialect)
    # Only a schema that may search with a pattern needs the ECMA-262 keywords.
    searches = '"pattern":' in canonical or '"patternProperties":' in canonical
    validator = ecma_dialect(dialect)(schema) if searches else dialect(schema)
    return schema, validator, _declared_names(schema), fast


_compile = _CompiledCache(_CACHE_SIZE, _CACHE_BYTES)


def _dialect_of(schema: dict[str, Any]) -> type[Validator] | None:
    if "$schema" not in schema:
        return Draft202012Validator
    if not isinstance(schema["$schema"], str):
        return None
    # validator_for falls back to `default` only for a URI it does not know, so two different
    # defaults giving two different answers means "unknown", without jsonschema's private table.
    found = validator_for(schema, default=Draft202012Validator)
    return found if found is validator_for(schema, default=Draft201909Validator) else None


def _declared_names(schema: dict[str, Any]) -> frozenset[str]:
    """Every property name the schema spells out, anywhere (subschemas, $defs, ...)."""
    names: set[str] = set()
    pending: list[Any] = [schema]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            if isinstance(node.get("properties"), dict):
                names.update(node["properties"])
            if isinstance(node.get("required"), list):
                names.update(n for n in node["required"] if isinstance(n, str))
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return frozenset(names)


def _pointer(path: Iterable[str | int], declared: frozenset[str]) -> str:
    """RFC 6901 pointer; keys the schema does not name become ``*``."""
    pointer = ""
    for step in path:
        if isinstance(step, int):
            token = str(step)
        elif step in declared:
            token = step.replace("~", "~0").replace("/", "~1")
        else:
            token = "*"
        pointer += "/" + token
    return pointer
