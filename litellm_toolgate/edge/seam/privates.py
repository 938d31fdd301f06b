"""Private attributes of litellm's, httpx's and the OpenAI SDK's objects, read and set here
and nowhere else.

The gate taps an httpx client by swapping its transport and proxy mounts (httpx keeps them
in ``_transport`` and ``_mounts``, 0.27 and 0.28), reaches the httpx client inside an OpenAI
SDK client (``_client``, openai 1.x and 2.x), finds what a sync call will read among
litellm's and the SDK's objects by their attribute names, and looks in litellm's client
cache (``litellm.in_memory_llm_clients_cache``, ``litellm.module_level_client``: litellm
1.108.7 and 1.110.2, not documented). :func:`missing` checks each against the installed
libraries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import litellm

RESPONSE_HOLDERS = ("response", "http_response", "_response", "completion_stream")
"""Attributes under which litellm and the OpenAI SDK keep the httpx response they will read,
or what keeps it: an SDK stream or raw response, litellm's stream iterator, and litellm's
stream wrapper (its ``completion_stream``)."""
CLIENT_HOLDERS = ("client", "_client")
"""Where litellm's HTTP handlers and the OpenAI SDK's clients keep their httpx client."""


def transport(client: httpx.Client | httpx.AsyncClient) -> Any:
    """The transport an httpx client sends through when no mount matches."""
    return client._transport


def mounts(client: httpx.Client | httpx.AsyncClient) -> dict[Any, Any]:
    """An httpx client's proxy mounts: URL pattern to transport (or None)."""
    return dict(client._mounts)


def set_transports(client: Any, transport: Any, mounts: Mapping[Any, Any]) -> None:
    """Make ``client`` send through ``transport`` and ``mounts`` from now on."""
    client._mounts = dict(mounts)
    client._transport = transport


def sdk_http_client(sdk: Any) -> Any:
    """The HTTP client an OpenAI SDK client sends through (None for another object)."""
    return getattr(sdk, "_client", None)


def request_of(response: httpx.Response) -> httpx.Request | None:
    """The request of an httpx response, read without running httpx's property (which
    raises when there is none)."""
    request = response.__dict__.get("_request")
    return request if isinstance(request, httpx.Request) else None


def attributes(value: Any) -> dict[str, Any] | None:
    """An object's instance attributes, read without running any of its code."""
    try:
        found = object.__getattribute__(value, "__dict__")
    except Exception:
        return None
    return found if isinstance(found, dict) else None


def held(value: Any, names: tuple[str, ...]) -> Iterator[Any]:
    """What ``value`` keeps under any of ``names`` (instance attributes only)."""
    found = attributes(value)
    if found is None:
        return
    for name in names:
        kept = found.get(name)
        if kept is not None:
            yield kept


def client_cache() -> Any:
    """litellm's in-memory cache of the clients its routes built, or None."""
    return getattr(litellm, "in_memory_llm_clients_cache", None)


def cached_clients(kind: Callable[[Any], bool]) -> Iterator[tuple[Any, Any]]:
    """(key, client) of litellm's client cache that ``kind`` accepts."""
    table = getattr(client_cache(), "cache_dict", None)
    if not isinstance(table, dict):
        return
    for key, value in list(table.items()):
        with contextlib.suppress(Exception):
            if kind(value):
                yield key, value


def shared_sync_handler() -> Any:
    """litellm's module-level sync HTTP handler, or None."""
    return getattr(litellm, "module_level_client", None)


def cache_redis_client() -> Any:
    """The sync Redis client under litellm's configured cache (``litellm.cache.cache``, a
    ``RedisCache``, keeps it as ``redis_client``), or None when the cache names no Redis."""
    inner = getattr(getattr(litellm, "cache", None), "cache", None)
    if inner is None or "Redis" not in type(inner).__name__:
        return None
    return getattr(inner, "redis_client", None)


def missing() -> list[str]:
    """The private attributes above that the installed libraries no longer have."""
    import openai

    gone = []
    with httpx.Client() as client:
        if not hasattr(client, "_transport") or not isinstance(
            getattr(client, "_mounts", None), dict
        ):
            gone.append("httpx.Client._transport / _mounts")
    sdk = openai.OpenAI(api_key="seam-check", base_url="http://127.0.0.1:9")
    if sdk_http_client(sdk) is None:  # an httpx.Client, or the SDK's own (httpx2) client
        gone.append("openai.OpenAI._client")
    sdk.close()
    response = httpx.Response(200, request=httpx.Request("GET", "http://127.0.0.1:9"))
    if request_of(response) is None:
        gone.append("httpx.Response._request")
    if not isinstance(getattr(client_cache(), "cache_dict", None), dict):
        gone.append("litellm.in_memory_llm_clients_cache.cache_dict")
    if not hasattr(litellm, "module_level_client"):
        gone.append("litellm.module_level_client")
    from litellm.caching.redis_cache import RedisCache

    if "redis_client" not in RedisCache.__init__.__code__.co_names:
        gone.append("litellm.caching.redis_cache.RedisCache.redis_client")
    return gone


__all__ = [
    "CLIENT_HOLDERS",
    "RESPONSE_HOLDERS",
    "attributes",
    "cached_clients",
    "client_cache",
    "held",
    "missing",
    "shared_sync_handler",
    "mounts",
    "cache_redis_client",
    "request_of",
    "sdk_http_client",
    "set_transports",
    "transport",
]
