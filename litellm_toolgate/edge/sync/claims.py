"""Calls a host makes on the caller's thread, known to the gate before they are sent.

Two tables, both keyed by the thread and the call's id, never by either alone (a client may
choose a call id, and two threads may make calls with the same one):

* :class:`ClaimTable`: calls armed before their request is sent, each with a one-time token
  the request must carry. A token is taken once, and only on the thread that armed it; the
  call's claim is settled (forgotten) by its id once the host is done with the request.
  Arming the same call again (the host retrying it) voids the earlier claim.
* :class:`Vouches`: calls some other party gates itself, for as long as it makes them.

Both are safe to share across threads; neither does I/O.
"""

from __future__ import annotations

import contextlib
import secrets
import threading
from collections.abc import Iterator
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
    """Armed calls, by token and by (thread, call id); each is claimed at most once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_token: dict[str, _C] = {}
        self._by_call: dict[tuple[int, str], _C] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._by_token)

    def add(self, claim: _C) -> None:
        with self._lock:
            self._by_token[claim.token] = claim
            previous = self._by_call.get((claim.thread, claim.call_id))
            if previous is not None:
                # The host re-arms the same call on its own retry: the old claim is void.
                self._by_token.pop(previous.token, None)
            self._by_call[(claim.thread, claim.call_id)] = claim

    def take(self, token: str) -> _C | None:
        """The claim of ``token``, forgotten by token; None when there is none, or when it
        was armed on another thread (it is forgotten then too)."""
        with self._lock:
            claim = self._by_token.pop(token, None)
        if claim is None or claim.thread != threading.get_ident():
            return None
        return claim

    def settle(self, call_id: str) -> _C | None:
        """This thread's claim of the call, forgotten (it is armed once per request)."""
        with self._lock:
            claim = self._by_call.pop((threading.get_ident(), call_id), None)
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
