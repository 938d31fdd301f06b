"""Property tests of the attempt machine over generated Anthropic streams, judged by an oracle.

``anthgen`` writes Anthropic Messages SSE streams, well-formed or damaged (see its
docstring); ``oracle_anthropic`` decides, from ``docs/anthropic.md``'s rules and sharing no
code with the gate, which calls must be released. For every stream, bound to an Anthropic
attempt (request path ``/v1/messages``):

* the attempt only ever raises ToolCallQuarantined (anything else fails the test);
* it releases exactly what the oracle releases (ids, names, arguments byte-identical to the
  wire, the same parsed values); where the oracle says quarantine, nothing at all;
* the outcome is the same however the bytes were split (random cuts, about one stream in a
  hundred one byte at a time).
"""

from __future__ import annotations

from anthgen import DAMAGE_LISTS, SEEDS, cuts_of, damage, stream
from chatgen import SCHEMAS, policy, scaled
from drive import judged, replay
from hypothesis import HealthCheck, given, note, settings
from oracle_anthropic import judge

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
PATH = "/v1/messages"


_CHECK = judged(PATH, judge, "anthropic")


def check(body: bytes, seed: int, label: str) -> None:
    _CHECK(body, cuts_of(body, seed), label)


@settings(FAST, max_examples=scaled(300))
@given(SEEDS)
def test_well_formed_anthropic_streams_match_the_oracle(seed: int) -> None:
    s = stream(seed)
    body = s.body()
    note(repr(body))
    check(body, seed, "intact")
    if judge(body, SCHEMAS, policy) is not None:
        assert replay([body], PATH).released == tuple(s.calls)


@settings(FAST, max_examples=scaled(1200))
@given(SEEDS, DAMAGE_LISTS)
def test_damaged_anthropic_streams_match_the_oracle(seed: int, kinds: list[str]) -> None:
    body = damage(stream(seed), seed, kinds)
    note(repr(body))
    check(body, seed, "+".join(kinds) or "intact")


def test_the_generator_and_oracle_are_not_trivial() -> None:
    """A stream with tool calls is released as generated; each damage is refused by both."""
    seed = next(
        s
        for s in range(2000)
        if len(stream(s).calls) >= 2 and judge(stream(s).body(), SCHEMAS, policy) is not None
    )
    s = stream(seed)
    body = s.body()
    assert replay([body], PATH).released == tuple(s.calls)
    stop = body.rfind(b"event: message_stop")
    for bad in (
        body[:stop],
        body.replace(b'"stop_reason": "tool_use"', b'"stop_reason": "max_tokens"'),
        body + b"event: ping\ndata: {}\n\n",
        body.replace(b'"input": {}', b'"input": {"a": 1}', 1),
        b"\xff" + body,
    ):
        assert bad != body
        assert judge(bad, SCHEMAS, policy) is None
        assert replay([bad], PATH).reason is not None
    # The same bytes on the chat wire are not a chat stream.
    assert replay([body]).reason is not None
