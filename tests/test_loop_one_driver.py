"""One driver per run, across real processes, on SQLite and PostgreSQL.

A first driver runs round 0 of a run (four calls) and dies holding the run's lease. Six
processes then resume the run at the same moment from its checkpointed conversation: one
drives it (its lease taken from the dead holder), the others get ``RunBusy`` (or, told to
wait, wait for the lease and then find the conversation behind the journal:
``ConversationBehind``), and never ask the model. The journal stays within the run's
bounds (eight calls, four a round), and the tool's own record (one line per execution,
written by the tool) shows each call run once.

Then a driver stops (``SIGSTOP``) inside a tool past its run lease; another process takes
the run over and finishes it; the stopped one, continued, commits nothing more: its writes
are refused by the token check (``RunLeaseLost``).

Waits are generous (a busy 2-core machine): nothing here asserts how long anything took.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_stores import STORES, store_url

from litellm_toolgate.core.rules.journal import Outcome, Step
from litellm_toolgate.run.journal import open_journal

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "run_driver_worker.py"
RESUMERS = 6
TIMEOUT = 600


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield f"{u}?timeout=300" if u.startswith("sqlite") else u


def spawn(workdir: Path, url: str, worker: str, **config: Any) -> subprocess.Popen[str]:
    path = workdir / f"config.{worker}.json"
    path.write_text(
        json.dumps(
            {"url": url, "run_id": "run-1", "worker": worker, "workdir": str(workdir), **config}
        )
    )
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{ROOT / 'tests'}"}
    env.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(path)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def outcome(proc: subprocess.Popen[str]) -> dict[str, Any]:
    out, err = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, err[-3000:]
    lines = out.strip().splitlines()
    return json.loads(lines[-1]) if lines else {"outcome": "exited"}


def markers(workdir: Path) -> list[tuple[str, str, int]]:
    path = workdir / "markers"
    lines = path.read_text().splitlines() if path.exists() else []
    return [(w, c, int(t)) for w, c, t in (line.split() for line in lines)]


@pytest.mark.parametrize("wait", [None, 300.0], ids=["busy", "wait"])
def test_six_resumers_one_driver(url: str, tmp_path: Path, wait: float | None) -> None:
    open_journal(url).close()  # the schema, once, before the race
    first = spawn(tmp_path, url, "first", exit_at_round=1)
    assert outcome(first) == {"outcome": "exited"}  # died in round 1's before_round
    with open_journal(url) as j:
        assert len(j.calls("run-1")) == 4 and j.run_holder("run-1") is not None
    go = tmp_path / "go"
    procs = [spawn(tmp_path, url, f"w{i}", go=str(go), wait_for_run=wait) for i in range(RESUMERS)]
    time.sleep(1.0)
    go.touch()
    results = [outcome(p) for p in procs]
    kinds = Counter(r["outcome"] for r in results)
    assert kinds["completed"] == 1, results
    others = {"ConversationBehind"} if wait else {"RunBusy", "ConversationBehind"}
    assert set(kinds) - {"completed"} <= others, results
    assert all("t0" not in r.get("message", "") for r in results)  # no argument text
    winner = next(r["worker"] for r in results if r["outcome"] == "completed")

    with open_journal(url) as j:
        rows = j.calls("run-1")
    by_round = Counter(r.round for r in rows)
    assert len(rows) <= 8 and all(n <= 4 for n in by_round.values()), by_round
    assert by_round == Counter({0: 4, 1: 4})
    assert all(r.step is Step.FINISHED and r.outcome is Outcome.SUCCEEDED for r in rows)
    assert {r.call_id for r in rows if r.round == 1} == {f"c1_{winner}_{i}" for i in range(4)}
    ran = markers(tmp_path)
    executions = Counter(c for _, c, _ in ran)
    assert executions == Counter({r.call_id: 1 for r in rows})  # each call ran once
    assert {w for w, c, _ in ran if c.startswith("c1_")} == {winner}


def test_a_stopped_driver_commits_nothing_after_a_takeover(url: str, tmp_path: Path) -> None:
    open_journal(url).close()
    stale = spawn(tmp_path, url, "stale", stall_in_tool=True, run_lease_seconds=2.0)
    deadline = time.monotonic() + TIMEOUT
    while not (tmp_path / "in_tool").exists():
        assert stale.poll() is None, stale.communicate()[1][-3000:]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.kill(stale.pid, signal.SIGSTOP)
    try:
        with open_journal(url) as j:
            held = j.run_holder("run-1")
            assert held is not None
            while time.time() < held[2] + 0.5:  # past its lease (the heartbeat is stopped)
                time.sleep(0.1)
            started = [r for r in j.calls("run-1") if r.step is Step.STARTED]
        assert len(started) == 1
        # Another process takes the run over and finishes it (the started call again, under
        # the same key, once its claim's lease ran out: the tool's rule).
        second = outcome(spawn(tmp_path, url, "second", run_lease_seconds=30.0))
        assert second["outcome"] == "completed", second
        with open_journal(url) as j:
            after_takeover = j.calls("run-1")
            current = j.run_holder("run-1")
    finally:
        (tmp_path / "resume").touch()
        os.kill(stale.pid, signal.SIGCONT)
    report = outcome(stale)
    assert report["outcome"] == "RunLeaseLost", report
    with open_journal(url) as j:
        final = j.calls("run-1")
        assert j.run_holder("run-1") == current  # the stale driver did not touch the lease
    assert final == after_takeover  # not one write of the stale driver committed
    assert len(final) == 8 and all(r.step is Step.FINISHED for r in final)
    stalled_call = started[0]
    row = next(r for r in final if r.call_id == stalled_call.call_id)
    assert row.fencing_token is not None and row.fencing_token > (stalled_call.fencing_token or 0)
    # The stale driver's tool was inside its one call when stopped, and wrote its marker
    # when continued (the journal's fencing token is what a target would refuse it by);
    # the second driver ran that call again under the same key (its rule, retry_with_key)
    # with a greater token, and every other call once.
    ran = markers(tmp_path)
    assert [m for m in ran if m[0] == "stale"] == [
        ("stale", stalled_call.call_id, stalled_call.fencing_token)
    ]
    assert Counter(c for w, c, _ in ran if w == "second") == Counter(r.call_id for r in final)
