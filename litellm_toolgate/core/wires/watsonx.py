"""watsonx.ai's native chat wire (``POST /ml/v1/text/chat_stream``, ``/ml/v1/text/chat``):
chat-completions chunks in SSE messages of its own framing, with no end marker.

What the wire is (IBM's own client, the watsonx.ai Java SDK, repository
``IBM/watsonx-ai-java-sdk``: ``modules/watsonx-ai/src/main/java/com/ibm/watsonx/ai/chat/
SseEventProcessor.java`` and the streams recorded in its test
``modules/watsonx-ai/src/test/java/com/ibm/watsonx/ai/chat/ChatServiceStreamingTest.java``):

* Each message is ``id: N``, ``event: message`` (some recorded messages name no event) and
  one ``data:`` line holding a ``chat.completion.chunk`` object: ``choices[].delta`` with
  ``content``, ``reasoning_content`` or ``tool_calls`` (``index``, ``id``, ``type``,
  ``function.name`` / ``function.arguments``, as on the chat-completions wire; a call's later
  fragments repeat ``"name": ""``), ``choices[].finish_reason`` (``tool_calls``, ``stop``,
  ``length``, ...), and last a chunk with ``choices: []`` and ``usage``.
* There is no ``data: [DONE]``: the SDK drops one only for the OpenAI-compatible Model
  Gateway endpoints, which are another route. Some recordings end with ``event: close`` and
  ``data: {}``; an upstream error is ``event: error`` and a ``data:`` line.
* For some models watsonx.ai sends no ``finish_reason: tool_calls`` when the tool choice is
  ``required`` (the SDK completes such calls on the usage chunk): the gate never guesses a
  terminal, so such a stream is refused (``finish_reason_mismatch`` for ``stop`` with calls,
  ``missing_finish`` with no finish at all).

So the terminal here is the finish chunk, then the clean end of the body
(``state.WATSONX_STREAM_TABLE``): after the finish only content-free chunks (the usage chunk,
``close``'s ``{}``) may come, any content or a second finish is ``event_after_terminal``, an
``event: error`` anywhere is ``error_event``. A ``[DONE]``, if one comes, is read as on the
chat wire: after the finish, and then it must be the last message. Since no marker ends the
body, a message cut by the end of the body (a line or a message without its blank line) is
``malformed_event`` here (:class:`WatsonxDecoder`), where an SSE client would drop it
silently: litellm's reader reads line by line and would still parse a cut message's data.

How litellm reads it (``litellm/llms/watsonx/chat/handler.py``: ``OpenAILikeChatHandler``,
whose stream is ``litellm/llms/databricks/streaming_utils.py`` ``ModelResponseIterator`` over
the body's lines, 1.108.7 and 1.110.2): it parses every line that starts with ``data:``,
whatever the message's ``event:`` (``id:`` and ``event:`` lines, and a line that is no JSON,
become empty chunks), and of each delta's ``tool_calls`` it takes the first fragment only,
and only when that fragment carries ``function.arguments``. So the gate reads the data of
every message but ``error`` as a chunk (a call under another event name cannot hide), and a
delta that litellm would read otherwise than the wire, several call fragments at once or a
fragment without an arguments string, is ``carrier_mismatch`` (what litellm hands over
would not be the wire's calls). Every choice is choice 0 to litellm: a request for several
choices is refused before sending (:meth:`WatsonxWire.request_fault`).

litellm's chunks are cross-checked with the wire as on the chat wire (``chat_carrier_matches``:
same tool indexes, ids, names, argument text and finish reason), ``carrier_mismatch`` on any
disagreement.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..decision.events import DoneMarker, StreamError, WireEvent
from ..decision.profiles import STRICT, Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.decoder import FramingDecoder
from ..framing.sse import SSEDecoder
from .base import Known, LiveRule, Normalizer, Read, stateless
from .chat import ChatNormalizer, ChatWire, choices_asked, passes_live
from .loads import WireFault, load_object

R = QuarantineReason


class WatsonxDecoder(SSEDecoder):
    """SSE, but a message the end of the body cut short is a fault (``malformed_event``):
    no end marker follows the last message on this wire, so only a body that ends on a
    message's blank line ended where the upstream ended it."""

    __slots__ = ()

    def _end(self) -> QuarantineReason | None:
        # A message begun and not dispatched: a partial line, data, or an ``id:`` or
        # ``event:`` line already read.
        cut = self.pending or bool(self._event) or self._id is not None
        reason = super()._end()
        if reason is None and cut:
            self.discard()
            return R.MALFORMED_EVENT
        return reason


class WatsonxNormalizer(ChatNormalizer):
    """Normalizes one watsonx.ai chat response: chat chunks, read from every message but an
    ``event: error``, with the deltas litellm would read otherwise than the wire refused."""

    def __init__(self) -> None:
        super().__init__(STRICT)

    def read(self, event: str, data: str, last_id: str | None = None) -> list[WireEvent]:
        if event == "error":
            return [StreamError("event")]
        if data == "[DONE]":
            return [DoneMarker()]
        obj = load_object(data)
        return self.chunk(obj, streamed=True)

    def fields(self, event: str, data: str, last_id: str | None = None) -> list[WireEvent]:
        return self.read(event, data, last_id)

    def _choice(self, choice: object, streamed: bool, events: list[WireEvent]) -> None:
        if isinstance(choice, dict):
            delta = choice.get("delta" if streamed else "message")
            if isinstance(delta, dict):
                _check_calls(delta.get("tool_calls"), streamed)
        super()._choice(choice, streamed, events)


def _check_calls(calls: object, streamed: bool) -> None:
    """litellm's reader takes a streamed delta's first call fragment only, and only with its
    arguments: anything else would reach the caller otherwise than the wire sent it. Each
    call of a whole body must carry its arguments too (litellm's result would lack them)."""
    if not isinstance(calls, list):
        return
    if streamed and len(calls) > 1:
        raise WireFault(R.CARRIER_MISMATCH)
    for fragment in calls:
        function = fragment.get("function") if isinstance(fragment, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
            raise WireFault(R.CARRIER_MISMATCH)


class WatsonxWire(ChatWire):
    """watsonx.ai's chat wire (see the module docstring): the chat wire's rules and carrier
    check, its own decoder, normalizer and terminal (no ``[DONE]``)."""

    def decoder(self, max_event_bytes: int) -> FramingDecoder:
        return WatsonxDecoder(max_event_bytes=max_event_bytes)

    def normalizer(self, profile: Profile) -> WatsonxNormalizer:
        # No route profile applies: watsonx.ai's deviations are this module's rules.
        return WatsonxNormalizer()

    def choices(self, fields: Mapping[str, Any]) -> int:
        return 1

    def choices_normalizer(self, profile: Profile, choices: int) -> WatsonxNormalizer:
        return self.normalizer(profile)

    def choices_live_rule(self, choices: int) -> LiveRule:
        return self.live_rule()

    def readers(self, normalizer: Normalizer) -> tuple[Read, Known | None]:
        assert isinstance(normalizer, WatsonxNormalizer)
        return normalizer.read, None

    def request_fault(self, fields: Mapping[str, Any]) -> QuarantineReason | None:
        # litellm reads every choice as choice 0: only one choice can be gated.
        if choices_asked(fields) != 1:
            return R.UNSUPPORTED_REQUEST
        return None

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        # Calls only under ``tool_calls``; ``stop`` with calls is never taken for the terminal
        # (watsonx.ai sends it for some models under a required tool choice: refused).
        return None if calls == (finish_reason == "tool_calls") else R.FINISH_REASON_MISMATCH

    def reads_event(self, event: str) -> bool:
        # litellm reads the data of every message, whatever its event name.
        return True

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


WIRE = WatsonxWire(Wire.WATSONX)

__all__ = ["WIRE", "WatsonxDecoder", "WatsonxNormalizer", "WatsonxWire"]
