"""One HTTP body into its attempt: what every transport of the edge feeds, and what it is told.

A stream is fed to the attempt piece by piece (:meth:`~.attempt.Attempt.take_bytes`) as
it is read; a whole (non-streamed) body is collected, up to ``max_body_bytes``, and given to
the attempt whole once it ended (:meth:`~.attempt.Attempt.receive_body`). The first fault
stops the feeding: the quarantine stays on the attempt for whoever gates the call to raise,
and is never raised from here (the reader may be inside a client library's own request).
The body ends once: cleanly (:meth:`BodyReader.eof`) or cut short (:meth:`BodyReader.interrupt`,
a stall or a disconnect the edge saw), and whatever was collected is dropped then.

Before the body, the reader binds the request (:meth:`BodyReader.bind_request`: a request the
gate cannot gate is refused unsent) and the response (:meth:`BodyReader.bind_response`: a
non-2xx answer is not the gate's to read), and says how long a stream may stay silent
(:meth:`BodyReader.read_timeout`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

from ..errors import QuarantineReason, ToolCallQuarantined
from .attempt import Attempt

R = QuarantineReason


class BodyReader:
    """Feeds one attempt the body of its one HTTP response, streamed or whole."""

    def __init__(self, attempt: Attempt, *, streamed: bool) -> None:
        self.attempt = attempt
        self.streamed = streamed
        self.ended = False
        self._body = bytearray()

    @property
    def faulted(self) -> bool:
        return self.attempt.quarantined is not None

    def bind_request(
        self, path: str, fields: Mapping[str, object], *, choices_gated: bool = True
    ) -> None:
        """Hand the attempt the request's URL path and the body fields it reads; a fault
        stays on the attempt (see :attr:`refused`). ``choices_gated``: see
        :meth:`~.attempt.Attempt.bind_request`."""
        with contextlib.suppress(ToolCallQuarantined):
            self.attempt.bind_request(path, fields, choices_gated=choices_gated)

    @property
    def refused(self) -> bool:
        """The request itself cannot be gated (chat ``n > 1`` where the choices are not kept
        apart, an ``n`` that is no count): it must not be sent."""
        return self.faulted and not self.attempt.observed

    def read_timeout(self, read: float | None) -> float | None:
        """The read timeout for the request, given the caller's: a stream's is lowered to the
        idle limit, a whole response keeps its own.

        A non-streamed call sends nothing until it is done (a long reasoning call may think
        for minutes), so the idle limit, a bound on the silence *between* pieces of a
        stream, does not apply to it.
        """
        if not self.streamed:
            return read
        idle = self.attempt.limits.idle_timeout
        return idle if read is None else min(read, idle)

    def bind_response(self, status: int, content_type: str, path: str) -> bool:
        """Attach the response; False when it is not the gate's to read (not a 2xx).

        The request's ``path`` tells the attempt which wire it reads; a fault stays on the
        attempt.
        """
        if not 200 <= status < 300:
            return False
        with contextlib.suppress(ToolCallQuarantined):
            self.attempt.bind_response(content_type=content_type, streamed=self.streamed, path=path)
        return True

    def feed(self, data: bytes) -> bool:
        """Give the attempt one piece of body; False once the attempt is quarantined."""
        if self.faulted:
            return False
        if self.streamed:
            self.attempt.take_bytes(data)  # its quarantine stays on the attempt, unraised
        elif len(self._body) + len(data) > self.attempt.limits.max_body_bytes:
            self._body = bytearray()
            self.attempt.interrupt(R.BODY_TOO_LARGE)
        else:
            self._body += data
        return not self.faulted

    def eof(self) -> None:
        """The body ended cleanly (taken once; nothing is fed after a fault)."""
        if self.ended:
            return
        self.ended = True
        if self.faulted:
            return
        try:
            if self.streamed:
                self.attempt.receive_eof()
            else:
                self.attempt.receive_body(bytes(self._body))
        except ToolCallQuarantined:
            pass
        finally:
            self._body = bytearray()

    def interrupt(self, reason: QuarantineReason) -> None:
        """The body was cut short (``stalled``, ``disconnected``)."""
        self.ended = True
        self._body = bytearray()
        self.attempt.interrupt(reason)

    @property
    def wants_drain(self) -> bool:
        """Whether the rest of the body should still be read: the gate decides only on a
        body read to its end; a quarantined attempt needs no more bytes (and a cancelled one
        must not wait for them)."""
        return not self.ended and not self.faulted

    @property
    def whole_body_arrived(self) -> bool:
        """Whether a whole (non-streamed) body reached its end: a failure of the client
        library after that is about what it made of the body (a field outside the calls it
        cannot convert), not about the wire, and nothing was released."""
        return not self.streamed and self.ended and self.attempt.observed

    def refuse_unparsed(self) -> None:
        """The client library failed on the body the attempt read: the wire's own fault
        wins (the attempt is concluded for it), a wire that passes is a carrier mismatch."""
        if self.attempt.quarantined is None:
            with contextlib.suppress(ToolCallQuarantined):
                self.attempt.conclude()
            self.attempt.interrupt(R.CARRIER_MISMATCH)
