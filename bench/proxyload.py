"""What the gate costs a real LiteLLM proxy under load (``python -m bench --only proxyload``).

Three proxies, each a real ``litellm --config`` process
from the environment whose ``[proxy]`` extra installs (``.venv-litellm-1.108.7``, or the
interpreter ``TOOLGATE_BENCH_PROXY_PYTHON`` names), all in front of one loopback fake
upstream (``bench/serve.py``, a process of its own):

* ``plain``: no guardrail at all;
* ``noop``: a ``CustomGuardrail`` whose streaming iterator hook passes every chunk through,
  registered as a ``post_call`` guardrail like the gate (what litellm's per-chunk machinery
  costs by itself, switched on by any registered guardrail);
* ``gate``: :class:`~litellm_toolgate.ToolGateGuardrail` with the bench's tools, no policy.

Each cell is a body (text, a 2 KB call, a 64 KB call) at a concurrency (1, 16, 64 streams
at once); the client is ``httpx`` in this process, reading the raw SSE. Every round starts
three fresh proxies and warms them alike, then runs every cell on all three back to back,
the proxies' order rotating from cell to cell, so a burst of load from elsewhere on the
machine hits the three alike; the ratios against the plain proxy are per round, then their
median is reported. (``--cell``, ``--rounds`` and ``--requests-per-stream`` of
``python -m bench`` run chosen cells only.)

Per cell and proxy: the proxy process's CPU per request (user + system, from
``/proc/<pid>/stat``, clock ticks), throughput (requests per second of the cell's wall
time), the time to the first content (text, or a tool-call fragment) and to the last byte,
p50 and p99 over every request of every round, and peak resident memory. For memory the
proxy's resident size is first left to settle (the last cell's memory given back), then
``VmHWM`` is reset to it (``/proc/<pid>/clear_refs``, checked: the bench stops if the peak
did not reset); the cell's *rise* is ``VmHWM`` after the cell less that resident size.
The resident size read every 0.2 s during the cell is kept beside it as a cross-check.
The memory target is judged on the 64 KB, 64-stream cell: the gated proxy's rise may exceed
the plain proxy's (same round, fresh proxies) by at most 2.5 x the bytes withheld at once
plus a fixed allowance per stream, on the median over rounds of the per-round differences.
On a shared machine every figure moves with the other work on it; the ratios of one round
are only as steady as the load was. So the text rows also carry a figure that does not move
with the load (``calls``): the Python-level calls the no-op and gate proxies' event loops
make per request and per chunk, counted in the proxy processes after the timed rounds
(:mod:`bench.proxycalls`), the gate's against the no-op's.

Two things steady the timed figures. On a machine with two CPUs or more, every proxy runs
on a CPU of its own (the last of this process's), and this process and the upstream on the
others: the proxy under load does not share a CPU with the client reading it or the server
feeding it (only one proxy is under load at a time). And each proxy is started by a
launcher (:data:`GC_LAUNCHER`) that times the garbage collector's full collections: each
stops a proxy for 0.5-0.9 s of CPU, one every 70 or so text requests, wherever an
allocation triggers it, so one more or one fewer in a proxy's share of a round moves its
CPU per request by several per cent. A text row gives each proxy's full collections by
round, so a round's figure that carries one more than the other proxy's can be told.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from bench.bodies import TOOLS, file_arguments, text_body, tool_body
from bench.common import Row, Upstream, summary
from bench.report import log

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("plain", "noop", "gate")
BODIES = ("text", "2 KB call", "64 KB call")
READY_TIMEOUT = 240.0
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")
# A fixed allowance per withheld stream in the memory target: the attempt, its ledger, the
# tap and the carrier's bookkeeping, litellm's chunk objects held with the call.
PER_STREAM_ALLOWANCE = 64 * 1024
MEMORY_FACTOR = 2.5
# Bytes of a call's arguments per event on the wire (a few tokens' worth; --quick: more).
FRAGMENT = 32
# Text cells: the gate's CPU per request against the no-op guardrail's, same run (issue 42).
NOOP_BUDGET = 1.03
# A text cell's requests at least (the CPU clock ticks every 10 ms; a request costs the
# proxy tens of ms), run in this many slices the three proxies take in turn.
TEXT_MIN_REQUESTS = 96
TEXT_EVENTS = 200
TEXT_SLICES = 4
# Text cells: requests per body and proxy in the call count (bench/proxycalls.py), at least.
CALL_REQUESTS = 32

NOOP_MODULE = '''"""A post_call guardrail that does nothing: the guardrail machinery alone."""
from litellm.integrations.custom_guardrail import CustomGuardrail


class NoopGuardrail(CustomGuardrail):
    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict, response, request_data
    ):
        async for chunk in response:
            yield chunk
'''


GC_LAUNCHER = '''"""litellm's proxy command, its full collections timed (bench/proxyload.py).

A full (oldest-generation) collection stops a proxy for hundreds of milliseconds, a few
times a round, wherever an allocation triggers it: each is timed (CPU time of the thread it
ran on), and SIGUSR2 writes their number and CPU seconds so far to TOOLGATE_GC_OUT.
"""
import gc
import json
import os
import signal
import sys
import time

_full = {"collections": 0, "cpu_s": 0.0}
_started = [0.0]


def _timed(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        _started[0] = time.thread_time()
        return
    _full["collections"] += 1
    _full["cpu_s"] += time.thread_time() - _started[0]


def _answer(signum, frame):
    path = os.environ["TOOLGATE_GC_OUT"]
    with open(path + ".part", "w") as out:
        json.dump(_full, out)
    os.replace(path + ".part", path)


gc.callbacks.append(_timed)
signal.signal(signal.SIGUSR2, _answer)

from litellm.proxy.proxy_cli import run_server  # noqa: E402

sys.argv[0] = "litellm"
run_server()
'''


def _config(kind: str) -> dict[str, Any]:
    config: dict[str, Any] = {
        "model_list": [
            {
                "model_name": "bench",
                "litellm_params": {
                    "model": "cometapi/gpt-4o-mini",
                    "api_base": "os.environ/TOOLGATE_UPSTREAM",
                    "api_key": "sk-loopback-fake-upstream",
                },
            }
        ],
        "litellm_settings": {"num_retries": 0},
    }
    params: dict[str, Any] = {"mode": "post_call", "default_on": True}
    if kind == "noop":
        params["guardrail"] = "noop_guardrail.NoopGuardrail"
    elif kind == "gate":
        params["guardrail"] = "litellm_toolgate.ToolGateGuardrail"
        params["tools"] = TOOLS
        params["limits"] = {"max_argument_bytes": 1_048_576}
    if kind != "plain":
        config["guardrails"] = [{"guardrail_name": f"bench-{kind}", "litellm_params": params}]
    return config


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def proxy_python() -> Path:
    named = os.environ.get("TOOLGATE_BENCH_PROXY_PYTHON")
    return Path(named) if named else ROOT / ".venv-litellm-1.108.7" / "bin" / "python"


@dataclass
class ProxyProcess:
    kind: str
    folder: Path
    upstream: str
    port: int = 0
    key: str = ""
    process: subprocess.Popen[bytes] | None = None
    idle_rss: int = 0
    # A script run in place of the ``litellm`` command, with the same arguments (it runs
    # litellm's proxy command in its own process: bench/proxysoak.py's, with the gc off).
    launcher: Path | None = None
    # The CPU the proxy runs on (all its threads), or None: any.
    cpu: int | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        import yaml

        (self.folder / "noop_guardrail.py").write_text(NOOP_MODULE)
        config = self.folder / f"proxy_{self.kind}.yaml"
        config.write_text(yaml.safe_dump(_config(self.kind)))
        self.port = _free_port()
        self.key = "sk-" + secrets.token_hex(24)
        env = {
            **os.environ,
            "LITELLM_MASTER_KEY": self.key,
            "TOOLGATE_UPSTREAM": self.upstream,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "NO_PROXY": "127.0.0.1,localhost",
            "PYTHONPATH": os.pathsep.join([str(ROOT), str(self.folder)]),
        }
        binary = proxy_python().with_name("litellm")
        command = [str(binary)]
        if self.launcher is not None:
            command = [str(proxy_python()), str(self.launcher)]
        command += ["--config", str(config), "--host", "127.0.0.1"]
        command += ["--port", str(self.port)]
        with (self.folder / f"proxy_{self.kind}.log").open("wb") as out:
            self.process = subprocess.Popen(
                command,
                cwd=self.folder,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        if self.cpu is not None:
            # Before the interpreter has started a thread: every thread inherits it.
            os.sched_setaffinity(self.process.pid, {self.cpu})

    def wait_ready(self, deadline: float) -> None:
        assert self.process is not None
        while True:
            if self.process.poll() is not None:
                tail = (self.folder / f"proxy_{self.kind}.log").read_text(errors="replace")
                raise RuntimeError(f"the {self.kind} proxy exited at start-up: {tail[-600:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.base_url}/health/liveliness", timeout=5).is_success:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {self.kind} proxy was not ready in {READY_TIMEOUT} s")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.process is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def cpu_seconds(self) -> float:
        """User + system CPU time of the proxy process (all its threads)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / TICK

    def full_collections(self) -> tuple[int, float]:
        """The full collections so far and their CPU seconds (a proxy started by
        :data:`GC_LAUNCHER`)."""
        figures: dict[str, Any] = ask(
            self, signal.SIGUSR2, "gc.json", "collections", timeout=60, poll=0.005
        )
        return int(figures["collections"]), float(figures["cpu_s"])

    def status(self, name: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {name} line")

    def settle(self, *, within: int = 2**20, timeout: float = 15.0) -> int:
        """Wait until the resident size stops moving (the last cell's memory given back or
        kept), at most ``timeout`` seconds; the resident size then."""
        deadline = time.monotonic() + timeout
        last = self.status("VmRSS")
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = self.status("VmRSS")
            if abs(now - last) <= within:
                return now
            last = now
        return last

    def reset_peak(self) -> int:
        """Reset VmHWM to the current resident size (Linux: ``echo 5 > clear_refs``) and
        check that it did; the resident size it was reset to (the cell's baseline)."""
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        rss, hwm = self.status("VmRSS"), self.status("VmHWM")
        # An idle proxy's resident size moves by a few pages between two reads; a peak
        # left from an earlier cell is tens of MiB over it.
        if hwm - rss > 2**20:
            raise RuntimeError(
                f"VmHWM of the {self.kind} proxy did not reset: {hwm >> 20} MiB after "
                f"clear_refs, resident {rss >> 20} MiB"
            )
        return rss


def ask(
    proxy: ProxyProcess, signum: int, name: str, what: str, *, timeout: float, poll: float = 0.1
) -> dict[str, int]:
    """Signal a launcher-run proxy and wait for the JSON figures it writes to ``name`` in its
    folder (the file is removed first: only the answer to this signal counts)."""
    path = proxy.folder / name
    path.unlink(missing_ok=True)
    os.kill(proxy.pid, signum)
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} from the {proxy.kind} proxy in {timeout} s")
        time.sleep(poll)
    figures: dict[str, int] = json.loads(path.read_text())
    return figures


@contextlib.contextmanager
def proxies(
    upstream: Upstream,
    kinds: tuple[str, ...] = KINDS,
    *,
    launcher: str | None = None,
    out_variable: str | None = None,
    out_name: str = "out.json",
    cpu: int | None = None,
) -> Iterator[dict[str, ProxyProcess]]:
    """The proxies of ``kinds``, started at once (start-up is slow) and ready. ``launcher``:
    the text of a script to start each with instead of litellm's command; ``out_variable``:
    the environment variable that tells each its own file (``out_name`` in its folder);
    ``cpu``: the one CPU they all run on."""
    with tempfile.TemporaryDirectory(prefix="toolgate-proxies-") as folder:
        script = None
        if launcher is not None:
            script = Path(folder) / "launcher.py"
            script.write_text(launcher)
        running: dict[str, ProxyProcess] = {}
        saved = os.environ.get(out_variable) if out_variable else None
        try:
            for kind in kinds:
                sub = Path(folder) / kind
                sub.mkdir()
                if out_variable:
                    os.environ[out_variable] = str(sub / out_name)
                proxy = running[kind] = ProxyProcess(kind, sub, upstream.base_url, cpu=cpu)
                if script is not None:
                    proxy.launcher = script
                proxy.start()
            deadline = time.monotonic() + READY_TIMEOUT
            for proxy in running.values():
                proxy.wait_ready(deadline)
            yield running
        finally:
            if out_variable and saved is None:
                os.environ.pop(out_variable, None)
            elif out_variable and saved is not None:
                os.environ[out_variable] = saved
            for proxy in running.values():
                proxy.stop()


_CONTENT = re.compile(rb'"content":\s*"[^"]|"tool_calls":\s*\[')


@dataclass
class Outcome:
    first_ms: float | None = None
    last_ms: float = 0.0
    error: str | None = None


async def _one(client: httpx.AsyncClient, proxy: ProxyProcess, name: str, call: bool) -> Outcome:
    body = {
        "model": "bench",
        "messages": [{"role": "user", "content": name}],
        "stream": True,
    }
    if call:
        body["tools"] = TOOLS
    out = Outcome()
    started = time.perf_counter()
    tail = b""
    try:
        async with client.stream(
            "POST",
            f"{proxy.base_url}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {proxy.key}"},
        ) as response:
            if response.status_code != 200:
                await response.aread()
                out.error = f"HTTP {response.status_code}"
                return out
            async for piece in response.aiter_raw():
                if out.first_ms is None and _CONTENT.search(tail[-24:] + piece):
                    out.first_ms = (time.perf_counter() - started) * 1000
                tail = piece if len(piece) >= 64 else (tail + piece)[-64:]
    except httpx.HTTPError as exc:
        out.error = type(exc).__name__
        return out
    out.last_ms = (time.perf_counter() - started) * 1000
    if b"data: [DONE]" not in tail or b'"error"' in tail:
        out.error = "stream did not end with [DONE]"
    elif out.first_ms is None:
        out.error = "no content"
    return out


@dataclass
class Cell:
    cpu_per_request_ms: list[float] = field(default_factory=list)
    throughput: list[float] = field(default_factory=list)
    peak_over_idle: list[int] = field(default_factory=list)
    rise: list[int] = field(default_factory=list)
    sampled_rise: list[int] = field(default_factory=list)
    load: list[float] = field(default_factory=list)
    first_ms: list[float] = field(default_factory=list)
    last_ms: list[float] = field(default_factory=list)
    errors: int = 0
    # Full collections in the CPU window, and their CPU (ms), per run or round.
    full_collections: list[int] = field(default_factory=list)
    full_collection_ms: list[float] = field(default_factory=list)
    requests: list[int] = field(default_factory=list)


async def _cell(
    proxy: ProxyProcess, name: str, call: bool, *, concurrency: int, requests: int, out: Cell
) -> None:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=1800, trust_env=False) as client:
        before = proxy.reset_peak()
        queue = list(range(requests))
        outcomes: list[Outcome] = []

        async def worker() -> None:
            while queue:
                queue.pop()
                outcomes.append(await _one(client, proxy, name, call))

        sampled = before
        done = asyncio.Event()

        async def sample() -> None:
            # A cross-check of VmHWM: the resident size read every 0.2 s (it misses the
            # peaks between reads, so it reads at most what VmHWM does).
            nonlocal sampled
            while not done.is_set():
                sampled = max(sampled, proxy.status("VmRSS"))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(done.wait(), 0.2)

        sampler = asyncio.create_task(sample())
        # (The proxy answers the collections' figures outside its CPU window.)
        collected, collecting = proxy.full_collections()
        cpu = proxy.cpu_seconds()
        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
        cpu = proxy.cpu_seconds() - cpu
        done.set()
        await sampler
        after, spent = proxy.full_collections()
    out.full_collections.append(after - collected)
    out.full_collection_ms.append((spent - collecting) * 1000)
    out.requests.append(requests)
    out.cpu_per_request_ms.append(cpu / requests * 1000)
    out.throughput.append(requests / wall)
    peak = proxy.status("VmHWM")
    out.peak_over_idle.append(peak - proxy.idle_rss)
    out.rise.append(peak - before)
    out.sampled_rise.append(sampled - before)
    out.load.append(os.getloadavg()[0])
    for outcome in outcomes:
        if outcome.error is not None:
            out.errors += 1
            continue
        assert outcome.first_ms is not None
        out.first_ms.append(outcome.first_ms)
        out.last_ms.append(outcome.last_ms)


def _merge(cell: Cell, parts: list[tuple[Cell, int]]) -> None:
    """One round's figures of a cell from the slices it ran in (each a :class:`Cell` of one
    run and its number of requests): CPU per request and throughput over all the requests,
    the largest rise, every request's latencies."""
    total = sum(n for _, n in parts)
    cpu = sum(part.cpu_per_request_ms[0] * n for part, n in parts)
    wall = sum(n / part.throughput[0] for part, n in parts)
    cell.cpu_per_request_ms.append(cpu / total)
    cell.requests.append(total)
    cell.full_collections.append(sum(part.full_collections[0] for part, _ in parts))
    cell.full_collection_ms.append(sum(part.full_collection_ms[0] for part, _ in parts))
    cell.throughput.append(total / wall)
    cell.peak_over_idle.append(max(part.peak_over_idle[0] for part, _ in parts))
    cell.rise.append(max(part.rise[0] for part, _ in parts))
    cell.sampled_rise.append(max(part.sampled_rise[0] for part, _ in parts))
    cell.load.append(statistics.mean(part.load[0] for part, _ in parts))
    for part, _ in parts:
        cell.first_ms += part.first_ms
        cell.last_ms += part.last_ms
        cell.errors += part.errors


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def shapes(fragment: int) -> list[tuple[str, bytes, bool, int]]:
    """(label, body, whether it is a call, argument bytes withheld) per body; a call's
    arguments arrive ``fragment`` bytes to an event."""
    small = file_arguments(2_048)
    large = file_arguments(65_536)
    return [
        (BODIES[0], text_body(TEXT_EVENTS), False, 0),
        (BODIES[1], tool_body(len(small) // fragment + 5, arguments=small)[0], True, len(small)),
        (BODIES[2], tool_body(len(large) // fragment + 5, arguments=large)[0], True, len(large)),
    ]


def _rounds(  # noqa: PLR0917
    upstream: Upstream,
    bodies: list[tuple[str, str, bool, int]],
    plan: list[tuple[str, str, bool, int]],
    rounds: int,
    requests_per_stream: int,
    proxy_cpu: int | None,
    cells: dict[tuple[str, int, str], Cell],
    idle: dict[str, list[int]],
) -> None:
    """The timed rounds: each cell's figures of every proxy, per round, into ``cells``."""
    turn = 0
    for round_ in range(rounds):
        # Fresh proxies every round: each round's figures start from a process that has
        # served only the warm-up, not from the heap an earlier round left behind.
        with proxies(
            upstream,
            launcher=GC_LAUNCHER,
            out_variable="TOOLGATE_GC_OUT",
            out_name="gc.json",
            cpu=proxy_cpu,
        ) as running:

            async def warm(running: dict[str, ProxyProcess] = running) -> None:
                for proxy in running.values():
                    for _, name, call, _ in bodies:
                        await _cell(proxy, name, call, concurrency=4, requests=8, out=Cell())

            asyncio.run(warm())
            for kind, proxy in running.items():
                proxy.idle_rss = proxy.settle()
                idle[kind].append(proxy.idle_rss)
            for label, name, call, concurrency in plan:
                requests = max(concurrency, 1) * requests_per_stream
                slices = 1
                if not call:
                    # Text: the gate's cost is a few per cent of the proxy's, judged against
                    # the no-op proxy: enough requests that the CPU clock's ticks do not
                    # matter, in slices the proxies take in turn.
                    requests = max(requests, TEXT_MIN_REQUESTS)
                    slices = TEXT_SLICES
                parts: dict[str, list[tuple[Cell, int]]] = {kind: [] for kind in KINDS}
                for piece in range(slices):
                    share = requests // slices + (piece < requests % slices)
                    order = KINDS[turn % 3 :] + KINDS[: turn % 3]
                    turn += 1
                    for kind in order:
                        part = Cell()
                        running[kind].settle()
                        started = time.perf_counter()
                        asyncio.run(
                            _cell(
                                running[kind],
                                name,
                                call,
                                concurrency=concurrency,
                                requests=share,
                                out=part,
                            )
                        )
                        parts[kind].append((part, share))
                        print(
                            f"  proxyload round {round_ + 1}: {kind} {label} x{concurrency}"
                            f" ({piece + 1}/{slices}): "
                            f"{time.perf_counter() - started:.1f} s, rise "
                            f"{part.rise[-1] / 2**20:.1f} MiB (sampled "
                            f"{part.sampled_rise[-1] / 2**20:.1f}), "
                            f"load {os.getloadavg()[0]:.1f}",
                            file=sys.stderr,
                            flush=True,
                        )
                for kind in KINDS:
                    _merge(cells.setdefault((label, concurrency, kind), Cell()), parts[kind])


def proxyload_section(  # noqa: PLR0917
    upstream: Upstream,
    concurrencies: list[int],
    requests_per_stream: int,
    rounds: int,
    fragment: int = FRAGMENT,
    only: list[tuple[str, int]] | None = None,
) -> list[Row]:
    """Rows ``proxy under load``: one per body and concurrency, all three proxies in each
    (``only``: just these (body label, concurrency) cells)."""
    if not proxy_python().with_name("litellm").exists():
        return [
            {
                "section": "proxyload",
                "name": "proxy under load",
                "error": f"no litellm proxy at {proxy_python().with_name('litellm')}",
            }
        ]
    bodies = []
    for label, body, call, withheld in shapes(fragment):
        upstream.body = body
        bodies.append((label, upstream.name, call, withheld))
    plan = [
        (label, name, call, concurrency)
        for label, name, call, _ in bodies
        for concurrency in concurrencies
        if only is None or (label, concurrency) in only
    ]
    if not plan:
        raise ValueError(f"no proxy-load cell is named {only}")
    cells: dict[tuple[str, int, str], Cell] = {}
    idle: dict[str, list[int]] = {kind: [] for kind in KINDS}
    mine = os.sched_getaffinity(0)
    proxy_cpu = max(mine) if len(mine) > 1 else None
    if proxy_cpu is not None:
        # The proxy under load on a CPU of its own, the client and the upstream on the rest:
        # what a proxy does per request does not then depend on how the three shared a CPU.
        os.sched_setaffinity(0, mine - {proxy_cpu})
        upstream.pin(mine - {proxy_cpu})
    try:
        _rounds(upstream, bodies, plan, rounds, requests_per_stream, proxy_cpu, cells, idle)
    finally:
        os.sched_setaffinity(0, mine)
        upstream.pin(mine)
    counted = _count_text_calls(upstream, plan)
    version = subprocess.run(
        [str(proxy_python()), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    rows: list[Row] = []
    for label, _, _, withheld in bodies:
        for concurrency in concurrencies:
            if (label, concurrency, "plain") in cells:
                rows.append(_row(label, concurrency, withheld, fragment, cells, idle))
                if not withheld and concurrency in counted:
                    rows[-1]["calls"] = counted[concurrency]
                rows[-1]["proxy_litellm"] = version
                rows[-1]["proxy_cpu_own"] = proxy_cpu is not None
                rows[-1]["requests_per_stream"] = requests_per_stream
                rows[-1]["measured"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
                log(rows[-1])
    return rows


def _count_text_calls(
    upstream: Upstream, plan: list[tuple[str, str, bool, int]]
) -> dict[int, dict[str, Any]]:
    """The text cells' call counts (:mod:`bench.proxycalls`), on proxies of their own
    started after the timed rounds: each concurrency's figures."""
    concurrencies = sorted({concurrency for _, _, call, concurrency in plan if not call})
    if not concurrencies:
        return {}
    # (bench.proxycalls starts proxies of this module's kind: imported here, not above.)
    from bench.proxycalls import calls_figures, count_calls

    requests = max(CALL_REQUESTS, *(2 * c for c in concurrencies))
    started = time.perf_counter()
    counted = count_calls(upstream, concurrencies, requests)
    print(
        f"  proxyload: calls counted at {concurrencies} streams at once, {requests} requests "
        f"a body: {time.perf_counter() - started:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    return {concurrency: calls_figures(by_kind) for concurrency, by_kind in counted.items()}


def _row(  # noqa: PLR0917
    label: str,
    concurrency: int,
    withheld: int,
    fragment: int,
    cells: dict[tuple[str, int, str], Cell],
    idle: dict[str, list[int]],
) -> Row:
    per: dict[str, Any] = {}
    plain = cells[(label, concurrency, "plain")]
    for kind in KINDS:
        cell = cells[(label, concurrency, kind)]
        per[kind] = {
            "cpu_ms_per_request": summary(cell.cpu_per_request_ms),
            "requests_per_s": summary(cell.throughput),
            "first_ms": {
                "p50": _percentile(cell.first_ms, 0.5),
                "p99": _percentile(cell.first_ms, 0.99),
            },
            "last_ms": {
                "p50": _percentile(cell.last_ms, 0.5),
                "p99": _percentile(cell.last_ms, 0.99),
            },
            # Memory: the median over rounds (each round's figure from fresh proxies), and
            # every round's figure beside it.
            "rise_mib": statistics.median(cell.rise) / 2**20,
            "rise_mib_rounds": [r / 2**20 for r in cell.rise],
            "sampled_rise_mib_rounds": [r / 2**20 for r in cell.sampled_rise],
            "peak_over_idle_mib": statistics.median(cell.peak_over_idle) / 2**20,
            "idle_rss_mib": statistics.median(idle[kind]) / 2**20,
            "load_average": [round(x, 1) for x in cell.load],
            "errors": cell.errors,
        }
        if kind != "plain":
            per[kind]["cpu_ratio"] = summary(
                [
                    k / p
                    for k, p in zip(cell.cpu_per_request_ms, plain.cpu_per_request_ms, strict=True)
                ]
            )
            per[kind]["throughput_ratio"] = summary(
                [k / p for k, p in zip(cell.throughput, plain.throughput, strict=True)]
            )
    gate, noop = cells[(label, concurrency, "gate")], cells[(label, concurrency, "noop")]
    per["gate"]["cpu_vs_noop"] = summary(
        [g / n for g, n in zip(gate.cpu_per_request_ms, noop.cpu_per_request_ms, strict=True)]
    )
    row: Row = {
        "section": "proxyload",
        "name": f"{label}, {concurrency} at once",
        "concurrency": concurrency,
        "withheld_bytes": withheld * concurrency,
        "rounds": len(plain.throughput),
        "fragment_bytes": fragment,
        "proxies": per,
    }
    if concurrency >= 64:
        # The gate's rise over the plain proxy's, per round (the two ran in the same round,
        # from fresh proxies, one right after the other), then the median.
        extras = [(g - p) / 2**20 for g, p in zip(gate.rise, plain.rise, strict=True)]
        row["gate_extra_peak_mib_rounds"] = extras
        row["noop_extra_peak_mib_rounds"] = [
            (n - p) / 2**20 for n, p in zip(noop.rise, plain.rise, strict=True)
        ]
    if not withheld:
        # Text: what the gate adds to a guardrail's own cost (the no-op's), per request.
        for kind in KINDS:
            per[kind]["full_collections"] = _collections(cells[(label, concurrency, kind)])
        row["noop_budget_ratio"] = NOOP_BUDGET
        row["met"] = per["gate"]["cpu_vs_noop"]["median"] <= NOOP_BUDGET
    if withheld and concurrency >= 64:
        extra = statistics.median(row["gate_extra_peak_mib_rounds"])
        budget = MEMORY_FACTOR * withheld * concurrency + PER_STREAM_ALLOWANCE * concurrency
        row["gate_extra_peak_mib"] = extra
        row["memory_budget_mib"] = budget / 2**20
        row["met"] = extra <= budget / 2**20
    return row


def _collections(cell: Cell) -> dict[str, Any]:
    """A proxy's full collections in a cell's slices: how many in each round, their CPU per
    request over all rounds."""
    return {
        "rounds": list(cell.full_collections),
        "ms_per_request": sum(cell.full_collection_ms) / sum(cell.requests),
        "cpu_s": sum(cell.full_collection_ms) / 1000,
    }


def cell_order(row: Row) -> tuple[int, int]:
    """Where a proxy-load row stands in the table: by body, then concurrency (other rows: 0)."""
    body = str(row.get("name", "")).rpartition(", ")[0]
    if row.get("section") != "proxyload" or body not in BODIES:
        return (0, 0)
    return (BODIES.index(body), int(row["concurrency"]))


__all__ = ["cell_order", "proxyload_section"]
