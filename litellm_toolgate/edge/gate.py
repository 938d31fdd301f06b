"""``ToolGate``: litellm's calls, gated.

``gate.completion(**kwargs)`` and ``await gate.acompletion(**kwargs)`` take exactly litellm's
arguments. The gate adds one thing, a ``client=`` whose transport shows it the raw wire
(wrapping the transport of the client the caller passed, if any), and returns litellm's
result gated: a :class:`GatedStream` for ``stream=True``, the checked response otherwise.
Every call gets a fresh attempt; nothing carries over from one call to the next.
"""

from __future__ import annotations

import contextvars
import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NoReturn

import litellm
from litellm.types.llms.openai import ResponsesAPIResponse

from ..core.attempt import Carrier, ChatAttempt
from ..core.errors import GateConfigError, ToolCallQuarantined, WireNotObservable
from ..core.limits import Limits
from ..core.policy import Policy, ToolCall
from ..core.registry import ToolRegistry
from .carrier import response_carrier
from .clients import (
    ClientPool,
    TappedAsyncHTTPHandler,
    TappedHTTPHandler,
    Wrap,
    forget,
    is_async_client,
)
from .events import CarrierEvents, carrier_events, carrier_of_response
from .logs import emit_records
from .offload import decide_off_loop
from .policy import ajudge, judge
from .routes import Api, ClientKind, route_for
from .stream import AsyncGatedStream, GatedStream
from .transport import AsyncTapTransport, TapTransport, WireTap

_HOW = (
    "the gate must see the raw wire of a call to gate it: make the call through "
    "gate.completion(...) / gate.acompletion(...) (or gate.responses / gate.aresponses), "
    "or pass client=gate.http_client() "
    "(async: gate.async_http_client()) to litellm and then gate.guard(stream, client)"
)


SYNC_CALL_GATED: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "toolgate_sync_call_gated", default=False
)
"""True while :meth:`ToolGate.completion` makes its litellm call: the gate as a callback
(which cannot gate a sync call itself) lets such a call through, since this gate gates it."""


class ToolGate:
    """Withholds tool calls until terminal, strict parse, schema and policy all pass.

    ``tools``: the registry (chat or Responses tool shapes); when None, each request's own
    ``tools`` are the registry. ``policy``: sync or async callable run on every validated
    call. ``tool_categories`` maps sensitive tool names to the category logged instead.
    ``hmac_key`` enables a keyed content digest in the records.
    """

    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]] | None = None,
        *,
        policy: Policy | None = None,
        limits: Limits | None = None,
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        run_id: str | None = None,
    ) -> None:
        self.registry = None if tools is None else ToolRegistry.from_tools(tools)
        if policy is not None and not callable(policy):
            raise GateConfigError("policy must be a callable (sync or async) or None")
        if limits is not None and not isinstance(limits, Limits):
            raise GateConfigError("limits must be a litellm_toolgate.Limits")
        if tool_categories is not None and not (
            isinstance(tool_categories, Mapping)
            and all(isinstance(k, str) and isinstance(v, str) for k, v in tool_categories.items())
        ):
            raise GateConfigError("tool_categories must map tool names to category strings")
        if hmac_key is not None and (not isinstance(hmac_key, bytes) or len(hmac_key) < 16):
            raise GateConfigError("hmac_key must be bytes, at least 16 of them")
        self.policy = policy
        self.limits = limits or Limits()
        self.tool_categories = dict(tool_categories or {})
        self.hmac_key = hmac_key
        self.run_id = run_id
        self.clients = ClientPool()

    def __repr__(self) -> str:
        tools = "request tools" if self.registry is None else f"{len(self.registry)} tools"
        return f"ToolGate({tools}, policy={'yes' if self.policy else 'none'})"

    # ---- attempts and clients --------------------------------------------------------------
    def new_attempt(self, *, tools: Any = None, model: str = "") -> ChatAttempt:
        registry = self.registry
        if registry is None:
            registry = ToolRegistry.from_tools(tools or [])
        return ChatAttempt(
            registry,
            self.limits,
            run_id=self.run_id,
            route=model,
            tool_categories=self.tool_categories,
            hmac_key=self.hmac_key,
        )

    def http_client(
        self,
        *,
        stream: bool = True,
        tools: Any = None,
        model: str = "",
        client: Any = None,
        **settings: Any,
    ) -> Any:
        """A litellm sync client whose wire this gate observes (one call per client).

        With ``model`` (and the call's other litellm ``settings``: ``api_base``,
        ``api_key``, ...) the client is of the kind that route takes, or the route is
        refused (:class:`RouteNotGated`); without, a litellm ``HTTPHandler``.
        """
        return self._tapped(stream, tools, model, client, settings, asynchronous=False)

    def async_http_client(
        self,
        *,
        stream: bool = True,
        tools: Any = None,
        model: str = "",
        client: Any = None,
        **settings: Any,
    ) -> Any:
        """A litellm async client whose wire this gate observes (one call per client)."""
        return self._tapped(stream, tools, model, client, settings, asynchronous=True)

    def _tapped(
        self,
        stream: bool,
        tools: Any,
        model: str,
        client: Any,
        settings: dict[str, Any],
        *,
        asynchronous: bool,
        api: Api = Api.CHAT,
    ) -> Any:
        tap = WireTap(self.new_attempt(tools=tools, model=model), streamed=stream)
        tap_type = AsyncTapTransport if asynchronous else TapTransport

        def wrap(inner: Any) -> Any:
            return tap_type(inner, tap)

        request = {**settings, "model": model, "client": client}
        return self.tapped_client(request, api, wrap, asynchronous=asynchronous)

    def tapped_client(
        self, request: Mapping[str, Any], api: Api, wrap: Wrap, *, asynchronous: bool
    ) -> Any:
        """The ``client=`` for one litellm call (``request``: its arguments), of the kind its
        route takes, every transport of it made by ``wrap``; :class:`RouteNotGated` (before
        anything is sent) for a route the gate does not gate. Without a model: a litellm
        handler."""
        kind = ClientKind.HTTP_HANDLER
        if request.get("model"):
            kind = route_for(request, api).client
        return self.clients.tapped_client(
            kind,
            wrap,
            asynchronous=asynchronous,
            user_client=request.get("client"),
            request=request,
        )

    def _client_for(self, kwargs: dict[str, Any], *, asynchronous: bool, api: Api) -> Any:
        if kwargs.get("tools") is not None:
            # Some routes edit a request's tool schemas in place (litellm 1.108.7 drops
            # additionalProperties on hosted_vllm/): litellm gets a copy, the caller's stay.
            kwargs["tools"] = copy.deepcopy(kwargs["tools"])
        settings = {k: v for k, v in kwargs.items() if k not in ("stream", "tools", "model")}
        settings.pop("client", None)
        return self._tapped(
            bool(kwargs.get("stream")),
            kwargs.get("tools"),
            str(kwargs.get("model", "")),
            kwargs.get("client"),
            settings,
            asynchronous=asynchronous,
            api=api,
        )

    # ---- litellm's calls, gated ------------------------------------------------------------
    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion`` with every tool call gated."""
        token = SYNC_CALL_GATED.set(True)
        try:
            return self._completion(kwargs)
        finally:
            SYNC_CALL_GATED.reset(token)

    def _completion(self, kwargs: dict[str, Any]) -> Any:
        handler = self._client_for(kwargs, asynchronous=False, api=Api.CHAT)
        kwargs["client"] = handler
        result = self._invoke(handler, litellm.completion, kwargs)
        if kwargs.get("stream"):
            return GatedStream(result, handler.tap, self.policy)
        return self._decide_whole(handler.tap.attempt, response_carrier(result), result)

    async def acompletion(self, **kwargs: Any) -> Any:
        """``litellm.acompletion`` with every tool call gated."""
        handler = self._client_for(kwargs, asynchronous=True, api=Api.CHAT)
        kwargs["client"] = handler
        result = await self._ainvoke(handler, litellm.acompletion, kwargs)
        if kwargs.get("stream"):
            return AsyncGatedStream(result, handler.tap, self.policy)
        attempt = handler.tap.attempt
        return await self._adecide_whole(attempt, lambda: response_carrier(result), result)

    def responses(self, **kwargs: Any) -> Any:
        """``litellm.responses`` with every function call gated (bridged or native route)."""
        token = SYNC_CALL_GATED.set(True)
        try:
            return self._responses(kwargs)
        finally:
            SYNC_CALL_GATED.reset(token)

    def _responses(self, kwargs: dict[str, Any]) -> Any:
        handler = self._client_for(kwargs, asynchronous=False, api=Api.RESPONSES)
        kwargs["client"] = handler
        result = self._invoke(handler, litellm.responses, kwargs)
        if kwargs.get("stream") and not isinstance(result, ResponsesAPIResponse):
            return GatedStream(result, handler.tap, self.policy, CarrierEvents())
        # A whole response (asked for, or handed back instead of a stream) is checked whole.
        return self._decide_whole(handler.tap.attempt, carrier_of_response(result), result)

    async def aresponses(self, **kwargs: Any) -> Any:
        """``litellm.aresponses`` with every function call gated (bridged or native route)."""
        handler = self._client_for(kwargs, asynchronous=True, api=Api.RESPONSES)
        kwargs["client"] = handler
        result = await self._ainvoke(handler, litellm.aresponses, kwargs)
        if kwargs.get("stream") and not isinstance(result, ResponsesAPIResponse):
            return AsyncGatedStream(result, handler.tap, self.policy, CarrierEvents())
        attempt = handler.tap.attempt
        return await self._adecide_whole(attempt, lambda: carrier_of_response(result), result)

    def guard(self, stream: Any, client: Any = None) -> GatedStream | AsyncGatedStream:
        """Gate a stream made elsewhere, if this gate observed its wire; else refuse at once."""
        if isinstance(stream, (GatedStream, AsyncGatedStream)):
            return stream
        tap = getattr(client, "tap", None)
        # A stream whose chunks were already handed out cannot be withheld any more.
        if not isinstance(tap, WireTap) or not tap.streamed or getattr(stream, "chunks", None):
            raise WireNotObservable(_HOW)
        if isinstance(stream, ResponsesAPIResponse):
            # A whole response is not a stream: iterating it would hand out its fields.
            raise WireNotObservable(_HOW)
        # litellm's Responses streams (native, bridged, cached) carry Responses events.
        events = carrier_events(stream)
        if is_async_client(client):
            return AsyncGatedStream(stream, tap, self.policy, events)
        return GatedStream(stream, tap, self.policy, events)

    # ---- litellm's call, and whole (non-streamed) results -----------------------------------
    # litellm wraps whatever the transport raised; when the tap quarantined the attempt, the
    # quarantine is what the caller gets (raised here, outside litellm's exception).
    def _invoke(self, client: Any, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        tap: WireTap = client.tap
        failed = False
        try:
            return call(**kwargs)
        except Exception:
            if not tap.faulted:
                raise
            failed = True
        finally:
            forget(client)
        if failed:
            self._raise_quarantine(tap.attempt)

    async def _ainvoke(
        self, client: Any, call: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]
    ) -> Any:
        tap: WireTap = client.tap
        failed = False
        try:
            return await call(**kwargs)
        except Exception:
            if not tap.faulted:
                raise
            failed = True
        finally:
            forget(client)
        if failed:
            self._raise_quarantine(tap.attempt)

    def _decide_whole(self, attempt: ChatAttempt, carrier: Carrier, result: Any) -> Any:
        calls = self._conclude(attempt, carrier)
        if not judge(attempt, calls, self.policy):
            self._raise_quarantine(attempt)
        return self._release_response(attempt, result)

    async def _adecide_whole(
        self, attempt: ChatAttempt, carrier: Callable[[], Carrier], result: Any
    ) -> Any:
        # Parse and schema may take milliseconds on large arguments: off the loop then.
        calls = await decide_off_loop(attempt, lambda: self._conclude(attempt, carrier()))
        if not await ajudge(attempt, calls, self.policy):
            self._raise_quarantine(attempt)
        return self._release_response(attempt, result)

    @staticmethod
    def _raise_quarantine(attempt: ChatAttempt) -> NoReturn:
        emit_records(attempt)
        fault = attempt.quarantined
        assert fault is not None
        raise fault

    def _conclude(self, attempt: ChatAttempt, carrier: Carrier) -> list[ToolCall]:
        try:
            return attempt.conclude(carrier)
        except ToolCallQuarantined:
            pass
        self._raise_quarantine(attempt)

    @staticmethod
    def _release_response(attempt: ChatAttempt, response: Any) -> Any:
        attempt.release()
        emit_records(attempt)
        return response


__all__ = ["SYNC_CALL_GATED", "TappedAsyncHTTPHandler", "TappedHTTPHandler", "ToolGate"]
