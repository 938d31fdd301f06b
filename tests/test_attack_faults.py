"""Fault injection through the real litellm over loopback: cuts, stalls and HTTP errors.

Every tool-call fixture that litellm and the gate release when it arrives whole is served
by the loopback FakeUpstream and broken on purpose:

* the connection is cut after every event boundary (including before the first byte and
  after the last, with no end of body), and at three byte offsets inside events chosen by a
  fixed seed per fixture;
* the upstream goes silent (at a boundary, or inside an event) past the idle limit;
* the upstream answers 401, 429, 500 or 503 before the stream, or reports an error of that
  kind inside the stream after a few events, or answers an HTML page.

Every case must end as a quarantine with the right reason or as litellm's own typed error,
release nothing, leak no argument text (several fixtures carry the canary), leave no thread
or asyncio task behind, and a fresh request through the same gate must then be released.
To stay inside the CI budget each cut runs once, sync or async in turn (every fixture sees
both), and every boundary is cut on litellm 1.110.x while 1.108.x cuts a fixed-seed third of
them (``TOOLGATE_ATTACK_SCALE`` of 3 or more cuts every boundary there too); the HTTP error
cases run both ways on both.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import threading
import time
from typing import Any

import litellm
import pytest
import tally
from chatgen import scaled
from conftest import CASES, MANIFEST, body_of, expected, litellm_version
from leakcheck import assert_clean_exception, assert_clean_logs, every_logger
from loopback import kwargs, released

from litellm_toolgate import Limits, QuarantineReason, ToolCallQuarantined, ToolGate
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted

litellm.suppress_debug_info = True
R = QuarantineReason

TOOL_FIXTURES = sorted(
    name for name, case in CASES.items() if case.get("calls") and expected(case)[0] == "release"
)
BOUNDARY = re.compile(rb"(?:\r\n|\r|\n)(?:\r\n|\r|\n)")
IDLE = 0.25
# litellm keeps module-level thread pools of bounded size for the life of the process
# ("litellm-logging", "litellm-streaming-error-body-read", ...); the gate starts no thread.
LITELLM_POOL = "litellm-"


def boundaries(body: bytes) -> list[int]:
    """Offsets right after each event's blank line, with 0 (before any byte) first."""
    return [0, *(m.end() for m in BOUNDARY.finditer(body))]


def sweep(name: str, cuts: list[int]) -> list[int]:
    """Every cut on the newest litellm; a fixed-seed third of them on 1.108.x."""
    if not litellm_version().startswith("1.108") or scaled(3) >= 9:
        return cuts
    rng = random.Random(f"sweep:{name}")
    return sorted(rng.sample(cuts, max(3, len(cuts) // 3)))


def inside_offsets(name: str, body: bytes, k: int = 3) -> list[int]:
    ends = set(boundaries(body))
    rng = random.Random(f"cut:{name}")
    return sorted(rng.sample([i for i in range(1, len(body)) if i not in ends], k))


@pytest.fixture(scope="module")
def server() -> Any:
    with FakeUpstream() as upstream:
        yield upstream


class Outcome:
    def __init__(self, chunks: list[Any], error: BaseException | None, tasks: int) -> None:
        self.chunks, self.error, self.tasks = chunks, error, tasks


def attempt(gate: ToolGate, upstream: FakeUpstream, asynchronous: bool) -> Outcome:
    """One request; any exception is kept (not only quarantines), and the asyncio tasks
    still pending once it settled are counted."""
    chunks: list[Any] = []

    async def go() -> Outcome:
        error: BaseException | None = None
        try:
            async for chunk in await gate.acompletion(**kwargs(upstream)):
                chunks.append(chunk)
        except Exception as exc:
            error = exc
        me = asyncio.current_task()
        for _ in range(200):  # litellm's own logging tasks finish shortly after the call
            if not asyncio.all_tasks() - {me}:
                break
            await asyncio.sleep(0.005)
        return Outcome(chunks, error, len(asyncio.all_tasks() - {me}))

    if asynchronous:
        return asyncio.run(go())
    error: BaseException | None = None
    try:
        chunks.extend(gate.completion(**kwargs(upstream)))
    except Exception as exc:
        error = exc
    return Outcome(chunks, error, 0)


def threads_left(before: set[threading.Thread], wait: float = 3.0) -> list[str]:
    """Threads started since ``before`` that are still alive after up to ``wait`` s."""
    deadline = time.monotonic() + wait
    while True:
        extra = [
            t.name
            for t in threading.enumerate()
            if t not in before and t.is_alive() and not t.name.startswith(LITELLM_POOL)
        ]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.01)


def is_litellms(error: BaseException) -> bool:
    return type(error).__module__ == "litellm.exceptions"


def check_fault(
    gate: ToolGate,
    upstream: FakeUpstream,
    scripted: Scripted,
    asynchronous: bool,
    *,
    reasons: set[QuarantineReason],
    litellm_error: type[BaseException] | None = None,
    fresh: str,
) -> BaseException:
    """Serve ``scripted`` once and check the outcome, then a fresh request of ``fresh``."""
    before = set(threading.enumerate())
    upstream.enqueue(scripted)
    with every_logger() as logs:
        outcome = attempt(gate, upstream, asynchronous)
    tally.count("faults")
    tally.count("fault_releases", len(released(outcome.chunks)))
    where = f"{'async' if asynchronous else 'sync'}, {scripted!r:.80}"
    assert released(outcome.chunks) == [], where
    error = outcome.error
    assert error is not None, f"a broken stream ended without an error: {where}"
    if isinstance(error, ToolCallQuarantined):
        assert error.reason in reasons, f"{error.reason} not in {reasons}: {where}"
        assert_clean_exception(error)
    else:
        assert litellm_error is not None and isinstance(error, litellm_error), (
            f"{type(error).__module__}.{type(error).__name__}: {where}"
        )
        assert is_litellms(error)
    assert_clean_logs(logs)
    assert outcome.tasks == 0, f"asyncio tasks left behind: {where}"
    assert threads_left(before) == [], f"threads left behind: {where}"
    # The same gate, a fresh attempt: released as if nothing had happened.
    case = CASES[fresh]
    upstream.enqueue(Scripted(body_of(case)))
    again = attempt(gate, upstream, asynchronous)
    assert again.error is None, f"the retry after {where} failed: {again.error!r}"
    assert released(again.chunks) == [(c["name"], c["arguments"]) for c in case["calls"]]
    return error


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_a_cut_at_every_boundary_releases_nothing(name: str, server: FakeUpstream) -> None:
    body = body_of(CASES[name])
    gate = ToolGate(MANIFEST["tools"])
    cuts = sweep(name, boundaries(body)) + inside_offsets(name, body)
    for n, cut in enumerate(cuts):
        asynchronous = (n + len(name)) % 2 == 1
        scripted = Scripted(body, chunk_sizes=[97], disconnect_after=cut)
        error = check_fault(
            gate, server, scripted, asynchronous, reasons={R.DISCONNECTED}, fresh=name
        )
        assert isinstance(error, ToolCallQuarantined), f"cut at {cut}: {error!r}"


@pytest.mark.parametrize("name", TOOL_FIXTURES)
def test_a_silent_upstream_is_a_stall(name: str, server: FakeUpstream) -> None:
    body = body_of(CASES[name])
    gate = ToolGate(MANIFEST["tools"], limits=Limits(idle_timeout=IDLE))
    rng = random.Random(f"stall:{name}")
    points = [rng.choice(boundaries(body)), rng.choice(inside_offsets(name, body))]
    for n, point in enumerate(points):
        asynchronous = (n + len(name)) % 2 == 0
        started = time.monotonic()
        error = check_fault(
            gate,
            server,
            Scripted(body, stall_after=point),
            asynchronous,
            reasons={R.STALLED},
            fresh=name,
        )
        assert isinstance(error, ToolCallQuarantined)
        assert time.monotonic() - started < 30, "a stall is bounded by the idle limit"


LITELLM_ERRORS: dict[int, type[Exception]] = {
    401: litellm.AuthenticationError,
    429: litellm.RateLimitError,
    500: litellm.InternalServerError,
    503: litellm.ServiceUnavailableError,
}
KINDS = {401: "invalid_api_key", 429: "rate_limit_exceeded", 500: "server_error", 503: "overloaded"}


def error_body(status: int) -> bytes:
    return json.dumps({"error": {"message": f"upstream {status}", "type": KINDS[status]}}).encode()


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("status", sorted(LITELLM_ERRORS))
def test_http_errors_before_and_during_the_stream(
    status: int, asynchronous: bool, server: FakeUpstream
) -> None:
    gate = ToolGate(MANIFEST["tools"])
    before = Scripted(error_body(status), status=status, content_type="application/json")
    check_fault(
        gate,
        server,
        before,
        asynchronous,
        reasons=set(),
        litellm_error=LITELLM_ERRORS[status],
        fresh="multiply_basic",
    )
    # During: the upstream reports the same error inside the stream after a few events.
    body = body_of(CASES["two_calls_interleaved"])
    at = random.Random(f"during:{status}").choice(boundaries(body)[1:-1])
    error_event = b"data: " + error_body(status) + b"\n\n"
    during = Scripted(body[:at] + error_event + body[at:])
    error = check_fault(
        gate, server, during, asynchronous, reasons={R.ERROR_EVENT}, fresh="multiply_basic"
    )
    assert isinstance(error, ToolCallQuarantined)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_html_error_page_with_status_200_is_not_read_as_a_stream(
    asynchronous: bool, server: FakeUpstream
) -> None:
    page = Scripted(b"<html><body>502 Bad Gateway</body></html>", content_type="text/html")
    check_fault(
        ToolGate(MANIFEST["tools"]),
        server,
        page,
        asynchronous,
        reasons={R.UNSUPPORTED_WIRE},
        litellm_error=litellm.APIError,
        fresh="two_tools_interleaved",
    )


def test_the_fixture_set_is_the_tool_call_fixtures() -> None:
    """Guards the parametrization: the cut tests cover every released tool-call fixture."""
    assert {"multiply_basic", "two_calls_interleaved", "write_file_unicode"} <= set(TOOL_FIXTURES)
    assert all(len(boundaries(body_of(CASES[n]))) > 5 for n in TOOL_FIXTURES)
