"""Which calls a :class:`~.callback.ToolGateGuardrail` gates: the callback's one door.

Every call, async or sync, is admitted by one check (:func:`admit`): the call type, the
gates that decide it (:func:`deciders`), per-request selection (:func:`selected`), the route
table, and then the request's own fields on the new attempt (a chat request for ``n > 1``
off the chat routes or in the proxy is refused unsent: :func:`.taps.new_tap`). litellm
answers cache hits before any of this runs, so a gated call skips litellm's cache reads
(:mod:`cacheguard`).

**Which gates decide a call.** litellm runs a guardrail's pre-send hooks for the entries of
``litellm.callbacks`` (the proxy puts its ``guardrails:`` there too); every gate there that
is selected for the request decides it, together: the first of them acts for all with a
:class:`~.gate.GateSet` (a call is released only when every one of them would release it),
and the others leave the call to it, on every path (async hook, sync arming, the proxy's
post-call hooks). A gate litellm runs only from the lists it copies callbacks into is not
in ``litellm.callbacks``: one handed to a call in its own ``callbacks=`` while no gate is
registered decides that call alone where it can (sync calls: litellm runs no pre-send hook
of it on async calls, see docs/callbacks.md); one that was registered and has been taken
out does nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

import litellm

from ..calltypes import RESPONSES, CallRefused, Handling, handling
from ..gate import GateSet, ToolGate
from ..routes import Api, Gated, route_for
from ..seam.symbols import CustomGuardrail, GuardrailEventHooks
from . import cacheguard

_GATE_SETS = 16
"""The gate sets one gate keeps made (one per distinct combination of gates it acted for)."""


class GateGuardrail(CustomGuardrail):
    """The guardrail as the callback's parts (this module, :mod:`.request`, :mod:`.answer`,
    :mod:`.sync.hooks`) see it: the base of :class:`~.callback.ToolGateGuardrail`, which the
    parts never import (it imports them). Its instances in ``litellm.callbacks`` are the
    registered gates; it declares what the parts read of one."""

    gate: ToolGate
    """The :class:`~.gate.ToolGate` whose registry, policy and limits the guardrail applies."""
    retry_stream_faults: bool
    _closed: bool
    _registered: bool
    """Whether the gate was ever found in ``litellm.callbacks`` (:func:`registered_gates`)."""


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
            callback._registered = True
    return found


def deciders(gate: GateGuardrail, request: Any) -> tuple[GateGuardrail, ...]:
    """The gates that decide a call litellm runs ``gate``'s hooks for, in
    ``litellm.callbacks`` order, when ``gate`` is the one to act for them (the first); empty
    when the call is not ``gate``'s to gate (see the module docstring)."""
    registered = registered_gates()
    if not registered:
        if gate.__dict__.get("_registered", False):
            return ()  # taken out of litellm.callbacks; litellm's own lists still hold it
        registered = [gate]  # handed to this call in its callbacks=
    elif all(g is not gate for g in registered):
        return ()  # the registered gates decide
    chosen = tuple(g for g in registered if selected(g, request))
    return chosen if chosen and chosen[0] is gate else ()


def deciding_gate(chosen: tuple[GateGuardrail, ...]) -> ToolGate:
    """The :class:`~.gate.ToolGate` that judges a call for ``chosen`` (:func:`deciders`):
    the one gate's own, or a :class:`~.gate.GateSet` of theirs, kept by the first."""
    if len(chosen) == 1:
        return chosen[0].gate
    first = chosen[0]
    sets: dict[tuple[int, ...], GateSet] = first.__dict__.setdefault("_gate_sets", {})
    key = tuple(id(g.gate) for g in chosen)
    found = sets.get(key)
    if found is None or any(m is not g.gate for m, g in zip(found.members, chosen, strict=True)):
        if len(sets) >= _GATE_SETS:
            sets.pop(next(iter(sets)), None)
        found = sets[key] = GateSet([g.gate for g in chosen])
    return found


def any_gate_registered() -> bool:
    return bool(registered_gates())


def any_gate_acting() -> bool:
    """Whether a gate acts on litellm's calls now: one in ``litellm.callbacks``, or one
    handed to a call in its own ``callbacks=`` (never registered, not closed), which litellm
    has copied into its ``input_callback`` list by the time it reads its cache and keeps
    running for every later call. The cache guard answers "miss" to model turns while one
    does (:mod:`cacheguard`): litellm's call set-up pops ``callbacks=`` from the call's
    kwargs, so a cache read cannot tell which call named the gate."""
    if registered_gates():
        return True
    return any(
        isinstance(c, GateGuardrail)
        and not c.__dict__.get("_registered", False)
        and not c.__dict__.get("_closed", True)
        for c in list(getattr(litellm, "input_callback", None) or ())
    )


class Admitted(NamedTuple):
    """A call :func:`admit` lets through: the API it is gated on, the
    :class:`~.gate.ToolGate` that judges it, and its route (:func:`route_for`, asked once
    here and handed on; None for a call without a model, which has none)."""

    api: Api
    gate: ToolGate
    route: Gated | None


def admit(
    gate: GateGuardrail,
    kind: str,
    request: Mapping[str, Any],
    route: Mapping[str, Any],
    *,
    vouched: bool,
) -> Admitted | None:
    """Whether ``gate`` gates the call: on which API, the :class:`~.gate.ToolGate` that
    judges it (:func:`deciding_gate`) and its route; None when it is not its to gate.

    The one default-deny of the callback, shared by the async hook and the sync arming:
    a call type that is not "not a model turn" (:mod:`calltypes`) is gated or refused,
    never passed (one litellm does not list yet included). Raises, before anything is
    sent: :class:`CallRefused` for a model turn the gate does not read, and
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
    cacheguard.guard(any_gate_acting)
    chosen = deciders(gate, request)
    if not chosen:
        return None  # another gate acts for this call, or none is selected for it
    api = Api.RESPONSES if kind in RESPONSES else Api.CHAT
    # The callback's check is the stricter: what it lets through, route_for without it
    # gates alike (the same route), so the callers take this one.
    gated = route_for(route, api, callback=True) if route.get("model") else None
    return Admitted(api, deciding_gate(chosen), gated)


__all__ = [
    "Admitted",
    "admit",
    "any_gate_acting",
    "any_gate_registered",
    "call_type",
    "deciders",
    "deciding_gate",
    "registered_gates",
    "selected",
]
