"""The Gemini ``generateContent`` wire: SSE of whole responses, whole calls, no ``[DONE]``.

Sources, each rule below cites one: the Gemini API reference (ai.google.dev/api,
"generateContent" / "streamGenerateContent": ``GenerateContentResponse``, ``Candidate``,
``Content``, ``Part``, ``FunctionCall``, ``FinishReason``, ``PromptFeedback``,
``BlockReason``), the generated types of Google's own SDKs that mirror it (google-genai /
js-genai ``types.FunctionCall``, ``types.PartialArg``, ``FunctionCallingConfig``), and
litellm's ``llms/vertex_ai/gemini/vertex_and_google_ai_studio_gemini.py``
(``ModelResponseIterator``; 1.110.2 and 1.108.7) for what the client makes of it.

litellm asks ``POST .../models/<model>:streamGenerateContent?alt=sse`` for a stream and
``...:generateContent`` for a whole answer. With ``alt=sse`` each SSE message's data is one
whole ``GenerateContentResponse`` JSON object: ``{"candidates": [{"content": {"role":
"model", "parts": [...]}, "finishReason"?, "index"?, ...}], "usageMetadata"?,
"modelVersion"?, "responseId"?, "promptFeedback"?}``. Rules:

* Every message is a JSON object. One with an ``error`` member is the in-stream error (the
  API's error body, ``{"error": {"code", "message", "status"}}``; litellm's
  ``_check_streaming_error`` reads it so too): ``error_event``.
* ``promptFeedback.blockReason`` set means the prompt was blocked and no candidate follows
  (``PromptFeedback``: "If set, the prompt was blocked and no candidates are returned"):
  ``refusal``.
* ``candidates`` is a list of at most one candidate, whose ``index`` (if given) is 0: the
  gate reads one candidate, as it reads choice 0 of a chat stream; a second candidate
  (``candidateCount`` > 1) is ``unexpected_choice``.
* A candidate's ``content.parts`` is a list of ``Part`` objects, each holding one kind of
  data (``Part``: "a union field ``data``"): ``text`` (a string; with ``thought: true`` it
  is the model's thinking, litellm shows it as reasoning) is visible text;
  ``functionCall`` is a call. Any other kind (``executableCode`` and ``codeExecutionResult``
  of the server-run code tool, ``inlineData``, ``fileData``, ``functionResponse``, or a kind
  this gate does not know) is ``unsupported_tool_type``: the gate does not read it and will
  not guess that it carries no call. ``thought``, ``thoughtSignature``, ``partMetadata``
  and ``videoMetadata`` are metadata of a part.
* A ``functionCall`` arrives whole: ``{"name", "args"?, "id"?}`` with ``args`` a JSON
  *object* (``FunctionCall.args``: "The function parameters and values in JSON object
  format"), absent for a call without parameters (read as ``{}``). Its arguments text is
  the object re-serialized (the strict parser and the schema read that); a message that
  carries calls is read by the duplicate-refusing loader first, so no duplicate key is
  merged away before it. ``name`` must be a non-empty string (``missing_call_identity``).
* Partial calls. ``FunctionCall.partialArgs`` / ``willContinue`` (with
  ``FunctionCallingConfig.streamFunctionCallArguments``) stream one call's arguments over
  several messages by JSON path. Google documents both as "not supported in Gemini API"
  (Vertex AI only), and neither litellm version assembles them (it reads ``args`` only,
  so it would hand over a call without its arguments). A call carrying either is
  ``unsupported_tool_type``: refused, typed, never released half-read.
* Identity. ``FunctionCall.id`` is optional ("If populated, the client ... return the
  response with the matching id"); the Gemini API sends it on some models only. A call with
  an ``id`` is that id, a non-empty string never reused in the stream
  (``identity_conflict``). A call without one is its position: the n-th call of the
  response, counting from 0 in arrival order over all messages, named ``gemini-call-<n>``;
  a response that mixes calls with and without ids is ``identity_conflict``. litellm makes
  an id of its own for every call (``call_`` and a uuid, or one carrying a thought
  signature), so its chunks are matched to the wire by position, name and arguments, never
  by id, and the gate releases the calls under the wire's identity (these rules are
  :mod:`.whole`'s, shared with Ollama's wire).
* The terminal. There is no ``[DONE]`` and no tool-specific stop: a response with calls
  ends ``finishReason: "STOP"`` (``FinishReason.STOP``: "Natural stop point of the model");
  a candidate without ``finishReason`` has not finished ("If empty, the model has not
  stopped generating"). So the terminal is the message whose candidate carries a
  ``finishReason`` (a non-empty string), then a clean end of the body: that message is
  read as the finish and the end marker at once (the chat tables, ``state.STREAM_TABLE``),
  so any message after it, a call included, is ``event_after_terminal``; a body that ends
  without it is ``missing_finish``; a body cut inside a message is never dispatched (SSE),
  so it too ends without the finish. The finish message may itself carry parts (calls
  included): they come before the finish.
* Calls are released only under ``STOP`` (:meth:`GeminiWire.terminal_fault`:
  ``finish_reason_mismatch`` for calls under ``MAX_TOKENS``, ``SAFETY``, ``RECITATION``,
  ``LANGUAGE``, ``OTHER``, ``BLOCKLIST``, ``PROHIBITED_CONTENT``, ``SPII``,
  ``IMAGE_SAFETY`` or any other reason). A text-only response may end ``STOP``,
  ``MAX_TOKENS`` or with a content stop (:data:`FILTERED`). Any other finish is refused
  even with no call in it: one that says a call went wrong (``MALFORMED_FUNCTION_CALL``,
  ``UNEXPECTED_TOOL_CALL``, ``TOO_MANY_TOOL_CALLS``: the model asked for a call that the
  caller must not take as a finished answer), ``FINISH_REASON_UNSPECIFIED`` ("This value is
  unused"), ``MALFORMED_RESPONSE``, ``MISSING_THOUGHT_SIGNATURE``, or one the gate does not
  know.
* A whole body (``:generateContent``) is one such object, which must carry the finish.

Faults are raised as :class:`WireFault`: a reason, never body text.
"""

from __future__ import annotations

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
from ..framing.sse import SSEMessage
from .base import LedgerView, LiveRule, WireSpec, stateless, verdict
from .loads import WireFault, load_object, load_strict
from .whole import WholeCalls, bridged_by_position_fault, matches_by_position

R = QuarantineReason

STOP = "STOP"
_COMPLETE = frozenset({STOP})  # the one finish that ends a whole response
"""The one finish under which calls are released."""
CALL_FAILURES = frozenset(
    {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}
)
"""Finishes that say a call went wrong: refused with or without a call."""
PART_METADATA = frozenset({"thought", "thoughtSignature", "partMetadata", "videoMetadata"})
"""Fields of a ``Part`` beside its data that carry nothing the gate withholds."""
PARTIAL_CALL_KEYS = ("partialArgs", "willContinue")
FILTERED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
        "IMAGE_OTHER",
        "NO_IMAGE",
    }
)
"""Finishes that stop generation for a content reason (``FinishReason``)."""
CARRIER_FINISH = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    **dict.fromkeys(FILTERED, "content_filter"),
}
"""Every finish a text-only response may end with, and how litellm says it (``map_finish_reason``
in both versions). Any other finish (``FINISH_REASON_UNSPECIFIED``, which the API says is
unused, ``MALFORMED_RESPONSE``, ``MISSING_THOUGHT_SIGNATURE``, one the gate does not know) is
refused: the gate cannot tell what such a response is."""

_NO_ID = "gemini-call-"


def _candidate(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The message's one candidate (None when it has none), or a fault."""
    candidates = obj.get("candidates")
    if candidates is None:
        return None
    if not isinstance(candidates, list):
        raise WireFault(R.MALFORMED_EVENT)
    if not candidates:
        return None
    if len(candidates) > 1:
        raise WireFault(R.UNEXPECTED_CHOICE)
    candidate = candidates[0]
    if not isinstance(candidate, dict):
        raise WireFault(R.MALFORMED_EVENT)
    index = candidate.get("index", 0)
    if type(index) is not int:
        raise WireFault(R.MALFORMED_EVENT)
    if index != 0:
        raise WireFault(R.UNEXPECTED_CHOICE)
    return candidate


def _blocked(obj: Mapping[str, Any]) -> bool:
    feedback = obj.get("promptFeedback")
    return isinstance(feedback, dict) and feedback.get("blockReason") is not None


def passes_live(obj: Mapping[str, Any]) -> bool:
    """Whether a message holds nothing the gate withholds: text of a candidate still
    generating (no call, no finish, no error, no blocked prompt, one candidate 0)."""
    if "error" in obj or _blocked(obj):
        return False
    candidates = obj.get("candidates")
    if candidates is None:
        return True
    if not isinstance(candidates, list) or len(candidates) > 1:
        return False
    if not candidates:
        return True
    candidate = candidates[0]
    if not isinstance(candidate, dict) or candidate.get("index", 0) != 0:
        return False
    if candidate.get("finishReason") is not None:
        return False
    content = candidate.get("content")
    if content is None:
        return True
    if not isinstance(content, dict):
        return False
    parts = content.get("parts")
    if parts is None:
        return True
    if not isinstance(parts, list):
        return False
    return all(
        isinstance(part, dict)
        and isinstance(part.get("text"), str)
        and all(k == "text" or k in PART_METADATA for k in part)
        for part in parts
    )


def _carries_calls(obj: Mapping[str, Any]) -> bool:
    """Whether any part of the message's candidates is a ``functionCall`` (read strictly)."""
    candidates = obj.get("candidates")
    if not isinstance(candidates, list):
        return False
    for candidate in candidates:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        if isinstance(parts, list) and any(
            isinstance(p, dict) and "functionCall" in p for p in parts
        ):
            return True
    return False


class GeminiNormalizer:
    """Normalizes one ``generateContent`` response; keeps the calls' identities."""

    def __init__(self, profile: Profile | None = None) -> None:
        self._calls = WholeCalls(_NO_ID)

    @property
    def response_id(self) -> str | None:
        return None  # ``responseId`` is not needed to match litellm's chunks

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one SSE message of a streamed response."""
        data = message.data
        obj = load_object(data)
        if _carries_calls(obj):
            obj = load_strict(data)  # no duplicate key merged away in a call's arguments
        return self._response(obj)

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole (``:generateContent``) response: it must carry the finish."""
        obj = load_strict(data)
        events = self._response(obj)
        if not any(isinstance(e, (Finish, StreamError)) for e in events):
            raise WireFault(R.MISSING_FINISH)
        return events

    def _response(self, obj: Mapping[str, Any]) -> list[WireEvent]:
        if "error" in obj:
            return [StreamError("error")]
        if _blocked(obj):
            raise WireFault(R.REFUSAL)
        candidate = _candidate(obj)
        if candidate is None:
            return [Metadata()]  # usage or model metadata only
        events: list[WireEvent] = []
        content = candidate.get("content")
        if content is not None:
            if not isinstance(content, dict):
                raise WireFault(R.MALFORMED_EVENT)
            parts = content.get("parts")
            if parts is not None:
                if not isinstance(parts, list):
                    raise WireFault(R.MALFORMED_EVENT)
                for part in parts:
                    events.extend(self._part(part))
        reason = candidate.get("finishReason")
        if reason is None:
            return events or [Metadata()]
        if not isinstance(reason, str) or not reason:
            raise WireFault(R.MALFORMED_EVENT)
        events.append(Finish(0, reason))
        events.append(DoneMarker())
        return events

    def _part(self, part: object) -> list[WireEvent]:
        if not isinstance(part, dict):
            raise WireFault(R.MALFORMED_EVENT)
        kinds = [k for k in part if k not in PART_METADATA]
        if kinds == ["text"]:
            text = part["text"]
            if not isinstance(text, str):
                raise WireFault(R.MALFORMED_EVENT)
            return [TextDelta(0, text)] if text else []
        if kinds == ["functionCall"]:
            return self._call(part["functionCall"])
        if not kinds:
            return []  # metadata alone (a thought signature)
        raise WireFault(R.UNSUPPORTED_TOOL_TYPE, self._calls.count)

    def _call(self, call: object) -> list[WireEvent]:
        index = self._calls.count
        if not isinstance(call, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        if any(k in call for k in PARTIAL_CALL_KEYS):
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        name = call.get("name")
        arguments = call.get("args", {})
        return self._calls.call(call.get("id"), name, arguments)


def _function_calls(value: Any) -> list[dict[str, Any]]:
    """The ``functionCall`` objects of one message's value, in order (as far as they are
    shaped as the normalizer reads them: anything else is refused there)."""
    found: list[dict[str, Any]] = []
    candidates = value.get("candidates") if isinstance(value, dict) else None
    for candidate in candidates if isinstance(candidates, list) else []:
        content = candidate.get("content") if isinstance(candidate, dict) else None
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else []:
            call = part.get("functionCall") if isinstance(part, dict) else None
            if isinstance(call, dict):
                found.append(call)
    return found


class GeminiIdentities:
    """Writes ``gemini-call-<n>`` into each call sent without an ``id``, ``n`` counting every
    call of the body in arrival order, as :class:`~.whole.WholeCalls` names it. litellm's
    Gemini parser keeps a call's ``id`` and draws ``call_`` and a uuid for a call without one
    (1.108.7 and 1.110.2), so the body released so written reaches the caller under the
    gate's identities (a body that mixes calls with and without ids is refused, never
    released)."""

    __slots__ = ("_count",)

    def __init__(self) -> None:
        self._count = 0

    def identify(self, value: Any) -> None:
        for call in _function_calls(value):
            if call.get("id") is None:
                call["id"] = f"{_NO_ID}{self._count}"
            self._count += 1


# ---- the wire's answers to the core ----------------------------------------------------------
class GeminiWire(WireSpec):
    """The Gemini ``generateContent`` wire (see :class:`~.base.WireSpec` and the module
    docstring)."""

    def normalizer(self, profile: Profile) -> GeminiNormalizer:
        return GeminiNormalizer(profile)

    def identities(self, streamed: bool) -> GeminiIdentities:
        return GeminiIdentities()

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        # No tool-specific stop exists: calls are released only under STOP; a finish that
        # says a call went wrong is refused whatever was streamed.
        if calls and finish_reason != STOP:
            return R.FINISH_REASON_MISMATCH
        if finish_reason not in CARRIER_FINISH:  # a call failure, or a finish not known
            return R.FINISH_REASON_MISMATCH
        return None

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if carrier.kind == "responses":
            # The Responses API, bridged by litellm to chat over this wire.
            return bridged_by_position_fault(ledger, carrier, _COMPLETE)
        return verdict(
            matches_by_position(ledger, carrier, CARRIER_FINISH.get(ledger.finish_reason or ""))
        )

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


WIRE = GeminiWire(Wire.GEMINI)
