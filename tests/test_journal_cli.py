"""``toolgate journal`` (run/journal/cli.py) through ``litellm_toolgate.cli.main``, on both
stores: ids, tools, steps, outcomes and times are shown; arguments never (they are not there)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from journal_stores import STORES, store_url

from litellm_toolgate.cli import main
from litellm_toolgate.core.rules.journal import Effect, NewCall, Outcome, Step, argument_digest
from litellm_toolgate.run.journal import open_journal

CANARY = "CANARY-c11-ARGUMENT"


@pytest.fixture(params=STORES)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with store_url(request.param, tmp_path) as u:
        yield u


def call(n: int, run_id: str = "run-a") -> NewCall:
    return NewCall(
        run_id=run_id,
        attempt_id="att",
        round=n,
        route="openai",
        call_id=f"call_{n}",
        tool=("read_file", "write_file", "send_mail")[n % 3],
        effect=Effect.NON_IDEMPOTENT,
        argument_digest=argument_digest({"secret": CANARY, "n": n}, hmac_key=None),
    )


@pytest.fixture
def keys(url: str) -> list[str]:
    with open_journal(url) as j:
        keys = [j.decide(call(n)).idempotency_key for n in range(3)]
        j.finish(j.claim(keys[0], lease_seconds=5), Outcome.SUCCEEDED, result_size=7)
        j.claim(keys[1], lease_seconds=5)
        j.decide(call(0, run_id="run-b"))
    return keys


def run(capsys: Any, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert CANARY not in out + err
    return code, out, err


def test_runs(url: str, keys: list[str], capsys: Any) -> None:
    code, out, _ = run(capsys, "journal", "--url", url, "runs")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "RUN", "CALLS", "UNFINISHED", "AMBIGUOUS", "FIRST", "DECIDED", "LAST", "CHANGE"
    ]  # fmt: skip
    assert lines[1].split()[:4] == ["run-a", "3", "2", "1"]
    assert lines[2].split()[:4] == ["run-b", "1", "1", "0"]
    assert lines[1].split()[4].endswith("Z")


def test_calls(url: str, keys: list[str], capsys: Any) -> None:
    code, out, _ = run(capsys, "journal", "--url", url, "calls", "run-a")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:8] == [
        "RUN", "ROUND", "CALL", "TOOL", "EFFECT", "STEP", "OUTCOME", "TOKEN"
    ]  # fmt: skip
    cells = [line.split() for line in lines[1:]]
    assert [c[2:4] + c[5:7] for c in cells] == [
        ["call_0", "read_file", "finished", "succeeded"],
        ["call_1", "write_file", "started", "-"],
        ["call_2", "send_mail", "decided", "-"],
    ]
    assert [c[-1] for c in cells] == keys
    assert "sha256:" not in out  # not even the digest: the listing is for people


def test_ambiguous_then_reconcile(url: str, keys: list[str], capsys: Any) -> None:
    code, out, _ = run(capsys, "journal", "--url", url, "ambiguous")
    assert code == 0 and "call_1" in out and "call_2" not in out and "1 call(s)" in out
    code, out, _ = run(capsys, "journal", "--url", url, "ambiguous", "run-b")
    assert code == 0 and out == "(none)\n"
    code, out, _ = run(
        capsys, "journal", "--url", url, "reconcile", keys[1], "--reason", "mail server: not sent"
    )
    assert code == 0 and "reconciled (ambiguous)" in out
    with open_journal(url) as j:
        row = j.get(keys[1])
    assert row.step is Step.RECONCILED and row.reconciled_reason == "mail server: not sent"
    code, out, _ = run(capsys, "journal", "--url", url, "ambiguous")
    assert out == "(none)\n"
    # A second reconcile is a move the table refuses: exit 2, said on stderr.
    code, out, err = run(capsys, "journal", "--url", url, "reconcile", keys[1], "--reason", "again")
    assert code == 2 and "cannot reconcile" in err and out == ""


def test_errors_exit_2(url: str, keys: list[str], capsys: Any, monkeypatch: Any) -> None:
    code, _, err = run(capsys, "journal", "--url", url, "reconcile", "0" * 64, "--reason", "x")
    assert code == 2 and "no journal row" in err
    code, _, err = run(capsys, "journal", "--url", "mysql://u:s3cret@h/db", "runs")
    assert code == 2 and "unknown journal URL scheme" in err and "s3cret" not in err
    monkeypatch.delenv("TOOLGATE_JOURNAL_URL", raising=False)
    code, _, err = run(capsys, "journal", "runs")
    assert code == 2 and "--url" in err


def test_the_url_can_come_from_the_environment(
    url: str, keys: list[str], capsys: Any, monkeypatch: Any
) -> None:
    monkeypatch.setenv("TOOLGATE_JOURNAL_URL", url)
    code, out, _ = run(capsys, "journal", "runs")
    assert code == 0 and "run-a" in out


def test_control_characters_in_ids_never_reach_the_terminal(url: str, capsys: Any) -> None:
    with open_journal(url) as j:
        j.decide(NewCall(
            run_id="run-x", attempt_id="att", round=0, route="openai",
            call_id="call_\x1b[2Jevil", tool="read_file", effect=Effect.READ_ONLY,
            argument_digest=argument_digest("{}", hmac_key=None),
        ))  # fmt: skip
    code, out, _ = run(capsys, "journal", "--url", url, "calls", "run-x")
    assert code == 0 and "\x1b" not in out and "call_?[2Jevil" in out
