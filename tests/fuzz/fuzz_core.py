"""Fuzz the whole core with raw bytes: the same invariant as the property tests.

Input: a byte that chooses the size of the pieces the body is fed in (16 B to 4 KiB), then
the body. An attempt fed the body whole and fed it in pieces must reach the same outcome,
raise nothing but ToolCallQuarantined, and release exactly what tests/oracle.py releases
(nothing where the oracle says quarantine).
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    import litellm_toolgate.core  # noqa: F401

from chatgen import SCHEMAS, policy
from drive import replay
from oracle import judge


def one_input(data: bytes) -> None:
    step = 16 + (data[0] if data else 0) * 16  # 16 B to 4 KiB pieces
    body = data[1:]
    whole = replay([body])
    split = replay([body[at : at + step] for at in range(0, len(body), step)])
    assert split == whole, (whole, split, body)
    expected = judge(body, SCHEMAS, policy)
    if expected is None:
        assert whole.reason is not None, (whole, body)
    else:
        assert whole.reason is None, (whole, body)
        assert whole.released == tuple(e[:4] for e in expected), (whole, expected, body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
