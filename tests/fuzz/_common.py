"""Shared set-up for the atheris harnesses: import paths and seed corpora from fixtures/.

Each harness is a script run by libFuzzer through atheris (``run.py`` runs them all, time
boxed). The gate's modules are imported under ``atheris.instrument_imports`` by the
harnesses themselves so that coverage guides the fuzzer through the gate's code.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
ROOT = TESTS.parent
CHAT = ROOT / "fixtures" / "chat"
RESPONSES = ROOT / "fixtures" / "responses"
ANTHROPIC = ROOT / "fixtures" / "anthropic"
GEMINI = ROOT / "fixtures" / "gemini"
BEDROCK = ROOT / "fixtures" / "bedrock"
OLLAMA = ROOT / "fixtures" / "ollama"
sys.path[:0] = [str(TESTS), str(ROOT)]


def bodies() -> list[bytes]:
    """Every recorded chat stream."""
    return [path.read_bytes() for path in sorted(CHAT.glob("*.sse"))]


# Item types the Responses oracle (tests/oracle_responses.py) does not model yet: grammar
# checks, strict MCP approval arguments, programmatic calls and server-run shell and tool
# search items. The oracle would judge these recordings by its older rules, so they are not
# seeds of the core harness; their own suites (tests/test_responses_items.py) replay them at
# every byte split instead.
ORACLE_UNMODELLED = frozenset(
    {
        "custom_grammar_lark",
        "custom_grammar_lark_refused",
        "custom_grammar_regex",
        "custom_grammar_regex_refused",
        "mcp_approval_request",
        "mcp_approval_request_bad_arguments",
        "program_call_in_progress",
        "program_call_in_progress_strict",
        "program_call_in_progress_after_program_ended",
        "program_call_listed_incomplete",
        "program_call_without_item_done",
        "program_call_cut_before_completed",
        "program_call_waiting",
        "program_call_waiting_strict",
        "shell_call_run_by_server",
        "tool_search_run_by_server",
    }
)


def responses_bodies() -> list[bytes]:
    """Every recorded Responses stream the oracle models."""
    return [
        path.read_bytes()
        for path in sorted(RESPONSES.glob("*.sse"))
        if path.stem not in ORACLE_UNMODELLED
    ]


def anthropic_bodies() -> list[bytes]:
    """Every recorded Anthropic stream."""
    return [path.read_bytes() for path in sorted(ANTHROPIC.glob("*.sse"))]


def gemini_bodies() -> list[bytes]:
    """Every recorded Gemini stream."""
    return [path.read_bytes() for path in sorted(GEMINI.glob("*.sse"))]


def eventstream_bodies() -> list[bytes]:
    """Every recorded Bedrock Converse stream (AWS event-stream frames)."""
    return [path.read_bytes() for path in sorted(BEDROCK.glob("*.eventstream"))]


def ollama_bodies() -> list[bytes]:
    """Every recorded Ollama ``/api/chat`` stream (newline-delimited JSON)."""
    return [path.read_bytes() for path in sorted(OLLAMA.glob("*.ndjson"))]


def arguments() -> list[bytes]:
    """Every argument text the fixtures carry, plus a few hostile classics."""
    manifest = json.loads((CHAT / "manifest.json").read_text())
    texts = [call["arguments"] for case in manifest["cases"] for call in case.get("calls", [])]
    texts += ['{"a": NaN}', '{"a": 1, "a": 2}', '{"a": 1e999}', '{"a": "\\ud800"}', "[1]"]
    texts += ['{"a": ' + "[" * 70 + "]" * 70 + "}", '{"a": 9007199254740993}', '{"a": 1} x']
    return [text.encode("utf-8", "surrogatepass") for text in texts]


def data_lines() -> list[bytes]:
    """Every ``data:`` line of the recorded streams (all wires), without its prefix."""
    lines: list[bytes] = []
    for body in bodies() + responses_bodies() + anthropic_bodies():
        for line in body.replace(b"\r\n", b"\n").split(b"\n"):
            if line.startswith(b"data:"):
                lines.append(line[5:].removeprefix(b" "))
    return lines


def typed(value: Any) -> Any:
    """A form of a JSON value in which 1, 1.0, True, 0.0 and -0.0 all differ, for comparing
    what two parsers made of the same text."""
    if isinstance(value, dict):
        return ("object", [(key, typed(item)) for key, item in value.items()])
    if isinstance(value, list):
        return ("array", [typed(item) for item in value])
    if isinstance(value, float):
        return ("float", repr(value))
    return (type(value).__name__, value)
