"""The wire interface: every wire is one module with one :class:`WireSpec`, and the modules of
the decision (attempt, ledger, call accumulator, withholder) never name a wire."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from litellm_toolgate.core.decision.carrier import Carrier, CarrierCall
from litellm_toolgate.core.decision.ledger import Ledger
from litellm_toolgate.core.decision.limits import Limits
from litellm_toolgate.core.decision.state import (
    CALL_TABLES,
    STREAM_TABLES,
    WIRE_PATHS,
    Wire,
    wire_of,
)
from litellm_toolgate.core.errors import QuarantineReason
from litellm_toolgate.core.wires import (
    WIRES,
    anthropic,
    bedrock,
    chat,
    cohere,
    gemini,
    ollama,
    responses,
    watsonx,
)
from litellm_toolgate.core.wires.base import WireSpec

CORE = Path(__file__).resolve().parent.parent / "litellm_toolgate" / "core" / "decision"
DECISION_MODULES = ("attempt.py", "ledger.py", "call.py", "withhold.py", "body.py", "gated.py")


def test_every_wire_has_one_spec_tables_and_a_path() -> None:
    assert set(WIRES) == set(Wire)
    for wire, spec in WIRES.items():
        assert spec.wire is wire
        assert wire in STREAM_TABLES and wire in CALL_TABLES
        assert [w for _, w in WIRE_PATHS].count(wire) >= 1
    assert tuple(WIRES.values()) == (
        chat.WIRE,
        responses.WIRE,
        anthropic.WIRE,
        ollama.WIRE,
        gemini.WIRE,
        bedrock.WIRE,
        cohere.WIRE,
        watsonx.WIRE,
    )


@pytest.mark.parametrize("suffix,wire", WIRE_PATHS)
def test_a_wire_is_found_by_its_path(suffix: str, wire: Wire) -> None:
    assert wire_of("/base" + suffix) is wire
    assert wire_of("/base" + suffix + "/") is wire


@pytest.mark.parametrize("module", DECISION_MODULES)
def test_the_decision_modules_never_branch_on_a_wire(module: str) -> None:
    """``Wire.X`` may only appear as the default before a response is bound (chat), never
    in a comparison or a branch: a wire's differences are its spec's answers."""
    source = (CORE / module).read_text()
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            text = ast.unparse(node)
            assert not re.search(r"\bWire\.|_CHAT\b|_ANTHROPIC\b|_RESPONSES\b", text), text
    named = set(re.findall(r"\bWire\.([A-Z_]+)", source))
    assert named <= {"CHAT"}, named
    assert not re.search(r"from \.wires(\.| import )(chat|responses|anthropic)\b", source)


def test_a_spec_that_answers_nothing_refuses() -> None:
    """The base answers are the strictest: nothing passes live, no carrier matches."""
    spec = WireSpec(Wire.CHAT)
    ledger = Ledger(Limits(), lambda: 0.0)
    assert spec.carrier_fault(ledger, Carrier({}, "stop")) is QuarantineReason.CARRIER_MISMATCH
    assert spec.live_rule().passes_live({"choices": []}) is False
    assert spec.request_fault({"n": 5}) is None
    assert spec.terminal_fault(None, False, lambda: False) is None
    assert spec.named is False and spec.whole_body_checked is False
    with pytest.raises(NotImplementedError):
        spec.normalizer(chat.STRICT)


def test_the_ledger_asks_its_wire_for_the_carrier_check() -> None:
    ledger = Ledger(Limits(), lambda: 0.0)
    carrier = Carrier({0: CarrierCall("c", "f", "{}")}, "tool_calls", kind="responses")
    # The same carrier, asked of two wires, gets each wire's own answer: end_turn ends a whole
    # response on Anthropic's wire (a finish the carrier does not say), on no chat wire.
    ledger.finish_reason = "end_turn"
    ledger.wire = Wire.ANTHROPIC
    assert ledger.carrier_fault(carrier) is QuarantineReason.CARRIER_MISMATCH
    ledger.wire = Wire.CHAT
    assert ledger.carrier_fault(carrier) is QuarantineReason.RESPONSE_INCOMPLETE
