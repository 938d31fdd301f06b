"""Limits enforced while a stream is read, so memory stays bounded whatever the upstream sends.

The defaults fit real coding agents: a ``write_file`` call can carry a whole source file, so a
single call may hold 2 MiB of arguments; a response may open 64 calls. Everything the gate
buffers (the SSE line under assembly, the withheld argument text) is capped by these numbers;
text content is passed on live and only counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields

from ..errors import GateConfigError

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-attempt limits. Every field must be positive."""

    max_calls: int = 64
    """Tool calls one response may open."""
    max_argument_bytes: int = 2 * MIB
    """UTF-8 bytes of arguments one call may accumulate."""
    max_total_argument_bytes: int = 8 * MIB
    """UTF-8 bytes of arguments all calls of one response may accumulate together, with
    every call's id and name counted in (the gate holds those to the end as well)."""
    max_events: int = 200_000
    """SSE messages one stream may carry (comments excluded)."""
    max_event_bytes: int = 4 * MIB
    """Bytes one SSE line or message may hold while it is assembled."""
    max_text_bytes: int = 16 * MIB
    """UTF-8 bytes of text content one response may stream (counted, not buffered)."""
    max_body_bytes: int = 16 * MIB
    """Bytes of a non-streamed response body."""
    max_json_depth: int = 64
    """Nesting depth of a call's arguments (the top-level object is depth 1)."""
    idle_timeout: float = 120.0
    """Seconds the wire may stay silent between reads before the stream counts as stalled."""

    @classmethod
    def tightest(cls, limits: Iterable[Limits]) -> Limits:
        """Each limit at the lowest value any of ``limits`` sets it to."""
        members = list(limits)
        if not members:
            return cls()
        return cls(**{f.name: min(getattr(m, f.name) for m in members) for f in fields(cls)})

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise GateConfigError(f"Limits.{f.name} must be a positive number")
