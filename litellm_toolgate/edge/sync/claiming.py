"""Sync calls under ``litellm.callbacks``: armed in ``log_pre_api_call``, claimed on the wire.

litellm gives a callback no sync hook that can change a request or stop a response: the
only sync hook that runs before a request is sent is ``log_pre_api_call`` (on the caller's
thread, with the call's id, its full URL, the body about to be sent and the very headers
dict that will be sent), and it swallows every ``Exception``. What the gate can change is
the HTTP transport litellm's own sync client is built on: litellm reads a module-level
``litellm.sync_transport`` whenever it builds a client. So:

1. **Install.** The first gated sync call puts a :class:`ClaimingTransport` in
   ``litellm.sync_transport``, wrapping the one the user set there, if any (otherwise it
   sends as litellm would have: its TLS settings, http2 and the environment's proxies).
   litellm caches its sync clients; a cached client built before the install would bypass
   it, so those are evicted before each armed call.
2. **Arm** (``log_pre_api_call``). The call gets its attempt and a claim: the thread, the
   URL, the body, and a one-time token put into the outgoing headers under
   :data:`MARKER`.
3. **Claim** (the transport). A request carrying the marker is matched to its claim: same
   token, same thread, same URL, same body. The marker is taken out before the request is
   sent, so the upstream never sees it. The response body then goes through the same
   withholding as the async path (:class:`~.withhold.SyncWithholdingStream`): text passes
   live, tool calls wait for the wire's end, parse, schema and the policy; a whole body is
   judged on the wire before litellm reads any of it. A marker without a matching claim is
   refused before the request is sent.
4. **Check** (``log_post_api_call``, after the response headers and before litellm reads
   the body). An armed call whose request never reached the transport went out through a
   client the gate cannot see (a ``client=`` passed by hand, ``litellm.force_ipv4``): it is
   refused there, before a byte of its body is read.

A claimed request the upstream answers with a redirect is refused, not followed: the request
that follows it would carry no marker. The OpenAI SDK routes (``openai/``, ``azure/``, ...)
send through ``litellm.client_session`` instead of ``litellm.sync_transport``: their claim is
:mod:`sdkclaim`'s, on the same transport.

Refusals that cannot be a quarantine (nothing was observed) raise
:class:`UngatedCallRefused`, a ``BaseException``: litellm swallows every narrower exception
a logging hook raises.

:class:`ToolGate`'s own sync calls carry a client of that gate's, which gates them itself:
the gate vouches for each one by its ``litellm_call_id`` and thread while litellm's call is
being made (:func:`vouched`), and the callback leaves exactly those calls alone.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import httpx
import litellm

from .claims import ClaimTable, Vouches, new_token
from ..transport import WireTap, _wrap
from ..withhold import HeldResponse, SyncWithholdingStream, Withholding

_C = TypeVar("_C")

MARKER = "x-toolgate-claim"
"""The one-time header that binds a sync request to the call that armed it (never sent)."""


def sent(kwargs: Mapping[str, Any], name: str) -> Any:
    """What litellm's ``log_pre_api_call`` kwargs say of the request about to be sent
    (``additional_args``: ``api_base``, ``headers``, ``complete_input_dict``), or None."""
    extra = kwargs.get("additional_args")
    return extra.get(name) if isinstance(extra, Mapping) else None


class UngatedCallRefused(BaseException):
    """A sync call under the callback that the gate cannot gate; it was not sent.

    Derives from ``BaseException``: litellm swallows every ``Exception`` its logging hooks
    raise, so this is the only way the refusal reaches the caller.
    """


@dataclass
class _Claim:
    token: str
    call_id: str
    thread: int
    url: str
    body: Any
    tap: WireTap
    gate: Withholding
    ssl_verify: Any = None
    claimed: bool = field(default=False)
    # How the request's URL is checked (the exact URL, or an SDK route's base URL) and what
    # to undo once the request is claimed or the call is settled (see sdkclaim).
    url_matches: Callable[[httpx.URL], bool] | None = None
    restore: Callable[[], None] | None = None

    def settled(self) -> None:
        if self.restore is not None:
            self.restore()
            self.restore = None


class _Claims(ClaimTable[_Claim]):
    """Armed calls (the core's table of them), each claimed at most once."""

    def arm(
        self,
        kwargs: Mapping[str, Any],
        tap: WireTap,
        gate: Withholding,
        *,
        url: str,
        body: Any,
        ssl_verify: Any = None,
        url_matches: Callable[[httpx.URL], bool] | None = None,
        restore: Callable[[], None] | None = None,
    ) -> str:
        """Arm one request of the call on this thread; the one-time marker it must carry."""
        token = new_token()
        self.add(
            _Claim(
                token=token,
                call_id=str(kwargs.get("litellm_call_id") or ""),
                thread=threading.get_ident(),
                url=url,
                body=json.loads(json.dumps(body)),
                tap=tap,
                gate=gate,
                ssl_verify=ssl_verify,
                url_matches=url_matches,
                restore=restore,
            )
        )
        return token


CLAIMS = _Claims()
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


class ClaimingTransport(httpx.BaseTransport):
    """``litellm.sync_transport`` while a gate is a callback. See the module docstring."""

    def __init__(
        self,
        inner: httpx.BaseTransport | None,
        sends_as: Callable[[Any], httpx.Client] | None = None,
    ) -> None:
        # The transport the user put in litellm.sync_transport, or None: send as litellm would.
        self.inner = inner
        # How litellm would have set up the client this transport stands in for (by the
        # call's ssl_verify): litellm's own HTTP handler by default.
        self._sends_as = sends_as or _default_client
        self._lock = threading.Lock()
        self._defaults: dict[str, httpx.Client] = {}

    def _route(self, request: httpx.Request, ssl_verify: Any = None) -> httpx.BaseTransport:
        if self.inner is not None:
            return self.inner
        key = repr(ssl_verify)
        with self._lock:
            client = self._defaults.get(key)
            if client is None:
                client = self._defaults[key] = self._sends_as(ssl_verify)
        # httpx's own choice of transport for this URL: the environment's proxy, or none.
        transport: httpx.BaseTransport = client._transport_for_url(request.url)
        return transport

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        token = request.headers.get(MARKER)
        if token is None:
            # Not a model turn a gate armed (litellm's other sync calls): as litellm would.
            return self._route(request).handle_request(request)
        del request.headers[MARKER]
        claim = CLAIMS.take(token)
        if claim is None or not _matches(claim, request):
            raise UngatedCallRefused(
                "a sync request carried a toolgate claim that does not match the call that "
                "armed it; it was not sent"
            )
        claim.claimed = True
        claim.settled()
        tap = claim.tap
        tap.prepare(request)
        response = self._route(request, claim.ssl_verify).handle_request(request)
        if response.has_redirect_location:
            # The client would follow it with a request that carries no marker, and the
            # answer to that one would reach the caller unread: not followed.
            response.close()
            raise UngatedCallRefused(
                "the upstream answered a gated sync call with a redirect; it was not "
                "followed and nothing of it was read (point api_base at the final URL)"
            )
        if not tap.bind(response, request):
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        if tap.streamed:
            body = SyncWithholdingStream(response.stream, tap, claim.gate)
            return _wrap(response, body, request)
        whole = SyncWithholdingStream(response.stream, tap, claim.gate, defer=True)
        return HeldResponse(response, whole, request, tap, claim.gate)

    def close(self) -> None:
        # Every sync client litellm builds sits on this one transport, and httpx closes a
        # client's transport with the client: litellm closes a handler it drops (its
        # ``__del__`` does), while other threads are sending through the same connections.
        # Closing anything here broke their requests (EBADF); the transport lives as long
        # as the process, and so do the clients it sends on.
        return


def _default_client(ssl_verify: Any) -> httpx.Client:
    """An httpx client set up as litellm's own sync client would be without a transport."""
    from litellm.llms.custom_httpx import http_handler

    http2 = bool(http_handler.http2_enabled())
    try:
        verify = http_handler.get_ssl_configuration(ssl_verify, http2=http2)
    except TypeError:  # litellm 1.108: no http2 argument
        verify = http_handler.get_ssl_configuration(ssl_verify)
    cert = os.getenv("SSL_CERTIFICATE", litellm.ssl_certificate)
    return httpx.Client(verify=verify, cert=cert, http2=http2, trust_env=True)


def _matches(claim: _Claim, request: httpx.Request) -> bool:
    # The core's table gives a claim only to the thread that armed it.
    if claim.url_matches is not None:
        if not claim.url_matches(request.url):
            return False
    elif str(request.url) != claim.url:
        return False
    try:
        sent = json.loads(request.content)
    except ValueError:
        return False
    return bool(sent == claim.body)


def install() -> ClaimingTransport:
    """The claiming transport in ``litellm.sync_transport`` (wrapping the user's, if any)."""
    current = getattr(litellm, "sync_transport", None)
    if isinstance(current, ClaimingTransport):
        return current
    if current is not None and not isinstance(current, httpx.BaseTransport):
        raise UngatedCallRefused(
            "litellm.sync_transport is not an httpx transport; the gate cannot claim its calls"
        )
    claiming = ClaimingTransport(current)
    # Not declared by every litellm version (litellm reads it with getattr).
    setattr(litellm, "sync_transport", claiming)  # noqa: B010
    return claiming


def evict_cached(foreign: Callable[[object, object], bool]) -> int:
    """Drop the entries of litellm's client cache that ``foreign(key, client)`` names; how
    many. Dropped clients are not closed here (litellm closes the ones it owns, later)."""
    cache: Any = getattr(litellm, "in_memory_llm_clients_cache", None)
    table = getattr(cache, "cache_dict", None)
    if not isinstance(table, dict):
        return 0
    evicted = 0
    for key, value in list(table.items()):
        if foreign(key, value):
            evicted += 1
            with contextlib.suppress(Exception):
                cache.delete_cache(key)
    return evicted


def evict_foreign_clients(claiming: ClaimingTransport) -> int:
    """Drop litellm's cached sync clients that were built on another transport; how many."""

    def foreign(key: object, value: object) -> bool:
        if not (isinstance(key, str) and key.startswith("httpx_client")):
            return False
        return getattr(getattr(value, "client", None), "_transport", None) is not claiming

    return evict_cached(foreign)


def arm(kwargs: Mapping[str, Any], tap: WireTap, gate: Withholding) -> None:
    """Arm one sync request of a call (see the module docstring); refuse what cannot be."""
    if litellm.force_ipv4:
        raise UngatedCallRefused(
            "litellm.force_ipv4 makes litellm build its own sync transport, which the gate "
            "cannot see; this sync call was not sent (use the async call, or ToolGate)"
        )
    headers = sent(kwargs, "headers")
    url = sent(kwargs, "api_base")
    body = sent(kwargs, "complete_input_dict")
    if not isinstance(headers, dict) or not isinstance(url, str) or body is None:
        raise UngatedCallRefused(
            "this sync call's request is not visible to the gate; it was not sent"
        )
    claiming = install()
    if evict_foreign_clients(claiming):
        # litellm takes its cached client *before* this hook runs (the Responses route does,
        # and its stream reaches the caller with no later hook): a client built on another
        # transport may be the one this very request is about to go out on, unclaimed.
        raise UngatedCallRefused(
            "litellm held a sync HTTP client built before the gate's transport was installed, "
            "and this call may be sent through it; it was not sent (the client is dropped: "
            "the next call is gated)"
        )
    params = kwargs.get("litellm_params")
    ssl_verify = params.get("ssl_verify") if isinstance(params, Mapping) else None
    headers[MARKER] = CLAIMS.arm(kwargs, tap, gate, url=url, body=body, ssl_verify=ssl_verify)


def check_claimed(kwargs: Mapping[str, Any]) -> None:
    """After the response headers: the armed request must have been claimed."""
    claim = CLAIMS.settle(str(kwargs.get("litellm_call_id") or ""))
    if claim is None:
        return
    headers = sent(kwargs, "headers")
    if isinstance(headers, dict):
        headers.pop(MARKER, None)
    claim.settled()
    if not claim.claimed:
        raise UngatedCallRefused(
            "this sync call went out through an HTTP client the gate cannot see (a client= "
            "of your own?); its response was not read"
        )


__all__ = [
    "MARKER",
    "ClaimingTransport",
    "UngatedCallRefused",
    "arm",
    "check_claimed",
    "install",
    "is_vouched",
    "vouched",
]
