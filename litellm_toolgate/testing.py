"""The crash-point kit: kill a tool loop at every step boundary, resume it, check the rules.

A pytest plugin (``-p litellm_toolgate.testing``, or import its ``crash_kit`` fixture into a
test module). You write a *scenario*: a module-level function, importable in a fresh
process by ``"package.module:function"``, that runs one ``gate.run`` with what the kit's
:class:`CrashContext` hands it::

    def scenario(ctx: CrashContext) -> None:
        gate = ToolGate([...])
        gate.run(
            messages=ctx.conversation(first_messages),
            executors={"send_mail": ctx.tool("send_mail", send_mail, effect="non_idempotent")},
            journal=ctx.journal(),
            run_id=ctx.run_id,
            checkpoint=ctx.checkpoint,
            before_round=ctx.before_round,
            model=..., api_base=...,
        )

    def test_send_mail_survives_crashes(crash_kit):
        crash_kit.check("my_tests.scenarios:scenario", journal_url=lambda case: ...)

:meth:`CrashKit.check` first runs the scenario once to the end in a child process, noting
every step boundary it passes: after a row is **decided**, after it is **started**
(claimed), **inside the tool** (after the tool ran, before its result was recorded), after
it is **finished**, and **before the next round**. Then, for each of those boundaries, a
fresh child runs the scenario on a fresh journal and is killed there with ``SIGKILL``; a
fresh child resumes it (same run id, the conversation it checkpointed); each call the
resume reports as ambiguous is reconciled, as an operator would, and a fresh child resumes
again, to the end. In every case it asserts that **no non-idempotent tool ran twice**
(counted outside the journal, in an append-only file written before the tool is entered)
and that **every call left unfinished by the kill was reported** by the resume or resolved
by its tool's rule, and nothing else was reported.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import multiprocessing
import os
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from .core.rules.journal import AmbiguousCalls, Effect, JournalRow
from .run.journal import open_journal
from .run.tools import Tool, ToolContext

BOUNDARIES = ("decided", "started", "tool", "finished", "round")
"""The step boundaries the kit kills at (see the module's text)."""
CHILD_TIMEOUT = 300.0
"""Seconds one child may take (generous: a busy machine imports litellm slowly)."""


# ---- in the child -------------------------------------------------------------------------
class CrashContext:
    """What a scenario uses, in the child process: the journal (observed), the conversation
    checkpoint, the round hook, and tools wrapped to count their runs and stop inside."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.run_id: str = config["run_id"]
        self.journal_url: str = config["journal_url"]
        self.workdir = Path(config["workdir"])
        kill = config.get("kill_at")
        self._kill: tuple[str, int] | None = None if kill is None else (kill[0], int(kill[1]))
        self._passed: Counter[str] = Counter()

    # The boundary log: one line per boundary passed, flushed before any kill could follow.
    def _mark(self, point: str) -> None:
        self._passed[point] += 1
        with open(self.workdir / "points.log", "a", encoding="utf-8") as log:
            log.write(f"{point}\n")
            log.flush()
            os.fsync(log.fileno())
        if self._kill == (point, self._passed[point]):
            os.kill(os.getpid(), signal.SIGKILL)

    def _observe(self, move: str, row: JournalRow) -> None:
        if move in ("decided", "started", "finished"):
            self._mark(move)

    def journal(self) -> Any:
        """The scenario's journal, observed so the kit can stop right after a commit."""
        return open_journal(self.journal_url, observer=self._observe)

    def conversation(self, first: list[Any]) -> list[Any]:
        """The conversation last checkpointed by this run, else ``first``."""
        path = self.workdir / "conversation.json"
        if path.exists():
            loaded: list[Any] = json.loads(path.read_text(encoding="utf-8"))
            return loaded
        return list(first)

    def checkpoint(self, conversation: list[Any]) -> None:
        """Keep the conversation durably (written whole, then renamed into place)."""
        path = self.workdir / "conversation.json"
        temporary = path.with_suffix(".tmp")
        with open(temporary, "w", encoding="utf-8") as out:
            json.dump(conversation, out, default=str)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)

    def before_round(self, round_index: int) -> None:
        if round_index > 0:
            self._mark("round")

    def tool(
        self, name: str, fn: Callable[..., Any], *, effect: Effect | str, **options: Any
    ) -> Tool:
        """``Tool(fn, ...)`` whose every entry is counted (before ``fn`` runs) in an
        append-only file, and that can be stopped after ``fn`` returned."""
        wants = Tool(fn, effect=effect, **options).wants_context
        kind = Effect(effect.value if isinstance(effect, Effect) else effect)

        def counted(arguments: dict[str, Any], context: ToolContext) -> Any:
            with open(self.workdir / "effects.log", "a", encoding="utf-8") as log:
                log.write(f"{kind.value} {name} {context.call_id}\n")
                log.flush()
                os.fsync(log.fileno())
            value = fn(arguments, context=context) if wants else fn(arguments)
            self._mark("tool")
            return value

        return Tool(counted, effect=kind, **options)


def _child(config_path: str) -> int:
    config = json.loads(Path(config_path).read_text(encoding="utf-8"))
    module, _, function = config["target"].partition(":")
    scenario = getattr(importlib.import_module(module), function)
    context = CrashContext(config)
    outcome: dict[str, Any] = {"status": "completed"}
    try:
        scenario(context)
    except AmbiguousCalls as exc:
        outcome = {
            "status": "ambiguous",
            "rows": [
                {
                    "key": r.idempotency_key,
                    "call_id": r.call_id,
                    "tool": r.tool,
                    "step": r.step.value,
                }
                for r in exc.rows
            ],
        }
    Path(config["workdir"], "outcome.json").write_text(json.dumps(outcome), encoding="utf-8")
    return 0


# ---- in the test process ----------------------------------------------------------------
@dataclass
class CrashCase:
    """One kill and what followed it."""

    point: str
    occurrence: int
    unfinished: list[str] = field(default_factory=list)
    reported: list[str] = field(default_factory=list)
    runs: dict[str, int] = field(default_factory=dict)


@dataclass
class CrashReport:
    """Every case the kit ran; ``points`` is what the uninterrupted run passed through."""

    points: list[str]
    cases: list[CrashCase]


class CrashKit:
    """Runs scenarios in child processes (see the module's text)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _spawn(self, target: str, workdir: Path, url: str, run_id: str, kill: Any) -> int:
        config = {
            "target": target,
            "journal_url": url,
            "run_id": run_id,
            "workdir": str(workdir),
            "kill_at": kill,
        }
        path = workdir / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
        with contextlib.suppress(FileNotFoundError):
            (workdir / "outcome.json").unlink()
        child = _processes().Process(target=_child, args=(str(path),), daemon=True)
        child.start()
        child.join(CHILD_TIMEOUT)
        if child.is_alive():
            child.kill()
            child.join()
            raise AssertionError(f"the scenario's child ran past {CHILD_TIMEOUT:g} s")
        code: int | None = child.exitcode
        assert code is not None
        if code not in (0, -signal.SIGKILL):
            raise AssertionError(f"the scenario's child exited {code} (its stderr says why)")
        return code

    @staticmethod
    def _outcome(workdir: Path) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads((workdir / "outcome.json").read_text("utf-8"))
        return loaded

    def check(
        self,
        target: str,
        *,
        journal_url: Callable[[Path], str],
        run_id: str = "crash-run",
        points: tuple[str, ...] = BOUNDARIES,
    ) -> CrashReport:
        """Kill ``target`` at every boundary of ``points`` it passes, resume, assert (see the
        module's text). ``journal_url(workdir)`` gives each case a fresh journal."""
        dry = self._case_dir("uninterrupted")
        assert self._spawn(target, dry, journal_url(dry), run_id, None) == 0
        assert self._outcome(dry)["status"] == "completed", "the scenario must run to the end"
        passed = (dry / "points.log").read_text("utf-8").split()
        seen: Counter[str] = Counter()
        cases: list[CrashCase] = []
        for point in passed:
            seen[point] += 1
            if point in points:
                cases.append(self._kill_and_resume(target, journal_url, run_id, point, seen[point]))
        return CrashReport(passed, cases)

    def _case_dir(self, name: str) -> Path:
        path = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self.root))
        return path

    def _kill_and_resume(
        self, target: str, journal_url: Callable[[Path], str], run_id: str, point: str, n: int
    ) -> CrashCase:
        case = CrashCase(point, n)
        workdir = self._case_dir(f"{point}-{n}")
        url = journal_url(workdir)
        code = self._spawn(target, workdir, url, run_id, [point, n])
        assert code == -signal.SIGKILL, f"the child was not killed at {point} #{n}"
        (workdir / "points.log").unlink()
        with contextlib.closing(open_journal(url)) as journal:
            left = {r.idempotency_key: r for r in journal.unfinished(run_id)}
        case.unfinished = sorted(left)
        for _ in range(1 + len(left)):
            assert self._spawn(target, workdir, url, run_id, None) == 0
            outcome = self._outcome(workdir)
            if outcome["status"] == "completed":
                break
            reported = [row["key"] for row in outcome["rows"]]
            # Only what the kill left unfinished is ever reported, and nothing twice.
            assert set(reported) <= set(left) and not set(reported) & set(case.reported), (
                f"{point} #{n}: reported {reported}, unfinished {sorted(left)}"
            )
            case.reported += reported
            with contextlib.closing(open_journal(url)) as journal:
                for key in reported:
                    journal.reconcile(key, reason="crash kit: reconciled by the test")
        assert outcome["status"] == "completed", f"{point} #{n}: the resumed run did not end"
        with contextlib.closing(open_journal(url)) as journal:
            rows = {r.idempotency_key: r for r in journal.calls(run_id)}
        for key in left:  # every unfinished call: reported, or resolved by its tool's rule
            assert key in case.reported or rows[key].finished, f"{point} #{n}: {key} lost"
        case.runs = _runs(workdir)
        twice = [
            call
            for call, count in case.runs.items()
            if call.startswith("non_idempotent ") and count > 1
        ]
        assert not twice, f"{point} #{n}: non-idempotent tool ran twice: {twice}"
        return case


_CONTEXT: Any = None


def _processes() -> Any:
    """Children come from a fork server that imported litellm and the gate once: each is a
    fresh process (nothing of the test's state), started in a fraction of the time a new
    interpreter importing litellm takes on a busy machine."""
    global _CONTEXT  # noqa: PLW0603 (one server per test process)
    if _CONTEXT is None:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["litellm", "litellm_toolgate.edge.gate", __name__])
        _CONTEXT = context
    return _CONTEXT


def _runs(workdir: Path) -> dict[str, int]:
    path = workdir / "effects.log"
    lines = path.read_text("utf-8").splitlines() if path.exists() else []
    return dict(Counter(lines))


@pytest.fixture
def crash_kit(tmp_path: Path) -> Iterator[CrashKit]:
    """A :class:`CrashKit` working in the test's temporary directory."""
    yield CrashKit(tmp_path)


__all__ = ["BOUNDARIES", "CrashCase", "CrashContext", "CrashKit", "CrashReport", "crash_kit"]

if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
