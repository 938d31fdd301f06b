"""Bounded memory: hostile upstreams are quarantined at the limit, at a bounded cost.

``memprobe.py`` runs in a subprocess (so its peaks are its own) and streams each scenario
lazily from a raw loopback server through the real litellm, or into the core directly:

* ``huge_arguments``: one call whose arguments run to 1 GiB in 64 KiB fragments;
* ``huge_line``: 1 GiB of one data line that never ends;
* ``many_events``: a million one-character text events (``max_events`` lowered to 10,000
  so that CI stays fast; the default 200,000 only takes longer);
* ``many_indexes``: a million parallel calls, one new tool index per event;
* ``many_indexes_one_event``: parallel calls in a single event as long as the event limit;
* ``core_many_events`` and ``core_huge_arguments``: the same fed to the sans-I/O core;
* ``core_huge_ids``: 64 parallel calls whose ids are nearly 4 MiB each, fed to the core
  (through litellm a chunk that size costs litellm itself tens of seconds).

Each must be quarantined for the right limit, release nothing, stop the server well short
of what it had to send (the gate stops reading at the limit), and keep tracemalloc's peak
within a small multiple of the limit that applies. The multiples are measured, not
guessed: the gate holds at most the limit (its partial line or its withheld arguments);
the rest is litellm's copy of the bytes it was passed before the limit was reached.
(``many_indexes_one_event`` peaked at 11.6 x the event limit while a quarantine ended the
body cleanly for litellm, which then parsed the unterminated line it held; now litellm
reads an error there instead, and the peak is 2.6 x. ``core_huge_ids`` held all 256 MiB
of ids, 289 MB traced, until ids and names were counted against the total argument limit.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tally

MIB = 1024 * 1024
PROBE = Path(__file__).with_name("memprobe.py")
# scenario: (reason, the limit that applies, the multiple of it tracemalloc may peak at)
EXPECT: dict[str, tuple[str, str, float]] = {
    "huge_arguments": ("arguments_too_large", "max_argument_bytes", 3),
    "huge_line": ("event_too_large", "max_event_bytes", 4),
    "many_events": ("too_many_events", "max_event_bytes", 0.5),
    "many_indexes": ("too_many_calls", "max_event_bytes", 0.5),
    "many_indexes_one_event": ("event_too_large", "max_event_bytes", 4),
    "core_many_events": ("too_many_events", "max_event_bytes", 0.1),
    "core_huge_arguments": ("arguments_too_large", "max_argument_bytes", 1.5),
    "core_huge_ids": ("total_arguments_too_large", "max_total_argument_bytes", 5),
}


@pytest.fixture(scope="module")
def measured() -> dict[str, dict[str, Any]]:
    done = subprocess.run(
        [sys.executable, str(PROBE), *EXPECT],
        capture_output=True,
        text=True,
        timeout=240,
        check=True,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row["scenario"]: row for row in rows}


@pytest.mark.parametrize("scenario", list(EXPECT))
def test_a_hostile_upstream_is_stopped_at_the_limit(
    scenario: str, measured: dict[str, dict[str, Any]]
) -> None:
    row = measured[scenario]
    reason, limit_name, multiple = EXPECT[scenario]
    limit = row["limits"][limit_name]
    tally.count("faults" if not scenario.startswith("core_") else "core_oversized")
    tally.count("fault_releases", row["released"])
    assert row["reason"] == reason, row
    assert row["released"] == 0, row
    # The whole body is 1 GiB or more (a million events or indexes: tens of MiB); the gate
    # stopped reading at the limit, plus what the sockets had buffered.
    assert row["sent"] < 32 * MIB, row
    assert row["traced_peak"] < multiple * limit, (
        f"{scenario}: peak {row['traced_peak']:,} B over {multiple} x {limit_name} ({limit:,})"
    )
    assert row["seconds"] < 60, row
