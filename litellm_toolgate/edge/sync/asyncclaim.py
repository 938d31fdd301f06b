"""Async calls of a gate handed to a call in its own ``callbacks=``: claimed on the wire.

litellm runs no guardrail hook of a per-call callback (its ``async_pre_call_deployment_hook``
loops ``litellm.callbacks`` only), so such a gate cannot hand an async call a client of its
own. What litellm does run before the request is sent is the gate's ``log_pre_api_call``.
On the ``openai/`` route (:data:`CLAIMABLE`) litellm's async OpenAI SDK handler runs it
inside the call's own coroutines (its task's context), after it took the SDK client the
request goes out on. So, as the sync claim does (:mod:`.claiming`):

1. **Wrap, in place** (:func:`claim_held_async_clients`): a :class:`AsyncClaimingTransport`
   around the transport (and each proxy mount) of every async httpx client the call holds
   (the locals of its frames up to litellm's async entry point). A request that is not
   claimed goes through the transport the client had, untouched.
2. **Arm** (:func:`arm`): the call's tap and withholding, held in a ``ContextVar`` of the
   call's task, with the URL litellm logged.
3. **Claim** (the transport): the first request of that task to that URL is sent through a
   :class:`~..httpwithhold.WithholdingTransport`: text passes live, tool calls wait for the
   wire's end, parse, schema and the policy; a whole body is judged while the SDK's request
   reads it, and a quarantine is raised there as one litellm's async OpenAI handler hands
   on as it is (:class:`~.refusal.AsyncThroughHandler`). A quarantine is a guardrail
   intervention, which litellm hands to the caller as it is. An answer that is not a
   success (a 429) is handed back unread and the claim stays takeable (the SDK's own
   retry); the call's request sent again after a success is refused unsent.
4. **Check** (:func:`check_taken`, from ``log_post_api_call``, before litellm hands
   anything over): a call armed and not claimed went out through a client the gate never
   saw; it ends in the last resort, :class:`~.refusal.AsyncCallStopped`.

Every other route's async model turns are refused unsent, from ``log_pre_api_call``, with
:class:`~.refusal.AsyncCallStopped` (a ``BaseException``: litellm drops any ``Exception`` a
logging hook raises): litellm's own HTTP routes (``cometapi/``, ``anthropic/``, ...) run
the hook in an executor thread, outside the call's task and event loop, and take their
client only after it, from a cache keyed by that loop. Every wrapped client gets its own
transports back when the last gate is closed.
"""

from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import httpx

from ..httpwithhold import Withholding, WithholdingTransport
from ..seam import frames as frames_of
from ..seam import privates
from ..transport import WireTap, _wrap
from .claiming import INSTALLATION, sent
from .refusal import AsyncCallStopped, AsyncThroughHandler, UngatedCallRefused, sdk_whole
from .vouching import is_vouched_client

CLAIMABLE = frozenset({"openai"})
"""The routes whose async calls a gate handed to them in ``callbacks=`` gates on the wire:
litellm's async OpenAI SDK chat handler takes its client before ``log_pre_api_call`` and
runs the hook in the call's own task (1.108.7, 1.110.2; checked streamed and whole). Every
other route's async model turns are refused unsent."""


@dataclass
class _Armed:
    call_id: str
    url: str
    tap: WireTap
    holding: Withholding
    taken: bool = False


_ARMED: ContextVar[_Armed | None] = ContextVar("toolgate_async_claim", default=None)


class AsyncClaimingTransport(httpx.AsyncBaseTransport):
    """Around an async httpx client's own transport: the request its task armed is gated,
    every other one is sent as the client would send it."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        armed = _ARMED.get()
        if armed is None or not _same_url(armed.url, request):
            return await self.inner.handle_async_request(request)
        if armed.taken:
            # The call's request again, after its answer was read (litellm's async OpenAI
            # handler re-sends on an UnprocessableEntityError with drop_params): unsent.
            raise UngatedCallRefused(
                "a gated async call was sent again after its answer was gated; it was not sent"
            )
        armed.taken = True
        withholding = WithholdingTransport(self.inner, armed.tap, armed.holding)
        response = await withholding.handle_async_request(request)
        if response.status_code >= 400:
            armed.taken = False  # not a body the gate reads: the SDK's own retry is claimed
        if sdk_whole(request) and isinstance(response.stream, httpx.AsyncByteStream):
            # The OpenAI SDK reads a whole body inside its request: a quarantine raised
            # there as one litellm's SDK handler hands on as it is (as the sync claim does).
            return _wrap(response, AsyncThroughHandler(response.stream, request), request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def _same_url(url: str, request: httpx.Request) -> bool:
    """Whether ``request`` goes to the URL litellm logged (its full URL on litellm's HTTP
    routes; the SDK routes log their base URL, which the request's URL starts with)."""
    sent_to = str(request.url)
    if not url:
        return True  # the first request of the call's task after its log_pre_api_call
    return sent_to == url or sent_to.startswith(url.rstrip("/") + "/")


_lock = threading.RLock()
_wrapped: dict[int, tuple[weakref.ref[httpx.AsyncClient], AsyncClaimingTransport]] = {}


def _claim(client: Any) -> None:
    if not isinstance(client, httpx.AsyncClient) or client.is_closed:
        return
    with _lock:
        transport = privates.transport(client)
        if isinstance(transport, AsyncClaimingTransport):
            return
        wrapper = AsyncClaimingTransport(transport)
        mounts = {
            pattern: None if inner is None else AsyncClaimingTransport(inner)
            for pattern, inner in privates.mounts(client).items()
        }
        privates.set_transports(client, wrapper, mounts)
        key = id(client)

        def forget(_ref: object) -> None:
            with _lock:
                entry = _wrapped.get(key)
                if entry is not None and entry[0]() is None:
                    del _wrapped[key]

        _wrapped[key] = (weakref.ref(client, forget), wrapper)


def restore() -> None:
    """Give every wrapped client its own transports back (the last gate was closed)."""
    with _lock:
        for ref, wrapper in list(_wrapped.values()):
            client = ref()
            if client is None:
                continue
            current = privates.transport(client)
            privates.set_transports(
                client,
                wrapper.inner if current is wrapper else current,
                {
                    pattern: t.inner if isinstance(t, AsyncClaimingTransport) else t
                    for pattern, t in privates.mounts(client).items()
                },
            )
        _wrapped.clear()


INSTALLATION.on_restore.append(restore)


def _async_clients_in(value: Any, steps: int = 2) -> Iterator[httpx.AsyncClient]:
    if isinstance(value, httpx.AsyncClient):
        yield value
        return
    if steps <= 0:
        return
    for held in privates.held(value, privates.CLIENT_HOLDERS):
        yield from _async_clients_in(held, steps - 1)


def holds_vouched_client() -> bool:
    """Whether the call under way holds a client a gate vouched for (a :class:`ToolGate`'s
    own call, which that gate gates): found among the locals of its frames, up to litellm's
    entry point (the sync one, where litellm runs the hook in an executor thread, or the
    async one). litellm's logging kwargs do not carry the call's ``client=``."""
    frames, _entry = frames_of.call_frames(frames_of.caller())
    found = frames if _entry else frames_of.async_call_frames(frames_of.caller())
    return any(is_vouched_client(value) for value in frames_of.local_values(found))


def claim_held_async_clients() -> int:
    """Wrap the async clients the call already holds (the locals of its frames, from the
    hook up to litellm's async entry point); how many were found."""
    found = 0
    for value in frames_of.local_values(frames_of.async_call_frames(frames_of.caller())):
        for client in _async_clients_in(value):
            _claim(client)
            found += 1
    return found


def arm(kwargs: Mapping[str, Any], tap: WireTap, holding: Withholding) -> None:
    """Arm the async call of ``kwargs`` (its ``log_pre_api_call``) to be claimed on the wire,
    or refuse it unsent (:class:`AsyncCallStopped`) when the gate cannot claim it: when the
    call holds no async client yet (litellm's own HTTP routes, ``cometapi/``, ``anthropic/``
    ..., take theirs after this hook, from a cache keyed by the caller's event loop, and run
    this hook in an executor thread, outside that loop and the call's task)."""
    route = str(kwargs.get("custom_llm_provider") or "")
    if route not in CLAIMABLE or not claim_held_async_clients():
        raise AsyncCallStopped(
            "a gate handed to an async litellm call in its callbacks= (and not in "
            "litellm.callbacks) gates it only on the openai/ route; litellm sends this one "
            f"({route or 'unknown'}/) through a client the gate cannot claim, so it was "
            "refused and not sent. Put the gate in litellm.callbacks, or use ToolGate"
        )
    url = sent(kwargs, "api_base")
    armed = _Armed(
        str(kwargs.get("litellm_call_id") or ""), url if isinstance(url, str) else "", tap, holding
    )
    _ARMED.set(armed)


def void_stale(call_id: str) -> None:
    """A new call of this task starts: an arming an earlier one left is void."""
    armed = _ARMED.get()
    if armed is not None and armed.call_id != call_id:
        _ARMED.set(None)


def check_taken(kwargs: Mapping[str, Any]) -> None:
    """After the response headers: the armed call was claimed, or went out ungated.

    litellm's async chat routes also run ``log_post_api_call`` before anything was sent,
    with the coroutine that will send it as the response (``original_response`` in the
    hook's kwargs; ``cometapi/`` on 1.108.7 and 1.110.2): that one is not a check."""
    if inspect.isawaitable(kwargs.get("original_response")):
        return
    call_id = str(kwargs.get("litellm_call_id") or "")
    armed = _ARMED.get()
    if armed is None or armed.call_id != call_id:
        return
    _ARMED.set(None)
    if not armed.taken:
        raise AsyncCallStopped(
            "this async call went out through a client toolgate could not claim, so the gate "
            "handed to it in its callbacks= could not gate it; its answer was not handed "
            "over. Put the gate in litellm.callbacks, or use ToolGate"
        )


__all__ = [
    "AsyncClaimingTransport",
    "arm",
    "check_taken",
    "claim_held_async_clients",
    "restore",
    "void_stale",
]
