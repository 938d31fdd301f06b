"""Scenarios the crash kit runs in child processes (tests/test_loop_crash.py).

Round one asks for two calls: ``send`` (non-idempotent, ambiguous rule ``fail``) and
``reserve`` (idempotent, ``retry_with_key``: its target drops a repeat of a key it has seen).
Round two answers. The fake upstream answers from the request alone, so every child (the
first run, the killed one, each resume) talks to its own.
"""

from __future__ import annotations

import json
from typing import Any

from litellm_toolgate import ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, calls_stream
from litellm_toolgate.run.tools import ToolContext
from litellm_toolgate.testing import CrashContext


def _schema(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}},
                "required": ["to"],
                "additionalProperties": False,
            },
        },
    }


TOOLS = [_schema("send"), _schema("reserve")]
CALLS = [("call_send", "send", '{"to": "ops"}'), ("call_reserve", "reserve", '{"to": "room"}')]


def _answer(request: dict[str, Any]) -> Scripted:
    if not any(m.get("role") == "tool" for m in request.get("messages", [])):
        return Scripted(calls_stream(CALLS, text="On it."), chunk_sizes=[16])
    return Scripted(answer_stream("Sent and reserved."))


def send(arguments: dict[str, Any]) -> str:
    return json.dumps({"sent_to": arguments["to"]})


def reserve(arguments: dict[str, Any], context: ToolContext) -> str:
    # A real target would store the key and drop a repeat; the reply is the same each time.
    return json.dumps({"reserved": arguments["to"], "key": context.idempotency_key[:12]})


def scenario(ctx: CrashContext) -> None:
    with FakeUpstream(handler=_answer) as upstream:
        ToolGate(TOOLS).run(
            messages=ctx.conversation([{"role": "user", "content": "Send and reserve."}]),
            tools=TOOLS,
            executors={
                "send": ctx.tool("send", send, effect="non_idempotent"),
                "reserve": ctx.tool(
                    "reserve", reserve, effect="idempotent", on_ambiguous="retry_with_key"
                ),
            },
            journal=ctx.journal(),
            run_id=ctx.run_id,
            checkpoint=ctx.checkpoint,
            before_round=ctx.before_round,
            lease_seconds=1.0,
            model="cometapi/gpt-4o-mini",
            api_base=upstream.base_url,
            api_key="sk-crash-kit",
        )
