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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import litellm

from ..core.withhold import Check as ChunkCheck

# Responses events after which litellm reads the ``response`` they carry as an object.
_TERMINALS = frozenset({"response.completed", "response.incomplete", "response.failed"})


def chat_chunk_check(model: str, provider: str | None = None) -> ChunkCheck | None:
    """A check by litellm's chat chunk parser for this route; None when it has none."""
    try:
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

        name, route, _, _ = litellm.get_llm_provider(model=model, custom_llm_provider=provider)
        config = ProviderConfigManager.get_provider_chat_config(
            model=name, provider=LlmProviders(route)
        )
        parser: Any = None
        if config is not None:
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
        from litellm.types.utils import LlmProviders
        from litellm.utils import ProviderConfigManager

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
        from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import (
            convert_to_model_response_object,
        )
        from litellm.responses.litellm_completion_transformation.transformation import (
            LiteLLMCompletionResponsesConfig,
        )
        from litellm.types.utils import ModelResponse

        result = convert_to_model_response_object(
            response_object=dict(body),
            model_response_object=ModelResponse(),
            response_type="completion",
            stream=False,
        )
        if bridged:
            bridge: Any = LiteLLMCompletionResponsesConfig
            bridge.transform_chat_completion_response_to_responses_api_response(
                request_input="", responses_api_request={}, chat_completion_response=result
            )
    except Exception:
        return False
    return True


__all__ = ["ChunkCheck", "chat_body_parses", "chat_chunk_check", "responses_event_check"]
