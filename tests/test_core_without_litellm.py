"""The core, and the package's top level, work in an interpreter where litellm cannot load."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from conftest import CASES, CHAT, MANIFEST

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import importlib.abc
    import json
    import sys


    class NoLitellm(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "litellm" or name.startswith("litellm."):
                raise ImportError(f"{name} is blocked by the test")
            return None


    sys.meta_path.insert(0, NoLitellm())
    try:
        import litellm  # noqa: F401
    except ImportError:
        pass
    else:
        raise SystemExit("the blocker did not block")

    import litellm_toolgate.core as core
    import litellm_toolgate

    tools, body, expected = json.loads(sys.stdin.read())
    attempt = core.Attempt(core.ToolRegistry.from_tools(tools))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    attempt.receive_bytes(body.encode("utf-8"))
    attempt.receive_eof()
    for call in attempt.conclude():
        attempt.decide(call.index, core.PolicyDecision.approve())
    released = [
        {"index": c.index, "id": c.call_id, "name": c.name, "arguments": c.arguments}
        for c in attempt.release()
    ]
    assert released == expected, released

    # The lazily imported edge is the one part that needs litellm.
    try:
        litellm_toolgate.ToolGate
    except ImportError:
        toolgate = "ImportError"
    else:
        toolgate = "imported"
    print(json.dumps({
        "released": len(released),
        "toolgate": toolgate,
        "top_level": sorted(n for n in litellm_toolgate.__all__ if n in vars(litellm_toolgate)),
        "litellm_modules": sorted(m for m in sys.modules if m.split(".")[0] == "litellm"),
    }))
    """
)


def test_core_and_top_level_import_and_run_without_litellm() -> None:
    case = CASES["multiply_basic"]
    payload = json.dumps(
        [MANIFEST["tools"], (CHAT / case["body"]).read_text(encoding="utf-8"), case["calls"]]
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        input=payload,
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["released"] == 1
    assert report["litellm_modules"] == []
    assert report["toolgate"] == "ImportError"
    assert {"ToolCallQuarantined", "Limits", "QuarantineReason"} <= set(report["top_level"])
