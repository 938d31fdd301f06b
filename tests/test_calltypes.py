"""Every litellm call type is classified: gated, refused before sending, or not a model turn.

Iterates litellm's own ``CallTypes``: a call type a future litellm adds fails here until
``edge/calltypes.py`` classifies it. The refused model-turn entry points are then called
for real against loopback with the gate installed: nothing reaches the upstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import litellm
import pytest
from conftest import MANIFEST
from litellm.types.utils import CallTypes

from litellm_toolgate import ToolGateError, ToolGateGuardrail, UngatedCallRefused
from litellm_toolgate.edge import calltypes
from litellm_toolgate.edge.calltypes import Handling, handling
from litellm_toolgate.edge.sync import claiming
from litellm_toolgate.loopback.upstream import FakeUpstream

litellm.suppress_debug_info = True
DOC = Path(__file__).resolve().parent.parent / "docs" / "callbacks.md"


@pytest.mark.parametrize("call_type", [c.value for c in CallTypes])
def test_every_call_type_is_classified(call_type: str) -> None:
    assert handling(call_type) is not None, (
        f"litellm call type {call_type!r} is not classified in edge/calltypes.py: is it a "
        "model turn (gate it or refuse it) or not?"
    )


def test_the_model_turns_that_are_gated() -> None:
    gated = {c.value for c in CallTypes if handling(c.value) is Handling.GATED}
    assert gated == {"completion", "acompletion", "responses", "aresponses", "anthropic_messages"}
    assert calltypes.ANTHROPIC_MESSAGES <= calltypes.REFUSED


def test_the_docs_table_lists_every_model_turn() -> None:
    text = DOC.read_text(encoding="utf-8")
    for name in sorted(calltypes.GATED | calltypes.REFUSED):
        assert f"`{name}`" in text, f"docs/callbacks.md does not list {name}"


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as server:
        yield server


@pytest.fixture
def gate() -> Iterator[ToolGateGuardrail]:
    gate = ToolGateGuardrail(MANIFEST["tools"])
    saved = litellm.callbacks
    litellm.callbacks = [gate]
    try:
        yield gate
    finally:
        litellm.callbacks = saved
        for name in dir(litellm):
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if not isinstance(cb, ToolGateGuardrail)]


@pytest.mark.parametrize("call_type", sorted(calltypes.REFUSED))
def test_each_refused_call_type_is_refused_by_both_hooks(
    gate: ToolGateGuardrail, call_type: str
) -> None:
    with pytest.raises(calltypes.CallRefused):
        asyncio.run(gate.async_pre_call_deployment_hook({}, call_type))
    # litellm drops any Exception a logging hook raises: the sync hook raises nothing, it
    # holds the refusal, and the claiming transport refuses the call's request unsent.
    details = {"call_type": call_type, "litellm_call_id": f"refused-{call_type}"}
    gate.log_pre_api_call(None, None, details)
    sent: list[httpx.Request] = []
    transport = claiming.ClaimingTransport(httpx.MockTransport(sent.append))
    request = httpx.Request("POST", "http://127.0.0.1:9/v1/x", json={"model": "m"})
    with pytest.raises(UngatedCallRefused, match=call_type) as refused:
        transport.handle_request(request).content  # noqa: B018
    assert isinstance(refused.value, ToolGateError) and sent == []
    gate.log_failure_event(details, None, None, None)
    assert len(claiming.CLAIMS) == 0
