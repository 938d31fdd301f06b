"""One module per wire: the one answer to "what is this event?" for everything that reads it.

Each wire module (``chat``, ``responses``, ``anthropic``, ``ollama``, ``gemini``, ``bedrock``,
``cohere``, ``watsonx``) holds its
wire's normalizer (a decoded SSE message, or a whole body, in; the gate's events out),
classifies its own wire's events (text, a call's stage, lifecycle, a report, the terminal,
unknown), names the places where a call could hide outside the events the gate withholds.
The normalizer, the withholding client and the carriers all ask the same module, so no
second opinion exists, and a new wire is one new module here. ``responses_items`` is the
Responses API's item taxonomy (who runs each output item, what its input must be), read by
the Responses wire and by the ledger, the call accumulator and the registry. ``loads`` reads
one wire message's JSON for every wire and holds the :class:`WireFault` the normalizers
raise.

Each wire module exports ``WIRE``, its :class:`~.base.WireSpec`: the one interface through
which the attempt, the ledger, the call accumulator and the withholder speak to a wire
(``base.py`` says what it answers). :data:`WIRES` is the table of them; with the wire's
entries in ``state.py`` (its transition tables, its request paths) it is all the core
knows of a wire by name.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..decision.state import Wire
from . import anthropic, bedrock, chat, cohere, gemini, ollama, responses, watsonx
from .base import WireSpec

WIRES: Mapping[Wire, WireSpec] = {
    spec.wire: spec
    for spec in (
        chat.WIRE,
        responses.WIRE,
        anthropic.WIRE,
        ollama.WIRE,
        gemini.WIRE,
        bedrock.WIRE,
        cohere.WIRE,
        watsonx.WIRE,
    )
}
"""Every wire the gate reads, by the :class:`~..state.Wire` it is."""

__all__ = ["WIRES", "WireSpec"]
