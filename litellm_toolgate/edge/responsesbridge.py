"""What litellm's Responses bridge will hand the caller, run over the wire the gate holds.

litellm has no Responses config for ``anthropic/``, ``bedrock/`` (Converse) and Claude on
``vertex_ai/``: it makes a chat call on the provider's own wire and turns the chat chunks
its stream parser makes into Responses events (``LiteLLMCompletionStreamingIterator``; a
whole chat result through ``LiteLLMCompletionResponsesConfig``), on 1.108.7 and 1.110.2
alike. ``ToolGate`` reads those events themselves and cross-checks them with the wire
(``core/wires/base.py``, ``bridged_responses_fault``). Under the callback no hook sees them
before the caller does, so the withholding client runs the same two steps of litellm's over
the body it holds, at the decision, before anything held goes out: the route's own stream
parser (the one litellm's chat stream runs, :func:`.parsers.stream_parser`) or its
``transform_response`` for a whole body, then litellm's bridge over what that made. The
events or the result the bridge makes are the carrier, cross-checked with the wire by the
same rule. A body either step fails on is a carrier that matches nothing: refused.

litellm's chat stream wrapper stands between its parser and its bridge; on these wires it
passes the parser's chunks on as they are (their calls, ids, argument fragments and finish
reason), so the bridge is handed the parser's chunks here. A parser that marks each chunk's
finish reason as a passing one (``is_finished: False``, litellm's Gemini parser) has its
stream ended the way litellm's wrapper ends it: with the last such finish reason, on a final
chunk of its own (:func:`.parsers.ended_chunks`).

On Gemini's wire litellm's parser keeps a call's ``id`` and draws one for a call sent
without it; the withholding client writes the gate's identity of such a call into the body
it releases (``WireSpec.identities``), so the bridge run here, over the values so written,
hands over the calls under the gate's identities, as litellm's own run will after the
release, and the wire's rule then matches those ids too (``Carrier.wire_ids``). Where a call
carries a thought signature litellm appends it to the id it hands over (its
``THOUGHT_SIGNATURE_SEPARATOR`` and the signature, which it takes off again when the id comes
back in a later request): the carrier's id is read without it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import litellm

from ..core.decision.attempt import Carrier, CarrierCall
from ..core.decision.withhold import Parse
from .carriers.responses import CarrierEvents, carrier_of_response
from .parsers import UNPARSED, chat_config, ended_chunks, stream_parser, whole_result
from .seam.symbols import lazy


class _Chunks:
    """The chat chunks litellm's bridge reads, where it reads litellm's stream wrapper: the
    chunks in order, and a logging object that records nothing (the call's own records the
    real response)."""

    logging_obj = None

    def __init__(self, chunks: list[Any]) -> None:
        self._chunks: Iterator[Any] = iter(chunks)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        return next(self._chunks)


def _request(tools: Any) -> dict[str, Any]:
    """The Responses request's own parameters the bridge reads (its tools: custom tools and
    namespaced names change the items it makes)."""
    return {"tools": list(tools)} if isinstance(tools, (list, tuple)) and tools else {}


def _unsigned(carrier: Carrier) -> Carrier:
    """The carrier with each call id read without the thought signature litellm appends to
    a Gemini call's id (see the module text); as it is where litellm has no such separator."""
    try:
        separator = lazy("THOUGHT_SIGNATURE_SEPARATOR")
    except (ImportError, AttributeError):
        return carrier
    if not isinstance(separator, str) or not separator:
        return carrier
    calls: dict[int, CarrierCall] = {}
    for index, call in carrier.calls.items():
        call_id = call.call_id
        signed = isinstance(call_id, str) and separator in call_id
        calls[index] = (
            dataclasses.replace(call, call_id=str(call_id).split(separator, 1)[0])
            if signed
            else call
        )
    return dataclasses.replace(carrier, calls=calls)


def bridged_responses_parse(
    model: str,
    provider: str | None = None,
    *,
    tools: Any = None,
    functions: bool = False,
) -> Parse:
    """What litellm's Responses bridge makes of a body on this route, as a Responses carrier
    (see the module text); :data:`~.parsers.UNPARSED` when litellm has no parser the gate
    can run for the route, or a step fails on the body (its error, which may quote the
    body, is dropped)."""
    request = _request(tools)

    def parse(values: list[Any], streamed: bool) -> Carrier:
        try:
            config, name = chat_config(model, provider)
            route = litellm.get_llm_provider(model=model, custom_llm_provider=provider)[1]
            if streamed:
                parser = stream_parser(config, model, provider, functions)
                bridge = lazy("LiteLLMCompletionStreamingIterator")(
                    model=name,
                    litellm_custom_stream_wrapper=_Chunks(ended_chunks(parser, values)),
                    request_input="",
                    responses_api_request=dict(request),
                    custom_llm_provider=route,
                )
                events = CarrierEvents()
                for event in bridge:
                    events.admit(event)
                return _unsigned(events.carrier())
            if len(values) != 1 or not isinstance(values[0], Mapping):
                return UNPARSED
            result = whole_result(config, name, dict(values[0]))
            bridged = lazy("LiteLLMCompletionResponsesConfig")
            response = bridged.transform_chat_completion_response_to_responses_api_response(
                request_input="",
                responses_api_request=dict(request),
                chat_completion_response=result,
            )
            return _unsigned(carrier_of_response(response))
        except Exception:
            return UNPARSED

    return parse


__all__ = ["bridged_responses_parse"]
