"""The callback's sync face: where a sync call is refused, armed and checked.

litellm gives a callback three moments on a sync ``litellm.completion`` /
``litellm.responses``, and each can stop the call a different way:

1. **Call set-up** (:func:`at_call_setup`, from ``default_on``, which litellm reads first
   thing on every call, before its cache and before any request is built). An
   ``Exception`` raised here reaches the caller as it is. Everything the call's own
   arguments decide is refused here: a closed gate, two gates selected for one call, a
   provider litellm cannot tell, a route whose sync client the gate cannot claim, a stream
   of litellm's sync Messages adapter. A
   ``client=`` of the caller's gets a claiming transport around its httpx client (in place,
   put back with the rest), so its request is claimed like litellm's own; a sync whole call
   litellm would send through a client it builds for that call alone (watsonx/) is given
   that client here, in its arguments, and it is claimed the same way.
2. **``log_pre_api_call``** (:func:`log_pre_api_call`: the full URL, the body and the very
   headers dict about to be sent). litellm logs and drops any ``Exception`` raised here, so
   nothing is raised: the call is armed (:mod:`.claiming`, :mod:`.sdkclaim`), or its
   refusal is held for its request (:meth:`~.claiming._Claims.refuse`: a one-time marker in
   its headers, and the thread), and the claiming transport, put around the clients the
   call can go out on, raises :class:`~.claiming.UngatedCallRefused` in place of sending it.
   A closed gate that litellm still calls after the last gate put the process back (closed
   by another thread after the call's set-up, or in a call's own ``callbacks=``) takes the
   installation back for that one refusal, and gives it back once the refusal is settled
   (:func:`_hold`). Only if no claiming transport can be put in place at all (litellm's
   own code fails to build its client) does the hook raise the last resort,
   :class:`~.claiming.SyncCallStopped`, a ``BaseException`` that carries the refusal.
3. **``log_post_api_call``** (after the response headers, before litellm hands anything
   of the answer over). An armed or refused request that never reached a claiming
   transport went out through a client the gate never saw: the answer litellm holds for
   it is turned, in place, into the refusal (:func:`~.claiming.check_claimed`), which
   raises :class:`~.claiming.UngatedCallRefused` where litellm first reads it.
   :func:`log_failure_event` forgets a failed call's claim.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

import litellm

from ...core.decision.attempt import Attempt
from ...core.errors import RouteNotGated, ToolGateError
from ..calltypes import (
    SYNC,
    Handling,
    builds_whole_client,
    handling,
    in_messages_entry_point,
    sync_route_refused,
    sync_route_sdk,
)
from ..guardrail import decisionlog
from ..guardrail.deciders import GateGuardrail, admit, registered_gates, selected
from ..guardrail.deciders import call_type as _call_type
from ..guardrail.taps import new_tap
from ..httpwithhold import Withholding
from ..logs import emit_records, logger
from ..parsers import chat_chunk_check, client_parse, responses_event_check
from ..routes import Api, replays, route_for
from ..seam import privates
from ..seam.symbols import HTTPHandler, whole_call_timeout
from . import asyncclaim, claiming
from .claiming import (
    CLAIMS,
    MARKER,
    SyncCallStopped,
    UngatedCallRefused,
    arm,
    call_handlers,
    check_claimed,
    claim_held_clients,
    claim_http_handlers,
    forget_claim,
    is_vouched,
    is_vouched_client,
    logged_body,
    parses_whole_first,
    reads_whole_first,
    sent,
)
from .custom import CustomProviderRefused
from .refusal import AsyncCallStopped
from .sdkclaim import arm_sdk, claim_sdk_clients, claim_whole_client
from .sdkclaim import streamed as sdk_streamed


def _api(kind: str) -> Api:
    return Api.RESPONSES if kind == "responses" else Api.CHAT


def sync_refusal(kind: str, route: str, streamed: bool, *, client_given: bool) -> str | None:
    """Why a sync call under the callback must not be sent although its route is gated, or
    None when it can be claimed.

    Each rule names a sync call the gate could not hand a quarantine to the caller for. They
    are asked at call set-up (from the call's arguments) and again in ``log_pre_api_call``
    (from the request litellm is about to send); the route table itself is applied by
    :func:`~..guardrail.deciders.admit`, as for async calls. ``client_given``: the call's
    set-up gave it a claimed ``client=`` (:func:`_give_whole_client`).
    """
    if sync_route_refused(route, kind):
        return (
            f"a sync litellm.{kind} on the {route}/ route goes out through a client the "
            f"gate cannot claim under litellm.callbacks; it was not sent. Use "
            f"ToolGate.{kind}(...) or litellm.a{kind}(...)"
        )
    if builds_whole_client(route, streamed) and not client_given:
        return (
            f"a sync whole (stream=False) litellm.{kind} on the {route}/ route goes out "
            f"through an HTTP client litellm builds for that call alone; the gate builds it "
            f"for the call at its set-up only when the gate is in litellm.callbacks; it was "
            f"not sent. Put the gate in litellm.callbacks, or use ToolGate.{kind}(...), "
            f"litellm.a{kind}(...) or stream=True"
        )
    if streamed and kind != "responses" and in_messages_entry_point():
        # litellm's sync Messages adapter on the chat bridge ends the stream quietly on any
        # exception. On the Responses bridge (its inner call a sync litellm.responses) litellm
        # hands back its async Messages iterator, which reads the claimed wire on worker
        # threads and turns a quarantine into its stream's error event, as on acreate: gated.
        return (
            "a sync litellm.anthropic.messages.create(stream=True) on a model litellm "
            "bridges to chat ends its stream quietly on any error, so a quarantine could "
            "not reach you; it was not sent. Use litellm.anthropic.messages.acreate(...) or "
            "ToolGate.messages(...)"
        )
    return None


def _provider(kwargs: Mapping[str, Any], model: str) -> tuple[str, str] | None:
    """The call's model and provider as litellm tells them, or None. Asked on every call, from many
    threads at once: unlike :func:`provider_of` it leaves ``sys.stdout`` alone (litellm
    prints its provider list when it cannot tell, as it would a moment later without the
    gate)."""
    try:
        name, provider, _, _ = litellm.get_llm_provider(
            model=model,
            custom_llm_provider=kwargs.get("custom_llm_provider"),
            api_base=kwargs.get("api_base"),
            api_key=kwargs.get("api_key"),
        )
    except Exception:
        return None
    return (str(name), str(provider)) if provider else None


def _claim_own_client(client: Any) -> None:
    """Put a claiming transport around the httpx client under a ``client=`` of the caller's
    (litellm's ``HTTPHandler``, an ``openai.OpenAI``), in place; refuse one it cannot."""
    inner = getattr(client, "client", None)  # litellm's HTTPHandler
    if inner is None:
        inner = privates.sdk_http_client(client)  # the OpenAI SDK's clients
    if not claiming.INSTALLATION.claim_client(inner):
        raise UngatedCallRefused(
            f"a sync call's client= ({type(client).__name__}) is not one whose HTTP client "
            "the gate can claim; it was not sent. Pass no client, or use ToolGate"
        )


def at_call_setup(gate: GateGuardrail, kind: str, kwargs: Mapping[str, Any]) -> None:
    """Refuse, from litellm's call set-up (``kind`` and ``kwargs``, read by
    :func:`~..seam.frames.call_setup`), a sync model-turn call its arguments already condemn;
    claim a ``client=`` of the caller's (see the module docstring). The first registered
    gate answers for all.
    """
    if kind not in SYNC:
        return  # an async call: its pre-call hook refuses it, with the deployment's model
    gates = registered_gates()
    if all(g is not gate for g in gates[:1]):
        return  # the first registered gate answers for all
    if any(g.__dict__.get("_closed", False) for g in gates):
        raise UngatedCallRefused(
            "this toolgate gate was closed; it gates no more sync calls (take it out of "
            "litellm.callbacks); this call was not sent"
        )
    if not any(selected(g, kwargs) for g in gates):
        return
    if is_vouched(str(kwargs.get("litellm_call_id") or "")):
        return
    model = kwargs.get("model")
    if not isinstance(model, str) or not model:
        return
    resolved = _provider(kwargs, model)
    if resolved is None:
        raise RouteNotGated(model, _api(kind).value, "litellm cannot tell this model's provider")
    name, provider = resolved
    if any(
        isinstance(entry, dict) and entry.get("provider") == provider
        for entry in list(getattr(litellm, "custom_provider_map", None) or ())
    ):
        raise CustomProviderRefused(provider)  # shadowed too (see .custom): refused here first
    streamed = bool(kwargs.get("stream"))
    where = {
        "model": name if name.startswith(f"{provider}/") else f"{provider}/{name}",
        "custom_llm_provider": provider,
        "api_base": kwargs.get("api_base"),
        "stream": streamed,
    }
    # The route table, as the async hook and log_pre_api_call apply it: refused here, where
    # the refusal reaches the caller as it is (raised inside litellm's request, a provider's
    # error handling would wrap it).
    refusal: str | None = None
    try:
        route_for(where, _api(kind), callback=True)
    except RouteNotGated as not_gated:
        refusal = str(not_gated)
    if refusal is not None:
        raise UngatedCallRefused(refusal)
    # A sync whole call litellm would send through a client it builds for that call alone
    # is given one here (or keeps the caller's): the gate claims it below.
    fresh = builds_whole_client(provider, streamed)
    refusal = sync_refusal(kind, provider, streamed, client_given=fresh)
    if refusal is not None:
        raise UngatedCallRefused(refusal)
    client = kwargs.get("client")
    if fresh and client is None:
        client = _give_whole_client(kwargs, provider, kind)
    if client is not None and not is_vouched_client(client):
        _claim_own_client(client)
    if fresh:
        _GIVEN.call_id = str(kwargs.get("litellm_call_id") or "")


class _Given(threading.local):
    """The call (its litellm call id) whose set-up on this thread gave it a claimed client
    for a whole call (:func:`_give_whole_client`); ``log_pre_api_call`` of the same call,
    on the same thread, takes it."""

    call_id = ""


_GIVEN = _Given()


def _client_given(call_id: str) -> bool:
    """Whether the set-up of ``call_id`` gave it its claimed client (asked once)."""
    given = bool(call_id) and _GIVEN.call_id == call_id
    _GIVEN.call_id = ""
    return given


def _give_whole_client(kwargs: Mapping[str, Any], provider: str, kind: str) -> Any:
    """Put into the call's arguments the client litellm's handler would build for this sync
    whole call alone (watsonx/: ``HTTPHandler(timeout=...)`` with the call's timeout as
    litellm's ``completion`` resolves it), so that the gate can claim it. The arguments
    read at set-up are the very ones litellm then calls its function with."""
    if not isinstance(kwargs, MutableMapping):
        raise UngatedCallRefused(_FRESH_REFUSAL.format(provider=provider, kind=kind))
    try:
        client = HTTPHandler(timeout=whole_call_timeout(kwargs, provider))
    except Exception:
        raise UngatedCallRefused(_FRESH_REFUSAL.format(provider=provider, kind=kind)) from None
    kwargs["client"] = client
    return client


_FRESH_REFUSAL = (
    "a sync whole (stream=False) litellm.{kind} on the {provider}/ route goes out through an "
    "HTTP client litellm builds for that call alone, and the gate could not build the same "
    "one to claim; it was not sent. Use ToolGate.{kind}(...), litellm.a{kind}(...) or "
    "stream=True"
)


def log_pre_api_call(gate: GateGuardrail, kwargs: Any) -> None:
    """Arm a sync call, or hold its refusal for its request (see the module docstring).

    Never raises an ``Exception``: litellm would log it and send the call anyway. A call
    the gate failed to check or arm is refused, never sent unclaimed.
    """
    if not isinstance(kwargs, Mapping):
        return
    # Every call of this thread starts here: a refusal an earlier call left is void.
    asyncclaim.void_stale(str(kwargs.get("litellm_call_id") or ""))
    stale = CLAIMS.refusal_here()
    if stale is not None and stale.call_id != str(kwargs.get("litellm_call_id") or ""):
        CLAIMS.settle(stale.call_id)
        stale.settled()
    refusal: str | None = None
    try:
        if not gate._closed:  # a custom provider registered since: its sync turns refused
            claiming.INSTALLATION.custom.refuse()
        _arm_sync(gate, kwargs)
    except ToolGateError as refused:
        refusal = str(refused)  # each says that the call was not sent
    except Exception:
        refusal = "toolgate could not prepare this call to be gated; it was not sent"
    if (
        refusal is not None
        and _call_type(kwargs.get("call_type")) not in SYNC
        and not registered_gates()
    ):
        # An async call of a gate handed to it in its callbacks= (.asyncclaim): no hook of
        # the gate's refuses it before it is sent, and no transport holds a refusal for it.
        raise AsyncCallStopped(refusal)
    if refusal is not None:
        _hold(kwargs, refusal)


def _hold(kwargs: Mapping[str, Any], message: str) -> None:
    """Hold a refusal for the call's request: the claiming transport, put around every
    client the call can go out on, raises it in place of sending the request.

    The refusal keeps the installation in place until it is settled (delivered by the
    transport, checked after the headers, forgotten with a failed call, or voided by the
    thread's next call). So a closed gate that litellm still calls after the last gate put
    the process back (closed by another thread after the call's set-up, or handed to litellm
    in a call's own ``callbacks=``) takes the installation back for this refusal alone: the
    clients are wrapped again, and given back once the refusal is settled."""
    lease: Callable[[], None] | None = None
    try:
        lease = claiming.INSTALLATION.acquire()  # kept until the refusal is settled
        claim_http_handlers(*call_handlers(kwargs))
        claim_sdk_clients()
        claim_held_clients()
        claim_whole_client()
        url = sent(kwargs, "api_base")
        read_first = isinstance(url, str) and reads_whole_first(url)
        parsed_first = isinstance(url, str) and parses_whole_first(url)
        token = CLAIMS.refuse(
            kwargs, message, release=lease, read_first=read_first, parsed_first=parsed_first
        )
    except Exception:
        if lease is not None:
            lease()
        stopped = True
    else:
        stopped = False
    if stopped:
        # No claiming transport could be put in place (litellm's own code failed to build
        # its client): the last resort.
        raise SyncCallStopped(message)
    headers = sent(kwargs, "headers")
    if isinstance(headers, MutableMapping):
        headers[MARKER] = token
    # Otherwise (and on the SDK routes, whose logged headers are not what is sent) the
    # request carries no marker: the transport refuses it as this thread's held refusal.


def _arm_sync(gate: GateGuardrail, kwargs: Mapping[str, Any]) -> None:
    """Refuse a sync call the gate cannot gate, or arm it to be claimed (see sync.claiming)."""
    kind = _call_type(kwargs.get("call_type"))
    if gate._closed and kind in SYNC:
        gates = registered_gates()
        if gates and all(g is not gate for g in gates):
            return  # closed and replaced: the registered gate decides
        raise UngatedCallRefused("this toolgate gate was closed; it gates no more calls")
    # Not in litellm.callbacks, and litellm still runs it (see docs/callbacks.md): said once.
    if handling(kind) is not Handling.NOT_A_MODEL_TURN and not registered_gates():
        _warn_unregistered(gate)
    asynchronous = kind not in SYNC
    if handling(kind) is Handling.GATED and asynchronous:
        if registered_gates():
            return  # an async call: armed by the async hook (gates in litellm.callbacks)
        # A gate handed to the call in its callbacks=: no hook of it runs before the request
        # but this one; the call is claimed on the wire (.asyncclaim), unless vouched for.
        if asyncclaim.holds_vouched_client():
            return
    call_id = str(kwargs.get("litellm_call_id") or "")
    route = str(kwargs.get("custom_llm_provider") or "")
    # The logging kwargs name the model without its provider: the route (and so its
    # profile) is the provider's.
    model = str(kwargs.get("model") or "")
    if route and not model.startswith(f"{route}/"):
        model = f"{route}/{model}"
    body = logged_body(kwargs)
    streamed = bool(kwargs.get("stream")) or bool(isinstance(body, Mapping) and body.get("stream"))
    if sync_route_sdk(route, kind):
        # The wire's own answer: the body the SDK sends. litellm fakes the stream of a model
        # that has none (Azure's o-series) from a whole answer it asked for: judged whole,
        # before litellm makes chunks of it.
        streamed = sdk_streamed(kwargs)
    # litellm's standard logging of a sync call reads the metadata of its litellm_params.
    params = kwargs.get("litellm_params")
    request: dict[str, Any] = params if isinstance(params, dict) else {}
    where = {
        "model": model if route else None,
        "custom_llm_provider": route or None,
        "api_base": request.get("api_base"),
        "stream": streamed,
        # The deployment's base_model, as litellm's completion reads it (the Vertex API a
        # model goes to may follow it).
        "base_model": request.get("base_model") or kwargs.get("base_model"),
        "model_info": request.get("model_info") or kwargs.get("model_info"),
    }
    admitted = admit(gate, kind, request, where, vouched=is_vouched(call_id))
    if admitted is None:
        return
    deciding = admitted.gate
    if replays(where, admitted.api, admitted.route):
        # litellm asks for a whole Responses result and replays it as the stream: the wire
        # is that whole body (litellm logged it without "stream").
        streamed = False
    refusal = (
        None
        if asynchronous
        else sync_refusal(kind, route, streamed, client_given=_client_given(call_id))
    )
    if refusal is not None:
        raise UngatedCallRefused(refusal)
    # The call's own tools as the caller passed them (litellm's logging kwargs keep them), as
    # the async hook reads them; the body's only failing that: on Converse, Gemini and
    # Anthropic the body carries them in the provider's shape (Converse: under toolConfig).
    tools = kwargs.get("tools")
    if tools is None and isinstance(body, Mapping):
        tools = body.get("tools")
    tap = new_tap(
        deciding,
        kind,
        tools=tools,
        model=model,
        streamed=streamed,
        body=body if isinstance(body, Mapping) else None,
    )
    if tap.refused:
        emit_records(tap.attempt)
        decisionlog.report(gate, request, tap.attempt, time.time())
        fault = tap.attempt.quarantined
        if asynchronous:
            raise AsyncCallStopped(f"{fault}; this async call was not sent")
        raise UngatedCallRefused(f"{fault}; this sync call was not sent")
    started = time.time()

    def report(attempt: Attempt) -> None:
        decisionlog.report(gate, request, attempt, started)

    holding = Withholding(
        deciding.policy,
        report,
        whole_here=True,
        retry_stream_faults=gate.retry_stream_faults,
        chunk_check=chat_chunk_check(
            str(kwargs.get("model", "")), kwargs.get("custom_llm_provider") or None
        ),
        event_check=responses_event_check(model) if tap.responses_api else None,
        # An async call: a whole body judged while litellm's request reads it (no later
        # hook of a per-call gate runs to judge litellm's result).
        in_read=(lambda url: True) if asynchronous else None,
        parse=client_parse(
            str(kwargs.get("model", "")),
            kwargs.get("custom_llm_provider") or None,
            responses_api=tap.responses_api,
            messages_api=tap.messages_api,
            functions=bool((kwargs.get("optional_params") or {}).get("functions")),
            tools=tools,
        ),
        # On litellm's Responses bridge, calls sent without an id go out under the gate's
        # identity of them, which litellm keeps (Gemini's wire).
        identify=tap.responses_api,
    )
    if asynchronous:
        asyncclaim.arm(kwargs, tap, holding)
    elif sync_route_sdk(route, kind):
        arm_sdk(kwargs, route, tap, holding)
    else:
        arm(kwargs, tap, holding)


def _warn_unregistered(gate: GateGuardrail) -> None:
    """Say once per gate what it cannot gate from outside ``litellm.callbacks``: handed to
    calls in their own ``callbacks=`` (async calls and cache hits pass it), or taken out of
    ``litellm.callbacks`` while litellm keeps calling it (it gates nothing)."""
    if gate.__dict__.get("_warned_unregistered", False):
        return
    gate.__dict__["_warned_unregistered"] = True
    name = gate.__dict__.get("guardrail_name")
    if gate.__dict__.get("_registered", False):
        logger.warning(
            "toolgate: gate %r was in litellm.callbacks and is no longer there, while litellm "
            "goes on making model calls: it gates none of them. Something replaced "
            "litellm.callbacks (some frameworks reset it when they are set up, e.g. creating "
            "a crewai.LLM); put the gate back in litellm.callbacks after that",
            name,
        )
        return
    logger.warning(
        "toolgate: gate %r was handed to a litellm call in its own callbacks= and is not in "
        "litellm.callbacks: litellm runs only its logging hooks, and keeps running them for "
        "every later call. Sync calls and async openai/ calls are gated on the wire; async "
        "model turns on other routes are refused unsent (AsyncCallStopped); its cache reads "
        "answer miss. Put the gate in litellm.callbacks, or use ToolGate",
        name,
    )


def log_post_api_call(kwargs: Any) -> None:
    """After the response headers: the call's request was claimed, or refused, by a
    claiming transport (see :func:`~.claiming.check_claimed`)."""
    # Any call type: a refusal may be held for one the gate does not read.
    if isinstance(kwargs, Mapping):
        asyncclaim.check_taken(kwargs)
        check_claimed(kwargs)


def log_failure_event(kwargs: Any) -> None:
    """litellm runs it on the caller's thread once a sync call failed: its claim is done."""
    if isinstance(kwargs, Mapping):
        forget_claim(kwargs)


__all__ = [
    "SyncCallStopped",
    "at_call_setup",
    "log_failure_event",
    "log_post_api_call",
    "log_pre_api_call",
    "sync_refusal",
]
