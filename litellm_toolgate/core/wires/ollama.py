"""The Ollama ``/api/chat`` wire: newline-delimited JSON, whole calls, ``done`` as the end.

Sources, each rule below cites one: Ollama's API documentation (``docs/api.md``, "Generate a
chat completion"; ``docs/api/streaming.mdx``; ``docs/api/errors.mdx``) and its server
(``api/types.go``: ``ChatResponse``, ``ToolCall``; ``server/routes.go``: ``ChatHandler``,
``streamResponse``, ``toolCallId``; ``llm/server.go``: ``DoneReason``), read at commit
fb30760 (2026-08-21); litellm's ``llms/ollama/chat/transformation.py`` (1.110.2) for what
the client makes of it.

The body (``application/x-ndjson``, framed by :mod:`..ndjson`) is one JSON object per line:
``{"model", "created_at", "message": {"role", "content", "thinking"?, "tool_calls"?},
"done": false}`` while the model generates, and a last object with ``"done": true`` and
``done_reason`` (``ChatResponse``). Rules:

* Every line is a JSON object with a boolean ``done`` and, unless it is an error, an object
  ``message`` (``ChatResponse``). An object with an ``error`` member is the in-stream error
  (``docs/api/errors.mdx``: "returned as an object ... with an error property").
* Text: ``message.content`` and ``message.thinking`` are visible text.
* Calls arrive whole in ``message.tool_calls`` (``ChatHandler`` sends a call only once its
  parser completed it): each ``{"id"?, "function": {"index", "name", "arguments"}}``, with
  ``arguments`` a JSON *object* (``ToolCallFunctionArguments``), not a string. A call is
  opened and given all its arguments in one line: there are no fragments to join. Its
  arguments text is the object re-serialized (the strict parser and the schema read that);
  a line that carries calls is read by the duplicate-refusing loader first, so no duplicate
  key is merged away before it.
* Identity. Since 2025 the server gives each call an ``id`` (``toolCallId``: ``call_`` and 8
  characters); older servers send none (``docs/api.md``'s example has none). A call with an
  ``id`` is that id, which must be a non-empty string, never reused in the stream
  (``identity_conflict``). A call without one is its position: the n-th call of the stream,
  counting from 0 in arrival order, named ``ollama-call-<n>``; a stream that mixes calls with
  and without ids is refused (``identity_conflict``), since the two schemes could then name
  one call twice. ``function.index``, when present, must be a non-negative integer
  (``invalid_call_index``); it does not identify a call (the server numbers calls per parse,
  not per stream). ``name`` must be a non-empty string (``missing_call_identity``).
  litellm replaces every id with a fresh uuid of its own (``chunk_parser``), so its chunks
  are matched to the wire by position, name and arguments, never by id (these rules are
  :mod:`.whole`'s, shared with Gemini's wire).
* The terminal. There is no tool-specific stop: a response with calls ends ``done_reason:
  "stop"`` (``docs/api.md``'s example), and ``length`` is a cut (``llm/server.go``:
  ``DoneReasonStop``, ``DoneReasonLength``; a closed connection leaves ``done_reason``
  empty, and it is omitted). So the terminal is the line with ``done: true`` and a
  ``done_reason`` (refused without one: ``missing_finish``), then a clean end of the body,
  and calls are released only under ``stop`` (:meth:`OllamaWire.terminal_fault`:
  ``finish_reason_mismatch``). That line is both the finish and the end marker: anything
  after it is ``event_after_terminal`` (the chat tables, ``state.STREAM_TABLE``, with the
  line read as its ``Finish`` and ``DoneMarker``). A body that ends without it is
  ``missing_finish``; a body cut inside a line is ``malformed_event``.
* A whole body (``stream: false``) is one such object, which must be the done one.

Faults are raised as :class:`WireFault`: a reason, never body text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..decision.carrier import Carrier
from ..decision.events import (
    DoneMarker,
    Finish,
    Metadata,
    StreamError,
    TextDelta,
    WireEvent,
)
from ..decision.profiles import Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.ndjson import NDJSONDecoder
from ..framing.sse import SSEMessage
from .base import LedgerView, LiveRule, WireSpec, stateless, verdict
from .loads import WireFault, load_object, load_strict
from .whole import WholeCalls, bridged_by_position_fault, matches_by_position

R = QuarantineReason

VISIBLE_MESSAGE_KEYS = frozenset({"role", "content", "thinking", "images"})
"""Message fields that carry only what the caller reads; any other (``tool_calls``, or one
the gate does not know) holds the line until the decision."""

_NO_ID = "ollama-call-"


def passes_live(line: Mapping[str, Any]) -> bool:
    """Whether a line holds nothing the gate withholds: text of a message still generating."""
    if line.get("done") is not False or "error" in line:
        return False
    message = line.get("message")
    if not isinstance(message, dict):
        return False
    return all(v is None or k in VISIBLE_MESSAGE_KEYS for k, v in message.items())


class OllamaNormalizer:
    """Normalizes one ``/api/chat`` response; keeps the calls' identities."""

    def __init__(self, profile: Profile | None = None) -> None:
        self._calls = WholeCalls(_NO_ID)

    @property
    def response_id(self) -> str | None:
        return None  # the wire names no response

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one line of a streamed response."""
        data = message.data
        obj = load_object(data)
        inner = obj.get("message")
        if isinstance(inner, dict) and inner.get("tool_calls"):
            obj = load_strict(data)  # no duplicate key merged away in a call's arguments
        return self._line(obj)

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole non-streamed response body (``stream: false``): the done line."""
        obj = load_strict(data)
        if obj.get("done") is not True and "error" not in obj:
            raise WireFault(R.MISSING_FINISH)
        return self._line(obj)

    def _line(self, obj: Mapping[str, Any]) -> list[WireEvent]:
        if "error" in obj:
            return [StreamError("error")]
        done = obj.get("done")
        message = obj.get("message")
        if type(done) is not bool or not isinstance(message, dict):
            raise WireFault(R.MALFORMED_EVENT)
        events: list[WireEvent] = []
        for key in ("thinking", "content"):
            text = message.get(key)
            if text is None:
                continue
            if not isinstance(text, str):
                raise WireFault(R.MALFORMED_EVENT)
            if text:
                events.append(TextDelta(0, text))
        calls = message.get("tool_calls")
        if calls is not None:
            if not isinstance(calls, list):
                raise WireFault(R.MALFORMED_EVENT)
            for call in calls:
                events.extend(self._call(call))
        if not done:
            return events or [Metadata()]
        reason = obj.get("done_reason")
        if not isinstance(reason, str) or not reason:
            # A done line without a reason is a closed connection (llm/server.go).
            raise WireFault(R.MISSING_FINISH)
        events.append(Finish(0, reason))
        events.append(DoneMarker())
        return events

    def _call(self, call: object) -> list[WireEvent]:
        index = self._calls.count
        if not isinstance(call, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        function = call.get("function")
        if not isinstance(function, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        position = function.get("index")
        if position is not None and (
            type(position) is not int or position < 0  # bool is not int here
        ):
            raise WireFault(R.INVALID_CALL_INDEX, index)
        name = function.get("name")
        arguments = function.get("arguments")
        return self._calls.call(call.get("id"), name, arguments)


class OllamaIdentities:
    """Writes ``ollama-call-<n>`` into each call of a whole body sent without an ``id``, ``n``
    counting its calls in order, as :class:`~.whole.WholeCalls` names them. litellm's Ollama
    transformation keeps a whole body's call ids and draws one for a call without (1.108.7
    and 1.110.2); its stream parser gives every complete call a fresh id whatever the line
    says, so a stream has nothing to write (:meth:`OllamaWire.identities`)."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    def identify(self, value: Any) -> None:
        message = value.get("message") if isinstance(value, dict) else None
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if isinstance(call, dict) and call.get("id") is None:
                call["id"] = f"{_NO_ID}{self._count}"
            self._count += 1


# ---- the wire's answers to the core ----------------------------------------------------------
class OllamaWire(WireSpec):
    """The Ollama ``/api/chat`` wire (see :class:`~.base.WireSpec` and the module docstring)."""

    framing = "NDJSON"
    media: Mapping[bool, str] = {True: "application/x-ndjson", False: "application/json"}

    def normalizer(self, profile: Profile) -> OllamaNormalizer:
        return OllamaNormalizer(profile)

    def identities(self, streamed: bool) -> OllamaIdentities | None:
        return None if streamed else OllamaIdentities()

    def decoder(self, max_event_bytes: int) -> NDJSONDecoder:
        return NDJSONDecoder(max_event_bytes=max_event_bytes)

    def encode(self, message: SSEMessage, value: Any) -> bytes:
        # One line of ASCII JSON, as the server writes it: an object and a newline.
        return json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n"

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        # No tool-specific stop exists: calls are released only under "stop".
        if calls and finish_reason != "stop":
            return R.FINISH_REASON_MISMATCH
        return None

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "responses":
            # The Responses API, bridged by litellm to chat over this wire.
            return bridged_by_position_fault(ledger, carrier, frozenset({"stop"}))
        return verdict(matches_by_position(ledger, carrier, ledger.finish_reason))

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


WIRE = OllamaWire(Wire.OLLAMA)
