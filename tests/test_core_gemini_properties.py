"""Property tests of the attempt machine over generated Gemini bodies, judged by an oracle.

``gemgen`` writes Gemini ``streamGenerateContent`` SSE bodies, well-formed or damaged (see
its docstring); ``oracle_gemini`` decides, from ``docs/gemini.md``'s rules and sharing no
code with the gate, which calls must be released. For every body, bound to a Gemini attempt
(request path ``...:streamGenerateContent``):

* the attempt only ever raises ToolCallQuarantined (anything else fails the test);
* it releases exactly what the oracle releases (ids, names, arguments byte-identical, the
  same parsed values); where the oracle says quarantine, nothing at all;
* the outcome is the same however the bytes were split (random cuts, about one body in a
  hundred one byte at a time).
"""

from __future__ import annotations

from anthgen import cuts_of
from chatgen import SCHEMAS, policy, scaled
from drive import judged, replay
from gemgen import DAMAGE_LISTS, PATH, SEEDS, damage, stream
from hypothesis import HealthCheck, given, note, settings
from oracle_gemini import judge

FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


_CHECK = judged(PATH, judge, "gemini")


def check(body: bytes, seed: int, label: str) -> None:
    _CHECK(body, cuts_of(body, seed), label)


@settings(FAST, max_examples=scaled(300))
@given(SEEDS)
def test_well_formed_gemini_streams_match_the_oracle(seed: int) -> None:
    s = stream(seed)
    body = s.body()
    note(repr(body))
    check(body, seed, "intact")
    if judge(body, SCHEMAS, policy) is not None:
        assert replay([body], PATH).released == tuple(s.calls)


@settings(FAST, max_examples=scaled(1200))
@given(SEEDS, DAMAGE_LISTS)
def test_damaged_gemini_streams_match_the_oracle(seed: int, kinds: list[str]) -> None:
    body = damage(stream(seed), seed, kinds)
    note(repr(body))
    check(body, seed, "+".join(kinds) or "intact")


def test_the_generator_and_oracle_are_not_trivial() -> None:
    """A body with two calls is released as generated; each damage is refused by both."""
    seed = next(
        s
        for s in range(2000)
        if len(stream(s).calls) >= 2 and judge(stream(s).body(), SCHEMAS, policy) is not None
    )
    s = stream(seed)
    body = s.body()
    assert replay([body], PATH).released == tuple(s.calls)
    for kinds in (
        ["finish"],
        ["after_finish"],
        ["error"],
        ["blocked"],
        ["second_candidate"],
        ["code_part"],
        ["partial"],
        ["mix_ids"],
        ["reuse_id"],
        ["args_string"],
        ["dup_key"],
        ["nan"],
    ):
        bad = damage(s, seed, kinds)
        assert bad != body, kinds
        assert judge(bad, SCHEMAS, policy) is None, kinds
        assert replay([bad], PATH).reason is not None, kinds
    for bad in (body[: body.rfind(b"data: ")], b"\xff" + body):
        assert judge(bad, SCHEMAS, policy) is None
        assert replay([bad], PATH).reason is not None
    # The same bytes on the chat wire are not a chat stream.
    assert replay([body]).reason is not None
