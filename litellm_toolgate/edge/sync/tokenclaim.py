"""Calls on a route whose litellm handler drops ``client=``: claimed on litellm's own client.

litellm's Cohere handler (``cohere/``, ``cohere_chat/``: ``main._complete_cohere_chat``,
1.108.7 and 1.110.2) passes no ``client=`` on to its HTTP handler: the request goes over the
client litellm takes from its own cache (async: ``get_async_httpx_client`` for the
``cohere_chat`` provider and the call's ``ssl_verify``, in a cache keyed by the running
event loop; sync: ``_get_httpx_client`` for the call's ``ssl_verify``). So the client a
``ToolGate`` or the async callback hands the call never carries it. What that handler does
pass on is the call's ``extra_headers``: litellm's ``completion`` copies them into a header
dict of the call's own (``headers = dict(kwargs["headers"] or extra_headers)``, then
``update(extra_headers)``), which the Cohere handler sends as they are. So, before the call:

1. **Expect** (:func:`expect`): the call gets a one-time, unguessable token, put into a copy
   of its ``extra_headers`` under :data:`TOKEN_HEADER`, and a claim held by the call's tap
   (the token table keeps it only weakly: it goes with the call).
2. **Wrap, in place**: a claiming transport around the transport (and each proxy mount) of
   the httpx client litellm will send on: the handler litellm's cache gives for the call's
   provider and ``ssl_verify`` (made now, with litellm's own code, under the very key the
   handler will ask for), and every other cached handler of the same kind. A request that
   carries no token goes through the transport the client had, untouched: no other call is
   ever tapped.
3. **Claim** (the transport): a request carrying the token is sent, the token taken out
   first (the upstream never sees it), through the transport the call's owner made of that
   client's own transport (``wrap``: the tap, or the withholding of the async callback).
   Each token is claimed once; a request that carries a token no call holds (the same
   request sent again by litellm, a stale token) is refused unsent.
4. **Check** (:func:`check_taken`, by the owner, before it hands anything of the answer
   over): a call whose request never reached a claiming transport (litellm's cache gave a
   client the gate did not wrap) went out unseen; its answer is refused
   (:class:`~.refusal.UngatedCallRefused`), never handed over.

Two concurrent calls carry two tokens: each request is decided on its own wire, whatever
the client or the task it goes out on. The clients get their own transports back as soon
as no claim waits for its request (a claim stops waiting once its request was claimed,
its owner checked it, or it was collected).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from ..seam import privates
from ..seam.symbols import AsyncHTTPHandler, HTTPHandler, _get_httpx_client, get_async_httpx_client
from ..transport import WireTap
from .claims import new_token
from .refusal import UngatedCallRefused

TOKEN_HEADER = "x-toolgate-call"
"""The one-time header that binds a request on litellm's own client to the call that
expects it (taken out before the request is sent)."""

_CACHE_PROVIDER = "cohere_chat"
"""The provider litellm's Cohere handler keys its cached async client by (it hands its HTTP
handler ``custom_llm_provider="cohere_chat"`` for ``cohere/`` too; 1.108.7, 1.110.2). The
routes whose handler drops ``client=`` are the table's (``routes.Gated.drops_client``)."""

Wrap = Callable[[Any], Any]


@dataclass(eq=False)
class TokenClaim:
    token: str
    wrap: Wrap
    taken: bool = field(default=False)
    # Gives back the claim's hold on the wrapped clients (once): when its request was
    # claimed, when its owner checked it, or when it is collected.
    release: Callable[[], Any] = field(default=lambda: None)


_lock = threading.Lock()
_BY_TOKEN: weakref.WeakValueDictionary[str, TokenClaim] = weakref.WeakValueDictionary()


def expect(
    kwargs: MutableMapping[str, Any], tap: WireTap, wrap: Wrap, *, asynchronous: bool
) -> TokenClaim:
    """Expect the call of ``kwargs`` on litellm's own client (its token in a copy of its
    ``extra_headers``), its request sent through ``wrap`` of that client's transport, and
    wrap the clients litellm may send it on (:func:`claim_litellm_clients`). The claim is
    held by ``tap`` (see :func:`check_taken`); the clients stay wrapped while any claim
    waits for its request, and get their own transports back once none does."""
    extra = kwargs.get("extra_headers")
    if extra is not None and not isinstance(extra, Mapping):
        raise UngatedCallRefused(
            "this call's extra_headers is not a mapping, so the gate cannot mark its "
            "request; it was not sent"
        )
    claim = TokenClaim(new_token(), wrap)
    _lease(claim)
    claim_litellm_clients(kwargs, asynchronous=asynchronous)
    headers = dict(extra or {})
    headers[TOKEN_HEADER] = claim.token
    kwargs["extra_headers"] = headers
    with _lock:
        _BY_TOKEN[claim.token] = claim
    tap.token_claim = claim
    return claim


def take(token: str) -> TokenClaim | None:
    """The claim of ``token``, once (None when no call holds it, or it was taken)."""
    with _lock:
        claim = _BY_TOKEN.pop(token, None)
    if claim is None or claim.taken:
        return None
    claim.taken = True
    return claim


_UNHELD = (
    "a request carried a toolgate call token that no call holds (sent again, or stale); it "
    "was not sent"
)


class TokenClaimingTransport(httpx.BaseTransport):
    """Around a sync client's own transport: a request carrying a token goes through its
    call's transport; every other one as the client would send it."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        token = request.headers.get(TOKEN_HEADER)
        if token is None:
            return self.inner.handle_request(request)
        del request.headers[TOKEN_HEADER]
        claim = take(token)
        if claim is None:
            raise UngatedCallRefused(_UNHELD)
        transport = claim.wrap(self.inner)
        claim.release()  # the request is in the call's own transport now
        del claim
        response: httpx.Response = transport.handle_request(request)
        return response

    def close(self) -> None:
        self.inner.close()


class AsyncTokenClaimingTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`TokenClaimingTransport`."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        token = request.headers.get(TOKEN_HEADER)
        if token is None:
            return await self.inner.handle_async_request(request)
        del request.headers[TOKEN_HEADER]
        claim = take(token)
        if claim is None:
            raise UngatedCallRefused(_UNHELD)
        transport = claim.wrap(self.inner)
        claim.release()  # the request is in the call's own transport now
        del claim
        response: httpx.Response = await transport.handle_async_request(request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


_Claiming = TokenClaimingTransport | AsyncTokenClaimingTransport
_wrapped: dict[int, tuple[weakref.ref[Any], _Claiming]] = {}
_wrap_lock = threading.RLock()


def _claim(client: Any) -> None:
    """A token-claiming transport around ``client``'s transport and proxy mounts (once)."""
    if isinstance(client, httpx.AsyncClient):
        make: Callable[[Any], _Claiming] = AsyncTokenClaimingTransport
    elif isinstance(client, httpx.Client):
        make = TokenClaimingTransport
    else:
        return
    if client.is_closed:
        return
    with _wrap_lock:
        transport = privates.transport(client)
        if _layered(transport):
            return
        wrapper = make(transport)
        mounts = {
            pattern: None if inner is None else make(inner)
            for pattern, inner in privates.mounts(client).items()
        }
        privates.set_transports(client, wrapper, mounts)
        key = id(client)

        def forget(_ref: object) -> None:
            with _wrap_lock:
                entry = _wrapped.get(key)
                if entry is not None and entry[0]() is None:
                    del _wrapped[key]

        _wrapped[key] = (weakref.ref(client, forget), wrapper)


class _Leases:
    """How many live claims keep the clients wrapped."""

    count = 0


def _lease(claim: TokenClaim) -> None:
    """Count ``claim`` as keeping the clients wrapped until it is collected."""
    with _wrap_lock:
        _Leases.count += 1
    claim.release = weakref.finalize(claim, _release)


def _release() -> None:
    with _wrap_lock:
        _Leases.count -= 1
        if _Leases.count == 0:
            restore()


def claim_litellm_clients(kwargs: Any, *, asynchronous: bool) -> None:
    """Wrap the clients litellm's Cohere handler may send this call on: the cached handler
    for its ``ssl_verify`` (made now, by litellm's own code, when not cached yet; async:
    under the running loop's key, as the handler asks for it), and every other cached
    handler of that kind (the request is claimed by its token alone)."""
    params = {"ssl_verify": kwargs.get("ssl_verify")}
    handlers: list[Any]
    if asynchronous:
        handlers = [
            get_async_httpx_client(
                llm_provider=_CACHE_PROVIDER,
                params=params,
                shared_session=kwargs.get("shared_session"),
            )
        ]
        kind: type = AsyncHTTPHandler
    else:
        handlers = [_get_httpx_client(params=params), privates.shared_sync_handler()]
        kind = HTTPHandler
    handlers.extend(value for _key, value in privates.cached_clients(lambda v: isinstance(v, kind)))
    for handler in handlers:
        if isinstance(handler, kind):
            _claim(getattr(handler, "client", None))


def taken(tap: Any) -> bool:
    """Whether the call of ``tap`` was claimed on litellm's own client, where it was
    expected there (True for any other call)."""
    claim = getattr(tap, "token_claim", None)
    if not isinstance(claim, TokenClaim):
        return True
    _forget(claim)
    return claim.taken


def _forget(claim: TokenClaim) -> None:
    """The owner checked the claim: no request of it is claimed any more."""
    with _lock:
        _BY_TOKEN.pop(claim.token, None)
    claim.release()


def check_taken(tap: Any) -> None:
    """Before an answer is handed over: a call expected on litellm's own client was claimed
    there, or it went out through a client the gate never saw (refused)."""
    if not taken(tap):
        raise UngatedCallRefused(
            "this call went out through an HTTP client of litellm's that toolgate did not "
            "claim (litellm's Cohere handler drops client=), so its wire was not seen; its "
            "answer was not handed over"
        )


def wrapped() -> int:
    """How many clients carry a token-claiming transport now."""
    with _wrap_lock:
        return len(_wrapped)


_LAYERS = 8
"""How deep the gate's own claiming layers around a client's transport may go (a few)."""


def _is_layer(transport: Any) -> bool:
    return isinstance(transport, (TokenClaimingTransport, AsyncTokenClaimingTransport))


def _layered(transport: Any) -> bool:
    """Whether a token-claiming layer is in ``transport``'s chain (under another claiming
    transport of the gate's, the callback's, put around it since)."""
    for _ in range(_LAYERS):
        if transport is None or _is_layer(transport):
            return transport is not None
        transport = getattr(transport, "inner", None)
    return False


def _without(transport: Any) -> Any:
    """``transport`` with every token-claiming layer taken out of its chain."""
    while _is_layer(transport):
        transport = transport.inner
    parent = transport
    for _ in range(_LAYERS):
        child = getattr(parent, "inner", None)
        if child is None:
            break
        if _is_layer(child):
            parent.inner = child.inner
            continue
        parent = child
    return transport


def restore() -> None:
    """Give every wrapped client its own transports back."""
    with _wrap_lock:
        for ref, _wrapper in list(_wrapped.values()):
            client = ref()
            if client is None:
                continue
            privates.set_transports(
                client,
                _without(privates.transport(client)),
                {
                    pattern: None if t is None else _without(t)
                    for pattern, t in privates.mounts(client).items()
                },
            )
        _wrapped.clear()


__all__ = [
    "TOKEN_HEADER",
    "AsyncTokenClaimingTransport",
    "TokenClaim",
    "TokenClaimingTransport",
    "check_taken",
    "claim_litellm_clients",
    "expect",
    "restore",
    "take",
    "taken",
    "wrapped",
]
