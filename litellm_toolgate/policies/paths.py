"""The path scope: every argument a tool declares as a path must resolve inside a root.

Declaring paths
---------------
``PathScope(root, paths={"write_file": ("path",), "copy": ("src", "dst"),
"bulk": ("files/*",)})``: per tool, the arguments that are paths. An entry is a key, or a
``/``-separated walk into the arguments where ``*`` stands for every item of a list (or
every value of an object). An absent argument is left to the schema; one that is present
and not a non-empty string is refused. Tools not named pass this policy (compose it with
others for them). The declaration lives in the policy, not in the schema the model sees:
providers' strict modes refuse unknown schema keywords.

Resolving
---------
Refused before touching the disk: a NUL byte (the OS would cut the path there), a leading
``~`` (a shell or ``expanduser`` makes it a home directory) and any ``..`` component, even
one that would stay inside. An absolute path must be spelled under the root (as given or as
resolved). The rest is walked one component at a time from the root, as the kernel would:
each existing component is ``lstat``-ed, a symlink is read and its target walked in turn (an
absolute target must lie under the root; a ``..`` in a target may not climb above it), at
most 40 hops (Linux's ``MAXSYMLINKS``: more is a loop). A component that does not exist is
kept as written: it is not a symlink now. A component that cannot be examined is refused.
The result is an absolute path whose every existing component is inside the root.

What the tool receives
----------------------
A gate policy only approves or denies: the released call keeps the model's text byte for
byte. :meth:`PathScope.resolve_paths` gives the tool its resolved paths; it resolves again at
the time it is called, so a symlink swapped in between the gate's decision and the tool's
run is caught then. It cannot close the window between that and the tool's own ``open``: a
tool that must withstand a concurrent writer inside the root opens with ``O_NOFOLLOW`` /
``openat`` itself. Hard links are not symlinks and cannot be seen: a file hard-linked into
the root from outside is inside it. POSIX paths only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.errors import GateConfigError, ToolGateError
from ..core.rules.compose import DenyReason, GatePolicy, deny
from ..core.rules.policy import PolicyDecision, ReleasedCall, ToolCall

__all__ = ["PathRefused", "PathScope", "resolve_inside"]

MAX_SYMLINK_HOPS = 40


class PathRefused(ToolGateError):
    """A declared path does not resolve inside the root. Names the declaration, not the path."""

    def __init__(self, tool: str, declared: str, reason: DenyReason) -> None:
        super().__init__(f"{tool}: path argument {declared!r} refused: {reason.value}")
        self.tool = tool
        self.declared = declared
        self.reason = reason


def resolve_inside(root: str, path: str, *, aliases: Iterable[str] = ()) -> str | DenyReason:
    """``path`` resolved inside ``root`` (an absolute, resolved folder), or why not."""
    if not isinstance(path, str) or not path:
        return DenyReason.PATH_NOT_TEXT
    if "\x00" in path:
        return DenyReason.PATH_NUL
    if path.startswith("~"):
        return DenyReason.PATH_HOME
    if ".." in path.split("/"):
        return DenyReason.PATH_PARENT
    todo = _under_root(path, (root, *aliases)) if path.startswith("/") else path.split("/")
    if todo is None:
        return DenyReason.PATH_OUTSIDE_ROOT
    return _walk(root, todo, aliases)


def _under_root(path: str, roots: Iterable[str]) -> list[str] | None:
    """The components of absolute ``path`` below one of ``roots``; None when under none."""
    for root in roots:
        if path == root or path.startswith(root.rstrip("/") + "/"):
            return path[len(root) :].split("/")
    return None


def _walk(root: str, todo: list[str], aliases: Iterable[str]) -> str | DenyReason:
    todo.reverse()  # a stack: the next component is at the end
    where: list[str] = []  # resolved components below the root
    hops = 0
    while todo:
        part = todo.pop()
        if part in ("", "."):
            continue
        if part == "..":  # only ever from a symlink's target
            if not where:
                return DenyReason.PATH_OUTSIDE_ROOT
            where.pop()
            continue
        candidate = os.path.join(root, *where, part)
        try:
            mode = os.lstat(candidate).st_mode
        except FileNotFoundError:
            where.append(part)  # does not exist: not a symlink now
            continue
        except OSError:
            # ENOTDIR (a file where a folder must be), EACCES, ENAMETOOLONG...; the error
            # holds the path, and is dropped here.
            return DenyReason.PATH_UNRESOLVABLE
        if not stat.S_ISLNK(mode):
            where.append(part)
            continue
        hops += 1
        if hops > MAX_SYMLINK_HOPS:
            return DenyReason.PATH_SYMLINK_LOOP
        try:
            target = os.readlink(candidate)
        except OSError:
            return DenyReason.PATH_UNRESOLVABLE
        if target.startswith("/"):
            below = _under_root(target, (root, *aliases))
            if below is None:
                return DenyReason.PATH_OUTSIDE_ROOT
            where = []
            todo.extend(reversed(below))
        else:
            todo.extend(reversed(target.split("/")))
    return os.path.join(root, *where) if where else root


class PathScope(GatePolicy):
    """A gate policy: the declared path arguments of each tool resolve inside ``root``.

    ``root`` must be an existing folder; it is resolved once, at construction. ``paths``
    maps tool names to the arguments that are paths (see the module's docstring).
    """

    def __init__(self, root: str | os.PathLike[str], *, paths: Mapping[str, Iterable[str]]):
        if os.sep != "/":
            raise GateConfigError("PathScope: POSIX paths only")
        given = os.path.abspath(os.fspath(root))
        resolved = os.path.realpath(given)
        if not os.path.isdir(resolved):
            raise GateConfigError("PathScope: root must be an existing folder")
        self.root = resolved
        self._aliases = () if given == resolved else (given,)
        if not isinstance(paths, Mapping) or not paths:
            raise GateConfigError("PathScope: paths maps tool names to their path arguments")
        table: dict[str, tuple[tuple[str, ...], ...]] = {}
        for tool, declared in paths.items():
            if not isinstance(tool, str) or isinstance(declared, str):
                raise GateConfigError("PathScope: paths maps a tool name to a list of arguments")
            walks = tuple(tuple(d.split("/")) for d in declared if isinstance(d, str) and d)
            if not walks or len(walks) != len(tuple(declared)):
                raise GateConfigError("PathScope: each declared path is a non-empty string")
            table[tool] = walks
        self.paths: Mapping[str, tuple[tuple[str, ...], ...]] = table

    def __call__(self, call: ToolCall) -> PolicyDecision:
        walks = self.paths.get(call.name)
        if walks is None:
            return PolicyDecision.approve()
        for walk in walks:
            for _, value in _found(call.arguments, walk):
                outcome = self._resolve(value)
                if isinstance(outcome, DenyReason):
                    return deny(outcome)
        return PolicyDecision.approve()

    def resolve_paths(self, call: ToolCall | ReleasedCall) -> dict[str, Any]:
        """The call's arguments with every declared path resolved, checked again now.

        Give the tool these instead of the model's text. Raises :class:`PathRefused`
        (naming the declaration and the reason, never the path) when one no longer resolves
        inside the root.
        """
        outcome = self._resolved(call)
        del call  # raised below from a frame that holds no argument text
        if isinstance(outcome, PathRefused):
            raise outcome
        return outcome

    def _resolved(self, call: ToolCall | ReleasedCall) -> dict[str, Any] | PathRefused:
        arguments = call.value if isinstance(call, ReleasedCall) else call.arguments
        result: Any = _thaw(arguments)
        for walk in self.paths.get(call.name, ()):
            for setter, value in _found(result, walk):
                outcome = self._resolve(value)
                if isinstance(outcome, DenyReason):
                    return PathRefused(call.name, "/".join(walk), outcome)
                setter(outcome)
        assert isinstance(result, dict)
        return result

    def _resolve(self, value: object) -> str | DenyReason:
        if not isinstance(value, str):
            return DenyReason.PATH_NOT_TEXT
        return resolve_inside(self.root, value, aliases=self._aliases)

    def __repr__(self) -> str:
        return f"PathScope({len(self.paths)} tools)"


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(v) for v in value]
    return value


_NOT_A_PATH = object()


def _found(value: Any, walk: tuple[str, ...]) -> list[tuple[Any, Any]]:
    """(setter, value) for every place ``walk`` reaches; a wrong container type is a value.

    A walk through something that is neither absent nor the container it names yields that
    thing, which the caller refuses as not a path.
    """
    places: list[tuple[Any, Any]] = []
    step, rest = walk[0], walk[1:]
    if step == "*":
        if isinstance(value, list):
            keys: Iterable[Any] = range(len(value))
        elif isinstance(value, Mapping):
            keys = list(value)
        else:
            return [(None, _NOT_A_PATH)]
    elif isinstance(value, Mapping):
        if step not in value:
            return []
        keys = (step,)
    else:
        return [(None, _NOT_A_PATH)]
    for key in keys:
        item = value[key]
        if rest:
            places.extend(_found(item, rest))
        else:
            places.append((_setter(value, key), item))
    return places


def _setter(container: Any, key: Any) -> Any:
    def put(new: Any) -> None:
        container[key] = new

    return put
