"""Built-in gate policies and their composition (see docs/policies.md).

- :func:`all_of` / ``a & b``: every member must approve (sync and async members alike).
- :class:`PathScope`: declared path arguments must resolve inside a root, symlinks followed;
  :meth:`PathScope.resolve_paths` gives the tool the resolved paths.
- :class:`CommandAllowList` with :class:`Allow` rules: argument vectors (never shell strings)
  of allowed programs, with the known bypasses refused (:data:`BYPASSES`);
  :func:`resolve_argv` gives the tool the vector with its program resolved.
- :class:`ApprovalPolicy`: a human's approval, bound to the argument digest, the schema
  digest, the policy version and an expiry; a timeout is ``expired``, never a denial.

The tool loop calls :func:`confirm_at_start` / :func:`aconfirm_at_start` and
:func:`tool_arguments` on the gate's policy, whatever it is composed of.

Denials carry a :class:`DenyReason` (read it back with :func:`deny_reason`), never argument
text. Nothing here imports litellm.
"""

from __future__ import annotations

from ..core.rules.approval import ApprovalRequest, Grant, describe
from ..core.rules.commands import (
    BYPASSES,
    EXEC_OPTIONS,
    GRAMMARS,
    Allow,
    CommandAllowList,
    Grammar,
    check_argv,
    check_grammar,
    compile_grammar,
)
from ..core.rules.compose import (
    AllOf,
    DenyReason,
    GatePolicy,
    PolicyAnswerInvalid,
    all_of,
    deny_reason,
)
from .approval import ApprovalPolicy
from .checks import aconfirm_at_start, confirm_at_start, members, tool_arguments
from .commands import CommandRefused, resolve_argv
from .paths import PathRefused, PathScope, resolve_inside

__all__ = [
    "GRAMMARS",
    "Grammar",
    "check_grammar",
    "compile_grammar",
    "BYPASSES",
    "EXEC_OPTIONS",
    "AllOf",
    "Allow",
    "ApprovalPolicy",
    "ApprovalRequest",
    "CommandAllowList",
    "CommandRefused",
    "DenyReason",
    "GatePolicy",
    "Grant",
    "PathRefused",
    "PathScope",
    "PolicyAnswerInvalid",
    "aconfirm_at_start",
    "all_of",
    "check_argv",
    "confirm_at_start",
    "deny_reason",
    "describe",
    "members",
    "resolve_argv",
    "resolve_inside",
    "tool_arguments",
]
