"""litellm's own chunk parser, asked before the gate lets a chat message through.

On the callback path litellm parses the messages after the gate let them go. A message the
gate accepts but litellm cannot parse (a field outside the tool call with the wrong type:
``"created": "x"``, ``"id": 5``) would make litellm fail part way through a released call:
the caller would hold the first fragment of a call and then get litellm's error. So each
message the gate passes on (live or held) is first given to a parser of litellm's own for
the route, one per attempt (it may keep state across messages, as litellm's does); a
message it refuses quarantines the attempt as a carrier mismatch before anything of it goes
out. The parser's error is dropped, never chained (pydantic quotes the input in it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import litellm

ChunkCheck = Callable[[Mapping[str, Any]], bool]


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


__all__ = ["ChunkCheck", "chat_chunk_check"]
