"""What the callback refuses at litellm's call set-up, sync and async alike.

litellm reads every registered guardrail's ``default_on`` first thing on every call, in its
call set-up (``function_setup``), before its cache, before any hook and before a request is
built; an ``Exception`` raised there reaches the caller as it is, on ``litellm.completion``
and ``litellm.acompletion`` (and their kin) alike, and a ``Router`` never re-sends a
guardrail intervention. A call whose own arguments already say that the gate cannot gate it
is refused there, with the very quarantine (its guardrail-intervention twin) whichever way it
was made:

* **A mock model turn** (``mock_response``, ``mock_tool_calls``, given to the call or by a
  Router deployment's ``litellm_params``): litellm makes the answer itself, without any
  request, so there is no wire to gate, and on some paths (a sync call, any stream) no later
  hook of the callback would see it. Refused ``wire_not_observed``, as :class:`ToolGate`
  refuses it. Every ``mock_response`` counts, a plain text one and an exception included:
  the gate does not tell a made-up answer that carries no call from one that does.
* **A chat request for ``n > 1``**, asked for at the top level or in ``extra_body`` (which
  the OpenAI SDK merges into the body it sends), on a route whose choices litellm does not
  keep apart (any wire but chat completions: :func:`..routes.choices_kept_apart`), or with an
  ``n`` that is no count: refused ``unsupported_request``, unsent. On a chat-completions
  route each choice is gated on its own.

The proxy is left to its own hooks (its requests are refused there, with the proxy's
statuses), and so are a :class:`ToolGate`'s own calls, which that gate decides.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ...core.errors import ToolCallQuarantined
from ...core.wires.chat import choices_asked
from ..calltypes import CHAT, GATED
from ..routes import choices_kept_apart
from ..sync.vouching import is_vouched
from .deciders import GateGuardrail, registered_gates, selected
from .decisionlog import refuse, refuse_unobserved
from .taps import chat_request_fields

# The arguments with which litellm answers a call itself, without sending any request.
MOCKS = ("mock_response", "mock_tool_calls")


def at_call_setup(gate: GateGuardrail, kind: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse, from litellm's call set-up (``kind`` and ``kwargs``, read by
    :func:`..seam.frames.call_setup`), a mock model turn or a chat request for ``n > 1``
    (see the module docstring). The first registered gate answers for all."""
    if kind not in GATED or "proxy_server_request" in kwargs:
        return
    gates = registered_gates()
    if not gates or gates[0] is not gate:
        return
    if not any(selected(g, kwargs) for g in gates):
        return
    if is_vouched(str(kwargs.get("litellm_call_id") or "")):
        return  # a ToolGate's own call: that gate decides it
    started = time.time()
    request: dict[str, Any] = {"metadata": {}}  # litellm's own kwargs are left untouched
    model = str(kwargs.get("model") or "")
    if any(kwargs.get(name) is not None for name in MOCKS):
        refuse_unobserved(gate, gate.gate, request, started, in_proxy=False)
    fields = chat_request_fields(kwargs) if kind in CHAT else {}
    if choices_asked(fields) != 1:
        # The attempt's own check (an attempt is made only for a request it may refuse).
        apart = choices_asked(fields) is not None and choices_kept_apart(kwargs, callback=True)
        attempt = gate.gate.new_attempt(tools=kwargs.get("tools"), model=model)
        try:
            attempt.bind_request("/chat/completions", fields, choices_gated=apart)
        except ToolCallQuarantined:
            refuse(gate, request, attempt, started, in_proxy=False)


__all__ = ["MOCKS", "at_call_setup"]
