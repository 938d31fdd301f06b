"""``toolgate demo --crash``: a worker killed between a call's start and its finish.

A worker process runs the 7 × 8 loop (``gate.run``) with a non-idempotent tool,
``record_product``, that appends the product to a ledger file. Right after the append (the
side effect happened) and before the tool returns, the worker is killed with ``SIGKILL``:
the journal row stays at ``started``. The demo then resumes the run with the same run id
and the conversation the worker checkpointed: the tool's ambiguous-row rule is ``fail``,
so the resume refuses (``AmbiguousCalls``) and runs nothing. An operator looks at the
ledger (one entry: it ran), reconciles the row with a reason, and the run resumes to its
end without running the call again. The ledger still holds one entry.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import tempfile
from pathlib import Path
from typing import Any, TextIO

from .. import ToolGate
from ..core.rules.journal import AmbiguousCalls
from ..loopback.upstream import FakeUpstream, Scripted, answer_stream, calls_stream
from ..run.journal import open_journal
from ..run.tools import Tool
from .run import MULTIPLY, print_rows

RUN_ID = "demo-crash"
RECORD = {
    "type": "function",
    "function": {**MULTIPLY["function"], "name": "record_product"},  # type: ignore[dict-item]
}


def _answer(request: dict[str, Any]) -> Scripted:
    results = [m for m in request.get("messages", []) if m.get("role") == "tool"]
    if not results:
        call = ("call_demo_crash_1", "record_product", '{"a": 7, "b": 8}')
        return Scripted(calls_stream([call], text="Recording the product."))
    value = json.loads(results[-1]["content"]).get("value")
    if value is None:
        return Scripted(answer_stream("The product was recorded before the interruption."))
    return Scripted(answer_stream(f"7 times 8 is {value:g}, recorded."))


def _run(workdir: Path, base_url: str, *, die: bool) -> str:
    """One worker's run (resumed if the journal already holds the run)."""
    ledger = workdir / "ledger.txt"
    saved = workdir / "conversation.json"

    def record_product(arguments: dict[str, Any]) -> dict[str, float]:
        product = float(arguments["a"]) * float(arguments["b"])
        with open(ledger, "a", encoding="utf-8") as out:
            out.write(f"{product:g}\n")
            out.flush()
            os.fsync(out.fileno())
        if die:  # the side effect happened; the finish never will
            os.kill(os.getpid(), signal.SIGKILL)
        return {"value": product}

    def checkpoint(conversation: list[Any]) -> None:
        saved.write_text(json.dumps(conversation), encoding="utf-8")

    first = [{"role": "user", "content": "What is 7 times 8? Record it."}]
    conversation = json.loads(saved.read_text("utf-8")) if saved.exists() else first
    with open_journal(f"sqlite:///{workdir / 'journal.db'}") as journal:
        return (
            ToolGate([RECORD])
            .run(
                messages=conversation,
                tools=[RECORD],
                executors={"record_product": Tool(record_product, effect="non_idempotent")},
                journal=journal,
                run_id=RUN_ID,
                checkpoint=checkpoint,
                model="cometapi/gpt-4o-mini",
                api_base=base_url,
                api_key="sk-demo-loopback",
            )
            .text
        )


def _worker(workdir: str, base_url: str) -> None:
    _run(Path(workdir), base_url, die=True)


def run_crash_demo(out: TextIO) -> int:
    with FakeUpstream(handler=_answer) as upstream, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        out.write(f"upstream: fake CometAPI on {upstream.base_url}\n")
        out.write("\n== a worker runs record_product and is killed before it finishes ==\n")
        worker = multiprocessing.get_context("spawn").Process(
            target=_worker, args=(str(workdir), upstream.base_url)
        )
        worker.start()
        worker.join(300)
        if worker.exitcode != -signal.SIGKILL:
            out.write(f"the worker was not killed as planned (exit {worker.exitcode})\n")
            return 1
        ledger = workdir / "ledger.txt"
        out.write("worker killed with SIGKILL between start and finish\n")
        with open_journal(f"sqlite:///{workdir / 'journal.db'}") as journal:
            print_rows(out, journal.calls(RUN_ID))

            out.write("\n== resume (same run id, the checkpointed conversation) ==\n")
            try:
                _run(workdir, upstream.base_url, die=False)
            except AmbiguousCalls as exc:
                out.write(f"resume refused: {exc}\n")
            else:
                out.write("the resume ran the ambiguous call again\n")
                return 1
            entries = ledger.read_text("utf-8").split()
            out.write(f"ledger entries: {len(entries)} (the call ran once, before the kill)\n")

            out.write("\n== an operator reconciles the row, the run resumes ==\n")
            (row,) = journal.unfinished(RUN_ID)
            journal.reconcile(row.idempotency_key, reason="ledger checked: the entry is there")
            out.write(f"reconciled {row.call_id} ({row.tool}): ledger checked\n")
        answer = _run(workdir, upstream.base_url, die=False)
        with open_journal(f"sqlite:///{workdir / 'journal.db'}") as journal:
            print_rows(out, journal.calls(RUN_ID))
        entries = ledger.read_text("utf-8").split()
        out.write(f"ledger entries: {len(entries)}; record_product ran once\n")
        out.write(f"answer: {answer}\n")
        return 0 if len(entries) == 1 else 1
