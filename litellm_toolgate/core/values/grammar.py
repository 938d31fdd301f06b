"""A custom tool's declared input format, and whether a call's input is in it.

The Responses API declares a custom tool as ``{"type": "custom", "name": ..., "format": ...}``
(openai-python ``types/responses/custom_tool.py``, ``CustomToolInputFormat``): the format is
absent or ``{"type": "text"}`` (any string), or ``{"type": "grammar", "syntax": "lark" |
"regex", "definition": <text>}``, and the model's ``custom_tool_call.input`` is meant to be a
string of that grammar. The upstream constrains its own sampling with the grammar; the gate
does not take that on trust (a relay, a provider without constrained decoding, or a cut
stream can hand over anything), so a grammar tool's input is checked here before the policy
sees it:

* ``lark``: the definition is compiled with the Lark parser (``lark``) as LALR(1) with its
  contextual lexer, and the whole input must parse from the ``start`` rule. LALR, not Earley:
  Earley accepts every context-free grammar but takes super-linear time on ambiguous ones
  (measured: an ambiguous two-rule grammar took 15 s for 100 characters of model output, a
  plain repetition 30 s for 20,000), and the input comes from the model. LALR parses in
  linear time; a grammar it cannot build (a reduce/reduce conflict) is refused at
  registration, and where Lark resolves a shift/reduce conflict by shifting, an input the
  ambiguous grammar allows may be refused. A parse that succeeds is always a derivation of
  the grammar: the check can refuse too much, never accept too much.
* ``regex``: the definition is read as an ECMA-262 pattern by the gate's own engine
  (``core/values/ecmaregex.py``, the same reading JSON Schema ``pattern`` gets) and the whole input
  must match (a full match, as a grammar describes the whole string, not a search).

A definition that does not compile, an unknown syntax or format type, is a
:class:`~.errors.GateConfigError` when the tools are registered: never a verdict mid-stream.
Compiled grammars are cached by their text, so a registry built per request does not
compile the same grammar again. Nothing here does I/O, except that Lark reads its own bundled
``common.lark`` when a grammar says ``%import common...``.

:meth:`Grammar.accepts` answers only yes or no: a parser's error carries the input text, so
it is dropped inside this module, never chained or kept.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lark

from ..errors import GateConfigError
from .ecmaregex import PatternError, compile_pattern

__all__ = ["Grammar", "format_of"]

_SYNTAXES = ("lark", "regex")
_CACHE_SIZE = 64


@dataclass(frozen=True, slots=True)
class Grammar:
    """A compiled grammar; ``syntax`` is ``lark`` or ``regex``."""

    syntax: str
    _parser: lark.Lark | None = None
    _pattern: re.Pattern[str] | None = None

    def accepts(self, text: str) -> bool:
        """Whether the whole of ``text`` is a sentence of the grammar."""
        if self._pattern is not None:
            return self._pattern.fullmatch(text) is not None
        assert self._parser is not None
        accepted = True
        try:
            self._parser.parse(text)
        except (lark.exceptions.LarkError, RecursionError):
            # The exception quotes the input: answer no, keep nothing of it.
            accepted = False
        return accepted


def format_of(label: str, tool: Mapping[str, Any]) -> Grammar | None:
    """The grammar a custom tool declares, or None for a text format (any string)."""
    form = tool.get("format")
    if form is None:
        return None
    if not isinstance(form, Mapping):
        raise GateConfigError(f"{label}: 'format' must be a mapping")
    kind = form.get("type")
    if kind == "text":
        return None
    if kind != "grammar":
        raise GateConfigError(f"{label}: a custom tool's format is 'text' or 'grammar'")
    syntax, definition = form.get("syntax"), form.get("definition")
    if syntax not in _SYNTAXES:
        raise GateConfigError(f"{label}: a grammar's syntax is 'lark' or 'regex'")
    if not isinstance(definition, str) or not definition:
        raise GateConfigError(f"{label}: a grammar needs a non-empty string 'definition'")
    grammar = _compile(str(syntax), definition)
    if grammar is None:
        raise GateConfigError(f"{label}: the {syntax} grammar does not compile")
    return grammar


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _compile(syntax: str, definition: str) -> Grammar | None:
    if syntax == "regex":
        try:
            return Grammar("regex", _pattern=compile_pattern(definition))
        except PatternError:
            return None
    try:
        return Grammar("lark", _parser=lark.Lark(definition, start="start", parser="lalr"))
    except (lark.exceptions.LarkError, RecursionError, ValueError, TypeError, KeyError):
        # Lark raises its own errors for most bad grammars and plain ones for a few.
        return None
