"""Calls and clients a gate gates itself, which the callback then leaves alone.

:class:`~..gate.ToolGate` makes its sync calls through litellm with a client of its own: it
vouches for each by ``litellm_call_id`` and thread while litellm makes it (:func:`vouched`).
An async client a gate withholds on is vouched for as an object (:func:`vouch_client`), so
litellm's Responses bridge, which hands the outer call's client to its chat call, is gated
once.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

from .claims import Vouches

_C = TypeVar("_C")

# ToolGate's own sync calls, by call id and thread while litellm makes them.
_VOUCHES = Vouches()
vouched = _VOUCHES.vouched


def is_vouched(call_id: str) -> bool:
    return call_id in _VOUCHES


_vouched_clients: weakref.WeakSet[Any] = weakref.WeakSet()


def vouch_client(client: _C) -> _C:
    """Mark an async client a gate withholds on itself (the callback then leaves it alone)."""
    _vouched_clients.add(client)
    return client


def is_vouched_client(client: Any) -> bool:
    try:
        return client is not None and client in _vouched_clients
    except TypeError:  # not weakly referenceable: not one of ours
        return False


__all__ = ["is_vouched", "is_vouched_client", "vouch_client", "vouched"]
