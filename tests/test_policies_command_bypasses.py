"""A corpus of command bypasses: each refused by the allow-list, and each shown to be real.

Every vector is checked twice, under two test ids:

* ``refused-<id>``: the allow-list refuses it, even though the list names its program with the
  argument pattern ``*`` (the grammar, not the pattern, has to catch it);
* ``runs-<id>``: executed for real (``subprocess.run(argv, shell=False)``, in a scratch
  folder, with a fixed ``PATH``), it does run its payload: the payload creates the file
  ``PWNED`` in the scratch folder (or deletes ``VICTIM``). That proves the vector is a bypass
  and not a made-up string. When the program is not installed here, the ``runs-`` test is
  *skipped*, saying so: it is not counted as shown. Vectors that cannot be run alone (an
  environment assignment, a shell builtin, a look-alike the program rejects too, one that
  needs a server, a daemon or a newer version) have no ``runs-`` test; the ``WHY`` of each
  says why.

Payloads only touch the scratch folder: ``@P@`` is an executable script there that creates
``PWNED`` next to itself, ``@SH@`` the shell command doing the same, ``@T@`` the folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.commands import Allow, CommandAllowList, check_argv
from litellm_toolgate.core.rules.policy import ToolCall

EXEC_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass(frozen=True)
class Vector:
    family: str
    argv: tuple[str, ...]
    proof: str = "marker"
    """``marker``: running it creates PWNED; ``gone``: it deletes VICTIM; ``none``: not run."""
    why: str = ""
    stdin: str = ""


def v(family: str, *argv: str, proof: str = "marker", why: str = "", stdin: str = "") -> Vector:
    assert (proof == "none") == bool(why), "a vector that is not run says why"
    return Vector(family, argv, proof, why, stdin)


NOT_RUN_ENV = "not a program: only a shell reads an assignment or a builtin"
LOOKALIKE = "a look-alike: the program does not read it as the option either; refused anyway"
GLOB = "globbing needs a shell; under execve the pattern is passed as written"
NEWER_GIT = "git --attr-source needs git >= 2.40"
NO_SEND_EMAIL = "git send-email is a separate package, not installed here"
DAEMON = "would contact a daemon, a cluster or the network"
TWO_STEPS = "writes the configuration a later allowed command runs"
SERVER = "sends a local file out: needs a server to show"
SLOW = "runs the payload under a slow or long-lived supervisor"

SH = ("sh", "-c", "@SH@")

VECTORS: list[Vector] = [
    # --- find: actions that run programs, write or delete files --------------------------
    v("find", "find", ".", "-maxdepth", "0", "-exec", *SH, ";"),
    v("find", "find", "--", ".", "-maxdepth", "0", "-exec", *SH, ";"),
    v("find", "find", ".", "-maxdepth", "0", "-execdir", *SH, ";"),
    v("find", "find", ".", "-maxdepth", "0", "-exec", "@P@", "{}", "+"),
    v("find", "find", ".", "-maxdepth", "0", "-execdir", "@P@", "{}", "+"),
    v("find", "find", "-L", ".", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", "-H", ".", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", "-P", ".", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", "-O3", ".", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", "-D", "exec", ".", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", ".", "-name", "f.txt", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "(", "-exec", "@P@", ";", ")"),
    v("find", "find", ".", "-maxdepth", "0", "!", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-true", "-a", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-false", "-o", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-print", ",", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-not", "-name", "zz", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-name", "*", "-exec", "@P@", ";"),
    v("find", "find", "./", "-maxdepth", "0", "-exec", "@P@", ";"),
    v("find", "find", ".", "-maxdepth", "0", "-ok", "@P@", ";", stdin="y\n"),
    v("find", "find", ".", "-maxdepth", "0", "-okdir", "@P@", ";", stdin="y\n"),
    v("find", "find", ".", "-maxdepth", "0", "-fprint", "@T@/PWNED"),
    v("find", "find", ".", "-maxdepth", "0", "-fprint0", "@T@/PWNED"),
    v("find", "find", ".", "-maxdepth", "0", "-fprintf", "@T@/PWNED", "%p"),
    v("find", "find", ".", "-maxdepth", "0", "-fls", "@T@/PWNED"),
    v("find", "find", "--", ".", "-maxdepth", "0", "-fprint", "PWNED"),
    v("find", "find", ".", "-name", "VICTIM", "-delete", proof="gone"),
    v("find", "find", "-L", ".", "-name", "VICTIM", "-delete", proof="gone"),
    # --- tar: compressors, to-command, checkpoints, volume scripts, remote shells ---------
    v("tar", "tar", "xfI", "a.tar", "@P@"),
    v("tar", "tar", "xvfI", "a.tar", "@P@"),
    v("tar", "tar", "xIf", "@P@", "a.tar"),
    v("tar", "tar", "-xf", "a.tar", "-I", "@P@"),
    v("tar", "tar", "-xf", "a.tar", "-I@P@"),
    v("tar", "tar", "-f", "a.tar", "-xI", "@P@"),
    v("tar", "tar", "-xvf", "a.tar", "-I", "@P@"),
    v("tar", "tar", "--extract", "-f", "a.tar", "-I", "@P@"),
    v("tar", "tar", "-x", "--file=a.tar", "--use-compress-program=@P@"),
    v("tar", "tar", "-x", "-f", "a.tar", "--use-compress-program", "@P@"),
    v("tar", "tar", "-x", "-f", "a.tar", "--use-compress-prog=@P@"),
    v("tar", "tar", "-x", "-f", "a.tar", "--use-c=@P@"),
    v("tar", "tar", "-xf", "a.tar", "--to-command=@P@"),
    v("tar", "tar", "-xf", "a.tar", "--to-command", "@P@"),
    v("tar", "tar", "-xf", "a.tar", "--to-com=@P@"),
    v("tar", "tar", "xf", "a.tar", "--to-command=@P@"),
    v("tar", "tar", "-cf", "o.tar", "--checkpoint=1", "--checkpoint-action=exec=@P@", "f.txt"),
    v("tar", "tar", "-cf", "o.tar", "--checkpoint=1", "--checkpoint-action", "exec=@P@", "f.txt"),
    v("tar", "tar", "-cf", "o.tar", "--checkpoint=1", "--checkpoint-act=exec=@P@", "f.txt"),
    v("tar", "tar", "cf", "o.tar", "--checkpoint=1", "--checkpoint-action=exec=@P@", "f.txt"),
    v("tar", "tar", "-xf", "a.tar", "--checkpoint=1", "--checkpoint-action=exec=@P@"),
    v("tar", "tar", "cfFL", "o.tar", "@P@", "10", "big.bin"),
    v("tar", "tar", "-c", "-M", "-L", "10", "-F", "@P@", "-f", "o.tar", "big.bin"),
    v("tar", "tar", "-c", "-f", "o.tar", "-L", "10", "--info-script=@P@", "big.bin"),
    v("tar", "tar", "-c", "-f", "o.tar", "-L", "10", "--new-volume-script=@P@", "big.bin"),
    v("tar", "tar", "-cf", "127.0.0.1:o.tar", "--rsh-command=@P@", "f.txt"),
    v("tar", "tar", "-tf", "127.0.0.1:a.tar", "--rsh-command=@P@"),
    v("tar", "tar", "-cf", "127.0.0.1:o.tar", "--rsh-command", "@P@", "f.txt"),
    # --- git: global options, config, pagers, transports, hooks, output files -------------
    v("git", "git", "-c", "alias.x=!@P@", "x"),
    v("git", "git", "-c", "core.fsmonitor=@P@", "status"),
    v("git", "git", "-c", "diff.external=@P@", "diff", "HEAD~1", "HEAD"),
    v("git", "git", "-c", "diff.external=@P@", "log", "-p", "--ext-diff", "-1"),
    v("git", "git", "-c", "core.sshCommand=@P@", "ls-remote", "ssh://x/y"),
    v("git", "git", "--config-env=core.fsmonitor=PWN_HOOK", "status"),
    v("git", "git", "--exec-path=.", "pwn"),
    v("git_global", "git", "-C", ".", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--git-dir=.git", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--git-dir", ".git", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--work-tree", ".", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--work-tree=.", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--namespace", "n", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--namespace=n", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--no-pager", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--literal-pathspecs", "-c", "alias.x=!@P@", "x"),
    v("git_global", "git", "--no-replace-objects", "-c", "alias.x=!@P@", "x"),
    v(
        "git_global",
        "git",
        "--attr-source",
        "HEAD",
        "-c",
        "alias.x=!@P@",
        "x",
        proof="none",
        why=NEWER_GIT,
    ),
    v(
        "git_global",
        "git",
        "--attr-source=HEAD",
        "-c",
        "alias.x=!@P@",
        "x",
        proof="none",
        why=NEWER_GIT,
    ),
    v("git_grep", "git", "grep", "-O@P@", "hello"),
    v("git_grep", "git", "grep", "--open-files-in-pager=@P@", "hello"),
    v("git_grep", "git", "grep", "--open-files-in-p=@P@", "hello"),
    v("git_grep", "git", "grep", "--open=@P@", "hello"),
    v("git_grep", "git", "grep", "-iO@P@", "hello"),
    v("git_grep", "git", "grep", "-nO@P@", "hello"),
    v("git_grep", "git", "grep", "-i", "--open-files-in-pager=@P@", "hello"),
    v("git_grep", "git", "--no-pager", "grep", "-O@P@", "hello"),
    v("git_grep", "git", "grep", "-O@P@", "-e", "hello", "--", "f.txt"),
    v("git_output", "git", "diff", "--output=@T@/PWNED"),
    v("git_output", "git", "diff", "--output", "@T@/PWNED"),
    v("git_output", "git", "format-patch", "--output-directory=@T@/PWNED", "-1"),
    v("git_output", "git", "log", "-1", "--output=@T@/PWNED"),
    v("git_output", "git", "show", "--output=@T@/PWNED"),
    v("git_output", "git", "format-patch", "-o", "@T@/PWNED", "-1"),
    v("git_transport", "git", "fetch", "--upload-pack=@P@", "."),
    v("git_transport", "git", "fetch", "--upload-p=@P@", "."),
    v("git_transport", "git", "ls-remote", "--upload-pack=@P@", "."),
    v("git_transport", "git", "ls-remote", "--upload-pack", "@P@", "."),
    v("git_transport", "git", "clone", "-u", "@P@", ".", "d1"),
    v("git_transport", "git", "clone", "--upload-pack=@P@", ".", "d2"),
    v("git_transport", "git", "archive", "--remote=.", "--exec=@P@", "HEAD"),
    v("git_transport", "git", "push", "--receive-pack=@P@", ".", "HEAD:refs/heads/x"),
    v("git_transport", "git", "pull", "--upload-pack=@P@", "."),
    v("git_transport", "git", "-c", "protocol.ext.allow=always", "clone", "ext::@P@ %S", "d3"),
    v("git_exec", "git", "rebase", "--exec", "@P@", "HEAD~1"),
    v("git_exec", "git", "rebase", "-x", "@P@", "HEAD~1"),
    v("git_exec", "git", "rebase", "--exec=@P@", "HEAD~1"),
    v("git_exec", "git", "difftool", "--no-prompt", "--extcmd=@P@", "HEAD~1"),
    v("git_exec", "git", "difftool", "-y", "-x", "@P@", "HEAD~1"),
    v("git_exec", "git", "-c", "core.hooksPath=hooks", "commit", "--allow-empty", "-m", "x"),
    v("git_exec", "git", "commit", "--allow-empty", "-m", "x"),  # .git/hooks/pre-commit
    v("git_exec", "git", "config", "alias.x", "!@P@", proof="none", why=TWO_STEPS),
    v("git_exec", "git", "submodule", "foreach", "@P@", proof="none", why=TWO_STEPS),
    v("git_exec", "git", "send-email", "--sendmail-cmd=@P@", "x", proof="none", why=NO_SEND_EMAIL),
    v("git_exec", "git", "send-email", "--to-cmd=@P@", "x", proof="none", why=NO_SEND_EMAIL),
    v("git_exec", "git", "send-email", "--smtp-server=@P@", "x", proof="none", why=NO_SEND_EMAIL),
    # --- wget: askpass, -e/--execute, config, log files -----------------------------------
    v("wget", "wget", "--use-askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--use-askpass", "@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--use-ask=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "-e", "use_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "-euse_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "-qe", "use_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--execute=use_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--execute", "use_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--exec=use_askpass=@P@", "http://127.0.0.1:9/"),
    v("wget", "wget", "--config=wgetrc", "http://127.0.0.1:9/"),
    v("wget", "wget", "-o", "@T@/PWNED", "http://127.0.0.1:9/"),
    v("wget", "wget", "--output-file=@T@/PWNED", "http://127.0.0.1:9/"),
    v("wget", "wget", "-a", "@T@/PWNED", "http://127.0.0.1:9/"),
    v("wget", "wget", "--post-file=/etc/hostname", "http://127.0.0.1:9/", proof="none", why=SERVER),
    # --- curl: file:// reads and writes, upload, config -----------------------------------
    v("curl", "curl", "-o", "@T@/PWNED", "file://@T@/f.txt"),
    v("curl", "curl", "--output", "PWNED", "file://@T@/f.txt"),
    v("curl", "curl", "-sSo", "PWNED", "file://@T@/f.txt"),
    v("curl", "curl", "-o", "PWNED", "FILE://@T@/f.txt"),
    v("curl", "curl", "-O", "file://@T@/src/PWNED"),
    v("curl", "curl", "-o", "PWNED", "--url", "file://@T@/f.txt"),
    v("curl", "curl", "-T", "f.txt", "file://@T@/PWNED"),
    v("curl", "curl", "--upload-file", "f.txt", "file://@T@/PWNED"),
    v("curl", "curl", "-K", "curl.cfg"),
    v("curl", "curl", "--config", "curl.cfg"),
    v("curl", "curl", "-H", "@/etc/hostname", "http://127.0.0.1:9/", proof="none", why=SERVER),
    v("curl", "curl", "-d", "@/etc/hostname", "http://127.0.0.1:9/", proof="none", why=SERVER),
    # --- rsync: remote shells -------------------------------------------------------------
    v("rsync", "rsync", "-e", "@P@", "x:y", "."),
    v("rsync", "rsync", "-e@P@", "x:y", "."),
    v("rsync", "rsync", "-ave", "@P@", "x:y", "."),
    v("rsync", "rsync", "--rsh=@P@", "x:y", "."),
    v("rsync", "rsync", "--rsh", "@P@", "x:y", "."),
    v("rsync", "rsync", "-a", "--rsync-path=@SH@", "-e", "@P@", "x:y", "."),
    # --- sed: e, w, W, s///e, s///w, -f, -i -----------------------------------------------
    v("sed", "sed", "1e @SH@", "f.txt"),
    v("sed", "sed", "-n", "1e @SH@", "f.txt"),
    v("sed", "sed", "1 e @SH@", "f.txt"),
    v("sed", "sed", "$e @SH@", "f.txt"),
    v("sed", "sed", "-n", "/hello/e @SH@", "f.txt"),
    v("sed", "sed", "s|.*|@SH@|e", "f.txt"),
    v("sed", "sed", "-e", "1e @SH@", "f.txt"),
    v("sed", "sed", "-e1e @SH@", "f.txt"),
    v("sed", "sed", "-ne", "1e @SH@", "f.txt"),
    v("sed", "sed", "--expression=1e @SH@", "f.txt"),
    v("sed", "sed", "--expression", "1e @SH@", "f.txt"),
    v("sed", "sed", "--expr=1e @SH@", "f.txt"),
    v("sed", "sed", "-n", "-e", "1p", "-e", "1e @SH@", "f.txt"),
    v("sed", "sed", "-n", "1,5p;1e @SH@", "f.txt"),
    v("sed", "sed", "-n", "1{e @SH@\n}", "f.txt"),
    v("sed", "sed", "--", "1e @SH@", "f.txt"),
    v("sed", "sed", "-E", "1e @SH@", "f.txt"),
    v("sed", "sed", "-z", "1e @SH@", "f.txt"),
    v("sed", "sed", "-n", "1w @T@/PWNED", "f.txt"),
    v("sed", "sed", "-n", "1W @T@/PWNED", "f.txt"),
    v("sed", "sed", "w @T@/PWNED", "f.txt"),
    v("sed", "sed", "-s", "-n", "1w @T@/PWNED", "f.txt"),
    v("sed", "sed", "-n", "s/hello/x/w @T@/PWNED", "f.txt"),
    v("sed", "sed", "-f", "script.sed", "f.txt"),
    v("sed", "sed", "--file=script.sed", "f.txt"),
    v("sed", "sed", "-i", "1e @SH@", "f.txt"),
    v("sed", "sed", "-i.bak", "-e", "1e @SH@", "f.txt"),
    # --- interpreters, -c bundles and full paths ------------------------------------------
    v("interpreter", "sh", "-c", "@SH@"),
    v("interpreter", "/bin/sh", "-c", "@SH@"),
    v("interpreter", "sh", "-ec", "@SH@"),
    v("interpreter", "bash", "-c", "@SH@"),
    v("interpreter", "/bin/bash", "-c", "@SH@"),
    v("interpreter", "bash", "-xc", "@SH@"),
    v("interpreter", "bash", "--norc", "-c", "@SH@"),
    v("interpreter", "dash", "-c", "@SH@"),
    v("interpreter", "python3", "-c", "open('@T@/PWNED', 'w')"),
    v("interpreter", "python3.11", "-c", "open('@T@/PWNED', 'w')"),
    v("interpreter", "/usr/bin/python3", "-Ic", "open('@T@/PWNED', 'w')"),
    v("interpreter", "perl", "-e", "open(F, '>@T@/PWNED')"),
    v("interpreter", "perl", "-we", "system('@SH@')"),
    v("interpreter", "awk", 'BEGIN{system("@SH@")}'),
    v("interpreter", "gawk", 'BEGIN{system("@SH@")}'),
    v("interpreter", "mawk", 'BEGIN{system("@SH@")}'),
    v("interpreter", "node", "-e", "require('fs').writeFileSync('@T@/PWNED', '')"),
    v("interpreter", "tclsh", stdin="exec touch @T@/PWNED\n"),
    v("interpreter", "vim", "-es", "-c", "call writefile([], '@T@/PWNED')", "-c", "qa!"),
    v("interpreter", "vi", "-es", "-c", "call writefile([], '@T@/PWNED')", "-c", "qa!"),
    v("interpreter", "ed", "-s", "f.txt", stdin="!@SH@\nq\n"),
    v("interpreter", "sqlite3", ":memory:", ".shell @SH@"),
    v("interpreter", "gsed", "1e @SH@", "f.txt"),
    v("interpreter", "xonsh", "-c", "@SH@"),
    v("interpreter", "nu", "-c", "@SH@"),
    v("interpreter", "ipython", "-c", "open('@T@/PWNED', 'w')"),
    v("interpreter", "guile", "-c", '(system "@SH@")'),
    v("interpreter", "psql", "-c", "\\! @SH@"),
    v("interpreter", "mysql", "-e", "system @SH@"),
    v("interpreter", "busybox", "sh", "-c", "@SH@"),
    v("interpreter", "toybox", "sh", "-c", "@SH@"),
    v("interpreter", "ruby", "-e", "system('@SH@')"),
    v("interpreter", "php", "-r", "touch('@T@/PWNED');"),
    v("interpreter", "lua", "-e", "os.execute('@SH@')"),
    v("interpreter", "zsh", "-c", "@SH@"),
    v("interpreter", "fish", "-c", "@SH@"),
    # --- programs that run another program ------------------------------------------------
    v("wrapper", "env", *SH),
    v("wrapper", "env", "-i", *SH),
    v("wrapper", "/usr/bin/env", *SH),
    v("wrapper", "env", "--", *SH),
    v("wrapper", "nice", *SH),
    v("wrapper", "nice", "-n", "5", *SH),
    v("wrapper", "timeout", "5", *SH),
    v("wrapper", "xargs", *SH, stdin=""),
    v("wrapper", "xargs", "-a", "f.txt", "-n", "1", "@P@"),
    v("wrapper", "stdbuf", "-o0", *SH),
    v("wrapper", "setsid", "-w", *SH),
    v("wrapper", "nohup", *SH),
    v("wrapper", "taskset", "-c", "0", *SH),
    v("wrapper", "chrt", "-o", "0", *SH),
    v("wrapper", "ionice", "-c", "3", *SH),
    v("wrapper", "flock", "lockfile", *SH),
    v("wrapper", "script", "-qc", "@SH@", "/dev/null"),
    v("wrapper", "prlimit", "--nofile=256", *SH),
    v("wrapper", "setpriv", *SH),
    v("wrapper", "strace", "-f", "-o", "/dev/null", *SH),
    v("wrapper", "time", *SH),
    v("wrapper", "ssh", "-o", "ProxyCommand=@SH@", "x"),
    v("wrapper", "ssh", "-oProxyCommand=@SH@", "x"),
    v("wrapper", "valgrind", "-q", *SH, proof="none", why=SLOW),
    v("wrapper", "watch", "-n", "1", "@SH@", proof="none", why=SLOW),
    v("wrapper", "tmux", "new-session", "-d", "@SH@", proof="none", why=SLOW),
    v("wrapper", "screen", "-dm", *SH),
    v(
        "wrapper",
        "docker",
        "run",
        "--rm",
        "-v",
        "@T@:/w",
        "alpine",
        "touch",
        "/w/PWNED",
        proof="none",
        why=DAEMON,
    ),
    v("wrapper", "kubectl", "exec", "pod", "--", *SH, proof="none", why=DAEMON),
    v("wrapper", "numactl", "--", *SH),
    v("wrapper", "torsocks", *SH),
    v("wrapper", "proxychains4", *SH),
    v("wrapper", "catchsegv", *SH),
    v("wrapper", "unbuffer", *SH),
    v("wrapper", "faketime", "2020-01-01", *SH),
    v("wrapper", "cpulimit", "-l", "50", "--", *SH),
    v("wrapper", "nix-shell", "--run", "@SH@"),
    v("wrapper", "conda", "run", *SH),
    v("wrapper", "pixi", "exec", *SH),
    v("wrapper", "bunx", "some-package"),
    v("wrapper", "xterm", "-e", *SH),
    v("wrapper", "unshare", "-U", *SH),
    v("wrapper", "sudo", *SH),
    v("wrapper", "doas", *SH),
    v("wrapper", "busybox", "env", *SH),
    # --- programs that run the project's scripts ------------------------------------------
    v("project_scripts", "make"),
    v("project_scripts", "make", "-f", "Makefile", "all"),
    v("project_scripts", "npm", "test"),
    v("project_scripts", "npm", "run", "test"),
    v("project_scripts", "npx", "pwn-package", proof="none", why=DAEMON),
    v("project_scripts", "pytest", "-q"),
    # --- no shell: environment assignments and builtins -----------------------------------
    v("env_assignment", "PATH=.", "git", "status", proof="none", why=NOT_RUN_ENV),
    v("env_assignment", "GIT_EXTERNAL_DIFF=@P@", "git", "diff", proof="none", why=NOT_RUN_ENV),
    v("env_assignment", "TAR_OPTIONS=-I@P@", "tar", "xf", "a.tar", proof="none", why=NOT_RUN_ENV),
    v("env_assignment", "LD_PRELOAD=./x.so", "ls", proof="none", why=NOT_RUN_ENV),
    v("shell_builtin", "eval", "@SH@", proof="none", why=NOT_RUN_ENV),
    v("shell_builtin", "exec", *SH, proof="none", why=NOT_RUN_ENV),
    v("shell_builtin", "source", "x.sh", proof="none", why=NOT_RUN_ENV),
    v("shell_builtin", "command", *SH),
    v("shell_builtin", "builtin", "eval", "@SH@", proof="none", why=NOT_RUN_ENV),
    # --- look-alikes and globs ------------------------------------------------------------
    v("lookalike", "ｆｉｎｄ", ".", "-exec", "@P@", ";", proof="none", why=LOOKALIKE),
    v("lookalike", "gіt", "status", proof="none", why=LOOKALIKE),  # Cyrillic i
    v("lookalike", "find", ".", "-еxec", "@P@", ";", proof="none", why=LOOKALIKE),  # Cyrillic e
    v("lookalike", "find", ".", "-ｅxec", "@P@", ";", proof="none", why=LOOKALIKE),
    v("lookalike", "git", "grep", "-Ｏ@P@", "hello", proof="none", why=LOOKALIKE),
    v("lookalike", "tar", "-xf", "a.tar", "--to‐command=@P@", proof="none", why=LOOKALIKE),
    v("lookalike", "sed", "1е @SH@", "f.txt", proof="none", why=LOOKALIKE),  # Cyrillic e
    v("glob", "find", ".", "-ex*", "@P@", ";", proof="none", why=GLOB),
    v("glob", "tar", "-xf", "a.tar", "--to-co*=@P@", proof="none", why=GLOB),
    v("glob", "git", "grep", "--open*=@P@", "hello", proof="none", why=GLOB),
]

# Every program of the corpus, allowed with any arguments as far as the patterns go.
RULES = CommandAllowList(
    [Allow(p, args=("*",)) for p in sorted({vec.argv[0] for vec in VECTORS}) if "=" not in p],
    tools={"run": "argv"},
)


def _id(index: int, vector: Vector) -> str:
    return f"{index:03d}-{vector.family}-{vector.argv[0]}"


@pytest.mark.parametrize(
    "vector",
    [pytest.param(vec, id="refused-" + _id(i, vec)) for i, vec in enumerate(VECTORS)],
)
def test_the_allow_list_refuses_the_vector(vector: Vector, tmp_path: Path) -> None:
    argv = _fill(vector.argv, tmp_path)
    assert check_argv(argv, RULES.rules) is not None


RUNNABLE = [(i, vec) for i, vec in enumerate(VECTORS) if vec.proof != "none"]


@pytest.mark.parametrize(
    "vector", [pytest.param(vec, id="runs-" + _id(i, vec)) for i, vec in RUNNABLE]
)
def test_the_vector_really_runs_its_payload(vector: Vector, tmp_path: Path) -> None:
    _installed(vector)
    _run(vector, tmp_path, _scratch(tmp_path))
    if vector.proof == "gone":
        assert not (tmp_path / "VICTIM").exists()
    else:
        assert (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    "vector", [pytest.param(vec, id="gated-" + _id(i, vec)) for i, vec in RUNNABLE]
)
def test_through_the_allow_list_the_payload_does_not_run(vector: Vector, tmp_path: Path) -> None:
    """A tool that runs what the list approves (the policy asked by its public call, as the
    gate asks it), given the vector that ran its payload above: nothing of it runs."""
    _installed(vector)
    env = _scratch(tmp_path)
    decision = RULES(ToolCall("att", 0, "call_1", "run", {"argv": _fill(vector.argv, tmp_path)}))
    if decision.approved:
        _run(vector, tmp_path, env)
    assert not decision.approved
    assert not (tmp_path / "PWNED").exists() and (tmp_path / "VICTIM").exists()


def _installed(vector: Vector) -> None:
    if shutil.which(vector.argv[0], path=EXEC_PATH) is None:
        pytest.skip(f"{vector.argv[0]} is not installed: the execution half is not shown here")


def _run(vector: Vector, folder: Path, env: dict[str, str]) -> None:
    """Run the vector without a shell in the scratch folder :func:`_scratch` prepared."""
    argv = _fill(vector.argv, folder)
    # A payload that ran before the program hung still counts.
    with contextlib.suppress(subprocess.TimeoutExpired):
        subprocess.run(
            argv,
            shell=False,
            cwd=folder,
            env=env,
            input=_fill((vector.stdin,), folder)[0].encode(),
            capture_output=True,
            timeout=30,
            check=False,
        )


def test_the_corpus_is_large_and_its_ids_unique() -> None:
    assert len(VECTORS) >= 150
    assert len({vec.argv for vec in VECTORS}) == len(VECTORS)


def test_env_assignments_cannot_even_be_named_in_a_rule() -> None:
    with pytest.raises(GateConfigError):
        Allow("PATH=.")


def _fill(template: tuple[str, ...], folder: Path) -> list[str]:
    payload = str(folder / "pwn.sh")
    command = f"touch {folder}/PWNED"
    return [
        part.replace("@P@", payload).replace("@SH@", command).replace("@T@", str(folder))
        for part in template
    ]


def _write(path: Path, text: str, executable: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if executable:
        path.chmod(0o755)


def _scratch(folder: Path) -> dict[str, str]:
    """The scratch folder's files, a git repository with two commits, and the environment."""
    pwn = f"#!/bin/sh\n: > '{folder}/PWNED'\nexit 0\n"
    _write(folder / "pwn.sh", pwn, executable=True)
    _write(folder / "git-pwn", pwn, executable=True)
    _write(folder / "hooks" / "pre-commit", pwn, executable=True)
    _write(folder / "f.txt", "hello\nworld\n")
    _write(folder / "VICTIM", "")
    _write(folder / "src" / "PWNED", "")
    (folder / "big.bin").write_bytes(os.urandom(64 * 1024))
    _write(folder / "script.sed", f"1e touch {folder}/PWNED\n")
    _write(folder / "wgetrc", f"use_askpass = {folder}/pwn.sh\n")
    _write(folder / "curl.cfg", f'url = "file://{folder}/f.txt"\noutput = "{folder}/PWNED"\n')
    _write(folder / "Makefile", f"all:\n\ttouch {folder}/PWNED\n")
    _write(
        folder / "package.json",
        '{"name": "p", "version": "1.0.0", "scripts": {"test": "touch ' + f'{folder}/PWNED"' + "}}",
    )
    _write(folder / "conftest.py", f"open({str(folder / 'PWNED')!r}, 'w')\n")
    with tarfile.open(folder / "a.tar", "w") as archive:
        archive.add(folder / "f.txt", arcname="f.txt")
    env = {
        "PATH": EXEC_PATH,
        "HOME": str(folder),
        "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
        "GIT_TERMINAL_PROMPT": "0",
        "PWN_HOOK": str(folder / "pwn.sh"),
    }
    for step in (
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "f.txt"],
        ["git", "commit", "-q", "-m", "one"],
    ):
        subprocess.run(step, cwd=folder, env=env, check=True, capture_output=True)
    _write(folder / "f.txt", "hello\nthere\n")
    for step in (["git", "commit", "-q", "-am", "two"],):
        subprocess.run(step, cwd=folder, env=env, check=True, capture_output=True)
    _write(folder / ".git" / "hooks" / "pre-commit", pwn, executable=True)
    return env
