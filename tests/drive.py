"""Drive one attempt of the sans-I/O core over a body (either wire), as the property tests
and fuzzers do.

:func:`replay` feeds the pieces, ends the body, concludes, runs the tests' policy and
releases; it catches ToolCallQuarantined only, so anything else the core raised fails the
caller, and it checks the attempt's own bookkeeping on the way (a quarantined attempt is in
QUARANTINED, refuses to release and raises the same fault again).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tally
from chatgen import TOOLS, policy

from litellm_toolgate.core import (
    Attempt,
    PolicyDecision,
    QuarantineReason,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.decision.state import StreamState

REGISTRY = ToolRegistry.from_tools(TOOLS)
CHAT_PATH = "/v1/chat/completions"
RESPONSES_PATH = "/v1/responses"
OLLAMA_PATH = "/api/chat"
BEDROCK_PATH = "/model/m/converse-stream"
MEDIA = {
    OLLAMA_PATH: "application/x-ndjson",
    BEDROCK_PATH: "application/vnd.amazon.eventstream",
}
"""The streamed media type of the wires that do not speak SSE, by path."""


@dataclass(frozen=True)
class Result:
    reason: QuarantineReason | None
    released: tuple[tuple[int, str, str, str], ...]
    values: tuple[dict[str, Any], ...] = ()


def replay(pieces: list[bytes], path: str = CHAT_PATH) -> Result:
    """Drive an attempt to its end. Only ToolCallQuarantined is caught: anything else fails.

    ``path`` is the request path the attempt is bound to: it picks the wire (chat
    completions by default, :data:`RESPONSES_PATH` for the Responses wire), and with it the
    media type the body is declared as (:data:`MEDIA`, SSE otherwise).
    """
    attempt = Attempt(REGISTRY)
    concluded = released_ok = False
    released: list[Any] = []
    try:
        media = MEDIA.get(path, "text/event-stream")
        attempt.bind_response(content_type=media, streamed=True, path=path)
        for piece in pieces:
            attempt.receive_bytes(piece)
        attempt.receive_eof()
        calls = attempt.conclude()
        concluded = True
        for call in calls:
            approved = policy(call.name, dict(call.arguments))
            decision = PolicyDecision.approve() if approved else PolicyDecision.deny("deny key")
            attempt.decide(call.index, decision)
        released = attempt.release()
        released_ok = True
    except ToolCallQuarantined as fault:
        assert attempt.quarantined is fault
        assert attempt.state is StreamState.QUARANTINED
        assert not released
        try:
            attempt.release()
        except ToolCallQuarantined as again:
            assert again is fault
        else:
            raise AssertionError("a quarantined attempt released") from None
        return Result(fault.reason, ())
    assert concluded and released_ok
    assert attempt.state is StreamState.RELEASED
    return Result(
        None,
        tuple((c.index, c.call_id, c.name, c.arguments) for c in released),
        tuple(dict(c.value) for c in released),
    )


def agree(whole: Result, expected: list[tuple[Any, ...]] | None, label: str = "") -> None:
    """The gate's outcome must be the oracle's ``expected`` (None: refuse). Counts, under
    ``label``, the streams the oracle refuses and any of them the gate released."""
    if expected is None:
        tally.count(f"{label}bad_streams")
        if whole.reason is None:
            tally.count(f"{label}released_bad")
        assert whole.reason is not None, f"released what the oracle refuses: {whole.released}"
    else:
        assert whole.reason is None, f"quarantined ({whole.reason}) what the oracle releases"
        assert whole.released == tuple(e[:4] for e in expected)
        assert whole.values == tuple(e[4] for e in expected)


def pieces_of(body: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(body)]
    return [body[a:b] for a, b in itertools.pairwise(bounds)]


def judged(
    path: str, judge: Callable[..., list[tuple[Any, ...]] | None], wire: str
) -> Callable[[bytes, list[int], str], Result]:
    """The property tests' check for one wire: a body replayed whole and in the pieces
    ``cuts`` make must reach the same outcome, the outcome ``judge`` (the wire's oracle)
    gives; counted under ``<wire>_streams`` and labelled for hypothesis' statistics."""
    from chatgen import SCHEMAS
    from hypothesis import event

    def check(body: bytes, cuts: list[int], label: str) -> Result:
        whole = replay([body], path)
        split = replay(pieces_of(body, cuts), path)
        assert split == whole, "the outcome must not depend on how the bytes were split"
        expected = judge(body, SCHEMAS, policy)
        tally.count(f"{wire}_streams")
        agree(whole, expected, f"{wire}_")
        event(f"{label}: {'released' if whole.reason is None else whole.reason.value}")
        return whole

    return check
