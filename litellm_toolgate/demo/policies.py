"""Example composed policy for the YAML configs: ``litellm_toolgate.demo.policies:workspace``.

``write_file`` paths must resolve inside the workspace folder (``TOOLGATE_WORKSPACE``, else
the working directory at import), and a ``run_command`` tool may run ``git status`` /
``git diff`` / ``git log`` as an argument vector. Built when the module is imported, so a
workspace that does not exist stops the proxy at start-up (fail closed).
"""

from __future__ import annotations

import os

from ..policies import Allow, CommandAllowList, PathScope

WORKSPACE = os.environ.get("TOOLGATE_WORKSPACE") or os.getcwd()

workspace = PathScope(WORKSPACE, paths={"write_file": ("path",)}) & CommandAllowList(
    [Allow("git", args=("status", "diff", "log", "--oneline", "--stat"))],
    tools={"run_command": "argv"},
)
