"""``ToolGateGuardrail``: the gate as a litellm callback and as a LiteLLM proxy guardrail.

One object serves three ways of use: ``litellm.callbacks = [gate]`` in code, a
``litellm_settings.callbacks`` entry in a proxy's YAML, and a ``guardrails:`` entry with
``mode: post_call``. All three rest on one hook that litellm runs right before it sends a
request to a deployment (``async_pre_call_deployment_hook``): the gate swaps in an HTTP
client of its own, so it reads the raw wire of that request. What happens next depends on
who hands the result to the caller.

* **Proxy, streaming.** The proxy passes its stream through the guardrail's iterator hook.
  The client injected for the request only observes; the hook looks its tap up by
  ``litellm_call_id`` and runs the stream through :class:`AsyncGatedStream`, exactly as
  :class:`ToolGate` does: text passes live, tool calls are withheld, litellm's chunks are
  cross-checked against the wire, the policy runs, and the calls go out or a
  :class:`ToolCallQuarantined` is raised. The proxy turns a raise before its first chunk
  into an HTTP error with the quarantine's ``status_code``, and a later one into an SSE
  error frame; both carry the quarantine's message only (ids and a reason).
* **Proxy, not streaming.** The injected client holds the body until it ended; the proxy's
  success hook checks litellm's response against the wire and raises the same way.
* **SDK, ``litellm.acompletion``.** No hook sees the stream before the caller does, so the
  injected client withholds on the wire itself (:mod:`withhold`); a quarantine reaches the
  caller as litellm's exception with the gate's as its cause (:func:`find_quarantine`).
  Non-streamed responses are checked in the deployment success hook, which may raise.
* **SDK, sync ``litellm.completion``.** litellm runs no hook there that can change the
  request or stop the response, and it swallows every ``Exception`` a logging hook raises.
  The gate refuses the call before it is sent by raising :class:`UngatedCallRefused`, a
  ``BaseException``, from the one sync hook litellm runs first (``log_pre_api_call``),
  unless :meth:`ToolGate.completion` is making the call (it gates the call itself).

The Responses API goes the same ways: ``litellm.aresponses`` and the proxy's
``/v1/responses`` run the same pre-call hook (through litellm's bridge, once more for the chat
call it makes, whose client then wraps the first one's), and the withholding client reads
either wire (:mod:`withhold`). The proxy hands the iterator hook a wrapper of its own around
litellm's stream, so the tap carries whether the caller gets Responses events
(``responses_api``, set from the call type and inherited by the bridge's chat call), and
the hook runs :class:`CarrierEvents` for them, as :meth:`ToolGate.aresponses` does. Whole
results are checked against the wire as a ``ResponsesAPIResponse``. A sync
``litellm.responses`` is refused like a sync ``litellm.completion``.

Outside the proxy the tap travels with the request itself (the injected client is in the
kwargs litellm hands the later hooks). Inside the proxy those hooks get the proxy's own
request, so the tap waits in ``_pending``, keyed by ``litellm_call_id``, between the pre-call
hook and the hook that consumes it, which removes it first thing. The proxy's failure hook
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
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NoReturn

from litellm.integrations.custom_guardrail import CustomGuardrail
from litellm.types.guardrails import GuardrailEventHooks
from litellm.types.llms.openai import ResponsesAPIResponse

from ..core.attempt import ChatAttempt
from ..core.errors import GateConfigError, ToolCallQuarantined, ToolGateError
from ..core.limits import Limits
from ..core.policy import Policy
from .config import GateSettings
from .events import CarrierEvents, carrier_events, carrier_of_result
from .gate import SYNC_CALL_GATED, ToolGate
from .logs import emit_records
from .policy import ajudge
from .routes import Api
from .stream import AsyncGatedStream
from .transport import AsyncTapTransport, WireTap
from .withhold import Withholding, WithholdingTransport

_CHAT_CALLS = frozenset({"acompletion", "completion"})
# The calls the gate gates here: chat completions and the async Responses API.
_RESPONSES_CALLS = frozenset({"aresponses"})
_GATED_CALLS = _CHAT_CALLS | _RESPONSES_CALLS
# Sync calls a callback cannot gate: refused before they are sent.
_REFUSED_SYNC = frozenset({"completion", "responses"})
_MAX_PENDING = 10_000


class GuardrailConfigError(ToolGateError, RuntimeError):
    """The gate's settings given to :class:`ToolGateGuardrail` are wrong.

    Deliberately not a ``ValueError``: a LiteLLM proxy logs a guardrail whose constructor
    raises ``ValueError`` or ``TypeError`` and starts *without* it. This error stops the
    proxy's start-up instead; the :class:`GateConfigError` it wraps names the setting.
    """


class UngatedCallRefused(BaseException):
    """A sync ``litellm.completion`` or ``litellm.responses`` reached the gate as a callback.

    litellm gives a callback no way to gate a sync call and swallows every ``Exception`` its
    hooks raise, so this derives from ``BaseException``: it is the only way the refusal
    reaches the caller. It is raised before the request is sent.
    """


_SEALED = (
    "async_pre_call_deployment_hook",
    "async_post_call_streaming_iterator_hook",
    "async_post_call_success_hook",
    "async_post_call_success_deployment_hook",
    "async_post_call_failure_hook",
    "async_log_failure_event",
    "log_pre_api_call",
)


def _call_type(value: Any) -> str:
    return str(getattr(value, "value", value) or "")


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
        tools: Iterable[Mapping[str, Any]] | None = None,
        *,
        policy: Policy | str | None = None,
        limits: Limits | Mapping[str, Any] | None = None,
        tool_categories: Mapping[str, str] | None = None,
        hmac_key: bytes | None = None,
        run_id: str | None = None,
        tools_file: str | Path | None = None,
        hmac_key_env: str | None = None,
        base_dir: str | Path | None = None,
        **kwargs: Any,
    ) -> None:
        yaml_form: dict[str, Any] = {
            "tools": None if tools is None else list(tools),
            "tools_file": tools_file,
            "policy": policy if isinstance(policy, str) else None,
            "limits": limits if isinstance(limits, Mapping) else None,
            "tool_categories": tool_categories,
            "hmac_key_env": hmac_key_env,
            "run_id": run_id,
        }
        try:
            settings = GateSettings.from_mapping(
                {k: v for k, v in yaml_form.items() if v is not None}
            )
            arguments = settings.gate_arguments(None if base_dir is None else Path(base_dir))
            if policy is not None and not isinstance(policy, str):
                arguments["policy"] = policy
            if isinstance(limits, Limits):
                arguments["limits"] = limits
            if hmac_key is not None:
                arguments["hmac_key"] = hmac_key
            self.gate = ToolGate(**arguments)
        except GateConfigError as exc:
            raise GuardrailConfigError(str(exc)) from exc
        kwargs.setdefault("guardrail_name", "toolgate")
        super().__init__(**kwargs)
        self._pending: OrderedDict[str, WireTap] = OrderedDict()

    @classmethod
    def from_settings_file(cls, path: str | Path, **kwargs: Any) -> ToolGateGuardrail:
        """A gate configured by a YAML file of its own (for ``litellm_settings.callbacks``)."""
        settings, folder = GateSettings.from_file(path)
        values = settings.model_dump(exclude_none=True)
        return cls(base_dir=folder, **values, **kwargs)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.guardrail_name!r}, {self.gate!r})"

    @property
    def pending(self) -> int:
        """Requests whose tap is waiting for the hook that consumes it."""
        return len(self._pending)

    # ---- before the request ----------------------------------------------------------------
    async def async_pre_call_deployment_hook(
        self, kwargs: dict[str, Any], call_type: Any
    ) -> dict[str, Any] | None:
        if _call_type(call_type) not in _GATED_CALLS:
            return None
        call_id = str(kwargs.get("litellm_call_id") or "")
        streamed = bool(kwargs.get("stream"))
        in_proxy = "proxy_server_request" in kwargs
        tap = WireTap(
            self.gate.new_attempt(tools=kwargs.get("tools"), model=str(kwargs.get("model", ""))),
            streamed=streamed,
        )
        # Through litellm's bridge a Responses call makes a chat call of its own (same call
        # id, this gate's client from the outer call): its tap keeps the Responses carrier.
        outer = getattr(kwargs.get("client"), "tap", None)
        tap.responses_api = _call_type(call_type) in _RESPONSES_CALLS or bool(
            isinstance(outer, WireTap) and outer.responses_api
        )
        wrap: Callable[[Any], Any]
        if in_proxy and streamed:

            def wrap(base: Any) -> Any:
                return AsyncTapTransport(base, tap)
        else:
            started = time.time()

            def report(attempt: ChatAttempt) -> None:
                self._report(kwargs, attempt, started)

            def wrap(base: Any) -> Any:
                return WithholdingTransport(base, tap, Withholding(self.gate.policy, report))

        # The client kind the route takes; a route the gate does not gate is refused here.
        api = Api.RESPONSES if _call_type(call_type) in _RESPONSES_CALLS else Api.CHAT
        kwargs["client"] = self.gate.tapped_client(kwargs, api, wrap, asynchronous=True)
        if in_proxy:
            # The proxy's later hooks get the proxy's request, not these kwargs: keep the tap.
            self._remember(call_id, tap)
        return kwargs

    def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
        if SYNC_CALL_GATED.get():
            return  # ToolGate.completion's own call: gated by that gate
        kind = _call_type(kwargs.get("call_type")) if isinstance(kwargs, Mapping) else ""
        if kind in _REFUSED_SYNC:
            raise UngatedCallRefused(
                f"a sync litellm.{kind} cannot be gated by a callback and was not sent; "
                f"use ToolGate.{kind}(...) or litellm.a{kind}(...)"
            )

    def _remember(self, call_id: str, tap: WireTap) -> None:
        self._pending[call_id] = tap
        while len(self._pending) > _MAX_PENDING:
            self._pending.popitem(last=False)

    def _take(self, request: Mapping[str, Any]) -> WireTap | None:
        return self._pending.pop(str(request.get("litellm_call_id") or ""), None)

    # ---- proxy: the stream ---------------------------------------------------------------
    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict[str, Any]
    ) -> AsyncGenerator[Any, None]:
        started = time.time()
        tap = self._take(request_data)
        if tap is None or not tap.streamed:
            self._refuse_unobserved(request_data, started)
        # The proxy wraps litellm's stream, so the request (not the stream's type) says
        # whether it carries Responses events.
        events = CarrierEvents() if tap.responses_api else carrier_events(response)
        stream = AsyncGatedStream(response, tap, self.gate.policy, events)
        try:
            async for chunk in stream:
                yield chunk
        finally:
            # Also reached when the client went away (the proxy closes this generator).
            await stream.aclose()
            self._report(request_data, tap.attempt, started)

    # ---- proxy and SDK: a whole response ---------------------------------------------------
    async def async_post_call_success_hook(
        self, data: dict[str, Any], user_api_key_dict: Any, response: Any
    ) -> Any:
        if data.get("stream") or not (
            hasattr(response, "choices") or isinstance(response, ResponsesAPIResponse)
        ):
            return None
        await self._check_response(data, response, self._take(data))
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
        # Outside the proxy the request is the kwargs the pre-call hook returned.
        tap = getattr(request_data.get("client"), "tap", None)
        await self._check_response(request_data, response, tap)
        return None

    async def _check_response(
        self, request: dict[str, Any], response: Any, tap: WireTap | None
    ) -> None:
        started = time.time()
        if not isinstance(tap, WireTap) or tap.streamed:
            self._refuse_unobserved(request, started)
        attempt = tap.attempt
        released = False
        try:
            calls = attempt.conclude(carrier_of_result(response))
            if await ajudge(attempt, calls, self.gate.policy):
                attempt.release()
                released = True
        except ToolCallQuarantined:
            pass
        emit_records(attempt)
        self._report(request, attempt, started)
        fault = attempt.quarantined
        if not released:
            assert fault is not None
            raise fault

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
    def _refuse_unobserved(self, request: dict[str, Any], started: float) -> NoReturn:
        attempt = self.gate.new_attempt()
        fault: ToolCallQuarantined | None = None
        try:
            attempt.conclude()
        except ToolCallQuarantined as exc:
            fault = exc
        emit_records(attempt)
        self._report(request, attempt, started)
        assert fault is not None
        raise fault

    def _report(self, request: dict[str, Any], attempt: ChatAttempt, started: float) -> None:
        """The attempt's sanitized records into litellm's standard logging for this request."""
        fault = attempt.quarantined
        records: list[dict[str, Any]] = [r.model_dump(mode="json") for r in attempt.records()]
        summary = {
            "attempt_id": attempt.attempt_id,
            "outcome": "released" if fault is None else "quarantined",
            "reason": None if fault is None else fault.reason.value,
            "records": records,
        }
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
