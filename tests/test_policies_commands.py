"""The command allow-list: one test per known bypass class, and what an allowed vector is.

Each bypass row is a vector that an allow-list naming the program (or a harmless one) would
approve if it matched names only. Every row must be refused with its own reason; the
"permitted" rows show that each refusal can be lifted, but only by naming it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.commands import BYPASSES, Allow, CommandAllowList, check_argv
from litellm_toolgate.core.rules.compose import DenyReason, deny_reason
from litellm_toolgate.core.rules.policy import ToolCall
from litellm_toolgate.policies.commands import CommandRefused, resolve_argv

R = DenyReason
RULES = CommandAllowList(
    [
        Allow("git", args=("*",)),
        Allow("ls", args=("-l", "-a", "src", "src/*")),
        Allow("find", args=("*",)),
        Allow("tar", args=("*",)),
        Allow("rg", args=("*",)),
        Allow("rsync", args=("*",)),
        Allow("/usr/bin/grep", args=("*",)),
        Allow("echo", args=("*",)),
        Allow("sed", args=("*",)),
        Allow("hg", args=("*",)),
    ],
    tools={"run": "argv"},
)


def call(argv: Any, name: str = "run") -> ToolCall:
    return ToolCall("att", 0, "call_1", name, {"argv": argv})


def verdict(argv: Any, policy: CommandAllowList = RULES) -> DenyReason | None:
    decision = policy(call(argv))
    assert decision.approved == (deny_reason(decision) is None)
    return deny_reason(decision)


# (bypass class from BYPASSES, vector, expected reason)
BYPASS_ROWS: list[tuple[str, Any, DenyReason]] = [
    ("string_command", "ls -l; rm -rf ~", R.COMMAND_NOT_ARGV),
    ("string_command", ["ls", 3], R.COMMAND_NOT_ARGV),
    ("string_command", [], R.COMMAND_NOT_ARGV),
    ("env_assignment", ["PATH=/tmp/evil", "git", "status"], R.COMMAND_ENV_ASSIGNMENT),
    ("env_assignment", ["GIT_SSH_COMMAND=sh -c id", "git", "fetch"], R.COMMAND_ENV_ASSIGNMENT),
    ("shell_builtin", ["cd", "/"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", ["export", "PATH=/tmp/evil"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", ["alias", "ls=rm -rf"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", ["source", "./evil.sh"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", [".", "./evil.sh"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", ["eval", "rm -rf /"], R.COMMAND_SHELL_BUILTIN),
    ("shell_builtin", ["exec", "sh"], R.COMMAND_SHELL_BUILTIN),
    ("interpreter", ["sh", "-c", "ls"], R.COMMAND_INTERPRETER),
    ("interpreter", ["bash", "-c", "git status; id"], R.COMMAND_INTERPRETER),
    ("interpreter", ["/bin/bash", "x.sh"], R.COMMAND_INTERPRETER),
    ("interpreter", ["python3.12", "-c", "import os"], R.COMMAND_INTERPRETER),
    ("interpreter", ["awk", 'BEGIN{system("id")}'], R.COMMAND_INTERPRETER),
    ("interpreter", ["gsed", "1e id", "f"], R.COMMAND_INTERPRETER),
    ("interpreter", ["sqlite3", ":memory:", ".shell id"], R.COMMAND_INTERPRETER),
    ("wrapper", ["docker", "run", "img"], R.COMMAND_WRAPPER),
    ("wrapper", ["/usr/lib64/ld-linux-x86-64.so.2", "/bin/sh"], R.COMMAND_WRAPPER),
    ("wrapper", ["env", "git", "status"], R.COMMAND_WRAPPER),
    ("wrapper", ["env", "-i", "PATH=/tmp", "ls"], R.COMMAND_WRAPPER),
    ("wrapper", ["sudo", "ls"], R.COMMAND_WRAPPER),
    ("wrapper", ["xargs", "rm"], R.COMMAND_WRAPPER),
    ("wrapper", ["timeout", "5", "sh"], R.COMMAND_WRAPPER),
    ("wrapper", ["nohup", "ls"], R.COMMAND_WRAPPER),
    ("project_scripts", ["npm", "test"], R.COMMAND_PROJECT_SCRIPTS),
    ("project_scripts", ["npx", "some-package"], R.COMMAND_PROJECT_SCRIPTS),
    ("project_scripts", ["make", "all"], R.COMMAND_PROJECT_SCRIPTS),
    ("project_scripts", ["pytest"], R.COMMAND_PROJECT_SCRIPTS),
    ("exec_option", ["git", "-c", "core.sshCommand=sh -c id", "fetch"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "--config-env=core.pager=X", "log"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "-C", "/", "status"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "--git-dir=/tmp/evil/.git", "log"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "--exec-path=/tmp/evil", "log"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "fetch", "--upload-pack=touch /tmp/x", "o"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "push", "--receive-pack", "x", "o"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "clone", "-u", "sh -c id", "r"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "clone", "-c", "core.hooksPath=/x", "r"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "clone", "ext::sh -c id", "d"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "rebase", "-x", "id", "main"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "rebase", "--exec=id", "main"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "difftool", "--extcmd=id"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "submodule", "foreach", "id"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "bisect", "run", "id"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "config", "alias.st", "!id"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["find", ".", "-exec", "rm", "{}", ";"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["find", ".", "-fprint", "/home/u/.bashrc"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["git", "diff", "--output=/home/u/.bashrc"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["find", ".", "-execdir", "id", "+"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["find", ".", "-ok", "id", ";"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["tar", "-xf", "a.tar", "--to-command=sh"], R.COMMAND_EXEC_OPTION),
    (
        "exec_option",
        ["tar", "-cf", "a.tar", "--checkpoint-action=exec=id", "."],
        R.COMMAND_EXEC_OPTION,
    ),
    ("exec_option", ["tar", "-xIsh", "-f", "a.tar"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["rg", "--pre", "sh", "x"], R.COMMAND_EXEC_OPTION),
    ("exec_option", ["rsync", "-e", "sh -c id", "a", "b"], R.COMMAND_EXEC_OPTION),
    ("option_abbreviation", ["git", "fetch", "--upload-p=id", "o"], R.COMMAND_EXEC_OPTION),
    ("option_abbreviation", ["git", "--git-d=/tmp", "log"], R.COMMAND_UNKNOWN_OPTION),
    ("option_abbreviation", ["tar", "-xf", "a", "--to-com=sh"], R.COMMAND_UNKNOWN_OPTION),
    ("option_abbreviation", ["git", "grep", "--open=id", "x"], R.COMMAND_UNKNOWN_OPTION),
    ("unknown_option", ["git", "grep", "-Oid", "x"], R.COMMAND_EXEC_OPTION),
    ("unknown_option", ["git", "log", "--frobnicate"], R.COMMAND_UNKNOWN_OPTION),
    ("unknown_option", ["find", "--", ".", "-exec", "id", ";"], R.COMMAND_EXEC_OPTION),
    ("unknown_option", ["git", "x"], R.COMMAND_UNKNOWN_OPTION),  # an alias in .git/config
    ("option_bundle", ["tar", "xfI", "a.tar", "id"], R.COMMAND_EXEC_OPTION),
    ("option_bundle", ["tar", "cfFL", "a.tar", "x.sh", "10", "."], R.COMMAND_EXEC_OPTION),
    (
        "global_option_value",
        ["git", "--attr-source", "HEAD", "-c", "alias.x=!id", "x"],
        R.COMMAND_EXEC_OPTION,
    ),
    ("global_option_value", ["git", "-C", "status", "-c", "a=b", "log"], R.COMMAND_EXEC_OPTION),
    ("unsafe_value", ["sed", "1e id", "f"], R.COMMAND_UNSAFE_VALUE),
    ("unsafe_value", ["sed", "-n", "-e", "1p", "-e", "1w out", "f"], R.COMMAND_UNSAFE_VALUE),
    ("unsafe_value", ["tar", "-tf", "host:a.tar"], R.COMMAND_UNSAFE_VALUE),
    ("no_grammar", ["hg", "--config", "x=y", "log"], R.COMMAND_NO_GRAMMAR),
    ("program_path", ["./git", "status"], R.COMMAND_PROGRAM),
    ("program_path", ["/tmp/work/git", "status"], R.COMMAND_PROGRAM),
    ("program_path", ["bin/ls"], R.COMMAND_PROGRAM),
    ("program_path", ["/bin/grep", "x"], R.COMMAND_PROGRAM),
    ("program_path", ["GIT", "status"], R.COMMAND_PROGRAM),
    ("nul_byte", ["ls\x00", "-l"], R.COMMAND_NUL),
    ("nul_byte", ["ls", "src\x00/../etc"], R.COMMAND_NUL),
]


@pytest.mark.parametrize(
    ("kind", "argv", "reason"),
    BYPASS_ROWS,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(BYPASS_ROWS)],
)
def test_each_known_bypass_is_refused(kind: str, argv: Any, reason: DenyReason) -> None:
    assert kind in BYPASSES
    assert verdict(argv) is reason


def test_every_documented_bypass_class_has_a_test_row() -> None:
    assert {kind for kind, _, _ in BYPASS_ROWS} == set(BYPASSES)


@pytest.mark.parametrize(
    "argv",
    [
        ["git", "status"],
        ["git", "log", "--oneline", "-n", "5"],
        ["git", "grep", "-c", "TODO"],  # -c counts here: only clone's -c is refused
        ["git", "log", "--", "--upload-pack"],  # after --, a path, not an option
        ["git", "--no-pager", "diff"],
        ["ls"],
        ["ls", "-l", "src/a.py"],
        ["find", ".", "-name", "*.py"],
        ["/usr/bin/grep", "-r", "x", "."],
        ["tar", "-tf", "a.tar"],
        ["tar", "tvf", "a.tar"],
        ["sed", "-n", "1,5p", "file"],
        ["sed", "-n", "-e", "3p", "--expression=10,$p", "file"],
        ["git", "--no-pager", "log", "-3", "--format=%h %s", "--", "src"],
        ["find", "-L", ".", "-maxdepth", "2", "-type", "f", "-name", "*.md", "-print0"],
    ],
)
def test_allowed_vectors_pass(argv: list[str]) -> None:
    assert verdict(argv) is None


@pytest.mark.parametrize(
    "argv",
    [["ls", "-R"], ["ls", "/etc"], ["ls", "srcx"], ["cat", "x"], ["grep", "x"]],
)
def test_arguments_and_programs_off_the_list_are_refused(argv: list[str]) -> None:
    expected = R.COMMAND_ARGUMENT if argv[0] == "ls" else R.COMMAND_PROGRAM
    assert verdict(argv) is expected


def test_a_refusal_is_lifted_only_by_naming_its_class() -> None:
    permissive = CommandAllowList(
        [
            Allow("bash", args=("*",), permit={"interpreter"}, any_arguments_unsafe=True),
            Allow("npm", args=("test",), permit={"project_scripts"}, any_arguments_unsafe=True),
            Allow("git", args=("*",), any_arguments_unsafe=True),
            Allow("env", args=("*",), permit={"wrapper"}, any_arguments_unsafe=True),
            Allow("cd", args=("*",), permit={"shell_builtin"}, any_arguments_unsafe=True),
            Allow("zsh", args=("*",), permit={"interpreter"}),
        ],
        tools={"run": "argv"},
    )
    assert verdict(["bash", "-c", "ls"], permissive) is None
    assert verdict(["npm", "test"], permissive) is None
    assert verdict(["npm", "install"], permissive) is R.COMMAND_ARGUMENT
    assert verdict(["git", "-c", "a=b", "log"], permissive) is None
    assert verdict(["env", "ls"], permissive) is None
    assert verdict(["cd", "src"], permissive) is None
    # A permitted class without a grammar still needs the loud flag.
    assert verdict(["zsh", "-c", "ls"], permissive) is R.COMMAND_NO_GRAMMAR
    # A permit on one rule does not reach another program of the same class.
    assert verdict(["sh", "-c", "ls"], permissive) is R.COMMAND_INTERPRETER
    # An allowed program without its class permitted is still refused by class.
    assert verdict(["bash", "x"], CommandAllowList([Allow("bash")], tools={"run": "argv"})) is (
        R.COMMAND_INTERPRETER
    )


def test_sed_line_printing_is_allowed_and_nothing_else_of_sed() -> None:
    assert verdict(["sed", "-n", "1,5p", "file"]) is None
    assert verdict(["sed", "-n", "$p", "file"]) is None
    for argv in (
        ["sed", "-n", "1e id", "file"],
        ["sed", "-n", "1w out", "file"],
        ["sed", "-n", "1W out", "file"],
        ["sed", "-n", "1r /etc/passwd", "file"],
        ["sed", "-n", "1R /etc/passwd", "file"],
        ["sed", "s/a/id/e", "file"],
        ["sed", "-n", "-e", "1p", "--expression=1e id", "file"],
    ):
        assert verdict(argv) is R.COMMAND_UNSAFE_VALUE, argv
    assert verdict(["sed", "-i", "1p", "file"]) is R.COMMAND_EXEC_OPTION
    assert verdict(["sed", "-f", "s.sed", "file"]) is R.COMMAND_EXEC_OPTION
    assert verdict(["sed", "--expr=1p", "file"]) is R.COMMAND_UNKNOWN_OPTION


def test_user_grammars_replace_the_built_in_ones() -> None:
    mytool = {"manual": "mytool(1) 2.0, OPTIONS", "flags": "-v --verbose", "values": "-o"}
    policy = CommandAllowList(
        [Allow("mytool", args=("*",)), Allow("git", args=("*",))],
        tools={"run": "argv"},
        grammars={"mytool": mytool, "git": {"manual": "git(1)", "subcommands": {"status": {
            "manual": "git-status(1)"}}}},
    )  # fmt: skip
    assert verdict(["mytool", "-v", "-o", "x", "file"], policy) is None
    assert verdict(["mytool", "-vox"], policy) is None
    assert verdict(["mytool", "--output=x"], policy) is R.COMMAND_UNKNOWN_OPTION
    assert verdict(["git", "status"], policy) is None
    assert verdict(["git", "log"], policy) in (R.COMMAND_UNKNOWN_OPTION, R.COMMAND_EXEC_OPTION)
    direct = CommandAllowList([Allow("mytool", args=("*",), grammar=mytool)], tools={"r": "a"})
    assert check_argv(["mytool", "-v"], direct.rules) is None
    assert check_argv(["mytool", "-x"], direct.rules) is R.COMMAND_UNKNOWN_OPTION


def test_other_tools_pass_and_a_missing_vector_is_refused() -> None:
    assert RULES(call(["sh"], name="read_file")).approved
    decision = RULES(ToolCall("att", 0, "c", "run", {}))
    assert deny_reason(decision) is R.COMMAND_NOT_ARGV


def test_deny_reasons_hold_no_argument_text() -> None:
    for _, argv, _ in BYPASS_ROWS:
        decision = RULES(call(argv))
        assert decision.reason is not None
        assert decision.reason in {r.value for r in DenyReason}


@pytest.mark.parametrize(
    "build",
    [
        lambda: Allow(""),
        lambda: Allow("bin/git"),
        lambda: Allow("A=b"),
        lambda: Allow("git", args="*"),  # type: ignore[arg-type]
        lambda: Allow("git", permit={"everything"}),
        lambda: Allow("git", permit={"exec_option"}),  # gone: the grammar decides options
        lambda: Allow("git", permit="interpreter"),
        lambda: Allow("git", any_arguments_unsafe="yes"),  # type: ignore[arg-type]
        lambda: Allow("x", grammar={"flags": "-a"}),  # no manual
        lambda: Allow("x", grammar={"manual": "x(1)", "flag": "-a"}),  # unknown key
        lambda: Allow("x", grammar={"manual": "x(1)", "flags": "-a -a="}),
        lambda: Allow("x", grammar={"manual": "x(1)", "flags": "-a", "values": "-a"}),
        lambda: Allow("x", grammar={"manual": "x(1)", "flags": 3}),
        lambda: Allow("x", grammar={"manual": "x(1)", "checks": {"-a": str.isdigit}}),
        lambda: Allow("x", grammar={"manual": "x(1)", "values": "-a", "checks": {"-a": 1}}),
        lambda: Allow("x", grammar={"manual": "x(1)", "bundle": "yes"}),
        lambda: Allow("x", grammar={"manual": "x(1)", "max_operands": -1}),
        lambda: Allow("x", grammar={"manual": "x(1)", "script_options": "-e"}),
        lambda: Allow("x", grammar={"manual": "x(1)", "subcommands": {"-s": {}}}),
        lambda: Allow("x", grammar={"manual": "x(1)", "subcommands": {"s": {"flags": ""}}}),
        lambda: Allow("x", grammar=["-a"]),  # type: ignore[arg-type]
        lambda: CommandAllowList([Allow("git")], tools={"r": "a"}, grammars={"hg": {}}),
        lambda: CommandAllowList([Allow("git")], tools={"r": "a"}, grammars={"git": {}}),
        lambda: CommandAllowList([Allow("git"), Allow("git")], tools={"run": "argv"}),
        lambda: CommandAllowList([Allow("git")], tools={}),
        lambda: CommandAllowList(["git"], tools={"run": "argv"}),  # type: ignore[list-item]
    ],
)
def test_bad_rules_fail_at_construction(build: Any) -> None:
    with pytest.raises(GateConfigError):
        build()


def test_resolve_argv_uses_the_given_search_path_only(tmp_path: Path) -> None:
    trusted = tmp_path / "trusted"
    planted = tmp_path / "planted"
    for folder in (trusted, planted):
        folder.mkdir()
        program = folder / "ls"
        program.write_text("#!/bin/true\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR)
    assert resolve_argv(["ls", "-l"], RULES, search_path=str(trusted)) == [
        os.path.realpath(trusted / "ls"),
        "-l",
    ]
    # An absolute-path rule is used as it is.
    assert resolve_argv(["/usr/bin/grep", "x"], RULES, search_path="")[0] == "/usr/bin/grep"
    with pytest.raises(CommandRefused) as missing:
        resolve_argv(["ls"], RULES, search_path=str(tmp_path / "nowhere"))
    assert missing.value.reason is R.COMMAND_PROGRAM
    secret = "CANARY-7f3a9c"
    with pytest.raises(CommandRefused) as refused:
        resolve_argv(["sh", "-c", secret], RULES, search_path=str(trusted))
    assert refused.value.reason is R.COMMAND_INTERPRETER
    assert secret not in str(refused.value) and refused.value.__context__ is None
    assert check_argv(["ls"], RULES.rules) is None
