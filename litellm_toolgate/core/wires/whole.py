"""What the wires whose calls arrive whole share (Ollama's ``tool_calls``, Gemini's
``functionCall`` parts): a call's identity, its arguments as text, and how litellm's chunks
are matched to such a wire.

* Identity (:class:`WholeCalls`). A call that carries an ``id`` is that id: a non-empty
  string, never used twice in the response (``identity_conflict``). A call without one is its
  position, the n-th call of the response counting from 0 in arrival order, named with the
  wire's prefix (``ollama-call-0``, ``gemini-call-1``, ...). A response that mixes the two
  schemes is refused (``identity_conflict``): they could then name one call twice. A call
  needs a non-empty string ``name`` (``missing_call_identity``) and an object of arguments
  (``malformed_event``).
* Arguments. A whole call is opened and given all its arguments at once; its arguments text
  is the object serialized again, which the strict parser and the schema then read (the wire
  reads a message that carries calls with the duplicate-refusing loader first, so no duplicate
  key is merged away before this).
* litellm's chunks (:func:`matches_by_position`). litellm makes its own ids for these calls,
  so its chunks are matched to the wire by position, name and arguments (compared as JSON:
  litellm serializes the object again), never by id.

The wire's own checks (which fields a call sits in, what else it may carry) come first, in
the wire's module; these are the rules the wires have in common.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..decision.carrier import Carrier
from ..decision.events import ArgumentDelta, CallStarted, WireEvent
from ..errors import QuarantineReason
from .base import LedgerView, same_json
from .loads import WireFault

R = QuarantineReason


class WholeCalls:
    """The calls of one response so far, and its identity scheme once a call came."""

    __slots__ = ("_ids", "_prefix", "_with_id", "count")

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._ids: set[str] = set()
        self._with_id: bool | None = None
        self.count = 0
        """How many calls came: the position (tool index) of the next one."""

    def call(self, call_id: object, name: object, arguments: object) -> list[WireEvent]:
        """One whole call's events (opened, then its one fragment), or :class:`WireFault`."""
        index = self.count
        if not isinstance(name, str) or not name:
            raise WireFault(R.MISSING_CALL_IDENTITY, index)
        if not isinstance(arguments, dict):
            raise WireFault(R.MALFORMED_EVENT, index)
        with_id = call_id is not None
        if self._with_id is None:
            self._with_id = with_id
        elif self._with_id is not with_id:
            raise WireFault(R.IDENTITY_CONFLICT, index)
        if with_id:
            if not isinstance(call_id, str) or not call_id:
                raise WireFault(R.MISSING_CALL_IDENTITY, index)
            if call_id in self._ids:
                raise WireFault(R.IDENTITY_CONFLICT, index)
            self._ids.add(call_id)
            identity = call_id
        else:
            identity = f"{self._prefix}{index}"
        self.count += 1
        return [
            CallStarted(0, index, identity, name),
            ArgumentDelta(0, index, _serialize(arguments)),
        ]


def _serialize(value: Mapping[str, Any]) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except ValueError:  # only a circular value, which json.loads cannot build
        raise WireFault(R.MALFORMED_EVENT) from None


def matches_by_position(ledger: LedgerView, carrier: Carrier, without_calls: str | None) -> bool:
    """litellm's chat chunks against a wire of whole calls: the same calls in the same order,
    by name and arguments. litellm says ``tool_calls`` whenever it saw calls, and otherwise
    ``without_calls`` (the wire's finish as litellm maps it)."""
    if carrier.kind != "chat" or carrier.foreign:
        return False
    calls = ledger.ordered()
    expected = "tool_calls" if calls else without_calls
    if carrier.finish_reason != expected:
        return False
    theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    if len(theirs) != len(calls):
        return False
    return all(_same_call(carrier, ours, their) for ours, their in zip(calls, theirs, strict=True))


def _same_call(carrier: Carrier, ours: Any, their: Any) -> bool:
    """One of litellm's calls against the wire's at the same position: the same name and JSON
    value, and the wire's identity where the client was handed it (``Carrier.wire_ids``)."""
    if carrier.wire_ids and their.call_id != ours.call_id:
        return False
    return bool(their.name == ours.name and same_json(their.arguments, ours.join()))


def bridged_by_position_fault(
    ledger: LedgerView, carrier: Carrier, complete: frozenset[str]
) -> QuarantineReason | None:
    """litellm's Responses events, made by its chat bridge, against a wire of whole calls whose
    ids litellm replaces (Gemini's without an ``id``, every streamed Ollama call): the same
    calls in the same order, by name and JSON value, never by litellm's id (``ToolGate``'s
    release shows the wire's identity); by the wire's identity too where the withholding
    client wrote it into the body litellm parsed (``Carrier.wire_ids``). ``complete``: the
    wire's finishes that end a whole response; any other (text cut by the token limit, a
    content stop) is ``response_incomplete`` whatever the carrier says, as on the other
    bridged wires (``base.bridged_responses_fault``)."""
    if ledger.finish_reason not in complete:
        return R.RESPONSE_INCOMPLETE
    if carrier.kind != "responses" or carrier.foreign or carrier.finish_reason != "completed":
        return R.CARRIER_MISMATCH
    calls = ledger.ordered()
    theirs = [carrier.calls[i] for i in sorted(carrier.calls)]
    if len(theirs) != len(calls):
        return R.CARRIER_MISMATCH
    if all(_same_call(carrier, ours, their) for ours, their in zip(calls, theirs, strict=True)):
        return None
    return R.CARRIER_MISMATCH


__all__ = ["WholeCalls", "bridged_by_position_fault", "matches_by_position"]
