"""The command allow-list: an argument vector matched against named programs, sans-I/O.

A tool that runs a command takes it as an argument vector, a JSON array of strings whose
first element is the program. It is never a shell string: a string is refused, not split,
because whatever splitting the policy did, the shell that later runs it could do otherwise
(quoting, ``;``, ``$(...)``, globbing). The vector is what ``execve`` gets: no shell reads it.

:class:`CommandAllowList` approves a vector when, in this order:

1. it is a non-empty list of strings without NUL bytes;
2. its first element is not an environment assignment (``PATH=/tmp/evil git``) nor a shell
   builtin (``cd``, ``export``, ``source``, ``eval``, ``exec``, ``alias``...): under ``execve``
   they are not programs at all, and a tool that hands them to a shell changes the
   environment every later allowed command runs in;
3. the program is not of a class that runs arbitrary code (see :data:`BYPASSES`): a shell or
   language interpreter, a program that runs another command (``env``, ``sudo``, ``xargs``,
   ``timeout``...), or one that runs the project's own scripts (``npm``, ``make``...), unless
   the matching :class:`Allow` rule permits that class by name;
4. an :class:`Allow` rule names the program, by bare name (``"git"``: the vector must say
   exactly ``git``, so ``./git`` or ``/tmp/git`` planted in the workspace never match) or by
   exact absolute path (``"/usr/bin/git"``);
5. every argument matches one of the rule's argument patterns (``fnmatch`` globs, case
   sensitive; a rule without patterns allows no arguments);
6. no argument is an option or subcommand that makes the allowed program run other code or
   read other configuration (``git -c core.sshCommand=...``, ``git fetch --upload-pack=...``,
   ``find -exec``, ``tar --to-command``...: :data:`EXEC_OPTIONS`), unless the rule permits
   ``exec_option``. Long options are matched by every prefix too, since GNU getopt and git
   accept a unique abbreviation (``--upload-p``); a short option is found inside a cluster
   (``-xI``). Options after a bare ``--`` are operands and are not read as options.

Denials carry a :class:`~.compose.DenyReason`, never the vector. The program's class is read
from its base name without a version suffix (``/usr/bin/python3.12`` is ``python``).

What this cannot see: what an allowed program does with files it reads. A repository the
model can write to can hold a ``.git/config`` (``core.fsmonitor``, ``core.pager``, hooks,
aliases), a ``Makefile`` or a ``package.json``: those run code on ``git status``, ``make``
or ``npm test``. Keep such programs off the list, or scope the files they read.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import GateConfigError
from .compose import DenyReason, GatePolicy, deny
from .policy import PolicyDecision, ToolCall

__all__ = [
    "BYPASSES",
    "EXEC_OPTIONS",
    "Allow",
    "CommandAllowList",
    "check_argv",
    "program_class",
]


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


SHELL_BUILTINS = _words(
    """. : alias bg bind builtin caller cd command compgen complete declare dirs disown enable
    eval exec exit export fc fg getopts hash history jobs let local logout mapfile popd pushd
    read readarray readonly return set setopt shift shopt source suspend times trap type
    typeset ulimit umask unalias unset unsetopt wait"""
)
INTERPRETERS = _words(
    """sh bash dash zsh ksh mksh pdksh oksh yash csh tcsh fish ash busybox toybox rbash
    pwsh powershell cmd python pypy perl ruby irb node nodejs deno bun php lua luajit tclsh
    wish expect osascript rscript r julia java jshell groovy scala kotlin swift dotnet
    awk gawk mawk nawk sed gsed gdb lldb vi vim nvim view ex emacs nano less more most man
    ed"""
)
WRAPPERS = _words(
    """env sudo doas su runuser pkexec nohup nice renice ionice chrt taskset timeout time
    stdbuf setsid chroot unshare nsenter flock xargs parallel watch strace ltrace script
    systemd-run firejail bwrap fakeroot proot ssh rsh sshpass dbus-launch start-stop-daemon
    caffeinate exec command builtin"""
)
PROJECT_SCRIPTS = _words(
    """npm npx pnpm pnpx yarn corepack make gmake bmake cmake ninja just rake gradle gradlew
    mvn mvnw ant sbt tox nox invoke poetry pipenv pdm hatch uv uvx pip pipx cargo go mix
    composer bundle bundler pytest jest vitest mocha"""
)

BYPASSES: Mapping[str, str] = {
    "string_command": "a shell string instead of a vector: quoting, `;`, `$(...)`, globs",
    "env_assignment": "`NAME=value cmd` changes PATH, LD_PRELOAD, GIT_SSH... of an allowed cmd",
    "shell_builtin": "`cd`, `export`, `alias`, `source`, `eval`, `exec`: change the shell state",
    "interpreter": "a shell or language interpreter (`bash -c`, `python -c`, `awk`, `sed e`)",
    "wrapper": "a program that runs another (`env`, `sudo`, `xargs`, `timeout`, `nohup`)",
    "project_scripts": "a program that runs the project's scripts (`npm test`, `make`, `pytest`)",
    "exec_option": "an option of an allowed program that runs code (`git -c`, `find -exec`)",
    "program_path": "a relative or planted path (`./git`) standing in for an allowed name",
    "option_abbreviation": "a unique prefix of a long option (`--upload-p`) getopt accepts",
    "nul_byte": "a NUL byte: the OS cuts the argument there",
}
"""The bypass classes the allow-list refuses, each with one example (see docs/policies.md)."""

_CLASSES: Mapping[str, tuple[frozenset[str], DenyReason]] = {
    "interpreter": (INTERPRETERS, DenyReason.COMMAND_INTERPRETER),
    "wrapper": (WRAPPERS, DenyReason.COMMAND_WRAPPER),
    "project_scripts": (PROJECT_SCRIPTS, DenyReason.COMMAND_PROJECT_SCRIPTS),
}
PERMITS = frozenset({"interpreter", "wrapper", "project_scripts", "exec_option", "shell_builtin"})


@dataclass(frozen=True, slots=True)
class ExecOptions:
    """Options and subcommands of one program that run code or load other configuration."""

    long: frozenset[str] = frozenset()
    """Long options (``--upload-pack``), matched with ``=value`` and by any prefix."""
    short: str = ""
    """Short option letters, found anywhere in a ``-abc`` cluster."""
    exact: frozenset[str] = frozenset()
    """Arguments refused exactly as written (``find``'s ``-exec``)."""
    subcommands: frozenset[str] = frozenset()
    """Subcommands refused outright (``git submodule`` runs ``foreach``)."""
    per_subcommand: Mapping[str, ExecOptions] = field(default_factory=dict)
    """Options refused only after a given subcommand (``git clone -c``)."""
    global_long: frozenset[str] = frozenset()
    """Long options refused only before the subcommand (``git --git-dir``)."""
    global_exact: frozenset[str] = frozenset()
    """Arguments refused exactly, only before the subcommand (``git -c``, ``git -C``)."""
    contains: tuple[str, ...] = ()
    """Substrings refused in any argument (``ext::``, git's command-running transport)."""


_GIT_REMOTE = ExecOptions(long=frozenset({"--upload-pack", "--receive-pack", "--exec"}))
EXEC_OPTIONS: Mapping[str, ExecOptions] = {
    "git": ExecOptions(
        long=frozenset(
            {
                "--upload-pack",
                "--receive-pack",
                "--exec",
                "--extcmd",
                "--config",
                "--template",
                "--output",  # diff/log/format-patch write a file the path scope never sees
                "--output-directory",
            }
        ),
        subcommands=frozenset(
            {"submodule", "bisect", "filter-branch", "config", "daemon", "instaweb", "mergetool"}
        ),
        per_subcommand={
            "clone": ExecOptions(short="cu"),
            "rebase": ExecOptions(short="x"),
            "difftool": ExecOptions(short="x"),
            "archive": _GIT_REMOTE,
            "ls-remote": ExecOptions(short="u"),
        },
        global_long=frozenset(
            {"--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace"}
        ),
        global_exact=frozenset({"-c", "-C"}),
        contains=("ext::", "fd::"),
    ),
    "hg": ExecOptions(long=frozenset({"--config", "--cwd", "--repository"}), exact=frozenset()),
    "find": ExecOptions(
        exact=frozenset(
            {"-exec", "-execdir", "-ok", "-okdir", "-fprint", "-fprint0", "-fprintf", "-fls"}
        )
    ),
    "rg": ExecOptions(long=frozenset({"--pre"})),
    "tar": ExecOptions(
        long=frozenset(
            {
                "--to-command",
                "--checkpoint-action",
                "--use-compress-program",
                "--info-script",
                "--new-volume-script",
                "--rsh-command",
                "--rmt-command",
            }
        ),
        short="IF",
    ),
    "rsync": ExecOptions(long=frozenset({"--rsh", "--rsync-path"}), short="e"),
    "scp": ExecOptions(short="oFS"),
    "sftp": ExecOptions(short="oFS"),
    "zip": ExecOptions(long=frozenset({"--unzip-command"}), exact=frozenset({"-TT"})),
    "sort": ExecOptions(long=frozenset({"--compress-program"})),
}
"""Per program base name: what makes an allowed program run other code, load other
configuration or write a file named in an option (a backstop to the rule's own argument
patterns, not a replacement for them)."""

_VERSION = re.compile(r"[0-9][0-9.]*$")


def program_class(program: str) -> str | None:
    """``interpreter``, ``wrapper``, ``project_scripts`` or None, from the base name."""
    base = _base(program)
    for name, (members, _) in _CLASSES.items():
        if base in members:
            return name
    return None


def _base(program: str) -> str:
    base = program.rsplit("/", 1)[-1].lower()
    if base.endswith(".exe"):
        base = base[:-4]
    stripped = _VERSION.sub("", base).rstrip("-")
    return stripped or base


@dataclass(frozen=True, slots=True)
class Allow:
    """One allowed program and the arguments it may take.

    ``program`` is a bare name (the vector's first element must be exactly that name; the
    executor resolves it on its own ``PATH``) or an absolute path (matched exactly).
    ``args`` are ``fnmatch`` patterns: each argument must match one (``("status", "log",
    "--oneline")``; ``("*",)`` allows any argument, the exec-option backstop still applies).
    ``permit`` names bypass classes this rule knowingly allows: ``interpreter``,
    ``wrapper``, ``project_scripts``, ``exec_option``, ``shell_builtin``.
    """

    program: str
    args: tuple[str, ...] = ()
    permit: Collection[str] = frozenset()

    def __post_init__(self) -> None:
        program = self.program
        if not isinstance(program, str) or not program or "\x00" in program:
            raise GateConfigError("Allow: program must be a non-empty name or absolute path")
        if "/" in program and not program.startswith("/"):
            raise GateConfigError("Allow: a program path must be absolute")
        if "=" in program.split("/")[-1]:
            raise GateConfigError("Allow: a program name cannot hold '='")
        args = self.args
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise GateConfigError("Allow: args must be a sequence of pattern strings")
        object.__setattr__(self, "args", tuple(args))
        permit = frozenset(self.permit)
        if not permit <= PERMITS:
            unknown = sorted(permit - PERMITS)
            raise GateConfigError(f"Allow: unknown permit {unknown}; known: {sorted(PERMITS)}")
        object.__setattr__(self, "permit", permit)


def check_argv(argv: object, rules: Mapping[str, Allow]) -> DenyReason | None:
    """The reason ``argv`` is refused under ``rules`` (keyed by program), or None."""
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        return DenyReason.COMMAND_NOT_ARGV
    if any("\x00" in a for a in argv):
        return DenyReason.COMMAND_NUL
    program: str = argv[0]
    if not program:
        return DenyReason.COMMAND_NOT_ARGV
    rule = rules.get(program)
    permit: Collection[str] = rule.permit if rule is not None else frozenset()
    if "=" in program.split("/", maxsplit=1)[0] and "/" not in program.split("=", maxsplit=1)[0]:
        return DenyReason.COMMAND_ENV_ASSIGNMENT
    if program in SHELL_BUILTINS and "shell_builtin" not in permit:
        return DenyReason.COMMAND_SHELL_BUILTIN
    kind = program_class(program)
    if kind is not None and kind not in permit:
        return _CLASSES[kind][1]
    if rule is None:
        return DenyReason.COMMAND_PROGRAM
    arguments: list[str] = argv[1:]
    for argument in arguments:
        if not any(fnmatch.fnmatchcase(argument, p) for p in rule.args):
            return DenyReason.COMMAND_ARGUMENT
    options = EXEC_OPTIONS.get(_base(program))
    if options is not None and "exec_option" not in permit and _runs_code(options, arguments):
        return DenyReason.COMMAND_EXEC_OPTION
    return None


def _runs_code(options: ExecOptions, arguments: Sequence[str]) -> bool:
    if any(token in a for a in arguments for token in options.contains):
        return True
    rest = list(arguments)
    if options.global_exact or options.global_long:
        # The options before the subcommand are the program's own (git's -c, -C...).
        while rest and rest[0].startswith("-") and rest[0] != "--":
            head = rest.pop(0)
            if head in options.global_exact or _long_hit(head, options.global_long):
                return True
            if _option_hit(head, options):
                return True
        if rest and rest[0] == "--":
            return False
    subcommand = rest[0] if (options.subcommands or options.per_subcommand) and rest else None
    if subcommand is not None and subcommand in options.subcommands:
        return True
    extra = options.per_subcommand.get(subcommand or "")
    for argument in rest:
        if argument == "--":
            return False
        if _option_hit(argument, options) or (extra is not None and _option_hit(argument, extra)):
            return True
    return False


def _option_hit(argument: str, options: ExecOptions) -> bool:
    if argument in options.exact:
        return True
    if argument.startswith("--"):
        return _long_hit(argument, options.long)
    if argument.startswith("-") and len(argument) > 1 and options.short:
        return any(letter in options.short for letter in argument[1:])
    return False


def _long_hit(argument: str, names: Iterable[str]) -> bool:
    if not argument.startswith("--") or len(argument) <= 2:
        return False
    name = argument.split("=", 1)[0]
    # getopt_long and git accept any unique prefix of a long option: refuse every prefix.
    return any(known.startswith(name) for known in names)


class CommandAllowList(GatePolicy):
    """A gate policy: the argument vectors of command tools must pass :func:`check_argv`.

    ``rules``: the :class:`Allow` rules (one per program). ``tools``: which tools run
    commands, and in which argument: ``{"run": "argv"}``. Calls of other tools are approved
    by this policy (compose it with others for them); a command tool's call without the
    argument is refused.
    """

    def __init__(self, rules: Iterable[Allow], *, tools: Mapping[str, str]) -> None:
        table: dict[str, Allow] = {}
        for rule in rules:
            if not isinstance(rule, Allow):
                raise GateConfigError("CommandAllowList: rules must be Allow(...) objects")
            if rule.program in table:
                raise GateConfigError("CommandAllowList: one rule per program")
            table[rule.program] = rule
        if not isinstance(tools, Mapping) or not tools:
            raise GateConfigError("CommandAllowList: tools maps each command tool to its argv")
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in tools.items()):
            raise GateConfigError("CommandAllowList: tools maps tool names to argument names")
        self.rules: Mapping[str, Allow] = table
        self.tools: Mapping[str, str] = dict(tools)

    def __call__(self, call: ToolCall) -> PolicyDecision:
        argument = self.tools.get(call.name)
        if argument is None:
            return PolicyDecision.approve()
        argv: Any = call.arguments.get(argument)
        reason = check_argv(argv, self.rules)
        return PolicyDecision.approve() if reason is None else deny(reason)

    def __repr__(self) -> str:
        return f"CommandAllowList({len(self.rules)} programs, {len(self.tools)} tools)"
