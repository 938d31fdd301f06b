"""The package as a user gets it: built, checked, installed into a fresh virtualenv, run.

``python -m build`` makes the sdist and then the wheel *from the sdist* (so a file missing
from the sdist breaks the wheel), and ``twine check`` passes on both. A fresh virtualenv
(``python -m venv``, on the base interpreter, no site packages) gets the wheel with
``pip install --no-deps --no-index``. Its dependencies (litellm and the rest) cannot be
downloaded here, so a ``.pth`` file makes the test environment's site-packages visible
*after* the new venv's own: a plain path entry, whose own ``.pth`` files (the editable
install of the checkout among them) are not processed. The test then requires that
``litellm_toolgate`` imports from inside the new venv, not from the checkout, and that its
``toolgate demo`` console script prints 56 and quarantines the broken stream.

The build needs the build backend named in ``pyproject.toml``: when this environment has it
(setuptools >= 77 and wheel) the build runs offline (``--no-isolation``); otherwise ``build``
fetches it from the package index into an isolated environment, as ``scripts/setup.sh``
fetches everything else.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import tomllib
from pathlib import Path
from typing import Any

import pytest

import litellm_toolgate

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION = PYPROJECT["project"]["version"]


def test_the_version_is_kept_in_one_agreement() -> None:
    assert litellm_toolgate.__version__ == VERSION
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert re.search(rf"^## {re.escape(VERSION)}\b", changelog, re.M), "CHANGELOG has no entry"


def _backend_here() -> bool:
    try:
        setuptools = tuple(int(p) for p in importlib.metadata.version("setuptools").split(".")[:2])
        importlib.metadata.version("wheel")
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return False
    return setuptools >= (77, 0)


def _run(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, timeout=300, check=False, **options
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_the_built_wheel_installs_into_a_fresh_venv_and_runs_the_demo(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    build = [sys.executable, "-m", "build", "--outdir", str(dist)]
    if _backend_here():
        build.append("--no-isolation")
    _run([*build, str(ROOT)], cwd=tmp_path, env=clean)
    wheels = sorted(dist.glob(f"litellm_toolgate-{VERSION}-*.whl"))
    sdists = sorted(dist.glob(f"litellm_toolgate-{VERSION}.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(dist.iterdir())
    _run([sys.executable, "-m", "twine", "check", "--strict", str(wheels[0]), str(sdists[0])])

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    site = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"])
    (Path(site.stdout.strip()) / "toolgate_test_deps.pth").write_text(
        sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8"
    )
    _run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
         "--no-deps", "--no-index", str(wheels[0])],
        env=clean,
    )  # fmt: skip

    where = _run(
        [
            str(python),
            "-c",
            "import litellm_toolgate as t; print(t.__file__); print(t.__version__)",
        ],
        cwd=tmp_path,
        env=clean,
    ).stdout.split()
    assert Path(where[0]).resolve().is_relative_to(venv.resolve()), where
    assert where[1] == VERSION
    demo = _run(
        [str(venv / "bin" / "toolgate"), "demo"],
        cwd=tmp_path,
        env={**clean, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    assert "56" in demo.stdout, demo.stdout
    assert "quarantined" in demo.stdout, demo.stdout


@pytest.mark.parametrize("extra", ["test", "lint", "fuzz"])
def test_the_readme_names_every_extra(extra: str) -> None:
    assert extra in PYPROJECT["project"]["optional-dependencies"]
    assert f"`{extra}`" in (ROOT / "README.md").read_text(encoding="utf-8")
