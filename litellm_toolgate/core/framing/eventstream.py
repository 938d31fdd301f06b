"""Incremental AWS event-stream framing: bytes in, one message per frame out.

Bedrock's ``ConverseStream`` answers ``application/vnd.amazon.eventstream``: a sequence of
binary frames ("messages"), each self-delimiting and checksummed. The format, as AWS
documents it ("Event stream encoding", Amazon Lex V2 developer guide,
https://docs.aws.amazon.com/lexv2/latest/dg/event-stream-encoding.html, and the same page
of the Amazon Transcribe guide; the header value types as the AWS SDKs' common runtime
encodes them, ``awslabs/aws-c-event-stream``, ``aws_event_stream_header_value_type``):

* a 12-byte prelude: the total byte length of the frame (4 bytes, big-endian, counting
  itself), the byte length of the headers (4 bytes), and the prelude CRC (4 bytes: CRC32,
  "often referred to as GZIP CRC32", of the 8 bytes before it);
* the headers: each a name length (1 byte), the name (UTF-8), a value type (1 byte) and the
  value. Types: 0 true and 1 false (no value bytes), 2 byte (1), 3 short (2), 4 integer (4),
  5 long (8), 6 byte array and 7 string (a 2-byte big-endian length, then that many bytes;
  a string is UTF-8), 8 timestamp (8), 9 UUID (16). "Any given header can only appear once";
* the payload: the rest of the frame;
* the message CRC (4 bytes): CRC32 of everything from the frame's first byte to the
  checksum. "Total message overhead, including the prelude and both checksums, is 16 bytes."

The headers that say what a frame is: ``:message-type`` (``event``, ``exception`` or
``error``), ``:event-type`` (the event's name, for an ``event``), ``:content-type``
(``application/json`` on Bedrock's events) and ``:exception-type`` / ``:error-code``.

:class:`EventStreamDecoder` cuts such a body, fed in any pieces, into its frames, as a
:class:`~.framing.FramingDecoder` (the interface the attempt and the withholder read): an
``event`` frame is reported as a message named by its ``:event-type`` whose data is the
payload, as text. It does no I/O and judges no JSON: that is the wire's normalizer's work.
It is written here, not borrowed: botocore's ``EventStreamBuffer`` raises its own
exceptions, whose messages carry the frame's values, and the core imports neither botocore
nor litellm.

Rules, each the strict reading of the format:

* The prelude CRC is checked as soon as the 12 prelude bytes are in, before either length
  is trusted; then the total length must be at least 16 and leave room for the headers,
  and must not exceed ``max_event_bytes`` (``event_too_large``, decided on the prelude
  alone, so the outcome does not depend on the split).
* The message CRC is checked once the whole frame is in, before any header is read.
* Every header is read to its end inside the headers section; a name that is empty or not
  UTF-8, an unknown value type, a value that runs past the section, a string value that is
  not UTF-8, or a header given twice is ``malformed_event``. The three typed headers above,
  when present, must be strings.
* ``:message-type`` must be present. An ``exception`` or ``error`` frame is ``error_event``
  (the stream's in-band error: Bedrock's ``modelStreamErrorException``,
  ``throttlingException``, ...); any other type but ``event`` is ``malformed_event``. An
  ``event`` must name a non-empty ``:event-type`` and, if it has a ``:content-type``, it
  must be ``application/json``. Its payload must be UTF-8 (``invalid_utf8``).
* At the end of the body (:meth:`flush`) a frame still incomplete was cut short:
  ``malformed_event`` (:class:`~.framing.FramingDecoder`'s end).

Faults carry only a :class:`~.errors.QuarantineReason`, never body text; after a fault the
decoder is broken for good, and it never raises inside an ``except`` block.
"""

from __future__ import annotations

import struct
import zlib

from ..errors import Fault, QuarantineReason
from .decoder import FramingDecoder

__all__ = ["EventStreamDecodeError", "EventStreamDecoder", "encode_frame"]

R = QuarantineReason

PRELUDE = 12
"""Total length, headers length, prelude CRC."""
OVERHEAD = 16
"""The prelude and the message CRC: the smallest frame."""

_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}
"""Value types of a fixed size: their value's byte count."""
_SIZED = frozenset({6, 7})
"""Byte array and string: a 2-byte length, then the bytes."""
_STRING = 7
_TYPED = (":message-type", ":event-type", ":content-type")
_JSON = "application/json"

_U32 = struct.Struct(">I")
_PRELUDE = struct.Struct(">III")


class EventStreamDecodeError(Fault):
    """The frame stream is broken. Holds only a reason, never any body text."""


class EventStreamDecoder(FramingDecoder):
    """Cuts an AWS event-stream body, fed in arbitrary pieces, into its frames."""

    __slots__ = ("_buffer", "_need")

    broken = EventStreamDecodeError

    def __init__(self, *, max_event_bytes: int) -> None:
        super().__init__(max_event_bytes=max_event_bytes)
        self._buffer = bytearray()
        # Bytes the buffer must hold before the next frame is looked at again: a frame
        # dribbled in one-byte pieces is parsed once, not once per piece.
        self._need = PRELUDE

    @property
    def pending(self) -> bool:
        """True while part of a frame is held."""
        return bool(self._buffer)

    def discard(self) -> None:
        """Drop the frame under assembly; the counts stay."""
        self._buffer = bytearray()
        self._need = PRELUDE

    def feed_fields(self, data: bytes) -> list[tuple[str, str, str | None]]:
        """:meth:`feed`, each event frame as ``(event type, payload text, None)``."""
        self._take(data)
        out: list[tuple[str, str, str | None]] = []
        if not data:
            return out
        buffer = self._buffer
        buffer += data
        while len(buffer) >= self._need:
            reason = self._step(buffer, out)
            if reason is not None:
                self._error = reason
                self.discard()
                return out
        return out

    def _step(
        self, buffer: bytearray, out: list[tuple[str, str, str | None]]
    ) -> QuarantineReason | None:
        """Read the prelude, or the whole frame once it is in; the fault found, if any."""
        total, headers, crc = _PRELUDE.unpack_from(buffer, 0)
        if self._need == PRELUDE:
            if zlib.crc32(buffer[:8]) != crc:
                return R.MALFORMED_EVENT
            if total < OVERHEAD or headers > total - OVERHEAD:
                return R.MALFORMED_EVENT
            if total > self._max:
                return R.EVENT_TOO_LARGE
            self._need = total
            return None
        frame = bytes(buffer[:total])  # a copy: the buffer is cut below, nothing refers to it
        del buffer[:total]
        if zlib.crc32(frame[: total - 4]) != _U32.unpack_from(frame, total - 4)[0]:
            return R.MALFORMED_EVENT
        found = _frame(frame[PRELUDE : PRELUDE + headers], frame[PRELUDE + headers : total - 4])
        if isinstance(found, QuarantineReason):
            return found
        out.append(found)
        self._need = PRELUDE
        return None


def _frame(headers: bytes, payload: bytes) -> tuple[str, str, str | None] | QuarantineReason:
    """One checksummed frame's headers and payload: the message it reports, or its fault."""
    typed = _headers(headers)
    if typed is None:
        return R.MALFORMED_EVENT
    kind = typed.get(":message-type")
    if kind in ("exception", "error"):
        return R.ERROR_EVENT
    if kind != "event":
        return R.MALFORMED_EVENT
    name = typed.get(":event-type")
    content = typed.get(":content-type", _JSON)
    if not name or content != _JSON:
        return R.MALFORMED_EVENT
    try:
        text = payload.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None:  # the error, which holds the bytes, is not kept
        return R.INVALID_UTF8
    return (name, text, None)


def _headers(section: bytes) -> dict[str, str] | None:
    """The typed headers' string values; None when a header is malformed (see the module
    docstring). Every header is read and checked, whatever its name."""
    seen: set[str] = set()
    typed: dict[str, str] = {}
    end = len(section)
    at = 0
    while at < end:
        size = section[at]
        at += 1
        if size == 0 or at + size + 1 > end:
            return None
        name = _utf8(section[at : at + size])
        at += size
        kind = section[at]
        at += 1
        if name is None or name in seen:
            return None
        seen.add(name)
        if kind in _FIXED:
            at += _FIXED[kind]
            value: str | None = None
        elif kind in _SIZED:
            if at + 2 > end:
                return None
            length = (section[at] << 8) | section[at + 1]
            at += 2
            if at + length > end:
                return None
            value = _utf8(section[at : at + length]) if kind == _STRING else ""
            if value is None:
                return None
            at += length
        else:
            return None
        if at > end:
            return None
        if name in _TYPED:
            if kind != _STRING or value is None:
                return None
            typed[name] = value
    return typed


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def encode_frame(headers: list[tuple[str, str]], payload: bytes) -> bytes:
    """One frame of string headers and ``payload``, both CRCs computed: how the gate writes
    an event again, and how the fixtures and tests build theirs."""
    section = bytearray()
    for name, value in headers:
        raw_name, raw_value = name.encode("utf-8"), value.encode("utf-8")
        section += bytes([len(raw_name)]) + raw_name + bytes([_STRING])
        section += struct.pack(">H", len(raw_value)) + raw_value
    total = OVERHEAD + len(section) + len(payload)
    prelude = struct.pack(">II", total, len(section))
    head = prelude + _U32.pack(zlib.crc32(prelude)) + bytes(section) + payload
    return head + _U32.pack(zlib.crc32(head))
