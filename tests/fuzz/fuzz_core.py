"""Fuzz the whole core with raw bytes, on every wire: the same invariant as the property tests.

Input: a byte whose value modulo 4 chooses the wire (0: chat completions, 1: Responses,
2: Anthropic Messages, 3: Gemini's streamGenerateContent, by the request path the attempt is
bound to) and whose bits above the lowest the size of the pieces the body is fed in (16 B to
4 KiB), then the body. An attempt fed the body whole and fed it in pieces must reach the same
outcome, raise nothing but ToolCallQuarantined, and release exactly what the wire's
reference releases (tests/oracle.py for chat, tests/oracle_responses.py for Responses,
tests/oracle_anthropic.py for Anthropic, tests/oracle_gemini.py for Gemini), nothing where
the reference says quarantine.
"""

from __future__ import annotations

import sys

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    import litellm_toolgate.core  # noqa: F401

import oracle
import oracle_anthropic
import oracle_gemini
import oracle_responses
from chatgen import SCHEMAS, policy
from drive import CHAT_PATH, RESPONSES_PATH, replay
from gemgen import PATH as GEMINI_PATH

WIRES = (
    (CHAT_PATH, oracle.judge),
    (RESPONSES_PATH, oracle_responses.judge),
    ("/v1/messages", oracle_anthropic.judge),
    (GEMINI_PATH, oracle_gemini.judge),
)


def one_input(data: bytes) -> None:
    head = data[0] if data else 0
    path, judge = WIRES[head % len(WIRES)]
    step = 16 + (head >> 1) * 32  # 16 B to 4 KiB pieces
    body = data[1:]
    whole = replay([body], path)
    split = replay([body[at : at + step] for at in range(0, len(body), step)], path)
    assert split == whole, (path, whole, split, body)
    expected = judge(body, SCHEMAS, policy)
    if expected is None:
        assert whole.reason is not None, (path, whole, body)
    else:
        assert whole.reason is None, (path, whole, body)
        assert whole.released == tuple(e[:4] for e in expected), (path, whole, expected, body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
