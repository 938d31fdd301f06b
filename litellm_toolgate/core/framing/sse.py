"""Incremental Server-Sent Events decoder: bytes in, :class:`SSEMessage` out.

Theory of operation
-------------------
The decoder follows the WHATWG HTML "event stream interpretation" rules. It does no I/O:
the caller hands it whatever bytes arrived (any split at all, down to one byte at a time)
with :meth:`SSEDecoder.feed`, gets back the messages those bytes completed, and calls
:meth:`SSEDecoder.flush` once the stream has ended.

Each chunk goes through three stages, each of them done on the whole chunk by C-level str
methods rather than by a Python loop over characters:

1. *UTF-8.* A strict incremental decoder turns bytes into text. It keeps an incomplete
   sequence at the end of a chunk until the next one, so splits inside a character are
   harmless, and it rejects anything that is not UTF-8. One leading U+FEFF is dropped.
2. *Lines.* CRLF and lone CR are rewritten to LF, then the text is split on LF. The last
   piece has no terminator yet and is kept for the next chunk. A CR as the last character
   of a chunk already ends its line (a CR always does); we only remember to drop an LF
   that starts the next chunk, so that the pair is not read as two line ends.
3. *Fields.* Each complete line is a blank line (dispatch), a comment (``:`` first), or
   ``name:value``. Only ``event``, ``data`` and ``id`` matter here; ``retry`` and unknown
   fields are ignored, as the spec allows a client to do.

Deviations from a browser's ``EventSource``, on purpose: the event type is reported as
``""`` when none was given (not ``"message"``), and ``id`` is the id seen *in this message*
(``None`` when there was none) rather than the sticky last-event-id, because the gate
judges each message on its own.

Faults. Invalid UTF-8 (anywhere, including a sequence cut off by the end of the stream)
and a line or message larger than ``max_event_bytes`` raise :class:`SSEDecodeError`. The
error carries only a :class:`QuarantineReason`: stream text may be tool arguments, so it
must never reach messages, logs or tracebacks. That is also why the decoder never raises
inside an ``except`` block: a ``UnicodeDecodeError`` holds the raw bytes and would
otherwise ride along as ``__context__``. After a fault the decoder is broken for good.
"""

from __future__ import annotations

import codecs

from ..errors import Fault, QuarantineReason
from .decoder import FramingDecoder, SSEMessage

__all__ = ["SSEDecodeError", "SSEDecoder", "SSEMessage"]

_BOM = "\ufeff"


class SSEDecodeError(Fault):
    """The event stream is broken. Holds only a reason, never any stream text."""


def _nbytes(text: str) -> int:
    # UTF-8 size of decoded text. isascii() is O(1) in CPython, so the common case is free;
    # otherwise re-encode (C speed) rather than guess, so the limit means what it says.
    return len(text) if text.isascii() else len(text.encode())


class SSEDecoder(FramingDecoder):
    """Turns an event stream, fed in arbitrary pieces, into :class:`SSEMessage` objects.

    ``max_event_bytes`` bounds the memory one message can pin: the UTF-8 bytes of the line
    under assembly plus the data already collected for the current message (one LF counted
    per data line, which is what a line costs: data lines are held merged, never one object
    each). Exceeding it raises ``SSEDecodeError(EVENT_TOO_LARGE)``. The check is
    made on every line, complete or not, so the outcome does not depend on how the stream
    was split.
    """

    __slots__ = (
        "_comments",
        "_data",
        "_data_bytes",
        "_event",
        "_id",
        "_partial",
        "_partial_bytes",
        "_skip_lf",
        "_started",
        "_utf8",
    )

    broken = SSEDecodeError

    def __init__(self, *, max_event_bytes: int) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self._utf8 = codecs.getincrementaldecoder("utf-8")("strict")
        self._started = False  # has any text been decoded yet (the BOM is only at the start)
        self._skip_lf = False  # the last chunk ended in CR: an LF next is the same line end
        self._partial: list[str] = []  # pieces of the unterminated line, joined only once
        self._partial_bytes = 0
        self._event = ""
        self._data: list[str] = []  # data values; joined with LF at dispatch
        self._data_bytes = 0
        self._id: str | None = None
        self._comments = 0

    @property
    def pending(self) -> bool:
        """True while a partial line (or partial character) or undispatched data is held."""
        return bool(self._partial or self._data or self._utf8.getstate()[0])

    @property
    def comments(self) -> int:
        """Comment lines seen so far."""
        return self._comments

    def discard(self) -> None:
        """Drop what is held (the line and the message under assembly); the counts stay."""
        self._partial = []
        self._partial_bytes = 0
        self._data = []
        self._data_bytes = 0
        self._event = ""
        self._id = None
        self._utf8.reset()

    def feed_fields(self, data: bytes) -> list[tuple[str, str, str | None]]:
        """:meth:`feed`, with each message as its ``(event, data, id)`` fields.

        The same messages, the same faults; only no object is built per message, which is
        a measurable share of the attempt's work per event (the attempt reads this).
        """
        self._take(data)
        valid: bytes | None = None
        try:
            text = self._utf8.decode(data, False)
        except UnicodeDecodeError as exc:
            # Keep only the offset: the error itself (it holds the raw bytes) is not chained.
            valid = exc.object[: exc.start]
        if valid is not None:
            # The messages completed before the bad byte still count, whatever the split.
            self._error = QuarantineReason.INVALID_UTF8
            text = valid.decode("utf-8")
        if not text:  # empty chunk, or only part of a character
            return []
        if not self._started:
            self._started = True
            if text[0] == _BOM:
                text = text[1:]
        if self._skip_lf and text[:1] == "\n":
            text = text[1:]
        if "\r" in text:
            self._skip_lf = text[-1] == "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        else:
            self._skip_lf = False
        lines = text.split("\n")
        rest = lines.pop()
        out: list[tuple[str, str, str | None]] = []
        if lines:
            if self._partial:
                self._partial.append(lines[0])
                lines[0] = "".join(self._partial)
                self._partial = []
            self._process(lines, out)
            self._partial_bytes = 0
        if self._error is not None:
            return out
        if rest:
            partial = self._partial
            partial.append(rest)
            self._partial_bytes += _nbytes(rest)
            # Keep piece lengths strictly decreasing: a line dribbled in tiny reads is then
            # held in O(log n) strings (each byte copied O(log n) times), not one object of
            # ~50 bytes overhead per read, which would dwarf the byte limit.
            while len(partial) > 1 and len(partial[-1]) >= len(partial[-2]):
                last = partial.pop()
                partial[-1] += last
        if self._partial_bytes + self._data_bytes > self._max:
            self._error = QuarantineReason.EVENT_TOO_LARGE
        return out

    def _process(self, lines: list[str], out: list[tuple[str, str, str | None]]) -> None:
        # The hot loop: one pass per line, state kept in locals and written back at the end
        # (on a fault nothing is written back, but a broken decoder is never read again).
        limit = self._max
        event = self._event
        data = self._data
        data_bytes = self._data_bytes
        last_id = self._id
        comments = self._comments
        if not data and not event and last_id is None:
            # Nearly every message of a stream is one "data:" line and a blank line. While
            # nothing is under assembly, each such pair is the message the loop below would
            # dispatch (its blank line cannot exceed the limit once its data line did not),
            # and leaves nothing under assembly; anything else goes to the loop.
            start = 0
            pairs = len(lines) - 1
            while start < pairs and not lines[start + 1]:
                line = lines[start]
                if line[:5] != "data:" or (
                    (len(line) if line.isascii() else len(line.encode())) > limit
                ):
                    break
                out.append(("", line[6:] if line[5:6] == " " else line[5:], None))
                start += 2
            if start:
                lines = lines[start:]
        for line in lines:
            size = len(line) if line.isascii() else len(line.encode())
            if size + data_bytes > limit:
                # Stop here: the messages before this line are returned, the fault is kept.
                self._error = QuarantineReason.EVENT_TOO_LARGE
                break
            if line[:5] == "data:":  # most lines: "data" is then the field's name
                value = line[6:] if line[5:6] == " " else line[5:]
            elif not line:
                if data:
                    out.append((event, "\n".join(data), last_id))
                    data = []
                event = ""
                last_id = None
                data_bytes = 0
                continue
            elif line[0] == ":":
                comments += 1
                continue
            else:
                name, _, value = line.partition(":")
                if value[:1] == " ":
                    value = value[1:]
                if name != "data":
                    if name == "event":
                        event = value
                    elif name == "id" and "\0" not in value:
                        last_id = value
                    continue
            data.append(value)
            # Each line charged only its bytes and one LF must cost no more than that: a
            # list slot and a str header per line would cost tens of bytes for an empty or
            # one-character line (a message of empty data lines pinned eight times its
            # limit). So lines are merged, LF-joined, keeping piece lengths strictly
            # decreasing: O(log n) pieces, each byte copied O(log n) times. One-line
            # messages never enter the loop.
            while len(data) > 1 and len(data[-1]) >= len(data[-2]):
                last = data.pop()
                data[-1] = data[-1] + "\n" + last
            # The prefix cut off ("data:" and maybe a space) is ASCII, so the value's
            # UTF-8 size follows from the line's without re-encoding.
            data_bytes += size - len(line) + len(value) + 1
        self._event = event
        self._data = data
        self._data_bytes = data_bytes
        self._id = last_id
        self._comments = comments

    def _end(self) -> QuarantineReason | None:
        """Per the spec a message without its closing blank line is discarded, so the end
        reveals no cut message (afterwards :attr:`pending` tells whether something was
        discarded); a byte sequence cut off mid-character is ``invalid_utf8``."""
        # A trailing lone CR already ended its line in feed(); only the UTF-8 tail is left.
        # Strict UTF-8 can leave only an incomplete prefix behind, which final=True rejects,
        # so a successful call produces no text.
        failed = False
        try:
            self._utf8.decode(b"", True)
        except UnicodeDecodeError:
            failed = True
        return QuarantineReason.INVALID_UTF8 if failed else None
