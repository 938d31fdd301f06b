"""``ToolGate``: litellm's calls, gated.

``gate.completion(**kwargs)`` and ``await gate.acompletion(**kwargs)`` take exactly litellm's
arguments. The gate adds one thing, a ``client=`` whose transport shows it the raw wire
(wrapping the transport of the client the caller passed, if any), and returns litellm's
result gated: a :class:`GatedStream` for ``stream=True``, the checked response otherwise
(overloads on ``stream`` tell a type checker which). Every call gets a fresh attempt; nothing
carries over from one call to the next.

A gate owns the HTTP transports it creates when the caller passes no client (one sync, one
per event loop): ``close()`` / ``await aclose()`` or ``with`` / ``async with`` close them, and
a closed gate refuses new calls. Clients the caller passed stay the caller's.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, NoReturn, overload

import litellm
from litellm import anthropic_interface

from ..core import plugs
from ..core.decision.attempt import Attempt, Carrier
from ..core.decision.gated import CarrierAdapter
from ..core.decision.limits import Limits
from ..core.decision.profiles import check_overrides
from ..core.errors import (
    GateConfigError,
    RouteNotGated,
    WireNotObservable,
    raise_clean,
)
from ..core.rules.compose import all_of
from ..core.rules.loop import RunResult
from ..core.rules.policy import Policy
from ..core.values.registry import ToolRegistry
from ..core.wires import chat as chat_wire
from .bridges import bridge_path, messages_bridge
from .carriers.chat import response_carrier
from .carriers.messages import AnthropicEvents, message_carrier
from .carriers.responses import (
    CarrierEvents,
    carrier_events,
    carrier_of_response,
    show_wire_ids,
    wire_ids,
)
from .clients import (
    ClientPool,
    TappedAsyncHTTPHandler,
    TappedHTTPHandler,
    Wrap,
    forget,
    is_async_client,
)
from .config import REQUEST_TOOLS
from .drive import DrivenStream
from .guardrail import loghold
from .judge import aapprove_whole, approve_whole
from .logs import emit_records, observers
from .routes import Api, ClientKind, Gated, choices_kept_apart, route_for
from .seam import frames
from .seam.symbols import ModelResponse, ResponsesAPIResponse
from .stream import AsyncGatedStream, GatedStream
from .sync import tokenclaim
from .sync.vouching import vouch_client, vouched
from .transport import AsyncTapTransport, TapTransport, WireTap

_HOW = (
    "the gate must see the raw wire of a call to gate it: make the call through "
    "gate.completion(...) / gate.acompletion(...) (or gate.responses / gate.aresponses), "
    "or pass client=gate.http_client() "
    "(async: gate.async_http_client()) to litellm and then gate.guard(stream, client)"
)

_DROPS_CLIENT = (
    "litellm's handler for this route drops the call's client=, so a client handed to the "
    "caller would not carry the call; make it through gate.completion(...) / "
    "gate.acompletion(...), which claim litellm's own client for it"
)


class _Invoking:
    """Around litellm's call, sync or async: the client is forgotten once the call is made,
    and litellm's exception is swallowed (so that nothing chains to the quarantine raised
    after it) exactly when the failure is the gate's to type."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._tap: WireTap = client.tap

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool:
        forget(self._client)
        if exc_type is None or not issubclass(exc_type, Exception):
            return False
        # The body arrived whole: litellm's error is about what it made of it, and its
        # message quotes the body; the failure is the gate's to type (refuse_unparsed).
        return self._tap.faulted or self._tap.whole_body_arrived


class ToolGate:
    """Withholds tool calls until terminal, strict parse, schema and policy all pass.

    ``tools``: the registry (chat or Responses tool shapes), or ``"request"``
    (:data:`REQUEST_TOOLS`) to take each request's own ``tools`` as the registry; required,
    so that the request's tools are always a choice, never what a forgotten argument means.
    ``policy``: sync or async callable run on every validated call. ``tool_categories`` maps
    sensitive tool names to the category logged instead. ``hmac_key`` enables a keyed content
    digest in the records. ``route_profiles`` names the profile of a route litellm reaches
    through another provider (``{"openai/qwen3-8b": "lm_studio"}``; see
    ``core/decision/profiles.py``).
    """

    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]] | Literal["request"] | None = None,
        *,
        policy: Policy | None = None,
        limits: Limits | None = None,
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        run_id: str | None = None,
        route_profiles: Mapping[str, str] | None = None,
    ) -> None:
        if tools is None or (isinstance(tools, str) and tools != REQUEST_TOOLS):
            raise GateConfigError(
                "ToolGate needs the tools to gate against: a list of tool definitions, or "
                f"tools={REQUEST_TOOLS!r} to take each request's own tools"
            )
        self.registry = None if isinstance(tools, str) else ToolRegistry.from_tools(tools)
        self.route_profiles = check_overrides(route_profiles)
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
        self._closed = False

    def __repr__(self) -> str:
        tools = "request tools" if self.registry is None else f"{len(self.registry)} tools"
        closed = ", closed" if self._closed else ""
        return f"ToolGate({tools}, policy={'yes' if self.policy else 'none'}{closed})"

    # ---- lifecycle: the transports this gate created ---------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(
                "this ToolGate was closed (close(), aclose() or the end of its with block); "
                "make a new ToolGate to make more calls"
            )

    def close(self) -> None:
        """Close the HTTP transports and clients this gate created; later calls raise.
        Idempotent.

        In async code prefer ``await gate.aclose()``: an async transport whose event loop is
        running (or closed) cannot be awaited from here, so it is only dropped then.
        """
        self._closed = True
        self.clients.close()

    async def aclose(self) -> None:
        """Close every transport and client this gate created, the async ones on their loop."""
        self._closed = True
        await self.clients.aclose()

    def __enter__(self) -> ToolGate:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> ToolGate:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    # ---- attempts and clients --------------------------------------------------------------
    def registry_for(self, tools: Any = None) -> ToolRegistry:
        """The registry a call is judged by: the gate's, or (``tools="request"``) the
        request's own ``tools``."""
        if self.registry is not None:
            return self.registry
        return ToolRegistry.from_tools(tools or [])

    def new_attempt(self, *, tools: Any = None, model: str = "") -> Attempt:
        return Attempt(
            self.registry_for(tools),
            self.limits,
            run_id=self.run_id,
            route=model,
            route_profiles=self.route_profiles,
            tool_categories=self.tool_categories,
            hmac_key=self.hmac_key,
            observers=observers,
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
        expect: dict[str, Any] | None = None,
    ) -> Any:
        """``expect``: the kwargs of the gate's own litellm call the client is for (where
        litellm drops ``client=``, the call is claimed on litellm's client by a token put
        into them); None: a client handed to the caller."""
        self._check_open()
        tap = WireTap(self.new_attempt(tools=tools, model=model), streamed=stream)
        tap_type = AsyncTapTransport if asynchronous else TapTransport

        def wrap(inner: Any) -> Any:
            return tap_type(inner, tap)

        request = {**settings, "model": model, "client": client, "stream": stream}
        route = route_for(request, api) if model else None
        if stream and api is Api.RESPONSES and route is not None and route.replayed:
            # litellm asks for a whole result and replays it as events: the wire is whole.
            tap.streamed = False
        if route is not None and route.drops_client and expect is None:
            # A client handed out for the caller's own litellm call: litellm drops it here.
            raise RouteNotGated(model.split("/", 1)[0], api.value, _DROPS_CLIENT)
        tapped = self.tapped_client(request, api, wrap, asynchronous=asynchronous, route=route)
        if route is not None and route.drops_client and expect is not None:
            # litellm sends the call over its own client: claimed there by the call's token.
            tokenclaim.expect(expect, tap, wrap, asynchronous=asynchronous)
        return tapped

    def tapped_client(
        self,
        request: Mapping[str, Any],
        api: Api,
        wrap: Wrap,
        *,
        asynchronous: bool,
        route: Gated | None = None,
    ) -> Any:
        """The ``client=`` for one litellm call (``request``: its arguments), of the kind its
        route takes, every transport of it made by ``wrap``; :class:`RouteNotGated` (before
        anything is sent) for a route the gate does not gate. Without a model: a litellm
        handler. ``route``: the call's :func:`.routes.route_for`, when the caller has it."""
        self._check_open()
        kind = ClientKind.HTTP_HANDLER
        if request.get("model"):
            kind = (route or route_for(request, api)).client
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
        # The gate gates this call itself: a gate in litellm.callbacks leaves it alone.
        return vouch_client(
            self._tapped(
                bool(kwargs.get("stream")),
                kwargs.get("tools"),
                str(kwargs.get("model", "")),
                kwargs.get("client"),
                settings,
                asynchronous=asynchronous,
                api=api,
                expect=kwargs,
            )
        )

    # ---- litellm's calls, gated ------------------------------------------------------------
    @overload
    def completion(self, *, stream: Literal[True], **kwargs: Any) -> GatedStream: ...
    @overload
    def completion(self, *, stream: Literal[False] = ..., **kwargs: Any) -> ModelResponse: ...
    @overload
    def completion(self, *, stream: bool, **kwargs: Any) -> GatedStream | ModelResponse: ...
    def completion(self, **kwargs: Any) -> Any:
        """``litellm.completion`` with every tool call gated."""
        return self._gated(Api.CHAT, litellm.completion, kwargs, response_carrier)

    @overload
    async def acompletion(self, *, stream: Literal[True], **kwargs: Any) -> AsyncGatedStream: ...
    @overload
    async def acompletion(
        self, *, stream: Literal[False] = ..., **kwargs: Any
    ) -> ModelResponse: ...
    @overload
    async def acompletion(
        self, *, stream: bool, **kwargs: Any
    ) -> AsyncGatedStream | ModelResponse: ...
    async def acompletion(self, **kwargs: Any) -> Any:
        """``litellm.acompletion`` with every tool call gated."""
        return await self._agated(Api.CHAT, litellm.acompletion, kwargs, response_carrier)

    @overload
    def responses(self, *, stream: Literal[True], **kwargs: Any) -> GatedStream: ...
    @overload
    def responses(self, *, stream: Literal[False] = ..., **kwargs: Any) -> ResponsesAPIResponse: ...
    @overload
    def responses(self, *, stream: bool, **kwargs: Any) -> GatedStream | ResponsesAPIResponse: ...
    def responses(self, **kwargs: Any) -> Any:
        """``litellm.responses`` with every function call gated (bridged or native route)."""
        return self._gated(
            Api.RESPONSES, litellm.responses, kwargs, carrier_of_response, CarrierEvents
        )

    @overload
    async def aresponses(self, *, stream: Literal[True], **kwargs: Any) -> AsyncGatedStream: ...
    @overload
    async def aresponses(
        self, *, stream: Literal[False] = ..., **kwargs: Any
    ) -> ResponsesAPIResponse: ...
    @overload
    async def aresponses(
        self, *, stream: bool, **kwargs: Any
    ) -> AsyncGatedStream | ResponsesAPIResponse: ...
    async def aresponses(self, **kwargs: Any) -> Any:
        """``litellm.aresponses`` with every function call gated (bridged or native route)."""
        return await self._agated(
            Api.RESPONSES, litellm.aresponses, kwargs, carrier_of_response, CarrierEvents
        )

    # ---- the tool loop (run/loop.py) -------------------------------------------------------
    def run(self, **options: Any) -> RunResult:
        """Run the bounded tool loop: gated rounds, each released call journaled, run once
        and answered with its id (see :mod:`litellm_toolgate.run.loop`, plugged in by the
        package: :mod:`litellm_toolgate.core.plugs`). ``executors``, ``journal`` and
        ``run_id`` are required; ``api="chat"`` (``messages=``) or ``"responses"``
        (``input=``); every other argument is litellm's, sent with every round."""
        return plugs.run_loop()(self, options)

    async def arun(self, **options: Any) -> RunResult:
        """:meth:`run`, async: async tools are awaited, sync ones run off the event loop."""
        return await plugs.arun_loop()(self, options)

    def messages(self, **kwargs: Any) -> Any:
        """``litellm.anthropic.messages.create`` with every tool_use block gated.

        The stream is handed back as Anthropic SSE bytes, tool blocks withheld and released
        right before ``message_delta`` / ``message_stop`` (:mod:`.carriers.messages`).
        litellm has no sync path for ``anthropic/`` models (it raises ``ValueError`` before
        sending); bridged models work sync. On a model litellm bridges to the Responses API
        (``openai/``) litellm's sync stream is an async iterator: the gate reads it on a
        private event loop thread (:mod:`.drive`) and hands back a sync stream as well.
        """
        bridge = messages_bridge(kwargs)
        return self._gated(
            bridge.api,
            anthropic_interface.messages.create,
            kwargs,
            message_carrier,
            AnthropicEvents,
            wire_path=bridge_path(bridge),
        )

    async def amessages(self, **kwargs: Any) -> Any:
        """``litellm.anthropic.messages.acreate`` with every tool_use block gated, on the
        wire of the bridge litellm takes for the model (:mod:`.bridges`)."""
        bridge = messages_bridge(kwargs)
        return await self._agated(
            bridge.api,
            anthropic_interface.messages.acreate,
            kwargs,
            message_carrier,
            AnthropicEvents,
            wire_path=bridge_path(bridge),
        )

    # ---- the one call path of every entry point, sync and async --------------------------
    # A stream is handed back gated (``carrier`` makes the adapter for litellm's Responses or
    # Anthropic objects; chat chunks need none). A whole result (asked for, or handed back by
    # litellm's Responses route instead of a stream) is approved whole or quarantined.
    def _gated(
        self,
        api: Api,
        call: Callable[..., Any],
        kwargs: dict[str, Any],
        carrier_of: Callable[[Any], Carrier],
        carrier: Callable[[], CarrierAdapter] | None = None,
        *,
        wire_path: str | None = None,
    ) -> Any:
        handler = self._client_for(kwargs, asynchronous=False, api=api)
        handler.tap.wire_path = wire_path
        if api is Api.CHAT:
            self._bind_choices(handler.tap, kwargs)
        kwargs["client"] = handler
        held = _hold_call_logging(handler.tap, kwargs, inline=carrier is not None)
        try:
            result = self._invoke_sync(handler, call, kwargs)
            tokenclaim.check_taken(handler.tap)
            if kwargs.get("stream") and not isinstance(result, ResponsesAPIResponse):
                if not hasattr(result, "__iter__") and hasattr(result, "__aiter__"):
                    # litellm's sync Messages stream on the Responses bridge: async only
                    result = DrivenStream(result)
                gated = GatedStream(result, handler.tap, self.policy, carrier and carrier())
                held = False  # the stream's decision lets the held loggers go
                return gated
            if approve_whole(handler.tap.attempt, carrier_of(result), self.policy):
                return self._release_response(handler.tap.attempt, result)
            del result  # litellm's result holds the arguments: not in a frame of the raise
            self._raise_quarantine(handler.tap.attempt)
        finally:
            if held:
                loghold.settle(handler.tap.attempt)

    async def _agated(
        self,
        api: Api,
        call: Callable[..., Awaitable[Any]],
        kwargs: dict[str, Any],
        carrier_of: Callable[[Any], Carrier],
        carrier: Callable[[], CarrierAdapter] | None = None,
        *,
        wire_path: str | None = None,
    ) -> Any:
        handler = self._client_for(kwargs, asynchronous=True, api=api)
        handler.tap.wire_path = wire_path
        if api is Api.CHAT:
            self._bind_choices(handler.tap, kwargs)
        kwargs["client"] = handler
        held = _hold_call_logging(handler.tap, kwargs, inline=carrier is not None)
        try:
            result = await self._ainvoke(handler, call, kwargs)
            tokenclaim.check_taken(handler.tap)
            if kwargs.get("stream") and not isinstance(result, ResponsesAPIResponse):
                agated = AsyncGatedStream(result, handler.tap, self.policy, carrier and carrier())
                held = False  # the stream's decision lets the held loggers go
                return agated
            if await aapprove_whole(handler.tap.attempt, carrier_of, result, self.policy):
                return self._release_response(handler.tap.attempt, result)
            del result  # litellm's result holds the arguments: not in a frame of the raise
            self._raise_quarantine(handler.tap.attempt)
        finally:
            if held:
                loghold.settle(handler.tap.attempt)

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
    def _invoke_sync(self, client: Any, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        # A gate in litellm.callbacks cannot see this call's client from its sync hook: this
        # gate vouches for exactly this call (its id, on this thread, while litellm makes it).
        call_id = str(kwargs.setdefault("litellm_call_id", str(uuid.uuid4())))
        with vouched(call_id):
            return self._invoke(client, call, kwargs)

    def _invoke(self, client: Any, call: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
        with _Invoking(client):
            return call(**kwargs)
        self._refuse_failed(client.tap)

    async def _ainvoke(
        self, client: Any, call: Callable[..., Awaitable[Any]], kwargs: dict[str, Any]
    ) -> Any:
        with _Invoking(client):
            return await call(**kwargs)
        self._refuse_failed(client.tap)

    def _refuse_failed(self, tap: WireTap) -> NoReturn:
        """litellm's call failed on a wire the gate faulted, or on a whole body that
        arrived: the attempt's quarantine, raised outside litellm's exception."""
        tap.refuse_unparsed()
        self._raise_quarantine(tap.attempt)

    def _bind_choices(self, tap: WireTap, kwargs: Mapping[str, Any]) -> None:
        """A chat call for ``n > 1`` (top level or ``extra_body``): its choices are gated
        one by one where litellm keeps them apart (:func:`.routes.choices_kept_apart`), and
        the call is refused here, before anything is sent, everywhere else."""
        fields = chat_wire.request_fields_of(kwargs)
        asked = chat_wire.choices_asked(fields)
        if asked == 1:
            return
        apart = asked is not None and choices_kept_apart(kwargs)
        tap.bind_request("/chat/completions", fields, choices_gated=apart)
        if tap.refused:
            self._raise_quarantine(tap.attempt)

    # A whole result is approved or not here; the caller raises the quarantine itself, from
    # a frame that no longer holds litellm's result (it carries the arguments).
    @staticmethod
    def _raise_quarantine(attempt: Attempt) -> NoReturn:
        """Log the attempt's records and raise its quarantine from a clean frame."""
        emit_records(attempt)
        fault = attempt.quarantined
        assert fault is not None
        raise_clean(fault)

    @staticmethod
    def _release_response(attempt: Attempt, response: Any) -> Any:
        released = attempt.release()
        if isinstance(response, ResponsesAPIResponse):
            # A whole Responses result shows the wire's call ids where litellm's bridge
            # replaced them (Gemini, Ollama), as a released stream does (carriers.responses).
            output = list(response.output or [])
            carried = [
                getattr(i, "call_id", None)
                for i in output
                if getattr(i, "type", None) == "function_call"
            ]
            show_wire_ids(wire_ids(carried, released), output)
        emit_records(attempt)
        return response


def _hold_call_logging(tap: WireTap, kwargs: Mapping[str, Any], *, inline: bool) -> bool:
    """litellm hands a whole (non-streamed) answer to its success loggers (OpenTelemetry,
    Langfuse, ...) before it returns it to the gate, arguments included; its Responses and
    Messages stream iterators (``inline``: a stream with a carrier) log the answer they
    assembled as their stream ends, on the reader's own thread or task, before the gate
    decided. So as the call's request is prepared (inside litellm's call) the logging objects
    of the litellm entry points it runs under are held until the gate decided
    (:mod:`.guardrail.loghold`; a stream's inline handlers are deferred, not waited for):
    released, they log as always; quarantined, they hear a failure with the sanitized record
    instead. A chat stream's loggers are held by the gated stream itself (:mod:`.stream`).
    True when held: the caller then settles the hold (:func:`.guardrail.loghold.settle`)
    however the call ends, unless it hands back a gated stream, whose decision does."""
    if kwargs.get("stream") and not inline:
        return False
    tap.on_prepare = _hold_inline_logging if kwargs.get("stream") else _hold_entry_logging
    return True


def _hold_entry_logging(tap: WireTap) -> None:
    # litellm dispatches a whole answer's success logging to a thread or a task of its own
    # (its client wrapper, 1.108.7 and 1.110.2), so a held handler never waits on the
    # thread that decides.
    for logging_obj in frames.entry_logging_objects(frames.caller()):
        loghold.hold(logging_obj, tap.attempt)


def _hold_inline_logging(tap: WireTap) -> None:
    for logging_obj in frames.entry_logging_objects(frames.caller()):
        loghold.hold(logging_obj, tap.attempt, inline=True)


class GateSet(ToolGate):
    """Several gates deciding one call together (``litellm.callbacks`` holding more than one
    gate selected for it): a call is released only when every gate would release it.

    Its registry is :meth:`ToolRegistry.all_of` the members' (a tool every member knows,
    valid against every member's schema of it), its policy :func:`~..core.compose.all_of`
    the members' policies in order, its limits :meth:`Limits.tightest` of theirs. Ids and
    records (``run_id``, ``hmac_key``, route profiles, tool categories) are the first
    member's, the others' filling in what it leaves out; so are the HTTP clients: the set
    owns none, and closing it closes nothing.
    """

    def __init__(self, members: Sequence[ToolGate]) -> None:
        if len(members) < 2:
            raise GateConfigError("a GateSet is made of two gates or more")
        policies = [m.policy for m in members if m.policy is not None]
        super().__init__(
            "request",
            policy=(policies[0] if len(policies) == 1 else all_of(*policies)) if policies else None,
            limits=Limits.tightest(m.limits for m in members),
            tool_categories={k: v for m in reversed(members) for k, v in m.tool_categories.items()},
            hmac_key=members[0].hmac_key,
            run_id=members[0].run_id,
        )
        self.route_profiles = {k: v for m in reversed(members) for k, v in m.route_profiles.items()}
        self.clients = members[0].clients
        self.members = tuple(members)
        if all(m.registry is not None for m in members):
            self.registry = ToolRegistry.all_of(m.registry_for() for m in members)

    def __repr__(self) -> str:
        return f"GateSet({', '.join(repr(m) for m in self.members)})"

    def registry_for(self, tools: Any = None) -> ToolRegistry:
        if self.registry is not None:
            return self.registry
        return ToolRegistry.all_of(m.registry_for(tools) for m in self.members)

    def close(self) -> None:
        self._closed = True  # the clients are the first member's: left to it

    async def aclose(self) -> None:
        self._closed = True


__all__ = ["GateSet", "TappedAsyncHTTPHandler", "TappedHTTPHandler", "ToolGate"]
