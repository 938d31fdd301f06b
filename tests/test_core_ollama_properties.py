"""Property tests of the attempt machine over generated Ollama ``/api/chat`` bodies, judged by
an oracle.

``ollgen`` writes newline-delimited Ollama bodies, well-formed or damaged (see its
docstring); ``oracle_ollama`` decides, from the rules of ``core/framing/ndjson.py``,
``core/wires/ollama.py`` and ``docs/ollama.md`` and sharing no code with the gate, which
calls must be released. For every body, bound to an Ollama attempt (request path
``/api/chat``, ``application/x-ndjson``):

* the attempt only ever raises ToolCallQuarantined (anything else fails the test);
* it releases exactly what the oracle releases (ids, names, arguments byte-identical, the
  same parsed values); where the oracle says quarantine, nothing at all;
* the outcome is the same however the bytes were split (random cuts, about one body in a
  hundred one byte at a time).
"""

from __future__ import annotations

import json
from pathlib import Path

from anthgen import cuts_of
from chatgen import SCHEMAS, policy, scaled
from drive import judged, replay
from hypothesis import HealthCheck, given, note, settings
from ollgen import DAMAGE_LISTS, PATH, SEEDS, damage, stream
from oracle_ollama import judge, lines

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "ollama"
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


_CHECK = judged(PATH, judge, "ollama")


def check(body: bytes, seed: int, label: str) -> None:
    _CHECK(body, cuts_of(body, seed), label)


@settings(FAST, max_examples=scaled(300))
@given(SEEDS)
def test_well_formed_ollama_streams_match_the_oracle(seed: int) -> None:
    s = stream(seed)
    body = s.body()
    note(repr(body))
    check(body, seed, "intact")
    if judge(body, SCHEMAS, policy) is not None:
        assert replay([body], PATH).released == tuple(s.calls)


@settings(FAST, max_examples=scaled(1200))
@given(SEEDS, DAMAGE_LISTS)
def test_damaged_ollama_streams_match_the_oracle(seed: int, kinds: list[str]) -> None:
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
        ["no_reason"],
        ["done_string"],
        ["after_done"],
        ["error"],
        ["mix_ids"],
        ["reuse_id"],
        ["empty_id"],
        ["bad_index"],
        ["no_name"],
        ["args_string"],
        ["dup_key"],
        ["nan"],
    ):
        bad = damage(s, seed, kinds)
        assert bad != body, kinds
        assert judge(bad, SCHEMAS, policy) is None, kinds
        assert replay([bad], PATH).reason is not None, kinds
    blank = damage(s, seed, ["blank"])
    assert blank != body and replay([blank], PATH) == replay([body], PATH)
    for bad in (body[:-1], body + b"{", b"\xff" + body):
        assert judge(bad, SCHEMAS, policy) is None
        assert replay([bad], PATH).reason is not None
    # The line reader refuses with the framing's reasons.
    assert lines(body[:-1]) == "malformed_event"
    assert lines(b"{}\n" * 2 + b"\xff\n") == "invalid_utf8"
    assert lines(b"x" * 9 + b"\r\n", limit=8) == "event_too_large"
    assert lines(b"x" * 8 + b"\r\n\n", limit=8) == ["x" * 8]
    # The same bytes on the chat wire are not a chat stream.
    assert replay([body]).reason is not None


def test_the_oracle_agrees_with_every_recording() -> None:
    """Each streamed recording of fixtures/ollama: the oracle releases the calls its manifest
    lists (which the core releases too), and refuses what it says is refused."""
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    streamed = [case for case in manifest["cases"] if case["streamed"]]
    assert len(streamed) >= 20
    for case in streamed:
        body = (FIXTURES / case["body"]).read_bytes()
        expected = judge(body, SCHEMAS, policy)
        if case["expect"] == "quarantine":
            assert expected is None, case["name"]
        else:
            assert expected is not None, case["name"]
            calls = [(c["call_id"], c["name"], c["arguments"]) for c in case["calls"]]
            assert [e[1:4] for e in expected] == calls, case["name"]
            assert replay([body], PATH).released == tuple(e[:4] for e in expected)
