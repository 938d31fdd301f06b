"""Sync chat calls of the OpenAI SDK routes under ``litellm.callbacks``, streamed and whole:
claimed on the OpenAI SDK client's http client.

On these routes litellm sends through an ``openai.OpenAI`` / ``AzureOpenAI`` client, which
litellm builds (on ``litellm.client_session`` when one is set, else on an httpx client of
its own) and caches *before* any hook of the call runs. So:

1. **Wrap, in place** (``log_pre_api_call``). The httpx client under every cached sync SDK
   client, and ``litellm.client_session``, get a :class:`~.claiming.ClaimingTransport`
   around their own transports (see :class:`~.claiming.Installation`): the client the call
   holds is among them, whether litellm built it for this call, before the gate existed, or
   on a session of the user's; a request without the marker goes out as it would have.
2. **Arm.** The one-time marker rides in a fresh ``extra_headers`` of litellm's request dict
   (the dict whose entries litellm hands the SDK; the logged headers are not what is sent on
   these routes), the claim keeps the SDK client's base URL and the body the SDK will send.
   The claiming transport takes the marker out, puts the caller's ``extra_headers`` back and
   withholds like every sync claim. The SDK's own retries (after a 429 or a 503) resend the
   same marker, and are claimed again.
3. **Last line** (``log_post_api_call``, after the response headers, before any byte of the
   body is read). An ``openai/`` ``client=`` of the caller's (litellm neither caches nor
   reports it) is claimed at litellm's call set-up (:mod:`.hooks`); a call that still went
   out on an SDK client the gate never saw (one litellm held before its cache evicted it,
   so the gate's sweep missed it) was never claimed: the SDK stream's response, kept by
   litellm's stream wrapper, is turned into the refusal before its first byte is read
   (:func:`~.claiming.check_claimed`), and :class:`~.claiming.UngatedCallRefused` reaches
   the caller. Its marker did reach that upstream (a random token, no more).

A whole (non-streamed) response is judged while the SDK's request reads it (the SDK reads a
whole body inside its request, before litellm sees any of it), and a refusal is raised right
there, built so that litellm's SDK handler hands it on as it is
(:func:`~.refusal.through_openai_handler`): anything else raised there, litellm would wrap in
a retryable server error of its own. litellm's Azure handler takes the SDK client of a whole
call only *after* ``log_pre_api_call``: the gate makes it first, with litellm's own method
and the handler's own arguments, and claims it (:func:`claim_whole_client`). A whole answer
that still came through a client the gate never saw is already parsed when
``log_post_api_call`` runs: that call ends in the last resort,
:class:`~.claiming.SyncCallStopped`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import httpx
import litellm

from ..httpwithhold import Withholding
from ..seam import frames as frames_of
from ..seam import privates
from ..transport import WireTap
from . import claiming
from .claiming import CLAIMS, MARKER, UngatedCallRefused, sent

# The request dict's entries that the SDK turns into request options, not body fields.
_SDK_OPTIONS = ("extra_headers", "extra_query", "extra_body")
_ABSENT = object()


def _is_sync_sdk(value: Any) -> bool:
    import openai

    return isinstance(value, openai.OpenAI)


def claim_sdk_clients() -> None:
    """Wrap, in place, the httpx client under every cached sync SDK client, and
    ``litellm.client_session``."""
    installation = claiming.INSTALLATION
    for _key, client in privates.cached_clients(_is_sync_sdk):
        installation.claim_client(privates.sdk_http_client(client))
    installation.claim_client(getattr(litellm, "client_session", None))


def claim_whole_client() -> None:
    """Wrap the SDK client litellm's Azure chat handler takes for a whole sync call *after*
    ``log_pre_api_call``: made now, by litellm's own method with the handler's own arguments,
    so litellm finds it in its cache a moment later (see :mod:`..seam.frames`). Nothing
    on the other SDK routes: they take their client before the hooks
    (:func:`~.claiming.claim_held_clients` finds it)."""
    frames, entry = frames_of.call_frames(frames_of.caller())
    if not entry:
        return
    try:
        made = frames_of.azure_whole_client(frames)
    except Exception:
        return  # litellm's own call fails the same way, sending nothing
    if made is not None:
        claiming.INSTALLATION.claim_client(privates.sdk_http_client(made))


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
    """Arm one sync chat stream on an SDK route; refuse what cannot be claimed."""
    lease = claiming.INSTALLATION.acquire()  # kept until the claim is settled
    try:
        _arm_sdk(kwargs, tap, gate, lease)
    except BaseException:
        lease()
        raise


def _arm_sdk(
    kwargs: Mapping[str, Any], tap: WireTap, gate: Withholding, lease: Callable[[], None]
) -> None:
    claim_sdk_clients()
    claiming.claim_held_clients()  # the SDK client litellm holds, even if evicted since
    if not streamed(kwargs):
        claim_whole_client()  # the one litellm's Azure handler takes after the hooks
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
        kwargs,
        tap,
        gate,
        url=url,
        body=body,
        url_matches=_base_matcher(url),
        restore=restore,
        release=lease,
        # A whole body: the SDK reads it inside its request, and litellm parses it before
        # its post-call hook (see claiming.check_claimed).
        read_first=not streamed(kwargs),
    )
    # A new dict: the caller's own extra_headers never hold the marker.
    data["extra_headers"] = {**mine, MARKER: token}


__all__ = ["arm_sdk", "claim_sdk_clients", "claim_whole_client", "streamed"]
