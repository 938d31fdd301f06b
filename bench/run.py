"""Measure what the gate costs, against baselines measured in the same run.

Theory of operation
-------------------
Every comparison is made in pairs: the baseline and the gated variant run back to back on
the same body, the pair is repeated, and the reported figure is the median (with min and
max) of the per-pair ratios. Pairing matters on a shared 2-core machine: a burst of load
from elsewhere hits both halves of a pair, so the ratio stays readable while the absolute
times wander. Wall time and CPU time (``time.process_time``, the whole process) are both
recorded; ratios are given on both.

Sections (each row of the output names its section):

* ``e2e``: litellm iterating a stream from :class:`FakeUpstream` over loopback, plain vs
  gated, sync and async, text-only and tool-call bodies of 200 / 2,000 / 20,000 events and
  four interleaved calls of 16 KB. The plain baseline gets a client built the way the gate
  builds its own (a fresh litellm handler around one shared httpx transport), so the ratio
  is the gate's cost, not a difference between HTTP stacks. A third run in each turn is
  the floor (``bench/floor.py``): the least a gate doing the same checks can do, written
  plainly, timed the same way; a row over its budget says whether the floor is over it
  too. The OpenAI SDK's
  ``chat.completions.stream()`` helper and its plain ``create(stream=True)`` are reference
  rows (ratio against plain litellm on the same body).
* ``core``: the gate core alone fed the raw body in 64 KiB pieces, vs the floor: a bare SSE
  line split plus ``json.loads`` of every data line over the same pieces, written here.
* ``decision``: parse + schema + policy for one call at 2 KB, 16 KB and 1 MB, for a document
  of many small objects (the schema's worst case) and one long string (a file's content).
* ``ttft``: time to the first text chunk, plain vs gated.
* ``memory``: tracemalloc peak over the withheld argument bytes, core only.
* ``journal``: the run journal's three committed transitions per call (decide, claim,
  finish) on SQLite and PostgreSQL against the floor of one bare durable ``INSERT`` /
  ``UPDATE`` per transition, without and with a run lease, and claims per second; and the
  loop's journal time per call in ``gate.run`` against the bare commits a one-call run
  needs: three durable, and the run lease's take and release, which do not wait for the
  disk (``bench/journal.py``).
* ``metrics``: the gate's own CPU per attempt with its Prometheus metrics on vs off
  (``bench/metrics.py``), same run, paired.
* ``toolloop``: ``gate.run``'s added time per round against the gated round alone
  (``bench/toolloop.py``).
* ``loop``: an async gated stream with a 1 MB call in asyncio debug mode
  (``slow_callback_duration = 5 ms``): slow callbacks, and every gate section that ran on
  the loop's thread for longer than 5 ms.

Budgets are printed next to the figures; they are never asserted here (timing belongs to
this report, not to tests).

Layout: ``bench/common.py`` (statistics, timers, the upstream), ``bench/e2e.py`` (e2e, the
SDK reference rows, ttft), ``bench/core.py`` (core, decision, memory), ``bench/loop.py``
(loop), ``bench/report.py`` (the log line and the markdown table); this module holds the
plan of sizes and repeats, runs the chosen sections and writes the results.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.bodies import interleaved_body, text_body, tool_body
from bench.common import Row, Upstream
from bench.core import core_section, decision_section, memory_section
from bench.e2e import RETRIED, e2e_section, sdk_section, ttft_section
from bench.journal import journal_section
from bench.loop import loop_section
from bench.metrics import metrics_section
from bench.proxyload import cell_order, proxyload_section
from bench.proxysoak import proxysoak_section
from bench.report import markdown
from bench.toolloop import toolloop_section

HERE = Path(__file__).resolve().parent


def plan(quick: bool) -> dict[str, Any]:
    if quick:
        return {
            "e2e": [
                ("text 20 events", text_body(20), 1),
                ("tool-call 20 events", tool_body(20)[0], 1),
                ("4 interleaved calls of 1 KB", interleaved_body(4, 1024)[0], 1),
            ],
            "sdk": [("tool-call 20 events", tool_body(20)[0], 1)],
            "core": [
                ("text 20 events", text_body(20), 2),
                ("tool-call 20 events", tool_body(20)[0], 2),
            ],
            "decision": [("2 KB", 2_048, 2)],
            "ttft": (text_body(20), 2),
            "memory": (16_384, [16]),
            "loop": 16_384,
            "journal": (10, 1, 3),
            "metrics": [("tool-call 20 events", tool_body(20)[0], 50, 4)],
            "toolloop": 1,
            "proxyload": ([1, 16, 64], 1, 1, 256),
            "proxysoak": 400,
        }
    return {
        "e2e": [
            ("text 200 events", text_body(200), 5),
            ("tool-call 200 events", tool_body(200)[0], 5),
            ("text 2,000 events", text_body(2_000), 3),
            ("tool-call 2,000 events", tool_body(2_000)[0], 3),
            ("text 20,000 events", text_body(20_000), 1),
            ("tool-call 20,000 events", tool_body(20_000)[0], 1),
            ("4 interleaved calls of 16 KB", interleaved_body(4, 16_384)[0], 3),
        ],
        "sdk": [("tool-call 2,000 events", tool_body(2_000)[0], 3)],
        "core": [
            ("text 2,000 events", text_body(2_000), 15),
            ("tool-call 2,000 events", tool_body(2_000)[0], 15),
            ("text 20,000 events", text_body(20_000), 5),
            ("4 interleaved calls of 16 KB", interleaved_body(4, 16_384)[0], 15),
        ],
        "decision": [("2 KB", 2_048, 50), ("16 KB", 16_384, 20), ("1 MB", 1_048_576, 3)],
        "ttft": (text_body(200), 15),
        "memory": (1_048_576, [8, 64, 1024]),
        "loop": 1_048_576,
        "journal": (200, 7, 200),
        "metrics": [
            ("tool-call 20 events", tool_body(20)[0], 256, 400),
            ("tool-call 200 events", tool_body(200)[0], 50, 150),
            ("4 interleaved calls of 16 KB", interleaved_body(4, 16_384)[0], 10, 120),
        ],
        "toolloop": 9,
        "proxyload": ([1, 16, 64], 2, 2, 32),
        "proxysoak": 10_000,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one or two repeats")
    parser.add_argument("--out", type=Path, help="JSON results (default bench/results.json)")
    parser.add_argument("--md", type=Path, help="markdown table (default bench/results.md)")
    parser.add_argument(
        "--only",
        action="append",
        help="run only these sections (core, decision, memory, metrics, ttft, loop, journal, "
        "toolloop, e2e, sdk; proxyload, three real proxies under load, and proxysoak, two "
        "proxies with the gc off, only when named); "
        "the other sections' rows are kept from the existing output file",
    )
    parser.add_argument(
        "--cell",
        action="append",
        metavar="BODY@STREAMS",
        help="proxyload: only this cell, e.g. '64 KB call@64' or 'text@64' (repeatable)",
    )
    parser.add_argument("--rounds", type=int, help="proxyload: rounds (fresh proxies each)")
    parser.add_argument(
        "--requests-per-stream", type=int, help="proxyload: requests each stream sends in a cell"
    )
    parser.add_argument(
        "--soak-streams", type=int, help="proxysoak: streams through each proxy (10,000)"
    )
    args = parser.parse_args(argv)
    out = args.out or HERE / ("results-quick.json" if args.quick else "results.json")
    md = args.md or out.with_suffix(".md")
    chosen = plan(args.quick)
    concurrencies, per_stream, rounds, fragment = chosen["proxyload"]
    cells = None
    if args.cell:
        cells = [(c.rpartition("@")[0], int(c.rpartition("@")[2])) for c in args.cell]
    chosen["proxyload"] = (
        concurrencies,
        args.requests_per_stream or per_stream,
        args.rounds or rounds,
        fragment,
        cells,
    )
    if args.soak_streams:
        chosen["proxysoak"] = args.soak_streams
    # The load bench starts three proxies, the soak two, and each runs for minutes: only
    # when named.
    wanted = set(args.only or set(chosen) - {"proxyload", "proxysoak"})
    started = time.perf_counter()
    rows: list[Row] = []
    with Upstream() as up:
        steps: list[tuple[str, Callable[[], list[Row]]]] = [
            ("core", lambda: core_section(chosen["core"])),
            ("decision", lambda: decision_section(chosen["decision"])),
            ("memory", lambda: memory_section(*chosen["memory"])),
            ("metrics", lambda: metrics_section(chosen["metrics"])),
            ("ttft", lambda: ttft_section(up, *chosen["ttft"])),
            ("loop", lambda: loop_section(up, chosen["loop"])),
            ("journal", lambda: journal_section(up, *chosen["journal"])),
            ("toolloop", lambda: toolloop_section(up, chosen["toolloop"])),
            ("e2e", lambda: e2e_section(up, chosen["e2e"])),
            ("sdk", lambda: sdk_section(up, chosen["sdk"])),
            ("proxyload", lambda: proxyload_section(up, *chosen["proxyload"])),
            ("proxysoak", lambda: proxysoak_section(up, chosen["proxysoak"])),
        ]
        for name, step in steps:
            if name in wanted:
                print(f"== {name}", file=sys.stderr, flush=True)
                rows.extend(step())
    cells_now = {str(r["name"]) for r in rows if r["section"] == "proxyload"}
    if args.quick:
        # One or two repeats at toy sizes: a smoke run, not a measurement to judge.
        for row in rows:
            row.pop("met", None)
    now = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    ran = {_SECTION_OF.get(row["section"], row["section"]) for row in rows}
    when = dict.fromkeys(ran, now)
    previous: dict[str, Any] | None = json.loads(out.read_text()) if out.exists() else None
    if args.only and previous is not None and previous.get("quick") == args.quick:
        fresh = {(r["section"], r["name"]) for r in rows}
        kept = [
            r
            for r in previous["rows"]
            if _SECTION_OF.get(r["section"], r["section"]) not in ran
            # --cell: the proxy-load rows of the cells not run now stay, each with its date
            or (
                bool(args.cell)
                and r["section"] == "proxyload"
                and (r["section"], r["name"]) not in fresh
            )
        ]
        rows = kept + rows
        when = {**previous.get("sections_when", {}), **when}
    order = ["core", "decision", "memory", "metrics", "ttft", "loop", "journal", "toolloop", "e2e"]
    order += ["reference", "proxyload", "proxysoak"]
    rows.sort(key=lambda r: (order.index(r["section"]), cell_order(r)))
    results = {
        "when": now,
        "sections_when": when,
        "machine": (
            f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
        ),
        "litellm": _version("litellm"),
        "openai": _version("openai"),
        "quick": args.quick,
        "seconds": time.perf_counter() - started,
        "rows": rows,
        "retried_runs": RETRIED,
    }
    # What each row is compared with: the row it replaces (the previous output's). For a
    # partial run, a row kept from the previous output keeps the figure it was compared with
    # then, so it is never its own "before"; sections_when says which run each figure is from.
    if previous is not None:
        results["before"] = _before(
            previous,
            {str(r) for r in ran} if args.only else None,
            cells_now if args.cell else None,
        )
    out.write_text(json.dumps(results, indent=1) + "\n")
    table = markdown(results, results.get("before"))
    md.write_text(table)
    print(table)
    return 0


_SECTION_OF = {"reference": "sdk"}


def _section(row: Row) -> str:
    return str(_SECTION_OF.get(row["section"], row["section"]))


def _before(
    previous: dict[str, Any], ran: set[str] | None, cells: set[str] | None = None
) -> dict[str, Any]:
    """The figures this run is compared with (``ran``: the sections of a partial run;
    ``cells``: the names of the proxy-load rows a ``--cell`` run measured, the others kept)."""
    sources = [(previous, ran)]
    earlier = previous.get("before")
    if ran is not None and earlier is not None:
        sources.append((earlier, None))
    rows: list[Row] = []
    when: dict[str, str] = {}
    for source, only in sources:
        source_when = source.get("sections_when") or {}
        for row in source.get("rows", []):
            section = _section(row)
            # From the previous output: the sections run now; from its own "before": the rest.
            measured_now = section in (ran or set())
            if cells is not None and section == "proxyload":
                measured_now = row["name"] in cells
            if "error" in row or (only is not None) != measured_now:
                continue
            rows.append({k: v for k, v in row.items() if k != "before"})
            when[section] = str(source_when.get(section, source.get("when")))
    return {"when": previous.get("when"), "sections_when": when, "rows": rows}


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)
