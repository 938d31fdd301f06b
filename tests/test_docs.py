"""The docs cannot rot: every code block of the README and of ``docs/`` is checked.

* ```` ```python ````: run as a standalone script (``__main__``, a process of its own forked
  from one that imported litellm and the package, to save seconds per block), against the demo's
  fake upstream on 127.0.0.1 (``litellm_toolgate.demo.serve.demo_answer``: the ``multiply``
  call, the broken recording when the last user message says "broken", the answer once a
  tool result is sent), with ``TOOLGATE_DOCS_API_BASE`` set to its base URL,
  ``LITELLM_LOCAL_MODEL_COST_MAP=True`` and fake provider keys. It must exit 0 with nothing
  on stderr that looks like a traceback. The scripts run a few at a time.
* ```` ```yaml ````: parsed; a proxy config's ``guardrails:`` entries naming the gate are built
  the way a proxy builds them (``ToolGateGuardrail(guardrail_name=..., event_hook=mode,
  default_on=..., **params)``, from the repository root), and their keys must be settings the
  gate or litellm knows; a gate settings file goes through ``GateSettings`` and every setting
  is loaded (from ``config_examples/``, where the examples' settings live).
* ```` ```bash ````: not run. Every command must be one the project provides or a known tool,
  every script or repository path it names must exist, and ``toolgate`` subcommands must be
  the CLI's.
* ```` ```text ````: prose, unchecked. Any other language, or none, fails: a block must say
  what it is (and this test must learn to check a new language before a page uses it).

Relative links between the pages must resolve, except to the pages other work adds
(:data:`PENDING`); every page of ``docs/`` must be reachable from ``docs/index.md``; the
README stays under 300 lines.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from litellm_toolgate.demo.serve import demo_answer
from litellm_toolgate.loopback.upstream import FakeUpstream

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Pages other branches add; links to them are allowed before they exist.
PENDING = {"docs/routes.md", "docs/anthropic.md", "docs/configuration-changes.md"}
LANGUAGES = {"python", "yaml", "bash", "text"}
SCRIPT_TIMEOUT = 120
# Keys litellm itself reads from a guardrail entry's litellm_params (not the gate's settings).
LITELLM_GUARDRAIL_KEYS = {"guardrail", "mode", "default_on", "api_key", "api_base"}
# Commands a bash block may use besides the project's own scripts and console scripts.
KNOWN_COMMANDS = {
    "bash", "cd", "curl", "export", "git", "litellm", "pip", "python", "python3", "toolgate",
    "twine",
}  # fmt: skip
VENV_BINARIES = {"python", "pip", "toolgate", "litellm", "ruff", "mypy", "twine"}
REPO_PATH = re.compile(r"^(scripts|config_examples|tests|docs|fixtures|bench|litellm_toolgate)/")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    language: str
    text: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def _blocks() -> list[Block]:
    found: list[Block] = []
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        name = str(page.relative_to(ROOT))
        index = 0
        while index < len(lines):
            opening = re.match(r"^(`{3,})(.*)$", lines[index])
            if not opening:
                index += 1
                continue
            fence, language = opening[1], opening[2].strip()
            start = index
            index += 1
            body: list[str] = []
            while index < len(lines) and not lines[index].startswith(fence):
                body.append(lines[index])
                index += 1
            assert index < len(lines), f"{name}:{start + 1}: unclosed code block"
            found.append(Block(name, start + 1, language, "\n".join(body) + "\n"))
            index += 1
    return found


BLOCKS = _blocks()


def _of(language: str) -> list[Any]:
    return [pytest.param(b, id=b.id) for b in BLOCKS if b.language == language]


def test_every_block_says_what_it_is() -> None:
    unknown = [f"{b.id} {b.language or '(none)'}" for b in BLOCKS if b.language not in LANGUAGES]
    assert not unknown, f"code blocks with a language this test does not check: {unknown}"
    counts = {lang: sum(b.language == lang for b in BLOCKS) for lang in ("python", "yaml", "bash")}
    assert min(counts.values()) >= 2, counts


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) < 300


# ---- python: every block runs -----------------------------------------------------------------
# Importing litellm costs seconds of CPU per interpreter; the blocks share one import. A runner
# imports litellm and the package once, then forks one child per block (two at a time): each
# child runs its block as ``__main__`` from a clean copy of that state, in its own process,
# with its own stdout and stderr, and exits with the block's status (a traceback: 1).
RUNNER = r"""
import atexit, os, sys, time, traceback
import litellm, litellm_toolgate
from litellm_toolgate import ToolGate, ToolGateGuardrail

folder, timeout = sys.argv[1], float(sys.argv[2])
blocks = sorted(name for name in os.listdir(folder) if name.endswith(".py"))


def child(name):
    path = os.path.join(folder, name)
    for fd, suffix in ((1, ".out"), (2, ".err")):
        os.dup2(os.open(path + suffix, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    status = 0
    try:
        sys.argv = [path]
        with open(path, encoding="utf-8") as source:
            code = compile(source.read(), path, "exec")
        exec(code, {"__name__": "__main__", "__file__": path, "__builtins__": __builtins__})
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


running = {}
while blocks or running:
    while blocks and len(running) < 2:
        name = blocks.pop(0)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            child(name)
        running[pid] = (name, time.monotonic())
    pid, status = os.waitpid(-1, os.WNOHANG)
    if pid == 0:
        for pid, (name, started) in list(running.items()):
            if time.monotonic() - started > timeout:
                os.kill(pid, 9)
        time.sleep(0.02)
        continue
    name, _ = running.pop(pid)
    code = os.waitstatus_to_exitcode(status)
    with open(os.path.join(folder, name + ".rc"), "w") as out:
        out.write(str(code))
"""


@dataclass(frozen=True)
class Ran:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Ran]:
    """Every python block run against one fake upstream; their results by block id."""
    folder = tmp_path_factory.mktemp("docs-scripts")
    python = [b for b in BLOCKS if b.language == "python"]
    names = {b.id: f"block{n:03d}.py" for n, b in enumerate(python)}
    for block in python:
        (folder / names[block.id]).write_text(block.text, encoding="utf-8")
    with FakeUpstream(demo_answer) as upstream:
        env = {
            **{k: v for k, v in os.environ.items() if "proxy" not in k.lower()},
            "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "TOOLGATE_DOCS_API_BASE": upstream.base_url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "COMETAPI_KEY": "sk-docs-fake",
            "OPENAI_API_KEY": "sk-docs-fake",
            "ANTHROPIC_API_KEY": "sk-docs-fake",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        subprocess.run(
            [sys.executable, "-c", RUNNER, str(folder), str(SCRIPT_TIMEOUT)],
            cwd=folder,
            env=env,
            timeout=SCRIPT_TIMEOUT * (len(python) + 1),
            check=True,
        )
    results: dict[str, Ran] = {}
    for block_id, name in names.items():
        rc = folder / f"{name}.rc"
        results[block_id] = Ran(
            int(rc.read_text()) if rc.exists() else -1,
            (folder / f"{name}.out").read_text(errors="replace"),
            (folder / f"{name}.err").read_text(errors="replace"),
        )
    return results


@pytest.mark.parametrize("block", _of("python"))
def test_python_block_runs(block: Block, runs: dict[str, Ran]) -> None:
    result = runs[block.id]
    assert result.returncode == 0, f"{block.id} failed:\n{result.stdout}\n{result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr


# ---- yaml: configs load the way the proxy loads them ----------------------------------------
def _check_guardrail(entry: dict[str, Any]) -> None:
    from litellm_toolgate import ToolGateGuardrail
    from litellm_toolgate.edge.config import SETTING_KEYS

    params = dict(entry["litellm_params"])
    if params.get("guardrail") != "litellm_toolgate.ToolGateGuardrail":
        return
    unknown = set(params) - SETTING_KEYS - LITELLM_GUARDRAIL_KEYS
    assert not unknown, f"keys neither the gate nor litellm knows: {sorted(unknown)}"
    assert params.get("mode") == "post_call", "the gate's hooks run only with mode: post_call"
    settings = {k: v for k, v in params.items() if k in SETTING_KEYS}
    ToolGateGuardrail(
        guardrail_name=entry["guardrail_name"],
        event_hook=params["mode"],
        default_on=bool(params.get("default_on", False)),
        base_dir=ROOT,
        **settings,
    )


@pytest.mark.parametrize("block", _of("yaml"))
def test_yaml_block_loads(block: Block) -> None:
    from litellm_toolgate.edge.config import SETTING_KEYS, GateSettings

    loaded = yaml.safe_load(block.text)
    assert isinstance(loaded, dict), "a YAML block must be a mapping"
    if "guardrails" in loaded or "model_list" in loaded or "litellm_settings" in loaded:
        for model in loaded.get("model_list", []):
            assert {"model_name", "litellm_params"} <= set(model), model
        for entry in loaded.get("guardrails", []):
            _check_guardrail(entry)
        return
    assert set(loaded) <= SETTING_KEYS, f"not a proxy config nor gate settings: {sorted(loaded)}"
    settings = GateSettings.from_mapping(loaded)
    settings.gate_arguments(ROOT / "config_examples")


# ---- bash: what it names exists -------------------------------------------------------------
def _commands(text: str) -> Iterator[list[str]]:
    logical = re.sub(r"\\\n", " ", text)
    for raw in logical.splitlines():
        line = re.sub(r"\$\([^)]*\)", "X", re.sub(r"(^|\s)#.*$", "", raw).strip())
        for part in re.split(r"&&|\|\||;|\||&", line):
            try:
                words = shlex.split(part)
            except ValueError:
                words = part.split()
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words.pop(0)
            if words:
                yield words


def _toolgate_subcommands() -> set[str]:
    import argparse

    from litellm_toolgate import cli

    names: set[str] = set()
    original = argparse.ArgumentParser.parse_args

    def capture(self: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> Any:
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                names.update(action.choices)
        raise SystemExit(0)

    argparse.ArgumentParser.parse_args = capture  # type: ignore[method-assign,assignment]
    try:
        with pytest.raises(SystemExit):
            cli.main([])
    finally:
        argparse.ArgumentParser.parse_args = original  # type: ignore[method-assign]
    return names


@pytest.mark.parametrize("block", _of("bash"))
def test_bash_block_names_what_exists(block: Block) -> None:
    subcommands = _toolgate_subcommands()
    for words in _commands(block.text):
        command = words[0]
        if "/" in command:
            if command.startswith(".venv"):
                assert Path(command).name in VENV_BINARIES, f"{block.id}: {command}"
                command = Path(command).name
            else:
                assert (ROOT / command).exists(), f"{block.id}: no {command}"
                continue
        assert command in KNOWN_COMMANDS, f"{block.id}: unknown command {command!r}"
        if command in ("bash", "python", "python3") and len(words) > 1:
            target = words[1]
            if not target.startswith("-"):
                assert (ROOT / target).exists(), f"{block.id}: no {target}"
        if command == "toolgate":
            assert len(words) > 1 and words[1] in subcommands, f"{block.id}: {words}"
        for word in words[1:]:
            if REPO_PATH.match(word) and "*" not in word:
                assert (ROOT / word.rstrip(",.;:")).exists(), f"{block.id}: no {word}"


# ---- links between the pages ----------------------------------------------------------------
def _links(page: Path) -> Iterator[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if not re.match(r"^[a-z]+:", target) and not target.startswith("#"):
            yield target.split("#")[0]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    for target in _links(page):
        resolved = (page.parent / target).resolve()
        name = str(resolved.relative_to(ROOT)) if resolved.is_relative_to(ROOT) else target
        assert resolved.exists() or name in PENDING, f"{page.name} links to missing {target}"


def test_every_docs_page_is_reachable_from_the_index() -> None:
    index = ROOT / "docs" / "index.md"
    linked = {(index.parent / t).resolve() for t in _links(index)}
    pages = set((ROOT / "docs").glob("*.md")) - {index}
    missing = sorted(p.name for p in pages if p.resolve() not in linked)
    assert not missing, f"docs pages not linked from docs/index.md: {missing}"
