"""Memory freed at stream end: real proxies with the garbage collector off
(``python -m bench --only proxysoak``).

Two real ``litellm --config`` proxies (the environment :func:`~bench.proxyload.proxy_python`
names), each started by a small launcher that calls ``gc.disable()`` before it runs
litellm's proxy command, so nothing held in a reference cycle is ever freed: ``noop`` (a
``post_call`` guardrail that passes every chunk on) and ``gate``
(:class:`~litellm_toolgate.ToolGateGuardrail`), in front of one loopback fake upstream.
Each serves the same streams, text and tool calls in turn, a few at once, the two proxies
taking turns in blocks so that load from elsewhere falls on both.

Two figures per proxy:

* **the cycles a collection would find**, counted by the launcher on ``SIGUSR1``: it runs
  one collection with ``gc.DEBUG_SAVEALL``, counts what was unreachable by type (and, for
  functions, generators, coroutines and frames, by the code they run), then frees it. A
  census after the warm-up starts from nothing; the one at the end counts what the soak's
  streams left in cycles, and which of the gate's objects are still reachable after it (an
  unfinished async generator among the garbage is resurrected by asyncio's finalizer hook,
  with everything it holds, to be closed on the loop). The gate's own objects (types and
  code of ``litellm_toolgate``) among them are the figure that says whether the gate's
  stream path makes cycles;
  litellm's own cycles are counted beside them (the no-op proxy leaves the same ones).
* **resident memory** (``VmRSS`` from ``/proc``) read every tenth of the streams after the
  warm-up; growth is the least-squares slope over those reads, in bytes per stream. With
  the collector off, litellm's own cycles (its stream wrapper, its logging object) make a
  proxy grow whatever its guardrails do, so the gate is judged against the no-op proxy of
  the same run: its slope may exceed the no-op's by at most :data:`SLOPE_ALLOWANCE`.

Beside each read, a diagnostic the pass line does not use: what the allocators hand out
(pymalloc's allocated blocks from ``sys._debugmallocstats``, malloc's chunks in use from
glibc's ``mallinfo2``), asked of the launcher on ``SIGUSR2``, and what they keep resident
but free. The warm-up's census frees its cycles, yet only whole pymalloc arenas and
malloc's top go back to the system: the rest stays resident, and the first block fills it
before the resident size grows. So the first block's resident growth falls short of the
later blocks' by an amount that moves from run to run and proxy to proxy (tens of MiB),
while what the allocators hand out grows the same in every block.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass, field

import httpx

from bench.bodies import text_body, tool_body
from bench.common import Row, Upstream
from bench.proxyload import Outcome, ProxyProcess, _one, ask, proxies, proxy_python
from bench.report import log

KINDS = ("noop", "gate")
GATE_MODULE = "litellm_toolgate"
# What the gate's proxy may grow per stream beyond the no-op proxy's growth: far below what
# one stream's objects held for ever would cost (a stream's chunks, tap and attempt are
# tens of KiB), above what the allocator's settling moves a slope by.
SLOPE_ALLOWANCE = 1024.0

LAUNCHER = '''"""litellm's proxy command with the garbage collector off (bench/proxysoak.py)."""
import ctypes
import gc
import json
import os
import signal
import sys
import tempfile

gc.disable()


def _code_of(obj):
    for name in ("__code__", "gi_code", "cr_code", "ag_code", "f_code"):
        code = getattr(obj, name, None)
        if code is not None:
            return code
    func = getattr(obj, "__func__", None)
    return getattr(func, "__code__", None)


def _key(obj):
    kind = type(obj)
    key = f"{kind.__module__}.{kind.__qualname__}"
    code = _code_of(obj)
    if code is not None:
        key += f" {code.co_filename}:{code.co_qualname}"
    return key


def _on_own_cycle(start, garbage, limit=5000):
    """Whether ``start`` is on a cycle that passes through none of litellm's objects (a
    cycle the gate made; one through litellm's objects is litellm's to break)."""
    seen = set()
    todo = list(gc.get_referents(start))
    while todo and len(seen) < limit:
        obj = todo.pop()
        if obj is start:
            return True
        if id(obj) in seen or id(obj) not in garbage:
            continue
        seen.add(id(obj))
        if type(obj).__module__.startswith("litellm."):
            continue
        todo.extend(gc.get_referents(obj))
    return False


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]


def _heap_figures():
    """What the allocators hand out (pymalloc's allocated blocks, malloc's chunks in use from
    glibc's ``mallinfo2``), the free memory each keeps, and the resident size."""
    figures = {}
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                figures["rss"] = int(line.split()[1]) * 1024
    with tempfile.TemporaryFile("w+") as text:  # _debugmallocstats writes to C's stderr
        saved = os.dup(2)
        os.dup2(text.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        text.seek(0)
        for line in text:
            name, sep, value = line.partition("=")
            if not sep:
                continue
            name, value = name.strip("# ").strip(), value.strip().replace(",", "")
            if not value.isdigit():
                continue
            value = int(value)
            if name == "bytes in allocated blocks":
                figures.setdefault("pymalloc_allocated", value)
            elif name == "bytes in available blocks":
                figures.setdefault("pymalloc_free_blocks", value)
            elif name.endswith("unused pools * 16384 bytes"):
                figures.setdefault("pymalloc_free_pools", value)
            elif name == "arenas allocated current":
                figures.setdefault("pymalloc_arenas", value)
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.mallinfo2.restype = _MallInfo2
        info = libc.mallinfo2()
        figures["malloc_in_use"] = info.uordblks + info.hblkhd
        figures["malloc_free"] = info.fordblks
    except (OSError, AttributeError):  # no glibc, or one older than 2.33
        pass
    return figures


def _heap(signum, frame):
    """Write :func:`_heap_figures` for the bench."""
    figures = _heap_figures()
    path = os.environ["TOOLGATE_SOAK_CENSUS"] + ".heap"
    with open(path + ".part", "w") as out:
        json.dump(figures, out)
    os.replace(path + ".part", path)


def _count():
    """Count what one collection finds unreachable, by type or code (and the gate's objects
    on a cycle of the gate's own, ``cycle:`` keys); then free it. The allocators' figures
    before it collects: ``heap:`` keys."""
    counts = {"heap: " + name: value for name, value in _heap_figures().items()}
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        garbage = {id(obj) for obj in gc.garbage}
        size = 0
        for obj in gc.garbage:
            key = _key(obj)
            counts[key] = counts.get(key, 0) + 1
            size += sys.getsizeof(obj)
            if "litellm_toolgate" in key and _on_own_cycle(obj, garbage):
                counts["cycle: " + key] = counts.get("cycle: " + key, 0) + 1
        counts["bytes:"] = size
        for obj in gc.get_objects():  # the gate's objects still alive (reachable)
            module = getattr(type(obj), "__module__", None)
            if isinstance(module, str) and module.startswith("litellm_toolgate"):
                key = "live: " + _key(obj)
                counts[key] = counts.get(key, 0) + 1
    finally:
        gc.garbage.clear()
        gc.set_debug(0)
    gc.collect()
    return counts


def _census(signum, frame):
    """Write :func:`_count`'s census once its own temporaries (the set of the garbage's ids,
    a million ints and more after a warm-up) are freed: the bench reads the resident size as
    soon as the file is there."""
    counts = _count()
    path = os.environ["TOOLGATE_SOAK_CENSUS"]
    with open(path + ".part", "w") as out:
        json.dump(counts, out)
    os.replace(path + ".part", path)


signal.signal(signal.SIGUSR1, _census)
signal.signal(signal.SIGUSR2, _heap)

from litellm.proxy.proxy_cli import run_server  # noqa: E402

sys.argv[0] = "litellm"
run_server()
'''


@dataclass
class Soak:
    """One proxy's figures."""

    rss: list[tuple[int, int]] = field(default_factory=list)  # (streams served, VmRSS)
    # What the allocators hold at each read (:func:`heap`), and before the warm-up's census.
    heap: list[dict[str, int]] = field(default_factory=list)
    before_census: dict[str, int] = field(default_factory=dict)
    garbage: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    cpu_seconds: float = 0.0

    def slope(self) -> float:
        """Least-squares growth of the resident size, bytes per stream."""
        xs = [float(x) for x, _ in self.rss]
        ys = [float(y) for _, y in self.rss]
        return float(statistics.linear_regression(xs, ys).slope) if len(xs) > 1 else 0.0

    def held(self) -> list[int]:
        """Bytes the allocators hand out at each read (pymalloc's blocks, malloc's chunks),
        whatever free memory they keep resident."""
        return [h.get("pymalloc_allocated", 0) + h.get("malloc_in_use", 0) for h in self.heap]

    def held_slope(self) -> float:
        """Least-squares growth of :meth:`held`, bytes per stream."""
        xs = [float(x) for x, _ in self.rss]
        ys = [float(y) for y in self.held()]
        if len(xs) != len(ys) or len(xs) < 2:
            return 0.0
        return float(statistics.linear_regression(xs, ys).slope)

    def growth(self) -> int:
        """Resident size at the last read less at the first (after the warm-up)."""
        return self.rss[-1][1] - self.rss[0][1] if self.rss else 0

    def by_kind(self) -> dict[str, int]:
        """What a collection found unreachable (the cycles and what hangs from them), by
        type or code."""
        return {
            k: n
            for k, n in self.garbage.items()
            if k != "bytes:" and not k.startswith(("cycle: ", "live: ", "heap: "))
        }

    def gates_live(self) -> dict[str, int]:
        """The gate's objects still reachable at the census, by type."""
        return {k[6:]: n for k, n in self.garbage.items() if k.startswith("live: ")}

    def garbage_objects(self) -> int:
        return sum(self.by_kind().values())

    def garbage_bytes(self) -> int:
        """Their own sizes (``sys.getsizeof``; the strings they hold are not counted)."""
        return self.garbage.get("bytes:", 0)

    def gates_own(self) -> dict[str, int]:
        """The gate's objects among the garbage: its types, or code of its modules (also
        those that only hang from litellm's own cycles)."""
        return {k: n for k, n in self.by_kind().items() if GATE_MODULE in k}

    def gates_cycles(self) -> dict[str, int]:
        """The gate's objects on a cycle that passes through no object of litellm's."""
        return {k[7:]: n for k, n in self.garbage.items() if k.startswith("cycle: ")}


def soak_proxies(upstream: Upstream) -> AbstractContextManager[dict[str, ProxyProcess]]:
    """The no-op and gate proxies, each started with the collector off."""
    return proxies(
        upstream,
        KINDS,
        launcher=LAUNCHER,
        out_variable="TOOLGATE_SOAK_CENSUS",
        out_name="census.json",
    )


def census(proxy: ProxyProcess, timeout: float = 120.0) -> dict[str, int]:
    """Ask the proxy's launcher for a census of what a collection finds; wait for it."""
    return ask(proxy, signal.SIGUSR1, "census.json", "census", timeout=timeout)


def _resident_free(figures: dict[str, int]) -> int:
    """Free memory the allocators keep resident: what the next streams fill before the
    resident size grows."""
    names = ("pymalloc_free_blocks", "pymalloc_free_pools", "malloc_free")
    return sum(figures.get(name, 0) for name in names)


def heap(proxy: ProxyProcess, timeout: float = 60.0) -> dict[str, int]:
    """Ask the proxy's launcher what its allocators hand out and keep free, and its VmRSS."""
    return ask(
        proxy, signal.SIGUSR2, "census.json.heap", "heap figures", timeout=timeout, poll=0.05
    )


async def _streams(
    proxy: ProxyProcess, names: list[tuple[str, bool]], count: int, concurrency: int
) -> list[Outcome]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    outcomes: list[Outcome] = []
    queue = list(range(count))
    async with httpx.AsyncClient(limits=limits, timeout=600, trust_env=False) as client:

        async def worker() -> None:
            while queue:
                turn = queue.pop()
                name, call = names[turn % len(names)]
                outcomes.append(await _one(client, proxy, name, call))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


def run_soak(
    upstream: Upstream,
    streams: int,
    *,
    concurrency: int = 8,
    samples: int = 10,
    warm: int | None = None,
) -> dict[str, Soak]:
    """``streams`` streams through each proxy (after a warm-up of ``warm``, by default a
    tenth of them and at least 200), text and tool calls in turn; each proxy's figures."""
    names = []
    for body, call in ((text_body(40), False), (tool_body(24)[0], True)):
        upstream.body = body
        names.append((upstream.name, call))
    warm = max(200, streams // 10) if warm is None else warm
    block = max(1, streams // samples)
    results = {kind: Soak() for kind in KINDS}
    with soak_proxies(upstream) as running:
        for kind, proxy in running.items():
            done = asyncio.run(_streams(proxy, names, warm, concurrency))
            results[kind].errors += [o.error for o in done if o.error is not None]
            # What the warm-up left: collected, so the soak starts from nothing (the census
            # reads the allocators' figures before it collects).
            left = census(proxy)
            results[kind].before_census = {
                name[6:]: value for name, value in left.items() if name.startswith("heap: ")
            }
            results[kind].rss.append((0, proxy.status("VmRSS")))
            results[kind].heap.append(heap(proxy))
        served = 0
        while served < streams:
            count = min(block, streams - served)
            for kind, proxy in running.items():
                cpu = proxy.cpu_seconds()
                done = asyncio.run(_streams(proxy, names, count, concurrency))
                results[kind].cpu_seconds += proxy.cpu_seconds() - cpu
                results[kind].errors += [o.error for o in done if o.error is not None]
                results[kind].rss.append((served + count, proxy.status("VmRSS")))
                results[kind].heap.append(heap(proxy))
            served += count
            print(
                f"  proxysoak: {served} streams; "
                + ", ".join(f"{k} {r.rss[-1][1] / 2**20:.1f} MiB" for k, r in results.items())
                + f"; load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
                flush=True,
            )
        for kind, proxy in running.items():
            results[kind].garbage = census(proxy)
    return results


def _litellm_version() -> str:
    import subprocess

    return subprocess.run(
        [str(proxy_python()), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def proxysoak_section(upstream: Upstream, streams: int, concurrency: int = 8) -> list[Row]:
    """Row ``proxy soak, gc off``: the two proxies' growth and what a collection finds."""
    if not proxy_python().with_name("litellm").exists():
        return [
            {
                "section": "proxysoak",
                "name": "proxy soak, gc off",
                "error": f"no litellm proxy at {proxy_python().with_name('litellm')}",
            }
        ]
    started = time.perf_counter()
    results = run_soak(upstream, streams, concurrency=concurrency)
    per: dict[str, dict[str, object]] = {}
    for kind, soak in results.items():
        top = sorted(soak.by_kind().items(), key=lambda item: -item[1])[:5]
        per[kind] = {
            "slope_bytes_per_stream": soak.slope(),
            "growth_mib": soak.growth() / 2**20,
            "rss_mib": [round(rss / 2**20, 1) for _, rss in soak.rss],
            "garbage_objects": soak.garbage_objects(),
            "garbage_per_stream": soak.garbage_objects() / streams,
            "garbage_bytes_per_stream": soak.garbage_bytes() / streams,
            "garbage_top": top,
            "gate_objects_in_garbage": soak.gates_own(),
            "gate_cycles": soak.gates_cycles(),
            # The gate's objects a collection left reachable: also those an unfinished
            # async generator among the garbage keeps (asyncio's finalizer hook resurrects
            # it to close it on the loop).
            "gate_objects_alive": soak.gates_live(),
            # Diagnostic, not judged: the census's collection at the end of the warm-up
            # frees the warm-up's cycles, but the allocators give back only whole pymalloc
            # arenas and malloc's top; what they keep resident and free, the first block
            # fills before the resident size grows, so the first block's resident growth
            # is short of the others' by about that much, and by more or less from run to
            # run. What the allocators hand out (``held``) has no such step.
            "rss_before_census_mib": soak.before_census.get("rss", 0) / 2**20,
            "held_before_census_mib": (
                soak.before_census.get("pymalloc_allocated", 0)
                + soak.before_census.get("malloc_in_use", 0)
            )
            / 2**20,
            "resident_free_after_census_mib": _resident_free(soak.heap[0]) / 2**20
            if soak.heap
            else 0.0,
            "held_mib": [round(held / 2**20, 1) for held in soak.held()],
            "held_slope_bytes_per_stream": soak.held_slope(),
            "cpu_ms_per_stream": soak.cpu_seconds / streams * 1000,
            "errors": len(soak.errors),
        }
    extra = results["gate"].slope() - results["noop"].slope()
    row: Row = {
        "section": "proxysoak",
        "name": f"proxy soak, gc off, {streams} streams",
        "streams": streams,
        "concurrency": concurrency,
        "proxies": per,
        "gate_extra_slope": extra,
        "slope_allowance": SLOPE_ALLOWANCE,
        "met": extra <= SLOPE_ALLOWANCE and not per["gate"]["gate_cycles"],
        "proxy_litellm": _litellm_version(),
        "seconds": time.perf_counter() - started,
        "load_average": round(os.getloadavg()[0], 1),
        "measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    log(row)
    return [row]


__all__ = ["KINDS", "LAUNCHER", "Soak", "census", "heap", "proxysoak_section", "run_soak"]
