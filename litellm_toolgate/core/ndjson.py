"""Incremental newline-delimited JSON framing: bytes in, one message per line out.

Ollama streams ``/api/chat`` as ``application/x-ndjson``: one JSON object per line, each
written with a newline after it (``server/routes.go``, ``streamResponse``: "Delineate chunks
with new-line delimiter"; ``docs/api/streaming.mdx``). :class:`NDJSONDecoder` cuts such a
body, fed in any pieces, into its lines, with the interface of :class:`~.sse.SSEDecoder`
that the attempt and the withholder read (``feed``, ``feed_fields``, ``flush``,
``discard``, ``error``, ``bytes_seen``), each line reported as an unnamed message whose data
is the line. It does no I/O and judges no JSON: that is the wire's normalizer's work.

Rules, each the strict reading of the format:

* Lines end at LF; one CR before the LF is dropped (``\\r\\n`` is allowed by the NDJSON
  specification). Empty lines are skipped (the specification lets a parser ignore them).
* Every line is UTF-8; a byte that is not is ``invalid_utf8``. Lines are cut on the byte
  LF, which never occurs inside a multi-byte character, and decoded whole, so a split
  inside a character anywhere is harmless.
* A line (complete or still arriving) longer than ``max_event_bytes`` is ``event_too_large``,
  checked on every piece so the outcome does not depend on the split.
* At the end of the body (:meth:`flush`) a line without its newline is ``malformed_event``:
  the server ends every object with one, so such a line was cut short, or is bytes after
  the last object that no one would read.

Faults carry only a :class:`~.errors.QuarantineReason`, never body text; after a fault the
decoder is broken for good, and it never raises inside an ``except`` block.
"""

from __future__ import annotations

from typing import NoReturn

from .errors import Fault, GateConfigError, QuarantineReason
from .sse import SSEMessage

__all__ = ["NDJSONDecodeError", "NDJSONDecoder"]

R = QuarantineReason


class NDJSONDecodeError(Fault):
    """The line stream is broken. Holds only a reason, never any body text."""


class NDJSONDecoder:
    """Cuts a newline-delimited body, fed in arbitrary pieces, into its lines."""

    __slots__ = ("_bytes_seen", "_closed", "_error", "_max", "_partial")

    def __init__(self, *, max_event_bytes: int) -> None:
        if max_event_bytes <= 0:
            raise GateConfigError("max_event_bytes must be positive")
        self._max = max_event_bytes
        # The unterminated line: one growing buffer, so a line dribbled in one-byte reads
        # costs its bytes, not an object per read.
        self._partial = bytearray()
        self._bytes_seen = 0
        self._error: QuarantineReason | None = None
        self._closed = False

    @property
    def pending(self) -> bool:
        """True while a partial line is held."""
        return bool(self._partial)

    @property
    def bytes_seen(self) -> int:
        return self._bytes_seen

    @property
    def error(self) -> QuarantineReason | None:
        """The fault found so far: ``feed`` returns the lines completed before it and keeps
        it here (and every later call raises)."""
        return self._error

    def discard(self) -> None:
        """Drop the line under assembly; the counts stay."""
        self._partial = bytearray()

    def _fail(self, reason: QuarantineReason) -> NoReturn:
        self._error = reason
        raise NDJSONDecodeError(reason)

    def feed(self, data: bytes) -> list[SSEMessage]:
        """Consume the next piece; return the lines it completed, as unnamed messages."""
        return [SSEMessage(event, text, last_id) for event, text, last_id in self.feed_fields(data)]

    def feed_fields(self, data: bytes) -> list[tuple[str, str, str | None]]:
        """:meth:`feed`, each line as ``("", line, None)``."""
        if self._error is not None:
            self._fail(self._error)
        if self._closed:
            raise RuntimeError("feed() after flush()")
        self._bytes_seen += len(data)
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

    def flush(self) -> list[SSEMessage]:
        """The body ended: a line still held had no newline, which is ``malformed_event``.
        Calling it again is harmless; feeding after it is a programming error."""
        if self._error is not None:
            self._fail(self._error)
        if self._closed:
            return []
        self._closed = True
        if self._partial:
            self.discard()
            self._fail(R.MALFORMED_EVENT)
        return []


def _utf8(line: bytes) -> str | None:
    """The line as text, or None when it is not UTF-8 (the error, which holds the bytes, is
    not kept)."""
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        return None
