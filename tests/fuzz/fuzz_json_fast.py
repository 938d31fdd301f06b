"""Fuzz the fast strict parse (jiter plus checks on its value) against the specification.

Input: one byte for the depth limit (1-64), then the argument text (UTF-8, lone surrogates
allowed through ``surrogatepass``). ``parse_arguments``, ``parse_utf8_arguments`` (the
same text as UTF-8 bytes) and ``parse_arguments_reference`` must accept the same texts with
equal values (types and the sign of zero included) and refuse the same texts with the same
reason. Anything else either raises is a crash.
"""

from __future__ import annotations

import sys
from typing import Any

import _common  # import paths, and the shared helpers
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    from litellm_toolgate.core.values.strictjson import (
        ArgumentsError,
        parse_arguments,
        parse_arguments_reference,
        parse_utf8_arguments,
    )


def outcome(parse: Any, text: str, max_depth: int) -> tuple[str, Any]:
    try:
        return ("accepted", _common.typed(parse(text, max_depth=max_depth)))
    except ArgumentsError as error:
        return ("refused", error.reason)


def one_input(data: bytes) -> None:
    if not data:
        return
    max_depth = 1 + data[0] % 64
    body = data[1:]
    try:
        text = body.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        text = body.decode("latin-1")
    fast = outcome(parse_arguments, text, max_depth)
    spec = outcome(parse_arguments_reference, text, max_depth)
    assert fast == spec, (fast, spec, text)
    encoded = text.encode("utf-8", "surrogatepass")
    utf8 = outcome(lambda _, **kw: parse_utf8_arguments(encoded, **kw), text, max_depth)
    assert utf8 == spec, (utf8, spec, text)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
