"""Sync calls under ``litellm.callbacks``: armed in ``log_pre_api_call``, claimed on the wire.

litellm gives a callback no sync hook that can change a request or stop a response: the
only sync hook that runs before a request is sent is ``log_pre_api_call`` (on the caller's
thread, with the call's id, its full URL, the body about to be sent and the very headers
dict that will be sent), and it swallows every ``Exception``. What the gate can change is
the transport under the HTTP client litellm is about to send on. So:

1. **Wrap, in place** (:class:`Installation`). Before an armed call is sent, the gate puts a
   :class:`ClaimingTransport` around the transport (and each proxy mount) of the httpx
   clients litellm will send it on: the handler litellm's HTTP routes take from its client
   cache for the call's ``ssl_verify`` (made now, with litellm's own code, when it is not
   there yet), the one a chat handler takes by the call's timeout, after the hooks
   (litellm's Anthropic handler on ``anthropic/`` and for Claude on ``vertex_ai/``, its
   Gemini handler for a whole call, its Converse handler: :func:`call_handlers`; made the
   same way, under the very key litellm's handler will ask for), every handler already in
   that cache, ``litellm.module_level_client``, and for
   the OpenAI SDK routes every cached sync SDK client and ``litellm.client_session``
   (:mod:`.sdkclaim`); and every httpx client litellm's call already holds, found among the
   locals of the call's frames (:func:`claim_held_clients`: litellm's Responses handler and
   the SDK routes take their client before the hooks run, and the cache may have evicted it
   since). Nothing else is touched, and nothing is replaced: a request that
   carries no marker goes through the transport the client already had, so a request the
   gate does not gate is sent exactly as litellm would send it (its own ``ssl_verify``,
   certificate, the environment's proxies, redirects, a ``litellm.sync_transport`` or
   ``client_session`` of the user's). Nothing changes until the first call that needs it;
   when the last gate is closed every wrapped client gets its own transports back.
2. **Arm** (``log_pre_api_call``). The call gets its attempt and a claim: the thread, the
   URL, a digest of the body (a JSON text litellm logged is read as JSON), and a one-time
   token put into the outgoing headers (the very mapping litellm logged and sends: a dict,
   or botocore's signed headers on Converse) under :data:`MARKER`.
3. **Claim** (the transport). A request carrying the marker is matched to its claim: same
   token, same thread, same URL, same body (the one litellm logged; on a streamed call,
   that body with ``"stream": true`` added matches too, since litellm's Anthropic chat
   handler sets the flag, in place, after logging it; no other change does). The marker is
   taken out before the request is sent, so the upstream never sees it. The response body
   then goes through the same withholding as the async path
   (:class:`~..httpwithhold.SyncWithholdingStream`): text passes live, tool calls wait for
   the wire's end, parse, schema and the policy; a whole body is judged on the wire before
   litellm reads any of it (where litellm would make an error of its own of anything raised
   at its first look, :func:`reads_whole_first`, and where the OpenAI SDK reads it inside
   its request, :func:`~.refusal.sdk_whole`: while litellm's request reads it, the
   quarantine raised right there). A marker without a matching claim is refused before the
   request is sent. An answer that is not a success (a 429, a 503) is handed back unread and the
   claim stays takeable, so the OpenAI SDK's own retry of the same request is claimed and
   gated like the first try.
4. **Check** (``log_post_api_call``, after the response headers, before litellm hands
   anything of the answer over). An armed or refused call whose request never reached a
   claiming transport went out through a client the gate never saw (litellm's cache evicted
   the wrapped one between arming and sending): the gate finds the httpx response litellm
   holds for it among the call's frames (:func:`answer_held`: the one whose request carries
   the call's marker) and turns it, in place, into the refusal
   (:func:`~.refusal.stop_response`): its connection is released unread, and
   :class:`UngatedCallRefused` is raised where litellm first reads it, which hands it to the
   caller as it is. A stream's body is never read; a whole body litellm already read to log
   it is dropped. Only if that response cannot be found (a litellm whose request code keeps
   it elsewhere) does the call end in the last resort, :class:`SyncCallStopped` (a
   ``BaseException``: nothing else leaves a logging hook).

A claimed request the upstream answers with a redirect is refused, not followed: the request
that follows it would carry no marker.

Refusals (nothing was observed, so they are not quarantines) are
:class:`UngatedCallRefused`, a :class:`~...core.errors.ToolGateError` and a guardrail
intervention. ``log_pre_api_call`` raises none (litellm would drop it and send the call): a
refused call is held (:meth:`_Claims.refuse`: its marker, its thread) and the claiming
transport answers its request unsent with a :class:`RefusedResponse`, which raises the
refusal where litellm first reads it (:mod:`.hooks`).

:class:`ToolGate`'s own sync calls carry a client of that gate's, which gates them itself:
the gate vouches for each one by its ``litellm_call_id`` and thread while litellm's call is
being made (:mod:`.vouching`), and the callback leaves exactly those calls alone.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..httpwithhold import HeldResponse, SyncWithholdingStream, Withholding
from ..seam import frames as frames_of
from ..seam import privates
from ..seam.symbols import HTTPHandler, _get_httpx_client
from ..transport import WireTap, _wrap
from .claims import ClaimTable, new_token
from .custom import CustomProviders
from .refusal import (
    RefusedResponse,
    SyncCallStopped,
    ThroughHandler,
    UngatedCallRefused,
    sdk_whole,
    stop_response,
)
from .vouching import is_vouched, is_vouched_client, vouch_client, vouched

MARKER = "x-toolgate-claim"
"""The one-time header that binds a sync request to the call that armed it (never sent)."""


def sent(kwargs: Mapping[str, Any], name: str) -> Any:
    """What litellm's ``log_pre_api_call`` kwargs say of the request about to be sent
    (``additional_args``: ``api_base``, ``headers``, ``complete_input_dict``), or None."""
    extra = kwargs.get("additional_args")
    return extra.get(name) if isinstance(extra, Mapping) else None


def logged_body(kwargs: Mapping[str, Any]) -> Any:
    """The body litellm's ``log_pre_api_call`` says it is about to send, as JSON values: the
    dict it logged, or the JSON text it logged parsed (litellm's Converse handler logs the
    string it sends); None when there is none, or the text is not JSON."""
    body = sent(kwargs, "complete_input_dict")
    if isinstance(body, (str, bytes)):
        try:
            return json.loads(body)
        except ValueError:
            return None
    return body


def body_digest(body: Any) -> str:
    """A digest of a JSON body, the same for the dict litellm logs and the bytes it sends."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass
class _Claim:
    token: str
    call_id: str
    thread: int
    url: str
    # The digests of the bodies that stand for the request litellm logged (see _Claims.arm).
    digests: frozenset[str]
    tap: WireTap
    gate: Withholding
    claimed: bool = field(default=False)
    # How the request's URL is checked (the exact URL, or an SDK route's base URL) and what
    # to undo once the request is claimed or the call is settled (see sdkclaim).
    url_matches: Callable[[httpx.URL], bool] | None = None
    restore: Callable[[], None] | None = None
    # The installation this claim keeps in place until it is settled (see _Claims).
    release: Callable[[], None] | None = None
    # litellm reads and parses this call's whole body inside its request code, before its
    # post-call hook (its Gemini handler): see reads_whole_first.
    read_first: bool = field(default=False)
    # litellm parses this call's whole body before its post-call hook, outside its request
    # code: see parses_whole_first.
    parsed_first: bool = field(default=False)

    def settled(self) -> None:
        if self.restore is not None:
            self.restore()
            self.restore = None
        if self.release is not None:
            self.release()
            self.release = None


@dataclass
class _Refusal:
    """A refused call, held until its request reaches a claiming transport (which raises
    :class:`UngatedCallRefused` in its place, before any byte is sent)."""

    token: str
    call_id: str
    thread: int
    message: str
    delivered: bool = field(default=False)
    # The installation this refusal keeps in place until it is settled (see _Claims).
    release: Callable[[], None] | None = None
    # As _Claim.read_first and _Claim.parsed_first.
    read_first: bool = field(default=False)
    parsed_first: bool = field(default=False)

    def settled(self) -> None:
        if self.release is not None:
            self.release()
            self.release = None


class _Claims(ClaimTable["_Claim | _Refusal"]):
    """Armed calls (see :class:`~.claims.ClaimTable`), each claimed at most once; a claim the
    table forgets on its own is settled (what it holds is given back).

    Each claim and each held refusal keeps the installation in place (a count of its own,
    :meth:`Installation.acquire`) from arming until it is settled: taken by the claiming
    transport, checked after the headers, forgotten with its failed call, or voided by its
    thread's next call. A gate closed meanwhile (by another thread, or after the last gate
    was closed) leaves the clients wrapped until then, so the request is claimed or refused
    on the wire, never sent unclaimed through a client the close just gave back."""

    def __init__(self) -> None:
        super().__init__(dropped=lambda claim: claim.settled())

    def arm(
        self,
        kwargs: Mapping[str, Any],
        tap: WireTap,
        gate: Withholding,
        *,
        url: str,
        body: Any,
        stream_flag: bool = False,
        url_matches: Callable[[httpx.URL], bool] | None = None,
        restore: Callable[[], None] | None = None,
        release: Callable[[], None] | None = None,
        read_first: bool = False,
        parsed_first: bool = False,
    ) -> str:
        """Arm one request of the call on this thread; the one-time marker it must carry.
        ``release`` is called once the claim is settled.

        The request must carry ``body``, the body litellm logged; with ``stream_flag`` (a
        streamed call), that body with ``"stream": true`` added stands for it as well, and
        nothing else does: litellm's Anthropic chat handler logs its body and only then
        sets the flag on it, in place, before sending it."""
        token = new_token()
        digests = {body_digest(body)}
        if stream_flag and isinstance(body, Mapping) and "stream" not in body:
            digests.add(body_digest({**body, "stream": True}))
        self.add(
            _Claim(
                token=token,
                call_id=str(kwargs.get("litellm_call_id") or ""),
                thread=threading.get_ident(),
                url=url,
                digests=frozenset(digests),
                tap=tap,
                gate=gate,
                url_matches=url_matches,
                restore=restore,
                release=release,
                read_first=read_first,
                parsed_first=parsed_first,
            )
        )
        return token

    def refuse(
        self,
        kwargs: Mapping[str, Any],
        message: str,
        *,
        release: Callable[[], None] | None = None,
        read_first: bool = False,
        parsed_first: bool = False,
    ) -> str:
        """Hold a refusal for the call on this thread; the one-time marker for its request
        (a request of this thread that carries none is refused as well). ``release`` is
        called once the refusal is settled."""
        token = new_token()
        self.add(
            _Refusal(
                token=token,
                call_id=str(kwargs.get("litellm_call_id") or ""),
                thread=threading.get_ident(),
                message=message,
                release=release,
                read_first=read_first,
                parsed_first=parsed_first,
            )
        )
        return token

    def refusal_here(self) -> _Refusal | None:
        """The refusal this thread holds, if any."""
        for claim in self.here():
            if isinstance(claim, _Refusal):
                return claim
        return None


CLAIMS = _Claims()


class ClaimingTransport(httpx.BaseTransport):
    """The transport the gate puts, in place, around one transport of an httpx client
    litellm sends on. A request without the marker goes to ``inner`` as it is."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        token = request.headers.get(MARKER)
        # A refusal of a request whose whole body litellm parses inside its request code
        # (see reads_whole_first) is raised while it reads the body: its parse would turn one
        # raised later into an error of its own.
        in_read = reads_whole_first(str(request.url))
        if token is None:
            held = CLAIMS.refusal_here()
            if held is None:
                # Not a model turn a gate armed (litellm's other sync calls): as litellm would.
                return self.inner.handle_request(request)
            # A refused call's request that lost (or never got) its marker: refused, and
            # the refusal is spent (nothing of it is left to refuse a later request).
            held.delivered = True
            CLAIMS.settle(held.call_id)
            held.settled()
            return RefusedResponse(request, held.message, in_read=in_read)
        del request.headers[MARKER]
        claim = CLAIMS.take(token)
        if isinstance(claim, _Refusal):
            claim.delivered = True
            claim.settled()
            return RefusedResponse(request, claim.message, in_read=in_read)
        if claim is None or not _matches(claim, request):
            if claim is not None:
                claim.settled()  # taken: nothing of it is claimed any more
            message = (
                "a sync request carried a toolgate claim that does not match the call that "
                "armed it; it was not sent"
            )
            return RefusedResponse(request, message, in_read=in_read)
        claim.claimed = True
        claim.settled()
        tap = claim.tap
        tap.prepare(request)
        try:
            response = self.inner.handle_request(request)
        except Exception:
            CLAIMS.settle(claim.call_id)  # failed: nothing more of this call is claimed
            # The exception's traceback keeps this frame, and a caller, a failure logger or an
            # error tracker may keep the exception: not the claim (its tap, its withholding).
            del claim, tap
            raise
        if response.has_redirect_location:
            # The client would follow it with a request that carries no marker, and the
            # answer to that one would reach the caller unread: not followed.
            response.close()
            CLAIMS.settle(claim.call_id)
            return RefusedResponse(
                request,
                "the upstream answered a gated sync call with a redirect; it was not "
                "followed and nothing of it was read (point api_base at the final URL)",
            )
        if not tap.bind(response, request):
            # Not a body the gate reads (a 429, a 503): handed back unread. The OpenAI SDK
            # may send the same request again (its own retries): claimed again then.
            if claim.url_matches is not None:
                CLAIMS.put_back(claim)
            return response
        assert isinstance(response.stream, httpx.SyncByteStream)
        through = sdk_whole(request)
        if tap.streamed or claim.read_first or through:
            # A stream; or a whole body litellm parses inside its request code, before its
            # post-call hook (see reads_whole_first), or the OpenAI SDK reads inside its
            # request (an SDK route's whole call): judged while litellm's request reads it,
            # a quarantine raised right there, before litellm has any of it (on an SDK
            # route, as an error litellm's SDK handler hands on as it is).
            body: httpx.SyncByteStream = SyncWithholdingStream(response.stream, tap, claim.gate)
            if through:
                body = ThroughHandler(body, request)
            return _wrap(response, body, request)
        whole = SyncWithholdingStream(response.stream, tap, claim.gate, defer=True)
        return HeldResponse(response, whole, request, claim.gate)

    def close(self) -> None:
        # The client this transport sits in is being closed: so is its own transport.
        self.inner.close()


def _matches(claim: _Claim, request: httpx.Request) -> bool:
    # The core's table gives a claim only to the thread that armed it.
    if claim.url_matches is not None:
        if not claim.url_matches(request.url):
            return False
    elif str(request.url) != claim.url:
        return False
    try:
        sent_body = json.loads(request.content)
    except ValueError:
        return False
    return body_digest(sent_body) in claim.digests


@dataclass
class _Wrapped:
    client: weakref.ref[httpx.Client]
    transport: ClaimingTransport
    mounts: dict[Any, ClaimingTransport | None]


class Installation:
    """What the gates changed in the process, shared by every gate, put back by the last.

    Gates are counted (:meth:`acquire`, :meth:`release`); the first armed call wraps the
    clients it needs (:meth:`claim_client`), and when the count drops to zero every client
    still alive gets back the transports it had. The sync methods of custom providers are
    shadowed by a refusal from the first gate on (:mod:`.custom`: litellm runs no hook for
    them), and given back with the rest.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._gates = 0
        self._wrapped: dict[int, _Wrapped] = {}
        self.custom = CustomProviders()
        # What else puts back what it changed when the last gate is closed (.asyncclaim).
        self.on_restore: list[Callable[[], None]] = []

    @property
    def gates(self) -> int:
        return self._gates

    @property
    def wrapped(self) -> int:
        """How many httpx clients carry a claiming transport now."""
        with self._lock:
            return len(self._wrapped)

    def acquire(self) -> Callable[[], None]:
        """Count one more gate; the function that releases it (once, however often it is
        called)."""
        with self._lock:
            self._gates += 1
            self.custom.refuse()
        done = threading.Event()

        def release() -> None:
            with self._lock:
                if done.is_set():
                    return
                done.set()
                self._gates -= 1
                if self._gates == 0:
                    self._restore()

        return release

    def claim_client(self, client: Any) -> bool:
        """Put a claiming transport around ``client``'s transport and proxy mounts, in place
        (once); False when it is not an httpx client the gate can wrap."""
        if not isinstance(client, httpx.Client) or client.is_closed:
            return False
        with self._lock:
            if self._gates <= 0:
                raise UngatedCallRefused(
                    "this toolgate gate was closed; it gates no more sync calls (take it "
                    "out of litellm.callbacks)"
                )
            transport = privates.transport(client)
            if isinstance(transport, ClaimingTransport):
                return True
            wrapper = ClaimingTransport(transport)
            mounts: dict[Any, ClaimingTransport | None] = {
                pattern: None if inner is None else ClaimingTransport(inner)
                for pattern, inner in privates.mounts(client).items()
            }
            privates.set_transports(client, wrapper, mounts)
            key = id(client)

            def forget(_ref: object) -> None:
                with self._lock:
                    entry = self._wrapped.get(key)
                    if entry is not None and entry.client() is None:
                        del self._wrapped[key]

            self._wrapped[key] = _Wrapped(weakref.ref(client, forget), wrapper, mounts)
            return True

    def _restore(self) -> None:
        self.custom.restore()
        for restore in self.on_restore:
            restore()
        for entry in list(self._wrapped.values()):
            client = entry.client()
            if client is None:
                continue
            current = privates.transport(client)
            privates.set_transports(
                client,
                entry.transport.inner if current is entry.transport else current,
                {
                    pattern: transport.inner
                    if isinstance(transport, ClaimingTransport)
                    else transport
                    for pattern, transport in privates.mounts(client).items()
                },
            )
        self._wrapped.clear()


INSTALLATION = Installation()


def _is_handler(value: Any) -> bool:
    return isinstance(value, HTTPHandler)


def reads_whole_first(url: str) -> bool:
    """Whether the whole body of a sync request to ``url`` is judged while litellm's request
    reads it, because litellm would make an error of its own of anything raised at a later
    read of it, and a refusal is raised there too:

    * Gemini's ``generateContent`` (not ``streamGenerateContent``), which litellm's Gemini
      handler (``gemini/``, and Gemini models on ``vertex_ai/``) parses inside a catch-all of
      its own, before its post-call hook;
    * Bedrock's whole ``/converse``, which litellm's Converse handler parses inside a
      catch-all of its own right after its post-call hook.

    litellm lets an exception raised in its request there through as it is. An answer that
    came back through a client the gate never saw cannot be turned into a refusal litellm
    hands over as it is either: it ends in the last resort (:func:`check_claimed`)."""
    path = urlsplit(url).path
    return path.endswith(_GEMINI_WHOLE) or path.endswith(_CONVERSE_WHOLE)


def parses_whole_first(url: str) -> bool:
    """Whether litellm parses the whole body of a sync request to ``url`` before its
    post-call hook, outside its request code: watsonx's whole chat (``.../text/chat``), whose
    body litellm's OpenAI-like handler parses (``OpenAILikeChatConfig._transform_response``:
    ``response.json()``, then ``post_call``; 1.108.7, 1.110.2). A claimed request is judged
    as litellm reads it, as usual; an answer that came back through a client the gate never
    saw cannot be stopped after the hook, since litellm holds it parsed: it ends in the last
    resort (:func:`check_claimed`)."""
    return urlsplit(url).path.endswith(_WATSONX_WHOLE)


def gemini_whole(url: str) -> bool:
    """Whether ``url`` is Gemini's whole ``generateContent`` (not ``streamGenerateContent``),
    whose body litellm's Gemini handler parses inside a catch-all of its own, on its sync and
    its async path alike (the async callback judges it while litellm's request reads it)."""
    return urlsplit(url).path.endswith(_GEMINI_WHOLE)


_GEMINI_WHOLE = ":generateContent"
_WATSONX_WHOLE = "/text/chat"
# Bedrock's Converse: .../model/<model>/converse (whole), .../converse-stream (streamed).
_CONVERSE = ("/converse", "/converse-stream")
_CONVERSE_WHOLE = "/converse"
# Claude on Vertex AI, whole: .../publishers/anthropic/models/<model>:rawPredict
_VERTEX_CLAUDE_WHOLE = ":rawPredict"


def call_handlers(kwargs: Mapping[str, Any]) -> tuple[Any, Mapping[str, Any] | None]:
    """What picks the sync handlers litellm's HTTP routes take for a call, from its
    ``log_pre_api_call`` kwargs: its ``ssl_verify``; and, on a route whose chat handler takes
    its client from litellm's cache by the call's timeout, after the hooks ran, the very
    ``params`` that handler passes litellm's ``get_httpx_client`` (None elsewhere):

    * litellm's Anthropic chat handler (``anthropic/``, and a whole Claude call on
      ``vertex_ai/``, sent to ``:rawPredict``): ``{"timeout": timeout}``;
    * litellm's Gemini handler for a whole call (``gemini/``, and a Gemini model on
      ``vertex_ai/``, sent to ``:generateContent``), and its Converse handler for any sync
      call (``bedrock/``, sent to ``/converse`` or ``/converse-stream``):
      ``{"timeout": httpx.Timeout(timeout)}`` for a number, the timeout as it is otherwise,
      ``{}`` without one.

    The timeout is the call's (its ``litellm_params``), the one litellm hands its handler."""
    params = kwargs.get("litellm_params")
    if not isinstance(params, Mapping):
        return None, None
    route = str(kwargs.get("custom_llm_provider") or "")
    url = sent(kwargs, "api_base")
    path = urlsplit(url).path if isinstance(url, str) else ""
    timeout = params.get("timeout")
    keyed: Mapping[str, Any] | None = None
    if route == "anthropic" or (route == "vertex_ai" and path.endswith(_VERTEX_CLAUDE_WHOLE)):
        keyed = {"timeout": timeout}
    elif (route in ("gemini", "vertex_ai") and path.endswith(_GEMINI_WHOLE)) or (
        route == "bedrock" and path.endswith(_CONVERSE)
    ):
        if isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            timeout = httpx.Timeout(timeout)
        keyed = {} if timeout is None else {"timeout": timeout}
    return params.get("ssl_verify"), keyed


def claim_http_handlers(ssl_verify: Any, keyed: Mapping[str, Any] | None = None) -> None:
    """Wrap the httpx clients under litellm's sync HTTP handlers: the one litellm's routes
    take for ``ssl_verify`` and, given ``keyed``, the one a chat handler takes by those
    ``params`` (see :func:`call_handlers`; each made now, with litellm's own code, under the
    very key litellm's handler will ask its cache for, if it is not cached yet), every other
    cached one, and ``litellm.module_level_client``."""
    handlers: list[Any] = [_get_httpx_client(params={"ssl_verify": ssl_verify})]
    if keyed is not None:
        handlers.append(_get_httpx_client(params=dict(keyed)))
    handlers.extend(value for _key, value in privates.cached_clients(_is_handler))
    handlers.append(privates.shared_sync_handler())
    for handler in handlers:
        if _is_handler(handler):
            INSTALLATION.claim_client(handler.client)


def arm(kwargs: Mapping[str, Any], tap: WireTap, gate: Withholding) -> None:
    """Arm one sync request of a call (see the module docstring); refuse what cannot be."""
    # The very headers litellm will send: a dict, or botocore's HeadersDict on Converse.
    headers = sent(kwargs, "headers")
    url = sent(kwargs, "api_base")
    body = logged_body(kwargs)
    if not isinstance(headers, MutableMapping) or not isinstance(url, str) or body is None:
        raise UngatedCallRefused(
            "this sync call's request is not visible to the gate; it was not sent"
        )
    lease = INSTALLATION.acquire()  # kept until the claim is settled (see _Claims)
    try:
        claim_http_handlers(*call_handlers(kwargs))
        kind = kwargs.get("call_type")
        if str(getattr(kind, "value", kind) or "") != "completion":
            # litellm's chat routes take their handler after the hooks (a client= of the
            # caller's is claimed at call set-up), and an unseen one is caught after the
            # headers; its Responses handler takes it before, and logs no post_api_call
            # for a stream: the client the call holds is claimed now.
            claim_held_clients()
        headers[MARKER] = CLAIMS.arm(
            kwargs,
            tap,
            gate,
            url=url,
            body=body,
            stream_flag=tap.streamed,
            release=lease,
            read_first=reads_whole_first(url),
            parsed_first=parses_whole_first(url),
        )
    except BaseException:
        lease()
        raise


def forget_claim(kwargs: Mapping[str, Any]) -> None:
    """The call failed (litellm's sync failure logging, on the caller's thread): its claim,
    if any is left, is forgotten."""
    claim = CLAIMS.settle(str(kwargs.get("litellm_call_id") or ""))
    if claim is not None:
        claim.settled()


def check_claimed(kwargs: Mapping[str, Any]) -> None:
    """After the response headers: the armed request must have been claimed, a refused one
    refused by a claiming transport. If not, it went out through a client the gate never
    saw: the answer litellm holds is turned into the refusal before litellm reads it
    (:func:`~.refusal.stop_response`), so :class:`UngatedCallRefused` reaches the caller
    where litellm first reads it. Only if that answer is not to be found does the call end
    in the last resort, :class:`SyncCallStopped`."""
    claim = CLAIMS.settle(str(kwargs.get("litellm_call_id") or ""))
    if claim is None:
        return
    headers = sent(kwargs, "headers")
    if isinstance(headers, MutableMapping):
        headers.pop(MARKER, None)
    claim.settled()
    # What the gate knows: the request never reached a claiming transport. Where litellm
    # holds an httpx response for it, it went out through a client the gate cannot see;
    # where none is found, litellm may as well have answered it without any request.
    if isinstance(claim, _Refusal):
        if claim.delivered:
            return
        why = f"toolgate refused this sync call ({_without_unsent(claim.message)})"
        sent_unseen = (
            f"{why}, but litellm sent it through an HTTP client the gate cannot see; its "
            "answer was stopped before it was handed over"
        )
    elif claim.claimed:
        return
    else:
        why = "toolgate armed this sync call to gate it"
        sent_unseen = (
            "this sync call went out through an HTTP client the gate cannot see (litellm's "
            "client cache replaced the one the gate claimed); its answer was stopped before "
            "it was handed over"
        )
    unseen = (
        f"{why}, but its request never reached a client the gate claimed: litellm answered "
        "it by a way the gate cannot see (an HTTP client the gate did not claim, or no "
        "request at all), and that answer was stopped before it was handed over"
    )
    try:
        response = answer_held(claim.token)
        if response is not None:
            stop_response(response, sent_unseen)
            if not (claim.read_first or claim.parsed_first):
                return
            unseen = sent_unseen
    except Exception:
        pass  # litellm would drop it and hand the answer over: the last resort below
    # Not found; or (read_first, parsed_first) litellm parsed the whole body before this
    # hook, so what it would hand over no longer reads the answer: the last resort.
    if isinstance(kwargs, MutableMapping) and "original_response" in kwargs:
        # These are litellm's logging details for the call: the stopped answer's body is not
        # kept there for a logger, nor for a traceback showing the logging object.
        kwargs["original_response"] = STOPPED_ANSWER
    raise SyncCallStopped(unseen)


STOPPED_ANSWER = "toolgate: this answer was stopped unseen (SyncCallStopped)"
"""What litellm's logging details hold as the call's answer once it was stopped."""


# How a refusal's message says that its call was not sent: true where the claiming
# transport delivers it, not where the call's answer came another way (check_claimed).
_UNSENT = re.compile(
    r"(?:;\s*(?:it|this (?:sync )?call) was not sent|,? so it was refused before sending)"
)


def _without_unsent(message: str) -> str:
    """A refusal's message without its claim that the call was not sent."""
    return _UNSENT.sub("", message).strip()


_STEPS = 3


def answer_held(token: str) -> httpx.Response | None:
    """The httpx response litellm's call, on this thread, is about to read: found among the
    locals of the frames between this hook and litellm's entry point (directly, or as the
    response an SDK stream, a raw response or litellm's stream wrapper keeps). The one whose
    request carries the call's marker ``token``; failing that, the only one the call's own
    frames hold (only when litellm's entry point was found: above it, a response is not the
    call's); else None."""
    found: list[httpx.Response] = []
    frames, entry = frames_of.call_frames(frames_of.caller())
    for value in frames_of.local_values(frames):
        for candidate in _responses_in(value):
            if all(candidate is not known for known in found):
                found.append(candidate)
    for response in found:
        request = privates.request_of(response)
        if request is not None and request.headers.get(MARKER) == token:
            return response
    return found[0] if entry and len(found) == 1 else None


def claim_held_clients() -> None:
    """Wrap the httpx clients litellm's call already holds (found among the locals of the
    call's frames, from ``log_pre_api_call`` up to litellm's entry point): on the routes
    where litellm takes its client before the hooks run (its Responses handler, the OpenAI
    SDK routes), that is the client the request will go out on, even if litellm's cache
    evicted it before the gate swept the cache. Nothing when the entry point is not found."""
    frames, entry = frames_of.call_frames(frames_of.caller())
    if not entry:
        return
    for value in frames_of.local_values(frames):
        for client in _clients_in(value):
            INSTALLATION.claim_client(client)


def _clients_in(value: Any, steps: int = 2) -> Iterator[httpx.Client]:
    if isinstance(value, httpx.Client):
        yield value
        return
    if steps <= 0:
        return
    for held in privates.held(value, privates.CLIENT_HOLDERS):
        yield from _clients_in(held, steps - 1)


def _responses_in(value: Any, steps: int = _STEPS) -> Iterator[httpx.Response]:
    if isinstance(value, httpx.Response):
        yield value
        return
    if steps <= 0:
        return
    for held in privates.held(value, privates.RESPONSE_HOLDERS):
        yield from _responses_in(held, steps - 1)


__all__ = [
    "CLAIMS",
    "INSTALLATION",
    "MARKER",
    "RefusedResponse",
    "ClaimingTransport",
    "Installation",
    "SyncCallStopped",
    "UngatedCallRefused",
    "answer_held",
    "arm",
    "claim_held_clients",
    "check_claimed",
    "call_handlers",
    "claim_http_handlers",
    "forget_claim",
    "gemini_whole",
    "is_vouched",
    "is_vouched_client",
    "logged_body",
    "parses_whole_first",
    "reads_whole_first",
    "vouch_client",
    "vouched",
]
