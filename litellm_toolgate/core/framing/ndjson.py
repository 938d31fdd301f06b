"""Incremental newline-delimited JSON framing: bytes in, one message per line out.

Ollama streams ``/api/chat`` as ``application/x-ndjson``: one JSON object per line, each
written with a newline after it (``server/routes.go``, ``streamResponse``: "Delineate chunks
with new-line delimiter"; ``docs/api/streaming.mdx``). :class:`NDJSONDecoder` cuts such a
body, fed in any pieces, into its lines, as a :class:`~.framing.FramingDecoder` (the
interface the attempt and the withholder read), each line reported as an unnamed message
whose data is the line. It does no I/O and judges no JSON: that is the wire's normalizer's work.

Rules, each the strict reading of the format:

* Lines end at LF; one CR before the LF is dropped (``\\r\\n`` is allowed by the NDJSON
  specification). Empty lines are skipped (the specification lets a parser ignore them).
* Every line is UTF-8; a byte that is not is ``invalid_utf8``. Lines are cut on the byte
  LF, which never occurs inside a multi-byte character, and decoded whole, so a split
  inside a character anywhere is harmless.
* A line (complete or still arriving) longer than ``max_event_bytes`` is ``event_too_large``,
  checked on every piece so the outcome does not depend on the split.
* At the end of the body (:meth:`flush`) a line without its newline is ``malformed_event``
  (:class:`~.framing.FramingDecoder`'s end):
  the server ends every object with one, so such a line was cut short, or is bytes after
  the last object that no one would read.

Faults carry only a :class:`~.errors.QuarantineReason`, never body text; after a fault the
decoder is broken for good, and it never raises inside an ``except`` block.
"""

from __future__ import annotations

from ..errors import Fault, QuarantineReason
from .decoder import FramingDecoder

__all__ = ["NDJSONDecodeError", "NDJSONDecoder"]

R = QuarantineReason


class NDJSONDecodeError(Fault):
    """The line stream is broken. Holds only a reason, never any body text."""


class NDJSONDecoder(FramingDecoder):
    """Cuts a newline-delimited body, fed in arbitrary pieces, into its lines."""

    __slots__ = ("_partial",)

    broken = NDJSONDecodeError

    def __init__(self, *, max_event_bytes: int) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        # The unterminated line: one growing buffer, so a line dribbled in one-byte reads
        # costs its bytes, not an object per read.
        self._partial = bytearray()

    @property
    def pending(self) -> bool:
        """True while a partial line is held."""
        return bool(self._partial)

    def discard(self) -> None:
        """Drop the line under assembly; the counts stay."""
        self._partial = bytearray()

    def feed_fields(self, data: bytes) -> list[tuple[str, str, str | None]]:
        """:meth:`feed`, each line as ``("", line, None)``."""
        self._take(data)
        out: list[tuple[str, str, str | None]] = []
        if not data:
            return out
        pieces = data.split(b"\n")
        rest = pieces.pop()
        limit = self._max
        for piece in pieces:
            line = piece
            if self._partial:
                self._partial += piece
                line = bytes(self._partial)
                self._partial = bytearray()
            if line[-1:] == b"\r":
                line = line[:-1]
            if len(line) > limit:
                self._error = R.EVENT_TOO_LARGE
                return out
            if not line:
                continue
            text = _utf8(line)
            if text is None:
                self._error = R.INVALID_UTF8
                return out
            out.append(("", text, None))
        if rest:
            partial = self._partial
            partial += rest
            # The CR of a CRLF may be the last byte held: it is not counted as the line's.
            if len(partial) - (partial[-1:] == b"\r") > limit:
                self._error = R.EVENT_TOO_LARGE
        return out


def _utf8(line: bytes) -> str | None:
    """The line as text, or None when it is not UTF-8 (the error, which holds the bytes, is
    not kept)."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None
