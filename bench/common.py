"""What every section shares: the statistics, the timers and the upstream.

:func:`summary` and :func:`pair_rows` turn paired runs into a row (median, min and max of
the per-pair ratios, on wall and CPU time); :class:`Timer` takes one run's wall and CPU
time; :class:`Upstream` serves the current body from a loopback FakeUpstream in a child
process (``bench/serve.py``); :func:`gate_sections` times every gate entry point, for the
end-to-end rows' attributed cost and for the event-loop section.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import litellm

from bench.bodies import TOOLS
from litellm_toolgate.core.decision.attempt import Attempt
from litellm_toolgate.core.decision.body import BodyReader
from litellm_toolgate.edge.carriers import chat as carrier_mod

litellm.suppress_debug_info = True

Row = dict[str, Any]


# ---- small statistics ------------------------------------------------------------------------
def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "n": len(values),
    }


class Timer:
    """Wall and CPU time of one run."""

    def __enter__(self) -> Timer:
        self.wall0 = time.perf_counter()
        self.cpu0 = time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall0
        self.cpu = time.process_time() - self.cpu0


# ---- the upstream -----------------------------------------------------------------------------
class Upstream:
    """FakeUpstream in a child process (bench/serve.py), serving the current body."""

    def __init__(self) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="toolgate-bench-")
        self._names: dict[bytes, str] = {}
        self.name = ""
        self._process: subprocess.Popen[str] | None = None
        self.base_url = ""

    @property
    def body(self) -> bytes:
        return (Path(self._folder.name) / self.name).read_bytes()

    @body.setter
    def body(self, data: bytes) -> None:
        name = self._names.get(data)
        if name is None:
            name = self._names[data] = f"body-{len(self._names)}.sse"
            (Path(self._folder.name) / name).write_bytes(data)
        self.name = name

    def __enter__(self) -> Upstream:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "bench.serve", self._folder.name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        port = int(self._process.stdout.readline())
        self.base_url = f"http://127.0.0.1:{port}/v1"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            assert self._process.stdin is not None
            self._process.stdin.close()
            self._process.wait(10)
        self._folder.cleanup()

    def pin(self, cpus: set[int]) -> None:
        """Run the server's threads on ``cpus`` (the threads it starts later inherit it)."""
        assert self._process is not None
        for task in Path(f"/proc/{self._process.pid}/task").iterdir():
            with contextlib.suppress(ProcessLookupError):  # a connection's thread ended
                os.sched_setaffinity(int(task.name), cpus)

    def messages(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.name}]

    def kwargs(self, **extra: Any) -> dict[str, Any]:
        return {
            "model": "cometapi/gpt-4o-mini",
            "messages": self.messages(),
            "api_base": self.base_url,
            "api_key": "sk-bench",
            "stream": True,
            "num_retries": 0,
            "tools": TOOLS,
            **extra,
        }


def pair_rows(  # noqa: PLR0917
    section: str,
    name: str,
    base: list[Timer],
    other: list[Timer],
    events: int,
    budget: float | None,
    extra: dict[str, Any] | None = None,
) -> Row:
    wall = [o.wall / b.wall for b, o in zip(base, other, strict=True)]
    cpu = [o.cpu / b.cpu for b, o in zip(base, other, strict=True)]
    base_us = [b.wall / events * 1e6 for b in base]
    other_us = [o.wall / events * 1e6 for o in other]
    row: Row = {
        "section": section,
        "name": name,
        "events": events,
        "ratio_wall": summary(wall),
        "ratio_cpu": summary(cpu),
        "baseline_us_per_event": summary(base_us),
        "measured_us_per_event": summary(other_us),
        "budget_ratio": budget,
    }
    if budget is not None:
        # Judged on CPU time: the gate adds work, not waiting, and CPU time is far less
        # disturbed by other processes on a shared machine than wall time is. (End-to-end
        # rows are judged again by attributed() on the gate's own CPU time.)
        row["met"] = statistics.median(cpu) <= budget
    row.update(extra or {})
    return row


def failed_row(section: str, name: str, exc: Exception) -> Row:
    # The exception's type and the first words of its message (litellm's, about the
    # connection); the bodies are the bench's own, nothing secret.
    return {"section": section, "name": name, "error": f"{type(exc).__name__}: {exc}"[:160]}


# ---- timing the gate's own entry points -------------------------------------------------
class _Collections:
    """The CPU time the garbage collector took on each thread, in ms (``gc.callbacks``).

    A collection runs on whichever thread allocates the object that crosses the threshold,
    and scans the whole heap: in a long litellm stream, litellm's own kept chunks. The gate
    allocates during its sections too, so a collection (hundreds of milliseconds for a
    full one at 20,000 chunks) lands inside a gate section now and then, by chance. Such a
    pass is not the gate's own work: the short-lived objects the gate makes are freed in
    the section that made them and do not advance the collector's count.
    """

    def __init__(self) -> None:
        self.ms: dict[int, float] = {}
        self._started: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.thread_time()
        elif thread in self._started:
            spent = (time.thread_time() - self._started.pop(thread)) * 1000
            self.ms[thread] = self.ms.get(thread, 0.0) + spent


def _timed(
    label: str,
    fn: Callable[..., Any],
    *,
    loop_thread: threading.Thread | None,
    out: list[tuple[str, float, float]],
    collections: _Collections | None,
    collected: list[float] | None,
    wall_only: bool = False,
) -> Callable[..., Any]:
    """``fn`` timed: each call appends ``(label, wall ms, CPU ms)`` to ``out``.

    The clocks are read first thing after ``fn`` returns, and the CPU clock innermost.
    ``wall_only``: the monotonic clock alone (a vDSO read, no system call), whose reading
    then stands for both; see :data:`bench.e2e.PER_CHUNK`.
    """
    ns = time.perf_counter_ns

    def timed(*args: Any, **kwargs: Any) -> Any:
        if loop_thread is not None and threading.current_thread() is not loop_thread:
            return fn(*args, **kwargs)
        thread = threading.get_ident()
        before = 0.0 if collections is None else collections.ms.get(thread, 0.0)
        started = time.perf_counter()
        cpu = time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            cpu_ms = (time.thread_time() - cpu) * 1000
            wall_ms = (time.perf_counter() - started) * 1000
            out.append((label, wall_ms, cpu_ms))
            if collections is not None and collected is not None:
                collected.append(collections.ms.get(thread, 0.0) - before)

    def timed_wall(*args: Any, **kwargs: Any) -> Any:
        if loop_thread is not None and threading.current_thread() is not loop_thread:
            return fn(*args, **kwargs)
        thread = threading.get_ident()
        before = 0.0 if collections is None else collections.ms.get(thread, 0.0)
        started = ns()
        try:
            return fn(*args, **kwargs)
        finally:
            wall_ms = (ns() - started) / 1e6
            out.append((label, wall_ms, wall_ms))
            if collections is not None and collected is not None:
                collected.append(collections.ms.get(thread, 0.0) - before)

    return timed_wall if wall_only else timed


def timer_cost_ms(*, wall_only: bool = False, rounds: int = 7, calls: int = 2_000) -> float:
    """What one timed section reports around a call that does nothing, in ms.

    A section on the CPU clock reads it twice (a system call, not a vDSO read) and forwards
    its arguments: about 0.7 µs per section here, reported as the gate's; on the wall clock
    alone about 0.1 µs. The end-to-end rows take it off (the minimum over a few rounds, in
    a tight loop: never more than the wrapper costs; in a real stream, where its code and
    the kernel's are cold, a CPU-clock section costs about twice this, which is why the
    per-chunk entry point is timed on the wall clock, see :data:`bench.e2e.PER_CHUNK`).
    """

    def nothing(_: object) -> None:
        return None

    best = math.inf
    for _ in range(rounds):
        out: list[tuple[str, float, float]] = []
        timed = _timed(
            "nothing",
            nothing,
            loop_thread=None,
            out=out,
            collections=None,
            collected=None,
            wall_only=wall_only,
        )
        for _ in range(calls):
            timed(None)
        best = min(best, sum(cpu for _, _, cpu in out) / calls)
    return best


GATE_ENTRY_POINTS: list[tuple[Any, str]] = [
    (BodyReader, "feed"),
    (BodyReader, "eof"),
    (carrier_mod.CarrierChunks, "admit"),
    (carrier_mod.CarrierChunks, "release"),
    (Attempt, "conclude"),
    (Attempt, "decide"),
    (Attempt, "release"),
]
"""The gate's entry points a stream runs through, timed by :func:`gate_sections`."""


@contextmanager
def gate_sections(
    loop_thread: threading.Thread | None,
    out: list[tuple[str, float, float]],
    collected: list[float] | None = None,
    wall_only: frozenset[str] = frozenset(),
    targets: list[tuple[Any, str]] = GATE_ENTRY_POINTS,
) -> Iterator[None]:
    """Time every gate entry point that runs on the loop's thread (the bench's own wrapper).

    Both wall time and the thread's own CPU time are kept: wall time also counts waiting for
    the GIL while other threads (litellm's logging pool, the decision worker) run, CPU time
    only what the gate itself did on the loop. With ``collected``, each section also appends
    the garbage collector's CPU time inside it (see :class:`_Collections`), in ms. The
    entry points labelled in ``wall_only`` read the wall clock alone (see :func:`_timed`).
    ``targets``: other methods to time the same way (the end-to-end rows' floor gate).
    """
    saved = [(owner, name, owner.__dict__[name]) for owner, name in targets]
    collections = None if collected is None else _Collections()
    if collections is not None:
        gc.callbacks.append(collections)
    for owner, name, fn in saved:
        label = f"{owner.__name__}.{name}"
        timed = _timed(
            label,
            fn,
            loop_thread=loop_thread,
            out=out,
            collections=collections,
            collected=collected,
            wall_only=label in wall_only,
        )
        setattr(owner, name, timed)
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
        if collections is not None:
            gc.callbacks.remove(collections)
