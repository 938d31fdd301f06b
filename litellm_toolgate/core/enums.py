"""An enum hashed by identity, for the tables the core looks up once per wire event.

``enum.Enum`` hashes a member by its name, in Python: about three times the cost of an
identity hash, paid twice for every state-table lookup (a key is a pair of members) and
once more for the wire. Members are singletons and compare by identity, so hashing them by
identity keeps every dict and set answer the same.
"""

from __future__ import annotations

import enum


class IdentityEnum(enum.Enum):
    """``enum.Enum`` with the identity hash its identity equality allows."""

    __hash__ = object.__hash__


__all__ = ["IdentityEnum"]
