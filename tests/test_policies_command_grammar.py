"""Properties of the per-program option grammars, over generated argument vectors.

For every built-in grammar (and every git subcommand), hypothesis builds vectors out of the
grammar's own table (flags, options with their values attached, separate or after ``=``,
letter clusters, operands) and checks:

* a vector made only of what the table lists is approved (the grammar reads its own
  table the way the program does);
* the same vector with one option the table does not list, put where an option is read
  (from :data:`EXEC_OPTIONS`, an abbreviation, a look-alike letter, a value given to a flag,
  an unknown letter in a cluster...), is refused: an approved vector never holds an option
  missing from the program's table.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litellm_toolgate.core.rules.commandgrammar import FLAG, GRAMMARS, OPTIONAL, VALUE, Grammar
from litellm_toolgate.core.rules.commands import (
    EXEC_OPTIONS,
    Allow,
    CommandAllowList,
    check_grammar,
)
from litellm_toolgate.core.rules.compose import DenyReason

VALUE_CANDIDATES = ("-exec", "v1", "a.tar", "v", "1p", "https://example.invalid/", "X: y")
OPERAND_CANDIDATES = ("1,5p", "f.txt", "https://example.invalid/")
LOOKALIKES = {"e": "е", "o": "о", "a": "а", "c": "с", "p": "р", "x": "х", "i": "і"}


def _scopes() -> list[tuple[str, Grammar, tuple[str, ...]]]:
    """(scope, grammar, words before it): each program, and git's subcommands after ``git``."""
    scopes: list[tuple[str, Grammar, tuple[str, ...]]] = []
    for name, grammar in sorted(GRAMMARS.items()):
        scopes.append((name, grammar, ()))
        for sub, sub_grammar in sorted(grammar.subcommands.items()):
            scopes.append((f"{name} {sub}", sub_grammar, (sub,)))
    return scopes


SCOPES = _scopes()


def _value(grammar: Grammar, name: str) -> str:
    check: Callable[[str], bool] = grammar.checks.get(name, lambda _: True)
    script = grammar.script if name in grammar.script_options else None
    for candidate in VALUE_CANDIDATES:
        if check(candidate) and (script is None or script(candidate)):
            return candidate
    raise AssertionError("no candidate value passes the check")


def _operand(grammar: Grammar) -> str:
    check = grammar.operand_check or (lambda _: True)
    return next(c for c in OPERAND_CANDIDATES if check(c))


@st.composite
def _item(draw: st.DrawFn, grammar: Grammar) -> list[str]:
    """One option with its value (in one of its spellings), or one operand."""
    names = sorted(grammar.options)
    if not names or draw(st.integers(0, 5)) == 0:
        return [_operand(grammar)]
    name = draw(st.sampled_from(names))
    kind = grammar.options[name]
    value = _value(grammar, name)
    long = name.startswith("--") or grammar.words
    if kind == FLAG:
        if not long and draw(st.booleans()):
            flags = [n for n in names if grammar.options[n] == FLAG and not n.startswith("--")]
            return ["-" + "".join(n[1] for n in draw(st.lists(st.sampled_from(flags), min_size=1)))]
        return [name]
    if kind == VALUE:
        if grammar.words:
            return [name, value]
        spelling = draw(st.integers(0, 1))
        if spelling == 0:
            return [name, value]
        return [f"{name}={value}"] if long else [name + value]
    assert kind == OPTIONAL
    if draw(st.booleans()):
        return [name]
    return [f"{name}={value}"] if long else [name + value]


@st.composite
def _vector(draw: st.DrawFn, grammar: Grammar) -> list[list[str]]:
    items = draw(st.lists(_item(grammar), max_size=6))
    operands = [i for i in items if not i[0].startswith("-")]
    limit = grammar.max_operands
    if limit is not None and len(operands) > limit:
        items = [i for i in items if i[0].startswith("-")]
    while grammar.bundle and items and not items[0][0].startswith("-"):
        items = items[1:]  # a first word without '-' is a letter bundle there
    if grammar.subcommands:
        items = [i for i in items if i[0].startswith("-")]
    return items


def _is_listed(grammar: Grammar, token: str) -> bool:
    """Whether ``token``, read as an option, could be one the table lists."""
    if grammar.words:
        return token in grammar.options
    if token.startswith("--"):
        name, equals, _ = token.partition("=")
        kind = grammar.options.get(name)
        return kind is not None and not (kind == FLAG and equals)
    if grammar.numbers and token[1:].isdigit():
        return True
    return all("-" + letter in grammar.options for letter in token[1:2])


@st.composite
def _foreign(draw: st.DrawFn, scope: str, grammar: Grammar) -> str:
    """An option missing from the table, as the model might spell it."""
    names = sorted(grammar.options) or ["--x"]
    name = draw(st.sampled_from(names))
    known_bad = sorted(o for o in EXEC_OPTIONS.get(scope, ()) if o.startswith("-"))
    choices: list[str] = [
        name + "x",
        name.upper() if name.upper() != name else name + "Q",
        "".join(LOOKALIKES.get(ch, ch) for ch in name),
        "-" + chr(draw(st.integers(0x41, 0x7A))),
        "--" + draw(st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=12)),
    ]
    if name.startswith("--") and len(name) > 4:
        choices.append(name[: draw(st.integers(3, len(name) - 1))])  # an abbreviation
    if grammar.options.get(name) == FLAG and name.startswith("--") and not grammar.words:
        choices.append(name + "=1")  # a value given to a flag
    if known_bad:
        choices.append(draw(st.sampled_from(known_bad)))
    token = draw(st.sampled_from(choices))
    if not token.startswith("-") or token in ("-", "--") or _is_listed(grammar, token):
        token = "-\u0435xec"  # a Cyrillic look-alike of -exec: never listed
    if not token.startswith("--") and not grammar.words and len(token) > 2:
        token = token[:2]  # one unknown letter, read alone
        if _is_listed(grammar, token):
            token = "-\u0435"
    return token


def _flatten(items: list[list[str]]) -> list[str]:
    return [word for item in items for word in item]


@pytest.mark.parametrize(("scope", "grammar", "prefix"), SCOPES, ids=[s for s, _, _ in SCOPES])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_what_the_table_lists_is_approved_and_nothing_else(
    scope: str, grammar: Grammar, prefix: tuple[str, ...], data: st.DataObject
) -> None:
    items = data.draw(_vector(grammar))
    program = scope.split(maxsplit=1)[0]
    if prefix:
        parent = GRAMMARS[program]
        vector = [*prefix, *_flatten(items)]
    else:
        parent = grammar
        vector = _flatten(items)
    assert check_grammar(parent, vector, scope=program) is None, vector
    foreign = data.draw(_foreign(scope, grammar))
    at = data.draw(st.integers(min(1, len(items)) if grammar.bundle else 0, len(items)))
    spoiled = [*items[:at], [foreign], *items[at:]]
    vector = [*prefix, *_flatten(spoiled)]
    assert check_grammar(parent, vector, scope=program) is not None, vector


def test_no_grammar_lists_an_option_known_to_run_code() -> None:
    for scope, grammar, _ in SCOPES:
        listed = set(grammar.options) | set(grammar.subcommands)
        assert not listed & EXEC_OPTIONS.get(scope, frozenset()), scope


def test_every_grammar_cites_its_manual() -> None:
    for scope, grammar, _ in SCOPES:
        assert len(grammar.manual) > 5, scope


def test_grammar_values_and_separate_values_are_read_in_order() -> None:
    tar = GRAMMARS["tar"]
    assert check_grammar(tar, ["tvf", "a.tar"], scope="tar") is None
    assert check_grammar(tar, ["tvf"], scope="tar") is DenyReason.COMMAND_UNKNOWN_OPTION
    # -e's value is "-I", not an option; and a separate value that looks like one is a value.
    grep = GRAMMARS["grep"]
    assert check_grammar(grep, ["-e", "-I", "f"], scope="grep") is None
    assert check_grammar(grep, ["-e-I", "f"], scope="grep") is None
    assert check_grammar(grep, ["--regexp", "--exec", "f"], scope="grep") is None
    # After --, words are operands; find has no such end.
    assert check_grammar(grep, ["x", "--", "-Q"], scope="grep") is None
    find = GRAMMARS["find"]
    assert check_grammar(find, ["--", ".", "-exec"], scope="find") is not None
    # -<digits> means ASCII digits; sed's whitespace is ASCII whitespace.
    head = GRAMMARS["head"]
    assert check_grammar(head, ["-5", "f"], scope="head") is None
    assert check_grammar(head, ["-\u0665", "f"], scope="head") is not None
    assert check_grammar(GRAMMARS["sed"], ["1\u00a0p", "f"], scope="sed") is not None
    assert hash(Allow("mytool", grammar={"manual": "mytool(1)"}))


def test_refusals_and_reprs_hold_no_argument_text() -> None:
    secret = "CANARY-51d0"
    policy = CommandAllowList([Allow("git", args=("*",))], tools={"run": "argv"})
    for argv in (["git", f"--{secret}"], ["git", "grep", f"-O{secret}"], ["git", secret]):
        reason = check_grammar(GRAMMARS["git"], argv[1:], scope="git")
        assert reason is not None and secret not in reason.value
    assert secret not in repr(policy) and secret not in repr(GRAMMARS["git"])
