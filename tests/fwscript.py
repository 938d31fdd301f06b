"""What the frameworks lane's upstream answers, and how one framework's cases are run.

Imported by the lane's test (``tests/test_frameworks_lane.py``, which serves
:func:`answer` on a loopback :class:`FakeUpstream`) and run as a script by it, once per
framework, in that framework's virtualenv (``tests/fwclients.py`` holds the clients)::

    python tests/fwscript.py FRAMEWORK API_BASE

The script runs each of the framework's cases in turn under a watchdog
(``faulthandler.dump_traceback_later(..., exit=True)``: a case that outlives its limit dumps
every thread's stack and ends the process) and prints one JSON line per case: how often the
tool function ran, the final answer, the exception's chain (type names only, never a
message: the lane checks that no argument text is in any of them) and the gate's reason.

Each scenario is named in the user's prompt (``scenario-NAME``); the upstream answers the
first model turn with the scenario's tool call and any turn that carries the tool's result
(a ``tool`` message, smolagents' ``Observation:``, DSPy's ``tool_result`` field) with the
final answer. Nothing here imports a framework or litellm at module level.
"""

from __future__ import annotations

import faulthandler
import json
import os
import re
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any

ANSWER = "7 times 8 is 56."
CANARY = "CANARY-fw-41"
# One scenario per way a tool call can be wrong, plus the one that is right. The canary rides
# in every bad call's arguments: it must appear in no exception text the caller sees.
SCENARIOS = ("valid", "schema", "unknown", "dupkeys", "truncated", "length", "badjson")
# The gate's exception for each bad scenario (what the caller catches, or finds in the chain).
# A cut stream is a StreamFault; a whole answer whose arguments were cut short is bad JSON.
EXPECTED = {
    "schema": ("SchemaRejected",),
    "unknown": ("SchemaRejected",),
    "dupkeys": ("ArgumentsRejected",),
    "truncated": ("StreamFault", "ArgumentsRejected"),
    "length": ("StreamFault",),
    "badjson": ("ArgumentsRejected",),
}
# The gate's reasons for each bad scenario, for a framework whose wrapper keeps the gate's
# message but cuts the chain (the lane's CUT_CHAIN).
REASONS = {
    "schema": ("schema_invalid",),
    "unknown": ("unknown_tool",),
    "dupkeys": ("duplicate_key",),
    "truncated": ("missing_finish", "invalid_json"),
    "length": ("finish_reason_mismatch",),
    "badjson": ("invalid_json",),
}
CASE_LIMIT = 40.0  # seconds per case, watchdog-enforced
# Seconds for importing the framework and litellm before the first case: on a loaded machine
# that alone has outlived CASE_LIMIT, which then killed the first case and every case after.
WARM_LIMIT = 240.0
MARK = "@fwcase "  # the prefix of the lines the lane reads


def _call_args(scenario: str) -> tuple[str, str]:
    """The tool name and the argument text the upstream sends for ``scenario``."""
    return {
        "valid": ("multiply", '{"a": 7, "b": 8}'),
        "schema": ("multiply", '{"a": "seven", "b": 8, "c": "' + CANARY + '"}'),
        "unknown": ("delete_everything", '{"path": "/' + CANARY + '"}'),
        "dupkeys": ("multiply", '{"a": 7, "b": 8, "a": 9, "note": "' + CANARY + '"}'),
        "truncated": ("multiply", '{"a": 7, "note": "' + CANARY + '", "b'),
        "length": ("multiply", '{"a": 7, "note": "' + CANARY + '", "b'),
        "badjson": ("multiply", '{"a": 7, "b": 8,, "note": "' + CANARY + '"}'),
    }[scenario]


def scenario_of(request: dict[str, Any]) -> str:
    text = json.dumps(request.get("messages") or request.get("input") or request)
    for name in SCENARIOS:
        if f"scenario-{name}" in text:
            return name
    return "valid"


def has_result(request: dict[str, Any]) -> bool:
    messages = request.get("messages") or []
    if any(m.get("role") == "tool" for m in messages):
        return True
    text = json.dumps(messages)
    # smolagents sends a result as a user message naming the call; DSPy as an input field
    observed = '"text": "Observation:' in text or "Call id: call_1" in text
    return observed or "tool_result ## ]]\\n56" in text


def answer(request: dict[str, Any]) -> Any:
    """The lane upstream's answer to one chat request (streamed or whole, as requested)."""
    from litellm_toolgate.demo.serve import as_requested
    from litellm_toolgate.loopback.upstream import Scripted, answer_stream, calls_stream

    tools = [t.get("function", t).get("name") for t in request.get("tools") or []]
    if has_result(request):
        if "final_answer" in tools:  # smolagents ends a run with its final_answer tool
            body = calls_stream([("call_2", "final_answer", json.dumps({"answer": ANSWER}))])
            return as_requested(request, body)
        if "[[ ## answer ## ]]" in json.dumps(request.get("messages")):  # DSPy's format
            text = f"[[ ## answer ## ]]\n{ANSWER}\n\n[[ ## completed ## ]]"
            return as_requested(request, answer_stream(text))
        return as_requested(request, answer_stream(ANSWER))
    scenario = scenario_of(request)
    name, arguments = _call_args(scenario)
    body = calls_stream([("call_1", name, arguments)])
    if scenario == "length":
        body = body.replace(b'"finish_reason":"tool_calls"', b'"finish_reason":"length"')
    if scenario == "truncated" and request.get("stream") is True:
        # the stream ends mid-arguments: no finish reason, no [DONE]
        cut = body.index(b'"finish_reason":"tool_calls"')
        body = body[: body.rindex(b"data: ", 0, cut)]
        return Scripted(body, chunk_sizes=[7, 64, 3])
    return as_requested(request, body, chunk_sizes=[7, 64, 3])


class Tally:
    """The tool function's calls, as the framework made them."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    def multiply(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return a * b


def chain_of(
    exc: BaseException | None, seen: list[BaseException] | None = None
) -> list[BaseException]:
    """``exc``, its causes and contexts, and those of any exceptions it groups
    (frameworks that gather errors keep the gate's inside an ExceptionGroup), each once:
    a group's member whose context is the group again ends the walk."""
    seen = [] if seen is None else seen
    start = len(seen)
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    for item in seen[start:]:
        for inner in getattr(item, "exceptions", ()) or ():
            if isinstance(inner, BaseException):
                chain_of(inner, seen)
    return seen


def _said(message: str) -> str | None:
    found = re.search(r"quarantined: ([a-z_]+) ", message)
    return found.group(1) if found else None


def run_case(run: Callable[[str, Tally], Any], prompt: str) -> dict[str, Any]:
    from litellm_toolgate import ToolCallQuarantined

    tally = Tally()
    started = time.monotonic()
    error: BaseException | None = None
    result: Any = None
    try:
        result = run(prompt, tally)
    except BaseException as exc:
        error = exc
    chain = chain_of(error)
    gate = next((e for e in chain if isinstance(e, ToolCallQuarantined)), None)
    rendered = "".join(f"{e!s}{e!r}{e.args!r}" for e in chain)
    if error is not None and gate is None:
        # Not the gate's error: show where it came from (types and frames, no messages).
        detail = "".join(traceback.format_exception(type(error), None, error.__traceback__))
    else:
        detail = ""
    return {
        "ran": len(tally.calls),
        "answer": None if result is None else str(result),
        "chain": [type(e).__name__ for e in chain],
        "gate": None if gate is None else type(gate).__name__,
        "reason": None if gate is None else gate.reason.value,
        # the reason the caller's own exception names in the gate's words, for a framework
        # that cuts the chain (DSPy's streamify re-raises its wrapper ``from None``)
        "said": None if error is None else _said(str(error)),
        "leak": CANARY in rendered,
        "seconds": round(time.monotonic() - started, 2),
        "detail": detail[-3000:],
    }


def main(framework: str, api_base: str) -> None:
    import fwclients

    faulthandler.dump_traceback_later(WARM_LIMIT, exit=True)
    fwclients.warm(framework)
    faulthandler.cancel_dump_traceback_later()
    cases = fwclients.cases(framework, api_base)
    only = os.environ.get("TOOLGATE_FRAMEWORK_CASES", "")
    for case_id, run in cases:
        if only and only not in case_id:
            continue
        scenario = case_id.rsplit("-", 1)[1]
        prompt = f"What is 7 times 8? Use multiply. scenario-{scenario}"
        faulthandler.dump_traceback_later(CASE_LIMIT, exit=True)
        print("\n" + MARK + json.dumps({"case": case_id, "start": True}), flush=True)
        outcome = run_case(run, prompt)
        faulthandler.cancel_dump_traceback_later()
        print("\n" + MARK + json.dumps({"case": case_id, **outcome}), flush=True)
    print("\n" + MARK + json.dumps({"done": True}), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    main(sys.argv[1], sys.argv[2])
