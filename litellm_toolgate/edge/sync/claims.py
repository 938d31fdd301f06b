"""Calls a host makes on the caller's thread, known to the gate before they are sent.

Two tables, both keyed by the thread and the call's id, never by either alone (a client may
choose a call id, and two threads may make calls with the same one):

* :class:`ClaimTable`: calls armed before their request is sent, each with a one-time token
  the request must carry. A token is taken once, and only on the thread that armed it; the
  call's claim is settled (forgotten) by its id once the host is done with the request.
  Arming a call on a thread voids every earlier claim of that thread (a thread makes one
  call at a time): the table never holds more than one claim per live thread.
* :class:`Vouches`: calls some other party gates itself, for as long as it makes them.

Both are safe to share across threads; neither does I/O.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Callable, Iterator
from typing import Generic, Protocol, TypeVar


class Claimed(Protocol):
    """What the table reads of a claim: its token, the arming thread and the call's id."""

    @property
    def token(self) -> str: ...
    @property
    def thread(self) -> int: ...
    @property
    def call_id(self) -> str: ...


_C = TypeVar("_C", bound=Claimed)


def new_token() -> str:
    """A one-time token for a claim (unguessable, safe in an HTTP header)."""
    return secrets.token_urlsafe(18)


class ClaimTable(Generic[_C]):
    """Armed calls, by token and by thread and call id; each is claimed at most once.

    Bounded by the threads that make calls, whatever the calls' outcomes: a thread makes one
    sync call at a time, so arming a call forgets every earlier claim of its thread (a call
    that failed before it was settled, a retry of the same call), and once the table holds
    claims of more than :attr:`SWEEP` threads, those of threads that have ended are dropped.
    """

    SWEEP = 64

    def __init__(self, dropped: Callable[[_C], None] | None = None) -> None:
        """``dropped`` is told of every claim the table forgets on its own (voided by its
        thread's next claim, or swept with its ended thread), outside the table's lock."""
        self._lock = threading.Lock()
        self._by_token: dict[str, _C] = {}
        self._by_thread: dict[int, dict[str, _C]] = {}
        self._dropped = dropped

    def __len__(self) -> int:
        with self._lock:
            return sum(len(calls) for calls in self._by_thread.values())

    @property
    def threads(self) -> int:
        """How many threads have a claim in the table."""
        with self._lock:
            return len(self._by_thread)

    def add(self, claim: _C) -> None:
        with self._lock:
            voided = list(self._by_thread.pop(claim.thread, {}).values())
            for earlier in voided:
                self._by_token.pop(earlier.token, None)
            self._by_token[claim.token] = claim
            self._by_thread[claim.thread] = {claim.call_id: claim}
            if len(self._by_thread) > self.SWEEP:
                voided.extend(self._sweep())
        if self._dropped is not None:
            for earlier in voided:
                self._dropped(earlier)

    def _sweep(self) -> list[_C]:
        alive = {thread.ident for thread in threading.enumerate()}
        swept: list[_C] = []
        for ident in [ident for ident in self._by_thread if ident not in alive]:
            for gone in self._by_thread.pop(ident).values():
                self._by_token.pop(gone.token, None)
                swept.append(gone)
        return swept

    def take(self, token: str) -> _C | None:
        """The claim of ``token``, forgotten by token; None when there is none, or when it
        was armed on another thread (it is forgotten then too)."""
        with self._lock:
            claim = self._by_token.pop(token, None)
            if claim is None:
                return None
            if claim.thread != threading.get_ident():
                return None  # still armed, unclaimed: its thread's check refuses the call
            calls = self._by_thread.get(claim.thread, {})
            if calls.get(claim.call_id) is claim:
                del calls[claim.call_id]  # claimed: nothing is left to check of it
                if not calls:
                    del self._by_thread[claim.thread]
            return claim

    def here(self) -> list[_C]:
        """This thread's claims."""
        with self._lock:
            return list(self._by_thread.get(threading.get_ident(), {}).values())

    def put_back(self, claim: _C) -> None:
        """Make a claim just taken takeable again by its token (the host may resend the same
        request, e.g. after a rate limit), unless its thread armed another call since."""
        with self._lock:
            if claim.thread in self._by_thread:
                return
            self._by_thread[claim.thread] = {claim.call_id: claim}
            self._by_token[claim.token] = claim

    def settle(self, call_id: str) -> _C | None:
        """This thread's claim of the call, forgotten (it is armed once per request)."""
        with self._lock:
            ident = threading.get_ident()
            calls = self._by_thread.get(ident, {})
            claim = calls.pop(call_id, None)
            if not calls:
                self._by_thread.pop(ident, None)
            if claim is not None:
                self._by_token.pop(claim.token, None)
            return claim


class Vouches:
    """Calls another party gates itself, by (thread, call id), while it makes them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: set[tuple[int, str]] = set()

    @contextlib.contextmanager
    def vouched(self, call_id: str) -> Iterator[None]:
        """While ``call_id`` is made on this thread, it is vouched for."""
        key = (threading.get_ident(), call_id)
        with self._lock:
            self._calls.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._calls.discard(key)

    def __contains__(self, call_id: object) -> bool:
        with self._lock:
            return (threading.get_ident(), call_id) in self._calls
