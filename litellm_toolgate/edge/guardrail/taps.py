"""A gated call's tap, and the proxy's taps waiting between hooks.

Each call the callback gates gets an attempt and the :class:`WireTap` that binds it to the
call's HTTP responses (:func:`new_tap`). Outside the proxy the tap travels with the request
itself (the injected client is in the kwargs litellm hands the later hooks). Inside the proxy
those hooks get the proxy's own request, so the tap waits in :class:`Taps` between the
pre-call hook and the hook that consumes it, which removes it first thing. Its key is a random
token the gate writes into the request's metadata (which the proxy hands its later hooks),
never ``litellm_call_id``, which a client can set (``x-litellm-call-id``); a missing or
ambiguous key is refused, never merged (see :mod:`~..core.pending`). The proxy's failure hook
removes it when the request failed before that, and the table is bounded, so a path that
skips both can never grow it without end (an evicted request is refused, never passed).
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

from ...core.decision.pending import PendingTable
from ...core.wires.chat import choices_asked, request_fields_of
from ..calltypes import MESSAGES, RESPONSES
from ..gate import ToolGate
from ..routes import choices_kept_apart
from ..transport import WireTap

MAX_PENDING = 10_000
# Where the proxy keeps a request's metadata (chat; Responses and other routes).
_METADATA = ("metadata", "litellm_metadata")
_TOKEN = "toolgate_request"


def chat_request_fields(body: Mapping[str, Any]) -> dict[str, Any]:
    """The chat request fields the gate reads (``n``, ``tool_choice``), as the request will
    send them: the call's own, and over them any in its ``extra_body``, which the OpenAI SDK
    merges into the body it sends."""
    return request_fields_of(body)


def new_tap(
    gate: ToolGate,
    kind: str,
    *,
    tools: Any,
    model: str,
    streamed: bool,
    body: Mapping[str, Any] | None,
) -> WireTap:
    """The call's attempt and tap; the request's own fields are checked now (a chat
    request for ``n > 1``, at its top level or in its ``extra_body``, is refused here,
    unsent, the tap's quarantine, on a route whose choices litellm does not keep apart:
    :func:`..routes.choices_kept_apart`). In the proxy as outside it: the proxy hands its
    stream hook litellm's own chat stream, each choice's index kept on its chunks, and its
    success hook litellm's whole result of every choice, both read as ``ToolGate`` reads
    them (``docs/proxy.md``)."""
    tap = WireTap(gate.new_attempt(tools=tools, model=model), streamed=streamed)
    tap.policy = gate.policy
    tap.responses_api = kind in RESPONSES
    tap.messages_api = kind in MESSAGES
    if body is not None and not tap.responses_api and not tap.messages_api:
        fields = chat_request_fields(body)
        apart = choices_asked(fields) == 1 or choices_kept_apart(body, callback=True)
        tap.bind_request("/chat/completions", fields, choices_gated=apart)
    return tap


class Taps:
    """One gate's taps: those it made for async calls, and the proxy's waiting for a later
    hook. ``len()`` counts the waiting ones (the proxy requests in flight)."""

    def __init__(self) -> None:
        self._pending: PendingTable[WireTap] = PendingTable(_METADATA, _TOKEN)
        self._made: weakref.WeakSet[WireTap] = weakref.WeakSet()

    def __len__(self) -> int:
        return len(self._pending)

    def own(self, tap: WireTap) -> None:
        """Note ``tap`` as this gate's: a tap it did not make is a ``ToolGate``'s to decide."""
        self._made.add(tap)

    def owns(self, tap: WireTap) -> bool:
        return tap in self._made

    def remember(self, request: dict[str, Any], tap: WireTap) -> None:
        """Keep the tap for the proxy's later hooks, under a token of this gate's written into
        the request's metadata; a retried request's earlier tap is dropped."""
        self._pending.remember(request, tap, bound=MAX_PENDING)

    def take(self, request: Mapping[str, Any]) -> WireTap | None:
        """The request's tap, forgotten; None when there is none or the request is ambiguous."""
        return self._pending.take(request)


__all__ = ["MAX_PENDING", "Taps", "chat_request_fields", "new_tap"]
