"""Running an allowed argument vector: the program resolved once, on a search path you give.

:func:`resolve_argv` is what a command tool calls before ``subprocess.run(argv)``: it
checks the vector against the allow-list again (the gate's decision was made on the
model's text; the tool runs now) and replaces a bare program name by the absolute path it
resolves to on ``search_path`` (never the inherited ``PATH``, which whoever controls the
environment controls). A rule written with an absolute path is used as it is.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

from ..core.errors import ToolGateError
from ..core.rules.commands import CommandAllowList, check_argv
from ..core.rules.compose import DenyReason

__all__ = ["CommandRefused", "resolve_argv"]


class CommandRefused(ToolGateError):
    """The vector is refused by the allow-list, or its program is not found. No argv text."""

    def __init__(self, reason: DenyReason) -> None:
        super().__init__(f"command refused: {reason.value}")
        self.reason = reason


def resolve_argv(argv: Any, allow: CommandAllowList, *, search_path: str = os.defpath) -> list[str]:
    """``argv`` checked again, its program replaced by the absolute path it resolves to."""
    outcome = _resolved(argv, allow, search_path)
    del argv  # raised below from a frame that holds no argument text
    if isinstance(outcome, DenyReason):
        raise CommandRefused(outcome)
    return outcome


def _resolved(argv: Any, allow: CommandAllowList, search_path: str) -> list[str] | DenyReason:
    reason = check_argv(argv, allow.rules)
    if reason is not None:
        return reason
    program: str = argv[0]
    if program.startswith("/"):
        return list(argv)
    found = shutil.which(program, path=search_path)
    if found is None or not os.path.isabs(found):
        return DenyReason.COMMAND_PROGRAM
    return [os.path.realpath(found), *argv[1:]]
