"""The one interface every wire gives the rest of the core: :class:`WireSpec`.

The attempt, the ledger, the call accumulator and the withholder never ask which wire they
serve; they ask the wire's :class:`WireSpec` (``wires.WIRES[wire]``) the questions whose
answer differs between wires:

* how its body is framed: the media type of a streamed and of a whole body
  (:attr:`WireSpec.media`), the framing decoder (:meth:`WireSpec.decoder`: SSE, or
  Ollama's newline-delimited JSON) and how a message is written again for the client
  (:meth:`WireSpec.encode`);
* its normalizer (:meth:`WireSpec.normalizer`), and how the attempt's hot loop reads a
  decoded message through it (:meth:`WireSpec.readers`);
* whether a request can be gated as asked, before it is sent (:meth:`WireSpec.request_fault`);
* whether the wire's own finish contradicts the calls it streamed, once its terminal was
  reached (:meth:`WireSpec.terminal_fault`);
* whether what the carrier (litellm) assembled equals the wire (:meth:`WireSpec.carrier_fault`),
  and whether a gate that lets the client parse the withheld wire itself must first run the
  client's parser over it for that check (:attr:`WireSpec.reparsed`);
* for the withholding client: which named SSE messages the client reads
  (:meth:`WireSpec.reads_event`), whether it reads them by name (:attr:`WireSpec.named`),
  what may pass before the decision (:meth:`WireSpec.live_rule`, a fresh rule per body, since
  a wire's rule may learn from the events it saw) and whether an approved whole body is
  asked of the client's converter (:attr:`WireSpec.whole_body_checked`), and, where the client
  keeps an id the wire sends but draws its own for a call sent without one, what writes the
  wire's identity of such a call into the values it releases (:meth:`WireSpec.identities`).

The state tables (``state.STREAM_TABLES``, ``state.CALL_TABLES``) and the request paths
(``state.WIRE_PATHS``) are the wire's table entries; with its module here and its entry in
``wires.WIRES``, that is the whole of a wire. The defaults below are the strictest answer
(nothing passes live, nothing read by name, no carrier cross-check passes, the client's parse
cross-checked wherever the client parses the wire), so a wire that forgets one is refused,
never let through.

This module imports no other module of the core's decision (``ledger``, ``call``,
``attempt``): a wire module only reads a ledger it is handed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ..decision.carrier import Carrier
from ..decision.events import WireEvent
from ..decision.profiles import Profile
from ..decision.state import Wire
from ..errors import QuarantineReason
from ..framing.decoder import FramingDecoder, SSEMessage
from ..framing.sse import SSEDecoder

if TYPE_CHECKING:
    from ..decision.call import CallAccumulator

R = QuarantineReason


class LedgerView(Protocol):
    """What a wire's carrier rule reads of the attempt's ledger (:class:`~..ledger.Ledger`):
    its calls by key and in order, the finish it recorded, and which Anthropic blocks took
    their arguments from their start block."""

    calls: dict[int, CallAccumulator]
    finish_reason: str | None
    from_start: set[int]
    choices: int
    finishes: dict[int, str]

    def ordered(self) -> list[CallAccumulator]: ...


Read = Callable[[str, str, "str | None"], list[WireEvent]]
"""One decoded SSE message's fields (event, data, last id) in, its events out."""
Known = Callable[[str], "tuple[int | None, str] | None"]
"""A fast path for a data line of a known shape: (tool index or None for text, the string)."""


class Normalizer(Protocol):
    """A wire's normalizer: decoded messages (or a whole body) in, the gate's events out."""

    @property
    def response_id(self) -> str | None: ...

    def message(self, message: SSEMessage) -> list[WireEvent]: ...

    def body(self, data: str) -> list[WireEvent]: ...


class LiveRule(Protocol):
    """What may reach the caller before the decision, asked once per message of one body."""

    def passes_live(self, value: Mapping[str, Any]) -> bool: ...


class _Stateless:
    """A :class:`LiveRule` over a pure function of one message's value."""

    __slots__ = ("passes_live",)

    def __init__(self, passes_live: Callable[[Mapping[str, Any]], bool]) -> None:
        self.passes_live = passes_live


def _held(value: Mapping[str, Any]) -> bool:
    return False


class Identities(Protocol):
    """Writes the wire's identity of each call sent without an id into one body's message
    values, in arrival order (:meth:`WireSpec.identities`)."""

    def identify(self, value: Any) -> None:
        """Give each call of ``value`` (one message's decoded data, changed in place) that
        carries no id the identity the wire's normalizer gives it."""


class WireSpec:
    """One wire's answers to the core (see the module docstring); one instance per wire."""

    wire: Wire
    named = False
    """Whether the client reads the wire's SSE messages by their ``event:`` name (kept when a
    message is re-encoded)."""
    whole_body_checked = False
    """Whether an approved whole body is asked of the client's converter of whole results."""
    reparsed = True
    """Whether the client's parser of this wire may hand over calls shaped otherwise than the
    wire (renumbered, merged, re-serialized). Where the gate withholds the wire and lets the
    client parse what it releases (the callback), it then runs the client's own parser over
    the held body and cross-checks the result with the wire (:meth:`carrier_fault`) before
    anything held goes out; with no such parser to run, the body is refused. False only for
    a wire whose client keeps each call's key, id, name and text exactly as on the wire."""

    framing = "SSE"
    """The name of its streamed body's framing, for people (``toolgate routes``)."""
    media: Mapping[bool, str] = {True: "text/event-stream", False: "application/json"}
    """The media type of a streamed (True) and of a whole (False) body."""

    def __init__(self, wire: Wire) -> None:
        self.wire = wire

    def decoder(self, max_event_bytes: int) -> FramingDecoder:
        """A framing decoder for one body (SSE unless the wire says otherwise)."""
        return SSEDecoder(max_event_bytes=max_event_bytes)

    def encode(self, message: SSEMessage, value: Any) -> bytes:
        """``value`` (the message's data, decoded) as the client reads it again: ASCII JSON
        on one ``data:`` line, the ``event:`` name kept when the wire is read by name."""
        data = b"data: " + json.dumps(value, separators=(",", ":")).encode("ascii") + b"\n\n"
        if self.named and message.event:
            return b"event: " + message.event.encode("ascii", "replace") + b"\n" + data
        return data

    def identities(self, streamed: bool) -> Identities | None:
        """Where the client keeps a call's id when the wire sends one but draws an id of its
        own for a call sent without one (Gemini's ``functionCall.id``; a whole Ollama body's
        ``tool_calls[].id``): a fresh writer of each such call's identity (the one the gate
        decides on, ``gemini-call-<n>``) into the message values of one body (``streamed``
        or whole), which the withholding client releases so written, so the client hands
        every call over under the identity the gate decided on. None: the client keeps the
        wire's ids as they are, or draws its own whatever the wire sends (nothing written
        could reach the caller)."""
        return None

    def normalizer(self, profile: Profile) -> Normalizer:
        raise NotImplementedError

    def choices(self, fields: Mapping[str, Any]) -> int:
        """How many choices a request (its body's ``fields``) asks this wire to stream, each
        read apart (:meth:`choices_normalizer`); one on every wire but chat completions."""
        return 1

    def choices_normalizer(self, profile: Profile, choices: int) -> Normalizer:
        """The normalizer of a response of ``choices`` choices (:meth:`choices`)."""
        return self.normalizer(profile)

    def choices_live_rule(self, choices: int) -> LiveRule:
        """:meth:`live_rule` for a response of ``choices`` choices."""
        return self.live_rule()

    def readers(self, normalizer: Normalizer) -> tuple[Read, Known | None]:
        """The attempt's reader of one message's fields, and a fast path if the wire has one."""

        def read(event: str, data: str, last_id: str | None = None) -> list[WireEvent]:
            return normalizer.message(SSEMessage(event, data, last_id))

        return read, None

    def request_fault(self, fields: Mapping[str, Any]) -> QuarantineReason | None:
        """Why a request cannot be gated as asked, before it is sent; None when it can."""
        return None

    def terminal_fault(
        self, finish_reason: str | None, calls: bool, stop_accepted: Callable[[], bool]
    ) -> QuarantineReason | None:
        """Whether the wire's own finish contradicts whether it streamed calls (``calls``).
        ``stop_accepted``: whether the route's profile takes ``stop`` with calls as the
        terminal for this request."""
        return None

    def carrier_fault(self, ledger: LedgerView, carrier: Carrier) -> QuarantineReason | None:
        """Why the carrier disagrees with this wire's ledger, or None when it matches."""
        return R.CARRIER_MISMATCH

    def reads_event(self, event: str) -> bool:
        """Whether the client reads an SSE message of this ``event:`` name at all."""
        return True

    def live_rule(self) -> LiveRule:
        """A fresh rule of what may pass live, for one body."""
        return _Stateless(_held)

    def __repr__(self) -> str:
        return f"<wire {self.wire.value}>"


def stateless(passes_live: Callable[[Mapping[str, Any]], bool]) -> LiveRule:
    """A :class:`LiveRule` over a pure function of one message's value."""
    return _Stateless(passes_live)


# ---- what the carrier checks share -----------------------------------------------------------
def same_json(theirs: str, ours: str) -> bool:
    """Whether two texts hold the same JSON value (one input object serialized twice)."""
    try:
        same: bool = json.loads(theirs) == json.loads(ours)
    except (ValueError, RecursionError):
        same = False
    return same


def holds(call: CallAccumulator, text: object) -> bool:
    """Whether ``text`` is the call's withheld text (compared on bytes, nothing decoded)."""
    return isinstance(text, str) and call.same_text(text)


def verdict(matches: bool) -> QuarantineReason | None:
    """A carrier check's answer as the attempt takes it."""
    return None if matches else R.CARRIER_MISMATCH


def chat_carrier_matches(ledger: LedgerView, carrier: Carrier) -> bool:
    """litellm's chat chunks for choice 0 against a wire whose calls are keyed alike (by tool
    index, or an item's ``output_index``): same keys, ids, names, texts and finish reason."""
    calls = ledger.calls
    if (
        carrier.foreign
        or carrier.finish_reason != ledger.finish_reason
        or set(carrier.calls) != set(calls)
    ):
        return False
    if carrier.finishes and any(
        ledger.finishes.get(choice) != reason for choice, reason in carrier.finishes.items()
    ):
        return False
    for index, theirs in carrier.calls.items():
        ours = calls[index]
        if (theirs.call_id, theirs.name) != (ours.call_id, ours.name):
            return False
        if not holds(ours, theirs.arguments):
            return False
    # Equal texts: litellm's copy serves as the released text (the chunk the carrier
    # releases shows it), and none is decoded.
    for index, theirs in carrier.calls.items():
        calls[index].adopt(theirs.arguments)
    return True


def bridged_anthropic_matches(ledger: LedgerView, carrier: Carrier) -> bool:
    """Anthropic events litellm made from a chat or Responses wire (``/v1/messages`` in front
    of a chat-completions or Responses model): litellm numbers the blocks itself, so calls
    match by id; ``tool_use`` is said exactly when the wire streamed calls. Only function
    calls map to ``tool_use`` blocks: any other tool item is a block the gate cannot match."""
    if carrier.foreign:
        return False
    calls = ledger.ordered()
    if any(c.kind != "function_call" for c in calls):
        return False
    if (carrier.finish_reason == "tool_use") != bool(calls):
        return False
    mine = {c.call_id: c for c in calls}
    theirs = {c.call_id: (c.name, c.arguments) for c in carrier.calls.values()}
    if len(theirs) != len(carrier.calls) or set(mine) != set(theirs):
        return False
    return all(
        theirs[k][0] == call.name
        and (holds(call, theirs[k][1]) or same_json(theirs[k][1], call.join()))
        for k, call in mine.items()
    )


def bridged_responses_fault(
    ledger: LedgerView, carrier: Carrier, complete: frozenset[str]
) -> QuarantineReason | None:
    """litellm's Responses events, made by its chat bridge, against a wire whose calls it
    hands on under the wire's own ids (Bedrock's Converse, Anthropic's Messages).

    ``complete``: the wire's finishes that end a whole response. Any other finish (text cut
    by the token limit, a refusal, a pause) is an incomplete response whatever the carrier
    says (``response_incomplete``), as on a chat wire. A complete wire needs a carrier that
    says ``completed`` and contradicts nothing; its function-call items, in output order,
    must be the wire's calls in order, by call id, name and argument text. Where the wire
    gave a call its arguments whole (``ledger.from_start``: a whole body's object, or a tool
    block with no fragment), litellm serializes them again, so there the same JSON value is
    enough; a streamed call's text must be held byte for byte."""
    if ledger.finish_reason not in complete:
        return R.RESPONSE_INCOMPLETE
    if carrier.foreign or carrier.finish_reason != "completed":
        return R.CARRIER_MISMATCH
    calls = ledger.ordered()
    theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    if len(theirs) != len(calls):
        return R.CARRIER_MISMATCH
    for ours, their in zip(calls, theirs, strict=True):
        if (their.call_id, their.name) != (ours.call_id, ours.name):
            return R.CARRIER_MISMATCH
        if holds(ours, their.arguments):
            continue
        if ours.index not in ledger.from_start or not same_json(their.arguments, ours.join()):
            return R.CARRIER_MISMATCH
    return None


__all__ = [
    "Identities",
    "Known",
    "LiveRule",
    "Normalizer",
    "Read",
    "WireSpec",
    "bridged_anthropic_matches",
    "bridged_responses_fault",
    "chat_carrier_matches",
    "holds",
    "same_json",
    "stateless",
    "verdict",
]
