"""The frameworks lane: agent frameworks as real clients of the gate in ``litellm.callbacks``.

For every framework, call shape (streamed, whole, sync, async, as the framework makes them),
model route (``cometapi/``, ``openai/``) and scenario (``tests/fwscript.py``), the
framework's own agent runs against a loopback upstream: the valid flow runs the tool once
and ends in the final answer; a schema-invalid call, an unknown tool, duplicate keys, a
truncated stream, a ``finish_reason: "length"`` stop and bad JSON never reach the tool and
surface as the gate's typed error (itself, or in the chain of the framework's wrapper).

Each framework runs in a subprocess of its own virtualenv (their pins clash with each other:
``scripts/setup.sh --frameworks``), one case after another under a watchdog that kills a case
outliving ``CASE_LIMIT``; the whole subprocess is killed if it outlives the sum. A framework
whose environment or package is missing fails under CI and is reported as not run elsewhere.
Run alone: ``bash scripts/frameworks.sh``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fwclients
from fwscript import ANSWER, CASE_LIMIT, EXPECTED, MARK, REASONS, WARM_LIMIT, answer

from litellm_toolgate.loopback.upstream import FakeUpstream

ROOT = Path(__file__).resolve().parent.parent
HERE = Path(__file__).resolve().parent
# Which virtualenv holds which framework (setup.sh --frameworks builds them).
ENVS = {
    "agents": ".venv",
    "smolagents": ".venv-frameworks",
    "langchain": ".venv-frameworks",
    "adk": ".venv-frameworks",
    "dspy": ".venv-frameworks",
    "strands": ".venv-frameworks-2",
    "crewai": ".venv-frameworks-2",
}
# Framework call shapes whose wrapper exception keeps the gate's message but not the gate's
# exception: ``dspy.streamify`` re-raises the one failure of its task group ``from None``,
# which drops DSPy's own chain down to the gate's error (dspy 3.4.1, streaming/streamify.py).
CUT_CHAIN = {("dspy", "streamed"): "LMInvalidRequestError"}
ONLY = [f for f in os.environ.get("TOOLGATE_FRAMEWORKS", "").split(",") if f]
FRAMEWORKS = [f for f in ENVS if not ONLY or f in ONLY]
_results: dict[str, dict[str, dict[str, Any]]] = {}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream(answer) as server:
        yield server


def not_run(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"NOT RUN: {why}")
    pytest.skip(f"NOT RUN (this did not run; under CI it fails): {why}")


def results_of(framework: str, upstream: FakeUpstream) -> dict[str, dict[str, Any]]:
    if framework in _results:
        return _results[framework]
    python = ROOT / ENVS[framework] / "bin" / "python"
    out: dict[str, dict[str, Any]] = {}
    if not python.exists():
        out["*"] = {"absent": f"{python} does not exist (bash scripts/setup.sh --frameworks)"}
        _results[framework] = out
        return out
    ids = fwclients.case_ids(framework)
    env = {**os.environ, "PYTHONPATH": f"{ROOT}", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.update({"OPENAI_API_KEY": "sk-fw", "COMETAPI_KEY": "sk-fw", "CI": ""})
    env.update({"CREWAI_DISABLE_TELEMETRY": "true", "OTEL_SDK_DISABLED": "true"})
    try:
        proc = subprocess.run(
            [str(python), str(HERE / "fwscript.py"), framework, upstream.base_url],
            check=False,
            capture_output=True,
            text=True,
            timeout=CASE_LIMIT * len(ids) + WARM_LIMIT + 60,
            env=env,
            cwd=ROOT,
        )
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as expired:
        stdout = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else ""
        stderr, code = "the framework's process outlived its limit and was killed", -9
    started = None
    for line in stdout.splitlines():
        if MARK not in line:
            continue
        row = json.loads(line[line.index(MARK) + len(MARK) :])
        if row.get("start"):
            started = row["case"]
        elif "case" in row:
            out[row["case"]] = row
            started = None
    if started is not None:
        out[started] = {"killed": f"exit {code}; the watchdog's dump:\n{stderr[-4000:]}"}
    if not out and ("ModuleNotFoundError" in stderr or "ImportError" in stderr):
        out["*"] = {"absent": f"the framework did not import:\n{stderr[-2000:]}"}
    out.setdefault("", {"stderr": stderr[-4000:], "code": code})
    _results[framework] = out
    return out


def params() -> list[Any]:
    return [
        pytest.param(fw, case, id=f"{fw}-{case}")
        for fw in FRAMEWORKS
        for case in fwclients.case_ids(fw)
    ]


@pytest.mark.parametrize(("framework", "case"), params())
def test_framework_case(upstream: FakeUpstream, framework: str, case: str) -> None:
    results = results_of(framework, upstream)
    if "*" in results:
        not_run(f"{framework}: {results['*']['absent']}")
    row = results.get(case)
    assert row is not None, f"{case} never ran: {results['']}"
    assert "killed" not in row, f"{case} outlived {CASE_LIMIT} s and was killed: {row['killed']}"
    scenario = case.rsplit("-", 1)[1]
    assert not row["leak"], "argument text in the exception chain's messages"
    if scenario == "valid":
        assert row["chain"] == [], f"the valid flow raised {row['chain']}:\n{row['detail']}"
        assert row["ran"] == 1, f"the tool ran {row['ran']} times"
        assert ANSWER in (row["answer"] or ""), f"final answer {row['answer']!r}"
        return
    assert row["ran"] == 0, f"the tool ran {row['ran']} times on a refused call"
    wrapper = CUT_CHAIN.get((framework, case.rsplit("-", 2)[0]))
    if wrapper is not None:
        assert row["chain"][:1] == [wrapper], f"expected {wrapper}, got {row['chain']}"
        assert row["said"] in REASONS[scenario], (
            f"{wrapper} names {row['said']}, expected one of {REASONS[scenario]}"
        )
        return
    assert row["gate"] in EXPECTED[scenario], (
        f"expected {EXPECTED[scenario]} in the chain, got {row['chain']} "
        f"(gate: {row['gate']}, reason {row['reason']}):\n{row['detail']}"
    )


def test_docs_recipes_are_the_code_the_lane_runs() -> None:
    """docs/frameworks.md shows each recipe byte for byte as tests/fwclients.py runs it."""
    page = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    recipes = fwclients.recipes()
    assert set(recipes) == set(ENVS), f"recipes for {sorted(recipes)}, frameworks {sorted(ENVS)}"
    for name, code in recipes.items():
        block = f"<!-- recipe: {name} -->\n```text\n{code}```\n"
        assert block in page, f"docs/frameworks.md's {name} recipe differs from the lane's code"


def run_probe(name: str, env_dir: str, upstream: FakeUpstream) -> dict[str, str]:
    python = ROOT / env_dir / "bin" / "python"
    if not python.exists():
        not_run(f"{python} does not exist (bash scripts/setup.sh --frameworks)")
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{HERE}", "CI": ""}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True", "COMETAPI_KEY": "sk-fw"})
    try:
        proc = subprocess.run(
            [str(python), str(HERE / "fwprobes.py"), name, upstream.base_url],
            check=False,
            capture_output=True,
            text=True,
            timeout=90,
            env=env,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"the {name} probe outlived 90 s and was killed")
    found = dict(
        line.removeprefix("@probe ").split("=", 1)
        for line in proc.stdout.splitlines()
        if line.startswith("@probe ")
    )
    assert found, (
        f"the {name} probe printed nothing (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    )
    return found


def test_crewai_llm_empties_callbacks_and_an_agent_empties_them_again(
    upstream: FakeUpstream,
) -> None:
    found = run_probe("crewai", ".venv-frameworks-2", upstream)
    assert found == {
        "emptied": "True",
        "released_after_reset": "True",
        "warned": "True",
        "refused_with_callbacks": "True",
        "agent_ran_duplicate_keys_with_llm_callbacks": "True",
    }


def test_an_attempt_id_never_reads_as_a_rate_limit_to_smolagents(upstream: FakeUpstream) -> None:
    """Why a quarantine once took minutes under smolagents (docs/frameworks.md): its retry
    waits when an error's text holds ``429``, which a hex attempt id did once in about 140.
    From a uuid whose hex holds ``429``, the id is letters only: with smolagents' default
    retry the run ends at once with the gate's error, the tool never run."""
    found = run_probe("smolagents429", ".venv-frameworks", upstream)
    assert found["gate_error"] == "True"
    assert found["looks_like_rate_limit"] == "False"
    assert found["ran"] == "0"
    assert float(found["seconds"]) < 20
