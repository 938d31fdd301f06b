"""``toolgate demo``: the 7 × 8 tool loop, gated, end to end.

By default a fake CometAPI on 127.0.0.1 serves recorded streams. The rounds go through the
tool loop (``gate.run``): round one streams a ``multiply`` call, which the gate releases
only after it validated; the loop journals it (decided, started, finished, in an SQLite
journal in memory), multiplies locally and sends the result back with the call's id; round
two streams the answer, which the fake upstream
builds from the tool result it received (so the printed product is the demo's own). Then a
broken recording (arguments cut short, ``[DONE]`` without a finish reason) shows the gate
quarantining what plain litellm would hand over as finished, with its sanitized record.
The journal's rows are printed after the loop (``toolgate demo --crash``: :mod:`.crash`).

With ``COMETAPI_KEY`` set, rounds one and two go to the real CometAPI instead.
"""

from __future__ import annotations

import json
import logging
import math
import os
import sys
from typing import Any, TextIO

import litellm

from .. import ToolCallQuarantined, ToolGate
from ..loopback.upstream import FakeUpstream, Scripted, answer_stream, recording
from ..run.journal import open_journal
from ..run.tools import Tool, ToolContext

MULTIPLY = {
    "type": "function",
    "function": {
        "name": "multiply",
        "description": "Multiply two finite numbers.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
            "additionalProperties": False,
        },
    },
}
WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write text to a file in the workspace.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
}


def _fake_answer(request: dict[str, Any]) -> Scripted:
    """Round one: the recorded multiply call. Round two: an answer built from the result."""
    results = [m for m in request.get("messages", []) if m.get("role") == "tool"]
    if not results:
        return Scripted(recording("round1_multiply.sse"), chunk_sizes=[7, 64, 3])
    value = json.loads(results[-1]["content"])["value"]
    return Scripted(answer_stream(f"7 times 8 is {value:g}."), chunk_sizes=[5, 40])


def _multiply(arguments: dict[str, Any]) -> float:
    value = float(arguments["a"]) * float(arguments["b"])
    if not math.isfinite(value):
        raise ValueError("product is not finite")
    return value


class _LogLines(logging.Handler):
    """Holds the gate's log lines while text streams; prints them after the round."""

    def __init__(self, out: TextIO) -> None:
        super().__init__(logging.INFO)
        self.out = out
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("  [log %(levelname)s] %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def flush(self) -> None:
        for line in self.lines:
            self.out.write(line + "\n")
        self.lines.clear()


def _flush_logs() -> None:
    for handler in logging.getLogger("litellm_toolgate").handlers:
        handler.flush()


def _round(gate: ToolGate, out: TextIO, **kwargs: Any) -> tuple[str, list[dict[str, Any]]]:
    """Stream one round; print text live; return the text and the released calls."""
    text, calls = "", []
    for chunk in gate.completion(stream=True, **kwargs):
        for choice in chunk.choices:
            if choice.delta.content:
                text += choice.delta.content
                out.write(choice.delta.content)
                out.flush()
            for tc in choice.delta.tool_calls or []:
                calls.append(
                    {
                        "id": tc.id,
                        "type": "function",
                        "function": {"name": tc.function.name, "arguments": tc.function.arguments},
                    }
                )
    out.write("\n")
    _flush_logs()
    return text, calls


def run_demo(out: TextIO = sys.stdout, *, model: str | None = None, api: str = "chat") -> int:
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    # Show the gate's own decision log lines (ids and outcomes only) after each round.
    handler = _LogLines(out)
    gate_log = logging.getLogger("litellm_toolgate")
    gate_log.addHandler(handler)
    gate_log.setLevel(logging.INFO)
    try:
        if api == "anthropic":
            from .anthropic import run_anthropic

            return run_anthropic(out, model, _flush_logs)
        if api == "responses":
            from .responses import run_responses

            return run_responses(out, model, _flush_logs)
        return _demo(out, model)
    finally:
        gate_log.removeHandler(handler)


def _demo(out: TextIO, model: str | None) -> int:
    real = bool(os.environ.get("COMETAPI_KEY"))
    with FakeUpstream(handler=_fake_answer) as upstream:
        route: dict[str, Any] = (
            {"model": model or "cometapi/gpt-4o-mini"}
            if real
            else {
                "model": model or "cometapi/gpt-4o-mini",
                "api_base": upstream.base_url,
                "api_key": "sk-demo-loopback",
            }
        )
        out.write(f"upstream: {'CometAPI' if real else 'fake CometAPI on ' + upstream.base_url}\n")
        gate = ToolGate([MULTIPLY, WRITE_FILE])
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "What is 7 times 8? Use multiply."}
        ]

        journal = open_journal("sqlite:///:memory:")

        def multiply(arguments: dict[str, Any], context: ToolContext) -> dict[str, float]:
            product = _multiply(arguments)
            out.write(
                f"\nreleased: multiply (call {context.call_id}), validated, journaled; "
                f"computed locally: {product:g}\n"
            )
            return {"value": product}

        def round_starts(index: int) -> None:
            _flush_logs()
            what = "the model asks for a tool" if index == 0 else "the model answers"
            out.write(f"\n== round {index + 1}: {what} ==\n")

        result = gate.run(
            messages=messages,
            tools=[MULTIPLY],
            executors={"multiply": Tool(multiply, effect="read_only")},
            journal=journal,
            run_id="demo-run",
            on_text=out.write,
            before_round=round_starts,
            **route,
        )
        out.write("\n")
        _flush_logs()
        out.write(f"\n== the journal: {len(result.rows)} row(s) of run demo-run ==\n")
        print_rows(out, result.rows)
        journal.close()
        messages = result.conversation

        out.write("\n== a broken stream: arguments cut short, [DONE] with no finish_reason ==\n")
        broken = {
            "model": "cometapi/gpt-4o-mini",
            "api_base": upstream.base_url,
            "api_key": "sk-demo-loopback",
            "messages": messages,
            "tools": [WRITE_FILE],
        }
        upstream.enqueue(Scripted(recording("broken_truncated.sse")))
        out.write(f"plain litellm hands the caller: {_plain_litellm(broken)}\n")
        upstream.enqueue(Scripted(recording("broken_truncated.sse")))
        try:
            _round(gate, out, **broken)
        except ToolCallQuarantined as exc:
            _flush_logs()
            out.write(f"the gate: {exc}\n")
            for record in exc.records:
                out.write(json.dumps(record.model_dump(mode="json"), indent=2) + "\n")
            out.write("nothing was released; the caller never saw a fragment of that call\n")
            return 0
        out.write("the broken stream was not quarantined\n")
        return 1


def print_rows(out: TextIO, rows: Any) -> None:
    """Each journal row as one JSON line: ids, steps, digests and sizes (never arguments)."""
    for row in rows:
        record = {k: v for k, v in row.to_record().items() if v is not None}
        out.write(json.dumps(record) + "\n")


def _plain_litellm(kwargs: dict[str, Any]) -> str:
    """What litellm alone yields for a stream: its finish reason and the calls' sizes.

    Only sizes and whether the arguments parse are shown, never the arguments themselves.
    """
    finish: str | None = None
    arguments: dict[int, str] = {}
    for chunk in litellm.completion(stream=True, **kwargs):
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                arguments[tc.index] = arguments.get(tc.index, "") + (tc.function.arguments or "")
    described = []
    for text in arguments.values():
        try:
            json.loads(text)
            verdict = "parse"
        except ValueError:
            verdict = "do not parse"
        described.append(f"{len(text.encode())} bytes of arguments that {verdict}")
    return f"finish_reason={finish!r} and {len(arguments)} call(s): " + "; ".join(described)
