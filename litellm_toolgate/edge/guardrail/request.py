"""Before an async call is sent: its tap, and the client that reads its wire.

Every async way of use rests on one hook that litellm runs right before it sends a request
to a deployment (``async_pre_call_deployment_hook``): the gate swaps in an HTTP client of its
own, so it reads the raw wire of that request. What that client does depends on who hands
the result to the caller (:mod:`.answer` has the rest):

* **Proxy, streaming.** The client only observes (:class:`AsyncTapTransport`); the tap waits
  for the proxy's stream hook in the gate's :class:`~.taps.Taps`.
* **Proxy, not streaming.** The client holds the body until it ended; the proxy's success
  hook checks litellm's response against the wire.
* **SDK, ``litellm.acompletion``.** No hook sees the stream before the caller does, so the
  client withholds on the wire itself (:mod:`.httpwithhold`). A quarantine travels through
  litellm as its litellm-flavoured twin (:mod:`intervention`: also a guardrail
  intervention), which litellm hands to the caller unchanged and never retries.
  Non-streamed responses are judged while held and checked again in the deployment success
  hook, which may raise.

The Responses API goes the same ways: ``litellm.aresponses`` and the proxy's
``/v1/responses`` run the same hook, and the withholding client reads either wire
(:mod:`.httpwithhold`). Through litellm's bridge the hook runs once more for the chat call
litellm makes with the outer call's client: the gate recognises its own client (it vouched
for it) and leaves it, so one attempt reads the wire and the policy runs once. For
``/v1/messages`` the wire is the one litellm's bridge for the model speaks (:mod:`bridges`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ...core.decision.attempt import Attempt
from ..bridges import Bridge, bridge_carrier, bridge_path, messages_bridge
from ..calltypes import SYNC
from ..httpwithhold import Withholding, WithholdingTransport
from ..parsers import chat_chunk_check, client_parse, responses_event_check
from ..routes import Api, replays, reshaped_bridge, route_for
from ..sync import tokenclaim
from ..sync.claiming import gemini_whole, is_vouched_client, vouch_client
from ..transport import AsyncTapTransport
from . import loghold
from .deciders import GateGuardrail, admit
from .decisionlog import refuse, report
from .taps import Taps, new_tap


def _any_url(url: str) -> bool:
    return True


def arm_async(
    guardrail: GateGuardrail, taps: Taps, kwargs: dict[str, Any], kind: str
) -> dict[str, Any] | None:
    """The call's kwargs with the gate's client in them, or None when the gate leaves the call
    alone; raises (before anything is sent) for a call the gate refuses."""
    if kind in SYNC:
        return None  # litellm's sync Responses runs this hook too: armed by the sync face
    vouched = is_vouched_client(kwargs.get("client"))
    admitted = admit(guardrail, kind, kwargs, kwargs, vouched=vouched)
    if admitted is None:
        return None  # not gated here: the request goes out untouched
    api, gate, route = admitted
    streamed = bool(kwargs.get("stream"))
    # litellm asks for a whole Responses result and replays it as the stream: the wire is
    # that whole body, judged while litellm's request reads it (before any event is made).
    replayed = streamed and replays(kwargs, api, route)
    streamed = streamed and not replayed
    in_proxy = "proxy_server_request" in kwargs
    tap = new_tap(
        gate,
        kind,
        tools=kwargs.get("tools"),
        model=str(kwargs.get("model", "")),
        streamed=streamed,
        body=kwargs,
    )
    tap.replayed = replayed
    if tap.refused:
        # A request the gate cannot gate as asked (``n > 1`` off the chat routes, an ``n``
        # that is no count), refused before it was sent.
        refuse(guardrail, kwargs, tap.attempt, time.time(), in_proxy=in_proxy)
    # /v1/messages: the wire is the one litellm's bridge for this model speaks (bridges).
    bridge = messages_bridge(kwargs) if tap.messages_api else None
    if bridge is not None:
        tap.wire_path = bridge_path(bridge)
    wrap: Callable[[Any], Any]
    if in_proxy and (streamed or replayed):
        # The proxy's stream hook gates litellm's events (replayed ones too: the whole body
        # read here, then judged there with the events, as ToolGate does).
        # The proxy's success loggers wait for the gate's decision (loghold).
        loghold.hold(kwargs.get("litellm_logging_obj"), tap.attempt)

        def wrap(base: Any) -> Any:
            return AsyncTapTransport(base, tap)
    else:
        model, provider = str(kwargs.get("model", "")), kwargs.get("custom_llm_provider")
        started = time.time()

        def reported(attempt: Attempt) -> None:
            report(guardrail, kwargs, attempt, started)

        bridged = bridge if bridge is not Bridge.NATIVE else None
        # A whole body litellm's Responses bridge makes a result of, on a wire it re-shapes:
        # judged here, against what litellm's parser and bridge make of it (responsesbridge);
        # the later success hooks see litellm's chat result first, and find it decided.
        reshaped = tap.responses_api and not streamed and reshaped_bridge(kwargs)
        holding = Withholding(
            gate.policy,
            reported,
            # A whole bridged body is refused inside litellm's call (below): as a
            # guardrail intervention there too, which litellm's router never re-sends.
            intervene=not in_proxy or ((bridged is not None or reshaped) and not streamed),
            # A bridged whole body is judged (and litellm's message of it checked) in
            # the transport: litellm's bridge parses it before any later hook runs.
            whole_here=(bridged is not None and not streamed) or replayed or reshaped,
            retry_stream_faults=guardrail.retry_stream_faults,
            chunk_check=chat_chunk_check(model, provider),
            event_check=(
                responses_event_check(model, provider)
                if tap.responses_api or bridge is Bridge.RESPONSES
                else None
            ),
            carrier_of=None if bridged is None else bridge_carrier(bridged, streamed),
            # What litellm's parser makes of a wire it may re-shape (Ollama's, Anthropic's),
            # cross-checked with the wire before anything held goes out.
            parse=client_parse(
                model,
                provider,
                responses_api=tap.responses_api,
                messages_api=tap.messages_api,
                functions=bool(kwargs.get("functions")),
                tools=kwargs.get("tools"),
            ),
            # On litellm's Responses bridge, calls sent without an id go out under the
            # gate's identity of them, which litellm keeps (Gemini's wire).
            identify=tap.responses_api,
            # A whole Gemini body: judged while litellm's request reads it, since litellm's
            # Gemini handler parses it in a catch-all that would hide the quarantine.
            in_read=_any_url if replayed else None if in_proxy else gemini_whole,
        )

        def wrap(base: Any) -> Any:
            return WithholdingTransport(base, tap, holding)

    # The client kind the route takes (the route admit asked; a Messages call litellm
    # bridges to the Responses API takes that API's client, its route asked here).
    if bridge is Bridge.RESPONSES and api is not Api.RESPONSES:
        api = Api.RESPONSES
        route = route_for(kwargs, api) if kwargs.get("model") else None
    client = gate.tapped_client(kwargs, api, wrap, asynchronous=True, route=route)
    if route is not None and route.drops_client:
        # litellm's handler drops client= (Cohere's): the request goes over litellm's own
        # client, claimed for this call by a token in its extra_headers (sync.tokenclaim);
        # the client handed over still carries the tap for the later hooks.
        tokenclaim.expect(kwargs, tap, wrap, asynchronous=True)
    kwargs["client"] = vouch_client(client)
    if in_proxy:
        # The proxy's later hooks get the proxy's request, not these kwargs: keep the tap.
        taps.remember(kwargs, tap)
    taps.own(tap)
    return kwargs


__all__ = ["arm_async"]
