"""After the model answered: the proxy's stream gated, a whole result checked against the wire.

* **Proxy, streaming.** The proxy passes its stream through the guardrail's iterator hook
  (:func:`open_proxy_stream`). The client injected for the request only observed; the hook
  takes its tap (:mod:`taps`) and runs the stream through :class:`AsyncGatedStream`, exactly
  as :class:`ToolGate` does: text passes live, tool calls are withheld, litellm's chunks are
  cross-checked against the wire, the policy runs, and the calls go out or a
  :class:`ToolCallQuarantined` is raised. The proxy turns a raise before its first chunk
  into an HTTP error with the quarantine's ``status_code``, and a later one into an SSE
  error frame; both carry the quarantine's message only (ids and a reason). The proxy
  hands the hook a wrapper of its own around litellm's stream, so the tap carries whether
  the caller gets Responses events (``responses_api``, set from the call type), and the
  hook runs :class:`CarrierEvents` for them, as :meth:`ToolGate.aresponses` does.
* **A whole result**, in the proxy (:func:`check_proxy_response`) or from
  ``litellm.acompletion`` and its kin (:func:`check_sdk_response`): the injected client held
  the body until it ended; the success hook checks litellm's result (a chat result, a
  ``ResponsesAPIResponse`` or an Anthropic message) against the wire and raises the same
  way (outside the proxy as the guardrail-intervention twin).

A result no tap of the gate's observed is refused (``wire_not_observed``), never passed.
"""

from __future__ import annotations

import time
from typing import Any

from ...core.decision.attempt import Carrier
from ...core.decision.state import StreamState
from ...core.errors import raise_clean
from ..calltypes import GATED
from ..carriers.messages import AnthropicEvents, message_carrier
from ..carriers.responses import CarrierEvents, carrier_events, carrier_of_result
from ..guardrailerrors import as_intervention
from ..judge import aapprove_whole
from ..logs import emit_records, observers
from ..seam.symbols import ResponsesAPIResponse
from ..stream import AsyncGatedStream
from ..sync import tokenclaim
from ..transport import WireTap
from . import loghold
from .deciders import GateGuardrail, call_type, deciders
from .decisionlog import refuse_unobserved, report, sanitize_logged_response
from .proxyroutes import untouched_route
from .taps import Taps


class ProxyStream:
    """One proxy stream the gate took up: the gated stream the hook hands on, and what is
    done when it ends (:meth:`end`, also when the client went away).

    The proxy's iterator hook is the one generator between litellm's stream and the proxy:
    it iterates :attr:`stream` itself (litellm runs that hook once per chunk, so every
    generator layer in between is paid per chunk).
    """

    __slots__ = ("_guardrail", "_request_data", "_started", "stream")

    def __init__(
        self,
        guardrail: GateGuardrail,
        request: dict[str, Any],
        started: float,
        stream: AsyncGatedStream,
    ) -> None:
        self._guardrail = guardrail
        self._request_data = request
        self._started = started
        self.stream = stream

    async def end(self) -> None:
        """Close the gated stream and report the decision; litellm's held loggers go."""
        attempt = self.stream.attempt
        try:
            await self.stream.aclose()
            report(self._guardrail, self._request_data, attempt, self._started)
        finally:
            loghold.decided(attempt)
            observers.stream_ended(attempt.route)


def open_proxy_stream(
    guardrail: GateGuardrail, taps: Taps, response: Any, request: dict[str, Any]
) -> ProxyStream | None:
    """The proxy's stream, gated by the request's tap; None when it is passed on untouched
    (the gate is not selected for the request, or another gate acts for it). A request the
    gate cannot have observed is refused here."""
    started = time.time()
    tap = taps.take(request)
    if tap is None and (not deciders(guardrail, request) or untouched_route(request)):
        # Not selected, another gate acts for this request, or a route the gate leaves
        # untouched (text completions: a text answer, their tool requests refused before
        # sending): passed on, unrecorded.
        return None
    if tap is None or not (tap.streamed or tap.replayed):
        refuse_unobserved(guardrail, guardrail.gate, request, started)
    # litellm's success loggers wait for the decision (loghold): a refusal is a failure.
    loghold.hold(request.get("litellm_logging_obj"), tap.attempt)
    # The proxy wraps litellm's stream, so the request (not the stream's type) says
    # whether it carries Responses events.
    events: Any = CarrierEvents() if tap.responses_api else carrier_events(response)
    if tap.messages_api:
        events = AnthropicEvents()  # /v1/messages: Anthropic SSE bytes
    stream = AsyncGatedStream(response, tap, tap.policy, events)
    observers.stream_started(tap.attempt.route)
    return ProxyStream(guardrail, request, started, stream)


async def check_proxy_response(
    guardrail: GateGuardrail, taps: Taps, data: dict[str, Any], response: Any
) -> None:
    """The proxy's success hook: a whole result checked against the request's tap."""
    if data.get("stream") or not (
        hasattr(response, "choices")
        or isinstance(response, ResponsesAPIResponse)
        or (isinstance(response, dict) and response.get("type") == "message")
    ):
        return
    tap = taps.take(data)
    if tap is None and (not deciders(guardrail, data) or untouched_route(data)):
        return
    await _check_response(guardrail, data, response, tap, in_proxy=True)


async def check_sdk_response(
    guardrail: GateGuardrail, taps: Taps, request: dict[str, Any], response: Any, kind: Any
) -> None:
    """The deployment success hook: a whole result of an SDK call checked against its tap."""
    # Inside the proxy the success hook checks the response once routing is done.
    if "proxy_server_request" in request or call_type(kind) not in GATED or request.get("stream"):
        return
    # Outside the proxy the request is the kwargs the pre-call hook returned. A tap this
    # gate did not make belongs to a ToolGate's own call, which that gate decides.
    tap = getattr(request.get("client"), "tap", None)
    if tap is None and not deciders(guardrail, request):
        return
    if isinstance(tap, WireTap) and not taps.owns(tap):
        return
    await _check_response(guardrail, request, response, tap, in_proxy=False)


def _carrier_of_whole(response: Any) -> Carrier:
    """What litellm assembled of a whole result: an Anthropic message (``/v1/messages``) or a
    chat / Responses result (the bridge's own chat call has a chat result even when its
    caller gets a message)."""
    if isinstance(response, dict) and response.get("type") == "message":
        return message_carrier(response)
    return carrier_of_result(response)


async def _check_response(
    guardrail: GateGuardrail,
    request: dict[str, Any],
    response: Any,
    tap: WireTap | None,
    *,
    in_proxy: bool,
) -> None:
    started = time.time()
    if not isinstance(tap, WireTap) or tap.streamed or not tokenclaim.taken(tap):
        # No wire read: no tap, a tap of the other kind, or a call expected on litellm's own
        # client (sync.tokenclaim) whose request went out on one the gate did not claim.
        refuse_unobserved(guardrail, guardrail.gate, request, started, in_proxy=in_proxy)
    attempt = tap.attempt
    # Through litellm's Responses bridge two success hooks (the chat call's, then the
    # Responses call's) see the one tap: the first decides, the second repeats it.
    if attempt.state is StreamState.RELEASED:
        return
    if attempt.quarantined is None:
        if await aapprove_whole(attempt, _carrier_of_whole, response, tap.policy):
            attempt.release()
        emit_records(attempt)
        report(guardrail, request, attempt, started)
    fault = attempt.quarantined
    if fault is not None:
        _drop_output(response)
        del response  # litellm's result holds argument text: not in this frame's locals
        sanitize_logged_response(request, attempt)
        raise_clean(fault if in_proxy else as_intervention(fault))


def _drop_output(response: Any) -> None:
    """A refused result is never handed over, but litellm's own frames hold it while the
    refusal is raised through them (its call wrapper's ``result``): what the model said, the
    calls' argument text with it, is dropped from it in place."""
    try:
        if isinstance(response, dict):
            if "content" in response:  # an Anthropic message
                response["content"] = []
        elif isinstance(response, ResponsesAPIResponse):
            response.output = []
        elif hasattr(response, "choices"):
            response.choices = []
    except Exception:  # a result that will not be changed: the refusal is raised all the same
        pass


def answer_unhooked_failure(guardrail: GateGuardrail, request: dict[str, Any], tap: WireTap) -> Any:
    """The proxy's failure hook for a request whose tap neither the stream hook nor the
    success hook took: the answer failed inside litellm first. litellm's router reads a
    stream's first chunk itself, before the proxy's hooks see the stream, so a fault the
    wire shows by then (its tap quarantined the attempt and ended litellm's read with an
    error) fails the request there, and the proxy would answer litellm's own HTTP 500. A
    quarantine is reported here as a decision, and answered as the stream hook answers one
    raised before the first chunk: the quarantine's status and message (ids and a reason,
    no argument text). Any other failure (the upstream's, litellm's) is litellm's to answer:
    None."""
    attempt = tap.attempt
    fault = attempt.quarantined
    if fault is None:
        return None
    started = time.time()
    emit_records(attempt)
    report(guardrail, request, attempt, started)
    loghold.decided(attempt)
    from fastapi import HTTPException  # the proxy's own dependency: only the proxy calls this

    return HTTPException(status_code=fault.status_code, detail=str(fault))


__all__ = [
    "ProxyStream",
    "answer_unhooked_failure",
    "check_proxy_response",
    "check_sdk_response",
    "open_proxy_stream",
]
