"""A process driving one run through ``gate.run``, for tests/test_loop_one_driver.py.

``python run_driver_worker.py CONFIG.json``; the config says:

* ``url``, ``run_id``, ``worker`` (a name), ``workdir`` (shared files), ``go`` (a file to
  wait for before starting, or null), ``wait_for_run`` (or null), ``run_lease_seconds``,
  ``exit_at_round`` (``os._exit`` in ``before_round`` of that round: a driver that dies
  holding the lease), ``stall_in_tool`` (the first tool call writes ``in_tool`` and waits
  for the ``resume`` file: the test stops this process there).

The model (a fake upstream of this process) asks, each round, for four calls of the tool
``send`` with call ids of its own (``c<round>_<worker>_<i>``; round 0's ids are the same for
every worker), and answers in text at round 2. The tool appends one line per execution to
``workdir/markers`` (worker, call id, fencing token) under a file lock: the target system's
own record. The conversation is checkpointed to ``workdir/conversation.json`` and a
resumer starts from it. Prints the outcome as JSON: ``completed`` or the error's class.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from litellm_toolgate import ToolGate
from litellm_toolgate.core.rules.loop import LoopLimits
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, answer_stream, calls_stream
from litellm_toolgate.run.tools import Tool, ToolContext

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send",
            "parameters": {
                "type": "object",
                "properties": {"to": {"type": "string"}},
                "required": ["to"],
                "additionalProperties": False,
            },
        },
    }
]
PER_ROUND = 4


def wait_for(path: Path, seconds: float = 240.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path.name}")
        time.sleep(0.01)


def main(config_path: str) -> dict[str, Any]:
    config = json.loads(Path(config_path).read_text())
    worker: str = config["worker"]
    workdir = Path(config["workdir"])
    saved = workdir / "conversation.json"
    stalled = [False]

    def answer(request: dict[str, Any]) -> Scripted:
        turns = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
        if turns >= 2:
            return Scripted(answer_stream("Done."))
        who = "x" if turns == 0 else worker
        calls = [(f"c{turns}_{who}_{i}", "send", f'{{"to": "t{i}"}}') for i in range(PER_ROUND)]
        return Scripted(calls_stream(calls, text="Sending."))

    def send(arguments: dict[str, Any], context: ToolContext) -> str:
        if config.get("stall_in_tool") and not stalled[0]:
            stalled[0] = True
            (workdir / "in_tool.part").write_text(str(os.getpid()))
            (workdir / "in_tool.part").replace(workdir / "in_tool")
            wait_for(workdir / "resume")
        with (workdir / "markers").open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(f"{worker} {context.call_id} {context.fencing_token}\n")
            f.flush()
            os.fsync(f.fileno())
        return json.dumps({"sent": arguments["to"]})

    def checkpoint(conversation: list[Any]) -> None:
        part = workdir / f"conversation.{worker}.part"
        part.write_text(json.dumps(conversation))
        part.replace(saved)

    def before_round(index: int) -> None:
        if config.get("exit_at_round") == index:
            os._exit(0)  # a driver that dies holding the run's lease

    conversation = (
        json.loads(saved.read_text())
        if saved.exists()
        else [{"role": "user", "content": "Send to all four."}]
    )
    options: dict[str, Any] = {}
    if config.get("wait_for_run") is not None:
        options["wait_for_run"] = config["wait_for_run"]
    if config.get("run_lease_seconds") is not None:
        options["run_lease_seconds"] = config["run_lease_seconds"]
    with FakeUpstream(handler=answer) as upstream, ToolGate(TOOLS) as gate:
        if config.get("go"):
            wait_for(Path(config["go"]))
        try:
            result = gate.run(
                messages=conversation,
                tools=TOOLS,
                executors={
                    "send": Tool(send, effect="non_idempotent", on_ambiguous="retry_with_key")
                },
                journal=config["url"],
                run_id=config["run_id"],
                limits=LoopLimits(max_rounds=3, max_calls_per_round=PER_ROUND, max_calls=8),
                checkpoint=checkpoint,
                before_round=before_round,
                lease_seconds=1.0,
                model="cometapi/gpt-4o-mini",
                api_base=upstream.base_url,
                api_key="sk-one-driver",
                **options,
            )
        except Exception as exc:  # the test reads the class (the message holds ids only)
            return {"worker": worker, "outcome": type(exc).__name__, "message": str(exc)}
    return {"worker": worker, "outcome": "completed", "rows": len(result.rows)}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
