"""Per-request state kept between hooks, under a key only the gate makes.

A host (the LiteLLM proxy) may hand the hook that consumes a request's state a different
object than the hook that made it, sharing only some of the request's mappings (its
metadata). The state waits here in between, under a fresh random token written into each of
those mappings; a value the client controls (a call id it may set itself) is never the key,
so two requests can never swap their state. A request whose mappings carry no token, or two
different ones, gets nothing: refused, never merged. The table is bounded by count, oldest
out first, and an evicted request gets nothing either.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

_V = TypeVar("_V")


class PendingTable(Generic[_V]):
    """Values waiting for a later hook, by a token kept in the request's ``holders``.

    ``holders`` names the request's mappings the token is written into and read from (the
    first is created when the request has none); ``name`` is the token's key in them.
    """

    def __init__(self, holders: tuple[str, ...], name: str) -> None:
        self._holders = holders
        self._name = name
        self._table: OrderedDict[str, _V] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def remember(self, request: dict[str, Any], value: _V, *, bound: int) -> None:
        """Keep ``value`` for ``request``'s later hooks; at most ``bound`` values are kept.

        Whatever the request carried under the token's name is overwritten. A request that
        already carries a token of this table's is being retried: the earlier value is
        dropped, it never reaches a later hook.
        """
        token = secrets.token_hex(16)
        holders = [request[h] for h in self._holders if isinstance(request.get(h), dict)]
        if not holders:
            request[self._holders[0]] = {}
            holders = [request[self._holders[0]]]
        for holder in holders:
            previous = holder.get(self._name)
            if isinstance(previous, str):
                self._table.pop(previous, None)
            holder[self._name] = token
        self._table[token] = value
        while len(self._table) > bound:
            self._table.popitem(last=False)

    def take(self, request: Mapping[str, Any]) -> _V | None:
        """The request's value, forgotten; None when there is none or the request is
        ambiguous (two different tokens: both are forgotten)."""
        tokens = {
            holder.get(self._name)
            for holder in (request.get(h) for h in self._holders)
            if isinstance(holder, Mapping) and holder.get(self._name) is not None
        }
        if len(tokens) != 1:
            for token in tokens:
                if isinstance(token, str):
                    self._table.pop(token, None)
            return None
        (token,) = tokens
        return self._table.pop(token, None) if isinstance(token, str) else None
