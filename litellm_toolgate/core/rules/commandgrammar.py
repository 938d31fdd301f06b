"""Per-program option grammars for the command allow-list: which options exist, safe ones only.

Each table below is a plain mapping, one per program, read from the program's manual (the
``manual`` key cites it). A table lists only the options known to be safe for that program:
an option the table does not list is refused, so a code-running option nobody listed
(``find -exec``, ``tar -I``, ``git grep -O``, ``wget --use-askpass``) is refused without anyone
having to know about it. :func:`compile_grammar` turns a table into a :class:`Grammar` and
refuses a bad one (unknown keys, a malformed option name, a wrong type) with
:class:`~.errors.GateConfigError`.

Table keys (all optional except ``manual``):

``manual``
    Where the table was read from (a man page section, a URL). Required: a table says where it
    comes from, so a reviewer can check it.
``flags``
    Options that take no value: ``"-l --all"`` (whitespace-separated words, or a collection).
``values``
    Options that take a value: ``-n 5`` or ``-n5`` (short), ``--lines 5`` or ``--lines=5``
    (long); a value never has to look like anything (``-e -x`` gives ``-e`` the value ``-x``).
``optional``
    Options whose value is optional: only attached (``-uno``) or after ``=`` (``--color=auto``).
``checks``
    Option name to a predicate over its value (``tar -f``: no remote ``host:file`` archive);
    a value the predicate refuses is refused.
``operand_check``
    A predicate over every operand (``curl``: only ``http(s)://`` URLs).
``max_operands``
    At most this many operands (``uniq``'s second operand is a file it writes).
``script``
    A predicate over the program's script: the value of any of ``script_options``, or, when
    none is given, the first operand (``sed``: line-number ``p`` commands only).
``script_options``
    The options whose value is a script (``sed``'s ``-e``/``--expression``).
``subcommands``
    Subcommand name to its own table; this table's options are then the global options, before
    the subcommand (``git``'s ``--no-pager``). A word in the subcommand's place that is not
    listed is refused (an alias, ``submodule``...).
``dashdash``
    Whether ``--`` ends the options (default true). False for ``find``, where it does not end
    the expression.
``bundle``
    Whether a first argument without ``-`` is a bundle of short option letters (``tar xvf``);
    each letter that takes a value takes the next argument, in order.
``numbers``
    Whether ``-<digits>`` is accepted (``head -5``, ``git log -3``).
``words``
    Whether options are whole words after one dash (``find -name``): no letter clusters, no
    ``=``.

Long options are matched exactly. GNU ``getopt_long`` and git accept any unique prefix of a
long option, but a table lists only the safe options of a program, so the checker cannot know
which option a prefix resolves to among those it does not list (``--output`` is an option of
its own in ``git diff``, not a prefix of ``--output-indicator-new``): an abbreviation is
refused as an unknown option.

Sans-I/O: nothing here runs or reads anything.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import GateConfigError

__all__ = ["GRAMMARS", "Grammar", "ValueCheck", "compile_grammar"]

ValueCheck = Callable[[str], bool]

FLAG, VALUE, OPTIONAL = "flag", "value", "optional"
_SHORT = re.compile(r"-[A-Za-z0-9?#.]")
_LONG = re.compile(r"--[A-Za-z0-9][A-Za-z0-9_.-]*")
_WORD = re.compile(r"--?[A-Za-z][A-Za-z0-9_-]*|--")
_KEYS = frozenset(
    {
        "manual",
        "flags",
        "values",
        "optional",
        "checks",
        "operand_check",
        "max_operands",
        "script",
        "script_options",
        "subcommands",
        "dashdash",
        "bundle",
        "numbers",
        "words",
    }
)


@dataclass(frozen=True, slots=True, eq=False)
class Grammar:
    """A compiled option grammar (see the module docstring for the table it comes from)."""

    manual: str
    options: Mapping[str, str]
    """Option name to ``flag``, ``value`` or ``optional``."""
    checks: Mapping[str, ValueCheck] = field(default_factory=dict)
    operand_check: ValueCheck | None = None
    max_operands: int | None = None
    script: ValueCheck | None = None
    script_options: frozenset[str] = frozenset()
    subcommands: Mapping[str, Grammar] = field(default_factory=dict)
    dashdash: bool = True
    bundle: bool = False
    numbers: bool = False
    words: bool = False

    def __repr__(self) -> str:
        return f"Grammar({len(self.options)} options, {len(self.subcommands)} subcommands)"


def _names(table: Mapping[str, Any], key: str) -> frozenset[str]:
    raw = table.get(key, ())
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, Collection) and all(isinstance(n, str) for n in raw):
        return frozenset(raw)
    raise GateConfigError(f"grammar: {key} must be a string of words or a collection of strings")


def _predicate(value: object, what: str) -> ValueCheck | None:
    if value is None:
        return None
    if not callable(value):
        raise GateConfigError(f"grammar: {what} must be a predicate over a string")
    check: ValueCheck = value
    return check


def _flag(table: Mapping[str, Any], key: str) -> bool:
    value = table.get(key, key == "dashdash")
    if not isinstance(value, bool):
        raise GateConfigError(f"grammar: {key} must be true or false")
    return value


def compile_grammar(table: Mapping[str, Any] | Grammar) -> Grammar:
    """A :class:`Grammar` from a table; a bad table raises :class:`GateConfigError`."""
    if isinstance(table, Grammar):
        return table
    if not isinstance(table, Mapping):
        raise GateConfigError("grammar: a table is a mapping of the documented keys")
    unknown = set(table) - _KEYS
    if unknown:
        raise GateConfigError(f"grammar: unknown keys {sorted(map(str, unknown))}")
    manual = table.get("manual")
    if not isinstance(manual, str) or not manual.strip():
        raise GateConfigError("grammar: manual must cite where the table was read from")
    words = _flag(table, "words")
    options: dict[str, str] = {}
    for key, kind in (("flags", FLAG), ("values", VALUE), ("optional", OPTIONAL)):
        for name in _names(table, key):
            if words:
                valid = _WORD.fullmatch(name) is not None
            else:
                valid = _SHORT.fullmatch(name) is not None or _LONG.fullmatch(name) is not None
            if not valid:
                raise GateConfigError(f"grammar: malformed option name {name!r} in {key}")
            if name in options:
                raise GateConfigError(f"grammar: {name!r} is listed twice")
            options[name] = kind
    raw_checks = table.get("checks", {})
    if not isinstance(raw_checks, Mapping):
        raise GateConfigError("grammar: checks maps option names to predicates")
    checks: dict[str, ValueCheck] = {}
    for name, check in raw_checks.items():
        if options.get(name) not in (VALUE, OPTIONAL):
            raise GateConfigError("grammar: checks names an option that takes no value")
        predicate = _predicate(check, "a check")
        assert predicate is not None
        checks[name] = predicate
    script_options = _names(table, "script_options")
    script = _predicate(table.get("script"), "script")
    if script_options and (script is None or any(options.get(n) != VALUE for n in script_options)):
        raise GateConfigError("grammar: script_options need a script and must take values")
    max_operands = table.get("max_operands")
    if max_operands is not None and (
        not isinstance(max_operands, int) or isinstance(max_operands, bool) or max_operands < 0
    ):
        raise GateConfigError("grammar: max_operands must be a non-negative integer")
    raw_subs = table.get("subcommands", {})
    if not isinstance(raw_subs, Mapping) or not all(
        isinstance(k, str) and k and not k.startswith("-") for k in raw_subs
    ):
        raise GateConfigError("grammar: subcommands maps subcommand names to tables")
    return Grammar(
        manual=manual,
        options=options,
        checks=checks,
        operand_check=_predicate(table.get("operand_check"), "operand_check"),
        max_operands=max_operands,
        script=script,
        script_options=script_options,
        subcommands={name: compile_grammar(sub) for name, sub in raw_subs.items()},
        dashdash=_flag(table, "dashdash"),
        bundle=_flag(table, "bundle"),
        numbers=_flag(table, "numbers"),
        words=words,
    )


# --- Value checks -----------------------------------------------------------------------

_SED_ADDRESS = r"(?:[0-9]+|\$)"
_SED_COMMAND = rf"\s*(?:{_SED_ADDRESS}(?:\s*,\s*{_SED_ADDRESS})?)?\s*[pq]\s*"
_SED_SAFE = re.compile(rf"{_SED_COMMAND}(?:;{_SED_COMMAND})*;?\s*", re.ASCII)


def sed_line_print(script: str) -> bool:
    """A sed script of line-number ``p`` (and ``q``) commands only: ``1,5p``, ``3p;10q``."""
    return _SED_SAFE.fullmatch(script) is not None


def local_archive(value: str) -> bool:
    """A tar archive name without ``:``, which GNU tar reads as ``host:file`` over rsh."""
    return ":" not in value


def local_path(value: str) -> bool:
    """An rsync path without ``:`` (``host:path`` and ``host::module`` run a remote shell)."""
    return ":" not in value


def web_url(value: str) -> bool:
    """An ``http://`` or ``https://`` URL (no ``file://``, ``scp://``, ``telnet://``...)."""
    return value.lower().startswith(("http://", "https://"))


def not_from_file(value: str) -> bool:
    """A value without a leading ``@``, which curl reads as ``@file`` (a local file sent out)."""
    return not value.startswith("@")


# --- git --------------------------------------------------------------------------------
# git(1), gitrevisions(7), git-diff(1), git-log(1): https://git-scm.com/docs (git 2.39-2.47)

_GIT_DIFF_FLAGS = """-p -u --patch -s --no-patch --raw --patch-with-raw --minimal --patience
    --histogram --numstat --shortstat --summary --patch-with-stat -z --name-only
    --name-status --no-color --no-renames --rename-empty --no-rename-empty --check
    --full-index --binary --text -a --ignore-cr-at-eol --ignore-space-at-eol
    --ignore-space-change -b --ignore-all-space -w --ignore-blank-lines -W --function-context
    --exit-code --quiet --no-ext-diff --no-textconv -R --no-relative --no-prefix
    --no-indent-heuristic
    --indent-heuristic --irreversible-delete -D --pickaxe-all --pickaxe-regex --no-abbrev
    --compact-summary --cached --staged --merge-base --no-color-moved --find-copies-harder"""
_GIT_DIFF_VALUES = """-U --unified --diff-algorithm --stat-width --stat-name-width
    --stat-count --diff-filter -S -G -l --src-prefix --dst-prefix --line-prefix
    --inter-hunk-context --anchored --find-object --output-indicator-new
    --output-indicator-old --output-indicator-context --ws-error-highlight --skip-to --rotate-to"""
_GIT_DIFF_OPTIONAL = """--stat --dirstat --cumulative --color --color-moved --word-diff
    --word-diff-regex --color-words --find-renames -M --find-copies -C --break-rewrites -B
    --abbrev --relative --ignore-submodules --submodule"""
_GIT_LOG_FLAGS = """--follow --no-decorate --source --use-mailmap --mailmap --full-diff
    --log-size --all --reverse --first-parent --merges --no-merges
    --no-min-parents --no-max-parents --not --oneline --graph --no-graph --abbrev-commit
    --no-abbrev-commit --relative-date --topo-order --date-order --author-date-order
    --left-right --left-only --right-only --cherry-pick --cherry-mark --cherry --boundary
    --ancestry-path --simplify-by-decoration --full-history --dense --sparse
    --simplify-merges --show-pulls --no-walk --do-walk --children --parents --all-match
    --invert-grep -i --regexp-ignore-case --basic-regexp -E --extended-regexp -F
    --fixed-strings --perl-regexp --show-signature --no-notes --show-notes --remove-empty
    --count --cc -c -m --dd --no-diff-merges --show-linear-break --expand-tabs
    --no-expand-tabs --clear-decorations"""
_GIT_LOG_VALUES = """-n --max-count --skip --since --after --until --before --author
    --committer --grep --grep-reflog --min-parents --max-parents --format --date
    --since-as-filter --exclude --glob --decorate-refs --decorate-refs-exclude --diff-merges
    --encoding -L"""
_GIT_LOG_OPTIONAL = """--decorate --pretty --notes --branches --tags --remotes"""

GIT: Mapping[str, Any] = {
    "manual": "git(1) OPTIONS, https://git-scm.com/docs/git#_options",
    # Global options: only those that do not point git at other code or config. Refused by
    # omission: -c, -C, --config-env, --exec-path, --git-dir, --work-tree, --namespace,
    # --attr-source, --super-prefix, -p/--paginate, --list-cmds, --bare.
    "flags": """--no-pager --no-replace-objects --literal-pathspecs --glob-pathspecs
        --noglob-pathspecs --icase-pathspecs --no-optional-locks --version""",
    "subcommands": {
        "status": {
            "manual": "git-status(1), https://git-scm.com/docs/git-status",
            "flags": """-s --short -b --branch --show-stash --long -v --verbose -z
                --no-column --ahead-behind --no-ahead-behind --renames --no-renames""",
            "optional": """--porcelain -u --untracked-files --ignored --ignore-submodules
                --column --find-renames""",
        },
        "log": {
            "manual": "git-log(1), https://git-scm.com/docs/git-log",
            "flags": f"{_GIT_LOG_FLAGS} {_GIT_DIFF_FLAGS}",
            "values": f"{_GIT_LOG_VALUES} {_GIT_DIFF_VALUES}",
            "optional": f"{_GIT_LOG_OPTIONAL} {_GIT_DIFF_OPTIONAL}",
            "numbers": True,
        },
        "show": {
            "manual": "git-show(1), https://git-scm.com/docs/git-show",
            "flags": f"{_GIT_LOG_FLAGS} {_GIT_DIFF_FLAGS}",
            "values": f"{_GIT_LOG_VALUES} {_GIT_DIFF_VALUES}",
            "optional": f"{_GIT_LOG_OPTIONAL} {_GIT_DIFF_OPTIONAL}",
            "numbers": True,
        },
        # Not --output (writes a file), --ext-diff / --textconv (run configured programs),
        # -O<orderfile>, --no-index (compares any two files on the disk).
        "diff": {
            "manual": "git-diff(1), https://git-scm.com/docs/git-diff",
            "flags": f"{_GIT_DIFF_FLAGS} -1 -2 -3 --base --ours --theirs -0",
            "values": _GIT_DIFF_VALUES,
            "optional": _GIT_DIFF_OPTIONAL,
        },
        # Not -O / --open-files-in-pager (runs a pager command), --no-index, -f (a file).
        "grep": {
            "manual": "git-grep(1), https://git-scm.com/docs/git-grep",
            "flags": """--cached --untracked --no-exclude-standard --exclude-standard
                --recurse-submodules -a --text -i --ignore-case -I -r --recursive
                --no-recursive -w --word-regexp -v --invert-match -h -H --full-name -E
                --extended-regexp -G --basic-regexp -P --perl-regexp -F --fixed-strings -n
                --line-number --column -l --files-with-matches --name-only -L
                --files-without-match -z --null -o --only-matching -c --count --no-color
                --break --heading -p --show-function -W --function-context --and --or --not
                --all-match -q --quiet""",
            "values": """--max-depth -e -A --after-context -B --before-context -C --context
                -m --max-count --threads""",
            "optional": "--color",
            "numbers": True,
        },
        "ls-files": {
            "manual": "git-ls-files(1), https://git-scm.com/docs/git-ls-files",
            "flags": """-c --cached -d --deleted -m --modified -o --others -i --ignored -s
                --stage -u --unmerged -k --killed -z -t -v -f --full-name --exclude-standard
                --directory --no-empty-directory --error-unmatch --eol --deduplicate --sparse
                --resolve-undo --debug""",
            "values": """-x --exclude -X --exclude-from --exclude-per-directory --format
                --with-tree""",
            "optional": "--abbrev",
        },
        "rev-parse": {
            "manual": "git-rev-parse(1), https://git-scm.com/docs/git-rev-parse",
            "flags": """--verify -q --quiet --sq --not --symbolic --symbolic-full-name --all
                --show-toplevel --show-prefix --show-cdup --git-dir --git-common-dir
                --absolute-git-dir --is-inside-work-tree --is-inside-git-dir
                --is-bare-repository --is-shallow-repository --show-superproject-working-tree
                --shared-index-path --local-env-vars --revs-only --no-revs --flags --no-flags
                --show-object-format""",
            "values": "--default --prefix --since --after --until --before --git-path",
            "optional": "--short --abbrev-ref --branches --tags --remotes --glob --exclude",
        },
        # Listing (and creating a branch at a start point); not -d/-D/-m/-M/-c/-C/-u,
        # --edit-description (runs an editor), --set-upstream-to.
        "branch": {
            "manual": "git-branch(1), https://git-scm.com/docs/git-branch",
            "flags": """-a --all -r --remotes -v --verbose -l --list --show-current
                --no-color --no-column -i --ignore-case --omit-empty -q --quiet""",
            "values": "--sort --format --points-at",
            "optional": "--color --column --abbrev",
        },
        "tag": {
            "manual": "git-tag(1), https://git-scm.com/docs/git-tag",
            "flags": "-l --list -i --ignore-case --no-column --omit-empty",
            "values": "--sort --format --points-at",
            "optional": "-n --column --color",
        },
        "blame": {
            "manual": "git-blame(1), https://git-scm.com/docs/git-blame",
            "flags": """-b --root --show-stats -l -t -s -n --show-number -e --show-email -w
                -f --show-name -p --porcelain --line-porcelain --incremental -c --score-debug
                --progress --no-progress""",
            "values": "-L --date --since --ignore-rev --encoding",
            "optional": "-M -C --abbrev --color-lines --color-by-age",
        },
        "shortlog": {
            "manual": "git-shortlog(1), https://git-scm.com/docs/git-shortlog",
            "flags": "-n --numbered -s --summary -e --email -c --committer --all",
            "values": "--format --group",
            "optional": "-w",
        },
        "cat-file": {
            "manual": "git-cat-file(1), https://git-scm.com/docs/git-cat-file",
            "flags": "-t -s -e -p --mailmap --use-mailmap --no-mailmap --allow-unknown-type",
        },
        "describe": {
            "manual": "git-describe(1), https://git-scm.com/docs/git-describe",
            "flags": """--all --tags --contains --long --always --first-parent --exact-match
                --debug""",
            "values": "--candidates --match --exclude",
            "optional": "--abbrev --dirty --broken",
        },
    },
}

# --- find -------------------------------------------------------------------------------
# find(1), GNU findutils 4.9, https://www.gnu.org/software/findutils/manual/html_node/find_html/
# Not -exec, -execdir, -ok, -okdir (run programs), -delete, -fprint, -fprint0, -fprintf,
# -fls (write files), -files0-from.
FIND: Mapping[str, Any] = {
    "manual": "find(1) GNU findutils, EXPRESSION section",
    "words": True,
    "dashdash": False,
    "flags": """-- -H -L -P -print -print0 -ls -prune -quit -depth -d -xdev -mount -follow
        -empty -true -false -readable -writable -executable -nouser -nogroup -daystart
        -ignore_readdir_race -noignore_readdir_race -noleaf -not -and -or -a -o -help --help
        -version --version""",
    "values": """-D -O -name -iname -path -ipath -wholename -iwholename -regex -iregex
        -regextype -type -xtype -maxdepth -mindepth -newer -anewer -cnewer -newermt -newerct
        -neweram -newerat -newercm -newerca -newerac -newerma -newermc -newermm -newercc
        -neweraa -size -mtime -mmin -atime -amin -ctime -cmin -used -user -group -uid -gid
        -perm -links -inum -samefile -lname -ilname -printf -fstype -context""",
}

# --- sed --------------------------------------------------------------------------------
# sed(1), GNU sed 4.9, https://www.gnu.org/software/sed/manual/sed.html
# The script is limited to line-number print commands: no e, w, W, r, R, s///e or s///w.
# Not -i/--in-place, -f/--file, --follow-symlinks.
SED: Mapping[str, Any] = {
    "manual": "sed(1) GNU sed 4.9, 'Command-Line Options'",
    "flags": """-n --quiet --silent -E -r --regexp-extended -s --separate -z --null-data -u
        --unbuffered --posix --sandbox --debug""",
    "values": "-e --expression -l --line-length",
    "script": sed_line_print,
    "script_options": "-e --expression",
}

# --- tar --------------------------------------------------------------------------------
# tar(1), GNU tar 1.34, https://www.gnu.org/software/tar/manual/html_node/All-Options.html
# Listing, extracting, creating. Not -I/--use-compress-program, --to-command,
# --checkpoint(-action), -F/--info-script/--new-volume-script, -M/-L (multi-volume),
# --rsh-command, --rmt-command, -C (extracts elsewhere), -P/--absolute-names, -T, --overwrite.
TAR: Mapping[str, Any] = {
    "manual": "tar(1) GNU tar 1.34, 'All Options'",
    "bundle": True,
    "flags": """-t --list -x --extract --get -c --create -v --verbose -z --gzip --gunzip
        --ungzip -j --bzip2 -J --xz --lzip --zstd -a --auto-compress -k --keep-old-files
        --skip-old-files --keep-newer-files -O --to-stdout -m --touch --no-same-owner
        --no-same-permissions --wildcards --no-wildcards --force-local --numeric-owner
        --totals -h --dereference --one-file-system""",
    "values": "-f --file --exclude --strip-components --exclude-from -X",
    "checks": {"-f": local_archive, "--file": local_archive},
}

# --- rsync ------------------------------------------------------------------------------
# rsync(1) 3.2, https://download.samba.org/pub/rsync/rsync.1 -- local copies only: no
# -e/--rsh, --rsync-path, --daemon, --config, -M/--remote-option, host:path operands.
RSYNC: Mapping[str, Any] = {
    "manual": "rsync(1) 3.2, OPTIONS",
    "flags": """-a --archive -v --verbose -q --quiet -r --recursive -l --links -p --perms
        -t --times -g --group -o --owner -D --devices --specials -z --compress -h
        --human-readable -n --dry-run -c --checksum -u --update -P --progress --partial -i
        --itemize-changes --stats --size-only --ignore-existing --existing --mkpath -R
        --relative -x --one-file-system""",
    "values": "--exclude --include --max-size --min-size",
    "operand_check": local_path,
}

# --- wget / curl ------------------------------------------------------------------------
# wget(1) GNU Wget 1.21, https://www.gnu.org/software/wget/manual/wget.html -- not
# -e/--execute, --use-askpass, --config, -i/--input-file, -r, --post-file, --body-file,
# -o/-a (log files), -B, --no-check-certificate.
WGET: Mapping[str, Any] = {
    "manual": "wget(1) GNU Wget 1.21, 'Invoking'",
    "flags": """-q --quiet -v --verbose --no-verbose -S --server-response --spider -N
        --timestamping -c --continue --no-clobber --no-directories -4 --inet4-only -6
        --inet6-only --no-config""",
    # wget reads -nv, -nc, -nd as -n with the value v, c, d.
    "values": """-n -O --output-document -P --directory-prefix -T --timeout -t --tries -U
        --user-agent --header --max-redirect -w --wait""",
    "checks": {"-n": lambda value: value in ("v", "c", "d")},
    "operand_check": web_url,
}
# curl(1) 7.88-8.x, https://curl.se/docs/manpage.html -- http(s) URLs only; not -K/--config,
# -T/--upload-file, -F/--form, -d/--data (reads @file), -w/--write-out, -b/-c (cookie
# files), -k/--insecure, --proto-redir; -H/--header without @file.
CURL: Mapping[str, Any] = {
    "manual": "curl(1), https://curl.se/docs/manpage.html",
    "flags": """-s --silent -S --show-error -f --fail -L --location -I --head -i --include
        -v --verbose --compressed -4 --ipv4 -6 --ipv6 -G --get -# --progress-bar -q --disable
        -O --remote-name --http1.1 --http2 --fail-with-body""",
    "values": """-o --output -X --request -H --header -A --user-agent -e --referer -m
        --max-time --connect-timeout --retry --data-raw --url --max-redirs""",
    "checks": {
        "-H": not_from_file,
        "--header": not_from_file,
        "--url": web_url,
    },
    "operand_check": web_url,
}

# --- coreutils and friends --------------------------------------------------------------
# GNU coreutils 9.x manual, https://www.gnu.org/software/coreutils/manual/coreutils.html
LS: Mapping[str, Any] = {
    "manual": "ls(1) GNU coreutils, 'ls invocation'",
    "flags": """-a --all -A --almost-all -l -h --human-readable -R --recursive -t -r
        --reverse -S -1 -d --directory -F -i --inode -n --numeric-uid-gid -s --size -X -U -v
        -p -G --no-group -g -o -c -u -L --dereference -H --dereference-command-line -q -Q
        --quote-name -B --ignore-backups -N --literal -m -x -C -k --kibibytes -Z --context
        --group-directories-first --full-time --author --file-type --si -b --escape
        --hide-control-chars --show-control-chars -D --dired""",
    "values": """--sort --time --time-style --format --block-size -I --ignore --hide
        --indicator-style --quoting-style -w --width -T --tabsize""",
    "optional": "--color --classify --hyperlink",
}
CAT: Mapping[str, Any] = {
    "manual": "cat(1) GNU coreutils, 'cat invocation'",
    "flags": """-A --show-all -b --number-nonblank -e -E --show-ends -n --number -s
        --squeeze-blank -t -T --show-tabs -u -v --show-nonprinting""",
}
HEAD: Mapping[str, Any] = {
    "manual": "head(1) GNU coreutils, 'head invocation'",
    "flags": "-q --quiet --silent -v --verbose -z --zero-terminated",
    "values": "-c --bytes -n --lines",
    "numbers": True,
}
# Not -f/-F/--follow (never ends), --pid, -s.
TAIL: Mapping[str, Any] = {
    "manual": "tail(1) GNU coreutils, 'tail invocation'",
    "flags": "-q --quiet --silent -v --verbose -z --zero-terminated",
    "values": "-c --bytes -n --lines",
    "numbers": True,
}
WC: Mapping[str, Any] = {
    "manual": "wc(1) GNU coreutils, 'wc invocation'",
    "flags": "-c --bytes -m --chars -l --lines -L --max-line-length -w --words",
    "values": "--total",
}
# grep(1) GNU grep 3.x, https://www.gnu.org/software/grep/manual/grep.html
GREP: Mapping[str, Any] = {
    "manual": "grep(1) GNU grep 3.8, 'Invoking'",
    "flags": """-i -y --ignore-case --no-ignore-case -v --invert-match -w --word-regexp -x
        --line-regexp -c --count -l --files-with-matches -L --files-without-match -n
        --line-number -h --no-filename -H --with-filename -o --only-matching -q --quiet
        --silent -s --no-messages -r --recursive -R --dereference-recursive -E
        --extended-regexp -F --fixed-strings -G --basic-regexp -P --perl-regexp -z
        --null-data -Z --null -a --text -I -b --byte-offset -T --initial-tab -U --binary
        --line-buffered""",
    "values": """-e --regexp -f --file -m --max-count -A --after-context -B
        --before-context -C --context --include --exclude --exclude-dir --exclude-from
        --label --binary-files -d --directories -D --devices""",
    "optional": "--color --colour",
    "numbers": True,
}
# rg(1) ripgrep 13-14, https://github.com/BurntSushi/ripgrep/blob/master/doc/rg.1.txt.tpl
# Not --pre / --pre-glob (run a program per file), -z/--search-zip (runs decompressors).
RG: Mapping[str, Any] = {
    "manual": "rg(1) ripgrep 14, OPTIONS",
    "flags": """-i --ignore-case -s --case-sensitive -S --smart-case -v --invert-match -w
        --word-regexp -x --line-regexp -c --count --count-matches -l --files-with-matches
        --files-without-match -n --line-number -N --no-line-number -o --only-matching -q
        --quiet -F --fixed-strings -P --pcre2 -u --unrestricted -. --hidden -L --follow -H
        --with-filename -I --no-filename --no-heading --heading --vimgrep --json --files
        --no-ignore --no-ignore-vcs --no-messages --stats --trim -U --multiline -a --text
        --type-list -0 --null --no-config""",
    "values": """-e --regexp -g --glob --iglob -t --type -T --type-not -m --max-count -A
        --after-context -B --before-context -C --context -d --max-depth --max-filesize -j
        --threads --sort --sortr --color --colors -M --max-columns -r --replace -E
        --encoding --path-separator""",
}
# Not -T (temporary directory), -o/--output (writes a file), --compress-program,
# --files0-from, --random-source.
SORT: Mapping[str, Any] = {
    "manual": "sort(1) GNU coreutils, 'sort invocation'",
    "flags": """-b --ignore-leading-blanks -d --dictionary-order -f --ignore-case -g
        --general-numeric-sort -i --ignore-nonprinting -M --month-sort -h
        --human-numeric-sort -n --numeric-sort -R --random-sort -r --reverse -V
        --version-sort -c -C -m --merge -s --stable -u --unique -z --zero-terminated""",
    "values": "-k --key -t --field-separator -S --buffer-size --parallel --sort",
    "optional": "--check",
}
# One operand: uniq's second operand is a file it writes.
UNIQ: Mapping[str, Any] = {
    "manual": "uniq(1) GNU coreutils, 'uniq invocation'",
    "flags": """-c --count -d --repeated -D -u --unique -i --ignore-case -z
        --zero-terminated""",
    "values": "-f --skip-fields -s --skip-chars -w --check-chars",
    "optional": "--all-repeated --group",
    "max_operands": 1,
}
CUT: Mapping[str, Any] = {
    "manual": "cut(1) GNU coreutils, 'cut invocation'",
    "flags": "-s --only-delimited -z --zero-terminated --complement -n",
    "values": "-b --bytes -c --characters -f --fields -d --delimiter --output-delimiter",
}
# diff(1) GNU diffutils 3.8, https://www.gnu.org/software/diffutils/manual/
DIFF: Mapping[str, Any] = {
    "manual": "diff(1) GNU diffutils 3.8, 'Invoking diff'",
    "flags": """-q --brief -s --report-identical-files -c -u -y --side-by-side -N
        --new-file -r --recursive -i --ignore-case -w --ignore-all-space -b
        --ignore-space-change -B --ignore-blank-lines -a --text -t --expand-tabs -T
        --initial-tab -p --show-c-function --strip-trailing-cr -d --minimal
        --suppress-common-lines --left-column --no-dereference""",
    "values": """-U -C -W --width -x --exclude -I --ignore-matching-lines --label -F
        --show-function-line""",
    "optional": "--unified --context --color",
}
STAT: Mapping[str, Any] = {
    "manual": "stat(1) GNU coreutils, 'stat invocation'",
    "flags": "-L --dereference -f --file-system -t --terse",
    "values": "-c --format --printf",
}
DU: Mapping[str, Any] = {
    "manual": "du(1) GNU coreutils, 'du invocation'",
    "flags": """-a --all -b --bytes -c --total -h --human-readable -s --summarize -x
        --one-file-system --si --apparent-size --inodes -k -m -L --dereference -P
        --no-dereference -H -D -l --count-links -0 --null -S --separate-dirs""",
    "values": "-d --max-depth --exclude -t --threshold -B --block-size --time-style",
    "optional": "--time",
}
DF: Mapping[str, Any] = {
    "manual": "df(1) GNU coreutils, 'df invocation'",
    "flags": """-a --all -h --human-readable -H --si -i --inodes -k -l --local -P
        --portability -T --print-type --total""",
    "values": "-B --block-size -t --type -x --exclude-type",
    "optional": "--output",
}
PWD: Mapping[str, Any] = {
    "manual": "pwd(1) GNU coreutils, 'pwd invocation'",
    "flags": "-L --logical -P --physical",
    "max_operands": 0,
}
# Not -s/--set (sets the clock), -f/--file.
DATE: Mapping[str, Any] = {
    "manual": "date(1) GNU coreutils, 'date invocation'",
    "flags": "-u --utc --universal -R --rfc-email --debug",
    "values": "-d --date -r --reference --rfc-3339",
    "optional": "-I --iso-8601",
}
TRUE: Mapping[str, Any] = {"manual": "true(1) GNU coreutils, 'true invocation'"}
FALSE: Mapping[str, Any] = {"manual": "false(1) GNU coreutils, 'false invocation'"}
ECHO: Mapping[str, Any] = {
    "manual": "echo(1) GNU coreutils, 'echo invocation'",
    "flags": "-n -e -E",
}
MKDIR: Mapping[str, Any] = {
    "manual": "mkdir(1) GNU coreutils, 'mkdir invocation'",
    "flags": "-p --parents -v --verbose",
    "values": "-m --mode",
}
TOUCH: Mapping[str, Any] = {
    "manual": "touch(1) GNU coreutils, 'touch invocation'",
    "flags": "-a -c --no-create -m -h --no-dereference",
    "values": "-d --date -t -r --reference",
}
# Not -l/--link (hard links), -s/--symbolic-link, -b/--backup, -S/--suffix.
CP: Mapping[str, Any] = {
    "manual": "cp(1) GNU coreutils, 'cp invocation'",
    "flags": """-a --archive -r -R --recursive -p -v --verbose -n --no-clobber -u -f
        --force --parents -T --no-target-directory -L --dereference -P --no-dereference -H
        -d --attributes-only --remove-destination --strip-trailing-slashes -x
        --one-file-system""",
    "values": "-t --target-directory --no-preserve",
    "optional": "--preserve --update --sparse --reflink",
}
MV: Mapping[str, Any] = {
    "manual": "mv(1) GNU coreutils, 'mv invocation'",
    "flags": """-f --force -n --no-clobber -v --verbose -u -T --no-target-directory
        --strip-trailing-slashes""",
    "values": "-t --target-directory",
    "optional": "--update",
}
# rm deletes, it does not run code: allowed by grammar when a rule names it. Not
# --no-preserve-root.
RM: Mapping[str, Any] = {
    "manual": "rm(1) GNU coreutils, 'rm invocation'",
    "flags": """-f --force -r -R --recursive -d --dir -v --verbose --one-file-system
        --preserve-root""",
}

GRAMMARS: Mapping[str, Grammar] = {
    name: compile_grammar(table)
    for name, table in {
        "git": GIT,
        "find": FIND,
        "sed": SED,
        "tar": TAR,
        "rsync": RSYNC,
        "wget": WGET,
        "curl": CURL,
        "ls": LS,
        "cat": CAT,
        "head": HEAD,
        "tail": TAIL,
        "wc": WC,
        "grep": GREP,
        "rg": RG,
        "sort": SORT,
        "uniq": UNIQ,
        "cut": CUT,
        "diff": DIFF,
        "stat": STAT,
        "du": DU,
        "df": DF,
        "pwd": PWD,
        "date": DATE,
        "true": TRUE,
        "false": FALSE,
        "echo": ECHO,
        "mkdir": MKDIR,
        "touch": TOUCH,
        "cp": CP,
        "mv": MV,
        "rm": RM,
    }.items()
}
"""The built-in grammars, by program base name."""
