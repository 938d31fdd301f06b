"""One module per wire: the one answer to "what is this event?" for everything that reads it.

Each wire module classifies its own wire's events (text, a call's stage, lifecycle, a report,
the terminal, unknown), names the places where a call could hide outside the events the gate
withholds, and holds the tables that say how each kind of item is treated. The normalizer,
the withholding client and the carriers all ask the same module, so no second opinion exists.
"""
