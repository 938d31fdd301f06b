"""``ToolGateGuardrail``: the gate as a litellm callback and as a LiteLLM proxy guardrail.

One object serves three ways of use: ``litellm.callbacks = [gate]`` in code, a
``litellm_settings.callbacks`` entry in a proxy's YAML, and a ``guardrails:`` entry with
``mode: post_call``. This module is its face: the settings, the hooks litellm calls, and
``close``. The hooks hand the work to the parts that do it:

* :mod:`.deciders`: which calls the gate gates (call type, one gate per call, per-request
  selection, the route table), async and sync alike.
* :mod:`.request`: before an async call is sent (``async_pre_call_deployment_hook``: the
  proxy, ``litellm.acompletion``, ``aresponses``, ``anthropic.messages.acreate``): the
  call's tap (:mod:`.taps`) and the client that reads its wire, observing or withholding.
* :mod:`.answer`: after it answered: the proxy's stream gated, a whole result checked
  against the wire.
* :mod:`.taps`: a call's tap, and the proxy's taps waiting between its hooks.
* :mod:`.decisionlog`: each decision into litellm's standard logging (the sanitized records,
  never argument text); refusals.
* **SDK, sync ``litellm.completion`` / ``litellm.responses``.** litellm runs no sync hook
  that can change the request, so the gate arms the call in ``log_pre_api_call`` and a
  claiming transport, put in place around the transport of the httpx client litellm sends
  it on, claims exactly that request and withholds like the async client (:mod:`.sync`);
  the OpenAI SDK routes' chat streams are claimed the same way on the SDK client's httpx
  client. What it cannot claim is refused before it is sent (:class:`UngatedCallRefused`, a
  :class:`ToolGateError`): from litellm's call set-up, or by the claiming transport in
  place of the request, since litellm swallows any ``Exception`` a logging hook raises
  (:mod:`.sync.hooks`, which holds the sync hooks; the methods here only delegate). A
  :class:`ToolGate`'s own calls are vouched for by that gate (call id and thread) and left
  alone. No client changes until the first such call (``litellm.cache``'s reads are
  guarded when a gate is built, see :mod:`.cacheguard`); :meth:`ToolGateGuardrail.close`
  puts back what it changed.
* **A gate handed to a call in its own** ``callbacks=`` (not in ``litellm.callbacks``):
  litellm runs only its logging hooks. Sync calls as above; async calls on ``openai/`` are
  claimed on the SDK client litellm holds, others refused unsent (:mod:`.sync.asyncclaim`).
* **Other call types** are classified once in :mod:`calltypes`: a model turn the gate does
  not read yet (or a call type the table does not list) is refused before sending, and only
  what the table calls "not a model turn" passes untouched.

The proxy runs a streaming iterator hook only when the hook is defined in the registered
class's own ``__dict__``; :meth:`ToolGateGuardrail.__init_subclass__` copies the gate's hooks
into every subclass and refuses a subclass that replaces them, so a subclass stays gated.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncGenerator, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

import litellm

from ...core import plugs
from ...core.decision.limits import Limits
from ...core.errors import (
    GateConfigError,
    ToolGateError,
)
from ...core.rules.policy import Policy
from ..config import SETTING_KEYS, GateSettings, unknown_guardrail_keys
from ..gate import ToolGate
from ..seam import frames
from ..seam.symbols import GuardrailEventHooks
from ..sync import claiming
from ..sync import hooks as sync_hooks
from ..sync.claiming import (
    SyncCallStopped,
    UngatedCallRefused,
)
from ..sync.refusal import AsyncCallStopped
from . import cacheguard, callsetup
from .answer import (
    answer_unhooked_failure,
    check_proxy_response,
    check_sdk_response,
    open_proxy_stream,
)
from .deciders import GateGuardrail
from .deciders import any_gate_acting as _any_gate_acting
from .deciders import any_gate_registered as _any_gate_registered
from .deciders import call_type as _call_type
from .proxyroutes import refuse_before_sending
from .request import arm_async
from .taps import Taps

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


class GuardrailConfigError(ToolGateError, RuntimeError):
    """The gate's settings given to :class:`ToolGateGuardrail` are wrong.

    Deliberately not a ``ValueError``: a LiteLLM proxy logs a guardrail whose constructor
    raises ``ValueError`` or ``TypeError`` and starts *without* it. This error stops the
    proxy's start-up instead; the :class:`GateConfigError` it wraps names the setting.
    """


_SEALED = (
    "async_pre_call_hook",
    "should_run_guardrail",
    "async_pre_call_deployment_hook",
    "async_post_call_streaming_iterator_hook",
    "async_post_call_success_hook",
    "async_post_call_success_deployment_hook",
    "async_post_call_failure_hook",
    "async_log_failure_event",
    "log_pre_api_call",
    "log_post_api_call",
)


_PRE_CALL = GuardrailEventHooks.pre_call
_POST_CALL = GuardrailEventHooks.post_call


def _mode_name(mode: Any) -> str:
    """A guardrail mode for a message: its name, or the kind of value it is."""
    if isinstance(mode, str):
        return repr(mode[:40])
    value = getattr(mode, "value", None)
    return repr(value[:40]) if isinstance(value, str) else f"of type {type(mode).__name__}"


class ToolGateGuardrail(GateGuardrail):
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
            self.escalation: Any = (
                None
                if settings.metrics is None and settings.escalation is None
                else plugs.instruments()(settings)
            )
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
        self._taps = Taps()
        # No client changes here: the first sync call that needs the claim wraps the
        # clients it goes out on (see sync.claiming); close() (or the last gate dropped)
        # puts them back. Every gate shares the one installation.
        self._release = claiming.INSTALLATION.acquire()
        self._closed = False
        weakref.finalize(self, self._release)
        # litellm runs no hook of a gate handed to a call in its own callbacks= before it
        # reads its cache: the litellm.cache there now is guarded from the start (a call
        # that names a gate is never answered from it; see cacheguard).
        cacheguard.guard(_any_gate_acting)

    # litellm reads every registered guardrail's ``default_on`` first thing on every call,
    # before it looks at its response cache (``get_applied_guardrails`` in its call setup):
    # the one moment the gate can make sure a ``litellm.cache`` set since is guarded
    # (see cacheguard) before a gated call could be answered from it.
    # The proxy reads it too, several times per streamed chunk (its per-chunk guardrail
    # check): what needs nothing done is told apart here without a call.
    @property
    def default_on(self) -> bool:
        if getattr(litellm, "cache", None) is not None:
            cacheguard.guard(_any_gate_acting)
        if getattr(litellm, "custom_provider_map", None) and not self.__dict__.get("_closed", True):
            # litellm registered litellm.custom_provider_map's providers just before (its
            # call set-up): one added since is shadowed before this very call can reach it.
            claiming.INSTALLATION.custom.refuse()
        call = frames.caller_setup()
        if call is not None:
            # A mock model turn or a chat request for n > 1 off the chat routes: refused
            # here, sync and async
            # alike; then what a sync call's own arguments condemn (sync.hooks).
            callsetup.at_call_setup(self, *call)
            sync_hooks.at_call_setup(self, *call)
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
        return len(self._taps)

    in_flight = pending

    # ---- before the request ----------------------------------------------------------------
    def should_run_guardrail(self, data: Any, event_type: GuardrailEventHooks) -> bool:
        # The gate is a post_call guardrail, and also refuses before sending what it cannot
        # gate (async_pre_call_hook): the proxy asks about its pre-call hook as pre_call, and
        # the gate answers as for the request it would gate (litellm's selection).
        # (The proxy asks this once per streamed chunk too: the members are read once.)
        if event_type == _PRE_CALL:
            event_type = _POST_CALL
        return bool(super().should_run_guardrail(data, event_type))

    async def async_pre_call_hook(
        self, user_api_key_dict: Any, cache: Any, data: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        # The proxy, before anything is sent: MCP tools, pass-through and other routes the
        # gate cannot gate are refused here (proxyroutes), with a typed error.
        refuse_before_sending(data, _call_type(call_type))
        return None

    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        return arm_async(self, self._taps, kwargs, _call_type(call_type))

    # ---- sync calls: refused at call set-up, armed, claimed on the wire (sync.hooks) ----
    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        cacheguard.guard(_any_gate_acting)  # a litellm.cache set since (see __init__)
        sync_hooks.log_pre_api_call(self, kwargs)

    def log_post_api_call(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        sync_hooks.log_post_api_call(kwargs)

    def log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        # (Not sealed: a subclass that replaces it leaves at most one claim per thread.)
        sync_hooks.log_failure_event(kwargs)

    # ---- proxy: the stream ---------------------------------------------------------------
    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        # The class's own hook (see __init_subclass__) hands on the gated stream, and closes
        # it when the proxy closes this one (also when the client went away). This generator
        # is the only one between litellm's stream and the proxy (answer.ProxyStream).
        gated = open_proxy_stream(self, self._taps, response, request_data)
        if gated is None:
            async for chunk in response:
                yield chunk
            return
        try:
            async for chunk in gated.stream:
                yield chunk
        finally:
            await gated.end()

    # ---- proxy and SDK: a whole response ---------------------------------------------------
    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        await check_proxy_response(self, self._taps, data, response)
        return None

    async def async_post_call_success_deployment_hook(
        self, request_data: dict[str, Any], response: Any, call_type: Any
    ) -> Any:
        await check_sdk_response(self, self._taps, request_data, response, call_type)
        return None

    # ---- routing: a route escalated for its remote faults is left out (docs/metrics.md) ---
    async def async_filter_deployments(
        self,
        model: str,
        healthy_deployments: list[Any],
        messages: Any,
        request_kwargs: dict[str, Any] | None = None,
        parent_otel_span: Any = None,
    ) -> list[Any]:
        escalation = getattr(self, "escalation", None)
        if escalation is None:
            return healthy_deployments
        kept: list[Any] = escalation.filter(healthy_deployments)
        return kept

    # ---- failures: forget the request, answer a quarantine litellm failed on -------------
    async def async_post_call_failure_hook(
        self,
        request_data: dict[str, Any],
        original_exception: Exception,
        user_api_key_dict: Any,
        traceback_str: str | None = None,
    ) -> Any:
        tap = self._taps.take(request_data)
        return None if tap is None else answer_unhooked_failure(self, request_data, tap)

    async def async_log_failure_event(
        self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
    ) -> None:
        if isinstance(kwargs, Mapping):
            self._taps.take(kwargs)


__all__ = [
    "AsyncCallStopped",
    "GuardrailConfigError",
    "SyncCallStopped",
    "ToolGateGuardrail",
    "UngatedCallRefused",
]
