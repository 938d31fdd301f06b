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

On the Responses API litellm serves a call one of three ways, which it decides per model
(and, for Azure AI, per ``api_base``): natively (the upstream speaks Responses SSE), bridged
(litellm makes a chat call and converts it: the wire is that provider's chat wire, through
its chat client) or replayed (litellm asks for a whole response and makes the events up from
it: the wire is that whole body, which the gate decides on, every event of a call withheld
until then; under the callback's SDK calls, before litellm makes any event of it).
:func:`route_for` asks litellm which, per call, and says so in the :class:`Gated` it
returns. ``toolgate routes`` prints this table.
"""

from __future__ import annotations

import contextlib
import dataclasses
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
    bridged: bool | None = False
    """Responses made by litellm from a chat call (True), from the upstream's own Responses
    wire (False), or either, as litellm serves the model (None: litellm asked per call)."""
    callback: str | None = None
    """Why the callback (``ToolGateGuardrail``) refuses this route, where only ``ToolGate``
    gates it; None: both gate it."""
    callback_streams: str | None = None
    """Why the callback refuses a streamed call on this route, where it gates whole calls
    only (``ToolGate`` gates both); None: the callback gates streams as it gates whole calls."""
    replayed: bool = False
    """For this call (never in the table): litellm asks the upstream for a whole Responses
    result and replays it to the caller as events. The wire is that whole body, decided
    before litellm replays it (:func:`route_for` sets it)."""
    models: tuple[str, str] | None = None
    """Where a route gates some of its models on ``wire`` and others on another wire (picked
    by the path litellm calls) or not at all: (which models are on ``wire``, what becomes of
    the others), for ``toolgate routes``; None: every model, on ``wire``."""
    streams: str | None = None
    """Why a streamed call is refused on this route, where only whole calls are gated; None:
    streamed and whole calls are gated."""
    drops_client: bool = False
    """litellm's handler for this route drops the call's ``client=``: the request goes over
    litellm's own cached client, which the gate claims for the call by a one-time token in
    the call's ``extra_headers`` (``sync/tokenclaim.py``; the sync callback claims it by its
    own marker, ``sync/claiming.py``)."""

    def describe(self) -> str:
        wire = f"{self.wire.value} {WIRES[self.wire].framing}"
        if self.bridged is None:
            chat = f"{Wire.CHAT.value} {WIRES[Wire.CHAT].framing}"
            how = f"as litellm serves the model: natively, {wire}, or bridged to chat, {chat}"
        else:
            how = f"bridged to chat, {wire}" if self.bridged else wire
        only = "" if self.callback is None else "; ToolGate only, the callback refuses it"
        if self.callback_streams is not None:
            only += "; the callback gates whole calls only, streams through ToolGate only"
        if self.drops_client:
            only += "; litellm drops client=: its own client claimed per call"
        if self.streams is not None:
            only += "; whole calls only, streams refused"
        which, others = ("", "")
        if self.models is not None:
            which, others = f"{self.models[0]}: ", f"; {self.models[1]}"
        replay = ""
        if self.wire is Wire.RESPONSES and self.bridged is not True:
            replay = "; a whole result litellm replays as a stream is judged whole first"
        return f"gated ({which}{how}, {self.client.value}{only}{replay}{others})"


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
_EITHER_RESPONSES = Gated(Wire.RESPONSES, ClientKind.HTTP_HANDLER, bridged=None)
"""litellm serves some models of the route natively and bridges the others to chat (its own
answer per model: Databricks' GPT models, Azure AI's models with a Responses endpoint): the
wire is the path litellm calls, Responses or chat, each gated as on its own route."""


_NEW_IDS_STREAMS = (
    "litellm's Responses bridge hands a streamed call of this wire out under an id it draws "
    "when it parses the released body (a fresh uuid4, whatever id the wire sent), after the "
    "callback decided: the callback cannot know which ids it released; use ToolGate, or a "
    "whole (stream=False) call"
)


def _bridge_unchecked(wire: str, ids: str = "") -> Refused:
    """A route litellm bridges to chat for the Responses API (no Responses config for it, on
    both supported versions) over a wire whose carrier check reads litellm's chat chunks
    only: the gate would quarantine every call of a good stream (``carrier_mismatch``), so
    the route is refused before sending. ``ids``: what litellm's bridge does to the wire's
    call ids, which the Responses carrier hands on unchanged."""
    return Refused(
        "litellm bridges the Responses API to chat here, and the gate does not cross-check "
        f"the Responses events it makes against {wire}: that wire's carrier check reads "
        f"litellm's chat chunks only, so every call would be quarantined{ids}"
    )


def _bridged_new_ids(wire: Wire, callback_streams: str | None = None) -> Gated:
    """A route litellm bridges to chat for the Responses API (no Responses config for it, on
    both supported versions) over a wire of whole calls whose ids litellm replaces: the
    items are matched to the wire by position, name and JSON value (``core/wires/whole.py``
    ``bridged_by_position_fault``). ``ToolGate`` releases them under the wire's identity.
    The callback, which lets litellm parse the body it releases, gates the route where the
    wire has the identities of calls sent without an id to write into that body
    (``WireSpec.identities``: litellm keeps Gemini's ``functionCall.id``, and a whole Ollama
    body's call ids), and the items must then carry them; ``callback_streams``: why it
    refuses a streamed call, where a stream has none to write."""
    return Gated(wire, ClientKind.HTTP_HANDLER, bridged=True, callback_streams=callback_streams)


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
a Claude model is Anthropic's (``PUBLISHER_PATHS``); :func:`_vertex_model_fault` lets only
these two through. A deployment whose ``base_model`` names a Gemini model goes to Gemini
whatever its own name (litellm's rule), and is judged so."""
_VERTEX_RESPONSES = Gated(
    Wire.ANTHROPIC,
    ClientKind.HTTP_HANDLER,
    bridged=True,
    models=(
        "Claude models",
        "Gemini models: bridged to chat, gemini SSE; any other model refused",
    ),
)
"""The table's entry for vertex_ai/ Responses: litellm bridges it to chat, and for a Claude
model over Anthropic's Messages wire (rawPredict), whose block ids it keeps as the items'
``call_id``: the Anthropic wire's carrier rule matches them; for a Gemini model over Gemini's
wire, as on gemini/ (:data:`_GEMINI_RESPONSES`). Any other model is refused before sending
(:func:`_vertex_model_fault`, :func:`_vertex_responses_fault`)."""
# litellm (1.110.2) numbers each line's calls from 0, so calls that arrive in two lines reach
# the caller merged under one tool index: ToolGate cross-checks litellm's chunks; the callback
# runs litellm's own parser over the withheld body and cross-checks that (parsers), since the
# wire's spec says litellm may re-shape its calls (WireSpec.reparsed).
_OLLAMA_CHAT = Gated(Wire.OLLAMA, ClientKind.HTTP_HANDLER)
# litellm's Ollama stream parser gives every complete call a fresh uuid4 whatever the line
# says (1.108.7 and 1.110.2): nothing written into a stream reaches the caller, so the
# callback refuses streams there (ToolGate shows the wire's identity); it keeps a whole
# body's call ids, which the callback writes.
_OLLAMA_RESPONSES = _bridged_new_ids(Wire.OLLAMA, _NEW_IDS_STREAMS)

# Cohere's v2 chat (core/wires/cohere.py), for the models litellm sends to /v2/chat (the
# others, cohere/v1/..., are refused by _cohere_model_fault). litellm's reader of a streamed
# /v2/chat body (CohereV2ModelResponseIterator, 1.108.7 and 1.110.2) takes each line of the
# SSE body as one bare JSON text: Cohere's first "event:" or "data:" line makes it raise, so
# no streamed call can reach its caller, and streams are refused before sending. litellm
# hands a whole result's calls over under the wire's ids, names and argument text. Its
# Cohere handler (main._complete_cohere_chat, 1.108.7 and 1.110.2) passes no client= on: the
# request goes over litellm's own cached client, claimed for the call (drops_client).
_COHERE_STREAMS = (
    "litellm's reader of Cohere's v2 chat stream reads each SSE line as bare JSON and fails "
    "on the first event of every stream; only whole (stream=False) calls are gated"
)
_COHERE_CHAT = Gated(
    Wire.COHERE, ClientKind.HTTP_HANDLER, streams=_COHERE_STREAMS, drops_client=True
)
_COHERE_RESPONSES = dataclasses.replace(_COHERE_CHAT, bridged=True)
"""litellm bridges the Responses API to chat over Cohere's v2 chat and keeps each call's id
as its function-call item's ``call_id``: the Cohere wire's carrier rule matches those items
(``core/wires/base.py`` ``bridged_responses_fault``). Whole calls only, as on chat."""

_WATSONX_CHAT = Gated(Wire.WATSONX, ClientKind.HTTP_HANDLER)
_WATSONX_RESPONSES = Gated(Wire.WATSONX, ClientKind.HTTP_HANDLER, bridged=True)

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
        # and SDK client (1.108.7, 1.110.2); it has no Responses config for custom_openai/
        # and bridges the Responses API to that chat call, with the same SDK client.
        Route("custom_openai", _OPENAI_CHAT, _BRIDGED_OPENAI),
        # Chat SSE through litellm's own HTTP handler.
        Route("azure_ai", _HTTP_CHAT, _EITHER_RESPONSES),
        Route("cometapi", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("openrouter", _HTTP_CHAT, _NATIVE_RESPONSES),
        Route("groq", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("deepseek", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("xai", _HTTP_CHAT, _NATIVE_RESPONSES),
        Route("mistral", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("together_ai", _HTTP_CHAT, _BRIDGED_HTTP),
        Route("fireworks_ai", _HTTP_CHAT, _NATIVE_RESPONSES),
        Route("hosted_vllm", _HTTP_CHAT, _NATIVE_RESPONSES),
        Route("databricks", _HTTP_CHAT, _EITHER_RESPONSES),
        # Chat (and litellm's Anthropic messages entry point) on the Anthropic Messages wire;
        # litellm bridges its Responses API to chat there, cross-checked.
        Route("anthropic", Gated(Wire.ANTHROPIC, ClientKind.HTTP_HANDLER), _ANTHROPIC_RESPONSES),
        # Ollama's NDJSON /api/chat wire (core/wires/ollama.py); litellm bridges its
        # Responses API to chat there, matched by position (streams through ToolGate only:
        # litellm draws each streamed call's id after the callback decided).
        Route("ollama_chat", _OLLAMA_CHAT, _OLLAMA_RESPONSES),
        # Gemini's generateContent SSE (core/wires/gemini.py); litellm bridges its
        # Responses API to chat there, matched by position, and under the callback by the
        # gate's identities written into the released body (WireSpec.identities).
        Route("gemini", _GEMINI_CHAT, _GEMINI_RESPONSES),
        # Bedrock's Converse stream (core/wires/bedrock.py); its other routes (invoke/,
        # chat_completions/, ...) are refused per model (_bedrock_model_fault). litellm
        # bridges its Responses API to chat over Converse, cross-checked.
        Route("bedrock", _BEDROCK_CHAT, _BEDROCK_RESPONSES),
        # Vertex AI: Gemini models on Gemini's wire, Claude models on Anthropic's; every
        # other model is refused per model (_vertex_model_fault). The Responses API, bridged
        # to chat, likewise.
        Route("vertex_ai", _VERTEX_CHAT, _VERTEX_RESPONSES),
        # Cohere's v2 chat (core/wires/cohere.py): whole calls only (_COHERE_STREAMS);
        # cohere_chat/ is the same handler. litellm bridges the Responses API to chat there,
        # which is not cross-checked (_bridge_unchecked).
        Route("cohere", _COHERE_CHAT, _COHERE_RESPONSES),
        Route("cohere_chat", _COHERE_CHAT, _COHERE_RESPONSES),
        # watsonx.ai's native chat SSE (core/wires/watsonx.py), through litellm's OpenAI-like
        # handler, which takes client= for streamed and whole calls, sync and async. litellm
        # bridges the Responses API to chat there (no Responses config for watsonx/), the
        # items under the wire's call ids, matched as on the chat wire.
        Route("watsonx", _WATSONX_CHAT, _WATSONX_RESPONSES),
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
    served: list[tuple[bool, bool]] = []  # (replayed, bridged) per candidate
    for model, provider, decision in decisions:
        if isinstance(decision, Refused):
            raise RouteNotGated(provider, api.value, decision.reason)
        if api is Api.RESPONSES:
            stream = bool(request.get("stream"))
            served.append(
                _check_responses(model, provider, decision, stream, request.get("api_base"))
            )
    if len(set(served)) > 1:
        # litellm resolves the provider with or without the api_base (by version): both
        # must be served alike, or the gate cannot tell which wire it will read.
        raise RouteNotGated(
            decisions[0][1], api.value, "litellm may serve this call two ways (by version)"
        )
    gated = decisions[0][2]
    assert isinstance(gated, Gated)
    base_model = _base_model(request)
    model_fault = _MODEL_FAULTS.get(decisions[0][1])
    reason = None if model_fault is None else model_fault(decisions[0][0], base_model)
    if reason is not None:
        raise RouteNotGated(decisions[0][1], api.value, reason)
    if api is Api.RESPONSES:
        responses_fault = _RESPONSES_MODEL_FAULTS.get(decisions[0][1])
        reason = None if responses_fault is None else responses_fault(decisions[0][0], base_model)
        if reason is not None:
            raise RouteNotGated(decisions[0][1], api.value, reason)
    if callback and gated.callback is not None:
        raise RouteNotGated(decisions[0][1], api.value, gated.callback)
    if callback and gated.callback_streams is not None and request.get("stream"):
        raise RouteNotGated(decisions[0][1], api.value, gated.callback_streams)
    if gated.streams is not None and request.get("stream"):
        raise RouteNotGated(decisions[0][1], api.value, gated.streams)
    if served:
        # What litellm does with this very call: replays a whole result, bridges to chat.
        return dataclasses.replace(gated, replayed=served[0][0], bridged=served[0][1])
    return gated


def replays(request: Mapping[str, Any], api: Api, route: Gated | None) -> bool:
    """Whether litellm asks the upstream for a whole Responses result and replays it as this
    streamed call's events. ``route``: the call's :func:`route_for`, which the caller asked
    already (None: the call has no model, so no route, and nothing is replayed)."""
    return (
        api is Api.RESPONSES
        and bool(request.get("stream"))
        and route is not None
        and route.replayed
    )


def choices_kept_apart(request: Mapping[str, Any], *, callback: bool = False) -> bool:
    """Whether a chat call of several choices (``n > 1``) can be gated choice by choice on
    its route: only on the chat-completions SSE wire itself, read by litellm's OpenAI
    SDK client or its own HTTP handler, which keep every choice's index on the chunks they
    hand over (both supported versions). Anthropic, Gemini, Bedrock and Ollama stream one
    answer per response: there ``n > 1`` is refused before anything is sent, as it is on a
    route the gate does not gate at all."""
    try:
        gated = route_for(request, Api.CHAT, callback=callback)
    except RouteNotGated:
        return False
    return gated.wire is Wire.CHAT and not gated.bridged


_NOT_CONVERSE = (
    "litellm sends this Bedrock model to another API than Converse (invoke, chat "
    "completions, ...), a wire the gate does not read"
)


def _litellm_symbol(name: str) -> Any:
    """litellm's ``name`` from the seam, imported (with litellm) only when a route needs it."""
    from .seam.symbols import lazy

    return lazy(name)


def _base_model(request: Mapping[str, Any]) -> str | None:
    """The deployment's ``base_model``, where litellm reads it: the call's ``base_model``, or
    its ``model_info``'s (litellm's completion, 1.108.7 and 1.110.2)."""
    base = request.get("base_model")
    info = request.get("model_info")
    if not base and isinstance(info, Mapping):
        base = info.get("base_model")
    return base if isinstance(base, str) and base else None


def _bedrock_model_fault(model: str, base_model: str | None = None) -> str | None:
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


def _vertex_route(model: str, base_model: str | None) -> Any:
    """The Vertex AI API litellm sends ``model`` to (its ``get_vertex_ai_model_route``, given
    the deployment's ``base_model`` as litellm's completion gives it), or None when litellm
    cannot tell."""
    params = None if base_model is None else {"base_model": base_model}
    try:
        return _litellm_symbol("get_vertex_ai_model_route")(model=model, litellm_params=params)
    except Exception:
        return None


def _vertex_model_fault(model: str, base_model: str | None = None) -> str | None:
    """Why a ``vertex_ai/`` model cannot be gated, or None when litellm sends it to Gemini's
    generateContent (a Gemini model) or to Anthropic's Messages through rawPredict (a Claude
    model). litellm's own answer (``get_vertex_ai_model_route``, and for a partner model the
    handler it picks by name, as ``VertexAIPartnerModels.completion`` does): Llama, Mistral,
    Jamba, the OpenAI-compatible partner models, Model Garden, Gemma and the legacy models
    are other wires. A numbered endpoint (a tuned model) is refused: the gate has not been
    checked against the URL litellm builds for it. A deployment whose ``base_model`` names a
    Gemini model is sent to generateContent whatever its own name (litellm's first rule), and
    is judged as the Gemini model it is."""
    route = _vertex_route(model, base_model)
    try:
        openai_like = bool(
            _litellm_symbol("VertexAIPartnerModels").should_use_openai_handler(model)
        )
    except Exception:
        return _VERTEX_UNKNOWN
    if route is None:
        return _VERTEX_UNKNOWN
    routes = _litellm_symbol("VertexAIModelRoute")
    named_gemini = "gemini" in model and not model.isdigit()
    if route == routes.GEMINI and (named_gemini or _gemini_base(base_model)):
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


def _cohere_model_fault(model: str, base_model: str | None = None) -> str | None:
    """Why a ``cohere/`` model cannot be gated, or None when litellm sends it to Cohere's v2
    chat (its own answer, ``CohereModelInfo.get_cohere_route``: a model named ``v1/...`` goes
    to the v1 chat API, another wire)."""
    try:
        route = _litellm_symbol("CohereModelInfo").get_cohere_route(model)
    except Exception:
        return "cannot tell which Cohere API litellm sends this model to"
    if route != "v2":
        return "litellm sends this model to Cohere's v1 chat API, a wire the gate does not read"
    return None


_MODEL_FAULTS = {
    "bedrock": _bedrock_model_fault,
    "vertex_ai": _vertex_model_fault,
    "cohere": _cohere_model_fault,
    "cohere_chat": _cohere_model_fault,
}
"""Providers whose one entry covers several of litellm's APIs, chosen per model: why a model
cannot be gated, or None."""


def _gemini_base(base_model: str | None) -> bool:
    """Whether litellm sends a Vertex deployment to Gemini for its ``base_model`` (the rule
    litellm's ``get_vertex_ai_model_route`` applies first, 1.108.7 and 1.110.2)."""
    return base_model is not None and "gemini" in base_model


def _vertex_responses_fault(model: str, base_model: str | None = None) -> str | None:
    """Why a ``vertex_ai/`` model that :func:`_vertex_model_fault` lets through cannot be gated
    on the Responses API: none (Claude on Anthropic's wire, Gemini on Gemini's, both bridged
    by litellm), unless litellm cannot tell where it sends it."""
    return _VERTEX_UNKNOWN if _vertex_route(model, base_model) is None else None


_RESPONSES_MODEL_FAULTS = {"vertex_ai": _vertex_responses_fault}
"""Providers whose Responses entry gates fewer models than their chat entry: why a model
(one :data:`_MODEL_FAULTS` lets through) cannot be gated on the Responses API, or None."""


def decision_for(provider: str, api: Api) -> Decision:
    """What the table says of ``provider`` on ``api``: refused when it is not in it."""
    route = ROUTES.get(provider)
    return _UNKNOWN if route is None else route.decision(api)


def _check_responses(
    model: str, provider: str, gated: Gated, stream: bool, api_base: object
) -> tuple[bool, bool]:
    """Refuse when litellm would serve this Responses call another way than the table says;
    else (whether litellm replays a whole result as the stream, so the wire is a whole body;
    whether it bridges the call to chat). litellm picks its Responses config from the model
    and the ``api_base`` (Azure AI serves Responses natively only on some endpoints)."""
    try:
        from .seam.symbols import LlmProviders, ProviderConfigManager

        config = ProviderConfigManager.get_provider_responses_api_config(
            provider=LlmProviders(provider),
            model=model,
            api_base=api_base if isinstance(api_base, str) else None,
        )
        fake = config is not None and bool(
            config.should_fake_stream(model=model, stream=stream, custom_llm_provider=provider)
        )
    except Exception:
        raise RouteNotGated(
            provider, Api.RESPONSES.value, "cannot tell how litellm serves this model"
        ) from None
    if gated.bridged is not None and (config is None) != gated.bridged:
        how = "bridges it to chat" if config is None else "serves it natively"
        raise RouteNotGated(
            provider, Api.RESPONSES.value, f"litellm {how} for this model, unlike the table"
        )
    return fake, config is None


def reshaped_bridge(request: Mapping[str, Any]) -> bool:
    """Whether litellm bridges this Responses call to chat over a wire whose calls it may
    re-shape (``WireSpec.reparsed``: Anthropic's, Bedrock's), where the callback runs
    litellm's parser and bridge over the body it holds (``responsesbridge``)."""
    found = provider_of(request)
    decision = None if found is None else decision_for(found[1], Api.RESPONSES)
    return isinstance(decision, Gated) and bool(decision.bridged) and WIRES[decision.wire].reparsed


def table() -> list[tuple[str, str, str]]:
    """(route, chat, Responses) as text, one row per provider: what ``toolgate routes`` prints."""
    return [
        (name, route.chat.describe(), route.responses.describe())
        for name, route in sorted(ROUTES.items())
    ]


__all__ = [
    "ROUTES",
    "Api",
    "ClientKind",
    "Gated",
    "Refused",
    "Route",
    "choices_kept_apart",
    "replays",
    "route_for",
    "table",
]
