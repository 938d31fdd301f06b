"""The tool loop's cost per round, against the gated round alone, in the same run.

``toolloop``: a run of two rounds through ``gate.run`` (round one a 200-event tool-call
stream with one ``write_file`` call, which the loop journals, runs and answers; round two a
200-event text stream), timed whole, against its own two gated rounds, timed inside the same
run (``gate.completion`` and every chunk read from it). Timing both inside one run keeps the
load of a shared machine out of the comparison, which separate runs of a few hundred
milliseconds cannot. The ratio (run ÷ its gated rounds) minus one is the loop's added time
per round as a share of a gated round: the bounds and id checks, the conversation, the
checkpoint, the journal's three transitions and the tool's result.
Budget: ×1.05 (below 5% of a 200-event gated round), judged on CPU time like every ratio
here. Two journals: SQLite in memory (the loop's own work; the budgeted row), and an SQLite
file with ``synchronous=FULL`` (three durable commits a call; the journal section measures
those against their floor), for reference.
"""

from __future__ import annotations

import gc
import tempfile
import uuid
from pathlib import Path
from typing import Any

from bench.bodies import TOOLS, text_body, tool_body
from bench.common import Row, Timer, Upstream, pair_rows
from bench.report import log
from litellm_toolgate import ToolGate
from litellm_toolgate.run.journal import open_journal
from litellm_toolgate.run.tools import Tool

BUDGET = 1.05
EVENTS = 200


def toolloop_section(up: Upstream, pairs: int) -> list[Row]:
    up.body = text_body(EVENTS)
    answer = up.name  # the bench upstream serves the body its last message names
    up.body = tool_body(EVENTS)[0]
    ask = up.name
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, url in (
            ("SQLite in memory", "sqlite:///:memory:"),
            ("SQLite file (WAL, synchronous=FULL)", f"sqlite:///{Path(tmp) / 'loop.db'}"),
        ):
            rows.append(_measure(up, name, url, ask, answer, pairs))
            log(rows[-1])
    rows[1]["budget_ratio"] = None  # reference: durable commits, measured in `journal`
    rows[1].pop("met", None)
    return rows


class _Spent:
    """Wall and CPU time summed over the gated rounds of one run (a Timer's fields)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0


class _TimedGate(ToolGate):
    """A gate whose chat rounds time themselves: the call and every chunk read."""

    spent = _Spent()

    def completion(self, **kwargs: Any) -> Any:
        with Timer() as t:
            stream = super().completion(**kwargs)
        self._add(t)
        return _TimedStream(stream, self.spent)

    def _add(self, t: Timer) -> None:
        self.spent.wall += t.wall
        self.spent.cpu += t.cpu


class _TimedStream:
    """The gated stream, each chunk's read timed; everything else is the stream's own."""

    def __init__(self, stream: Any, spent: _Spent) -> None:
        self._stream = stream
        self._spent = spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def __iter__(self) -> Any:
        iterator = iter(self._stream)
        while True:
            with Timer() as t:
                chunk = next(iterator, None)
            self._spent.wall += t.wall
            self._spent.cpu += t.cpu
            if chunk is None:
                return
            yield chunk


def _measure(up: Upstream, name: str, url: str, ask: str, answer: str, pairs: int) -> Row:  # noqa: PLR0917
    """Each run timed whole, and its gated rounds timed inside it: the rest is the loop's."""
    gate = _TimedGate(TOOLS)
    executors = {
        str(tool["function"]["name"]): Tool(lambda arguments: answer, effect="idempotent")
        for tool in TOOLS
    }
    rounds: list[Any] = []
    runs: list[Timer] = []
    with open_journal(url) as journal:

        def looped() -> None:
            kwargs = up.kwargs()
            del kwargs["stream"]
            kwargs["messages"] = [{"role": "user", "content": ask}]
            result = gate.run(
                executors=executors, journal=journal, run_id=uuid.uuid4().hex, **kwargs
            )
            assert result.rounds == 2 and len(result.rows) == 1

        looped()  # warm up
        for _ in range(pairs):
            gc.collect()
            gate.spent = _Spent()
            with Timer() as t:
                looped()
            runs.append(t)
            rounds.append(gate.spent)
    gate.close()
    return pair_rows("toolloop", f"2 rounds of {EVENTS} events, {name}", rounds, runs,
                     2 * EVENTS, BUDGET)  # fmt: skip
