"""A journal worker process, for the race tests (tests/test_journal_race.py).

``race``: wait for the start file, decide every given call, then try to claim each one (in
an order of its own) and run its "tool" once per claim won: append one line to the effects
file, then finish. ``stall``: claim one call under a short lease, report the token, wait
to be told to go on (the lease has expired and another worker has the call by then), then
try to run the tool and finish, and report what happened.

The tool here is fenced the way a real target system would be: it appends under a file
lock, and refuses a token that ``check_token`` says is no longer current or that is lower
than the highest token it has already seen.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from litellm_toolgate.core.rules.journal import (
    AlreadyClaimed,
    Effect,
    NewCall,
    Outcome,
    StaleClaim,
)
from litellm_toolgate.run.journal import open_journal


def wait_for(path: Path, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path.name}")
        time.sleep(0.01)


def fenced_tool(journal: Any, effects: Path, key: str, token: int, worker: str) -> str:
    """Apply the side effect once, unless the token is stale. Returns what the tool did."""
    with effects.open("a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        # The highest token this target has seen for this call (its resource).
        highest = max(
            (int(t) for k, t, _ in (line.split() for line in f if line.strip()) if k == key),
            default=0,
        )
        if not journal.check_token(key, token):
            return "refused: check_token"
        if token < highest:
            return "refused: lower than the highest token seen"
        f.write(f"{key} {token} {worker}\n")
        f.flush()
        os.fsync(f.fileno())
        return "applied"


def highest_token(effects: Path, key: str) -> int:
    lines = effects.read_text().splitlines() if effects.exists() else []
    return max((int(t) for k, t, _ in (line.split() for line in lines) if k == key), default=0)


def race(url: str, calls_file: Path, effects: Path, go: Path, worker: str) -> dict[str, int]:
    calls = [
        NewCall(**{**c, "effect": Effect(c["effect"])}) for c in json.loads(calls_file.read_text())
    ]
    rng = random.Random(worker)
    won = lost = 0
    with open_journal(url) as journal:
        wait_for(go)
        for c in rng.sample(calls, len(calls)):
            journal.decide(c)
        for c in rng.sample(calls, len(calls)):
            try:
                claim = journal.claim(c.idempotency_key, lease_seconds=600)
            except AlreadyClaimed:
                lost += 1
                continue
            won += 1
            did = fenced_tool(journal, effects, c.idempotency_key, claim.fencing_token, worker)
            if did != "applied":
                raise SystemExit(f"the tool refused a current claim: {did}")
            journal.finish(claim, Outcome.SUCCEEDED)
    return {"won": won, "lost": lost}


def stall(url: str, key: str, effects: Path, state: Path) -> dict[str, Any]:
    with open_journal(url) as journal:
        claim = journal.claim(key, lease_seconds=1.0)
        # Written whole, then renamed into place: the test polls for the name and must
        # never read it empty (a plain write_text was once seen half done, under load).
        (state / "claimed.part").write_text(str(claim.fencing_token))
        (state / "claimed.part").replace(state / "claimed")
        wait_for(state / "resume")
        report: dict[str, Any] = {"token": claim.fencing_token}
        report["check_token"] = journal.check_token(key, claim.fencing_token)
        report["below_highest"] = claim.fencing_token < highest_token(effects, key)
        report["tool"] = fenced_tool(journal, effects, key, claim.fencing_token, "stalled")
        try:
            journal.finish(claim, Outcome.SUCCEEDED)
        except StaleClaim as e:
            report["finish"] = f"StaleClaim current={e.current}"
        else:  # pragma: no cover - the test fails on it
            report["finish"] = "finished"
    return report


if __name__ == "__main__":
    mode, *rest = sys.argv[1:]
    if mode == "race":
        out: Any = race(rest[0], Path(rest[1]), Path(rest[2]), Path(rest[3]), rest[4])
    else:
        out = stall(rest[0], rest[1], Path(rest[2]), Path(rest[3]))
    print(json.dumps(out))
