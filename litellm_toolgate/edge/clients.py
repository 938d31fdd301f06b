"""The ``client=`` the gate hands litellm, of the kind each route expects, on a tapped wire.

litellm takes a caller's client on every route it gates, but not the same kind everywhere
(:mod:`.routes` says which): most routes take a litellm ``HTTPHandler``, while the OpenAI SDK
routes (``openai/``, ``azure/``, ``perplexity/``, ...) take an ``openai.OpenAI`` /
``AzureOpenAI`` (or their async twins) and fail inside litellm on anything else.
:meth:`ClientPool.tapped_client` is the one place that builds either, around the transport
the caller's ``wrap`` returns (a tap, or the callback's withholding transport), so the gate
reads every byte litellm reads.

Nothing litellm would have sent may be lost on the way:

* a caller's client is **wrapped**, never replaced: a copy of its httpx client whose
  transport and proxy mounts are tapped (headers, auth, base URL, timeouts and the
  connection pool stay the caller's), and for an SDK client a copy
  (``with_options(http_client=...)``) that keeps its key, base URL, organization, project,
  API version, default headers and query. An SDK client on the SDK's own default HTTP client
  gets the gate's httpx client instead (the SDK's default is a different HTTP library); an
  SDK client on any other HTTP client is refused, since the gate could not read it;
* with no caller's client the SDK client is built as litellm builds its own: the key, base
  URL and organization resolved the way litellm resolves them for that route (litellm's
  ``get_llm_provider``, then litellm's globals and environment variables), Azure's through
  litellm's own Azure client settings (API version, AD token or token provider, Entra ID).
  Per-request settings (timeout, retries, organization, extra headers) litellm sets on the
  client or the request itself, as it does for any caller's client.

On the handler routes a caller's ``HTTPHandler`` / ``AsyncHTTPHandler`` is wrapped the same
way (a tapped copy of its httpx client, the caller's handler untouched). With no caller's
handler the gate taps a copy of the handler litellm itself would build for the call:
litellm's ``HTTPHandler(ssl_verify=...)`` / ``AsyncHTTPHandler(ssl_verify=...)`` for the
call's ``ssl_verify`` (else litellm's), so litellm's certificates, client certificate,
environment proxies, default headers, timeout and cookie policy all apply.

The gate's own handlers and httpx clients are shared across calls (sync ones once, async
ones once per event loop; handlers once per ``ssl_verify``, a few at most); each call gets a
tapped copy. The gate's SDK httpx clients trust the environment (proxies, as httpx reads
them). When the user set ``litellm.client_session`` / ``aclient_session`` (the http client
litellm builds its SDK clients on), a tapped copy of that session is used instead, so its
proxies, certificates and headers apply as they would without the gate.

litellm keeps an Azure SDK client it was handed in its client cache, keyed by the call's
settings, and would hand it to a later call with the same settings: :func:`forget` takes the
gate's client out of that cache once the call is made.
"""

from __future__ import annotations

import asyncio
import copy
import os
import weakref
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import Any

import httpx
import litellm
import openai

from ..core.errors import WireNotObservable
from .calltypes import builds_whole_client
from .routes import ClientKind
from .seam import privates
from .seam.symbols import AsyncHTTPHandler, HTTPHandler, lazy, whole_call_timeout
from .transport import WireTap

Wrap = Callable[[Any], Any]
"""Given the transport a request would go through, the transport that taps it (has ``tap``)."""


class TappedHTTPHandler(HTTPHandler):
    """litellm's sync handler on a tapped httpx client, feeding one attempt."""

    tap: WireTap
    base: Any  # the gate's litellm handler under it (kept alive while this one is in use)


class TappedAsyncHTTPHandler(AsyncHTTPHandler):
    """litellm's async handler on a tapped httpx client, feeding one attempt.

    litellm's async handler sends a request again on a new client of its own after a
    connection error (``create_client``): here that client is another tapped copy, so the
    retry is tapped too.
    """

    tap: WireTap
    base: Any
    _fresh: Callable[[], httpx.AsyncClient]

    def __init__(self, client: httpx.AsyncClient, fresh: Callable[[], httpx.AsyncClient]) -> None:
        self._fresh = lambda: client  # what AsyncHTTPHandler.__init__ builds its client with
        super().__init__()
        self.client = client  # litellm's setter: not the handler's to close
        self._fresh = fresh

    def create_client(self, *args: Any, **kwargs: Any) -> httpx.AsyncClient:
        return self._fresh()


# The HTTP clients the SDK makes for itself when given none (no settings of the caller's).
_SDK_DEFAULT_HTTP = frozenset({"SyncHttpxClientWrapper", "AsyncHttpxClientWrapper"})
_SDK_ASYNC = (openai.AsyncOpenAI,)
_SDK_SYNC = (openai.OpenAI,)


def is_async_client(client: Any) -> bool:
    return isinstance(client, (AsyncHTTPHandler, openai.AsyncOpenAI))


def _tap_of(transport: Any) -> WireTap:
    tap = getattr(transport, "tap", None)
    assert isinstance(tap, WireTap), "wrap must return a transport that carries its tap"
    return tap


def _tapped_copy(client: httpx.Client | httpx.AsyncClient, wrap: Wrap) -> Any:
    """A copy of an httpx client whose transport and proxy mounts all go through ``wrap``.

    The copy shares everything else (headers, auth, timeouts, cookies, the pools underneath):
    the caller's client itself is left untouched, so its other calls stay untapped.
    """
    tapped = copy.copy(client)
    privates.set_transports(
        tapped,
        wrap(privates.transport(client)),
        {
            pattern: None if transport is None else wrap(transport)
            for pattern, transport in privates.mounts(client).items()
        },
    )
    return tapped


_HANDLERS_KEPT = 8
"""How many ``ssl_verify`` values a pool keeps a litellm handler for (sync, and per loop)."""


def _ssl_key(ssl_verify: Any) -> Hashable:
    """What litellm's handler for ``ssl_verify`` is built from: the value it resolves to
    (the call's, else ``SSL_VERIFY`` or ``litellm.ssl_verify``) and the client certificate."""
    resolved = ssl_verify if ssl_verify is not None else os.getenv("SSL_VERIFY", litellm.ssl_verify)
    cert = os.getenv("SSL_CERTIFICATE", litellm.ssl_certificate)
    key = (resolved, cert)
    try:
        hash(key)
    except TypeError:
        return (id(resolved), id(cert))
    return key


class ClientPool:
    """The gate's shared litellm handlers and httpx clients, and :meth:`tapped_client`, the
    one entry point. Sync ones are made once; async ones once per event loop."""

    def __init__(self) -> None:
        self._sync_handlers: dict[Hashable, HTTPHandler] = {}
        self._async_handlers: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[Hashable, AsyncHTTPHandler]
        ] = weakref.WeakKeyDictionary()
        self._sync_client: httpx.Client | None = None
        self._async_clients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, httpx.AsyncClient
        ] = weakref.WeakKeyDictionary()

    def litellm_handler(self, asynchronous: bool, ssl_verify: Any = None) -> Any:
        """litellm's own ``HTTPHandler`` / ``AsyncHTTPHandler`` for a call with this
        ``ssl_verify`` (None: litellm's), built by litellm as it builds its own. Kept for the
        first few ``ssl_verify`` values; past those each call gets one of its own, closed by
        litellm once the call's handler is gone."""
        handlers: dict[Hashable, Any]
        if asynchronous:
            loop = asyncio.get_running_loop()
            handlers = self._async_handlers.setdefault(loop, {})
        else:
            handlers = self._sync_handlers
        key = _ssl_key(ssl_verify)
        handler: Any = handlers.get(key)
        if handler is None:
            make: Any = AsyncHTTPHandler if asynchronous else HTTPHandler
            handler = make(ssl_verify=ssl_verify)
            if len(handlers) < _HANDLERS_KEPT:
                handlers[key] = handler
        return handler

    def handler_client(self, handler: Any) -> httpx.Client | httpx.AsyncClient:
        """The httpx client the gate taps for one of its litellm handlers: the handler's."""
        client: httpx.Client | httpx.AsyncClient = handler.client
        return client

    def http_client(self, asynchronous: bool) -> httpx.Client | httpx.AsyncClient:
        """The httpx client under the gate's SDK clients (it honours proxy variables)."""
        if not asynchronous:
            if self._sync_client is None:
                self._sync_client = httpx.Client(follow_redirects=True)
            return self._sync_client
        loop = asyncio.get_running_loop()
        client = self._async_clients.get(loop)
        if client is None:
            client = self._async_clients[loop] = httpx.AsyncClient(follow_redirects=True)
        return client

    def _taken(
        self,
    ) -> tuple[
        list[Callable[[], Any]],
        list[tuple[asyncio.AbstractEventLoop, Callable[[], Awaitable[Any]]]],
    ]:
        """How to close every handler and client made so far, forgotten here (the gate's
        to close): the sync ones, and the async ones with their loop."""
        sync: list[Callable[[], Any]] = [h.close for h in self._sync_handlers.values()]
        if self._sync_client is not None:
            sync.append(self._sync_client.close)
        self._sync_handlers = {}
        self._sync_client = None
        owned: list[tuple[asyncio.AbstractEventLoop, Callable[[], Awaitable[Any]]]] = [
            (loop, handler.close)
            for loop, handlers in self._async_handlers.items()
            for handler in handlers.values()
        ]
        owned += [(loop, client.aclose) for loop, client in self._async_clients.items()]
        self._async_handlers.clear()
        self._async_clients.clear()
        return sync, owned

    def close(self) -> None:
        """Close what this pool made; an async one whose loop is running or closed is only
        dropped (``aclose`` closes it on its own loop)."""
        sync, owned = self._taken()
        for close in sync:
            close()
        for loop, aclose in owned:
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(aclose())

    async def aclose(self) -> None:
        """Close what this pool made, the async ones on their own loop."""
        sync, owned = self._taken()
        for close in sync:
            close()
        current = asyncio.get_running_loop()
        for loop, aclose in owned:
            if loop is current:
                await aclose()
            elif not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(aclose())

    def tapped_client(
        self,
        kind: ClientKind,
        wrap: Wrap,
        *,
        asynchronous: bool,
        user_client: Any = None,
        request: Mapping[str, Any] | None = None,
    ) -> Any:
        """A client of ``kind`` for one litellm call, every byte of it through ``wrap``.

        ``user_client`` is the caller's ``client=`` (wrapped, not replaced); ``request`` the
        call's litellm arguments (for the SDK kinds: the settings litellm would build from).
        The client carries the tap as ``client.tap``. A caller's client the gate cannot
        read is a :class:`WireNotObservable`.
        """
        if kind is ClientKind.HTTP_HANDLER:
            return self._handler(wrap, asynchronous, user_client, request or {})
        forget()
        if user_client is not None:
            sdk = self._wrapped_sdk(kind, wrap, asynchronous, user_client)
        else:
            # litellm builds its SDK clients on the user's session when one is set
            # (litellm.client_session / aclient_session): so does the gate, tapped.
            session = _shared_session(asynchronous)
            http_type = httpx.AsyncClient if asynchronous else httpx.Client
            base = session if isinstance(session, http_type) else self.http_client(asynchronous)
            http_client = _tapped_copy(base, wrap)
            settings = dict(request or {})
            if kind is ClientKind.AZURE_SDK:
                sdk = _azure_client(settings, http_client, asynchronous)
            else:
                sdk = _openai_client(settings, http_client, asynchronous)
        sdk.tap = _tap_of(privates.transport(privates.sdk_http_client(sdk)))
        _ISSUED.add(sdk)
        return sdk

    # ---- litellm's HTTPHandler ---------------------------------------------------------
    def _handler(
        self, wrap: Wrap, asynchronous: bool, user_client: Any, request: Mapping[str, Any]
    ) -> Any:
        handler_type = AsyncHTTPHandler if asynchronous else HTTPHandler
        http_type = httpx.AsyncClient if asynchronous else httpx.Client
        base: Any = None
        provider = str(
            request.get("custom_llm_provider") or str(request.get("model") or "").split("/")[0]
        )
        if (
            user_client is None
            and not asynchronous
            and builds_whole_client(provider, bool(request.get("stream")))
        ):
            # litellm builds this call's handler itself, with the call's timeout (calltypes).
            try:
                base = HTTPHandler(timeout=whole_call_timeout(request, provider))
            except Exception:
                raise WireNotObservable(
                    f"cannot build the client litellm builds for a sync whole call on the "
                    f"{provider}/ route; pass a litellm HTTPHandler as client="
                ) from None
            inner = self.handler_client(base)
        elif user_client is None:
            # The handler litellm would build for this call (its ssl_verify, else litellm's).
            base = self.litellm_handler(asynchronous, request.get("ssl_verify"))
            inner = self.handler_client(base)
        elif isinstance(user_client, handler_type) and isinstance(user_client.client, http_type):
            inner = user_client.client
        else:
            raise WireNotObservable(
                f"cannot observe a client of type {type(user_client).__name__} on this route; "
                f"pass a litellm {handler_type.__name__} or no client"
            )
        tapped = _tapped_copy(inner, wrap)
        handler: Any
        if asynchronous:
            handler = TappedAsyncHTTPHandler(tapped, lambda: _tapped_copy(inner, wrap))
        else:
            handler = TappedHTTPHandler(client=tapped)
        handler.tap = _tap_of(privates.transport(tapped))
        handler.base = base
        return handler

    # ---- the OpenAI SDK ----------------------------------------------------------------
    def _wrapped_sdk(self, kind: ClientKind, wrap: Wrap, asynchronous: bool, user: Any) -> Any:
        expected = _SDK_ASYNC if asynchronous else _SDK_SYNC
        if kind is ClientKind.AZURE_SDK:
            names = "AsyncAzureOpenAI" if asynchronous else "AzureOpenAI"
        else:
            names = "AsyncOpenAI" if asynchronous else "OpenAI"
        if not isinstance(user, expected):
            raise WireNotObservable(
                f"cannot observe a client of type {type(user).__name__} on this route; "
                f"pass an openai.{names} or no client"
            )
        inner = privates.sdk_http_client(user)
        http_type = httpx.AsyncClient if asynchronous else httpx.Client
        if isinstance(inner, http_type):
            http_client = _tapped_copy(inner, wrap)
        elif type(inner).__name__ in _SDK_DEFAULT_HTTP:
            # The SDK's own default HTTP client (another HTTP library): the gate's instead.
            http_client = _tapped_copy(self.http_client(asynchronous), wrap)
        else:
            raise WireNotObservable(
                f"cannot observe an openai.{names} on an HTTP client of type "
                f"{type(inner).__name__}; give it http_client=httpx."
                f"{http_type.__name__}(...) or pass no client"
            )
        return user.with_options(http_client=http_client)


def _secret(name: str) -> str | None:
    value = lazy("get_secret_str")(name)
    return value or None


def _provider_settings(request: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(api_key, api_base) as litellm's ``get_llm_provider`` resolves them for this call."""
    api_key = request.get("api_key")
    api_base = request.get("api_base") or request.get("base_url")
    try:
        _, _, dynamic_key, dynamic_base = litellm.get_llm_provider(
            model=str(request.get("model", "")),
            custom_llm_provider=request.get("custom_llm_provider"),
            api_base=api_base,
            api_key=api_key,
        )
    except Exception:
        return api_key, api_base
    return (dynamic_key if dynamic_key is not None else api_key), (dynamic_base or api_base)


def _openai_client(request: Mapping[str, Any], http_client: Any, asynchronous: bool) -> Any:
    """The OpenAI client litellm builds for an OpenAI-compatible route, on ``http_client``."""
    api_key, api_base = _provider_settings(request)
    api_key = (
        api_key
        or litellm.api_key
        or getattr(litellm, "openai_key", None)
        or _secret("OPENAI_API_KEY")
    )
    api_base = (
        api_base
        or litellm.api_base
        or _secret("OPENAI_BASE_URL")
        or _secret("OPENAI_API_BASE")
        or "https://api.openai.com/v1"
    )
    organization = (
        request.get("organization") or litellm.organization or _secret("OPENAI_ORGANIZATION")
    )
    make = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return make(
        api_key=api_key,
        base_url=api_base,
        organization=organization,
        http_client=http_client,
    )


_AZURE_PARAMS = (
    "azure_ad_token",
    "azure_ad_token_provider",
    "tenant_id",
    "client_id",
    "client_secret",
    "azure_username",
    "azure_password",
    "azure_scope",
    "max_retries",
    "timeout",
)


def _azure_client(request: Mapping[str, Any], http_client: Any, asynchronous: bool) -> Any:
    """The Azure OpenAI client litellm builds for ``azure/``, on ``http_client``."""
    api_key, api_base = _provider_settings(request)
    api_base = api_base or litellm.api_base or _secret("AZURE_API_BASE")
    api_version = (
        request.get("api_version")
        or litellm.api_version
        or _secret("AZURE_API_VERSION")
        or litellm.AZURE_DEFAULT_API_VERSION
    )
    api_key = (
        api_key
        or litellm.api_key
        or getattr(litellm, "azure_key", None)
        or _secret("AZURE_OPENAI_API_KEY")
        or _secret("AZURE_API_KEY")
    )
    params: dict[str, Any] = {name: request.get(name) for name in _AZURE_PARAMS}
    params["azure_ad_token"] = params["azure_ad_token"] or _secret("AZURE_AD_TOKEN")
    settings = lazy("BaseAzureLLM")().initialize_azure_sdk_client(
        litellm_params=params,
        api_key=api_key,
        api_base=api_base,
        model_name=str(request.get("model", "")),
        api_version=api_version,
        is_async=asynchronous,
    )
    old = settings.get("http_client")
    settings["http_client"] = http_client
    if old is not None and old is not http_client and old is not _shared_session(asynchronous):
        _close_quietly(old)
    make = openai.AsyncAzureOpenAI if asynchronous else openai.AzureOpenAI
    return make(**settings)


def _shared_session(asynchronous: bool) -> Any:
    return litellm.aclient_session if asynchronous else litellm.client_session


def _close_quietly(client: Any) -> None:
    # litellm made an httpx client for the SDK client it would have built; unused here.
    if isinstance(client, httpx.Client):
        client.close()


# Every SDK client the gate made (while it lives): litellm may have cached any of them.
_ISSUED: weakref.WeakSet[Any] = weakref.WeakSet()


def _issued(value: Any) -> bool:
    try:
        return value in _ISSUED
    except TypeError:  # not an object a weak reference can point at: not the gate's
        return False


def forget(client: Any = None) -> None:
    """Take the gate's SDK clients out of litellm's client cache, where litellm keeps a
    caller's Azure client for later calls with the same settings (a tap belongs to one call
    only): ``client``, or with None every one the gate made. :class:`ToolGate` forgets its
    client once its call is made; under the callback (no hook runs after every call) each
    new SDK client first forgets the earlier ones."""
    if client is not None and not _issued(client):
        return
    cache = privates.client_cache()
    entries = getattr(cache, "cache_dict", None)
    if not isinstance(entries, dict) or cache is None:
        return
    stale = [
        key
        for key, value in list(entries.items())
        if (value is client if client is not None else _issued(value))
    ]
    for key in stale:
        delete = getattr(cache, "delete_cache", None)
        if callable(delete):
            delete(key)
        else:  # pragma: no cover - older caches
            entries.pop(key, None)


__all__ = [
    "ClientPool",
    "TappedAsyncHTTPHandler",
    "TappedHTTPHandler",
    "Wrap",
    "forget",
    "is_async_client",
]
