"""The package's rooms and the arrows between them, read from the source.

Each room is a package with a docstring that says what lives there; no folder holds more
than 25 modules; imports go one way (``docs/architecture.md``): the core imports only
itself, the edge only the core, the policies only the core, the run the policies, the edge
and the core, and so on up. Every import litellm's public namespace does not offer, every
stack-frame read and every private attribute of litellm's, httpx's or the OpenAI SDK's
objects is in the seam (``edge/seam/``), and the installed litellm still has all of it.
The import paths of the modules that moved keep working.
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

from litellm_toolgate.moved import MOVED

PACKAGE = Path(__file__).resolve().parent.parent / "litellm_toolgate"
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)

# Room of a module: its first folder under the package ("" for the package's own modules).
ALLOWED: dict[str, set[str]] = {
    "core": {"core"},
    "edge": {"edge", "core"},
    "policies": {"policies", "core"},
    "loopback": {"loopback", "core"},
    "run": {"run", "policies", "edge", "core"},
    "operate": {"operate", "loopback", "edge", "core"},
    "demo": {"demo", "loopback", "run", "policies", "operate", "edge", "core", ""},
    "": {"", "core", "edge", "policies", "run", "operate", "loopback", "demo"},
}
"""Which rooms each room may import."""

VERSION = {"litellm_toolgate.version", "litellm_toolgate.version.__version__"}
"""The package's version, which any room may read (it is not a room)."""
FRAME_ATTRIBUTES = {"_getframe", "f_locals", "f_back", "f_globals", "f_code", "currentframe"}
PRIVATE_ATTRIBUTES = {
    "_transport",
    "_mounts",
    "_request",
    "_client",
    "in_memory_llm_clients_cache",
    "module_level_client",
    "redis_client",
}


def dotted(path: Path) -> tuple[str, ...]:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def parse(path: Path) -> ast.Module:
    """``path`` parsed. CPython 3.11 keeps the AST constructor's recursion depth for the whole
    interpreter, not per thread, so a parse that runs while another thread of the process
    parses (one left over from an earlier test) can fail with
    ``SystemError: AST constructor recursion depth mismatch``: parsed again then."""
    for _ in range(4):
        try:
            return ast.parse(path.read_text(), str(path))
        except SystemError:
            continue
    return ast.parse(path.read_text(), str(path))


def imports(path: Path) -> list[tuple[str, int]]:
    """Every module ``path`` imports (top-level and inside functions), absolute, with its
    line; ``from X import name`` counts as ``X.name`` too, so a submodule is seen."""
    package = dotted(path) if path.name == "__init__.py" else dotted(path)[:-1]
    found: list[tuple[str, int]] = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found.extend((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                module = ".".join(filter(None, [base, node.module]))
            else:
                module = node.module or ""
            found.append((module, node.lineno))
            found.extend((f"{module}.{alias.name}", node.lineno) for alias in node.names)
    return found


def room_of(name: str) -> str | None:
    """The room of a dotted name inside the package; None outside it."""
    parts = name.split(".")
    if parts[0] != "litellm_toolgate":
        return None
    if len(parts) == 1:
        return ""
    room = parts[1]
    return room if (PACKAGE / room).is_dir() else ""


def test_every_folder_is_a_room_with_a_docstring_and_at_most_25_modules() -> None:
    folders = sorted({p.parent for p in MODULES})
    assert PACKAGE / "run" in folders and PACKAGE / "policies" in folders
    for folder in folders:
        modules = list(folder.glob("*.py"))
        assert len(modules) <= 25, f"{folder.relative_to(PACKAGE)}: {len(modules)} modules"
        init = folder / "__init__.py"
        assert init.exists(), f"{folder.relative_to(PACKAGE)} is not a package"
        tree = parse(init)
        assert ast.get_docstring(tree), f"{folder.relative_to(PACKAGE)} says nothing of itself"


def test_imports_go_one_way_between_rooms() -> None:
    wrong = []
    for path in MODULES:
        room = room_of(".".join(dotted(path)))
        assert room is not None
        for name, line in imports(path):
            target = room_of(name)
            if target is None or name in VERSION:
                continue
            if target not in ALLOWED[room]:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {name}")
    assert wrong == []


def test_the_edge_imports_neither_the_run_nor_the_policies_nor_the_operator_tools() -> None:
    """The one-way rule, said for the edge alone (the issue's own words), and shown to be
    checked: the edge's modules do import the core."""
    edge = [p for p in MODULES if p.is_relative_to(PACKAGE / "edge")]
    reached = {room_of(name) for p in edge for name, _ in imports(p)}
    assert "core" in reached
    assert reached.isdisjoint({"run", "policies", "operate", "demo", "loopback"})


def internals(path: Path) -> list[str]:
    """What ``path`` touches of code that is not a public API: a litellm submodule, a
    stack frame, a private attribute of a library's object."""
    touched = []
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            touched += [a.name for a in node.names if a.name.startswith("litellm.")]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if (node.module or "").startswith("litellm."):
                touched.append(node.module or "")
        elif isinstance(node, ast.Attribute):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if node.attr in FRAME_ATTRIBUTES or (
                node.attr in PRIVATE_ATTRIBUTES and owner not in ("self", "cls")
            ):
                touched.append(f".{node.attr}")
            elif node.attr == "stack" and owner == "inspect":
                touched.append("inspect.stack")
        elif isinstance(node, ast.Constant) and node.value in PRIVATE_ATTRIBUTES:
            touched.append(repr(node.value))  # getattr(x, "_client") and the like
    return touched


def test_only_the_seam_touches_litellms_internals_frames_and_private_attributes() -> None:
    touching = {p.relative_to(PACKAGE).as_posix(): internals(p) for p in MODULES}
    outside = {p: t for p, t in touching.items() if t and not p.startswith("edge/seam/")}
    assert outside == {}
    seam = sorted(p for p, t in touching.items() if t)
    assert seam == ["edge/seam/frames.py", "edge/seam/privates.py", "edge/seam/symbols.py"]


def test_the_installed_libraries_still_have_everything_the_seam_reads() -> None:
    from litellm_toolgate.edge.seam import missing

    gone = missing()
    assert gone == [], (
        "the installed litellm/httpx/openai no longer has what edge/seam/ reads; "
        f"read it again from the new version: {gone}"
    )


def test_the_seam_would_say_so_when_litellm_moves_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from litellm_toolgate.edge.seam import missing, symbols

    monkeypatch.setitem(symbols.LAZY, "Gone", ("litellm.utils", "no_such_function"))
    assert missing() == ["litellm symbol Gone: litellm.utils.no_such_function"]


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_import_path_gives_the_module_at_its_new_home(old: str) -> None:
    new = importlib.import_module(MOVED[old])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is new
    assert module.__spec__ is not None and module.__spec__.name == MOVED[old]
    if caught:  # only the first import of an old path warns
        assert any(issubclass(w.category, DeprecationWarning) for w in caught)


def test_the_documented_old_paths_keep_their_names() -> None:
    """The paths the docs gave before the rooms (a user's code) still import their names."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from litellm_toolgate.core.attempt import Attempt
        from litellm_toolgate.core.journal import Step
        from litellm_toolgate.core.registry import ToolRegistry
        from litellm_toolgate.edge.journalstores import open_journal
        from litellm_toolgate.edge.prometheus import MetricsSettings, enable_metrics
        from litellm_toolgate.edge.routeescalation import EscalationSettings, RouteEscalation
        from litellm_toolgate.edge.tools import Tool
    import litellm_toolgate as toolgate

    assert (toolgate.Tool, toolgate.open_journal) == (Tool, open_journal)
    assert callable(enable_metrics) and RouteEscalation.__module__.endswith("escalation")
    assert {Attempt.__name__, Step.__name__, ToolRegistry.__name__} == {
        "Attempt",
        "Step",
        "ToolRegistry",
    }
    assert (
        MetricsSettings.__module__
        == EscalationSettings.__module__
        == "litellm_toolgate.edge.config"
    )


def test_a_gate_runs_its_loop_through_the_plug() -> None:
    from litellm_toolgate import ToolGate
    from litellm_toolgate.core import plugs
    from litellm_toolgate.run import loop

    assert plugs.run_loop()  # plugged in by the package
    gate = ToolGate([])
    with pytest.raises(Exception) as caught:
        gate.run()  # no executors, journal or run_id: refused by the loop itself
    assert type(caught.value).__name__ == "GateConfigError"
    assert loop.run.__module__ == "litellm_toolgate.run.loop"


def test_the_seams_readers_read_what_they_name() -> None:
    """Each private reader hands back the very object it names, not a default."""
    import httpx
    import litellm
    import openai

    from litellm_toolgate.edge.seam import privates

    assert privates.shared_sync_handler() is litellm.module_level_client is not None
    assert privates.client_cache() is litellm.in_memory_llm_clients_cache is not None
    with httpx.Client() as client:
        transport = privates.transport(client)
        assert isinstance(transport, httpx.BaseTransport)
        privates.set_transports(client, transport, {})
        assert privates.mounts(client) == {}
    sdk = openai.OpenAI(api_key="seam-check", base_url="http://127.0.0.1:9")
    assert privates.sdk_http_client(sdk) is not None
    sdk.close()
    request = httpx.Request("GET", "http://127.0.0.1:9")
    assert privates.request_of(httpx.Response(200, request=request)) is request
    assert privates.request_of(httpx.Response(200)) is None
