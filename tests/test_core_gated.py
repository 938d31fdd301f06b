"""A gated stream of carrier items (core/decision/gated.py), through its public API, no network.

The carrier here is a toy one, built on the wire's own chat chunks: it hands text chunks
out, withholds the rest and assembles the calls, which is all a carrier adapter does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from litellm_toolgate.core import (
    Attempt,
    Carrier,
    CarrierCall,
    PolicyDecision,
    QuarantineReason,
    ReleasedCall,
    ToolCallQuarantined,
    ToolRegistry,
)
from litellm_toolgate.core.decision.gated import END, FAULT, MORE, GatedItems
from litellm_toolgate.core.decision.state import StreamState
from litellm_toolgate.core.framing.sse import SSEDecoder
from litellm_toolgate.core.wires import chat as chat_wire

R = QuarantineReason
CHAT = Path(__file__).resolve().parent.parent / "fixtures" / "chat"
TOOLS = json.loads((CHAT / "manifest.json").read_text())["tools"]
BODY = (CHAT / "multiply_basic.sse").read_bytes()


class ToyCarrier:
    """Chat chunks as a client library would hand them on: text out, the rest withheld."""

    def __init__(self, *, tamper: bool = False) -> None:
        self.withheld: list[dict[str, Any]] = []
        self.calls: dict[int, dict[str, str]] = {}
        self.finish: str | None = None
        self.tamper = tamper

    def admit(self, item: dict[str, Any]) -> dict[str, Any] | None:
        if chat_wire.passes_live(item):
            return item
        self.withheld.append(item)
        for choice in item["choices"]:
            self.finish = choice.get("finish_reason") or self.finish
            for fragment in choice["delta"].get("tool_calls") or []:
                call = self.calls.setdefault(fragment["index"], {"id": "", "name": "", "args": ""})
                function = fragment.get("function") or {}
                call["id"] += fragment.get("id") or ""
                call["name"] += function.get("name") or ""
                call["args"] += function.get("arguments") or ""
        return None

    def carrier(self) -> Carrier:
        calls = {
            i: CarrierCall(c["id"], c["name"], '{"a": 1}' if self.tamper else c["args"])
            for i, c in self.calls.items()
        }
        return Carrier(calls, self.finish)

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        return [{"released": [c.name for c in released]}, *self.withheld]


class Told:
    def __init__(self) -> None:
        self.attempts: list[Attempt] = []

    def __call__(self, attempt: Attempt) -> None:
        self.attempts.append(attempt)


def gated(carrier: ToyCarrier | None = None) -> tuple[GatedItems, Told]:
    attempt = Attempt(ToolRegistry.from_tools(TOOLS))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    told = Told()
    return GatedItems(attempt, carrier or ToyCarrier(), told), told


def chunks(body: bytes) -> list[dict[str, Any]]:
    decoder = SSEDecoder(max_event_bytes=1 << 20)
    return [json.loads(m.data) for m in decoder.feed(body) if m.data != "[DONE]"]


def read(items: GatedItems, body: bytes) -> list[Any]:
    """The edge's loop: feed the wire, take each item, hand out what is ready."""
    items.attempt.receive_bytes(body)
    items.attempt.receive_eof()
    out: list[Any] = []
    for chunk in chunks(body):
        assert items.ready() is MORE
        taken = items.take(chunk)
        if taken is not MORE:
            out.append(taken)
    return out


def drain(items: GatedItems) -> list[Any]:
    out: list[Any] = []
    while (item := items.ready()) not in (END, FAULT):
        out.append(item)
    return [*out, item]


def test_text_is_handed_out_at_once_and_the_calls_only_once_approved() -> None:
    items, told = gated()
    out = read(items, BODY)
    # The role and text chunks before the call, and the usage chunk after it.
    assert len(out) == 6 and all("tool_calls" not in json.dumps(c) for c in out)
    calls = items.conclude()
    assert calls is not None and [c.name for c in calls] == ["multiply"]
    items.attempt.decide(0, PolicyDecision.approve())
    assert not told.attempts
    items.decide(True)
    assert told.attempts == [items.attempt]
    released = drain(items)
    assert released[0] == {"released": ["multiply"]} and released[-1] is END
    assert len(released) == 2 + len(chunks(BODY)) - 6
    assert items.attempt.state is StreamState.RELEASED
    assert not items.cancel()  # over: nothing to cancel
    assert told.attempts == [items.attempt]


def test_a_denied_stream_hands_out_nothing_withheld() -> None:
    items, told = gated()
    read(items, BODY)
    calls = items.conclude()
    assert calls is not None
    with pytest.raises(ToolCallQuarantined):
        items.attempt.decide(0, PolicyDecision.deny("no"))
    items.decide(False)
    assert drain(items) == [FAULT]
    assert items.drop() is items.attempt.quarantined  # dropping again changes nothing
    assert told.attempts == [items.attempt]
    assert items.attempt.quarantined is not None
    assert items.attempt.quarantined.reason is R.POLICY_DENIED


def test_a_carrier_that_disagrees_with_the_wire_is_refused_at_conclusion() -> None:
    items, told = gated(ToyCarrier(tamper=True))
    read(items, BODY)
    assert items.conclude() is None
    items.decide(False)
    assert drain(items) == [FAULT] and told.attempts == [items.attempt]
    assert items.attempt.quarantined is not None
    assert items.attempt.quarantined.reason is R.CARRIER_MISMATCH


def test_a_fault_mid_stream_stops_the_items_and_drops_the_withheld() -> None:
    items, told = gated()
    first, *rest = chunks(BODY)
    assert items.take(first) is first
    with pytest.raises(ToolCallQuarantined):
        items.attempt.receive_bytes(b"data: {broken\n\n")
    assert items.take(rest[0]) is FAULT
    assert items.ready() is FAULT and items.done and told.attempts == [items.attempt]
    # What was withheld is gone: a later conclusion asks a carrier that holds nothing.
    assert items.take(rest[-1]) is FAULT and items.conclude() is None


@pytest.mark.parametrize("faulted", [False, True])
def test_a_carrier_that_gives_up_is_a_mismatch_unless_the_wire_said_why(faulted: bool) -> None:
    items, _ = gated()
    if faulted:
        items.attempt.interrupt(R.DISCONNECTED)
    items.carrier_failed()
    assert items.attempt.quarantined is not None
    assert items.attempt.quarantined.reason is (R.DISCONNECTED if faulted else R.CARRIER_MISMATCH)


def test_a_cancel_before_the_end_refuses_the_attempt_once() -> None:
    items, told = gated()
    half = BODY[: len(BODY) // 2].rsplit(b"\n\n", 1)[0] + b"\n\n"
    items.attempt.receive_bytes(half)
    assert [items.take(c) is not MORE for c in chunks(half)][:2] == [True, True]
    assert items.cancel()
    assert not items.cancel()
    assert items.attempt.quarantined is not None
    assert items.attempt.quarantined.reason is R.CANCELLED
    assert told.attempts == [items.attempt] and items.ready() is FAULT


def test_without_an_owner_nothing_is_told() -> None:
    attempt = Attempt(ToolRegistry.from_tools(TOOLS))
    items = GatedItems(attempt, ToyCarrier())
    assert items.cancel() and items.drop() is attempt.quarantined
