"""Withholding on the wire itself: which SSE messages go out before the decision, which wait.

Where the gate stands only between the upstream and a client that parses the wire itself
(litellm, when the gate is a callback), it withholds whole SSE messages rather than the
client's chunks. :class:`Withholder` is that rule for one body of one attempt. The edge feeds
each piece of body to the attempt first, then to :meth:`Withholder.feed`, which hands back what
may go out now and holds the rest; once the body ended, :meth:`Withholder.conclude` gives the
calls for the policy (which the edge runs, sync or awaited) and :meth:`Withholder.release` the
held messages, or nothing. The edge's sync and async streams are thin loops over these steps.

Framing. A second, framing-only decoder of the wire's framing (SSE, or Ollama's lines)
cuts the body into messages; the attempt decodes the same pieces with its own, and the edge
stops feeding at the attempt's first fault, so a message the attempt refused is never
passed on.

Live or held. A message that its wire's own classification (``wires``) says may pass live
(chat: text, role or usage only, of any choice the request asked for; Responses: text,
reasoning, items that are no tool, lifecycle events with nothing hidden in them; Anthropic:
text blocks and lifecycle events) is passed on at once, as long as nothing is held yet; from
the first message that may not, every message is held. ``[DONE]`` and ``error`` events never
pass live. A whole (non-streamed) body is held whole to its end.

What the client takes. Before a message goes out, live or held, the client's own parser for
the wire (a :data:`Check` the edge passes in) is asked whether it takes the message's value; one
it refuses quarantines the attempt as a carrier mismatch and drops everything held, so the
client can never fail part way through a released call. An approved whole chat body is asked
the same of the client's converter of whole results.

What the client will make of the calls. Where the wire's spec says the client may re-shape
its calls (``WireSpec.reparsed``: Ollama's lines, whose calls litellm numbers per line), the
edge passes the client's own parser (``parse``); at the decision it is run over the body's
data values (a whole body: its one value) and what it made is cross-checked with the wire by
the wire's carrier rule, as any carrier, before anything held goes out. A bridge's converter
(``carrier_of``) takes the place of the parser where the client hands over the bridge's output.

Encoding. Messages are passed on re-encoded by their wire (``WireSpec.encode``), one
``data:`` line each (Ollama: one newline-ended line each, as its server writes them), as
ASCII-only JSON of the same value: argument strings come out identical, and a line-based
parser can no longer lose a message split over two ``data:`` lines or cut at a raw U+2028.
Comments and ``id`` fields carry nothing the client reads and are dropped. Event names are
dropped too, except on the Anthropic wire (whose events are read by name); on a chat wire
only unnamed messages are read, so named ones are dropped whole.

Identities. Where the client keeps a call's id when the wire sends one but draws its own
for a call sent without one (``WireSpec.identities``: Gemini's; a whole Ollama body's), and
the owner asks for it (``identify``: litellm's Responses bridge, which hands the ids on to
the caller), each such call is written out with the identity the gate decides on
(``gemini-call-<n>``), in every message (a whole body: re-encoded as ASCII JSON of the same
value, so written); the client's parse is run over the values so written, and its calls
must then carry those identities (``Carrier.wire_ids``). The caller is handed the calls
under the ids the gate's records name.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import QuarantineReason, ToolCallQuarantined
from ..framing.decoder import FramingDecoder
from ..framing.sse import SSEMessage
from ..rules.policy import ToolCall
from ..wires import WIRES
from ..wires.base import Identities, LiveRule
from .attempt import Attempt, Carrier
from .state import Wire

R = QuarantineReason

Check = Callable[[Mapping[str, Any]], bool]
"""A client's parser asked about one message's value (or a whole body's): True if it takes it."""
Parse = Callable[[list[Any], bool], Carrier]
"""The client's own parser of the wire run over a body's data values in order (and whether it
was streamed): what the client would hand over, as a carrier."""

_DONE = b"data: [DONE]\n\n"
_UNREAD = object()  # a message whose data is no JSON


def _decoded(data: str | bytes) -> Any:
    """Data as a JSON value (empty data is ``null``), or ``_UNREAD``."""
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return _UNREAD


class Withholder:
    """The held messages of one body and the steps of its decision (see the module's text).

    ``whole_here``: a whole body is judged here, on the wire alone; otherwise it is only held,
    and its owner judges it later (against what the client made of it). A stream is always
    judged here. ``on_decided`` is told once the attempt's fate is settled here: released,
    refused or cancelled.
    """

    def __init__(
        self,
        attempt: Attempt,
        *,
        streamed: bool,
        whole_here: bool = False,
        checks: Mapping[Wire, Check | None] | None = None,
        body_check: Check | None = None,
        on_decided: Callable[[Attempt], None] | None = None,
        carrier_of: Callable[[list[Any]], Carrier] | None = None,
        parse: Parse | None = None,
        identify: bool = False,
    ) -> None:
        self.attempt = attempt
        # Whether calls sent without an id are released under the gate's identity of them,
        # where the wire has one to write (see the module's text), and the writer, made for
        # the wire this body is on.
        self._identify = identify
        self._ids: tuple[Wire, Identities | None] | None = None
        # What the client will make of the body (a bridge of litellm's), from the data values
        # of every message in order (a whole body: its one value): cross-checked with the wire
        # at the decision, before anything held goes out.
        self._carrier_of = carrier_of
        # The client's parser, run at the decision on a wire the client may re-shape.
        self._parse = parse
        self._values: list[Any] = []
        self.streamed = streamed
        self._here = streamed or whole_here
        self._checks = checks or {}
        self._body_check = body_check
        self._on_decided = on_decided
        # The wire's framing, made once the wire is known.
        self._framer: FramingDecoder | None = None
        self._live: tuple[Wire, LiveRule] | None = None  # the wire's rule, made for this body
        self._held: list[bytes] = []
        self.decided = False  # reading is over: the decision is under way or made
        self.passed_live = False  # whether any message went out before the decision

    def feed(self, piece: bytes) -> list[bytes]:
        """What may go out now of one piece of body; the rest is held. Once the attempt is
        refused nothing is: the piece is dropped."""
        if self.attempt.quarantined is not None:
            self._forget()
            return []
        if not self.streamed:
            self._held.append(piece)
            return []
        live: list[bytes] = []
        wire = self.attempt.wire
        spec = WIRES[wire]
        check = self._checks.get(wire)
        if self._framer is None:
            self._framer = spec.decoder(self.attempt.limits.max_event_bytes)
        for message in self._framer.feed(piece):
            if not spec.reads_event(message.event):
                continue
            if message.data == "[DONE]":
                self._held.append(_DONE)
                continue
            value = _decoded(message.data)
            is_object = isinstance(value, dict)
            ids = self._identities(wire)
            if is_object and ids is not None:
                ids.identify(value)
            if is_object and (
                self._carrier_of is not None or (self._parse is not None and spec.reparsed)
            ):
                self._values.append(value)
            fault = None
            if value is _UNREAD:
                fault = R.MALFORMED_EVENT  # the attempt refuses such a message before this
            elif is_object and check is not None and not check(value):
                fault = R.CARRIER_MISMATCH  # the client could not parse it
            if fault is not None:
                # Nothing more goes out: the attempt is refused.
                self.attempt.interrupt(fault)
                self._forget()
                return live
            out = spec.encode(message, value)
            if not self._held and is_object and self._passes_live(message, value, wire):
                live.append(out)
                self.passed_live = True
            else:
                self._held.append(out)
        return live

    def _identities(self, wire: Wire) -> Identities | None:
        """The writer of this body's identities, where the owner asked for it and the wire
        has one; None otherwise."""
        if not self._identify:
            return None
        found = self._ids
        if found is None or found[0] is not wire:
            found = self._ids = (wire, WIRES[wire].identities(self.streamed))
        return found[1]

    def _passes_live(self, message: SSEMessage, value: dict[str, Any], wire: Wire) -> bool:
        """Whether a message may go out before the decision: the core's one answer per wire."""
        if message.event == "error":
            return False
        # A wire's rule may be stateful (Anthropic learns a block's type from its start,
        # seen only while nothing is held): one rule per body, made for the wire it reads.
        live = self._live
        if live is None or live[0] is not wire:
            live = self._live = (wire, WIRES[wire].choices_live_rule(self.attempt.choices))
        return live[1].passes_live(value)

    def begin_decision(self) -> None:
        """Reading is over; from here a cancel drops nothing more (the decision is under way).
        A whole body's calls are given their identities now, before anything reads it."""
        self.decided = True
        ids = None if self.streamed else self._identities(self.attempt.wire)
        if ids is not None:
            value = _decoded(b"".join(self._held))
            if isinstance(value, dict):  # the attempt refuses any other body
                ids.identify(value)
                self._held = [json.dumps(value, separators=(",", ":")).encode("ascii")]

    def conclude(self) -> list[ToolCall] | None:
        """The calls awaiting the policy: none when the body is not judged here; None after
        a fault."""
        if self.attempt.quarantined is not None:
            return None
        if not self._here:
            return []
        attempt = self.attempt
        try:
            # Passed straight on: no local of this frame holds the carrier's argument text.
            calls = attempt.conclude(self._carrier())
        except ToolCallQuarantined:
            return None
        if attempt.choices != 1 and self.streamed and attempt.first_finish != attempt.finish_reason:
            # litellm shows one finish reason for a stream of several choices, the wire's
            # first, under index 0 (1.108.7 and 1.110.2): it would hand the caller another
            # choice's finish as choice 0's, contradicting the wire, as the carrier check
            # of a ToolGate's stream finds (edge/carriers/chat.py).
            attempt.interrupt(R.CARRIER_MISMATCH)
            return None
        return calls

    def _carrier(self) -> Carrier | None:
        """What the client will hand over, where it is simulated here: the bridge's output,
        or the client's own parse of a wire it may re-shape; None when neither applies."""
        if self._carrier_of is not None:
            return self._carrier_of(self._taken_values())
        if self._parse is not None and WIRES[self.attempt.wire].reparsed:
            carrier = self._parse(self._taken_values(), self.streamed)
            if self._identities(self.attempt.wire) is not None:
                # The client parsed the identities written here: it must hand them over.
                carrier = dataclasses.replace(carrier, wire_ids=True)
            return carrier
        return None

    def _taken_values(self) -> list[Any]:
        """The body's data values for the carrier (a whole body: its one value), forgotten
        here: argument text is not kept past the decision."""
        values = self._values if self.streamed else [_decoded(b"".join(self._held))]
        self._values = []
        return values

    def check_whole(self, approved: bool) -> None:
        """Refuse an approved whole chat body the client's converter would fail on (with an
        error of its own, quoting the body) before the client sees a byte of it."""
        attempt = self.attempt
        if approved and attempt.quarantined is None and not self._whole_carried():
            self._forget()
            attempt.interrupt(R.CARRIER_MISMATCH)

    def _whole_carried(self) -> bool:
        if (
            self.streamed
            or self._body_check is None
            or not WIRES[self.attempt.wire].whole_body_checked
        ):
            return True
        value = _decoded(b"".join(self._held))
        # The attempt itself judges a body that is no JSON object.
        return not isinstance(value, dict) or self._body_check(value)

    def release(self, approved: bool) -> list[bytes]:
        """The held messages if the gate released them, else nothing; the owner is told when
        the attempt's fate was settled here."""
        attempt = self.attempt
        if approved and attempt.quarantined is None:
            out = self._held
            if self._here:
                attempt.release()
                self._tell()
        else:
            out = []
            self._tell()
        self._forget()
        return out

    def cancel(self) -> None:
        """The reader stopped before the decision: nothing held goes out."""
        if self.decided:
            return
        self.decided = True
        self._forget()
        if self.attempt.interrupt(R.CANCELLED) is not None:
            self._tell()

    def _forget(self) -> None:
        """Settled: nothing of the body stays here, held messages, data values or the framer's
        unfinished message alike (argument text, which a traceback's frame showing this
        holder would otherwise carry)."""
        self._held = []
        self._values = []
        self._framer = None

    def _tell(self) -> None:
        if self._on_decided is not None:
            self._on_decided(self.attempt)
