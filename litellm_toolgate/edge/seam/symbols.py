"""litellm's code outside its top-level namespace, imported here and nowhere else.

Read from litellm 1.108.7 and 1.110.2 (the supported versions); where they differ, both
places are listed, newest first. The first block is imported with the edge: litellm's
documented extension points (its guardrail and logger bases, their event hooks, the
exception a guardrail raises) and the response types litellm hands its callers. The rest
(:data:`LAZY`) is imported on first use by :func:`lazy`, inside the caller's own error
handling: a name a litellm version does not have is an ImportError there, which every
caller turns into a refusal ("cannot tell"), never a pass.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from types import ModuleType
from typing import Any

# Documented extension points: a guardrail's base class and hooks, a logger's base class,
# the exception litellm hands a caller unchanged (1.108.7, 1.110.2).
from litellm.exceptions import GuardrailRaisedException
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.integrations.custom_logger import CustomLogger

# The HTTP handlers litellm's routes send through, and the factory of its cached sync one
# (1.108.7, 1.110.2).
from litellm.llms.custom_httpx.http_handler import (
    AsyncHTTPHandler,
    HTTPHandler,
    _get_httpx_client,
    get_async_httpx_client,
)

# The Responses API stream litellm hands its caller (1.108.7, 1.110.2).
from litellm.responses.streaming_iterator import BaseResponsesAPIStreamingIterator
from litellm.types.guardrails import GuardrailEventHooks, LitellmParams

# Response types litellm hands its callers (1.108.7, 1.110.2).
from litellm.types.llms.openai import ResponsesAPIResponse
from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    LlmProviders,
    ModelResponse,
    ModelResponseStream,
    StreamingChoices,
)

# Which config litellm uses for a provider's chat and Responses calls (1.108.7, 1.110.2).
from litellm.utils import ProviderConfigManager

LAZY: dict[str, tuple[str, str]] = {
    # Whole chat results as litellm converts them (the parsers' and bridges' cross-checks).
    "convert_to_model_response_object": (
        "litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response",
        "convert_to_model_response_object",
    ),
    # litellm's bridge of chat results into the Responses API.
    "LiteLLMCompletionResponsesConfig": (
        "litellm.responses.litellm_completion_transformation.transformation",
        "LiteLLMCompletionResponsesConfig",
    ),
    # litellm's bridge of chat streams into Responses events (edge/responsesbridge.py).
    "LiteLLMCompletionStreamingIterator": (
        "litellm.responses.litellm_completion_transformation.streaming_iterator",
        "LiteLLMCompletionStreamingIterator",
    ),
    # What litellm puts between a Gemini call's id and the thought signature it appends to
    # the id it hands over (edge/responsesbridge.py).
    "THOUGHT_SIGNATURE_SEPARATOR": (
        "litellm.litellm_core_utils.prompt_templates.factory",
        "THOUGHT_SIGNATURE_SEPARATOR",
    ),
    # The stream parsers of routes whose chat config names none (see edge/parsers.py).
    "AnthropicConfig": ("litellm.llms.anthropic.chat.transformation", "AnthropicConfig"),
    "AnthropicStreamIterator": ("litellm.llms.anthropic.chat.handler", "ModelResponseIterator"),
    "VertexGeminiConfig": (
        "litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini",
        "VertexGeminiConfig",
    ),
    "GeminiStreamIterator": (
        "litellm.llms.vertex_ai.gemini.vertex_and_google_ai_studio_gemini",
        "ModelResponseIterator",
    ),
    "AmazonConverseConfig": (
        "litellm.llms.bedrock.chat.converse_transformation",
        "AmazonConverseConfig",
    ),
    "AWSEventStreamDecoder": ("litellm.llms.bedrock.chat.invoke_handler", "AWSEventStreamDecoder"),
    # watsonx/: litellm's chat config names OpenAI's stream parser, but its handler
    # (OpenAILikeChatHandler) reads the stream with Databricks' iterator (1.108.7, 1.110.2).
    "IBMWatsonXChatConfig": (
        "litellm.llms.watsonx.chat.transformation",
        "IBMWatsonXChatConfig",
    ),
    "WatsonxStreamIterator": ("litellm.llms.databricks.streaming_utils", "ModelResponseIterator"),
    # Which API litellm sends a Bedrock or a Vertex AI model to (the route table's checks).
    "BedrockModelInfo": ("litellm.llms.bedrock.common_utils", "BedrockModelInfo"),
    "get_vertex_ai_model_route": (
        "litellm.llms.vertex_ai.common_utils",
        "get_vertex_ai_model_route",
    ),
    "VertexAIModelRoute": ("litellm.llms.vertex_ai.common_utils", "VertexAIModelRoute"),
    # Which Cohere chat API (v1 or v2) litellm sends a model to (1.108.7, 1.110.2).
    "CohereModelInfo": ("litellm.llms.cohere.common_utils", "CohereModelInfo"),
    "VertexAIPartnerModels": (
        "litellm.llms.vertex_ai.vertex_ai_partner_models.main",
        "VertexAIPartnerModels",
    ),
    # The SDK clients litellm builds for openai/ and azure/, built the same way by the gate.
    "get_secret_str": ("litellm.secret_managers.main", "get_secret_str"),
    "BaseAzureLLM": ("litellm.llms.azure.common_utils", "BaseAzureLLM"),
    # A custom provider's base class (``litellm.custom_provider_map``'s handlers).
    "CustomLLM": ("litellm.llms.custom_llm", "CustomLLM"),
    # The error litellm's OpenAI SDK chat handler re-raises as it is (1.108.7, 1.110.2:
    # ``OpenAIChatCompletion.completion`` and ``make_sync_openai_chat_completion_request``
    # end in ``except OpenAIError: raise`` and wrap any other exception in a new one, a 500
    # litellm retries): a sync whole refusal raised inside the SDK's request is also one.
    "OpenAIError": ("litellm.llms.openai.common_utils", "OpenAIError"),
    # Its twin in litellm's Azure chat handler (``AzureChatCompletion.completion``: ``except
    # AzureOpenAIError: raise``, anything else wrapped in a new one; 1.108.7, 1.110.2).
    "AzureOpenAIError": ("litellm.llms.azure.common_utils", "AzureOpenAIError"),
    # The one error litellm's async OpenAI chat handler (``OpenAIChatCompletion.acompletion``,
    # 1.108.7, 1.110.2) re-raises as it is (``except openai.UnprocessableEntityError: ...
    # raise e`` unless ``drop_params``); it wraps any other exception in a new OpenAIError.
    "UnprocessableEntityError": ("openai", "UnprocessableEntityError"),
    # The OpenAI SDK's own base error: openai 2.x's request loop (``SyncAPIClient.request``,
    # read from 2.54.0) re-raises it as it is (``except OpenAIError: raise``) and wraps any
    # other exception raised while sending in a retried ``APIConnectionError``; 3.60 lets
    # every exception but httpx's transport errors and timeouts through.
    "SDKError": ("openai", "OpenAIError"),
    # How litellm's completion resolves a call's HTTP timeout: the call's, else its
    # request_timeout, else the configured litellm.request_timeout, else its fallback
    # (1.110.2 also takes the stream kind; 1.108.7 does not). The gate builds the client
    # litellm would build for a sync whole watsonx call with it (edge/sync/hooks.py).
    "CompletionTimeout": ("litellm.litellm_core_utils.completion_timeout", "CompletionTimeout"),
    "get_configured_request_timeout": (
        "litellm.litellm_core_utils.request_timeout_resolver",
        "get_configured_request_timeout",
    ),
    "supports_httpx_timeout": ("litellm.utils", "supports_httpx_timeout"),
}
"""Name: (litellm module, attribute), imported on first use."""

SDK_RAW_RESPONSE = "x-stainless-raw-response"
"""The header the OpenAI SDK sends, as ``true``, on a request whose raw response it hands
back (``openai._constants.RAW_RESPONSE_HEADER``, openai 3.60): litellm asks for that on
every chat call of its SDK handlers (1.108.7, 1.110.2: ``make_sync_openai_chat_completion_
request``'s request options, the Azure handler's ``with_raw_response``), and no other client
of litellm's sends it. It tells the claiming transport that a whole body is read inside the
SDK's request (see ``sync.refusal.sdk_whole``)."""

MESSAGES_PACKAGES = (
    ("litellm.llms.anthropic.messages", "native.handler"),  # 1.110.2
    ("litellm.llms.anthropic.pass_through", "messages.handler"),  # 1.108.7 (and 1.110.2)
)
"""litellm's Anthropic Messages entry point: (package, its dispatching module), newest
first. The bridges' adapters live beside the dispatching module."""

_MESSAGES_PARTS = (
    "handler",
    "adapters.transformation",
    "adapters.streaming_iterator",
    "responses_adapters.transformation",
)
_LOADED: dict[str, Any] = {}


def lazy(name: str) -> Any:
    """The :data:`LAZY` entry ``name``, imported now (ImportError or AttributeError when the
    installed litellm does not have it)."""
    found = _LOADED.get(name)
    if found is None:
        module, attribute = LAZY[name]
        found = _LOADED[name] = getattr(importlib.import_module(module), attribute)
    return found


def whole_call_timeout(call: Mapping[str, Any], provider: str) -> Any:
    """The HTTP timeout litellm's ``completion`` resolves for a whole (not streamed) call
    made with the keyword arguments ``call`` on ``provider``, by litellm's own rule (its
    ``CompletionTimeout.resolve``, called as ``completion`` calls it: the call's ``timeout``
    first, the rest of its arguments after). Raises when the installed litellm resolves it
    some other way (a changed signature is a TypeError): the caller refuses the call."""
    resolve = lazy("CompletionTimeout").resolve
    rest = {key: value for key, value in call.items() if key != "timeout"}
    settings: dict[str, Any] = {
        "global_timeout": lazy("get_configured_request_timeout")(),
        "supports_httpx_timeout": lazy("supports_httpx_timeout"),
    }
    if "stream_kind" in inspect.signature(resolve).parameters:  # 1.110.2: its StreamKind
        kinds = importlib.import_module(resolve.__module__).StreamKind
        settings["stream_kind"] = kinds.NOT_STREAMED
    return resolve(call.get("timeout"), rest, provider, **settings)


def messages_module(part: str) -> ModuleType | None:
    """litellm's module ``<package>.<part>`` in the first Messages package that has it
    (``"handler"`` names each package's dispatching module), or None."""
    for package, handler in MESSAGES_PACKAGES:
        name = f"{package}.{handler if part == 'handler' else part}"
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def missing() -> list[str]:
    """The :data:`LAZY` entries and Messages modules the installed litellm does not have."""
    gone = []
    for name, (module, attribute) in LAZY.items():
        try:
            lazy(name)
        except (ImportError, AttributeError):
            gone.append(f"litellm symbol {name}: {module}.{attribute}")
    for part in _MESSAGES_PARTS:
        if messages_module(part) is None:
            gone.append(f"litellm Messages module {part!r} in {MESSAGES_PACKAGES}")
    try:
        constants = importlib.import_module("openai._constants")
    except ImportError:
        constants = None
    if str(getattr(constants, "RAW_RESPONSE_HEADER", "")).lower() != SDK_RAW_RESPONSE:
        gone.append(f"openai._constants.RAW_RESPONSE_HEADER == {SDK_RAW_RESPONSE!r}")
    return gone


__all__ = [
    "LAZY",
    "MESSAGES_PACKAGES",
    "SDK_RAW_RESPONSE",
    "AsyncHTTPHandler",
    "BaseResponsesAPIStreamingIterator",
    "ChatCompletionDeltaToolCall",
    "CustomGuardrail",
    "CustomLogger",
    "Delta",
    "Function",
    "GuardrailEventHooks",
    "GuardrailRaisedException",
    "HTTPHandler",
    "LitellmParams",
    "LlmProviders",
    "ModelResponse",
    "ModelResponseStream",
    "ProviderConfigManager",
    "ResponsesAPIResponse",
    "StreamingChoices",
    "_get_httpx_client",
    "get_async_httpx_client",
    "lazy",
    "messages_module",
    "missing",
    "whole_call_timeout",
]
