"""Which calls a :class:`~.callback.ToolGateGuardrail` gates: the callback's one admission.

Every call, async or sync, is admitted by one check (:func:`admit`): the call type, the gate
(one gate per call: a second one selected for the same call refuses it,
:class:`GatesConflict`; a gate taken out of ``litellm.callbacks`` does nothing), per-request
selection (:func:`selected`), the route table, and then the request's own fields on the new
attempt (a chat request for ``n > 1`` is refused unsent: :func:`.taps.new_tap`). litellm
answers cache hits before any of this runs, so a gated call skips litellm's cache reads
(:mod:`cacheguard`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import litellm
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks

from . import cacheguard
from .calltypes import RESPONSES, CallRefused, GatesConflict, Handling, handling
from .routes import Api, route_for

if TYPE_CHECKING:
    from .gate import ToolGate


class GateGuardrail(CustomGuardrail):
    """The guardrail as the callback's parts (this module, :mod:`.precall`, :mod:`.postcall`,
    :mod:`.sync.hooks`) see it: the base of :class:`~.callback.ToolGateGuardrail`, which the
    parts never import (it imports them). Its instances in ``litellm.callbacks`` are the
    registered gates; it declares what the parts read of one."""

    gate: ToolGate
    """The :class:`~.gate.ToolGate` whose registry, policy and limits the guardrail applies."""
    retry_stream_faults: bool
    _closed: bool


def call_type(value: Any) -> str:
    """litellm's name of a call type (or of a guardrail mode): an enum's value, or the string."""
    return str(getattr(value, "value", value) or "")


def selected(gate: CustomGuardrail, request: Any) -> bool:
    """Whether the gate runs on this request, by litellm's guardrail conventions.

    litellm's own answer (``should_run_guardrail``): ``default_on``, the guardrails a request
    names (``"guardrails": [...]`` in its body or metadata), the admin opt-outs. A gate not
    registered as a ``guardrails:`` entry (``event_hook`` None) runs on every request. When
    litellm cannot answer, the gate runs: it fails closed.
    """
    if not isinstance(request, dict):
        return True
    try:
        return gate.should_run_guardrail(request, GuardrailEventHooks.post_call) is not False
    except Exception:
        return True


def registered_gates() -> list[GateGuardrail]:
    """The gates in ``litellm.callbacks``, each once, in order."""
    found: list[GateGuardrail] = []
    for callback in list(getattr(litellm, "callbacks", None) or ()):
        if isinstance(callback, GateGuardrail) and all(g is not callback for g in found):
            found.append(callback)
    return found


def any_gate_registered() -> bool:
    return bool(registered_gates())


def admit(
    gate: GateGuardrail,
    kind: str,
    request: Mapping[str, Any],
    route: Mapping[str, Any],
    *,
    vouched: bool,
) -> Api | None:
    """Whether ``gate`` gates the call, and on which API; None when it is not its to gate.

    The one default-deny of the callback, shared by the async hook and the sync arming:
    a call type that is not "not a model turn" (:mod:`calltypes`) is gated or refused,
    never passed (one litellm does not list yet included). Raises, before anything is
    sent: :class:`CallRefused` for a model turn the gate does not read,
    :class:`GatesConflict` when another gate is registered for the same call, and
    :class:`RouteNotGated` for a route the table refuses (``route``: the call's model,
    provider, api_base and stream, as :func:`route_for` reads them).
    """
    how = handling(kind)
    if how is Handling.NOT_A_MODEL_TURN:
        return None
    if how is not Handling.GATED:
        raise CallRefused(kind)
    if vouched:
        # A client a gate already withholds on: a ToolGate's own call, or litellm's
        # Responses bridge making its chat call with this gate's client from the outer
        # call. One attempt per wire, one policy run per call.
        return None
    cacheguard.guard(any_gate_registered)
    gates = registered_gates()
    if gates and all(g is not gate for g in gates):
        return None  # taken out of litellm.callbacks; litellm's own lists still hold it
    chosen = [g for g in gates or [gate] if selected(g, request)]
    if all(g is not gate for g in chosen):
        return None  # not selected: the request goes out untouched
    if len(chosen) > 1:
        raise GatesConflict([repr(g.guardrail_name) for g in chosen])
    api = Api.RESPONSES if kind in RESPONSES else Api.CHAT
    if route.get("model"):
        route_for(route, api, callback=True)
    return api


__all__ = ["admit", "any_gate_registered", "call_type", "registered_gates", "selected"]
