"""Shared test set-up: offline litellm, the chat fixture manifest, byte-stream helpers, the
canary check of a refusal."""

from __future__ import annotations

import gc
import json
import os
import random
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

# litellm fetches its model cost map from the internet at import unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
CHAT = ROOT / "fixtures" / "chat"
CANARY = "CANARY-7f3a9c"


def load_manifest() -> dict[str, Any]:
    return json.loads((CHAT / "manifest.json").read_text())


MANIFEST = load_manifest()
CASES = {case["name"]: case for case in MANIFEST["cases"]}


def body_of(case: dict[str, Any]) -> bytes:
    return (CHAT / case["body"]).read_bytes()


# What litellm's own frames hold of the canary before any hook of the gate runs, which the
# gate cannot reach: the caller's own mock calls (its input), and the body litellm's
# post_call keeps in a local while a sync answer is stopped in the last resort.
LITELLMS_OWN_HOLDINGS = ("['mock_tool_calls']", "post_call@litellm_logging.py:original_response")


def no_leak(exc: BaseException, *, records: bool = True) -> None:
    """The canary is in no rendering of ``exc`` nor of the exceptions it was raised from or
    while handling; with ``records``, in none of the records ``exc`` carries; in no local of
    any frame of their tracebacks, walked through containers and attributes
    (``tests/leakcheck.py``), save :data:`LITELLMS_OWN_HOLDINGS`."""
    from leakcheck import find_in_frames  # it imports this module

    seen: BaseException | None = exc
    while seen is not None:
        for rendered in (str(seen), repr(seen), repr(seen.args)):
            assert CANARY not in rendered
        seen = seen.__cause__ or seen.__context__
    if records:
        for record in getattr(exc, "records", ()):
            assert CANARY not in record.model_dump_json()
    found = [
        where
        for where in find_in_frames(exc)
        if not any(own in where for own in LITELLMS_OWN_HOLDINGS)
    ]
    assert not found, f"argument text in traceback frame locals: {found[:5]}"


def litellm_version() -> str:
    from importlib.metadata import version

    return version("litellm")


def expected(case: dict[str, Any]) -> tuple[str, str | None]:
    """The outcome through litellm: the wire's outcome unless litellm is known to differ.

    Where litellm mangles a valid wire (it parses SSE line by line, so a chunk split over two
    ``data:`` lines is lost; 1.108.x drops a data line holding a raw U+2028), its assembled
    calls differ from the wire's and the gate must refuse them as a carrier mismatch.
    """
    override = case.get("via_litellm", {})
    for prefix, outcome in override.items():
        if litellm_version().startswith(prefix):
            return outcome["expect"], outcome.get("reason")
    return case["expect"], case.get("reason")


class Pieces(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A response body served in the given pieces; optionally broken after ``cut`` bytes."""

    def __init__(
        self, pieces: list[bytes], *, cut: int | None = None, error: type[Exception] | None = None
    ) -> None:
        self.pieces = pieces
        self.cut = cut
        self.error = error or httpx.RemoteProtocolError

    def _emit(self) -> Iterator[bytes]:
        sent = 0
        for piece in self.pieces:
            if self.cut is not None and sent + len(piece) >= self.cut:
                yield piece[: self.cut - sent]
                raise self.error("connection broken by the test")
            sent += len(piece)
            yield piece

    def __iter__(self) -> Iterator[bytes]:
        yield from self._emit()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._emit():
            yield piece


def split(body: bytes, mode: str, seed: int = 0) -> list[bytes]:
    if mode == "whole":
        return [body]
    if mode == "bytewise":
        return [body[i : i + 1] for i in range(len(body))]
    rng = random.Random(seed)
    cuts = sorted(rng.sample(range(1, len(body)), min(len(body) - 1, rng.randint(1, 12))))
    return [body[a:b] for a, b in zip([0, *cuts], [*cuts, len(body)], strict=True)]


@pytest.fixture
def manifest() -> dict[str, Any]:
    return MANIFEST


@pytest.fixture
def litellm_on_httpx(monkeypatch: pytest.MonkeyPatch) -> None:
    """litellm's async handlers on httpx, not aiohttp, for tests that answer with respx.

    respx answers at httpx's edge only, and the gate's async handler is built as litellm
    builds its own (on aiohttp, unless litellm is told not to).
    """
    import litellm

    monkeypatch.setattr(litellm, "disable_aiohttp_transport", True)


@pytest.fixture
def upstream() -> Iterator[Any]:
    """A running loopback FakeUpstream (litellm_toolgate.loopback.upstream)."""
    from litellm_toolgate.loopback.upstream import FakeUpstream

    with FakeUpstream() as server:
        yield server


@pytest.fixture(autouse=True, scope="module")
def _gates_closed_after_module() -> Iterator[None]:
    """Close, when a test file ends, every ``ToolGateGuardrail`` it left open, so the next
    file starts with no gate installed (``claiming.INSTALLATION.gates == 0``).

    Most tests drop their gates without closing them and rely on the last gate dropped
    putting back what the gates changed. litellm keeps some of them reachable for the rest
    of the process, though: ``litellm.utils.callback_list`` holds the callbacks of the first
    call that had any, and never lets go (1.108.7 and 1.110.2), and litellm's logging worker
    keeps the success handlers of an async call whose event loop ended before it ran them
    (the call's logging object, and through its client the gate). Such a gate stays counted,
    and a later file's test that needs a clean installation (``gates == 0``) saw two. Free
    when nothing is left: a file that left no gate counted costs nothing here."""
    yield
    claiming = sys.modules.get("litellm_toolgate.edge.sync.claiming")
    if claiming is None or claiming.INSTALLATION.gates == 0:
        return
    gc.collect()  # a gate nothing else holds puts back what it changed when collected
    if claiming.INSTALLATION.gates == 0:
        return
    from litellm_toolgate import ToolGateGuardrail

    for found in gc.get_objects():
        if isinstance(found, ToolGateGuardrail):
            found.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print what the attack suites tried (see tests/tally.py), and every proxy process that
    was found dead between tests and started again (tests/proxyproc.py)."""
    from proxyproc import RESTARTS
    from tally import summary

    lines = summary()
    if lines:
        terminalreporter.write_sep("-", "attack figures")
        for line in lines:
            terminalreporter.write_line(line)
    for what in RESTARTS:
        terminalreporter.write_sep("!", "a proxy process had ended between tests: started again")
        terminalreporter.write_line(what)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    """A test that uses a real proxy gets a running one (see Proxy.ensure_running)."""
    from proxyproc import Proxy

    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, Proxy):
            value.ensure_running()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that used a real proxy says whether that proxy process is still alive,
    and if not, how it ended and the end of its log (tests/proxyproc.py)."""
    report = yield
    if report.failed:
        from proxyproc import Proxy

        for value in getattr(item, "funcargs", {}).values():
            if isinstance(value, Proxy):
                report.sections.append(("proxy process", value.describe()))
    return report


class RecordingObserver:
    """A metrics observer that keeps every decided attempt's outcome it is handed, each as
    soon as it goes out (``core/records/metrics.py``)."""

    batch = 1

    def __init__(self) -> None:
        self.outcomes: list[Any] = []

    def attempts_decided(self, outcomes: list[Any]) -> None:
        self.outcomes.extend(outcomes)

    def stream_started(self, route: str) -> None: ...

    def stream_ended(self, route: str) -> None: ...
