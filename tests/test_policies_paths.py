"""The path scope: every known way out of the root is refused, and the tool gets the real path.

Each escape is built on disk under pytest's tmp_path: a root with files and folders, and a
folder beside it (``outside``) standing for everything the root must not reach.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from litellm_toolgate.core.errors import GateConfigError
from litellm_toolgate.core.rules.compose import DenyReason, deny_reason
from litellm_toolgate.core.rules.policy import ReleasedCall, ToolCall
from litellm_toolgate.policies.paths import PathRefused, PathScope, resolve_inside

R = DenyReason
CANARY = "CANARY-7f3a9c"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    (root / "src" / "a.py").write_text("x")
    (outside / "secret").write_text("s")
    (root / "out").symlink_to(outside)  # a folder symlink out of the root
    (root / "out_abs").symlink_to(outside / "secret")  # an absolute file symlink out
    (root / "sneaky").symlink_to("src/../../outside")  # a relative target that climbs out
    (root / "inside").symlink_to("src")  # a symlink that stays inside
    (root / "inside_abs").symlink_to(root / "src" / "a.py")
    (root / "loop_a").symlink_to("loop_b")
    (root / "loop_b").symlink_to("loop_a")
    (root / "self").symlink_to("self")
    (root / "chain").symlink_to("inside/../out")  # inside, then out through another link
    (root / "file").write_text("f")
    return root


def scope(root: Path) -> PathScope:
    return PathScope(
        root, paths={"write_file": ("path",), "copy": ("src", "dst"), "bulk": ("files/*",)}
    )


def judge(root: Path, path: Any, tool: str = "write_file") -> DenyReason | None:
    decision = scope(root)(ToolCall("att", 0, "call_1", tool, {"path": path}))
    return deny_reason(decision)


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("../outside/secret", R.PATH_PARENT),
        ("src/../../outside/secret", R.PATH_PARENT),
        ("src/..", R.PATH_PARENT),  # `..` is refused even when it would stay inside
        ("/etc/passwd", R.PATH_OUTSIDE_ROOT),
        ("~/.ssh/id_rsa", R.PATH_HOME),
        ("~root/x", R.PATH_HOME),
        ("src/a.py\x00.txt", R.PATH_NUL),
        ("out/secret", R.PATH_OUTSIDE_ROOT),
        ("out", R.PATH_OUTSIDE_ROOT),
        ("out_abs", R.PATH_OUTSIDE_ROOT),
        ("sneaky/secret", R.PATH_OUTSIDE_ROOT),
        ("chain/secret", R.PATH_OUTSIDE_ROOT),
        ("loop_a", R.PATH_SYMLINK_LOOP),
        ("self/x", R.PATH_SYMLINK_LOOP),
        ("file/x", R.PATH_UNRESOLVABLE),  # a file where a folder must be
        ("", R.PATH_NOT_TEXT),
        (7, R.PATH_NOT_TEXT),
        (["src"], R.PATH_NOT_TEXT),
    ],
)
def test_escapes_are_refused(tree: Path, path: Any, reason: DenyReason) -> None:
    assert judge(tree, path) is reason


def test_an_absolute_path_outside_spelled_through_the_root_is_refused(tree: Path) -> None:
    assert judge(tree, str(tree) + "/out/secret") is R.PATH_OUTSIDE_ROOT
    assert judge(tree, str(tree) + "x/secret") is R.PATH_OUTSIDE_ROOT  # a sibling "rootx"


@pytest.mark.parametrize(
    ("path", "resolved"),
    [
        ("src/a.py", "src/a.py"),
        ("./src//a.py", "src/a.py"),
        ("inside/a.py", "src/a.py"),
        ("inside_abs", "src/a.py"),
        ("src/new/deeper.txt", "src/new/deeper.txt"),  # not there yet: kept as written
        ("new.txt", "new.txt"),
        (".", ""),
    ],
)
def test_paths_inside_resolve_to_their_real_place(tree: Path, path: str, resolved: str) -> None:
    root = os.path.realpath(tree)
    expected = os.path.join(root, resolved) if resolved else root
    assert judge(tree, path) is None
    assert resolve_inside(root, path) == expected
    assert resolve_inside(root, os.path.join(root, path)) == expected  # absolute, inside


def test_the_root_given_through_a_symlink_is_resolved_once(tree: Path, tmp_path: Path) -> None:
    alias = tmp_path / "alias"
    alias.symlink_to(tree)
    s = PathScope(alias, paths={"write_file": ("path",)})
    assert s.root == os.path.realpath(tree)
    call = ToolCall("att", 0, "c", "write_file", {"path": str(alias / "src" / "a.py")})
    assert s(call).approved  # spelled under the root as given
    assert s.resolve_paths(call)["path"] == os.path.join(s.root, "src", "a.py")


def test_resolve_paths_hands_the_tool_the_resolved_paths(tree: Path) -> None:
    s = scope(tree)
    root = s.root
    released = ReleasedCall(
        0,
        "c",
        "copy",
        '{"src":"inside/a.py","dst":"src/b.py","mode":1}',
        {"src": "inside/a.py", "dst": "src/b.py", "mode": 1},
    )
    out = s.resolve_paths(released)
    assert out == {"src": f"{root}/src/a.py", "dst": f"{root}/src/b.py", "mode": 1}
    assert released.value["src"] == "inside/a.py"  # the released call is not changed
    bulk = ToolCall("att", 1, "d", "bulk", {"files": ["src/a.py", "inside/x"]})
    assert s.resolve_paths(bulk) == {"files": [f"{root}/src/a.py", f"{root}/src/x"]}
    other = ToolCall("att", 2, "e", "read_url", {"path": "/etc/passwd"})
    assert s(other).approved and s.resolve_paths(other) == {"path": "/etc/passwd"}


def test_resolve_paths_checks_again_when_called(tree: Path) -> None:
    """A symlink swapped in after the gate approved is caught when the tool asks."""
    s = scope(tree)
    call = ToolCall("att", 0, "c", "write_file", {"path": "later/x"})
    assert s(call).approved
    (tree / "later").symlink_to(tree.parent / "outside")
    with pytest.raises(PathRefused) as refused:
        s.resolve_paths(call)
    assert refused.value.reason is R.PATH_OUTSIDE_ROOT
    assert refused.value.declared == "path" and refused.value.tool == "write_file"


def test_list_entries_and_wrong_shapes(tree: Path) -> None:
    s = scope(tree)
    ok = ToolCall("a", 0, "c", "bulk", {"files": ["src/a.py", "new"]})
    bad = ToolCall("a", 0, "c", "bulk", {"files": ["src/a.py", "out/secret"]})
    shape = ToolCall("a", 0, "c", "bulk", {"files": "src/a.py"})
    absent = ToolCall("a", 0, "c", "copy", {"src": "src/a.py"})
    assert s(ok).approved
    assert deny_reason(s(bad)) is R.PATH_OUTSIDE_ROOT
    assert deny_reason(s(shape)) is R.PATH_NOT_TEXT
    assert s(absent).approved  # an absent argument is the schema's business


def test_refusals_hold_no_path_text(tree: Path) -> None:
    s = scope(tree)
    (tree / CANARY).symlink_to(tree.parent / "outside")
    call = ToolCall("att", 0, "c", "write_file", {"path": f"{CANARY}/secret"})
    decision = s(call)
    assert deny_reason(decision) is R.PATH_OUTSIDE_ROOT
    assert CANARY not in repr(decision)
    with pytest.raises(PathRefused) as refused:
        s.resolve_paths(call)
    exc = refused.value
    assert CANARY not in str(exc) and CANARY not in repr(exc)
    assert exc.__cause__ is None and exc.__context__ is None
    tb = exc.__traceback__
    while tb is not None:  # the raising frames hold no argument text
        for name, value in tb.tb_frame.f_locals.items():
            if tb.tb_frame.f_code.co_filename.endswith("pathscope.py"):
                assert CANARY not in repr(value), name
                assert not isinstance(value, ToolCall | ReleasedCall | dict), name
        tb = tb.tb_next


@pytest.mark.parametrize(
    "build",
    [
        lambda root: PathScope(root / "missing", paths={"t": ("p",)}),
        lambda root: PathScope(root / "file", paths={"t": ("p",)}),
        lambda root: PathScope(root, paths={}),
        lambda root: PathScope(root, paths={"t": "path"}),
        lambda root: PathScope(root, paths={"t": ("",)}),
        lambda root: PathScope(root, paths={"t": ()}),
    ],
)
def test_bad_scopes_fail_at_construction(tree: Path, build: Any) -> None:
    with pytest.raises(GateConfigError):
        build(tree)


# ---- a property: whatever the tree, an approved path is where the OS would go, inside -------

NAMES = ("a", "b", "c", "l1", "l2")


def _random_tree(rng: Any, base: Path) -> Path:
    """A root and a sibling, with folders, files and symlinks pointing anywhere (loops too)."""
    root, outside = base / "root", base / "outside"
    for top in (root, outside):
        top.mkdir()
    folders = [root, root / "a", root / "a" / "b", outside, outside / "c"]
    for folder in folders[1:]:
        folder.mkdir(exist_ok=True)
    for folder in folders:
        if rng.random() < 0.5:
            (folder / "f").write_text("x")
    targets = [
        "a", "b", "c", "..", "../..", "a/b", "../outside", "../../outside/c", "l1", "l2",
        str(root), str(root / "a"), str(outside), "/", "a/../..", "b/../../..", "missing/..",
    ]  # fmt: skip
    for folder in folders:
        for name in ("l1", "l2"):
            if rng.random() < 0.6:
                (folder / name).symlink_to(rng.choice(targets))
    return root


@pytest.mark.parametrize("seed", range(60))
def test_an_approved_path_resolves_where_the_os_would_go_inside_the_root(
    tmp_path: Path, seed: int
) -> None:
    import random

    rng = random.Random(seed)
    root = os.path.realpath(_random_tree(rng, tmp_path))
    approved = 0
    for _ in range(80):
        parts = [rng.choice((*NAMES, "f", ".", "missing")) for _ in range(rng.randint(1, 4))]
        path = "/".join(parts)
        outcome = resolve_inside(root, path)
        if isinstance(outcome, DenyReason):
            continue
        approved += 1
        real = os.path.realpath(os.path.join(root, path))
        assert outcome == real, (seed, path)
        assert real == root or real.startswith(root + "/"), (seed, path)
    assert approved  # the trees always leave some paths inside
