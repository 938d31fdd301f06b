"""What the gate's proxy does per text chunk, counted rather than timed (the proxyload
section's text rows, ``calls`` figures).

The CPU figures of a text cell move by ±10% between rounds on a shared machine, more than
the few per cent the gate adds to a proxy's CPU per request. This measure does not move with
the load: the Python-level calls the proxy's event loop makes per request, counted by
``cProfile`` in the proxy process itself.

Two real ``litellm --config`` proxies (``noop`` and ``gate``, configured as in
:mod:`bench.proxyload`) are started by a launcher that runs litellm's proxy command with a
``SIGUSR1`` handler: the first signal starts a ``cProfile`` profiler on the main thread (the
thread uvicorn runs the event loop on, where every per-chunk hook runs), the second stops it
and writes each function's call count to a file. A call here is a Python function entered
or a generator or coroutine resumed (each ``await`` through a layer of coroutines resumes
every layer), and a call of a builtin (C) function; both are counted, the Python ones apart.

Each proxy serves the same text streams twice: the cell's body (``LONG`` events) and a
short one (``SHORT`` events), the same number of requests each, at the cell's concurrency.
Per request is the long body's count over its requests; per chunk is the slope between the
two bodies (what one more event of the body costs), so the per-request work (routing,
authentication, the pre-call hooks, the stream's start and end) is left out of it. The
gate's own calls (functions defined under ``litellm_toolgate``) are counted apart, with
the gate's busiest functions per chunk.

The count still varies a little with timing (how many events one socket read brings, how
often the loop polls, the proxy's background tasks), far less than time does; profiling
slows the proxies, so this runs on proxies of its own, after the timed rounds.
"""

from __future__ import annotations

import asyncio
import os
import signal
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import httpx

from bench.bodies import text_body
from bench.common import Upstream
from bench.proxyload import TEXT_EVENTS, Outcome, ProxyProcess, _one, ask, proxies

KINDS = ("noop", "gate")
LONG = TEXT_EVENTS
SHORT = 40
GATE_FILES = "litellm_toolgate"

LAUNCHER = '''"""litellm's proxy command, its main thread's calls counted on SIGUSR1.

(bench/proxycalls.py)
"""
import cProfile
import json
import os
import signal
import sys

_profile = None


def _toggle(signum, frame):
    """The first signal starts counting, the next writes the counts and stops."""
    global _profile
    if _profile is None:
        _profile = cProfile.Profile(builtins=True)
        _profile.enable()
        return
    profile, _profile = _profile, None
    profile.disable()
    profile.create_stats()
    counts = {}
    for (filename, line, name), (_, calls, _, _, _) in profile.stats.items():
        key = f"{filename}:{line}({name})"
        counts[key] = counts.get(key, 0) + calls
    path = os.environ["TOOLGATE_CALLS_OUT"]
    with open(path + ".part", "w") as out:
        json.dump(counts, out)
    os.replace(path + ".part", path)


signal.signal(signal.SIGUSR1, _toggle)

from litellm.proxy.proxy_cli import run_server  # noqa: E402

sys.argv[0] = "litellm"
run_server()
'''


def counting_proxies(upstream: Upstream) -> AbstractContextManager[dict[str, ProxyProcess]]:
    """The no-op and gate proxies, each started by the counting launcher."""
    return proxies(
        upstream, KINDS, launcher=LAUNCHER, out_variable="TOOLGATE_CALLS_OUT", out_name="calls.json"
    )


def _signal(proxy: ProxyProcess) -> None:
    os.kill(proxy.pid, signal.SIGUSR1)


def _counts(proxy: ProxyProcess, timeout: float = 120.0) -> dict[str, int]:
    """Stop the proxy's counting and read what it counted."""
    return ask(proxy, signal.SIGUSR1, "calls.json", "call counts", timeout=timeout)


async def _streams(proxy: ProxyProcess, name: str, count: int, concurrency: int) -> list[Outcome]:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    outcomes: list[Outcome] = []
    queue = list(range(count))
    async with httpx.AsyncClient(limits=limits, timeout=600, trust_env=False) as client:

        async def worker() -> None:
            while queue:
                queue.pop()
                outcomes.append(await _one(client, proxy, name, False))

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return outcomes


def _python(key: str) -> bool:
    """A Python function's key (a builtin's file is ``~``)."""
    return not key.startswith("~:")


@dataclass
class Counted:
    """One proxy's counts over one body's requests."""

    requests: int
    counts: dict[str, int] = field(default_factory=dict)
    errors: int = 0

    def total(self, *, python_only: bool = False, gate_only: bool = False) -> float:
        """Calls per request."""
        return (
            sum(
                n
                for k, n in self.counts.items()
                if (not python_only or _python(k)) and (not gate_only or GATE_FILES in k)
            )
            / self.requests
        )


def count_calls(
    upstream: Upstream, concurrencies: list[int], requests: int
) -> dict[int, dict[str, dict[int, Counted]]]:
    """Per concurrency, per proxy, per body length (events): the counts of ``requests``
    text streams."""
    names = {}
    for events in (LONG, SHORT):
        upstream.body = text_body(events)
        names[events] = upstream.name
    out: dict[int, dict[str, dict[int, Counted]]] = {}
    with counting_proxies(upstream) as running:
        for proxy in running.values():  # warm: litellm's first calls import and cache
            asyncio.run(_streams(proxy, names[SHORT], 8, 4))
        for concurrency in concurrencies:
            per = out.setdefault(concurrency, {})
            for kind, proxy in running.items():
                for events, name in names.items():
                    _signal(proxy)
                    done = asyncio.run(_streams(proxy, name, requests, concurrency))
                    counted = Counted(requests, _counts(proxy))
                    counted.errors = sum(o.error is not None for o in done)
                    per.setdefault(kind, {})[events] = counted
    return out


def calls_figures(counted: dict[str, dict[int, Counted]], top: int = 8) -> dict[str, Any]:
    """The row's ``calls`` figures of one cell: per request (the long body), per chunk (the
    slope between the bodies), the gate's own, and the ratios gate / noop."""
    figures: dict[str, Any] = {"events": [LONG, SHORT]}
    span = LONG - SHORT
    for kind, by_body in counted.items():
        long, short = by_body[LONG], by_body[SHORT]
        figures[kind] = {
            "per_request": long.total(),
            "python_per_request": long.total(python_only=True),
            "per_chunk": (long.total() - short.total()) / span,
            "python_per_chunk": (long.total(python_only=True) - short.total(python_only=True))
            / span,
            "gate_per_request": long.total(gate_only=True),
            "gate_per_chunk": (long.total(gate_only=True) - short.total(gate_only=True)) / span,
            "errors": long.errors + short.errors,
        }
    gate, noop = figures["gate"], figures["noop"]
    for key in ("per_request", "python_per_request", "per_chunk", "python_per_chunk"):
        figures[f"{key}_vs_noop"] = gate[key] / noop[key]
    long, short = counted["gate"][LONG], counted["gate"][SHORT]
    own = {
        key: (long.counts.get(key, 0) / long.requests - short.counts.get(key, 0) / short.requests)
        / span
        for key in long.counts
        if GATE_FILES in key
    }
    figures["gate_top_per_chunk"] = [
        [key.rpartition(GATE_FILES + "/")[2], round(n, 2)]
        for key, n in sorted(own.items(), key=lambda item: -item[1])[:top]
    ]
    return figures


__all__ = ["KINDS", "LAUNCHER", "calls_figures", "count_calls", "counting_proxies"]
