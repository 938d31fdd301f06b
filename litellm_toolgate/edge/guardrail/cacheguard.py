"""litellm's response cache under the callback: a gated call never reads it.

litellm answers a cache hit in its ``client`` wrapper, before any pre-call hook,
``log_pre_api_call`` or transport runs, sync and async, streamed and whole: a cached model
turn reaches the caller without a wire the gate could read. The cache may have been filled
before the gate existed, or by another process sharing a Redis cache, so nothing in it is
known to be gated.

So for a model turn (a call type :mod:`calltypes` does not call "not a model turn") made
while a gate acts (registered, or handed to a call in its own ``callbacks=``, which litellm
copies into its ``input_callback`` list before its cache read and keeps running for every
later call: :func:`~.deciders.any_gate_acting`), a read of ``litellm.cache`` answers
"miss": the call is sent and gated like any other (an async call under a gate handed to it
is refused unsent instead). Writes are left alone, and every other call type (embeddings,
rerank, ...) reads the cache as before. A gated call is never answered from the cache; it
is not refused either: a cache shared with an ungated process would otherwise refuse the same
prompt for ever.

litellm gives a callback no hook before its cache read; what it does run first, on every
call, is its guardrail bookkeeping, which reads each registered guardrail's ``default_on``.
The gate guards the cache there (and when it is built, and in every ``log_pre_api_call``,
which litellm also runs for a gate handed to a call): the read
methods of the ``litellm.cache`` object in place are wrapped on that object, and
:func:`unguard` puts them back. Which call a read belongs to is read from litellm's caching
handler on the stack (its ``original_function``); when it cannot be found, the read is
answered "miss": only an ungated call's cache hit can be lost that way, never a gated call
answered from the cache.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any

import litellm

from ..calltypes import Handling, handling
from ..seam import frames, privates

_MARK = "_toolgate_cache_reads"

Active = Callable[[], bool]


def _bypassed(active: Active, frame: FrameType | None) -> bool:
    if not active():
        return False
    kind = frames.caching_call_type(frame)
    return kind is None or handling(kind) is not Handling.NOT_A_MODEL_TURN


async def _miss() -> None:
    return None


def guard(active: Active) -> None:
    """Wrap the reads of the ``litellm.cache`` in place (once per cache object).

    ``active`` says whether a gate acts right now; when none does, reads go through.
    """
    cache = getattr(litellm, "cache", None)
    if cache is None or guarded(cache):
        return
    get, aget = cache.get_cache, cache.async_get_cache

    def get_cache(*args: Any, **kwargs: Any) -> Any:
        if _bypassed(active, frames.caller()):
            return None
        return get(*args, **kwargs)

    def async_get_cache(*args: Any, **kwargs: Any) -> Any:
        # Decided when called, in the frame of litellm's caching handler; awaited after.
        if _bypassed(active, frames.caller()):
            return _miss()
        return aget(*args, **kwargs)

    try:
        cache.get_cache = get_cache
        cache.async_get_cache = async_get_cache
        setattr(cache, _MARK, True)
    except (AttributeError, TypeError):  # a cache object that takes no attributes
        unguard(cache)


def guarded(cache: Any) -> bool:
    """Whether ``cache``'s reads are the gate's wrappers."""
    return _MARK in (privates.attributes(cache) or {})


def unguard(cache: Any = None) -> None:
    """Put back the reads of ``cache`` (by default ``litellm.cache``)."""
    cache = getattr(litellm, "cache", None) if cache is None else cache
    attributes = privates.attributes(cache) or {}
    for name in ("get_cache", "async_get_cache", _MARK):
        attributes.pop(name, None)


__all__ = ["guard", "guarded", "unguard"]
