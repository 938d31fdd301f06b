"""litellm's own parsers, asked before the gate lets anything through.

On the callback path litellm parses the messages after the gate let them go. A message the
gate accepts but litellm cannot parse (a field outside the tool call with the wrong type:
``"created": "x"``, ``"id": 5``) would make litellm fail part way through a released call:
the caller would hold the first fragment of a call and then get litellm's error. So each
message the gate passes on (live or held) is first given to a parser of litellm's own for
the route, one per attempt (it may keep state across messages, as litellm's does); a
message it refuses quarantines the attempt as a carrier mismatch before anything of it goes
out. The parser's error is dropped, never chained (pydantic quotes the input in it).

The same holds for a whole (non-streamed) chat body: litellm turns it into its result only
after the gate approved it, and a field it cannot convert (``"created": "x"``,
``"usage": 5``) would make it fail with an error of its own that quotes the body. So a
whole chat body is first given to litellm's converter of chat results
(:func:`chat_body_parses`), which every OpenAI-compatible route ends in, and, when the
caller asked for a Responses result (litellm's bridge), to the bridge that makes one of it.

On the Responses wire litellm's per-event parser (the route's
``transform_streaming_response``, both versions read) falls back to an unvalidated model
when pydantic refuses an event, and its stream iterator takes a ``response`` that stayed a
plain object; what it cannot take is a terminal event whose ``response`` is no object,
which the gate refuses as malformed. :func:`responses_event_check` asks the route's own
parser anyway, and refuses such terminals itself, so a route whose parser is stricter
cannot fail part way through a release either.

Asking each message is not enough where litellm may hand over calls shaped otherwise than
the wire (``WireSpec.reparsed``: on Ollama's lines litellm 1.110 numbers each line's calls
from 0, so two calls of two lines reach the caller merged into one). There
:func:`litellm_parse` is the whole of what litellm will make of the held body: a fresh
parser of the route's (the same ``chunk_parser`` litellm's stream runs, or its
``transform_response`` for a whole body) run over the body's values at the decision, its
chunks assembled as a caller assembles them (:class:`~.carriers.chat.CarrierChunks`), and
the result cross-checked with the wire by the wire's carrier rule before anything held goes
out. A route litellm has no such parser for, or a body it fails on, is a carrier that
matches nothing: refused, never let through.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import httpx
import litellm

from ..core.decision.carrier import Carrier
from ..core.decision.withhold import Check as ChunkCheck
from ..core.decision.withhold import Parse
from .carriers.chat import CarrierChunks, response_carrier
from .seam.symbols import (
    Delta,
    LlmProviders,
    ModelResponse,
    ModelResponseStream,
    ProviderConfigManager,
    StreamingChoices,
    lazy,
)

# Responses events after which litellm reads the ``response`` they carry as an object.
_TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed"})


UNPARSED = Carrier({}, None, foreign=True)
"""What litellm would make of a body the gate cannot run litellm's parser over: matches no wire."""


class _Unlogged:
    """The logging object a route's ``transform_response`` (or Gemini's stream parser) is
    handed here: it records nothing (the call's own logging object records the real
    response). Of the call's parameters it holds only whether the caller asked with legacy
    ``functions`` (litellm's Gemini parser then hands the calls over as a ``function_call``,
    which the cross-check refuses, as ``ToolGate`` refuses it); litellm reads the others for
    the ids it makes, which the cross-check does not read."""

    def __init__(self, functions: bool = False) -> None:
        self.model_call_details: dict[str, Any] = {}
        self.optional_params: dict[str, Any] = {"functions": True} if functions else {}
        self.litellm_params: dict[str, Any] = {}

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        return None


def chat_config(model: str, provider: str | None) -> tuple[Any, str]:
    """litellm's chat config for the route, and the model's name without its provider."""
    name, route, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=provider)
    config = ProviderConfigManager.get_provider_chat_config(
        model=name, provider=LlmProviders(route)
    )
    if config is None:
        raise LookupError(route)
    return config, name


def stream_parser(config: Any, model: str, provider: str | None, functions: bool) -> Any:
    """A fresh stream parser of litellm's for the route: the one its chat config names, or,
    where the config names none because litellm's handler for the route builds its own, that
    handler's iterator: ``anthropic/`` and Claude on ``vertex_ai/`` (litellm's Anthropic
    handler), ``gemini/`` and Gemini on ``vertex_ai/`` (the iterator litellm's Gemini stream
    calls build, which takes a logging object) and ``bedrock/`` on Converse
    (:func:`_converse_parser`)."""
    converse = _converse_parser(config, model, provider)
    if converse is not None:
        return converse
    parser = config.get_model_response_iterator(
        streaming_response=iter(()), sync_stream=True, json_mode=False
    )
    if parser is None:
        # By the config litellm's route has (its class), not the route's name: Claude on
        # vertex_ai/ has an Anthropic config and goes through litellm's Anthropic handler,
        # Gemini on vertex_ai/ a Gemini config and litellm's Gemini stream.
        if isinstance(config, lazy("AnthropicConfig")):
            parser = lazy("AnthropicStreamIterator")(
                streaming_response=iter(()), sync_stream=True, json_mode=False
            )
        elif isinstance(config, lazy("VertexGeminiConfig")):
            unlogged: Any = _Unlogged(functions)
            parser = lazy("GeminiStreamIterator")(
                streaming_response=iter(()), sync_stream=True, logging_obj=unlogged
            )
    if parser is None:
        raise LookupError("no stream parser")
    return parser


def _converse_parser(config: Any, model: str, provider: str | None) -> Any:
    """For ``bedrock/`` on Converse (whose chat config names no parser either): the decoder
    litellm's Converse handler builds for each stream, ``AWSEventStreamDecoder`` (its
    ``chunk_parser`` takes one event frame's payload, decoded, exactly what the withholder
    keeps of each frame); None for any other config."""
    if not type(config).__module__.startswith("litellm.llms.bedrock."):
        return None  # no other route's parse imports litellm's Bedrock modules
    if not isinstance(config, lazy("AmazonConverseConfig")):
        return None

    name, _, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=provider)
    # litellm's handler is given the model without its route prefix (the decoder reads the
    # name only to tell an ai21 model's events apart).
    return lazy("AWSEventStreamDecoder")(model=name.removeprefix("converse/"), json_mode=False)


def _intermittent(chunk: Any) -> bool:
    """Whether litellm's stream wrapper reads this chunk's finish reason as a passing one: a
    parser marks such a chunk ``is_finished: False`` in its hidden params (litellm's Gemini
    parser marks every chunk so, and sets a finish reason on each)."""
    hidden = getattr(chunk, "_hidden_params", None)
    return isinstance(hidden, dict) and hidden.get("is_finished") is False


def _parsed_stream(parser: Any, values: list[Any]) -> Carrier:
    """The chunks litellm's stream parser makes of a body's values, assembled as a caller
    assembles them. Where the parser marks a chunk's finish reason as a passing one
    (:func:`_intermittent`), litellm's stream wrapper ends the stream with the last chunk's
    finish reason (``stop`` when it has none, ``tool_calls`` for ``stop`` after calls),
    and so does this."""
    chunks = CarrierChunks()
    last: str | None = None
    passing = False
    for value in values:
        # A copy: litellm's parser writes into the value it is given.
        chunk = parser.chunk_parser(copy.deepcopy(value))
        if chunk is not None and _intermittent(chunk):
            passing = True
            choices = getattr(chunk, "choices", None) or []
            last = choices[0].finish_reason if choices else None
            for choice in choices:
                choice.finish_reason = None
        chunks.admit(chunk)
    carrier = chunks.carrier()
    if not passing or carrier.finish_reason is not None:
        return carrier
    finish = last or "stop"
    if finish == "stop" and carrier.calls:
        finish = "tool_calls"
    return Carrier(carrier.calls, finish, foreign=carrier.foreign, kind=carrier.kind)


def ended_chunks(parser: Any, values: list[Any]) -> list[Any]:
    """The chunks litellm's stream parser makes of a body's values, as litellm's stream
    wrapper hands them on (litellm's Responses bridge reads them there): where the parser
    marks a chunk's finish reason as a passing one (:func:`_intermittent`), that reason is
    dropped and the stream ends on a chunk of its own with the last one (``stop`` when there
    was none, ``tool_calls`` for ``stop`` after calls), as in :func:`_parsed_stream`."""
    chunks: list[Any] = []
    last: str | None = None
    passing = calls = False
    for value in values:
        chunk = parser.chunk_parser(copy.deepcopy(value))
        if isinstance(chunk, Mapping):
            # A generic chunk (litellm's Converse decoder makes one of messageStart): litellm's
            # stream wrapper hands on nothing of one that carries nothing; one that does is
            # a conversion of the wrapper's this does not repeat, so it fails the parse.
            if any(chunk.get(k) for k in ("text", "tool_use", "finish_reason", "usage")):
                raise LookupError("a generic chunk with content")
            continue
        if chunk is None:
            continue
        choices = getattr(chunk, "choices", None) or []
        calls = calls or any(getattr(c.delta, "tool_calls", None) for c in choices)
        if _intermittent(chunk):
            passing = True
            last = choices[0].finish_reason if choices else None
            for choice in choices:
                choice.finish_reason = None
        chunks.append(chunk)
    if passing:
        finish = last or "stop"
        if finish == "stop" and calls:
            finish = "tool_calls"
        chunks.append(
            ModelResponseStream(choices=[StreamingChoices(delta=Delta(), finish_reason=finish)])
        )
    return chunks


def litellm_parse(model: str, provider: str | None = None, *, functions: bool = False) -> Parse:
    """What litellm's chat parser for this route makes of a body, as a carrier (see the module
    text); :data:`UNPARSED` when it has none, or fails on the body (its error, which may quote
    the body, is dropped). ``functions``: the caller asked with legacy ``functions``."""

    def parse(values: list[Any], streamed: bool) -> Carrier:
        try:
            config, name = chat_config(model, provider)
            if streamed:
                parser = stream_parser(config, model, provider, functions)
                return _parsed_stream(parser, values)
            if len(values) != 1 or not isinstance(values[0], dict):
                return UNPARSED
            return response_carrier(whole_result(config, name, values[0]))
        except Exception:
            return UNPARSED

    return parse


def whole_result(config: Any, name: str, body: dict[str, Any]) -> Any:
    """The chat result litellm's ``transform_response`` for the route (``config``, from
    :func:`chat_config`) makes of a whole body; raises what litellm raises."""
    return config.transform_response(
        model=name,
        raw_response=httpx.Response(
            200, json=body, request=httpx.Request("POST", "http://toolgate.invalid")
        ),
        model_response=litellm.ModelResponse(),
        logging_obj=_Unlogged(),
        request_data={},
        messages=[],
        optional_params={},
        litellm_params={},
        encoding=None,
        api_key=None,
        json_mode=False,
    )


def client_parse(
    model: str,
    provider: str | None,
    *,
    responses_api: bool,
    messages_api: bool,
    functions: bool = False,
    tools: Any = None,
) -> Parse | None:
    """The parse a withholding client is given for a call (see :func:`litellm_parse`):
    litellm's chat parser for a chat call; none for litellm's Messages entry point (natively
    it passes the wire's events on as they are; a bridge's own converter is run instead,
    :mod:`.bridges`); for the Responses API, litellm's chat parser and then its Responses
    bridge (:mod:`.responsesbridge`; run only on a wire litellm may re-shape, which on the
    Responses API is a wire litellm bridges to chat). ``tools``: the call's own."""
    if messages_api:
        return None
    if responses_api:
        from .responsesbridge import bridged_responses_parse  # it builds on this module

        return bridged_responses_parse(model, provider, tools=tools, functions=functions)
    return litellm_parse(model, provider, functions=functions)


def chat_chunk_check(model: str, provider: str | None = None) -> ChunkCheck | None:
    """A check by litellm's chat chunk parser for this route; None when it has none."""
    try:
        name, route, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=provider)
        config = ProviderConfigManager.get_provider_chat_config(
            model=name, provider=LlmProviders(route)
        )
        parser: Any = None
        if isinstance(config, lazy("IBMWatsonXChatConfig")):
            # watsonx/: the iterator litellm's OpenAI-like handler reads the stream with, not
            # the one the config names (litellm/llms/openai_like/chat/handler.py).
            parser = lazy("WatsonxStreamIterator")(streaming_response=iter(()), sync_stream=True)
        elif config is not None:
            parser = config.get_model_response_iterator(
                streaming_response=iter(()), sync_stream=True, json_mode=False
            )
    except Exception:
        return None
    if parser is None or not callable(getattr(parser, "chunk_parser", None)):
        return None

    def check(chunk: Mapping[str, Any]) -> bool:
        try:
            parser.chunk_parser(dict(chunk))
        except Exception:
            return False
        return True

    return check


def responses_event_check(model: str, provider: str | None = None) -> ChunkCheck | None:
    """A check by litellm's Responses event parser for this route; None when it has none."""
    try:
        name, route, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=provider)
        # A fresh config per attempt: some keep per-stream state (item ids by output index).
        config: Any = ProviderConfigManager.get_provider_responses_api_config(
            model=name, provider=LlmProviders(route)
        )
    except Exception:
        return None
    if config is None or not callable(getattr(config, "transform_streaming_response", None)):
        return None

    def check(event: Mapping[str, Any]) -> bool:
        if event.get("type") in _TERMINALS and not isinstance(event.get("response"), dict):
            return False
        try:
            config.transform_streaming_response(
                model=name, parsed_chunk=dict(event), logging_obj=None
            )
        except Exception:
            return False
        return True

    return check


def chat_body_parses(body: Mapping[str, Any], *, bridged: bool = False) -> bool:
    """Whether litellm's converter of whole chat results takes this body; with ``bridged``,
    also its Responses bridge, which makes a Responses result of that chat result."""
    try:
        result = lazy("convert_to_model_response_object")(
            response_object=dict(body),
            model_response_object=ModelResponse(),
            response_type="completion",
            stream=False,
        )
        if bridged:
            bridge: Any = lazy("LiteLLMCompletionResponsesConfig")
            bridge.transform_chat_completion_response_to_responses_api_response(
                request_input="", responses_api_request={}, chat_completion_response=result
            )
    except Exception:
        return False
    return True


__all__ = [
    "UNPARSED",
    "ChunkCheck",
    "chat_body_parses",
    "chat_chunk_check",
    "chat_config",
    "client_parse",
    "ended_chunks",
    "litellm_parse",
    "responses_event_check",
    "stream_parser",
    "whole_result",
]
