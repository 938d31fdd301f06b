"""Fuzz the strict argument parse against the reference parser in tests/oracle.py.

Input: the argument text (UTF-8, lone surrogates allowed through ``surrogatepass``). The
gate's parse must accept exactly what the reference accepts, with an equal value, and
refuse everything else with ArgumentsError. Anything else it raises is a crash.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    from litellm_toolgate.core.values.strictjson import ArgumentsError, parse_arguments

from oracle import Reject, strict_object


def one_input(data: bytes) -> None:
    text = data.decode("utf-8", "surrogatepass") if _decodes(data) else data.decode("latin-1")
    mine: object = None
    try:
        mine = parse_arguments(text, max_depth=64)
    except ArgumentsError:
        mine = Reject
    try:
        theirs: object = strict_object(text)
    except Reject:
        theirs = Reject
    assert (mine is Reject) == (theirs is Reject), (mine, theirs, text)
    assert mine == theirs, (mine, theirs, text)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
