"""One module per wire: the one answer to "what is this event?" for everything that reads it.

Each wire module (``chat``, ``responses``, ``anthropic``) holds its wire's normalizer (a
decoded SSE message, or a whole body, in; the gate's events out), classifies its own wire's
events (text, a call's stage, lifecycle, a report, the terminal, unknown), names the places
where a call could hide outside the events the gate withholds. The normalizer, the
withholding client and the carriers all ask the same module, so no second opinion exists,
and a new wire is one new module here. ``responses_items`` is the Responses API's item
taxonomy (who runs each output item, what its input must be), read by the Responses wire
and by the ledger, the call accumulator and the registry. ``loads`` reads one wire
message's JSON for every wire and holds the :class:`WireFault` the normalizers raise.
"""
