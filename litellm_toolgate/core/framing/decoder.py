"""What every framing decoder shares: the bookkeeping around cutting a body into messages.

A streamed body reaches the core as pieces of bytes in any split. A framing decoder (SSE in
``sse.py``, Ollama's lines in ``ndjson.py``, AWS event-stream frames in ``eventstream.py``)
cuts it into messages; :class:`FramingDecoder` holds what they have in common, so each
format's module holds only its own rules:

* ``max_event_bytes``, which must be positive (a :class:`~.errors.GateConfigError`);
* the bytes fed so far (:attr:`bytes_seen`);
* the fault: a format's ``feed_fields`` returns the messages completed before a fault and
  keeps the fault in :attr:`error`; every later ``feed`` or ``flush`` raises it as the
  format's own :class:`~.errors.Fault` subclass, which holds only a reason, never body text;
* the end of the body: :meth:`flush` once (again: harmless; ``feed`` after it: a
  programming error), where a format says what its end reveals (:meth:`_end`).

Nothing here raises inside an ``except`` block, so no exception that holds body bytes rides
along as a fault's context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, NoReturn

from ..errors import Fault, GateConfigError, QuarantineReason

__all__ = ["FramingDecoder", "SSEMessage"]


@dataclass(frozen=True, slots=True)
class SSEMessage:
    """One dispatched message (an SSE event, an NDJSON line, an event-stream frame)."""

    event: str
    """The ``event`` field; ``""`` when none was given (the default "message" type)."""
    data: str
    """The ``data`` lines joined with LF."""
    id: str | None
    """The last ``id`` field of this message, or ``None`` if it had none."""


class FramingDecoder:
    """The shared half of a framing decoder; a format supplies ``feed_fields``, ``pending``,
    ``discard`` and, where its end reveals more than a cut message, ``_end``."""

    __slots__ = ("_bytes_seen", "_closed", "_error", "_max")

    broken: ClassVar[type[Fault]]
    """The format's fault: raised with the reason alone."""

    def __init__(self, *, max_event_bytes: int) -> None:
        if max_event_bytes <= 0:
            raise GateConfigError("max_event_bytes must be positive")
        self._max = max_event_bytes
        self._bytes_seen = 0
        self._error: QuarantineReason | None = None
        self._closed = False

    @property
    def pending(self) -> bool:
        """True while part of a message is held."""
        raise NotImplementedError

    @property
    def bytes_seen(self) -> int:
        """Bytes fed so far."""
        return self._bytes_seen

    @property
    def error(self) -> QuarantineReason | None:
        """The fault found so far, if any.

        ``feed`` returns the messages completed before a fault and records the fault here;
        the caller checks it after handling them (and every later call raises). So what is
        dispatched before a fault never depends on how the body was split.
        """
        return self._error

    def discard(self) -> None:
        """Drop the message under assembly; the counts stay."""
        raise NotImplementedError

    def _fail(self, reason: QuarantineReason) -> NoReturn:
        self._error = reason
        raise self.broken(reason)

    def _take(self, data: bytes) -> None:
        """The checks every piece passes before a format reads it; counts its bytes."""
        if self._error is not None:
            self._fail(self._error)
        if self._closed:
            raise RuntimeError("feed() after flush()")
        self._bytes_seen += len(data)

    def feed(self, data: bytes) -> list[SSEMessage]:
        """Consume the next piece; return the messages it completed."""
        return [SSEMessage(event, text, last_id) for event, text, last_id in self.feed_fields(data)]

    def feed_fields(self, data: bytes) -> list[tuple[str, str, str | None]]:
        """:meth:`feed`, each message as its ``(event, data, id)`` fields: the same messages
        and faults, without an object built per message (the attempt reads this)."""
        raise NotImplementedError

    def flush(self) -> list[SSEMessage]:
        """The body ended: raises the fault its end reveals (see :meth:`_end`), else ``[]``.
        Calling it again is harmless; feeding after it is a programming error."""
        if self._error is not None:
            self._fail(self._error)
        if self._closed:
            return []
        self._closed = True
        fault = self._end()
        if fault is not None:
            self._fail(fault)
        return []

    def _end(self) -> QuarantineReason | None:
        """What the end of the body reveals. By default a message still held was cut short
        (``malformed_event``): a format whose messages end themselves says so at its end."""
        if not self.pending:
            return None
        self.discard()
        return QuarantineReason.MALFORMED_EVENT
