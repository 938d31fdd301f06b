"""The benchmark runs end to end (``--quick``) and writes every row with sane numbers.

Not a timing test: no figure is compared with a budget here. It checks that the command
the README documents works and that its JSON holds every section and row it promises.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from conftest import ROOT

EXPECTED_ROWS = {
    "e2e": 6,
    "reference": 2,
    "core": 4,
    "decision": 2,
    "ttft": 2,
    "memory": 1,
    "loop": 2,
    "toolloop": 2,
    # SQLite and PostgreSQL (rows saying they did not run without a server), each: the
    # transitions, the transitions under a run lease, the loop's journal time per call.
    "journal": 6,
    "metrics": 1,
}


def numbers(value: Any) -> list[float]:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in numbers(v)]
    if isinstance(value, list):
        return [n for v in value for n in numbers(v)]
    return []


def test_quick_benchmark_writes_every_row(tmp_path: Path) -> None:
    out = tmp_path / "results.json"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--out", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=120,
        capture_output=True,
    )
    results = json.loads(out.read_text())
    assert results["quick"] is True
    assert (tmp_path / "results.md").read_text().count("\n| ") == sum(EXPECTED_ROWS.values()) + 1
    counts: dict[str, int] = {}
    for row in results["rows"]:
        counts[row["section"]] = counts.get(row["section"], 0) + 1
        assert all(math.isfinite(n) for n in numbers(row)), row["name"]
        # Everything but a difference of two times is a size, a count, a time or a ratio.
        rest = {k: v for k, v in row.items() if k not in ("diff_ms", "added_us_per_attempt")}
        assert all(n >= 0 for n in numbers(rest)), row["name"]
        for key in ("ratio_wall", "ratio_cpu", "us", "plain_ms", "gated_ms"):
            if key in row:
                stats = row[key]
                assert stats["min"] <= stats["median"] <= stats["max"]
                assert stats["median"] > 0
        if row["section"] == "memory":
            assert row["streaming_peak_ratio"] > 0.5  # the withheld bytes were traced
        if row["section"] == "e2e":  # the gate's and the floor gate's sections were timed
            assert row["gate_sections"] > 0
            assert row["floor_cpu_ms"] > 0
            assert set(row["floor_parts_ms"]) == set(row["gate_parts_ms"])
        if row["section"] == "journal" and "error" not in row:
            assert row["ratio_wall"]["median"] > 0
            assert row["method_us"] if row.get("loop") else row["claims_per_second"]["median"]
        if row["section"] == "metrics":  # both halves ran: the gate's CPU was measured
            assert row["gate_us_per_attempt"] > 0
        if row["section"] == "loop" and "gated" in row["name"]:
            assert row["gate_sections"] > 0  # the gate's own sections were timed
    assert counts == EXPECTED_ROWS
