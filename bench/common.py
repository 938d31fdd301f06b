"""What every section shares: the statistics, the timers and the upstream.

:func:`summary` and :func:`pair_rows` turn paired runs into a row (median, min and max of
the per-pair ratios, on wall and CPU time); :class:`Timer` takes one run's wall and CPU
time; :class:`Upstream` serves the current body from a loopback FakeUpstream in a child
process (``bench/serve.py``); :func:`gate_sections` times every gate entry point, for the
end-to-end rows' attributed cost and for the event-loop section.
"""

from __future__ import annotations

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
from litellm_toolgate.core.attempt import Attempt
from litellm_toolgate.core.body import BodyReader
from litellm_toolgate.edge import carrier as carrier_mod

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
@contextmanager
def gate_sections(
    loop_thread: threading.Thread | None, out: list[tuple[str, float, float]]
) -> Iterator[None]:
    """Time every gate entry point that runs on the loop's thread (the bench's own wrapper).

    Both wall time and the thread's own CPU time are kept: wall time also counts waiting for
    the GIL while other threads (litellm's logging pool, the decision worker) run, CPU time
    only what the gate itself did on the loop.
    """
    targets: list[tuple[Any, str]] = [
        (BodyReader, "feed"),
        (BodyReader, "eof"),
        (carrier_mod.CarrierChunks, "admit"),
        (carrier_mod.CarrierChunks, "release"),
        (Attempt, "conclude"),
        (Attempt, "decide"),
        (Attempt, "release"),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name in targets]

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            if loop_thread is not None and threading.current_thread() is not loop_thread:
                return fn(*args, **kwargs)
            started = time.perf_counter()
            cpu = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                wall_ms = (time.perf_counter() - started) * 1000
                out.append((label, wall_ms, (time.thread_time() - cpu) * 1000))

        return timed

    for owner, name, fn in saved:
        setattr(owner, name, wrap(f"{owner.__name__}.{name}", fn))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)
