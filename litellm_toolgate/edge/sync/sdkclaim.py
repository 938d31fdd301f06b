"""Sync chat streams of the OpenAI SDK routes under ``litellm.callbacks``: claimed on the
OpenAI SDK client's http client.

On these routes litellm sends through an ``openai.OpenAI`` / ``AzureOpenAI`` client, whose
requests never meet ``litellm.sync_transport`` (:mod:`synccall`). The SDK client sits on
``litellm.client_session`` when one is set, and litellm builds and caches one per set of
settings *before* any hook of the call runs. So the claim moves one level up:

1. **Install.** When ``litellm.client_session`` is unset, the gate sets it to a
   :class:`ClaimingSession` of its own (as it sets ``litellm.sync_transport``): an
   ``httpx.Client`` with the session-level settings of the one litellm would have built for
   the SDK client (redirects followed, httpx's default headers, litellm's 600 s timeout; the
   SDK sets each request's timeout itself) on a :class:`~.synccall.ClaimingTransport` that sends as
   the client litellm builds would have (litellm builds it, with its own code: its TLS
   settings, http2, the environment's proxies). A session the user set is theirs: it is
   never rewritten, and sync calls on these routes are refused before sending while it is
   in place.
2. **Check** (``log_pre_api_call``). The SDK client the call holds was taken before the hook
   ran: from ``client=``, from litellm's cache, or built on the session. The cache is the
   one place the gate can see, so every cached sync SDK client that is not on a claiming
   session is dropped, and if there was one the call is refused unsent: it may be the very
   client this call is about to use (an Azure ``client=`` of the caller's, which litellm
   caches, or a client built before the gate was installed). Dropped clients are not closed
   here (litellm closes the ones it owns, later).
3. **Arm.** The one-time marker rides in a fresh ``extra_headers`` of litellm's request dict
   (the dict whose entries litellm hands the SDK; the logged headers are not what is sent on
   these routes), the claim keeps the SDK client's base URL and the body the SDK will send.
   The claiming transport takes the marker out, puts the caller's ``extra_headers`` back and
   withholds like every sync claim.
4. **Last line** (``log_post_api_call``, after the response headers, before any byte of the
   body is read). A call that went out on an SDK client the gate could not see (an
   ``openai/`` ``client=`` of the caller's: litellm neither caches nor reports it) was never
   claimed: it is refused there. Its marker did reach that upstream (a random token, no
   more).

A whole (non-streamed) response is refused before sending: the SDK reads that body inside
litellm's error handling, which would turn a quarantine into a retryable server error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import httpx
import litellm

from .claiming import CLAIMS, MARKER, ClaimingTransport, UngatedCallRefused, evict_cached, sent
from ..transport import WireTap
from ..withhold import Withholding

# The request dict's entries that the SDK turns into request options, not body fields.
_SDK_OPTIONS = ("extra_headers", "extra_query", "extra_body")
_ABSENT = object()
_UNSET_SESSION_TIMEOUT = httpx.Timeout(600.0, connect=5.0)


class ClaimingSession(httpx.Client):
    """The gate's ``litellm.client_session`` (see the module docstring)."""


def session() -> ClaimingSession:
    """A new claiming session; call it while ``litellm.client_session`` is unset.

    An unclaimed request goes out as it would have on the http client litellm builds for its
    sync OpenAI SDK clients when no session is set: litellm builds that client here, with its
    own code (its TLS settings, http2, redirects), and the claiming transport sends on the
    transport httpx picks from it for the request's URL (an environment proxy, or none).
    """
    from litellm.llms.openai.common_utils import BaseOpenAILLM

    built = BaseOpenAILLM.get_sync_http_client()
    if not isinstance(built, httpx.Client) or isinstance(built, ClaimingSession):
        raise UngatedCallRefused(
            "litellm did not build an httpx client for its OpenAI SDK clients; the gate "
            "cannot send as litellm would"
        )
    litellm_client: httpx.Client = built

    def sends_as(ssl_verify: Any = None) -> httpx.Client:
        return litellm_client  # that path reads no per-call ssl_verify

    # The SDK sets every request's timeout itself; litellm's one raw use of the session (Azure's
    # legacy image generation, through an HTTPHandler that then ignores its own timeout)
    # would otherwise get httpx's 5 s default instead of the 600 s litellm gives it unset.
    return ClaimingSession(
        transport=ClaimingTransport(None, sends_as),
        follow_redirects=True,
        timeout=_UNSET_SESSION_TIMEOUT,
    )


_install_lock = threading.Lock()


def install_session() -> object:
    """``litellm.client_session``: the gate's claiming one when none was set, else the user's."""
    with _install_lock:
        current: object = getattr(litellm, "client_session", None)
        if current is None:
            made = session()
            litellm.client_session = made
            current = made
        return current


def _on_claiming_session(client: Any) -> bool:
    return isinstance(getattr(client, "_client", None), ClaimingSession)


def evict_foreign_sdk_clients() -> int:
    """Drop litellm's cached sync SDK clients not on a claiming session; how many."""
    import openai

    return evict_cached(
        lambda _key, value: isinstance(value, openai.OpenAI) and not _on_claiming_session(value)
    )


def streamed(kwargs: Mapping[str, Any]) -> bool:
    """Whether the request litellm is about to send asks for a stream (its body says)."""
    data = sent(kwargs, "complete_input_dict")
    return isinstance(data, Mapping) and data.get("stream") is True


def _base_matcher(base: str) -> Callable[[httpx.URL], bool]:
    """Whether a request URL is on the SDK client's base URL and asks for chat completions."""
    root = httpx.URL(base)
    prefix = root.path.rstrip("/") + "/"

    def matches(url: httpx.URL) -> bool:
        return (
            (url.scheme, url.host, url.port) == (root.scheme, root.host, root.port)
            and url.path.startswith(prefix)
            and url.path.endswith("/chat/completions")
        )

    return matches


def arm_sdk(kwargs: Mapping[str, Any], route: str, tap: WireTap, gate: Withholding) -> None:
    """Check and arm one sync chat stream on an SDK route; refuse what cannot be claimed."""
    current = install_session()
    if not isinstance(current, ClaimingSession):
        raise UngatedCallRefused(
            f"litellm.client_session is an http client of your own: a sync litellm.completion "
            f"on the {route}/ route goes out through it, and the gate does not rewrite your "
            f"client to claim it; it was not sent. Use ToolGate.completion(...) or "
            f"litellm.acompletion(...), or leave litellm.client_session unset"
        )
    if evict_foreign_sdk_clients():
        raise UngatedCallRefused(
            f"litellm held an OpenAI SDK client for the {route}/ route that is not on the "
            f"gate's http client (a client= of your own, or one built before the gate was "
            f"installed), and this call may go out through it; it was not sent (the client "
            f"is dropped from litellm's cache: the next call without client= is gated)"
        )
    base, data = sent(kwargs, "api_base"), sent(kwargs, "complete_input_dict")
    url = str(base) if base is not None else ""
    headers = data.get("extra_headers", _ABSENT) if isinstance(data, dict) else None
    extra_body = data.get("extra_body") if isinstance(data, dict) else None
    if (
        not url.startswith(("http://", "https://"))
        or not isinstance(data, dict)
        or not (headers is _ABSENT or headers is None or isinstance(headers, Mapping))
        or not (extra_body is None or isinstance(extra_body, Mapping))
    ):
        raise UngatedCallRefused(
            "this sync call's request is not visible to the gate; it was not sent"
        )
    # What the SDK sends: the dict without its request options, with extra_body merged in.
    body = {k: v for k, v in data.items() if k not in _SDK_OPTIONS}
    body.update(extra_body or {})
    mine: dict[str, Any] = dict(headers) if isinstance(headers, Mapping) else {}
    mine.pop(MARKER, None)
    # Put back once claimed (never written to: the marker goes into a new dict); a marker a
    # re-armed call left there is not the caller's.
    original: object = headers
    if isinstance(headers, Mapping) and MARKER in headers:
        original = {k: v for k, v in headers.items() if k != MARKER}

    def restore() -> None:
        if original is _ABSENT:
            data.pop("extra_headers", None)
        else:
            data["extra_headers"] = original

    token = CLAIMS.arm(
        kwargs, tap, gate, url=url, body=body, url_matches=_base_matcher(url), restore=restore
    )
    # A new dict: the caller's own extra_headers never hold the marker.
    data["extra_headers"] = {**mine, MARKER: token}


__all__ = [
    "ClaimingSession",
    "arm_sdk",
    "evict_foreign_sdk_clients",
    "install_session",
    "session",
    "streamed",
]
