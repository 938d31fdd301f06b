"""Fuzz the wire's JSON read (jiter first) against json.loads, its specification.

Input: one data line (UTF-8; lone surrogates allowed through ``surrogatepass``).
``load_object`` must accept exactly the lines ``json.loads`` reads as an object, with an
equal value (types and the sign of zero included), and refuse the others with
``malformed_event``. Anything else either raises is a crash.
"""

from __future__ import annotations

import sys
from typing import Any

import _common  # import paths, and the shared helpers
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    from litellm_toolgate.core.wires import loads


def outcome(load: Any, text: str) -> tuple[str, Any]:
    try:
        return ("accepted", _common.typed(load(text)))
    except loads.WireFault as fault:
        return ("refused", fault.reason)


def one_input(data: bytes) -> None:
    try:
        text = data.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    fast = outcome(loads.load_object, text)
    spec = outcome(loads.load_object_reference, text)
    assert fast == spec, (fast, spec, text)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
