"""Which litellm routes the gate gates, as data: one table, one lookup.

A route is litellm's provider prefix (``openai/``, ``bedrock/``, ...) and an API (chat
completions or the Responses API). For each, the table says one of two things:

* **gated**: the wire the upstream speaks on that route is one the core reads (chat SSE or
  Responses SSE), litellm takes the caller's ``client=`` on it, and the table names the kind
  of client litellm expects there (a litellm ``HTTPHandler``, or an OpenAI / Azure OpenAI
  SDK client: :mod:`.clients` builds each kind around a tapped transport);
* **refused**: the gate cannot read that route, and says why. :func:`route_for` raises
  :class:`RouteNotGated` before anything is sent.

Every entry was checked against litellm itself, on both supported versions, by the route
matrix test (``tests/test_routes.py``): a gated route releases a good stream byte for byte
and quarantines a broken one; a refused route sends nothing. A provider missing from the
table is refused. The provider of a call is litellm's own answer
(``litellm.get_llm_provider``), from the model string, ``custom_llm_provider`` and
``api_base`` (``azure_ai/gpt-4o`` on an Azure OpenAI endpoint is the ``azure`` route).

On the Responses API litellm serves a provider one of three ways: natively (the upstream
speaks Responses SSE), bridged (litellm makes a chat call and converts it: the wire is that
provider's chat wire, through its chat client) or natively but with a made-up stream (litellm
asks for a whole response and replays it as events: there is no stream to gate, so those are
refused). ``toolgate routes`` prints this table.
"""

from __future__ import annotations

import contextlib
import enum
import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.decision.state import Wire
from ..core.errors import RouteNotGated
from ..core.wires import WIRES


class Api(enum.Enum):
    CHAT = "chat"
    RESPONSES = "responses"


class ClientKind(enum.Enum):
    """The kind of ``client=`` litellm takes on a route."""

    HTTP_HANDLER = "litellm HTTPHandler"
    OPENAI_SDK = "openai.OpenAI"
    AZURE_SDK = "openai.AzureOpenAI"


@dataclass(frozen=True)
class Gated:
    wire: Wire
    client: ClientKind
    bridged: bool = False  # Responses made by litellm from a chat call
    callback: str | None = None
    """Why the callback (``ToolGateGuardrail``) refuses this route, where only ``ToolGate``
    gates it; None: both gate it."""
    models: tuple[str, str] | None = None
    """Where a route gates some of its models on ``wire`` and others on another wire (picked
    by the path litellm calls) or not at all: (which models are on ``wire``, what becomes of
    the others), for ``toolgate routes``; None: every model, on ``wire``."""

    def describe(self) -> str:
        how = "bridged to chat, " if self.bridged else ""
        only = "" if self.callback is None else "; ToolGate only, the callback refuses it"
        which, others = ("", "")
        if self.models is not None:
            which, others = f"{self.models[0]}: ", f"; {self.models[1]}"
        return (
            f"gated ({which}{how}{self.wire.value} {WIRES[self.wire].framing}, "
            f"{self.client.value}{only}{others})"
        )


@dataclass(frozen=True)
class Refused:
    reason: str

    def describe(self) -> str:
        return f"refused: {self.reason}"


Decision = Gated | Refused


@dataclass(frozen=True)
class Route:
    provider: str
    chat: Decision
    responses: Decision

    def decision(self, api: Api) -> Decision:
        return self.chat if api is Api.CHAT else self.responses


# ---- the table -------------------------------------------------------------------------------
_HTTP_CHAT = Gated(Wire.CHAT, ClientKind.HTTP_HANDLER)
_OPENAI_CHAT = Gated(Wire.CHAT, ClientKind.OPENAI_SDK)
_AZURE_CHAT = Gated(Wire.CHAT, ClientKind.AZURE_SDK)
_NATIVE_RESPONSES = Gated(Wire.RESPONSES, ClientKind.HTTP_HANDLER)
_BRIDGED_HTTP = Gated(Wire.CHAT, ClientKind.HTTP_HANDLER, bridged=True)
_BRIDGED_OPENAI = Gated(Wire.CHAT, ClientKind.OPENAI_SDK, bridged=True)
_FAKE_STREAM = Refused(
    "litellm asks this provider for a whole Responses result and replays it as a stream; "
    "there is no wire stream to gate"
)


def _wire(name: str) -> Refused:
    return Refused(f"the upstream speaks {name}, a wire the gate does not read")


_NEW_IDS_CALLBACK = (
    "litellm's Responses bridge hands the calls of this wire out under ids it draws when it "
    "parses the body, after the callback decided: the callback cannot know which ids it "
    "released; use ToolGate"
)


def _bridged_new_ids(wire: Wire) -> Gated:
    """A route litellm bridges to chat for the Responses API (no Responses config for it, on
    both supported versions) over a wire of whole calls whose ids litellm replaces: the
    items are matched to the wire by position, name and JSON value (``core/wires/whole.py``
    ``bridged_by_position_fault``) and released under the wire's identity, through
    ``ToolGate`` only."""
    return Gated(wire, ClientKind.HTTP_HANDLER, bridged=True, callback=_NEW_IDS_CALLBACK)


# ToolGate cross-checks litellm's chunks against the wire by position, name and arguments
# (core/wires/gemini.py); the callback runs litellm's own Gemini parser over the withheld body
# and cross-checks that the same way (parsers), since the wire's spec says litellm may
# re-shape its calls (WireSpec.reparsed: litellm makes its own ids, for one).
_GEMINI_CHAT = Gated(Wire.GEMINI, ClientKind.HTTP_HANDLER)
_BEDROCK_CHAT = Gated(
    Wire.BEDROCK,
    ClientKind.HTTP_HANDLER,
)
"""Bedrock's Converse stream (``/model/<id>/converse-stream``, AWS event-stream frames;
``core/wires/bedrock.py``), for the models litellm sends to Converse: the others are refused
by :func:`_bedrock_model_fault` before sending."""
_ANTHROPIC_RESPONSES = Gated(Wire.ANTHROPIC, ClientKind.HTTP_HANDLER, bridged=True)
"""litellm bridges the Responses API to chat over the Anthropic Messages stream and keeps
each ``tool_use`` block's id as its function-call item's ``call_id``: the Anthropic wire's
carrier rule matches those items (``core/wires/base.py`` ``bridged_responses_fault``), as for
Claude on vertex_ai/. ``ToolGate`` reads litellm's events; the callback runs litellm's parser
and bridge over the body it withholds (``responsesbridge``) and matches what they make."""
_BEDROCK_RESPONSES = Gated(Wire.BEDROCK, ClientKind.HTTP_HANDLER, bridged=True)
"""litellm bridges the Responses API to chat over Converse and keeps each ``toolUseId`` as
its function-call item's ``call_id``: the Bedrock wire's carrier rule matches those items
(``core/wires/base.py`` ``bridged_responses_fault``), for ``ToolGate`` and the callback as
on anthropic/. The same models as chat (:func:`_bedrock_model_fault`)."""
_GEMINI_RESPONSES = _bridged_new_ids(Wire.GEMINI)
# vertex_ai/: litellm sends each model to one of several of Vertex's APIs (its own answer,
# get_vertex_ai_model_route, on both supported versions). Gemini models go to generateContent
# (``.../publishers/google/models/<model>:streamGenerateContent?alt=sse``: Gemini's wire,
# read by core/wires/gemini.py) and Claude to Anthropic's Messages wire through Vertex's
# rawPredict (``.../publishers/anthropic/models/<model>:streamRawPredict``: core/wires/
# anthropic.py); every other model is refused by _vertex_model_fault before sending. The
# Google OAuth token litellm fetches first (google-auth, over its own ``requests`` session)
# is not a request of the gate's client: it is neither tapped nor counted.
_VERTEX_CHAT = Gated(
    Wire.GEMINI,
    ClientKind.HTTP_HANDLER,
    models=(
        "Gemini models",
        "Claude models: anthropic SSE (rawPredict); any other model refused",
    ),
)
"""The table's entry for vertex_ai/ chat: the wire named is that of its Gemini models; the
gate reads the wire by the path litellm calls (core/decision/state.py ``wire_of``), which for
a Claude
model is Anthropic's (``PUBLISHER_PATHS``); :func:`_vertex_model_fault` lets only these two
through. A deployment whose ``base_model`` sends another model name to Gemini is refused by
its name (the check reads the model, not the deployment's ``base_model``)."""
_VERTEX_RESPONSES = Gated(
    Wire.ANTHROPIC,
    ClientKind.HTTP_HANDLER,
    bridged=True,
    models=(
        "Claude models",
        "Gemini models: bridged to chat, gemini SSE, ToolGate only, the callback refuses "
        "them; any other model refused",
    ),
)
"""The table's entry for vertex_ai/ Responses: litellm bridges it to chat, and for a Claude
model over Anthropic's Messages wire (rawPredict), whose block ids it keeps as the items'
``call_id``: the Anthropic wire's carrier rule matches them. A Gemini model is refused before
sending (:func:`_vertex_responses_fault`)."""
# litellm (1.110.2) numbers each line's calls from 0, so calls that arrive in two lines reach
# the caller merged under one tool index: ToolGate cross-checks litellm's chunks; the callback
# runs litellm's own parser over the withheld body and cross-checks that (parsers), since the
# wire's spec says litellm may re-shape its calls (WireSpec.reparsed).
_OLLAMA_CHAT = Gated(Wire.OLLAMA, ClientKind.HTTP_HANDLER)
_OLLAMA_RESPONSES = _bridged_new_ids(Wire.OLLAMA)

ROUTES: Mapping[str, Route] = {
    route.provider: route
    for route in (
        # The OpenAI SDK routes: litellm calls through an openai.OpenAI / AzureOpenAI client.
        Route("openai", _OPENAI_CHAT, _NATIVE_RESPONSES),
        Route("azure", _AZURE_CHAT, _NATIVE_RESPONSES),
        Route(
            "perplexity",
            _OPENAI_CHAT,
            Refused("litellm's Perplexity Responses route fails on a valid Responses stream"),
        ),
        Route("cerebras", _OPENAI_CHAT, _BRIDGED_OPENAI),
        Route("litellm_proxy", _OPENAI_CHAT, _NATIVE_RESPONSES),
        # Any OpenAI-compatible server: litellm sends its chat through openai/'s own handler
        # and SDK client (1.108.7, 1.110.2); its Responses calls have not been checked.
        Route(
            "custom_openai",
            _OPENAI_CHAT,
            Refused("litellm's Responses API on custom_openai/ has not been checked"),
        ),
        # Chat SSE through litellm's own HTTP handler.
        Route("azure_ai", _HTTP_CHAT, _FAKE_STREAM),
        Route("cometapi", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("openrouter", _HTTP_CHAT, _FAKE_STREAM),
        Route("groq", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("deepseek", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("xai", _HTTP_CHAT, _FAKE_STREAM),
        Route("mistral", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("together_ai", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("fireworks_ai", _HTTP_CHAT, _FAKE_STREAM),
        Route("hosted_vllm", _HTTP_CHAT, _FAKE_STREAM),
        Route("databricks", _HTTP_CHAT, _FAKE_STREAM),
        # Chat (and litellm's Anthropic messages entry point) on the Anthropic Messages wire;
        # litellm bridges its Responses API to chat there, cross-checked.
        Route("anthropic", Gated(Wire.ANTHROPIC, ClientKind.HTTP_HANDLER), _ANTHROPIC_RESPONSES),
        # Ollama's NDJSON /api/chat wire (core/wires/ollama.py); litellm bridges its
        # Responses API to chat there, matched by position (ToolGate only).
        Route("ollama_chat", _OLLAMA_CHAT, _OLLAMA_RESPONSES),
        # Gemini's generateContent SSE (core/wires/gemini.py); litellm bridges its
        # Responses API to chat there, matched by position (ToolGate only).
        Route("gemini", _GEMINI_CHAT, _GEMINI_RESPONSES),
        # Bedrock's Converse stream (core/wires/bedrock.py); its other routes (invoke/,
        # chat_completions/, ...) are refused per model (_bedrock_model_fault). litellm
        # bridges its Responses API to chat over Converse, cross-checked.
        Route("bedrock", _BEDROCK_CHAT, _BEDROCK_RESPONSES),
        # Vertex AI: Gemini models on Gemini's wire, Claude models on Anthropic's; every
        # other model is refused per model (_vertex_model_fault). The Responses API, bridged
        # to chat, likewise (Gemini models through ToolGate only: _vertex_callback_fault).
        Route("vertex_ai", _VERTEX_CHAT, _VERTEX_RESPONSES),
        # Wires the gate does not read (yet).
        Route("cohere", *[_wire("Cohere's chat stream")] * 2),
        Route("watsonx", *[_wire("watsonx.ai's chat stream")] * 2),
    )
}
_UNKNOWN = Refused("not in the gate's route table")


def provider_of(request: Mapping[str, Any], *, with_base: bool = True) -> tuple[str, str] | None:
    """(model, provider) as litellm resolves a call's arguments; None when it cannot tell."""
    import litellm

    model = request.get("model")
    if not isinstance(model, str) or not model:
        return None
    try:
        # litellm prints a provider list to stdout when it cannot tell: keep that quiet.
        with contextlib.redirect_stdout(io.StringIO()):
            bare, provider, _, _ = litellm.get_llm_provider(
                model=model,
                custom_llm_provider=request.get("custom_llm_provider"),
                api_base=request.get("api_base") if with_base else None,
                api_key=request.get("api_key"),
            )
    except Exception:
        return None
    return (str(bare), str(provider)) if provider else None


def route_for(request: Mapping[str, Any], api: Api, *, callback: bool = False) -> Gated:
    """How the gate gates this call, or :class:`RouteNotGated` (nothing has been sent).

    On the Responses API the route is also checked against litellm itself: litellm resolves
    a Responses call's provider without the ``api_base`` in some versions, and decides per
    model whether it fakes the stream (a model missing from its model map, for one), so
    every provider it may pick must be gated and litellm must serve it the way the table
    says. ``callback``: asked by the callback, which refuses what the table gates only
    through ``ToolGate``.
    """
    found = provider_of(request)
    if found is None:
        model = request.get("model")
        name = model if isinstance(model, str) and model else "(no model)"
        raise RouteNotGated(name, api.value, "litellm cannot tell this model's provider")
    candidates = [found]
    if api is Api.RESPONSES:
        other = provider_of(request, with_base=False)
        if other is not None and other != found:
            candidates.append(other)
    decisions = [(model, provider, decision_for(provider, api)) for model, provider in candidates]
    for model, provider, decision in decisions:
        if isinstance(decision, Refused):
            raise RouteNotGated(provider, api.value, decision.reason)
        if api is Api.RESPONSES:
            _check_responses(model, provider, decision, bool(request.get("stream")))
    gated = decisions[0][2]
    assert isinstance(gated, Gated)
    model_fault = _MODEL_FAULTS.get(decisions[0][1])
    reason = None if model_fault is None else model_fault(decisions[0][0])
    if reason is not None:
        raise RouteNotGated(decisions[0][1], api.value, reason)
    if api is Api.RESPONSES:
        responses_fault = _RESPONSES_MODEL_FAULTS.get(decisions[0][1])
        reason = None if responses_fault is None else responses_fault(decisions[0][0])
        if reason is not None:
            raise RouteNotGated(decisions[0][1], api.value, reason)
    if callback and api is Api.RESPONSES:
        callback_fault = _CALLBACK_MODEL_FAULTS.get(decisions[0][1])
        reason = None if callback_fault is None else callback_fault(decisions[0][0])
        if reason is not None:
            raise RouteNotGated(decisions[0][1], api.value, reason)
    if callback and gated.callback is not None:
        raise RouteNotGated(decisions[0][1], api.value, gated.callback)
    return gated


_NOT_CONVERSE = (
    "litellm sends this Bedrock model to another API than Converse (invoke, chat "
    "completions, ...), a wire the gate does not read"
)


def _litellm_symbol(name: str) -> Any:
    """litellm's ``name`` from the seam, imported (with litellm) only when a route needs it."""
    from .seam.symbols import lazy

    return lazy(name)


def _bedrock_model_fault(model: str) -> str | None:
    """Why a ``bedrock/`` model cannot be gated, or None when litellm sends it to Converse and
    streams it for real. litellm's own answer (``BedrockModelInfo.get_bedrock_route``; the
    caller's params can only turn a chat-completions route into Converse, never the other
    way, so a model it routes to Converse without them goes to Converse with any), and
    whether it would fake a stream from a whole ``/converse`` result."""
    try:
        import litellm

        route = _litellm_symbol("BedrockModelInfo").get_bedrock_route(model, None)
        fake = litellm.AmazonConverseConfig().should_fake_stream(
            model=model, stream=True, custom_llm_provider="bedrock"
        )
    except Exception:
        return "cannot tell which Bedrock API litellm sends this model to"
    if route != "converse":
        return _NOT_CONVERSE
    if fake:
        return "litellm asks Bedrock for a whole Converse result for this model and replays it"
    return None


_VERTEX_OTHER = (
    "litellm sends this Vertex AI model to another API than Gemini's generateContent or "
    "Anthropic's Messages (rawPredict), a wire the gate does not read"
)


_VERTEX_UNKNOWN = "cannot tell which Vertex AI API litellm sends this model to"


def _vertex_route(model: str) -> Any:
    """The Vertex AI API litellm sends ``model`` to (its ``get_vertex_ai_model_route``), or
    None when litellm cannot tell."""
    try:
        return _litellm_symbol("get_vertex_ai_model_route")(model=model, litellm_params=None)
    except Exception:
        return None


def _vertex_model_fault(model: str) -> str | None:
    """Why a ``vertex_ai/`` model cannot be gated, or None when litellm sends it to Gemini's
    generateContent (a Gemini model) or to Anthropic's Messages through rawPredict (a Claude
    model). litellm's own answer (``get_vertex_ai_model_route``, and for a partner model the
    handler it picks by name, as ``VertexAIPartnerModels.completion`` does): Llama, Mistral,
    Jamba, the OpenAI-compatible partner models, Model Garden, Gemma and the legacy models
    are other wires. A numbered endpoint (a tuned model) is refused: the gate has not been
    checked against the URL litellm builds for it."""
    route = _vertex_route(model)
    try:
        openai_like = bool(
            _litellm_symbol("VertexAIPartnerModels").should_use_openai_handler(model)
        )
    except Exception:
        return _VERTEX_UNKNOWN
    if route is None:
        return _VERTEX_UNKNOWN
    routes = _litellm_symbol("VertexAIModelRoute")
    if route == routes.GEMINI and "gemini" in model and not model.isdigit():
        return None
    other_partner = ("mistral", "codestral", "jamba")
    if (
        route == routes.PARTNER_MODELS
        and "claude" in model
        and not openai_like
        and not any(name in model for name in other_partner)
    ):
        return None
    return _VERTEX_OTHER


_MODEL_FAULTS = {"bedrock": _bedrock_model_fault, "vertex_ai": _vertex_model_fault}
"""Providers whose one entry covers several of litellm's APIs, chosen per model: why a model
cannot be gated, or None."""


def _vertex_responses_fault(model: str) -> str | None:
    """Why a ``vertex_ai/`` model that :func:`_vertex_model_fault` lets through cannot be gated
    on the Responses API: none (Claude on Anthropic's wire, Gemini on Gemini's, both bridged
    by litellm), unless litellm cannot tell where it sends it."""
    return _VERTEX_UNKNOWN if _vertex_route(model) is None else None


def _vertex_callback_fault(model: str) -> str | None:
    """Why the callback refuses a ``vertex_ai/`` model on the Responses API: a Gemini model
    (litellm's bridge replaces its calls' ids after the callback decided)."""
    route = _vertex_route(model)
    if route is None:
        return _VERTEX_UNKNOWN
    partner = route == _litellm_symbol("VertexAIModelRoute").PARTNER_MODELS
    return None if partner else _NEW_IDS_CALLBACK


_RESPONSES_MODEL_FAULTS = {"vertex_ai": _vertex_responses_fault}
"""Providers whose Responses entry gates fewer models than their chat entry: why a model
(one :data:`_MODEL_FAULTS` lets through) cannot be gated on the Responses API, or None."""
_CALLBACK_MODEL_FAULTS = {"vertex_ai": _vertex_callback_fault}
"""Providers whose Responses entry the callback gates for some models only: why it refuses
a model, or None."""


def decision_for(provider: str, api: Api) -> Decision:
    """What the table says of ``provider`` on ``api``: refused when it is not in it."""
    route = ROUTES.get(provider)
    return _UNKNOWN if route is None else route.decision(api)


def _check_responses(model: str, provider: str, gated: Gated, stream: bool) -> None:
    """Refuse when litellm would serve this Responses call another way than the table says."""
    try:
        from .seam.symbols import LlmProviders, ProviderConfigManager

        config = ProviderConfigManager.get_provider_responses_api_config(
            provider=LlmProviders(provider), model=model
        )
        fake = config is not None and bool(
            config.should_fake_stream(model=model, stream=stream, custom_llm_provider=provider)
        )
    except Exception:
        raise RouteNotGated(
            provider, Api.RESPONSES.value, "cannot tell how litellm serves this model"
        ) from None
    if (config is None) != gated.bridged:
        how = "bridges it to chat" if config is None else "serves it natively"
        raise RouteNotGated(
            provider, Api.RESPONSES.value, f"litellm {how} for this model, unlike the table"
        )
    if fake:
        raise RouteNotGated(provider, Api.RESPONSES.value, _FAKE_STREAM.reason)


def reshaped_bridge(request: Mapping[str, Any]) -> bool:
    """Whether litellm bridges this Responses call to chat over a wire whose calls it may
    re-shape (``WireSpec.reparsed``: Anthropic's, Bedrock's), where the callback runs
    litellm's parser and bridge over the body it holds (``responsesbridge``)."""
    found = provider_of(request)
    decision = None if found is None else decision_for(found[1], Api.RESPONSES)
    return isinstance(decision, Gated) and decision.bridged and WIRES[decision.wire].reparsed


def table() -> list[tuple[str, str, str]]:
    """(route, chat, Responses) as text, one row per provider: what ``toolgate routes`` prints."""
    return [
        (name, route.chat.describe(), route.responses.describe())
        for name, route in sorted(ROUTES.items())
    ]


__all__ = ["ROUTES", "Api", "ClientKind", "Gated", "Refused", "Route", "route_for", "table"]
