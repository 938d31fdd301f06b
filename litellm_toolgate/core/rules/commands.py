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
6. the arguments follow the program's option grammar (:mod:`.commandgrammar`: built in for
   ``git``, ``find``, ``sed``, ``tar``... or given with the rule): an allow-list of the
   options known to be safe for that program, read the way the program reads them (values
   attached, separate or after ``=``, letter clusters, tar's old-style letter bundles, ``--``,
   git's global options before the subcommand). An option the grammar does not list is
   refused, whatever it does (``find -exec``, ``tar -I``, ``git grep -O``, an abbreviation);
   so is a program without a grammar, unless its rule says ``any_arguments_unsafe=True``.
   Some grammars also check values (``sed`` scripts are line-number ``p`` commands, ``tar``
   archives are local, ``curl`` URLs are ``http(s)``).

Denials carry a :class:`~.compose.DenyReason`, never the vector. The program's class is read
from its base name without a version suffix (``/usr/bin/python3.12`` is ``python``).

What this cannot see: what an allowed program does with files it reads. A repository the
model can write to can hold a ``.git/config`` (``core.fsmonitor``, ``core.pager``, hooks,
aliases), a ``Makefile`` or a ``package.json``: those run code on ``git status``, ``make``
or ``npm test``; ``wget`` reads ``~/.wgetrc``. Keep such programs off the list, or scope the
files they read. Paths in arguments are not scoped here (a hard link cannot be seen anyway).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GateConfigError
from .commandgrammar import FLAG, GRAMMARS, OPTIONAL, VALUE, Grammar, compile_grammar
from .compose import DenyReason, GatePolicy, deny
from .policy import PolicyDecision, ToolCall

__all__ = [
    "BYPASSES",
    "EXEC_OPTIONS",
    "GRAMMARS",
    "Allow",
    "CommandAllowList",
    "Grammar",
    "check_argv",
    "check_grammar",
    "compile_grammar",
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
    xonsh nu nushell elvish ion oil osh ysh murex
    pwsh powershell cmd cscript wscript python pypy ipython bpython ptpython jupyter perl
    ruby irb pry node nodejs deno bun tsx ts-node php lua luajit tclsh wish expect
    osascript rscript r octave julia java jshell groovy scala kotlin kotlinc swift dotnet
    guile racket sbcl clisp ecl csi gsi chez scheme ocaml utop ghci runghc runhaskell erl
    escript elixir iex clojure clj bb dc m4 gnuplot maxima gp
    sqlite3 psql mysql mariadb mongo mongosh redis-cli duckdb sqlplus cqlsh
    awk gawk mawk nawk gsed gdb lldb pdb vi vim nvim gvim rvim view rview ex emacs nano pico
    joe mg micro kak hx less more most man info pager w3m lynx ed ftp sftp mail mailx nmap
    aria2c"""
)
WRAPPERS = _words(
    """env sudo sudoedit doas su runuser pkexec nohup nice renice ionice chrt taskset timeout
    gtimeout time stdbuf unbuffer setsid chroot unshare nsenter flock xargs parallel sem
    watch entr strace ltrace perf valgrind catchsegv script systemd-run systemd-nspawn
    machinectl firejail bwrap fakeroot fakechroot proot schroot ssh rsh mosh autossh
    sshpass ssh-agent dbus-launch dbus-run-session xvfb-run start-stop-daemon caffeinate
    exec command builtin setpriv prlimit numactl torsocks torify proxychains proxychains4
    faketime cpulimit trickle chpst gosu su-exec setuidgid sg newgrp runcon setarch linux32
    linux64 docker podman nerdctl kubectl oc crictl ctr lxc lxc-attach apptainer
    singularity distrobox toolbox flatpak snap tmux screen byobu xterm gnome-terminal
    konsole alacritty kitty urxvt rxvt terminator nix-shell nix nix-env conda mamba
    micromamba pixi bunx rlwrap asciinema hyperfine at batch crontab xdg-open open wine
    ansible salt vagrant ld.so"""
)
PROJECT_SCRIPTS = _words(
    """npm npx pnpm pnpx yarn yarnpkg corepack make gmake bmake cmake ninja just rake gradle
    gradlew mvn mvnw ant sbt tox nox invoke poetry pipenv pdm hatch rye uv uvx pip pipx cargo
    go mix composer bundle bundler gem rails rspec pytest py.test jest vitest mocha ava karma
    playwright cypress coverage behave turbo nx lerna rush bazel bazelisk buck meson scons
    waf xmake bitbake pre-commit conan mkdocs sphinx-build eslint prettier webpack vite
    rollup babel nodemon gulp grunt mage task terraform tofu pulumi helm skaffold earthly
    dagger ansible-playbook msbuild stack lein"""
)

BYPASSES: Mapping[str, str] = {
    "string_command": "a shell string instead of a vector: quoting, `;`, `$(...)`, globs",
    "env_assignment": "`NAME=value cmd` changes PATH, LD_PRELOAD, GIT_SSH... of an allowed cmd",
    "shell_builtin": "`cd`, `export`, `alias`, `source`, `eval`, `exec`: change the shell state",
    "interpreter": "a shell or language interpreter (`bash -c`, `python -c`, `awk`, `sqlite3`)",
    "wrapper": "a program that runs another (`env`, `sudo`, `xargs`, `timeout`, `nohup`)",
    "project_scripts": "a program that runs the project's scripts (`npm test`, `make`, `pytest`)",
    "exec_option": "an option of an allowed program that runs code (`git -c`, `find -exec`)",
    "program_path": "a relative or planted path (`./git`) standing in for an allowed name",
    "option_abbreviation": "a unique prefix of a long option (`--upload-p`) getopt accepts",
    "unknown_option": "an option the program's grammar does not list (`git grep -O<cmd>`)",
    "option_bundle": "old-style letters whose values come later (`tar xfI a.tar CMD`)",
    "global_option_value": "a global option's value read as the subcommand (`git -C . ...`)",
    "unsafe_value": "a value or script outside the safe subset (`sed 1e`, `curl file://`)",
    "no_grammar": "a program whose options nobody described (`hg --config ...`)",
    "nul_byte": "a NUL byte: the OS cuts the argument there",
}
"""The bypass classes the allow-list refuses, each with one example (see docs/policies.md)."""

_CLASSES: Mapping[str, tuple[frozenset[str], DenyReason]] = {
    "interpreter": (INTERPRETERS, DenyReason.COMMAND_INTERPRETER),
    "wrapper": (WRAPPERS, DenyReason.COMMAND_WRAPPER),
    "project_scripts": (PROJECT_SCRIPTS, DenyReason.COMMAND_PROJECT_SCRIPTS),
}
PERMITS = frozenset({"interpreter", "wrapper", "project_scripts", "shell_builtin"})


EXEC_OPTIONS: Mapping[str, frozenset[str]] = {
    "git": _words(
        """-c -C --config-env --exec-path --git-dir --work-tree --namespace --attr-source
        --super-prefix -p --paginate submodule bisect filter-branch config daemon instaweb
        mergetool difftool send-email fetch pull push clone archive ls-remote rebase
        remote-ext help web--browse"""
    ),
    "git diff": _words("--output --ext-diff --textconv -O --no-index"),
    "git log": _words("--output --ext-diff --textconv -O --output-directory"),
    "git show": _words("--output --ext-diff --textconv -O"),
    "git grep": _words("-O --open-files-in-pager --textconv --no-index -f"),
    "find": _words("-exec -execdir -ok -okdir -delete -fprint -fprint0 -fprintf -fls"),
    "sed": _words("-i --in-place -f --file --follow-symlinks"),
    "tar": _words(
        """-I --use-compress-program --to-command --checkpoint --checkpoint-action -F
        --info-script --new-volume-script -M --multi-volume -L --tape-length --rsh-command
        --rmt-command -C --directory -P --absolute-names -T --files-from --overwrite"""
    ),
    "rsync": _words("-e --rsh --rsync-path --daemon --config -M --remote-option"),
    "wget": _words(
        """-e --execute --use-askpass --config -i --input-file -r --recursive --post-file
        --body-file -o --output-file -a --append-output"""
    ),
    "curl": _words(
        """-K --config -T --upload-file -F --form -d --data --data-binary -w --write-out -b
        --cookie -c --cookie-jar -k --insecure"""
    ),
    "rg": _words("--pre --pre-glob -z --search-zip"),
    "sort": _words("--compress-program -o --output -T --temporary-directory --files0-from"),
    "cp": _words("-l --link -s --symbolic-link"),
    "rm": _words("--no-preserve-root"),
}
"""Options (and git subcommands) known to run other code, read other configuration or write
a file named in them, per grammar scope (``"git"`` for git's global options and subcommands,
``"git grep"`` for one subcommand's). The grammars never list them (a test checks it); a
refused option found here is reported as ``command_exec_option`` rather than
``command_unknown_option``. Not a deny-list: an option nobody listed here is refused too."""

_VERSION = re.compile(r"[0-9][0-9.]*$")


def program_class(program: str) -> str | None:
    """``interpreter``, ``wrapper``, ``project_scripts`` or None, from the base name."""
    base = _base(program)
    whole = program.rsplit("/", 1)[-1].lower().removesuffix(".exe")
    for name, (members, _) in _CLASSES.items():
        if base in members or whole in members:  # python3.12 is python; sqlite3, m4 as named
            return name
    if base.startswith(("ld-linux", "ld.so", "ld64.so")):
        return "wrapper"  # the dynamic loader runs the program it is given
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
    "--oneline")``; ``("*",)`` leaves the arguments to the program's grammar). They restrict
    on top of the grammar, never instead of it.
    ``permit`` names bypass classes this rule knowingly allows: ``interpreter``,
    ``wrapper``, ``project_scripts``, ``shell_builtin``.
    ``grammar`` is the program's option grammar (a table, see
    :mod:`.commandgrammar`), replacing the built-in one for this rule. A program with no
    grammar, built in or given, is refused, unless ``any_arguments_unsafe=True``: then any
    argument the patterns allow is approved, options that run code included.
    """

    program: str
    args: tuple[str, ...] = ()
    permit: Collection[str] = frozenset()
    grammar: Mapping[str, Any] | Grammar | None = None
    any_arguments_unsafe: bool = False

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
        if isinstance(self.permit, str):
            raise GateConfigError("Allow: permit is a collection of class names")
        permit = frozenset(self.permit)
        if "exec_option" in permit:
            raise GateConfigError(
                "Allow: permit 'exec_option' is gone: options are checked against the"
                " program's grammar; give a grammar= that lists the option, or"
                " any_arguments_unsafe=True"
            )
        if not permit <= PERMITS:
            unknown = sorted(permit - PERMITS)
            raise GateConfigError(f"Allow: unknown permit {unknown}; known: {sorted(PERMITS)}")
        object.__setattr__(self, "permit", permit)
        if not isinstance(self.any_arguments_unsafe, bool):
            raise GateConfigError("Allow: any_arguments_unsafe must be True or False")
        if self.grammar is not None:
            object.__setattr__(self, "grammar", compile_grammar(self.grammar))


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
    if rule.any_arguments_unsafe:
        return None
    grammar = rule.grammar if isinstance(rule.grammar, Grammar) else GRAMMARS.get(_base(program))
    if grammar is None:
        return DenyReason.COMMAND_NO_GRAMMAR
    return check_grammar(grammar, arguments, scope=_base(program))


def check_grammar(grammar: Grammar, arguments: Sequence[str], *, scope: str) -> DenyReason | None:
    """The reason ``arguments`` (the vector without its program) break ``grammar``, or None.

    Options are read the way GNU ``getopt_long`` (and git's parse-options) read them, with
    the options allowed anywhere among the operands (GNU's permutation: reading more words as
    options only refuses more). ``scope`` names the grammar for :data:`EXEC_OPTIONS`.
    """
    known_bad = EXEC_OPTIONS.get(scope, frozenset())

    def unknown(name: str) -> DenyReason:
        if name in known_bad:
            return DenyReason.COMMAND_EXEC_OPTION
        return DenyReason.COMMAND_UNKNOWN_OPTION

    options = grammar.options
    operands: list[str] = []
    scripts: list[str] = []
    values: list[tuple[str, str]] = []
    ended = False
    i = 0
    count = len(arguments)

    def take(name: str, attached: str | None) -> bool:
        nonlocal i
        if attached is not None:
            values.append((name, attached))
            return True
        if i >= count:
            return False
        values.append((name, arguments[i]))
        i += 1
        return True

    if grammar.bundle and arguments and not arguments[0].startswith("-"):
        # Old-style letters (``tar xvf a.tar``): each letter that takes a value takes the
        # next argument, in order.
        i = 1
        for letter in arguments[0]:
            name = "-" + letter
            kind = options.get(name)
            if kind is None or kind == OPTIONAL:
                return unknown(name)
            if kind == VALUE and not take(name, None):
                return DenyReason.COMMAND_UNKNOWN_OPTION
    while i < count:
        token = arguments[i]
        i += 1
        if ended or token == "-" or not token.startswith("-"):
            if grammar.subcommands and not ended:
                sub = grammar.subcommands.get(token)
                if sub is None:
                    return unknown(token)
                outcome = _values_refusal(grammar, values, [], [])
                if outcome is not None:
                    return outcome
                return check_grammar(sub, arguments[i:], scope=f"{scope} {token}")
            operands.append(token)
            continue
        if token == "--" and grammar.dashdash:
            if grammar.subcommands:
                return DenyReason.COMMAND_UNKNOWN_OPTION
            ended = True
            continue
        if grammar.words:
            kind = options.get(token)
            if kind is None:
                return unknown(token)
            if kind != FLAG and not take(token, None):
                return DenyReason.COMMAND_UNKNOWN_OPTION
            continue
        if token.startswith("--"):
            name, equals, value = token.partition("=")
            kind = options.get(name)
            if kind is None:
                return unknown(name)
            if kind == FLAG and equals:
                return DenyReason.COMMAND_UNKNOWN_OPTION
            if kind == VALUE and not take(name, value if equals else None):
                return DenyReason.COMMAND_UNKNOWN_OPTION
            if kind == OPTIONAL and equals:
                values.append((name, value))
            continue
        if grammar.numbers and token[1:].isascii() and token[1:].isdigit():
            continue
        position = 1
        while position < len(token):
            name = "-" + token[position]
            kind = options.get(name)
            if kind is None:
                return unknown(name)
            rest = token[position + 1 :]
            if kind == FLAG:
                position += 1
                continue
            if kind == VALUE and not take(name, rest or None):
                return DenyReason.COMMAND_UNKNOWN_OPTION
            if kind == OPTIONAL and rest:
                values.append((name, rest))
            break
    return _values_refusal(grammar, values, operands, scripts)


def _values_refusal(
    grammar: Grammar,
    values: Sequence[tuple[str, str]],
    operands: Sequence[str],
    scripts: list[str],
) -> DenyReason | None:
    for name, value in values:
        check = grammar.checks.get(name)
        if check is not None and not check(value):
            return DenyReason.COMMAND_UNSAFE_VALUE
        if name in grammar.script_options:
            scripts.append(value)
    if grammar.script is not None:
        if not scripts and operands:
            scripts.append(operands[0])
            operands = operands[1:]
        if not all(grammar.script(script) for script in scripts):
            return DenyReason.COMMAND_UNSAFE_VALUE
    if grammar.max_operands is not None and len(operands) > grammar.max_operands:
        return DenyReason.COMMAND_UNSAFE_VALUE
    if grammar.operand_check is not None and not all(map(grammar.operand_check, operands)):
        return DenyReason.COMMAND_UNSAFE_VALUE
    return None


class CommandAllowList(GatePolicy):
    """A gate policy: the argument vectors of command tools must pass :func:`check_argv`.

    ``rules``: the :class:`Allow` rules (one per program). ``tools``: which tools run
    commands, and in which argument: ``{"run": "argv"}``. ``grammars``: option grammars for
    programs the rules name (keyed as the rule spells the program), replacing the built-in
    ones (see :mod:`.commandgrammar` for the table format). Calls of other tools are approved
    by this policy (compose it with others for them); a command tool's call without the
    argument is refused.
    """

    def __init__(
        self,
        rules: Iterable[Allow],
        *,
        tools: Mapping[str, str],
        grammars: Mapping[str, Mapping[str, Any] | Grammar] | None = None,
    ) -> None:
        table: dict[str, Allow] = {}
        for rule in rules:
            if not isinstance(rule, Allow):
                raise GateConfigError("CommandAllowList: rules must be Allow(...) objects")
            if rule.program in table:
                raise GateConfigError("CommandAllowList: one rule per program")
            table[rule.program] = rule
        if grammars is not None:
            if not isinstance(grammars, Mapping):
                raise GateConfigError("CommandAllowList: grammars maps programs to tables")
            for program, grammar in grammars.items():
                if program not in table:
                    raise GateConfigError("CommandAllowList: a grammar for a program no rule names")
                if table[program].grammar is not None:
                    raise GateConfigError("CommandAllowList: two grammars for one program")
                table[program] = dataclasses.replace(
                    table[program], grammar=compile_grammar(grammar)
                )
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
