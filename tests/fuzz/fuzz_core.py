"""Fuzz the whole core with raw bytes, on every wire: the same invariant as the property tests.

Input: a byte whose value modulo 6 chooses the wire (0: chat completions, 1: Responses,
2: Anthropic Messages, 3: Gemini's streamGenerateContent, 4: Ollama's ``/api/chat``,
5: Bedrock's converse-stream, by the request path the attempt is bound to) and whose bits
above the lowest the size of the pieces the body is fed in (16 B to 4 KiB), then the body. An
attempt fed the body whole and fed it in pieces must reach the same outcome, raise nothing
but ToolCallQuarantined, and release exactly what the wire's reference releases
(tests/oracle.py for chat, tests/oracle_responses.py for Responses,
tests/oracle_anthropic.py for Anthropic, tests/oracle_gemini.py for Gemini,
tests/oracle_ollama.py for Ollama, tests/oracle_bedrock.py for Bedrock), nothing where the
reference says quarantine. The Bedrock reference names calls by id, name and arguments (not
by block index), and models only the events its generator writes: a body with any other
(a reasoning or citation delta, which the gate reads) is held to the first two invariants
only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import _common  # noqa: F401  (import paths)
import atheris

with atheris.instrument_imports(include=["litellm_toolgate"]):
    import litellm_toolgate.core  # noqa: F401

import oracle
import oracle_anthropic
import oracle_bedrock
import oracle_gemini
import oracle_ollama
import oracle_responses
from chatgen import SCHEMAS, policy
from drive import BEDROCK_PATH, CHAT_PATH, OLLAMA_PATH, RESPONSES_PATH, Result, replay
from gemgen import PATH as GEMINI_PATH

Judge = Callable[[bytes], Any]


def _full(judge: Callable[..., Any]) -> Judge:
    """A reference that answers ``(position, id, name, arguments, value)`` per call."""

    def expect(body: bytes) -> Any:
        found = judge(body, SCHEMAS, policy)
        return None if found is None else tuple(e[:4] for e in found)

    return expect


def _bedrock(body: bytes) -> Any:
    events = oracle_bedrock.frames(body)
    if not isinstance(events, str) and not oracle_bedrock.modelled(events):
        return NotImplemented
    found = oracle_bedrock.judge_body(body, SCHEMAS, policy)
    return None if found is None else tuple(found)


def _by_id(result: Result) -> tuple[tuple[Any, ...], ...]:
    return tuple(call[1:] for call in result.released)


def _as_is(result: Result) -> tuple[tuple[Any, ...], ...]:
    return result.released


WIRES: tuple[tuple[str, Judge, Callable[[Result], tuple[tuple[Any, ...], ...]]], ...] = (
    (CHAT_PATH, _full(oracle.judge), _as_is),
    (RESPONSES_PATH, _full(oracle_responses.judge), _as_is),
    ("/v1/messages", _full(oracle_anthropic.judge), _as_is),
    (GEMINI_PATH, _full(oracle_gemini.judge), _as_is),
    (OLLAMA_PATH, _full(oracle_ollama.judge), _as_is),
    (BEDROCK_PATH, _bedrock, _by_id),
)


def one_input(data: bytes) -> None:
    head = data[0] if data else 0
    path, judge, view = WIRES[head % len(WIRES)]
    step = 16 + (head >> 1) * 32  # 16 B to 4 KiB pieces
    body = data[1:]
    whole = replay([body], path)
    split = replay([body[at : at + step] for at in range(0, len(body), step)], path)
    assert split == whole, (path, whole, split, body)
    expected = judge(body)
    if expected is NotImplemented:
        return
    if expected is None:
        assert whole.reason is not None, (path, whole, body)
    else:
        assert whole.reason is None, (path, whole, body)
        assert view(whole) == expected, (path, whole, expected, body)


def main() -> None:
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
