"""What litellm handed the caller for one attempt, as the gate cross-checks it against the
wire: the carrier's calls and how it said the response ended. Plain data, read by the ledger
and by each wire's carrier rule (:meth:`~.wires.base.WireSpec.carrier_fault`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True, slots=True)
class CarrierCall:
    """A call as the carrier assembled it, for the cross-check."""

    call_id: str | None
    name: str | None
    arguments: str = field(repr=False)
    item_id: str | None = None
    """The Responses item id the carrier showed; compared only against a Responses wire."""


@dataclass(frozen=True, slots=True)
class Carrier:
    """What the carrier handed over: its calls and how it said the response ended.

    ``kind="chat"``: litellm's chat chunks for choice 0, calls keyed by tool index, and the
    finish reason. ``kind="responses"``: litellm's Responses events, calls keyed by the order
    of their items, and ``finish_reason`` the status of the final response event
    (``completed``, ``incomplete``, ``failed``) or None when there was none.
    """

    calls: Mapping[int, CarrierCall]
    finish_reason: str | None
    foreign: bool = False
    """The carrier handed over something the wire check cannot map (another choice, a
    legacy function call, a Responses carrier that contradicts itself): a mismatch
    whatever the calls say."""
    kind: Literal["chat", "responses", "anthropic"] = "chat"
    """``kind="anthropic"``: the Anthropic events litellm handed over, calls keyed by content
    block index, ``finish_reason`` the ``stop_reason`` they carried."""
    finishes: Mapping[int, str] = field(default_factory=dict)
    """With several chat choices (``n > 1``): the finish reason litellm showed for each choice
    other than 0 (litellm's chunks drop most of them; each one shown must be the wire's).
    Calls are then keyed by the ledger's ``slot`` of (choice, tool index)."""
    wire_ids: bool = False
    """The client was handed the wire's identity of every call (the withholding client wrote
    it into the body it released where the wire sent none, ``WireSpec.identities``): its
    calls must carry those identities, where a wire's rule otherwise matches by position."""


__all__ = ["Carrier", "CarrierCall"]
