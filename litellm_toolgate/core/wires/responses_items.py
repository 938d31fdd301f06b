"""The Responses API's item taxonomy: who runs each output item, and what its input must be.

:data:`ITEMS` is the one table that says, for every output item type the gate knows, who
executes it and therefore what the gate does with it:

* **client** items are actions the caller is asked to run (``function_call``,
  ``custom_tool_call``, ``local_shell_call``, ``shell_call``, ``apply_patch_call``,
  ``computer_call``). They are withheld and gated like function calls: every stage must
  agree, the input is validated as far as its declaration allows (:func:`check_input`), and
  the policy sees each with its type.
* **server** items report a tool the upstream already ran (``web_search_call``,
  ``file_search_call``, ``code_interpreter_call``, ``image_generation_call``,
  ``mcp_list_tools``, ``mcp_call``, ``mcp_approval_request``, ``tool_search_call``,
  ``tool_search_output``, ``shell_call_output``). They are held with the calls, shown to
  the policy and the records, and never handed back as something to run. A client item type
  the request's declarations say the server runs itself (a ``shell_call`` under a hosted
  shell, an xAI X search step streamed as a ``custom_tool_call``: :func:`runs_on_server`)
  is such a report too.
* **nobody**: items that are no tool at all (``message``, ``reasoning``, ``compaction``,
  ``program``, ``program_output``) pass.

Any other item type is a tool the gate cannot classify: ``unsupported_tool_type``.
:data:`NOT_SUPPORTED_YET` names the ones seen in real servers' streams that the gate does
not support yet (refused with that reason), and why.

The wire module (``core/wires/responses.py``) reads the events that carry these items; the
ledger, the call accumulator and the tool registry read this table too, which is why it is
a module of its own beside the wire's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from ..enums import IdentityEnum


class Executor(IdentityEnum):
    """Who runs what an item describes."""

    CLIENT = "client"
    SERVER = "server"
    NOBODY = "nobody"


class Input(IdentityEnum):
    """What a client item's input is, and so how the gate can check it."""

    JSON_ARGUMENTS = "json_arguments"  # strict JSON object + the tool's JSON Schema
    FREE_TEXT = "free_text"  # the custom tool's declared format (text, or a grammar)
    STRUCTURE = "structure"  # a structured action or operation whose shape is checked
    REPORT = "report"  # nothing to run: the server's own account of what it did
    NONE = "none"


@dataclass(frozen=True, slots=True)
class ItemRule:
    """How one item type is treated."""

    executor: Executor
    input: Input
    field: str | None = None
    """The item field that holds the input (``arguments``, ``input``, ``action``...); None
    when the input is several fields (a computer call's ``action`` or batched ``actions``),
    then given to the check as an object of those fields (:data:`INPUT_FIELDS`)."""
    tool: str | None = None
    """The name the policy sees when the item carries none (``shell``, ``apply_patch``)."""
    declared_by: frozenset[str] = frozenset()
    """Request tool types that declare this tool; a call nobody declared is unknown."""
    events: tuple[str, ...] = ()
    """Prefixes of the events that stream this item's progress or input."""
    label: str = ""
    """What the gate does, in words (for the documentation table)."""
    hosted_by: frozenset[str] = frozenset()
    """Request declarations under which the server runs a client item itself: the item is
    then the server's report (:func:`runs_on_server`), never released to run."""
    has_status: bool = True
    """Whether the item's type has a ``status`` (openai-python ``types/responses/``). One
    without it (a custom tool call) is finished by its events, not by a status: an
    ``in_progress`` it carries anyway at ``output_item.done`` or in the completed listing
    says nothing; any other status but ``completed`` still contradicts a completed item."""
    settled: bool = False
    """A report whose status the completed listing must give as ``completed`` (its type's
    status is ``in_progress``, ``completed`` or ``incomplete``, nothing else)."""
    hosted_names: frozenset[str] = frozenset()
    """The names a hosted item may carry (empty: any), for tools the server names itself."""


C, S, N = Executor.CLIENT, Executor.SERVER, Executor.NOBODY
_REPORT = "held with the calls; shown to the policy and the records; never released to run"

ITEMS: Mapping[str, ItemRule] = {
    "function_call": ItemRule(
        C, Input.JSON_ARGUMENTS, "arguments", None, frozenset({"function"}),
        ("response.function_call_arguments.",),
        "withheld; strict JSON + the tool's JSON Schema; policy; released on approval",
    ),
    # xAI runs its own X search on the server and streams each of its steps as a
    # custom_tool_call named by xAI (docs.x.ai "Tools overview": built-in tools run on xAI's
    # servers; "X Search": the x_search tool; the recorded stream of vercel/ai
    # packages/xai/src/responses/__fixtures__/xai-x-search-tool.chunks.txt names them
    # x_keyword_search, view_x_video...). Client tools on xAI are function tools, so such a
    # call, under a declared x_search and with no custom tool of its name, is a report.
    "custom_tool_call": ItemRule(
        C, Input.FREE_TEXT, "input", None, frozenset({"custom"}),
        ("response.custom_tool_call_input.",),
        "withheld; must be a declared custom tool; a text format needs nothing more, a "
        "grammar's (lark, regex) must accept the whole input (core/values/grammar.py); policy",
        has_status=False,  # response_custom_tool_call.py: call_id, input, name, id...
        hosted_by=frozenset({"x_search"}),
        hosted_names=frozenset({
            "x_keyword_search", "x_semantic_search", "x_user_search", "x_thread_fetch",
            "view_x_video", "view_image",
        }),
    ),
    "local_shell_call": ItemRule(
        C, Input.STRUCTURE, "action", "local_shell", frozenset({"local_shell"}), (),
        "withheld; the exec action's shape (a non-empty list of strings) checked; policy",
    ),
    # The hosted shell: a shell tool declared with a container environment
    # (openai-python types/responses/function_shell_tool.py: environment container_auto or
    # container_reference; a local environment, or none, is the caller's own shell) is run
    # by the server, which answers each shell_call with its shell_call_output in the same
    # response (response_function_shell_tool_call_output.py). Declared as ``shell:hosted``.
    "shell_call": ItemRule(
        C, Input.STRUCTURE, "action", "shell", frozenset({"shell"}),
        ("response.shell_call",),
        "withheld; the commands' shape checked; policy; released on approval",
        hosted_by=frozenset({"shell:hosted"}),
    ),
    "apply_patch_call": ItemRule(
        C, Input.STRUCTURE, "operation", "apply_patch", frozenset({"apply_patch"}),
        ("response.apply_patch_call",),
        "withheld; the operation checked, its diff must parse as that operation; policy",
    ),
    "computer_call": ItemRule(
        C, Input.STRUCTURE, None, "computer",
        frozenset({"computer", "computer_use", "computer_use_preview"}), (),
        "withheld; one action or a batch of actions, each of a known type; policy",
    ),
    "web_search_call": ItemRule(
        S, Input.REPORT, None, "web_search", events=("response.web_search_call.",),
        label=_REPORT,
    ),
    "file_search_call": ItemRule(
        S, Input.REPORT, None, "file_search", events=("response.file_search_call.",),
        label=_REPORT,
    ),
    "code_interpreter_call": ItemRule(
        S, Input.REPORT, None, "code_interpreter",
        events=("response.code_interpreter_call",), label=_REPORT,
    ),
    "image_generation_call": ItemRule(
        S, Input.REPORT, None, "image_generation",
        events=("response.image_generation_call.",), label=_REPORT,
    ),
    "mcp_list_tools": ItemRule(
        S, Input.REPORT, None, "mcp_list_tools", events=("response.mcp_list_tools.",),
        label=_REPORT,
    ),
    "mcp_call": ItemRule(
        S, Input.REPORT, None, "mcp", events=("response.mcp_call",), label=_REPORT,
    ),
    # The client's approval is a decision about these arguments: they are parsed strictly
    # (core/values/strictjson.py) and the policy sees them as an object (``field`` names them).
    # Shape: openai-python types/responses/response_output_item.py, McpApprovalRequest
    # (id, name, server_label, arguments: "A JSON string of arguments for the tool").
    "mcp_approval_request": ItemRule(
        S, Input.REPORT, "arguments", "mcp_approval_request",
        label="held with the calls; its `arguments` parsed strictly (a JSON object) and "
        "shown to the policy as an object; never released to run",
    ),
    # openai-python types/responses/response_tool_search_call.py and
    # response_tool_search_output_item.py: ``execution`` says who ran the search; the gate
    # reads those the server ran (``execution: "server"``; any other is not supported yet,
    # :data:`SERVER_EXECUTION`), and the tools they loaded.
    "tool_search_call": ItemRule(
        S, Input.REPORT, None, "tool_search", events=("response.tool_search_call.",),
        label=_REPORT, settled=True,
    ),
    "tool_search_output": ItemRule(
        S, Input.REPORT, None, "tool_search",
        label="held with the calls (the tools a server-run search loaded); shown to the "
        "policy and the records; never released to run", settled=True,
    ),
    # The output of a shell call the hosted shell ran: only under a declared hosted shell.
    "shell_call_output": ItemRule(
        S, Input.REPORT, None, "shell", frozenset({"shell:hosted"}),
        label="held with the calls, only under a declared hosted shell (its shell_call is "
        "then a report too); shown to the policy and the records; never released to run",
        settled=True,
    ),
    **{
        kind: ItemRule(N, Input.NONE, label="passes (no tool)")
        for kind in ("message", "reasoning", "compaction", "program", "program_output")
    },
}  # fmt: skip
del C, S, N

SERVER_EXECUTION = frozenset({"tool_search_call", "tool_search_output"})
"""Items whose ``execution`` field says who ran them: only ``"server"`` is read; a search the
client is to run (``"client"``) is refused ``unsupported_tool_type``, not supported yet."""

NOT_SUPPORTED_YET: Mapping[str, str] = {
    # Outputs the client sends back: an upstream streaming one is not a shape the gate reads.
    "custom_tool_call_output": "a custom tool's output (an input item, never streamed)",
    "function_call_output": "a function's output (an input item, never streamed)",
}
"""Item types refused ``unsupported_tool_type`` because the gate does not support them yet."""

INPUT_FIELDS: Mapping[str, tuple[str, ...]] = {"computer_call": ("action", "actions")}
"""The fields that together are the input of an item whose rule names no single field."""

CLIENT_ITEMS = frozenset(k for k, r in ITEMS.items() if r.executor is Executor.CLIENT)
SERVER_ITEMS = frozenset(k for k, r in ITEMS.items() if r.executor is Executor.SERVER)
PASSING_ITEMS = frozenset(k for k, r in ITEMS.items() if r.executor is Executor.NOBODY)
GATED_ITEMS = CLIENT_ITEMS | SERVER_ITEMS
"""Items the gate withholds and takes through the policy (client calls and server reports)."""

# Request tool types that are not function tools but that the Responses taxonomy knows: the
# registry accepts their declarations (it validates only function tools' schemas).
DECLARED_TOOL_TYPES = frozenset(
    {t for r in ITEMS.values() for t in r.declared_by}
    | {
        "web_search", "web_search_preview", "file_search", "code_interpreter",
        "image_generation", "mcp", "tool_search", "programmatic_tool_calling", "x_search",
    }
) - {"function", "shell:hosted"}  # fmt: skip

HOSTED_ENVIRONMENTS = frozenset({"container_auto", "container_reference"})
"""A shell tool's ``environment`` types under which the server runs it (the hosted shell)."""


def declaration(tool: Mapping[str, object]) -> str:
    """What a non-function tool of the taxonomy declares: its type, or ``shell:hosted`` for
    a shell in a container (:data:`HOSTED_ENVIRONMENTS`)."""
    kind = str(tool.get("type"))
    environment = tool.get("environment")
    if (
        kind == "shell"
        and isinstance(environment, Mapping)
        and environment.get("type") in HOSTED_ENVIRONMENTS
    ):
        return "shell:hosted"
    return kind


def runs_on_server(kind: str, name: str, declared: frozenset[str]) -> bool:
    """Whether a client item of this kind and name was run by the server itself, given the
    request's declarations (:attr:`ItemRule.hosted_by`): a custom tool the request declared
    by that name is always the caller's."""
    rule = ITEMS[kind]
    if declared.isdisjoint(rule.hosted_by):
        return False
    if kind == "custom_tool_call" and f"custom:{name}" in declared:
        return False
    return not rule.hosted_names or name in rule.hosted_names


# ---- inputs ----------------------------------------------------------------------------------
_COMPUTER_ACTIONS = frozenset(
    {
        "click", "double_click", "drag", "keypress", "move", "screenshot", "scroll", "type",
        "wait",
    }
)  # fmt: skip
_PATCH_OPERATIONS = frozenset({"create_file", "update_file", "delete_file"})


def _strings(value: object, *, empty: bool = False) -> bool:
    return (
        isinstance(value, list)
        and (empty or bool(value))
        and all(isinstance(v, str) for v in value)
    )


def _optional_int(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def check_input(item_kind: str, value: object) -> str | None:
    """Check a structured client item's input; the failing part's name, or None when sound.

    Shapes: ``local_shell_call.action`` is ``{"type": "exec", "command": [str, ...]}``;
    ``shell_call.action`` holds ``commands: [str, ...]``; a computer call holds either one
    ``action`` or a non-empty batch ``actions``, each with a known ``type``;
    ``apply_patch_call.operation`` is a create/update/delete of a ``path`` whose ``diff``
    parses as that operation (:func:`diff_fault`).
    """
    if not isinstance(value, Mapping):
        return "/"
    if item_kind == "local_shell_call":
        if value.get("type") != "exec":
            return "/type"
        if not _strings(value.get("command")):
            return "/command"
        env = value.get("env")
        if env is not None and not (
            isinstance(env, Mapping) and all(isinstance(v, str) for v in env.values())
        ):
            return "/env"
        if not _optional_int(value.get("timeout_ms")):
            return "/timeout_ms"
        return None
    if item_kind == "shell_call":
        if not _strings(value.get("commands")):
            return "/commands"
        for key in ("timeout_ms", "max_output_length"):
            if not _optional_int(value.get(key)):
                return f"/{key}"
        return None
    if item_kind == "computer_call":
        if set(value) == {"action"}:
            actions, where = [value["action"]], "/action"
        elif set(value) == {"actions"} and isinstance(value["actions"], list) and value["actions"]:
            actions, where = value["actions"], "/actions"
        else:
            return "/"
        for action in actions:
            if not isinstance(action, Mapping) or action.get("type") not in _COMPUTER_ACTIONS:
                return where
        return None
    if item_kind == "apply_patch_call":
        operation = value.get("type")
        path = value.get("path")
        if operation not in _PATCH_OPERATIONS:
            return "/type"
        if not isinstance(path, str) or not path or "\x00" in path:
            return "/path"
        return diff_fault(str(operation), value.get("diff"))
    return "/"


_HUNK = re.compile(r"@@")


def diff_fault(operation: str, diff: object) -> str | None:
    """Whether ``diff`` parses as ``operation`` (the line-oriented patch format of the tool).

    ``create_file``: the new file, every line added (``+``). ``update_file``: context
    (`` ``), removed (``-``) and added (``+``) lines, optionally under ``@@`` anchors, with
    at least one change. ``delete_file``: no diff. None when it parses, else ``/diff``.
    """
    if operation == "delete_file":
        return None if diff in (None, "") else "/diff"
    if not isinstance(diff, str) or not diff:
        return "/diff"
    lines = diff.split("\n")
    if lines[-1] == "":
        lines.pop()
    if operation == "create_file":
        return None if lines and all(line.startswith("+") for line in lines) else "/diff"
    changed = False
    for line in lines:
        if line.startswith(("+", "-")):
            changed = True
        elif not (line.startswith(" ") or line in ("", "*** End of File") or _HUNK.match(line)):
            return "/diff"
    return None if changed else "/diff"
