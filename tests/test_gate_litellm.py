"""Every chat fixture through the real litellm, sync and async, whole and split, on three
routes: ``cometapi/`` (litellm's own HTTP handler) and the OpenAI SDK routes ``openai/`` and
``azure/`` (an SDK client of the gate's). The SDK routes take every fixture whole; the split
and byte-at-a-time replays run on ``cometapi/`` (the gate's transport is the same on all).

respx answers at the httpx edge; litellm itself runs unmodified. For each case the gate must
produce the manifest's outcome: the exact calls released (ids, names, arguments byte for
byte) right before the finish chunk, or ``ToolCallQuarantined`` with the manifest's reason
and not one tool-call fragment handed to the caller before it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import litellm
import pytest
import respx
from conftest import CASES, MANIFEST, Pieces, body_of, expected, no_leak, split

from litellm_toolgate import QuarantineReason, ToolCallQuarantined, ToolGate

litellm.suppress_debug_info = True
# respx answers at httpx's edge: litellm's async handlers on httpx (conftest).
pytestmark = pytest.mark.usefixtures("litellm_on_httpx")
URL = r"http://upstream\.test/(v1|openai/deployments/[^/]+)/chat/completions"
KWARGS: dict[str, Any] = {
    "model": "cometapi/gpt-4o-mini",
    "messages": [{"role": "user", "content": "What is 7 times 8? Use multiply."}],
    "api_base": "http://upstream.test/v1",
    "api_key": "sk-test",
    "stream": True,
}
ROUTES: dict[str, dict[str, Any]] = {
    "cometapi": KWARGS,
    "openai": {**KWARGS, "model": "openai/gpt-4o-mini"},
    "azure": {
        **KWARGS,
        "model": "azure/gpt-4o-mini",
        "api_base": "http://upstream.test",
        "api_version": "2024-10-21",
    },
}

PLAIN = [c for c in MANIFEST["cases"] if "transport" not in c]
MODES = [("whole", 0), ("random", 1), ("random", 2), ("random", 3)]


def _mock(router: respx.MockRouter, pieces: list[bytes], **stream_kw: Any) -> respx.Route:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": "text/event-stream"},
            stream=Pieces(list(pieces), **stream_kw),
        )

    return router.post(url__regex=URL).mock(side_effect=answer)


def _collect(chunks: list[Any]) -> tuple[str, list[dict[str, Any]], list[int], str | None]:
    text, calls, call_positions, finish = "", [], [], None
    for position, chunk in enumerate(chunks):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or []:
                call_positions.append(position)
                calls.append(
                    {
                        "index": tc.index,
                        "id": tc.id,
                        "name": tc.function.name,
                        "arguments": tc.function.arguments,
                    }
                )
            finish = choice.finish_reason or finish
    return text, calls, call_positions, finish


def _check(
    case: dict[str, Any], chunks: list[Any], error: ToolCallQuarantined | None, route: str
) -> None:
    # Where litellm's own SSE parser mangles a valid wire, the OpenAI SDK (which parses the
    # openai/ and azure/ streams) does not: there the outcome is the wire's.
    outcome, reason = (
        expected(case) if route == "cometapi" else (case["expect"], case.get("reason"))
    )
    text, calls, positions, finish = _collect(chunks)
    if outcome == "release":
        assert error is None, f"{case['name']}: quarantined {error!r}"
        assert text == case["text"]
        assert calls == case["calls"]
        assert finish == case["finish_reason"]
        if calls:
            # One chunk carries every call, and it comes right before the finish chunk.
            assert set(positions) == {len(chunks) - 1 - _tail(chunks)}
    else:
        assert error is not None, f"{case['name']}: released {calls!r}"
        assert error.reason is QuarantineReason(reason)
        assert calls == [], "a tool-call fragment reached the caller"
        assert case["text"].startswith(text)
        no_leak(error)


def _tail(chunks: list[Any]) -> int:
    """How many chunks follow the release chunk (the finish chunk and what came after it)."""
    for back, chunk in enumerate(reversed(chunks)):
        if any(c.delta.tool_calls for c in chunk.choices):
            return back
    return 0


def run_sync(
    gate: ToolGate, pieces: list[bytes], route: str = "cometapi", **stream_kw: Any
) -> tuple[list[Any], Any]:
    chunks: list[Any] = []
    error = None
    with respx.mock(assert_all_called=False) as router:
        _mock(router, pieces, **stream_kw)
        try:
            for chunk in gate.completion(**ROUTES[route]):
                chunks.append(chunk)
        except ToolCallQuarantined as exc:
            error = exc
    return chunks, error


def run_async(
    gate: ToolGate, pieces: list[bytes], route: str = "cometapi", **stream_kw: Any
) -> tuple[list[Any], Any]:
    async def go() -> tuple[list[Any], Any]:
        chunks: list[Any] = []
        error = None
        with respx.mock(assert_all_called=False) as router:
            _mock(router, pieces, **stream_kw)
            try:
                async for chunk in await gate.acompletion(**ROUTES[route]):
                    chunks.append(chunk)
            except ToolCallQuarantined as exc:
                error = exc
        return chunks, error

    return asyncio.run(go())


RUNNERS = {"sync": run_sync, "async": run_async}


@pytest.fixture(scope="module")
def gate() -> ToolGate:
    return ToolGate(MANIFEST["tools"])


# Every split on cometapi/; every fixture whole on the OpenAI SDK routes.
ROUTE_MODES = [("cometapi", mode, seed) for mode, seed in MODES] + [
    ("openai", "whole", 0),
    ("azure", "whole", 0),
]


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("where", ROUTE_MODES, ids=["-".join(map(str, w)) for w in ROUTE_MODES])
@pytest.mark.parametrize("case", PLAIN, ids=[c["name"] for c in PLAIN])
def test_fixture_outcome(
    gate: ToolGate, case: dict[str, Any], where: tuple[str, str, int], runner: str
) -> None:
    route, mode, seed = where
    chunks, error = RUNNERS[runner](gate, split(body_of(case), mode, seed), route)
    _check(case, chunks, error, route)


SMALL = [c for c in PLAIN if c.get("small")]


@pytest.mark.parametrize("runner", sorted(RUNNERS))
@pytest.mark.parametrize("case", SMALL, ids=[c["name"] for c in SMALL])
def test_fixture_outcome_one_byte_at_a_time(
    gate: ToolGate, case: dict[str, Any], runner: str
) -> None:
    chunks, error = RUNNERS[runner](gate, split(body_of(case), "bytewise"))
    _check(case, chunks, error, "cometapi")


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_disconnect_then_fresh_attempt(gate: ToolGate, runner: str, route: str) -> None:
    case = CASES["disconnect_mid_arguments"]
    chunks, error = RUNNERS[runner](
        gate, [body_of(case)], route, cut=case["transport"]["disconnect_after"]
    )
    assert isinstance(error, ToolCallQuarantined)
    assert error.reason is QuarantineReason.DISCONNECTED
    assert _collect(chunks)[1] == []
    no_leak(error)
    # A retry is a new attempt: nothing of the broken one carries over.
    again = CASES[case["then"]]
    chunks, error2 = RUNNERS[runner](gate, [body_of(again)], route)
    assert error2 is None
    assert _collect(chunks)[1] == again["calls"]


@pytest.mark.parametrize("route", sorted(ROUTES))
@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_read_timeout_is_a_stall(gate: ToolGate, runner: str, route: str) -> None:
    case = CASES["stall_mid_arguments"]
    chunks, error = RUNNERS[runner](
        gate,
        [body_of(case)],
        route,
        cut=case["transport"]["stall_after"],
        error=httpx.ReadTimeout,
    )
    assert isinstance(error, ToolCallQuarantined)
    assert error.reason is QuarantineReason.STALLED
    assert _collect(chunks)[1] == []
