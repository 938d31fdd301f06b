"""Output: the one-line progress log and the markdown table of the results.

:func:`brief` renders a row's figures in words, per section; :func:`log` prints that line to
standard error as each row is measured; :func:`markdown` writes ``results.md``.
"""

from __future__ import annotations

import sys
from typing import Any

from bench.common import Row


def log(row: Row) -> None:
    print(f"  {row['section']:9} {row['name']}: {brief(row)}", file=sys.stderr, flush=True)


def fmt_range(s: dict[str, float], digits: int = 3) -> str:
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def brief(row: Row) -> str:
    section = row["section"]
    if "error" in row:
        return f"run failed: {row['error']}"
    if section == "e2e":
        return (
            f"paired ×{fmt_range(row['ratio_wall'])} wall, ×{fmt_range(row['ratio_cpu'])} cpu; "
            f"gate's own CPU ×{fmt_range(row['attributed_ratio'])} ({row['gate_cpu_ms']:.1f} of "
            f"{row['plain_cpu_ms']:.0f} ms{_taken_off(row)}){_floor(row)}; plain litellm "
            f"{row['baseline_us_per_event']['median']:.0f} µs/event"
        )
    if section == "metrics":
        added = row["added_us_per_attempt"]
        return (
            f"gate CPU ×{fmt_range(row['ratio_cpu'], 4)}: +{added['median']:.2f} "
            f"({added['q1']:.2f}–{added['q3']:.2f}) µs on {row['gate_us_per_attempt']:.0f} µs "
            f"an attempt (median and quartiles of {added['n']} turns' differences)"
        )
    if section in ("core", "reference", "toolloop"):
        return (
            f"×{fmt_range(row['ratio_wall'])} wall, ×{fmt_range(row['ratio_cpu'])} cpu; "
            f"baseline {row['baseline_us_per_event']['median']:.1f} µs/event, "
            f"measured {row['measured_us_per_event']['median']:.1f} µs/event"
        )
    if section == "decision":
        figure = f"{fmt_range(row['us'], 1)} µs ({row['bytes']} bytes)"
        if "ratio" in row:
            figure = (
                f"×{fmt_range(row['ratio'], 2)} of jiter + jsonschema-rs "
                f"({row['floor_us']['median']:.1f} µs); {figure}"
            )
        return figure
    if section == "ttft":
        return (
            f"plain {fmt_range(row['plain_ms'], 2)} ms, gated {fmt_range(row['gated_ms'], 2)} ms, "
            f"diff {fmt_range(row['diff_ms'], 2)} ms, noise {row['noise_ms']:.2f} ms"
        )
    if section == "memory":
        return (
            f"streaming peak ×{row['streaming_peak_ratio']:.2f}, held at terminal "
            f"×{row['held_at_terminal_ratio']:.2f}, "
            f"through the decision ×{row['decision_peak_ratio']:.2f}"
        )
    if section == "loop":
        return (
            f"{row['slow_callbacks']} slow callbacks (worst {row['worst_callback_ms']:.1f} ms); "
            f"gate sections on the loop over 5 ms of CPU: {row['gate_sections_over_5ms']} of "
            f"{row['gate_sections']} (worst {row['worst_gate_section_ms']:.2f} ms CPU, "
            f"{row['worst_gate_section_wall_ms']:.2f} ms wall)"
        )
    if section == "proxyload":
        return _proxyload(row)
    if section == "proxysoak":
        return _proxysoak(row)
    if section == "journal" and row.get("loop"):
        return (
            f"×{fmt_range(row['ratio_wall'], 2)} of the five bare commits a one-call run needs "
            "(three durable, the run lease's two not waiting for the disk), wall (the run's "
            f"journal calls replayed); ×{fmt_range(row['ratio_wall_durable'], 2)} of the three "
            f"durable ones alone; {row['us']['median']:.0f} µs of journal a "
            f"call (floor {row['floor_us']['median']:.0f} µs); inside the run "
            f"×{fmt_range(row['in_run_ratio'], 2)} (reference: litellm's threads), "
            + ", ".join(f"{k} {v:.0f}" for k, v in row["method_us"].items())
            + " µs"
        )
    if section == "journal":
        steps, ratio = row["step_us"], row["step_ratio"]
        return (
            f"×{fmt_range(row['ratio_wall'], 2)} of the floor, wall; "
            f"{row['us']['median']:.0f} µs a transition (floor {row['floor_us']['median']:.0f} "
            "µs: one bare durable write); "
            + " / ".join(f"{k} {steps[k]:.0f} µs ×{ratio[k]:.2f}" for k in steps)
            + f"; {row['claims_per_second']['median']:.0f} claims/s"
        )
    return ""


def _proxyload(row: Row) -> str:
    """Each proxy's figures; the guardrailed ones as ratios to the plain proxy."""
    parts = []
    for kind, p in row["proxies"].items():
        head = f"{p['cpu_ms_per_request']['median']:.2f} ms CPU/req"
        if "cpu_ratio" in p:
            head = f"CPU/req ×{fmt_range(p['cpu_ratio'], 2)}"
            if "cpu_vs_noop" in p:
                head += f" (×{fmt_range(p['cpu_vs_noop'], 3)} of noop)"
            head += f", req/s ×{p['throughput_ratio']['median']:.2f}"
        else:
            head += f", {p['requests_per_s']['median']:.1f} req/s"
        parts.append(
            f"**{kind}** {head}, first {p['first_ms']['p50']:.0f}/{p['first_ms']['p99']:.0f} ms, "
            f"last {p['last_ms']['p50']:.0f}/{p['last_ms']['p99']:.0f} ms (p50/p99), "
            f"peak +{p.get('rise_mib', 0.0):.1f} MiB in the cell"
            + (f", {p['errors']} errors" if p["errors"] else "")
            + _full_collections(p.get("full_collections"))
        )
    text = "; ".join(parts)
    if "gate_extra_peak_mib_rounds" in row:
        rounds = ", ".join(f"{x:+.1f}" for x in row["gate_extra_peak_mib_rounds"])
        text += f"; gate's rise over plain's, by round: {rounds} MiB"
    if "gate_extra_peak_mib" in row:
        text += (
            f", median {row['gate_extra_peak_mib']:+.1f} MiB "
            f"({row['withheld_bytes'] / 2**20:.1f} MiB withheld)"
        )
    if "calls" in row:
        text += _calls(row["calls"])
    if "proxy_litellm" in row:
        text += f"; litellm {row['proxy_litellm']} proxies"
        if row.get("proxy_cpu_own"):
            text += ", each on a CPU of its own (client and upstream on the other)"
    loads = [x for p in row["proxies"].values() for x in p.get("load_average", [])]
    if "measured" in row:
        text += f" ({row['rounds']} rounds, {row['measured']}"
        text += f", load average {min(loads):.1f}-{max(loads):.1f})" if loads else ")"
    return text


def _full_collections(full: dict[str, Any] | None) -> str:
    if full is None:
        return ""
    rounds = ", ".join(str(n) for n in full["rounds"])
    return (
        f", full collections {rounds} by round ({full['cpu_s']:.1f} s CPU, "
        f"{full['ms_per_request']:.2f} ms a request)"
    )


def _calls(calls: dict[str, Any]) -> str:
    """The text cell's call counts (bench/proxycalls.py): the load-independent figure."""
    gate, noop = calls["gate"], calls["noop"]
    extra = gate["per_chunk"] - noop["per_chunk"]
    return (
        f"; calls counted (event loop, not timed): gate ×{calls['per_request_vs_noop']:.4f} of "
        f"noop per request ({gate['per_request']:.0f} / {noop['per_request']:.0f}), per chunk "
        f"{gate['per_chunk']:.1f} / {noop['per_chunk']:.1f} (+{extra:.1f}"
        f", ×{calls['per_chunk_vs_noop']:.4f}), of them the gate's own Python functions "
        f"{gate['gate_per_chunk']:.1f} a chunk, {gate['gate_per_request']:.0f} a request"
    )


def _proxysoak(row: Row) -> str:
    """Each gc-off proxy's growth per stream and what a collection found at the end."""
    parts = []
    for kind, p in row["proxies"].items():
        held = p.get("held_slope_bytes_per_stream")  # rows from older runs: none
        parts.append(
            f"**{kind}** {p['slope_bytes_per_stream'] / 1024:+.1f} KiB/stream "
            f"(resident {p['rss_mib'][0]:.0f} → {p['rss_mib'][-1]:.0f} MiB"
            + ("" if held is None else f"; allocators hand out {held / 1024:+.1f} KiB/stream")
            + "), "
            f"{p['garbage_per_stream']:.0f} objects/stream in cycles"
            + (f", {p['errors']} errors" if p["errors"] else "")
        )
    gate = row["proxies"]["gate"]
    own = sum(gate["gate_cycles"].values())
    hanging = sum(gate["gate_objects_in_garbage"].values())
    return (
        "; ".join(parts)
        + f"; gate's objects on cycles of its own: {own}, hanging from litellm's cycles: "
        f"{hanging / row['streams']:.1f}/stream; {row['concurrency']} at once, "
        f"litellm {row['proxy_litellm']} ({row['measured']}, load average "
        f"{row['load_average']})"
    )


def _taken_off(row: Row) -> str:
    """What the gate's own CPU leaves out of its timed sections (rows from older runs: none)."""
    if "interrupted_sections" not in row:
        return ""
    return (
        f"; {row['gate_sections']:.0f} sections read {row['gate_cpu_raw_ms']:.1f} ms, less "
        f"{row['gate_gc_ms']:.1f} ms of collector passes, the timer "
        f"({row['timer_us'][0]:.2f} / {row['timer_us'][1]:.2f} µs a section) and "
        f"{row['interrupted_sections']:.0f} interruptions"
    )


def _floor(row: Row) -> str:
    """The floor gate's figure beside the gate's, and both by part (rows from older runs:
    none)."""
    if "floor_ratio" not in row:
        return ""
    gate, floor = row["gate_parts_ms"], row["floor_parts_ms"]
    parts = ", ".join(f"{k} {gate[k]:.2f} / {floor[k]:.2f}" for k in gate)
    return (
        f"; floor ×{fmt_range(row['floor_ratio'])} ({row['floor_cpu_ms']:.1f} ms; "
        f"gate / floor ms by part: {parts})"
    )


def headline(row: Row) -> str:
    """The row's judged figure in a few characters, to stand beside the next run's."""
    if "error" in row:
        return "failed"
    section = row["section"]
    if section == "e2e":
        return f"×{row['attributed_ratio']['median']:.3f}"
    if section in ("core", "reference", "metrics", "toolloop"):
        return f"×{row['ratio_cpu']['median']:.3f}"
    if section == "decision":
        if "ratio" in row:
            return f"×{row['ratio']['median']:.2f} ({row['us']['median']:.0f} µs)"
        return f"{row['us']['median']:.0f} µs"
    if section == "memory":
        return f"×{row['streaming_peak_ratio']:.2f} / ×{row['decision_peak_ratio']:.2f}"
    if section == "ttft":
        return f"{row['diff_ms']['median']:+.2f} ms"
    if section == "loop":
        return f"{row['gate_sections_over_5ms']} over 5 ms"
    if section == "journal" and row.get("loop"):
        return f"×{row['ratio_wall']['median']:.2f}"
    if section == "journal":
        return f"×{max(row['step_ratio'].values()):.2f}"
    if section == "proxysoak":
        return f"{row['gate_extra_slope'] / 1024:+.2f} KiB/stream"
    if section == "proxyload":
        gate = row["proxies"]["gate"]
        figure = f"×{gate['cpu_ratio']['median']:.2f} / ×{gate['cpu_vs_noop']['median']:.2f}"
        if "calls" in row:
            figure += f", calls ×{row['calls']['per_request_vs_noop']:.3f}"
        return figure
    return ""


def markdown(results: dict[str, Any], previous: dict[str, Any] | None = None) -> str:
    """The table; with ``previous`` results, each row's earlier figure stands beside it."""
    before = {
        (row["section"], row["name"]): headline(row) for row in (previous or {}).get("rows", [])
    }
    dates = sorted(set(results.get("sections_when", {}).values())) or [results["when"]]
    was = (previous or {}).get("when")
    sections_before: dict[str, list[str]] = {}
    for section, when in sorted((previous or {}).get("sections_when", {}).items()):
        sections_before.setdefault(when, []).append(section)
    if len(sections_before) > 1:  # a partial run: say which run each earlier figure is from
        was = "; ".join(
            f"{when} ({', '.join(names)})" for when, names in sorted(sections_before.items())
        )
    lines = [
        f"Measured {' and '.join(dates)} on {results['machine']}, litellm {results['litellm']}, "
        f"{'quick run' if results['quick'] else 'full run'}. "
        "Ratios: gated ÷ baseline, median (min–max) over interleaved pairs; "
        "ratio budgets are judged on CPU time (decision rows: the thread's CPU time, in µs)."
        + (f' "before": the same row in the run of {was}.' if was else ""),
        "",
        "| section | row | figure | before | budget | met |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        budget = ""
        if row["section"] == "memory":
            budget = f"≤ ×{row['budget_ratio']} streaming"
            if row.get("decision_budget_ratio") is not None:
                budget += f", ≤ ×{row['decision_budget_ratio']} through the decision"
        elif row.get("budget_ratio") is not None:
            budget = f"≤ ×{row['budget_ratio']}"
        elif row.get("budget_us") is not None:
            budget = f"≤ {row['budget_us']:g} µs"
        elif row["section"] == "ttft":
            budget = "within noise"
        elif row["section"] == "proxysoak":
            budget = (
                f"gate's growth ≤ noop's + {row['slope_allowance'] / 1024:g} KiB/stream, "
                "no cycle of the gate's own"
            )
        elif row.get("noop_budget_ratio") is not None:
            budget = f"gate CPU/req ≤ ×{row['noop_budget_ratio']} of noop"
        elif row.get("memory_budget_mib") is not None:
            budget = f"gate's rise ≤ plain's + {row['memory_budget_mib']:.1f} MiB"
        elif row["section"] == "loop" and "met" in row:
            budget = "no gate section > 5 ms CPU"
        met = {True: "yes", False: "**no**"}.get(row.get("met"), "")
        if row.get("met") is False and row.get("floor_over_budget"):
            met = "**no**: the floor is over it too"
        earlier = before.get((row["section"], row["name"]), "")
        lines.append(
            f"| {row['section']} | {row['name']} | {brief(row)} | {earlier} | {budget} | {met} |"
        )
    return "\n".join(lines) + "\n"
