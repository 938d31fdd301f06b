"""The built-in policies as ``ToolGate(policy=...)``, through the real litellm over loopback.

The fake upstream streams a ``write_file`` or ``run`` call whose arguments carry the canary;
the gate runs the composed policy on it, sync and async. Shown here: an approval that times
out is recorded EXPIRED and quarantines as a policy denial; an approval given for other
arguments (same call id) asks again; a path outside the root and a shell interpreter are
quarantined as policy denials with typed reasons; nothing of the arguments reaches the
exception, its chain, its frames or any log record.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from conftest import CANARY
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger
from loopback import released, run

from litellm_toolgate import PolicyDecision, PolicyDenied, QuarantineReason, ToolGate
from litellm_toolgate.core.rules.journal import ApprovalStatus
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted
from litellm_toolgate.policies import (
    Allow,
    ApprovalPolicy,
    ApprovalRequest,
    CommandAllowList,
    DenyReason,
    PathScope,
    deny_reason,
)

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "write_file",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run",
            "parameters": {
                "type": "object",
                # Loose on purpose: a string gets past this schema and meets the policy.
                "properties": {"argv": {"type": ["array", "string"]}},
                "required": ["argv"],
            },
        },
    },
]


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def tool_stream(name: str, arguments: dict[str, Any], call_id: str = "call_w1") -> bytes:
    """A well-formed chat stream with one tool call, its arguments in three fragments."""
    head = {"id": "chatcmpl-pol", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    text = json.dumps(arguments)
    cut = [
        text[: len(text) // 3],
        text[len(text) // 3 : 2 * len(text) // 3],
        text[2 * len(text) // 3 :],
    ]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return sse({**head, "choices": [choice]})

    first = {
        "index": 0,
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": cut[0]},
    }
    body = chunk({"role": "assistant", "content": None, "tool_calls": [first]})
    for piece in cut[1:]:
        body += chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
    return body + chunk({}, "tool_calls") + b"data: [DONE]\n\n"


class Human:
    def __init__(self, answer: bool = True) -> None:
        self.answer = answer
        self.requests: list[ApprovalRequest] = []

    def __call__(self, request: ApprovalRequest) -> bool:
        self.requests.append(request)
        return self.answer


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "workspace"
    (workspace / "src").mkdir(parents=True)
    (workspace / "escape").symlink_to(tmp_path)
    return workspace


def scope_and_commands(root: Path) -> Any:
    return PathScope(root, paths={"write_file": ("path",)}) & CommandAllowList(
        [Allow("git", args=("status", "diff"))], tools={"run": "argv"}
    )


def denied(exc: Any) -> DenyReason | None:
    assert isinstance(exc, PolicyDenied), exc
    assert exc.reason is QuarantineReason.POLICY_DENIED
    [record] = [r for r in exc.records if r.policy_status == "denied"]
    return deny_reason(record)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_approval_timeout_is_expired_and_quarantines(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    release = threading.Event()

    def away(request: ApprovalRequest) -> bool:
        release.wait(10)
        return True

    approval = ApprovalPolicy(away, tools=TOOLS, version="v1", timeout=0.3)
    upstream.enqueue(Scripted(tool_stream("write_file", {"path": "src/a.txt", "content": CANARY})))
    with every_logger() as logs, ToolGate(tools=TOOLS, policy=approval) as gate:
        try:
            chunks, exc = run(gate, upstream, asynchronous)
        finally:
            release.set()
    assert released(chunks) == []
    assert denied(exc) is DenyReason.APPROVAL_EXPIRED
    grant = approval.grant("write_file", "call_w1")
    assert grant is not None and grant.status is ApprovalStatus.EXPIRED  # not DENIED
    assert_clean_exception(exc)
    assert_clean_logs(logs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_approval_of_other_arguments_asks_again(
    upstream: FakeUpstream, asynchronous: bool
) -> None:
    human = Human(True)
    approval = ApprovalPolicy(human, tools=TOOLS, version="v1")
    reviewed = {"path": "src/a.txt", "content": "reviewed-value"}
    changed = {"path": "src/a.txt", "content": "changed-value " + CANARY}
    upstream.enqueue(
        Scripted(tool_stream("write_file", reviewed)),
        Scripted(tool_stream("write_file", reviewed)),
        Scripted(tool_stream("write_file", changed)),
    )
    with every_logger() as logs, ToolGate(tools=TOOLS, policy=approval) as gate:
        first, exc = run(gate, upstream, asynchronous)
        assert exc is None and released(first) == [("write_file", json.dumps(reviewed))]
        _, exc = run(gate, upstream, asynchronous)  # same call, same arguments: no question
        assert exc is None and len(human.requests) == 1
        human.answer = False
        third, exc = run(gate, upstream, asynchronous)  # same call id, other arguments
    assert [r.again for r in human.requests] == [False, False]
    assert len(human.requests) == 2
    assert human.requests[1].argument_digest != human.requests[0].argument_digest
    assert released(third) == []
    assert denied(exc) is DenyReason.APPROVAL_DENIED
    assert_clean_exception(exc)
    assert_clean_logs(logs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(
    ("name", "arguments", "reason"),
    [
        ("write_file", {"path": "../" + CANARY, "content": "x"}, DenyReason.PATH_PARENT),
        ("write_file", {"path": "/etc/" + CANARY, "content": "x"}, DenyReason.PATH_OUTSIDE_ROOT),
        ("write_file", {"path": "escape/" + CANARY, "content": "x"}, DenyReason.PATH_OUTSIDE_ROOT),
        ("run", {"argv": ["bash", "-c", CANARY]}, DenyReason.COMMAND_INTERPRETER),
        ("run", {"argv": "git status; " + CANARY}, DenyReason.COMMAND_NOT_ARGV),
        ("run", {"argv": ["git", "-c", CANARY, "status"]}, DenyReason.COMMAND_ARGUMENT),
    ],
    ids=["parent", "absolute", "symlink-out", "interpreter", "shell-string", "git-c"],
)
def test_paths_outside_the_root_and_bad_commands_are_policy_denials(  # noqa: PLR0917
    upstream: FakeUpstream,
    root: Path,
    asynchronous: bool,
    name: str,
    arguments: dict[str, Any],
    reason: DenyReason,
) -> None:
    upstream.enqueue(Scripted(tool_stream(name, arguments)))
    with every_logger() as logs, ToolGate(tools=TOOLS, policy=scope_and_commands(root)) as gate:
        chunks, exc = run(gate, upstream, asynchronous)
    assert released(chunks) == []
    assert denied(exc) is reason
    assert_clean_exception(exc)
    assert_clean_logs(logs)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_path_inside_passes_the_composed_policy_with_a_human(
    upstream: FakeUpstream, root: Path, asynchronous: bool
) -> None:
    human = Human(True)

    async def ask(request: ApprovalRequest) -> bool:
        return human(request)

    approval = ApprovalPolicy(ask, tools=TOOLS, version="v1", only={"write_file"})
    scope = PathScope(root, paths={"write_file": ("path",)})
    arguments = {"path": "src/new.txt", "content": "hello"}
    upstream.enqueue(Scripted(tool_stream("write_file", arguments)))
    with ToolGate(tools=TOOLS, policy=scope & approval) as gate:
        chunks, exc = run(gate, upstream, asynchronous)
    assert exc is None
    [(tool, text)] = released(chunks)
    assert (tool, json.loads(text)) == ("write_file", arguments)  # the model's text, as sent
    assert len(human.requests) == 1
    # What the tool is given: the resolved path inside the root.
    from litellm_toolgate.core.rules.policy import ToolCall

    resolved = scope.resolve_paths(ToolCall("a", 0, "call_w1", tool, json.loads(text)))
    assert resolved["path"] == str(Path(scope.root) / "src" / "new.txt")


EXAMPLE = Path(__file__).resolve().parent.parent / "config_examples" / "toolgate_policies.yaml"


def test_the_example_settings_name_a_composed_policy() -> None:
    from litellm_toolgate.core.rules.compose import AllOf
    from litellm_toolgate.core.rules.policy import ToolCall
    from litellm_toolgate.edge.config import GateSettings

    settings, folder = GateSettings.from_file(EXAMPLE)
    policy = settings.gate_arguments(folder)["policy"]
    assert isinstance(policy, AllOf)
    outside = ToolCall("a", 0, "c", "write_file", {"path": "../x", "content": ""})
    assert deny_reason(policy(outside)) is DenyReason.PATH_PARENT
    git = ToolCall("a", 0, "c", "run_command", {"argv": ["git", "status"]})
    assert policy(git) == PolicyDecision.approve()


def test_a_policy_module_that_cannot_build_stops_start_up(tmp_path: Path) -> None:
    """The example's workspace does not exist: loading the settings fails, typed."""
    import os
    import subprocess
    import sys

    script = (
        "from litellm_toolgate.edge.config import GateSettings\n"
        "from litellm_toolgate import GateConfigError\n"
        f"settings, folder = GateSettings.from_file({str(EXAMPLE)!r})\n"
        "try:\n"
        "    settings.gate_arguments(folder)\n"
        "except GateConfigError as exc:\n"
        "    print('refused:', type(exc).__name__)\n"
    )
    env = {**os.environ, "TOOLGATE_WORKSPACE": str(tmp_path / "missing")}
    out = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "refused: GateConfigError"
