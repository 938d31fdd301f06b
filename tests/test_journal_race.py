"""Workers racing for the same calls, as separate processes, on PostgreSQL and a SQLite file.

16 processes are given the same decided calls: each call is claimed and its side effect
applied exactly once (the effects file is the target system's own record, written by the
"tool", not by the journal). Then a worker stalls past its lease: a second worker reclaims
the call (``retry_expired=True``), and the stalled worker's fencing token is refused by the
tool, both through ``check_token`` and against the highest token the tool has seen.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_stores import STORES, store_url
from journal_worker import fenced_tool

from litellm_toolgate.core.rules.journal import (
    AlreadyClaimed,
    Effect,
    NewCall,
    Outcome,
    Step,
    argument_digest,
)
from litellm_toolgate.run.journal import open_journal

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "journal_worker.py"
WORKERS = 16
CALLS = 24


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        # 16 processes queue for SQLite's write lock: wait long on a busy machine.
        yield f"{u}?timeout=300" if u.startswith("sqlite") else u


def spawn(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    return subprocess.Popen(
        [sys.executable, str(WORKER), *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> Any:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err[-2000:]
    return json.loads(out)


def new_call(n: int) -> NewCall:
    return NewCall(
        run_id="race",
        attempt_id="att",
        round=0,
        route="openai",
        call_id=f"call_{n}",
        tool="charge_card",
        effect=Effect.NON_IDEMPOTENT,
        argument_digest=argument_digest({"n": n}, hmac_key=None),
    )


def test_sixteen_workers_run_each_call_exactly_once(url: str, tmp_path: Path) -> None:
    open_journal(url).close()  # create the schema once, before the race
    calls = [new_call(n) for n in range(CALLS)]
    calls_file = tmp_path / "calls.json"
    calls_file.write_text(
        json.dumps([{**dataclasses.asdict(c), "effect": c.effect.value} for c in calls])
    )
    effects, go = tmp_path / "effects.txt", tmp_path / "go"
    procs = [
        spawn("race", url, str(calls_file), str(effects), str(go), f"w{i}") for i in range(WORKERS)
    ]
    time.sleep(0.5)
    go.touch()
    reports = [finish(p) for p in procs]
    assert sum(r["won"] for r in reports) == CALLS
    assert sum(r["won"] + r["lost"] for r in reports) == CALLS * WORKERS
    applied = Counter(line.split()[0] for line in effects.read_text().splitlines())
    assert applied == Counter({c.idempotency_key: 1 for c in calls})
    with open_journal(url) as j:
        rows = j.calls("race")
    assert len(rows) == CALLS
    assert all(r.step is Step.FINISHED and r.outcome is Outcome.SUCCEEDED for r in rows)
    tokens = [r.fencing_token for r in rows]
    assert len(set(tokens)) == CALLS  # one claim per call, each its own token


def test_a_stalled_worker_loses_its_call_and_its_token_is_refused(url: str, tmp_path: Path) -> None:
    effects = tmp_path / "effects.txt"
    with open_journal(url) as j:
        key = j.decide(new_call(0)).idempotency_key
    stalled = spawn("stall", url, key, str(effects), str(tmp_path))
    deadline = time.monotonic() + 120
    while not (tmp_path / "claimed").exists():
        assert stalled.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    stale_token = int((tmp_path / "claimed").read_text())
    with open_journal(url) as second:
        with pytest.raises(AlreadyClaimed):  # a reclaim is never the default
            second.claim(key, lease_seconds=30)
        while True:  # the lease is one second long
            try:
                claim = second.claim(key, lease_seconds=30, retry_expired=True)
                break
            except AlreadyClaimed as e:
                assert e.lease_live and time.monotonic() < deadline
                time.sleep(0.05)
        assert claim.fencing_token > stale_token
        assert fenced_tool(second, effects, key, claim.fencing_token, "second") == "applied"
        (tmp_path / "resume").touch()
        report = finish(stalled)
        second.finish(claim, Outcome.SUCCEEDED)
        row = second.get(key)
    assert report == {
        "token": stale_token,
        "check_token": False,
        "below_highest": True,
        "tool": "refused: check_token",
        "finish": f"StaleClaim current={claim.fencing_token}",
    }
    assert effects.read_text().splitlines() == [f"{key} {claim.fencing_token} second"]
    assert row.step is Step.FINISHED and row.fencing_token == claim.fencing_token
