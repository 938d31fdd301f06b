"""The chat-completions wire: its normalizer, what may pass before the decision, and what a
request may ask.

The normalizer (:class:`ChatNormalizer`) reads every chunk in full. Its input is one decoded
SSE message (or, for ``stream=False``, one whole response body); its output is a list of
:mod:`events`. It checks what the *shape* of the chat protocol guarantees and litellm does
not:

* ``data: [DONE]`` is the end-of-stream marker; any other data must be a JSON object.
* An object with an ``error`` member, or an SSE ``event: error``, is an in-stream error.
* Choice 0 is the only choice unless the request asked for ``n > 1`` (:func:`choices_asked`):
  then each choice ``0 .. n-1`` is read on its own (:class:`ChoicesNormalizer`), with its
  own calls, pinned identities and terminal. Any other index on the wire is a fault.
* ``delta.refusal`` with text and the legacy ``delta.function_call`` are faults: neither can
  be gated as a tool call, and passing them through would hand the caller an ungated action.
* Tool-call fragments: ``index`` must be a non-negative integer; the first fragment of an
  index must carry a non-empty ``id`` and ``function.name`` (pinned from then on). A later
  fragment may repeat them identically, or leave them out (absent, null or ""); a different
  value, or an ``id`` already pinned to another index, is an identity conflict. Names are
  never concatenated. ``type``, when given, must be ``function``.

Where a route really sends another shape, its profile (``core/decision/profiles.py``) says so:
Mistral's whole calls without ``index`` and its ``content`` as a list of typed parts.

Faults are raised as :class:`WireFault` (``core/wires/loads.py``), which carries a reason
and never the message text.

The withholding client needs a cheaper, one-sided answer for each chunk it is about to pass
on: does it carry only visible text (role, content, reasoning) for choice 0, nothing of a
tool call, no finish reason? That answer lives here, once: :func:`passes_live`. A chunk it
does not pass is held until the gate decided.

Calls hide on this wire only in ``delta.tool_calls``, the legacy ``delta.function_call``
and, in a whole body, ``message.tool_calls``; any delta key other than the visible-text ones
is held, so a call in a field the gate does not know cannot pass live either.
"""

from __future__ import annotations

import json
import json.decoder
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from ..decision.carrier import Carrier
from ..decision.events import (
    ArgumentDelta,
    CallStarted,
    ChoiceFinish,
    DoneMarker,
    Finish,
    Metadata,
    ResponseStarted,
    StreamError,
    TextDelta,
    Unknown,
    WireEvent,
    slot,
)
from ..decision.profiles import STRICT, Deviation, Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.sse import SSEMessage
from .base import (
    Known,
    LedgerView,
    LiveRule,
    Normalizer,
    Read,
    WireSpec,
    bridged_anthropic_matches,
    chat_carrier_matches,
    holds,
    stateless,
    verdict,
)
from .loads import WireFault, load_object

R = QuarantineReason

VISIBLE_DELTA_KEYS = frozenset({"role", "content", "refusal", "reasoning_content"})
"""Delta fields that carry only what the caller reads (a refusal is a fault, found later)."""

LITELLM_VISIBLE_DELTA_FIELDS: tuple[str, ...] = (
    *sorted(VISIBLE_DELTA_KEYS - {"refusal"}),
    "thinking_blocks",
    "audio",
    "images",
)
"""The same rule read on litellm's chat chunks: the fields of a delta that make a chunk worth
handing on once its tool calls are taken out (``edge/carriers/chat.py``).

They are the wire's visible fields less ``refusal`` (a refusal with text is a fault on the
wire, so its chunk is never handed on), plus the fields litellm itself fills from other
providers' wires: ``thinking_blocks`` (reasoning), ``audio`` and ``images``. ``content``
comes first: it is the field most chunks carry, and the check stops at the first one set.
"""


def passes_live(chunk: Mapping[str, Any]) -> bool:
    """Whether a chat chunk holds nothing the gate withholds: text, role or usage only."""
    choices = chunk.get("choices") or []
    if not isinstance(choices, list):
        return False
    for choice in choices:
        if not isinstance(choice, dict) or choice.get("index", 0) != 0:
            return False
        if choice.get("finish_reason") is not None:
            return False
        delta = choice.get("delta") or {}
        if not isinstance(delta, dict):
            return False
        if any(v is not None for k, v in delta.items() if k not in VISIBLE_DELTA_KEYS):
            return False
    return True


def choices_live_rule(choices: int) -> LiveRule:
    """:func:`passes_live` for a response of several choices: the text of any choice
    ``0 .. choices-1`` passes live (a rule of its own, so one choice pays nothing for it)."""

    def passes(chunk: Mapping[str, Any]) -> bool:
        choices_seen = chunk.get("choices") or []
        if not isinstance(choices_seen, list):
            return False
        for choice in choices_seen:
            if not isinstance(choice, dict):
                return False
            index = choice.get("index", 0)
            if type(index) is not int or not 0 <= index < choices:
                return False
            if choice.get("finish_reason") is not None:
                return False
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                return False
            if any(v is not None for k, v in delta.items() if k not in VISIBLE_DELTA_KEYS):
                return False
        return True

    return stateless(passes)


REQUEST_FIELDS = ("n", "tool_choice")
"""The top-level fields of a chat request the gate reads (``Attempt.bind_request``)."""


def request_fields(body: bytes) -> dict[str, object]:
    """The :data:`REQUEST_FIELDS` a chat request body holds; none when it is no JSON object."""
    try:
        value = json.loads(body) if body else None
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: value[k] for k in REQUEST_FIELDS if k in value}


def request_fields_of(call: Mapping[str, Any]) -> dict[str, Any]:
    """The :data:`REQUEST_FIELDS` of a call's arguments as its request will send them: the
    call's own, and over them any in its ``extra_body`` (which the OpenAI SDK merges into
    the body it sends)."""
    fields = {k: call[k] for k in REQUEST_FIELDS if k in call}
    extra = call.get("extra_body")
    if isinstance(extra, Mapping):
        fields.update({k: extra[k] for k in REQUEST_FIELDS if k in extra})
    return fields


MAX_CHOICES = 128
"""The most choices a request may ask for (OpenAI's own bound on ``n``)."""


def choices_asked(fields: Mapping[str, Any]) -> int | None:
    """How many choices a chat request asks for (``n``; absent or null: one), or None when
    ``n`` is no integer in ``1 .. MAX_CHOICES``."""
    n = fields.get("n")
    if n is None:
        return 1
    if type(n) is not int or not 1 <= n <= MAX_CHOICES:
        return None
    return n


def request_fault(fields: Mapping[str, Any]) -> QuarantineReason | None:
    """Why a chat request cannot be gated as asked, before it is sent; None when it can.

    ``n`` greater than one asks for several choices, each with its own calls and terminal:
    the wire reads each on its own (:class:`ChoicesNormalizer`). An ``n`` that is no whole
    number of choices the gate can count is refused before any byte goes out. Where litellm
    does not keep the choices apart, the edge refuses ``n > 1`` itself (``docs/routes.md``).
    """
    if choices_asked(fields) is None:
        return QuarantineReason.UNSUPPORTED_REQUEST
    return None


# ---- the normalizer --------------------------------------------------------------------------
# json.loads' own string scanner (C): a JSON string's value and the offset past its closing
# quote, refusing what json.loads refuses inside a string (control characters, bad escapes).
_scanstring: Any = json.decoder.scanstring  # type: ignore[attr-defined]


class _Template(NamedTuple):
    """A data line of a stream whose lines differ only in one string: the text or arguments.

    ``prefix`` ends with the string's opening quote, ``suffix`` starts with its closing quote;
    ``tool_index`` is the tool index of an argument fragment (None: visible text). See
    :meth:`ChatNormalizer._learn` for why a line ``prefix + s + suffix`` is then known
    without parsing it. ``start`` and ``tail`` are the two parts' lengths.
    """

    prefix: str
    suffix: str
    tool_index: int | None
    start: int
    tail: int


def _template(prefix: str, suffix: str, index: int | None) -> _Template:
    return _Template(prefix, suffix, index, len(prefix), len(suffix))


_TEMPLATES = 4  # interleaved calls each have their own line (the tool index differs)
_LEARNS = 8  # attempts per stream: a wire whose other fields change per line gains nothing
_TEMPLATE_CHARS = 4096  # a text or fragment line is a few hundred; bounds what is kept
_SENTINELS = ("A", "B")


class ChatNormalizer:
    """Normalizes one chat-completions response; keeps the pinned call identities."""

    def __init__(self, profile: Profile = STRICT) -> None:
        self._identity: dict[int, tuple[str, str]] = {}
        self._ids: dict[str, int] = {}
        self._response_id: str | None = None
        self._parts = profile.accepts(Deviation.CONTENT_AS_PARTS)
        self._whole = profile.accepts(Deviation.WHOLE_CALLS_WITHOUT_INDEX)
        self._templates: list[_Template] = []
        self._learns = 0

    @property
    def response_id(self) -> str | None:
        return self._response_id

    def message(self, message: SSEMessage) -> list[WireEvent]:
        """Normalize one SSE message of a streamed response."""
        return self.fields(message.event, message.data)

    def fields(self, event: str, data: str, last_id: str | None = None) -> list[WireEvent]:
        """:meth:`message`, given the message's fields (this wire does not read its id)."""
        if not event or event == "message":
            known = self.known(data)
            if known is not None:
                index, value = known
                if index is None:
                    return [TextDelta(0, value)]
                return [ArgumentDelta(0, index, value)]
        return self.read(event, data)

    def read(self, event: str, data: str, last_id: str | None = None) -> list[WireEvent]:
        """:meth:`fields` for a message :meth:`known` was already asked about and did not
        know: read in full (and learned from)."""
        if event and event != "message":
            if event == "error":
                return [StreamError("event")]
            return [Unknown(event[:64])]
        if data == "[DONE]":
            return [DoneMarker()]
        obj = load_object(data)
        events = self.chunk(obj, streamed=True)
        if len(events) == 1 and self._learns < _LEARNS and len(data) <= _TEMPLATE_CHARS:
            self._learn(data, obj, events[0])
        return events

    def known(self, data: str) -> tuple[int | None, str] | None:
        """The one event of a data line that is a template's (see :meth:`_learn`), as
        ``(tool index, fragment)`` or ``(None, text)``; None for any other line.

        What :meth:`fields` returns for such a line, without building the event: the
        attempt's loop applies it to the state and the ledger directly.
        """
        for template in self._templates:
            if data.startswith(template.prefix) and data.endswith(template.suffix):
                value = _middle(data, template)
                if value:
                    return template.tool_index, value
                break
        return None

    def _learn(self, data: str, obj: dict[str, Any], event: WireEvent) -> None:
        """Keep ``data`` as a template when its one event is text or an argument fragment.

        Theory. The line parsed to ``obj``, whose one string at a known place (the delta's
        ``content``, or its one fragment's ``function.arguments``) made the one event. Cut
        the line around that string: ``prefix`` up to its opening quote, ``suffix`` from
        its closing quote. The cut is kept only if ``prefix + "A" + suffix`` and ``prefix +
        "B" + suffix`` parse (by :func:`load_object`, the specification) to ``obj`` with
        just that string replaced by "A", and by "B". These letters can only stand inside
        a string (no JSON literal holds them, nor NaN or Infinity, which json.loads reads),
        so the prefix ends inside one; that string then holds exactly the letter,
        and it is the one at that place, since nothing else differs between the two parses
        (a key would change the keys; a value overwritten by a duplicate key would change
        nothing). So any line ``prefix + s + suffix`` in which ``s`` is read as one JSON
        string body ending at the suffix's quote (:func:`_middle` asks json.loads' own
        string scanner) parses to ``obj`` with that string replaced by the value of ``s``.

        The event such a line makes is then known: text is the same event with the new
        value whatever came before, and an argument fragment of an index already opened
        stays one (a pinned identity is never unpinned). An empty value takes the full
        path (it makes another event), as does every line that is not a template's.
        """
        if type(event) is TextDelta:
            key, index, value = "content", None, event.text
        elif type(event) is ArgumentDelta:
            key, index, value = "arguments", event.index, event.fragment
        else:
            return
        self._learns += 1
        holder = _holder(obj, index)
        if holder is None or holder.get(key) != value:
            return
        start = _string_start(data, key)
        if start is None:
            return
        # The suffix starts at the string's closing quote: where json.loads' scanner ends it.
        end = start
        try:
            _, end = _scanstring(data, start, True)
        except ValueError:  # its message quotes the line: dropped here
            return
        template = _template(data[:start], data[end - 1 :], index)
        if _middle(data, template) != value:
            return
        for sentinel in _SENTINELS:
            holder[key] = sentinel  # ``obj`` is this call's own parse: nothing else holds it
            same = False
            try:
                same = load_object(template.prefix + sentinel + template.suffix) == obj
            except (WireFault, RecursionError):  # refused, or nested past what == can compare
                same = False
            if not same:
                return
        if len(self._templates) == _TEMPLATES:
            del self._templates[0]
        self._templates.append(template)

    def body(self, data: str) -> list[WireEvent]:
        """Normalize a whole non-streamed response body (``stream=False``)."""
        events = self.chunk(load_object(data), streamed=False)
        return [*events, DoneMarker()]

    def chunk(self, obj: Mapping[str, Any], *, streamed: bool) -> list[WireEvent]:
        # Runs once per wire event: the checks are plain dict lookups, and every helper
        # appends to one list instead of building its own.
        error = obj.get("error")
        if error is not None:
            kind = error.get("type") if isinstance(error, dict) else None
            return [StreamError(kind[:64] if isinstance(kind, str) else "error")]
        events: list[WireEvent] = []
        if self._response_id is None:
            response_id = obj.get("id")
            if isinstance(response_id, str) and response_id:
                self._response_id = response_id
                events.append(ResponseStarted(response_id))
        started = len(events)
        choices = obj.get("choices", [])
        if not isinstance(choices, list):
            raise WireFault(R.MALFORMED_EVENT)
        for choice in choices:
            self._choice(choice, streamed, events)
        if len(events) == started:  # nothing but (at most) the response's id
            events.append(Metadata())
        return events

    def _choice(self, choice: object, streamed: bool, events: list[WireEvent]) -> None:
        if not isinstance(choice, dict):
            raise WireFault(R.MALFORMED_EVENT)
        index = choice.get("index", 0)
        if index != 0 or index is False:
            raise WireFault(R.UNEXPECTED_CHOICE)
        delta = choice.get("delta" if streamed else "message") or {}
        if not isinstance(delta, dict):
            raise WireFault(R.MALFORMED_EVENT)
        if len(delta) == 1 and streamed:
            # Most chunks of a stream carry text alone or tool-call fragments alone: then
            # the checks of _delta for every other field pass, and only these are left.
            content = delta.get("content")
            if type(content) is str:
                if content:
                    events.append(TextDelta(0, content))
            elif type(tool_calls := delta.get("tool_calls")) is list:
                for fragment in tool_calls:
                    self._fragment(fragment, None, events)
            else:
                self._delta(delta, streamed, events)
        else:
            self._delta(delta, streamed, events)
        finish_reason = choice.get("finish_reason")
        if finish_reason is not None:
            if not isinstance(finish_reason, str) or not finish_reason:
                raise WireFault(R.MALFORMED_EVENT)
            events.append(Finish(0, finish_reason))

    def _delta(self, delta: dict[str, Any], streamed: bool, events: list[WireEvent]) -> None:
        if delta.get("refusal"):
            raise WireFault(R.REFUSAL)
        if delta.get("function_call") is not None:
            raise WireFault(R.LEGACY_FUNCTION_CALL)
        content = delta.get("content")
        if isinstance(content, list) and self._parts:
            self._content_parts(content, events)
        elif content is not None:
            if not isinstance(content, str):
                raise WireFault(R.MALFORMED_EVENT)
            if content:
                events.append(TextDelta(0, content))
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            if not isinstance(tool_calls, list):
                raise WireFault(R.MALFORMED_EVENT)
            for position, fragment in enumerate(tool_calls):
                self._fragment(fragment, None if streamed else position, events)

    @staticmethod
    def _content_parts(content: list[Any], events: list[WireEvent]) -> None:
        """Typed content parts (profile): ``text`` is visible text, ``thinking`` reasoning."""
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                text = part.get("text")
                if not isinstance(text, str):
                    raise WireFault(R.MALFORMED_EVENT)
                if text:
                    events.append(TextDelta(0, text))
            elif kind != "thinking":
                raise WireFault(R.MALFORMED_EVENT)

    def _fragment(self, fragment: object, position: int | None, events: list[WireEvent]) -> None:
        if type(fragment) is dict and len(fragment) == 2:
            # Most fragments of a call: ``{"index": i, "function": {"arguments": "..."}}``
            # for a call already opened. Every check below passes for exactly these.
            index = fragment.get("index")
            function = fragment.get("function")
            if (
                type(index) is int
                and index in self._identity
                and type(function) is dict
                and len(function) == 1
            ):
                arguments = function.get("arguments")
                if type(arguments) is str:
                    if arguments:
                        events.append(ArgumentDelta(0, index, arguments))
                    return
        if not isinstance(fragment, dict):
            raise WireFault(R.MALFORMED_EVENT)
        if position is None and "index" not in fragment and self._whole:
            # Profile: a fragment without ``index`` is one whole call, opening the next index.
            # It must carry its identity (checked below) and its arguments.
            position = len(self._identity)
            function = fragment.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
                raise WireFault(R.MISSING_CALL_IDENTITY, position)
        # A whole body lists its calls without ``index``: the list position is the index.
        index = fragment.get("index", position)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise WireFault(R.INVALID_CALL_INDEX)
        kind = fragment.get("type")
        if kind is not None and kind != "function":
            raise WireFault(R.UNSUPPORTED_TOOL_TYPE, index)
        function = fragment.get("function") or {}
        if not isinstance(function, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        call_id = fragment.get("id")
        name = function.get("name")
        arguments = function.get("arguments")
        for value in (call_id, name, arguments):
            if value is not None and not isinstance(value, str):
                raise WireFault(R.MALFORMED_EVENT, index)
        pinned = self._identity.get(index)
        if pinned is None:
            if not call_id or not name:
                raise WireFault(R.MISSING_CALL_IDENTITY, index)
            if call_id in self._ids:
                raise WireFault(R.IDENTITY_CONFLICT, index)
            self._identity[index] = (call_id, name)
            self._ids[call_id] = index
            events.append(CallStarted(0, index, call_id, name))
        elif (call_id and call_id != pinned[0]) or (name and name != pinned[1]):
            raise WireFault(R.IDENTITY_CONFLICT, index)
        if arguments:
            events.append(ArgumentDelta(0, index, arguments))


class ChoicesNormalizer(ChatNormalizer):
    """Normalizes a chat response of several choices (a request for ``n > 1``).

    Each choice ``0 .. n-1`` is read as :class:`ChatNormalizer` reads choice 0: its calls'
    identities are pinned per choice (tool index 0 of choice 0 and tool index 0 of choice 1
    are two calls; a call id is pinned to one call across all choices), and its events carry
    its choice. A choice's ``finish_reason`` is its own terminal: after it only content-free
    chunks of that choice may come. It is a :class:`ChoiceFinish` while another choice is
    still open, and the last choice's is the stream's :class:`Finish`, so a stream whose
    ``[DONE]`` (or whole body) comes while a choice has no terminal is ``missing_finish``.

    The template fast path of :meth:`ChatNormalizer.known` is not learned here (a line's
    choice index would be part of its template), so a one-choice stream pays nothing for this
    class, and a stream of several reads every line in full.
    """

    def __init__(self, profile: Profile = STRICT, choices: int = 2) -> None:
        super().__init__(profile)
        self._learns = _LEARNS  # never learns a template (see the class docstring)
        self._choices = choices
        self._identities: list[dict[int, tuple[str, str]]] = [{} for _ in range(choices)]
        self._finished: dict[int, str] = {}

    @property
    def choices(self) -> int:
        return self._choices

    def _choice(self, choice: object, streamed: bool, events: list[WireEvent]) -> None:
        if not isinstance(choice, dict):
            raise WireFault(R.MALFORMED_EVENT)
        at = choice.get("index", 0)
        if type(at) is not int or not 0 <= at < self._choices:
            raise WireFault(R.UNEXPECTED_CHOICE)
        own: list[WireEvent] = []
        self._identity = self._identities[at]
        try:
            super()._choice({**choice, "index": 0}, streamed, own)
        except WireFault as fault:
            if fault.index is None:
                raise
            # The call at fault, named by the attempt's key of (choice, tool index).
            raise WireFault(fault.reason, slot(at, fault.index, self._choices)) from None
        if at in self._finished and own:
            # After a choice's terminal only content-free chunks of it may come.
            raise WireFault(R.EVENT_AFTER_TERMINAL)
        for event in own:
            if type(event) is TextDelta:
                events.append(TextDelta(at, event.text))
            elif type(event) is ArgumentDelta:
                events.append(ArgumentDelta(at, event.index, event.fragment))
            elif type(event) is CallStarted:
                events.append(CallStarted(at, event.index, event.call_id, event.name))
            elif type(event) is Finish:
                self._finished[at] = event.finish_reason
                if len(self._finished) == self._choices:
                    events.append(Finish(at, event.finish_reason))
                else:
                    events.append(ChoiceFinish(at, event.finish_reason))


def _holder(obj: dict[str, Any], index: int | None) -> dict[str, Any] | None:
    """The dict holding the event's string: the delta (text) or the fragment's function."""
    choices = obj.get("choices")
    if type(choices) is not list or len(choices) != 1 or type(choices[0]) is not dict:
        return None
    delta = choices[0].get("delta")
    if type(delta) is not dict or index is None:
        return delta if type(delta) is dict else None
    calls = delta.get("tool_calls")
    if type(calls) is not list or len(calls) != 1 or type(calls[0]) is not dict:
        return None
    function = calls[0].get("function")
    return function if type(function) is dict else None


def _string_start(data: str, key: str) -> int | None:
    """Where the string value of the only ``"key":`` member of ``data`` starts (after its
    opening quote), or None. Only a guess: :meth:`ChatNormalizer._learn` proves it."""
    quoted = f'"{key}"'
    at = data.find(quoted)
    if at < 0 or data.find(quoted, at + 1) >= 0:
        return None
    rest = data[at + len(quoted) :]
    after = rest.lstrip(" \t\r\n")
    if after[:1] != ":":
        return None
    after = after[1:].lstrip(" \t\r\n")
    if after[:1] != '"':
        return None
    return len(data) - len(after) + 1


def _middle(data: str, template: _Template) -> str | None:
    """The value of the string between ``template``'s prefix and suffix, or None when that
    text is not one JSON string body ending at the suffix's quote."""
    start = template.start
    stop = len(data) - template.tail
    if stop < start:
        return None
    try:
        value, end = _scanstring(data, start, True)
    except ValueError:  # its message quotes the line: dropped here
        return None
    return value if end == stop + 1 else None


# ---- the wire's answers to the core ----------------------------------------------------------
class ChatWire(WireSpec):
    """The chat-completions wire (see :class:`~.base.WireSpec`).

    Its terminal: ``finish_reason: tool_calls`` exactly when calls were streamed (or ``stop``
    with calls, where the route's profile takes it for a forced tool choice). A Responses
    carrier over this wire is litellm's Responses bridge: it numbers the items itself, so its
    calls match by call id, and a chat stream cut short (``length``, ``content_filter``) is an
    incomplete response whatever the carrier says.
    """

    whole_body_checked = True
    # litellm's chat parsers (the OpenAI SDK's, the OpenAI-compatible handler's) pass each
    # delta's tool calls on under the wire's own index, id, name and fragment, and every
    # message is first asked of the route's parser (edge/parsers.py).
    reparsed = False

    def normalizer(self, profile: Profile) -> ChatNormalizer:
        return ChatNormalizer(profile)

    def choices(self, fields: Mapping[str, Any]) -> int:
        return choices_asked(fields) or 1

    def choices_normalizer(self, profile: Profile, choices: int) -> ChatNormalizer:
        return ChatNormalizer(profile) if choices == 1 else ChoicesNormalizer(profile, choices)

    def choices_live_rule(self, choices: int) -> LiveRule:
        return self.live_rule() if choices == 1 else choices_live_rule(choices)

    def readers(self, normalizer: Normalizer) -> tuple[Read, Known | None]:
        # A line known() does not know is read without asking it again. A line named
        # "message" is not asked at all: read in full, to the same events.
        assert isinstance(normalizer, ChatNormalizer)
        return normalizer.read, normalizer.known

    def request_fault(self, fields: Mapping[str, Any]) -> QuarantineReason | None:
        return request_fault(fields)

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        terminal = finish_reason == "tool_calls" or (
            finish_reason == "stop" and calls and stop_accepted()
        )
        return None if calls == terminal else R.FINISH_REASON_MISMATCH

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        if ledger.choices != 1 and carrier.kind != "chat":
            # Several choices bridged to one Responses or Messages answer: not one carrier.
            return R.CARRIER_MISMATCH
        if carrier.kind == "anthropic":
            return verdict(bridged_anthropic_matches(ledger, carrier))
        if carrier.kind == "chat":
            return verdict(chat_carrier_matches(ledger, carrier))
        if ledger.finish_reason not in ("stop", "tool_calls"):
            # The Responses API over a chat wire: a truncated chat stream (``length``,
            # ``content_filter``) is an incomplete response, whatever the carrier says.
            return R.RESPONSE_INCOMPLETE
        if carrier.foreign or carrier.finish_reason != "completed":
            return R.CARRIER_MISMATCH
        # Bridged from chat: litellm numbers the items itself, so calls match by call id.
        mine = {c.call_id: c for c in ledger.ordered()}
        bridged = {c.call_id: (c.name, c.arguments) for c in carrier.calls.values()}
        same = (
            len(bridged) == len(carrier.calls)
            and mine.keys() == bridged.keys()
            and all(
                bridged[key][0] == call.name and holds(call, bridged[key][1])
                for key, call in mine.items()
            )
        )
        return verdict(same)

    def reads_event(self, event: str) -> bool:
        # Only unnamed messages are read on a chat wire: named ones are dropped whole.
        return event in ("", "message")

    def live_rule(self) -> LiveRule:
        return stateless(passes_live)


WIRE = ChatWire(Wire.CHAT)
