"""The gate's typed entry points, as a user's editor sees them: ``mypy --strict`` on a small
user file (``tests/typing/user_code.py``) must infer ``GatedStream`` / ``AsyncGatedStream``
for ``stream=True`` and litellm's response types otherwise, with no cast; and it must reject
each line of ``tests/typing/wrong_code.py`` marked ``# wrong`` (so the check cannot pass by
everything being ``Any``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TYPING = Path(__file__).resolve().parent / "typing"


def test_overloads_give_the_gated_stream_types_without_casts() -> None:
    files = [TYPING / "user_code.py", TYPING / "wrong_code.py"]
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", *map(str, files)],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
    )
    errors: dict[str, set[int]] = {}
    for line in result.stdout.splitlines():
        found = re.match(r"(.+?\.py):(\d+): error:", line)
        if found:
            errors.setdefault(Path(found[1]).name, set()).add(int(found[2]))
    assert "user_code.py" not in errors, result.stdout
    wrong = (TYPING / "wrong_code.py").read_text().splitlines()
    marked = {n for n, text in enumerate(wrong, 1) if re.search(r"# wrong\b", text) and n > 3}
    assert len(marked) == 4
    assert errors.get("wrong_code.py") == marked, result.stdout
