"""End to end through litellm over loopback: plain vs gated, the SDK reference, first text.

* ``e2e``: litellm iterating a stream from the upstream, plain vs gated vs the floor gate
  (``bench.floor``), sync and async, interleaved; each gated run also times the gate's own
  entry points, and each floor run the floor gate's (:func:`attributed`).
* ``reference``: the OpenAI SDK's stream helper and plain ``create(stream=True)`` against
  plain litellm on the same body.
* ``ttft``: time to the first text chunk, plain vs gated, sync and async.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import httpx
import litellm
from litellm.llms.custom_httpx.http_handler import AsyncHTTPHandler, HTTPHandler

from bench.bodies import TOOLS, count_events
from bench.common import (
    GATE_ENTRY_POINTS,
    Row,
    Timer,
    Upstream,
    failed_row,
    gate_sections,
    pair_rows,
    summary,
    timer_cost_ms,
)
from bench.floor import LeastAsyncTransport, LeastGate, LeastSyncTransport
from bench.report import log
from litellm_toolgate import ToolGate

# ---- end to end -------------------------------------------------------------------------------
RETRIED: list[str] = []


def once_more(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Run again once if the loopback connection failed (seen rarely under heavy load);
    every retry is listed in the results."""

    def sync(*args: Any) -> Any:
        try:
            return fn(*args)
        except Exception as exc:
            RETRIED.append(f"{fn.__name__}: {type(exc).__name__}")
        return fn(*args)

    async def asynchronous(*args: Any) -> Any:
        try:
            return await fn(*args)
        except Exception as exc:
            RETRIED.append(f"{fn.__name__}: {type(exc).__name__}")
        return await fn(*args)

    return asynchronous if asyncio.iscoroutinefunction(fn) else sync


class Lent(httpx.AsyncBaseTransport):
    """The shared async transport, lent to one litellm handler: closing it leaves it open.

    litellm (1.110) closes a handler's own httpx client when the handler is collected, and
    closing an httpx client closes its transport. Handed the shared transport bare, a
    handler collected by a garbage-collector pass during a later long stream closed the
    connection pool that stream was reading (``ClosedResourceError``, then litellm's
    ``MidStreamFallbackError``: the failed 20,000-event async rows). The gate lends its
    own shared transport the same way (its tap's ``aclose`` does nothing).
    """

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        pass


def _decided(gate: LeastGate) -> int:
    """The floor gate's decision; the held chunks it then hands out."""
    if not gate.decide():
        raise RuntimeError("the floor gate refused the bench's own body")
    return len(gate.held)


class EndToEnd:
    def __init__(self, upstream: Upstream) -> None:
        self.up = upstream
        self.gate = ToolGate(TOOLS)
        self.sync_transport = httpx.HTTPTransport()
        self.async_transport: httpx.AsyncHTTPTransport | None = None

    @once_more
    def plain_sync(self) -> tuple[Timer, int]:
        with Timer() as t:
            client = HTTPHandler(client=httpx.Client(transport=self.sync_transport))
            n = sum(1 for _ in litellm.completion(**self.up.kwargs(client=client)))
        return t, n

    @once_more
    def gated_sync(self) -> tuple[Timer, int]:
        with Timer() as t:
            n = sum(1 for _ in self.gate.completion(**self.up.kwargs()))
        return t, n

    @once_more
    def floor_sync(self) -> tuple[Timer, int]:
        with Timer() as t:
            gate = LeastGate()
            transport = LeastSyncTransport(self.sync_transport, gate)
            client = HTTPHandler(client=httpx.Client(transport=transport))
            n = 0
            for chunk in litellm.completion(**self.up.kwargs(client=client)):
                if gate.admit(chunk) is not None:
                    n += 1
            n += _decided(gate)
        return t, n

    @once_more
    async def floor_async(self) -> tuple[Timer, int]:
        if self.async_transport is None:
            self.async_transport = httpx.AsyncHTTPTransport()
        with Timer() as t:
            gate = LeastGate()
            client = AsyncHTTPHandler(transport=LeastAsyncTransport(self.async_transport, gate))
            n = 0
            async for chunk in await litellm.acompletion(**self.up.kwargs(client=client)):
                if gate.admit(chunk) is not None:
                    n += 1
            n += _decided(gate)
        return t, n

    @once_more
    async def plain_async(self) -> tuple[Timer, int]:
        if self.async_transport is None:
            self.async_transport = httpx.AsyncHTTPTransport()
        with Timer() as t:
            client = AsyncHTTPHandler(transport=Lent(self.async_transport))
            n = 0
            async for _ in await litellm.acompletion(**self.up.kwargs(client=client)):
                n += 1
        return t, n

    @once_more
    async def gated_async(self) -> tuple[Timer, int]:
        with Timer() as t:
            n = 0
            async for _ in await self.gate.acompletion(**self.up.kwargs()):
                n += 1
        return t, n


PER_CHUNK = frozenset({"CarrierChunks.admit", "LeastGate.admit"})
"""The entry points called once per chunk litellm yields, timed on the wall clock alone.

Two reads of the thread's CPU clock are two system calls; inside a real litellm stream
(their code and the kernel's cold, the TLB refilled after each) a section around an admit
that does nothing reports about 1.4 µs (async) to 1.9 µs (sync) per chunk on the bench
machine, as much as the carrier's own work, and far more than the same wrapper costs in a
tight loop, so it cannot be calibrated away. A wall-clock section costs about 0.2 µs in
the same place. The wall clock also counts what interrupts a section: another process's
turn on the core, another thread's turn at the GIL, a collector pass. Such a section is
one of thousands of microsecond sections that took milliseconds, so each is counted as
:data:`INTERRUPTED` times the median section instead (after its collector passes are
taken off): more than any uninterrupted admit costs, far less than an interruption.
"""

INTERRUPTED = 20

FLOOR_ENTRY_POINTS: list[tuple[Any, str]] = [
    (LeastGate, "feed"),
    (LeastGate, "admit"),
    (LeastGate, "decide"),
]

PARTS = {
    "BodyReader.feed": "wire",
    "BodyReader.eof": "wire",
    "LeastGate.feed": "wire",
    "CarrierChunks.admit": "chunks",
    "LeastGate.admit": "chunks",
}
"""Each entry point's part of a stream: reading the wire, reading litellm's chunks, or the
decision and the release (every other entry point)."""


class Sections:
    """The CPU time of one kind of gate's timed sections in each run, less what is not its own.

    Taken off each run's sum: the garbage collector's passes that happened to run inside a
    section (see ``bench.common._Collections``), the timer's own cost per section
    (``bench.common.timer_cost_ms``, measured once per process, for each clock), and for
    the per-chunk sections (:data:`PER_CHUNK`) the interruptions. Both raw and corrected
    sums are kept in the row, and the corrected sum of each part (:data:`PARTS`).
    """

    timer_ms: tuple[float, float] | None = None  # (CPU clock, wall clock alone)

    def __init__(self, targets: list[tuple[Any, str]]) -> None:
        if Sections.timer_ms is None:
            Sections.timer_ms = (timer_cost_ms(), timer_cost_ms(wall_only=True))
        self.targets = targets
        self.raw_ms: list[float] = []
        self.gc_ms: list[float] = []
        self.own_ms: list[float] = []
        self.parts_ms: list[dict[str, float]] = []
        self.sections: list[int] = []
        self.interrupted: list[int] = []

    @contextmanager
    def run(self) -> Iterator[None]:
        sections: list[tuple[str, float, float]] = []
        collected: list[float] = []
        with gate_sections(None, sections, collected, PER_CHUNK, self.targets):
            yield
        cpu_timer, wall_timer = Sections.timer_ms or (0.0, 0.0)
        timed = [
            (label, max(0.0, ms - gc_ms))
            for (label, _, ms), gc_ms in zip(sections, collected, strict=True)
        ]
        per_chunk = [ms for label, ms in timed if label in PER_CHUNK]
        cap = INTERRUPTED * statistics.median(per_chunk) if per_chunk else 0.0
        parts = {"wire": 0.0, "chunks": 0.0, "decision": 0.0}
        for label, ms in timed:
            own = min(ms, cap) - wall_timer if label in PER_CHUNK else ms - cpu_timer
            parts[PARTS.get(label, "decision")] += own
        self.raw_ms.append(sum(ms for _, _, ms in sections))
        self.gc_ms.append(sum(collected))
        self.own_ms.append(max(0.0, sum(parts.values())))
        self.parts_ms.append(parts)
        self.sections.append(len(sections))
        self.interrupted.append(sum(ms > cap for ms in per_chunk))

    def ratios(self, base: list[Timer]) -> list[float]:
        return [1 + g / (b.cpu * 1000) for g, b in zip(self.own_ms, base, strict=True)]

    def parts(self) -> dict[str, float]:
        return {k: statistics.median(p[k] for p in self.parts_ms) for k in self.parts_ms[0]}


def attributed(row: Row, base: list[Timer], gate: Sections, floor: Sections) -> None:
    """The gate's own CPU time in each gated run, over the paired plain run's CPU time; and
    the floor gate's (``bench.floor``) the same way, from its own runs in the same pairs.

    On a shared machine the ratio of two whole runs wanders by more than the 2 % the budget
    allows; this figure wanders far less, because it counts only the CPU time spent inside
    the gate's entry points (the wire tap, the carrier, the decision, the release), timed
    in the gated runs themselves, less the collector's passes that fell inside them, the
    timer's own cost and the interruptions of per-chunk sections (:class:`Sections`). It
    leaves out what happens between them (the gated
    iterator's own frames, one more httpx client per call), so it is read together with
    the paired ratio, which includes everything (and the timing wrappers' own cost).

    A row over its budget whose floor is over the budget too is marked so: the least a gate
    can do costs more than the budget allows on this machine.
    """
    ratios = gate.ratios(base)
    raw = [1 + g / (b.cpu * 1000) for g, b in zip(gate.raw_ms, base, strict=True)]
    row["gate_cpu_ms"] = statistics.median(gate.own_ms)
    row["gate_cpu_raw_ms"] = statistics.median(gate.raw_ms)
    row["gate_gc_ms"] = statistics.median(gate.gc_ms)
    row["gate_sections"] = statistics.median(gate.sections)
    row["interrupted_sections"] = statistics.median(gate.interrupted)
    row["gate_parts_ms"] = gate.parts()
    row["timer_us"] = [ms * 1000 for ms in Sections.timer_ms or (0.0, 0.0)]
    row["plain_cpu_ms"] = statistics.median(b.cpu for b in base) * 1000
    row["attributed_ratio"] = summary(ratios)
    row["attributed_raw_ratio"] = summary(raw)
    row["met"] = statistics.median(ratios) <= 1.02
    row["floor_cpu_ms"] = statistics.median(floor.own_ms)
    row["floor_parts_ms"] = floor.parts()
    row["floor_ratio"] = summary(floor.ratios(base))
    row["floor_over_budget"] = row["floor_ratio"]["median"] > 1.02


class Runs:
    """One shape's interleaved runs: plain litellm, the gate, the floor gate, in turn."""

    def __init__(self) -> None:
        self.base: list[Timer] = []
        self.gated: list[Timer] = []
        self.gate = Sections(GATE_ENTRY_POINTS)
        self.floor = Sections(FLOOR_ENTRY_POINTS)

    def order(self, i: int) -> list[str]:
        """Each kind of run goes first, second and third in turn."""
        kinds = ["plain", "gated", "floor"]
        return kinds[i % 3 :] + kinds[: i % 3]


def e2e_section(up: Upstream, shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    e2e = EndToEnd(up)
    rows: list[Row] = []
    # Warm every path once (imports, connection set-up, litellm's lazy tables).
    up.body = shapes[0][1]
    e2e.plain_sync()
    e2e.gated_sync()
    e2e.floor_sync()
    for label, body, repeats in shapes:
        up.body = body
        events = count_events(body)
        runs = Runs()
        try:
            for i in range(repeats):
                for kind in runs.order(i):
                    if kind == "plain":
                        runs.base.append(e2e.plain_sync()[0])
                    elif kind == "gated":
                        with runs.gate.run():
                            runs.gated.append(e2e.gated_sync()[0])
                    else:
                        with runs.floor.run():
                            e2e.floor_sync()
        except Exception as exc:  # recorded, not hidden: the row says what failed
            rows.append(failed_row("e2e", f"sync {label}", exc))
            log(rows[-1])
            continue
        rows.append(pair_rows("e2e", f"sync {label}", runs.base, runs.gated, events, 1.02))
        attributed(rows[-1], runs.base, runs.gate, runs.floor)
        log(rows[-1])

    async def run_async() -> None:
        up.body = shapes[0][1]
        await e2e.plain_async()
        await e2e.gated_async()
        await e2e.floor_async()
        for label, body, repeats in shapes:
            up.body = body
            events = count_events(body)
            runs = Runs()
            try:
                for i in range(repeats):
                    for kind in runs.order(i):
                        if kind == "plain":
                            runs.base.append((await e2e.plain_async())[0])
                        elif kind == "gated":
                            with runs.gate.run():
                                runs.gated.append((await e2e.gated_async())[0])
                        else:
                            with runs.floor.run():
                                await e2e.floor_async()
            except Exception as exc:  # recorded, not hidden: the row says what failed
                rows.append(failed_row("e2e", f"async {label}", exc))
                log(rows[-1])
                continue
            rows.append(pair_rows("e2e", f"async {label}", runs.base, runs.gated, events, 1.02))
            attributed(rows[-1], runs.base, runs.gate, runs.floor)
            log(rows[-1])

    asyncio.run(run_async())
    return rows


def sdk_section(up: Upstream, shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    """The OpenAI SDK's stream helper and plain create(stream=True), against plain litellm."""
    import openai

    e2e = EndToEnd(up)
    client = openai.OpenAI(base_url=up.base_url, api_key="sk-bench", max_retries=0)

    def request() -> dict[str, Any]:
        return {"model": "gpt-4o-mini", "messages": up.messages(), "tools": TOOLS}

    def helper() -> tuple[Timer, int]:
        with Timer() as t, client.chat.completions.stream(**request()) as stream:
            n = sum(1 for _ in stream)
        return t, n

    def create() -> tuple[Timer, int]:
        with Timer() as t:
            n = sum(1 for _ in client.chat.completions.create(stream=True, **request()))
        return t, n

    rows: list[Row] = []
    for label, body, repeats in shapes:
        up.body = body
        events = count_events(body)
        helper()
        for name, fn in (("stream() helper", helper), ("create(stream=True)", create)):
            base: list[Timer] = []
            other: list[Timer] = []
            for _ in range(repeats):
                base.append(e2e.plain_sync()[0])
                other.append(fn()[0])
            rows.append(
                pair_rows(
                    "reference", f"OpenAI SDK {name}, sync {label}", base, other, events, None
                )
            )
            log(rows[-1])
    return rows


# ---- time to first text ----------------------------------------------------------------------
def ttft_section(up: Upstream, body: bytes, repeats: int) -> list[Row]:
    e2e = EndToEnd(up)
    up.body = body

    def first_sync(gated: bool) -> float:
        started = time.perf_counter()
        if gated:
            stream = e2e.gate.completion(**up.kwargs())
        else:
            client = HTTPHandler(client=httpx.Client(transport=e2e.sync_transport))
            stream = litellm.completion(**up.kwargs(client=client))
        first = None
        for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        assert first is not None
        return first * 1000

    async def first_async(gated: bool) -> float:
        if e2e.async_transport is None:
            e2e.async_transport = httpx.AsyncHTTPTransport()
        started = time.perf_counter()
        if gated:
            stream = await e2e.gate.acompletion(**up.kwargs())
        else:
            client = AsyncHTTPHandler(transport=Lent(e2e.async_transport))
            stream = await litellm.acompletion(**up.kwargs(client=client))
        first = None
        async for chunk in stream:
            if first is None and chunk.choices and chunk.choices[0].delta.content:
                first = time.perf_counter() - started
        assert first is not None
        return first * 1000

    def row(mode: str, plain: list[float], gated: list[float]) -> Row:
        diffs = [g - p for p, g in zip(plain, gated, strict=True)]
        spread = statistics.median([abs(a - b) for a, b in pairwise(plain)] or [0.0])
        out: Row = {
            "section": "ttft",
            "name": f"{mode} first text chunk",
            "plain_ms": summary(plain),
            "gated_ms": summary(gated),
            "diff_ms": summary(diffs),
            "noise_ms": spread,
        }
        # No measurable delay: the gated stream is not later than the plain one by more than
        # the plain runs differ from each other.
        out["met"] = statistics.median(diffs) <= spread
        return out

    first_sync(False)
    first_sync(True)
    plain = []
    gated = []
    for i in range(repeats):
        if i % 2:
            gated.append(first_sync(True))
            plain.append(first_sync(False))
        else:
            plain.append(first_sync(False))
            gated.append(first_sync(True))
    rows = [row("sync", plain, gated)]
    log(rows[-1])

    async def run() -> tuple[list[float], list[float]]:
        await first_async(False)
        await first_async(True)
        p: list[float] = []
        g: list[float] = []
        for i in range(repeats):
            if i % 2:
                g.append(await first_async(True))
                p.append(await first_async(False))
            else:
                p.append(await first_async(False))
                g.append(await first_async(True))
        return p, g

    rows.append(row("async", *asyncio.run(run())))
    log(rows[-1])
    return rows
