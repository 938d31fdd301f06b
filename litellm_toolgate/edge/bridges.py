"""Which wire litellm's Anthropic Messages entry point speaks upstream, asked of litellm.

``litellm.anthropic.messages.create`` / ``acreate`` (and the proxy's ``/v1/messages``) serve a
model one of three ways (see ``docs/anthropic.md``, "Which bridge litellm takes"):

* **native**: a provider with an Anthropic Messages config (``anthropic/``): the upstream's
  ``/v1/messages`` wire is passed through;
* **bridged to Responses**: ``openai/`` models: litellm calls ``litellm.responses`` and makes
  the Anthropic events from the upstream's Responses wire;
* **bridged to chat**: every other route: litellm calls ``litellm.completion`` and makes the
  Anthropic events from the chat-completions wire.

The decision is litellm's own, made per request (a global setting, the request's
``stop_sequences``, a deployment's model info count), so it is asked of litellm's own
functions here, found by name in the package of either supported version. If litellm no
longer has them, the call is refused before it is sent (:class:`RouteNotGated`), never
guessed. The gate then hands litellm the client that wire's route takes; the URL path the
request really goes out on is checked again when it is sent (:func:`bridge_path`).

The bridges' converters are litellm's too: :func:`whole_carrier` and :func:`stream_carrier`
run them over the wire the gate already holds, so the blocks litellm *will* hand over are
compared with the wire's calls before any of it reaches litellm (the callback's path, where
litellm's output reaches the caller with no hook in between).
"""

from __future__ import annotations

import enum
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.decision.attempt import Carrier
from ..core.errors import RouteNotGated
from .carriers.messages import AnthropicEvents, message_carrier
from .routes import Api, provider_of
from .seam.symbols import (
    ModelResponse,
    ModelResponseStream,
    ResponsesAPIResponse,
    lazy,
    messages_module,
)


class Bridge(enum.Enum):
    NATIVE = "native Anthropic Messages"
    CHAT = "bridged to chat completions"
    RESPONSES = "bridged to the Responses API"

    @property
    def api(self) -> Api:
        """The route-table column whose client litellm takes on this bridge."""
        return Api.RESPONSES if self is Bridge.RESPONSES else Api.CHAT


def _call(function: Any, *args: Any, **optional: Any) -> Any:
    """``function(*args, **optional)`` with only the keywords its signature takes."""
    params = inspect.signature(function).parameters
    return function(*args, **{k: v for k, v in optional.items() if k in params})


def messages_bridge(request: Mapping[str, Any]) -> Bridge:
    """The bridge litellm takes for this Messages call; :class:`RouteNotGated` when litellm
    cannot tell the provider, or no longer answers the question the way the gate asks it."""
    model = request.get("model")
    found = provider_of(request)
    if found is None:
        name = model if isinstance(model, str) and model else "(no model)"
        raise RouteNotGated(name, "messages", "litellm cannot tell this model's provider")
    bare, provider = found
    handler = messages_module("handler")
    native = getattr(handler, "_native_messages_config", None)
    to_responses = getattr(handler, "_should_route_to_responses_api", None)
    if not (callable(native) and callable(to_responses)):
        raise RouteNotGated(
            provider, "messages", "cannot tell which bridge this litellm version takes"
        )
    info = request.get("model_info")
    try:
        if _call(native, bare, provider, info, api_base=request.get("api_base")) is not None:
            return Bridge.NATIVE
        if request.get("compaction") is None and _call(
            to_responses,
            provider,
            str(model),
            bare,
            deployment_model_info=info,
            stop_sequences=request.get("stop_sequences"),
        ):
            return Bridge.RESPONSES
    except Exception:
        raise RouteNotGated(
            provider, "messages", "cannot tell which bridge litellm takes for this model"
        ) from None
    return Bridge.CHAT


_PATHS = {Bridge.CHAT: "/chat/completions", Bridge.RESPONSES: "/responses"}


def bridge_path(bridge: Bridge) -> str:
    """How the URL path of the request litellm sends on ``bridge`` ends."""
    return _PATHS.get(bridge, "/messages")


# ---- litellm's converters, run over the wire the gate holds ------------------------------
def _adapter(module: str, name: str) -> Any:
    found = messages_module(module)
    value = getattr(found, name, None)
    if value is None:
        raise LookupError(name)
    return value


def _foreign() -> Carrier:
    return Carrier({}, None, foreign=True, kind="anthropic")


def whole_carrier(bridge: Bridge, body: Any) -> Carrier:
    """The message litellm's bridge makes of a whole upstream body (decoded JSON), as a
    carrier; a body litellm's converter fails on is a carrier that matches nothing (its
    error, which quotes the body, is dropped)."""
    try:
        if bridge is Bridge.RESPONSES:
            adapter = _adapter(
                "responses_adapters.transformation", "LiteLLMAnthropicToResponsesAPIAdapter"
            )
            message = adapter().translate_response(ResponsesAPIResponse(**body))
        else:
            result = lazy("convert_to_model_response_object")(
                response_object=dict(body),
                model_response_object=ModelResponse(),
                response_type="completion",
                stream=False,
            )
            adapter = _adapter("adapters.transformation", "AnthropicAdapter")
            message = adapter().translate_completion_output_params(result)
        shown = message if isinstance(message, dict) else message.model_dump()
        return message_carrier(json.loads(json.dumps(shown, default=str)))
    except Exception:
        return _foreign()


def bridge_carrier(bridge: Bridge, streamed: bool) -> Callable[[list[Any]], Carrier] | None:
    """What litellm's ``bridge`` makes of a body, from its data values, for the cross-check
    where no hook sees litellm's output (None: not simulated; the wire alone decides)."""
    if not streamed:
        return lambda values: whole_carrier(bridge, values[0] if values else None)
    return stream_carrier if bridge is Bridge.CHAT else None


def stream_carrier(chunks: Sequence[Mapping[str, Any]]) -> Carrier:
    """The Anthropic events litellm's chat bridge makes of these chat chunks (the body's
    data values, in order), as a carrier."""
    try:
        wrapper = _adapter("adapters.streaming_iterator", "AnthropicStreamWrapper")
        stream = iter([ModelResponseStream(**dict(c)) for c in chunks])
        events = AnthropicEvents()
        for event in wrapper(completion_stream=stream, model="toolgate-check"):
            kind = event.get("type") if isinstance(event, dict) else None
            data = json.dumps(event, default=str)
            events.admit(f"event: {kind}\ndata: {data}\n\n".encode())
        return events.carrier()
    except Exception:
        return _foreign()


__all__ = [
    "Bridge",
    "messages_bridge",
    "bridge_carrier",
    "bridge_path",
    "stream_carrier",
    "whole_carrier",
]
