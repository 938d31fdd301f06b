"""``ToolGateGuardrail``: the gate as a litellm callback and as a LiteLLM proxy guardrail.

One object serves three ways of use: ``litellm.callbacks = [gate]`` in code, a
``litellm_settings.callbacks`` entry in a proxy's YAML, and a ``guardrails:`` entry with
``mode: post_call``. All three rest on one hook that litellm runs right before it sends a
request to a deployment (``async_pre_call_deployment_hook``): the gate swaps in an HTTP
client of its own, so it reads the raw wire of that request. What happens next depends on
who hands the result to the caller.

* **Proxy, streaming.** The proxy passes its stream through the guardrail's iterator hook.
  The client injected for the request only observes; the hook looks its tap up (see below)
  and runs the stream through :class:`AsyncGatedStream`, exactly as
  :class:`ToolGate` does: text passes live, tool calls are withheld, litellm's chunks are
  cross-checked against the wire, the policy runs, and the calls go out or a
  :class:`ToolCallQuarantined` is raised. The proxy turns a raise before its first chunk
  into an HTTP error with the quarantine's ``status_code``, and a later one into an SSE
  error frame; both carry the quarantine's message only (ids and a reason).
* **Proxy, not streaming.** The injected client holds the body until it ended; the proxy's
  success hook checks litellm's response against the wire and raises the same way.
* **SDK, ``litellm.acompletion``.** No hook sees the stream before the caller does, so the
  injected client withholds on the wire itself (:mod:`.httpwithhold`). A quarantine travels
  through litellm as its litellm-flavoured twin (:mod:`intervention`: also a guardrail
  intervention), which litellm hands to the caller unchanged and never retries.
  Non-streamed responses are judged while held and checked again in the deployment success
  hook, which may raise.
* **SDK, sync ``litellm.completion`` / ``litellm.responses``.** litellm runs no sync hook
  that can change the request, so the gate arms the call in ``log_pre_api_call`` and a
  claiming transport, put in place around the transport of the httpx client litellm sends
  it on, claims exactly that request and withholds like the async client (:mod:`.sync`);
  the OpenAI SDK routes' chat streams are claimed the same way on the SDK client's httpx
  client. What it cannot claim is refused before it is sent (:class:`UngatedCallRefused`,
  a ``BaseException``: litellm swallows anything narrower from a logging hook). A
  :class:`ToolGate`'s own calls are vouched for by that gate (call id and thread) and left
  alone. Nothing global changes until the first such call; :meth:`ToolGateGuardrail.close`
  puts back what it changed.
* **Other call types** are classified once in :mod:`calltypes`: a model turn the gate does
  not read yet (or a call type the table does not list) is refused before sending, and only
  what the table calls "not a model turn" passes untouched.

Every call, async or sync, is admitted by one check (:meth:`ToolGateGuardrail._admit`):
the call type, the gate (one gate per call: a second one selected for the same call
refuses it, :class:`GatesConflict`; a gate taken out of ``litellm.callbacks`` does nothing),
per-request selection, the route table, and then the request's own fields on the new
attempt (a chat request for ``n > 1`` is refused unsent). litellm answers cache hits before
any of this runs, so a gated call skips litellm's cache reads (:mod:`cacheguard`).

The Responses API goes the same ways: ``litellm.aresponses`` and the proxy's
``/v1/responses`` run the same pre-call hook, and the withholding client reads either wire
(:mod:`.httpwithhold`). Through litellm's bridge the hook runs once more for the chat call
litellm makes with the outer call's client: the gate recognises its own client and leaves
it, so one attempt reads the wire and the policy runs once. The proxy hands the iterator
hook a wrapper of its own around litellm's stream, so the tap carries whether the caller
gets Responses events (``responses_api``, set from the call type), and the hook runs
:class:`CarrierEvents` for them, as :meth:`ToolGate.aresponses` does. Whole results are
checked against the wire as a ``ResponsesAPIResponse``.

Outside the proxy the tap travels with the request itself (the injected client is in the
kwargs litellm hands the later hooks). Inside the proxy those hooks get the proxy's own
request, so the tap waits in ``_pending`` between the pre-call hook and the hook that
consumes it, which removes it first thing. Its key is a random token the gate writes into
the request's metadata (which the proxy hands its later hooks), never ``litellm_call_id``,
which a client can set (``x-litellm-call-id``); a missing or ambiguous key is refused,
never merged. ``in_flight`` counts the waiting requests. The proxy's failure hook
removes it when the request failed before that, and the table is bounded, so a path that
skips both can never grow it without end (an evicted request is refused, never passed).

Every decision also goes into litellm's standard logging through
``add_standard_logging_guardrail_information_to_request_data``: the sanitized records,
never argument text.

The proxy runs a streaming iterator hook only when the hook is defined in the registered
class's own ``__dict__``; :meth:`ToolGateGuardrail.__init_subclass__` copies the gate's hooks
into every subclass and refuses a subclass that replaces them, so a subclass stays gated.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from pathlib import Path
from types import FrameType
from typing import Any, Literal, NoReturn

import litellm
from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks
from litellm.types.llms.openai import ResponsesAPIResponse

from ..core.attempt import Attempt, Carrier
from ..core.errors import (
    GateConfigError,
    RouteNotGated,
    ToolCallQuarantined,
    ToolGateError,
    raise_clean,
)
from ..core.limits import Limits
from ..core.pending import PendingTable
from ..core.policy import Policy
from ..core.state import StreamState
from ..core.wires.chat import REQUEST_FIELDS
from . import cacheguard
from .bridges import Bridge, bridge_carrier, bridge_path, messages_bridge
from .calltypes import (
    CallRefused,
    GatesConflict,
    Handling,
    handling,
    in_messages_entry_point,
    sync_route_refused,
    sync_route_sdk,
)
from .config import SETTING_KEYS, GateSettings, unknown_guardrail_keys
from .escalation import RouteEscalation
from .gate import ToolGate
from .httpwithhold import Withholding, WithholdingTransport
from .intervention import as_intervention
from .logs import emit_records, observers
from .messages import AnthropicEvents, message_carrier
from .observe import start_observing
from .policyrun import aapprove_whole
from .preflight import chat_chunk_check, responses_event_check
from .respevents import CarrierEvents, carrier_events, carrier_of_result
from .routes import Api, route_for
from .stream import AsyncGatedStream
from .sync import claiming
from .sync.claiming import (
    UngatedCallRefused,
    arm,
    check_claimed,
    forget_claim,
    is_vouched,
    is_vouched_client,
    sent,
    vouch_client,
)
from .sync.sdkclaim import arm_sdk
from .sync.sdkclaim import streamed as sdkclaim_streamed
from .transport import AsyncTapTransport, WireTap

_CHAT_CALLS = frozenset({"acompletion", "completion"})
# The Responses API, async and sync.
_RESPONSES_CALLS = frozenset({"aresponses", "responses"})
# litellm.anthropic.messages.acreate and the proxy's /v1/messages.
_MESSAGES_CALLS = frozenset({"anthropic_messages"})
_GATED_CALLS = _CHAT_CALLS | _RESPONSES_CALLS | _MESSAGES_CALLS
# Sync calls: gated on the wire by the claiming transport (sync.claiming).
_SYNC_CALLS = frozenset({"completion", "responses"})
_MAX_PENDING = 10_000
# litellm's lists a callback lands in (litellm.callbacks, and the ones litellm copies it to).
_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)
# Where the proxy keeps a request's metadata (chat; Responses and other routes).
_METADATA = ("metadata", "litellm_metadata")
_TOKEN = "toolgate_request"


class GuardrailConfigError(ToolGateError, RuntimeError):
    """The gate's settings given to :class:`ToolGateGuardrail` are wrong.

    Deliberately not a ``ValueError``: a LiteLLM proxy logs a guardrail whose constructor
    raises ``ValueError`` or ``TypeError`` and starts *without* it. This error stops the
    proxy's start-up instead; the :class:`GateConfigError` it wraps names the setting.
    """


_SEALED = (
    "async_pre_call_deployment_hook",
    "async_post_call_streaming_iterator_hook",
    "async_post_call_success_hook",
    "async_post_call_success_deployment_hook",
    "async_post_call_failure_hook",
    "async_log_failure_event",
    "log_pre_api_call",
    "log_post_api_call",
)


def _call_type(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


def _selected(gate: CustomGuardrail, request: Any) -> bool:
    """Whether the gate runs on this request, by litellm's guardrail conventions.

    litellm's own answer (``should_run_guardrail``): ``default_on``, the guardrails a request
    names (``"guardrails": [...]`` in its body or metadata), the admin opt-outs. A gate not
    registered as a ``guardrails:`` entry (``event_hook`` None) runs on every request. When
    litellm cannot answer, the gate runs: it fails closed.
    """
    if not isinstance(request, dict):
        return True
    try:
        return gate.should_run_guardrail(request, GuardrailEventHooks.post_call) is not False
    except Exception:
        return True


def _carrier_of_whole(response: Any) -> Carrier:
    """What litellm assembled of a whole result: an Anthropic message (``/v1/messages``) or a
    chat / Responses result (the bridge's own chat call has a chat result even when its
    caller gets a message)."""
    if isinstance(response, dict) and response.get("type") == "message":
        return message_carrier(response)
    return carrier_of_result(response)


def _sync_refusal(kind: str, route: str, streamed: bool, sdk_streamed: bool) -> str | None:
    """Why a sync call under the callback must not be sent although its route is gated, or
    None when it can be claimed.

    Each rule names a sync call the gate could not hand a quarantine to the caller for, so
    it is refused in ``log_pre_api_call``, before anything is sent (the route table itself is
    applied by :meth:`ToolGateGuardrail._admit`, as for async calls).
    """
    if sync_route_refused(route, kind):
        return (
            f"a sync litellm.{kind} on the {route}/ route goes out through a client the "
            f"gate cannot claim under litellm.callbacks; it was not sent. Use "
            f"ToolGate.{kind}(...) or litellm.a{kind}(...)"
        )
    if sync_route_sdk(route, kind) and not sdk_streamed:
        # The SDK reads a whole body inside litellm's error handling, which would turn a
        # quarantine into a retryable server error of litellm's.
        return (
            f"a sync litellm.{kind} without stream=True on the {route}/ route cannot "
            f"hand a quarantine to the caller under litellm.callbacks (the OpenAI SDK "
            f"reads the whole body inside litellm's error handling); it was not sent. "
            f"Use stream=True, ToolGate.{kind}(...) or litellm.a{kind}(...)"
        )
    if streamed and in_messages_entry_point():
        # litellm's sync Messages adapter ends the stream quietly on any exception.
        return (
            "a sync litellm.anthropic.messages.create(stream=True) on a model litellm "
            "bridges to chat or Responses ends its stream quietly on any error, so a "
            "quarantine could not reach you; it was not sent. Use "
            "litellm.anthropic.messages.acreate(...) or ToolGate.messages(...)"
        )
    return None


def _sanitize_logged_response(request: Mapping[str, Any], attempt: Attempt) -> None:
    """Put the attempt's sanitized record where litellm keeps the raw answer it read.

    litellm's logging object holds the upstream's body as ``original_response`` (its
    ``post_call`` stores it once the body was read) and hands it to every failure logger
    (``log_failure_event``, ``async_log_failure_event``, its integrations) when the call
    fails: for a quarantined whole response, the very argument text the gate withheld.
    """
    logging_obj = request.get("litellm_logging_obj")
    details = getattr(logging_obj, "model_call_details", None)
    if not isinstance(details, dict):
        return
    record = json.dumps(attempt.summary(), separators=(",", ":"), default=str)
    details["original_response"] = record
    if "response" in details:
        details["response"] = None


# Where litellm reads ``default_on`` at the start of every call: its guardrail bookkeeping,
# called from its call set-up with the call's arguments.
_APPLIED = "get_applied_guardrails"
_SETUP = "function_setup"


def _refuse_unresolved(gate: ToolGateGuardrail, frame: FrameType | None) -> None:
    """Refuse a model-turn call whose provider litellm cannot tell, as the route table does.

    Read from litellm's call set-up (the caller of ``default_on`` when it is litellm's
    guardrail bookkeeping): the call's arguments and its function. A sync call would
    otherwise end in litellm's own ``BadRequestError`` before any hook of the gate ran; the
    async hook refuses the same call with :class:`RouteNotGated`. Anything else that reads
    ``default_on`` is left alone.
    """
    if frame is None or frame.f_code.co_name != _APPLIED:
        return
    if not str(frame.f_globals.get("__name__", "")).startswith("litellm."):
        return
    setup = frame.f_back
    if setup is None or setup.f_code.co_name != _SETUP:
        return
    kind = setup.f_locals.get("original_function")
    kwargs = frame.f_locals.get("kwargs")
    if not isinstance(kind, str) or not isinstance(kwargs, Mapping):
        return
    if kind not in _SYNC_CALLS:
        return  # an async call: its pre-call hook refuses it, with the deployment's model
    if all(g is not gate for g in _registered_gates()[:1]) or not _selected(gate, kwargs):
        return  # the first registered gate answers for all (a second one is refused later)
    model = kwargs.get("model")
    if isinstance(model, str) and model and not _resolves(kwargs, model):
        api = Api.RESPONSES if kind in _RESPONSES_CALLS else Api.CHAT
        raise RouteNotGated(model, api.value, "litellm cannot tell this model's provider")


def _resolves(kwargs: Mapping[str, Any], model: str) -> bool:
    """Whether litellm can tell the call's provider. Asked on every call, from many threads
    at once: unlike :func:`provider_of` it leaves ``sys.stdout`` alone (litellm prints its
    provider list when it cannot tell, as it would a moment later without the gate)."""
    try:
        _, provider, _, _ = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"),
            api_key=kwargs.get("api_key"),
        )
    except Exception:
        return False
    return bool(provider)


def _mode_name(mode: Any) -> str:
    """A guardrail mode for a message: its name, or the kind of value it is."""
    if isinstance(mode, str):
        return repr(mode[:40])
    value = getattr(mode, "value", None)
    return repr(value[:40]) if isinstance(value, str) else f"of type {type(mode).__name__}"


def _registered_gates() -> list[ToolGateGuardrail]:
    """The gates in ``litellm.callbacks``, each once, in order."""
    import litellm

    found: list[ToolGateGuardrail] = []
    for callback in list(getattr(litellm, "callbacks", None) or ()):
        if isinstance(callback, ToolGateGuardrail) and all(g is not callback for g in found):
            found.append(callback)
    return found


def _any_gate_registered() -> bool:
    return bool(_registered_gates())


class ToolGateGuardrail(CustomGuardrail):
    """The gate as a litellm ``CustomLogger`` and ``CustomGuardrail``. See the module docstring.

    Takes :class:`ToolGate`'s arguments, or their YAML forms (``tools_file``, ``policy`` as an
    import path, ``limits`` as a mapping, ``hmac_key_env``), plus whatever a proxy passes a
    guardrail (``guardrail_name``, ``event_hook``, ``default_on``, ...).
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        replaced = [name for name in _SEALED if name in cls.__dict__]
        if replaced:
            raise GateConfigError(
                f"{cls.__name__} replaces the gate's hooks {replaced}; a subclass of "
                "ToolGateGuardrail must leave them alone (configure the gate instead)"
            )
        # The proxy finds a stream hook only in the class's own __dict__: copy them in.
        for name in _SEALED:
            setattr(cls, name, ToolGateGuardrail.__dict__[name])

    def __init__(
        self,
        tools: Iterable[Mapping[str, Any]] | Literal["request"] | None = None,
        *,
        policy: Policy | str | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        run_id: str | None = None,
        tools_file: str | Path | None = None,
        hmac_key_env: str | None = None,
        base_dir: str | Path | None = None,
        retry_stream_faults: bool = False,
        metrics: Mapping[str, Any] | None = None,
        escalation: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        unknown = unknown_guardrail_keys(kwargs)
        if unknown:
            # A misspelt setting must stop the proxy, not run the gate without it.
            raise GuardrailConfigError(
                f"unknown toolgate settings {unknown}: the gate takes {sorted(SETTING_KEYS)} "
                "besides litellm's own guardrail parameters"
            )
        # Every value that is not the object form (a Limits, a callable policy) is checked as
        # its YAML form: a wrong type is a typed error naming the setting, never dropped.
        yaml_form: dict[str, Any] = {
            "tools": (
                list(tools)
                if isinstance(tools, Iterable) and not isinstance(tools, (str, bytes, Mapping))
                else tools
            ),
            "tools_file": tools_file,
            "policy": None if callable(policy) else policy,
            "limits": None if isinstance(limits, Limits) else limits,
            "tool_categories": tool_categories,
            "hmac_key_env": hmac_key_env,
            "run_id": run_id,
            "metrics": metrics,
            "escalation": escalation,
        }
        try:
            settings = GateSettings.from_mapping(
                {k: v for k, v in yaml_form.items() if v is not None}
            )
            arguments = settings.gate_arguments(None if base_dir is None else Path(base_dir))
            if callable(policy):
                arguments["policy"] = policy
            if isinstance(limits, Limits):
                arguments["limits"] = limits
            if hmac_key is not None:
                arguments["hmac_key"] = hmac_key
            self.gate = ToolGate(**arguments)
            # Metrics and route escalation (docs/metrics.md), when the settings ask for them.
            self.escalation = start_observing(settings)
        except GateConfigError as exc:
            raise GuardrailConfigError(str(exc)) from exc
        if not isinstance(retry_stream_faults, bool):
            raise GuardrailConfigError("retry_stream_faults must be true or false")
        # Opt-in: a remote stream fault before the first chunk may be retried by litellm.
        self.retry_stream_faults = retry_stream_faults
        event_hook = kwargs.get("event_hook")
        if event_hook is not None and _call_type(event_hook) != GuardrailEventHooks.post_call.value:
            # Only post_call's hooks see what the model answered: in any other mode (a
            # misspelt one included) litellm would pass tool calls through ungated.
            raise GuardrailConfigError(
                f"toolgate runs as a post_call guardrail only (mode: post_call); "
                f"mode {_mode_name(event_hook)} would let tool calls through ungated"
            )
        kwargs.setdefault("guardrail_name", "toolgate")
        super().__init__(**kwargs)
        self._pending: PendingTable[WireTap] = PendingTable(_METADATA, _TOKEN)
        self._made: weakref.WeakSet[WireTap] = weakref.WeakSet()
        # Nothing global changes here: the first sync call that needs the claim wraps the
        # clients it goes out on (see sync.claiming); close() (or the last gate dropped)
        # puts them back. Every gate shares the one installation.
        self._release = claiming.INSTALLATION.acquire()
        self._closed = False
        weakref.finalize(self, self._release)

    # litellm reads every registered guardrail's ``default_on`` first thing on every call,
    # before it looks at its response cache (``get_applied_guardrails`` in its call setup):
    # the one moment the gate can make sure a ``litellm.cache`` set since is guarded
    # (see cacheguard) before a gated call could be answered from it.
    @property
    def default_on(self) -> bool:
        cacheguard.guard(_any_gate_registered)
        _refuse_unresolved(self, sys._getframe(1))
        return self._default_on

    @default_on.setter
    def default_on(self, value: bool) -> None:
        self._default_on = value

    def close(self) -> None:
        """Take this gate out of litellm's callback lists, and put back what the gates
        changed in the process once the last one is closed: every httpx client the sync
        claim wrapped gets its own transports back. A closed gate that is called anyway
        refuses the sync calls it would have gated. A gate whose construction failed holds
        nothing: closing it does nothing."""
        release = self.__dict__.get("_release")
        if release is None:
            return
        self._closed = True
        for name in _CALLBACK_LISTS:
            listed = getattr(litellm, name, None)
            if isinstance(listed, list):
                listed[:] = [item for item in listed if item is not self]
        if not _any_gate_registered():
            cacheguard.unguard()  # litellm.cache's own reads back
        release()

    def __enter__(self) -> ToolGateGuardrail:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @classmethod
    def from_settings_file(cls, path: str | Path, **kwargs: Any) -> ToolGateGuardrail:
        """A gate configured by a YAML file of its own (for ``litellm_settings.callbacks``)."""
        try:
            settings, folder = GateSettings.from_file(path)
        except GateConfigError as exc:
            raise GuardrailConfigError(str(exc)) from exc
        values = settings.model_dump(exclude_none=True)
        return cls(base_dir=folder, **values, **kwargs)

    def __repr__(self) -> str:
        name, gate = self.__dict__.get("guardrail_name"), self.__dict__.get("gate")
        return f"{type(self).__name__}({name!r}, {gate!r})"

    @property
    def pending(self) -> int:
        """Proxy requests in flight: taps waiting for the hook that consumes them."""
        return len(self._pending)

    in_flight = pending

    # ---- the one admission and arming, for the async hook and the sync arming -------------
    def _admit(
        self, kind: str, request: Mapping[str, Any], route: Mapping[str, Any], *, vouched: bool
    ) -> Api | None:
        """Whether this gate gates the call, and on which API; None when it is not its to gate.

        The one default-deny of the callback, shared by the async hook and the sync arming:
        a call type that is not "not a model turn" (:mod:`calltypes`) is gated or refused,
        never passed (one litellm does not list yet included). Raises, before anything is
        sent: :class:`CallRefused` for a model turn the gate does not read,
        :class:`GatesConflict` when another gate is registered for the same call, and
        :class:`RouteNotGated` for a route the table refuses (``route``: the call's model,
        provider, api_base and stream, as :func:`route_for` reads them).
        """
        how = handling(kind)
        if how is Handling.NOT_A_MODEL_TURN:
            return None
        if how is not Handling.GATED:
            raise CallRefused(kind)
        if vouched:
            # A client a gate already withholds on: a ToolGate's own call, or litellm's
            # Responses bridge making its chat call with this gate's client from the outer
            # call. One attempt per wire, one policy run per call.
            return None
        cacheguard.guard(_any_gate_registered)
        gates = _registered_gates()
        if gates and all(gate is not self for gate in gates):
            return None  # taken out of litellm.callbacks; litellm's own lists still hold it
        chosen = [gate for gate in gates or [self] if _selected(gate, request)]
        if all(gate is not self for gate in chosen):
            return None  # not selected: the request goes out untouched
        if len(chosen) > 1:
            raise GatesConflict([repr(gate.guardrail_name) for gate in chosen])
        api = Api.RESPONSES if kind in _RESPONSES_CALLS else Api.CHAT
        if route.get("model"):
            route_for(route, api)
        return api

    def _new_tap(
        self,
        kind: str,
        *,
        tools: Any,
        model: str,
        streamed: bool,
        body: Mapping[str, Any] | None,
    ) -> WireTap:
        """The call's attempt and tap; the request's own fields are checked now (a chat
        request for ``n > 1`` is refused here, unsent: the tap's quarantine)."""
        tap = WireTap(self.gate.new_attempt(tools=tools, model=model), streamed=streamed)
        tap.responses_api = kind in _RESPONSES_CALLS
        tap.messages_api = kind in _MESSAGES_CALLS
        if body is not None and not tap.responses_api and not tap.messages_api:
            tap.bind_request("/chat/completions", {k: body[k] for k in REQUEST_FIELDS if k in body})
        return tap

    # ---- before the request ----------------------------------------------------------------
    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        kind = _call_type(call_type)
        if kind in _SYNC_CALLS:
            return None  # litellm's sync Responses runs this hook too: armed by the sync face
        vouched = is_vouched_client(kwargs.get("client"))
        api = self._admit(kind, kwargs, kwargs, vouched=vouched)
        if api is None:
            return None  # not gated here: the request goes out untouched
        streamed = bool(kwargs.get("stream"))
        in_proxy = "proxy_server_request" in kwargs
        tap = self._new_tap(
            kind,
            tools=kwargs.get("tools"),
            model=str(kwargs.get("model", "")),
            streamed=streamed,
            body=kwargs,
        )
        if tap.refused:
            self._refuse_unsent(kwargs, tap, in_proxy=in_proxy)
        # /v1/messages: the wire is the one litellm's bridge for this model speaks (bridges).
        bridge = messages_bridge(kwargs) if tap.messages_api else None
        if bridge is not None:
            tap.wire_path = bridge_path(bridge)
        wrap: Callable[[Any], Any]
        if in_proxy and streamed:

            def wrap(base: Any) -> Any:
                return AsyncTapTransport(base, tap)
        else:
            model, provider = str(kwargs.get("model", "")), kwargs.get("custom_llm_provider")
            started = time.time()

            def report(attempt: Attempt) -> None:
                self._report(kwargs, attempt, started)

            bridged = bridge if bridge is not Bridge.NATIVE else None
            holding = Withholding(
                self.gate.policy,
                report,
                # A whole bridged body is refused inside litellm's call (below): as a
                # guardrail intervention there too, which litellm's router never re-sends.
                intervene=not in_proxy or (bridged is not None and not streamed),
                # A bridged whole body is judged (and litellm's message of it checked) in
                # the transport: litellm's bridge parses it before any later hook runs.
                whole_here=bridged is not None and not streamed,
                retry_stream_faults=self.retry_stream_faults,
                chunk_check=chat_chunk_check(model, provider),
                event_check=(
                    responses_event_check(model, provider)
                    if tap.responses_api or bridge is Bridge.RESPONSES
                    else None
                ),
                carrier_of=None if bridged is None else bridge_carrier(bridged, streamed),
            )

            def wrap(base: Any) -> Any:
                return WithholdingTransport(base, tap, holding)

        # The client kind the route takes (checked in _admit; a Messages call litellm bridges
        # to the Responses API takes that API's client, its route checked again here).
        if bridge is Bridge.RESPONSES:
            api = Api.RESPONSES
        kwargs["client"] = vouch_client(
            self.gate.tapped_client(kwargs, api, wrap, asynchronous=True)
        )
        if in_proxy:
            # The proxy's later hooks get the proxy's request, not these kwargs: keep the tap.
            self._remember(kwargs, tap)
        self._made.add(tap)
        return kwargs

    # ---- sync calls: armed here, claimed on the wire (see sync.claiming) ---------------
    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        # litellm logs and drops any Exception this hook raises and sends the call anyway
        # (only a BaseException, such as UngatedCallRefused, stops it): a call the gate
        # failed to check or arm must be refused here, never sent unclaimed. Raised outside
        # the handler, so no chain holds the request.
        refusal: str | None = None
        try:
            if not self._closed:  # a custom provider registered since: its sync turns refused
                claiming.INSTALLATION.custom.refuse()
            self._arm_sync(kwargs)
        except ToolGateError as refused:
            refusal = str(refused)  # each says that the call was not sent
        except Exception:
            refusal = "toolgate could not prepare this sync call to be gated; it was not sent"
        if refusal is not None:
            raise UngatedCallRefused(refusal)

    def _arm_sync(self, kwargs: Any) -> None:
        """Refuse a sync call the gate cannot gate, or arm it to be claimed (see sync.claiming)."""
        if not isinstance(kwargs, Mapping):
            return
        kind = _call_type(kwargs.get("call_type"))
        if self._closed and kind in _SYNC_CALLS:
            gates = _registered_gates()
            if gates and all(gate is not self for gate in gates):
                return  # closed and replaced: the registered gate decides
            raise UngatedCallRefused("this toolgate gate was closed; it gates no more calls")
        if handling(kind) is Handling.GATED and kind not in _SYNC_CALLS:
            return  # an async call: armed by the async hook
        call_id = str(kwargs.get("litellm_call_id") or "")
        route = str(kwargs.get("custom_llm_provider") or "")
        # The logging kwargs name the model without its provider: the route (and so its
        # profile) is the provider's.
        model = str(kwargs.get("model") or "")
        if route and not model.startswith(f"{route}/"):
            model = f"{route}/{model}"
        body = sent(kwargs, "complete_input_dict")
        streamed = bool(kwargs.get("stream")) or bool(
            isinstance(body, Mapping) and body.get("stream")
        )
        # litellm's standard logging of a sync call reads the metadata of its litellm_params.
        params = kwargs.get("litellm_params")
        request: dict[str, Any] = params if isinstance(params, dict) else {}
        where = {
            "model": model if route else None,
            "custom_llm_provider": route or None,
            "api_base": request.get("api_base"),
            "stream": streamed,
        }
        if self._admit(kind, request, where, vouched=is_vouched(call_id)) is None:
            return
        refusal = _sync_refusal(kind, route, streamed, sdkclaim_streamed(kwargs))
        if refusal is not None:
            raise UngatedCallRefused(refusal)
        sdk = sync_route_sdk(route, kind)
        tools = body.get("tools") if isinstance(body, Mapping) else None
        tap = self._new_tap(
            kind,
            tools=tools,
            model=model,
            streamed=streamed,
            body=body if isinstance(body, Mapping) else None,
        )
        if tap.refused:
            emit_records(tap.attempt)
            self._report(request, tap.attempt, time.time())
            fault = tap.attempt.quarantined
            raise UngatedCallRefused(f"{fault}; this sync call was not sent")
        started = time.time()

        def report(attempt: Attempt) -> None:
            self._report(request, attempt, started)

        holding = Withholding(
            self.gate.policy,
            report,
            whole_here=True,
            retry_stream_faults=self.retry_stream_faults,
            chunk_check=chat_chunk_check(
                str(kwargs.get("model", "")), kwargs.get("custom_llm_provider") or None
            ),
            event_check=responses_event_check(model) if tap.responses_api else None,
        )
        if sdk:
            arm_sdk(kwargs, route, tap, holding)
        else:
            arm(kwargs, tap, holding)

    def log_post_api_call(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        if isinstance(kwargs, Mapping) and _call_type(kwargs.get("call_type")) in _SYNC_CALLS:
            check_claimed(kwargs)

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        # litellm runs it on the caller's thread once a sync call failed: its claim is done.
        # (Not sealed: a subclass that replaces it leaves at most one claim per thread.)
        if isinstance(kwargs, Mapping):
            forget_claim(kwargs)

    def _remember(self, kwargs: dict[str, Any], tap: WireTap) -> None:
        """Keep the tap for the proxy's later hooks, under a token of this gate's written into
        the request's metadata (see :mod:`~..core.pending`); a retried request's earlier tap
        is dropped."""
        self._pending.remember(kwargs, tap, bound=_MAX_PENDING)

    def _take(self, request: Mapping[str, Any]) -> WireTap | None:
        """The request's tap, forgotten; None when there is none or the request is ambiguous."""
        return self._pending.take(request)

    # ---- proxy: the stream ---------------------------------------------------------------
    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        started = time.time()
        tap = self._take(request_data)
        if tap is None and not _selected(self, request_data):
            async for chunk in response:  # not selected: passed on untouched, unrecorded
                yield chunk
            return
        if tap is None or not tap.streamed:
            self._refuse_unobserved(request_data, started)
        # The proxy wraps litellm's stream, so the request (not the stream's type) says
        # whether it carries Responses events.
        events: Any = CarrierEvents() if tap.responses_api else carrier_events(response)
        if tap.messages_api:
            events = AnthropicEvents()  # /v1/messages: Anthropic SSE bytes
        stream = AsyncGatedStream(response, tap, self.gate.policy, events)
        observers.stream_started(tap.attempt.route)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            # Also reached when the client went away (the proxy closes this generator).
            try:
                await stream.aclose()
                self._report(request_data, tap.attempt, started)
            finally:
                observers.stream_ended(tap.attempt.route)

    # ---- proxy and SDK: a whole response ---------------------------------------------------
    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        if data.get("stream") or not (
            hasattr(response, "choices")
            or isinstance(response, ResponsesAPIResponse)
            or (isinstance(response, dict) and response.get("type") == "message")
        ):
            return None
        tap = self._take(data)
        if tap is None and not _selected(self, data):
            return None
        await self._check_response(data, response, tap, in_proxy=True)
        return None

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        # Inside the proxy the success hook checks the response once routing is done.
        if (
            "proxy_server_request" in request_data
            or _call_type(call_type) not in _GATED_CALLS
            or request_data.get("stream")
        ):
            return None
        # Outside the proxy the request is the kwargs the pre-call hook returned. A tap this
        # gate did not make belongs to a ToolGate's own call, which that gate decides.
        tap = getattr(request_data.get("client"), "tap", None)
        if tap is None and not _selected(self, request_data):
            return None
        if isinstance(tap, WireTap) and tap not in self._made:
            return None
        await self._check_response(request_data, response, tap, in_proxy=False)
        return None

    async def _check_response(
        self, request: dict[str, Any], response: Any, tap: WireTap | None, *, in_proxy: bool
    ) -> None:
        started = time.time()
        if not isinstance(tap, WireTap) or tap.streamed:
            self._refuse_unobserved(request, started, in_proxy=in_proxy)
        attempt = tap.attempt
        # Through litellm's Responses bridge two success hooks (the chat call's, then the
        # Responses call's) see the one tap: the first decides, the second repeats it.
        if attempt.state is StreamState.RELEASED:
            return
        if attempt.quarantined is None:
            if await aapprove_whole(attempt, _carrier_of_whole, response, self.gate.policy):
                attempt.release()
            emit_records(attempt)
            self._report(request, attempt, started)
        fault = attempt.quarantined
        if fault is not None:
            del response  # litellm's result holds argument text: not in this frame's locals
            _sanitize_logged_response(request, attempt)
            raise_clean(fault if in_proxy else as_intervention(fault))

    # ---- routing: a route escalated for its remote faults is left out (docs/metrics.md) ---
    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list[Any],
        messages: Any,
        request_kwargs: dict[str, Any] | None = None,
        parent_otel_span: Any = None,
    ) -> list[Any]:
        escalation: RouteEscalation | None = getattr(self, "escalation", None)
        if escalation is None:
            return healthy_deployments
        return escalation.filter(healthy_deployments)

    # ---- failures: forget the request ------------------------------------------------------
    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> None:
        self._take(request_data)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        if isinstance(kwargs, Mapping):
            self._take(kwargs)

    # ---- reporting -------------------------------------------------------------------------
    def _refuse_unsent(self, request: dict[str, Any], tap: WireTap, *, in_proxy: bool) -> NoReturn:
        """A request the gate cannot gate as asked (``n > 1``), refused before it was sent."""
        emit_records(tap.attempt)
        self._report(request, tap.attempt, time.time())
        fault = tap.attempt.quarantined
        assert fault is not None
        raise_clean(fault if in_proxy else as_intervention(fault))

    def _refuse_unobserved(
        self, request: dict[str, Any], started: float, *, in_proxy: bool = True
    ) -> NoReturn:
        attempt = self.gate.new_attempt()
        with contextlib.suppress(ToolCallQuarantined):
            attempt.conclude()
        emit_records(attempt)
        self._report(request, attempt, started)
        fault = attempt.quarantined
        assert fault is not None
        raise fault if in_proxy else as_intervention(fault)

    def _report(self, request: dict[str, Any], attempt: Attempt, started: float) -> None:
        """The attempt's sanitized records into litellm's standard logging for this request."""
        fault = attempt.quarantined
        summary = attempt.summary()
        ended = time.time()
        # Logging must never decide: the decision stands as made whatever logging does.
        with contextlib.suppress(Exception):
            self.add_standard_logging_guardrail_information_to_request_data(
                guardrail_json_response=summary,
                request_data=request,
                guardrail_status="success" if fault is None else "guardrail_intervened",
                start_time=started,
                end_time=ended,
                duration=ended - started,
                guardrail_provider="litellm_toolgate",
                event_type=GuardrailEventHooks.post_call,
            )


__all__ = ["GuardrailConfigError", "ToolGateGuardrail", "UngatedCallRefused"]
