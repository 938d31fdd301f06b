"""The stack frames of a litellm call, read here and nowhere else.

Where no hook of litellm's hands the gate what it needs, the gate reads it off the stack,
by the names of litellm's functions: the call type and arguments at litellm's call set-up,
the caching handler whose read is under way, the Messages entry point a sync call runs
under, the frames of a sync call up to litellm's entry point, and the logging objects of
the entry points a call runs under. Each reader answers None
or False when the frames are not as read from litellm 1.108.7 and 1.110.2, and every caller
takes that as "cannot tell", which refuses or falls back, never passes.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import Any

APPLIED = "get_applied_guardrails"
"""litellm's guardrail bookkeeping (``litellm.utils``), which reads ``default_on`` at the
start of every call, called from :data:`SETUP` with the call's arguments."""
SETUP = "function_setup"
"""litellm's call set-up (``litellm.utils``): its local ``original_function`` is the call."""
CACHING_HANDLER = "LLMCachingHandler"
"""litellm's caching handler (``litellm.caching.caching_handler``), whose method is on the
stack while it reads the cache; its ``original_function`` is the call."""
MESSAGES_HANDLER = "anthropic_messages_handler"
"""The function of litellm's Messages entry point that hands a call to a bridge or to the
native route (in the dispatching module of :data:`.symbols.MESSAGES_PACKAGES`)."""
ENTRY = "wrapper"
"""The function litellm's ``client`` decorator (``litellm.utils.client``) wraps each sync
entry point in: frames above it are not the call's own."""

AZURE_CHAT = ("AzureChatCompletion", "completion", "get_azure_openai_client")
"""litellm's Azure chat handler (``litellm.llms.azure.azure``: class, method) and the method
it takes a whole sync call's SDK client from, *after* ``log_pre_api_call`` (1.108.7,
1.110.2), with these locals of its own as the arguments:"""
AZURE_CLIENT_ARGS = ("api_key", "api_base", "api_version", "client", "litellm_params", "model")

ASYNC_ENTRY = "wrapper_async"
"""The function litellm's ``client`` decorator wraps each async entry point in (litellm
1.108.7, 1.110.2): frames above it are not the call's own."""
_CACHE_DEPTH = 16
_MESSAGES_DEPTH = 120
CALL_DEPTH = 64


def _in_litellm(frame: FrameType) -> bool:
    return str(frame.f_globals.get("__name__", "")).startswith("litellm.")


def caller(depth: int = 1) -> FrameType:
    """The frame ``depth`` calls above the one calling this."""
    return sys._getframe(depth + 1)


def caller_setup() -> tuple[str, Mapping[str, Any]] | None:
    """:func:`call_setup` of the frame that called the caller of this (``default_on``'s
    reader), in one call: litellm reads ``default_on`` several times per streamed chunk."""
    frame = sys._getframe(2)
    return None if frame.f_code.co_name != APPLIED else call_setup(frame)


def call_setup(frame: FrameType | None) -> tuple[str, Mapping[str, Any]] | None:
    """The call type and arguments of the call litellm is setting up, when ``frame`` (the
    caller of ``default_on``) is litellm's :data:`APPLIED` called from :data:`SETUP`; else
    None."""
    if frame is None or frame.f_code.co_name != APPLIED or not _in_litellm(frame):
        return None
    setup = frame.f_back
    if setup is None or setup.f_code.co_name != SETUP:
        return None
    kind = setup.f_locals.get("original_function")
    kwargs = frame.f_locals.get("kwargs")
    kind = str(getattr(kind, "value", kind) or "")
    if not kind or not isinstance(kwargs, Mapping):
        return None
    return kind, kwargs


def caching_call_type(frame: FrameType | None) -> str | None:
    """The call type of the litellm call whose cache read is under way at ``frame`` (found
    on litellm's :data:`CACHING_HANDLER` within a few frames), or None."""
    for _ in range(_CACHE_DEPTH):
        if frame is None:
            return None
        owner = frame.f_locals.get("self")
        if type(owner).__name__ == CACHING_HANDLER:
            name = getattr(getattr(owner, "original_function", None), "__name__", None)
            return name if isinstance(name, str) else None
        frame = frame.f_back
    return None


def under_messages_handler(frame: FrameType | None) -> bool:
    """Whether ``frame`` runs under litellm's :data:`MESSAGES_HANDLER`."""
    for _ in range(_MESSAGES_DEPTH):
        if frame is None:
            return False
        if frame.f_code.co_name == MESSAGES_HANDLER and _in_litellm(frame):
            return True
        frame = frame.f_back
    return False


def call_frames(start: FrameType | None) -> tuple[list[FrameType], bool]:
    """The frames from ``start`` up to litellm's :data:`ENTRY` of a sync call, at most
    :data:`CALL_DEPTH`; and whether that entry was found (above it, nothing is the call's
    own)."""
    frames: list[FrameType] = []
    frame = start
    while frame is not None and len(frames) < CALL_DEPTH:
        frames.append(frame)
        if frame.f_code.co_name == ENTRY and _in_litellm(frame):
            return frames, True
        frame = frame.f_back
    return frames, False


def async_call_frames(start: FrameType | None) -> list[FrameType]:
    """The frames of an async litellm call from ``start`` (a logging hook litellm runs
    inside the call's coroutines) up to litellm's :data:`ASYNC_ENTRY`, at most
    :data:`CALL_DEPTH`; empty when that entry is not found (nothing is known to be the
    call's own)."""
    frames: list[FrameType] = []
    frame = start
    while frame is not None and len(frames) < CALL_DEPTH:
        frames.append(frame)
        if frame.f_code.co_name == ASYNC_ENTRY and _in_litellm(frame):
            return frames
        frame = frame.f_back
    return []


def azure_whole_client(frames: list[FrameType]) -> Any:
    """The SDK client litellm's Azure chat handler (:data:`AZURE_CHAT`), found among
    ``frames``, will send its whole sync call on: made now by that handler's own method, with
    the very arguments it will pass a moment later (its locals), so litellm's client cache
    holds it under the key litellm asks for (a ``client=`` of the caller's is handed back as
    it is). None when no such frame is found. Raises what litellm's method raises (litellm's
    own call would fail the same way)."""
    handler, method, make = AZURE_CHAT
    for frame in frames:
        owner = frame.f_locals.get("self")
        if (
            frame.f_code.co_name == method
            and type(owner).__name__ == handler
            and _in_litellm(frame)
        ):
            found = frame.f_locals
            arguments = {name: found.get(name) for name in AZURE_CLIENT_ARGS}
            return getattr(owner, make)(_is_async=False, **arguments)
    return None


def entry_logging_objects(start: FrameType | None) -> list[Any]:
    """The logging object (local ``logging_obj``) of every litellm entry point
    (:data:`ENTRY`, :data:`ASYNC_ENTRY`) on the stack above ``start``, innermost first: a
    call litellm makes inside another (a bridge calling its chat entry point) has one of its
    own, and the outer one is the one that logs the answer the caller gets. Searched over at
    most ``4 * CALL_DEPTH`` frames; an async call's frames are its awaiting coroutines.
    Empty when none is found."""
    found: list[Any] = []
    frame = start
    for _ in range(4 * CALL_DEPTH):
        if frame is None:
            break
        if frame.f_code.co_name in (ENTRY, ASYNC_ENTRY) and _in_litellm(frame):
            logging_obj = frame.f_locals.get("logging_obj")
            if logging_obj is not None and all(logging_obj is not f for f in found):
                found.append(logging_obj)
        frame = frame.f_back
    return found


def local_values(frames: list[FrameType]) -> Iterator[Any]:
    """Every local value of ``frames``, innermost frame first (a snapshot of each)."""
    for frame in frames:
        yield from list(frame.f_locals.values())


def missing() -> list[str]:
    """The functions named above that the installed litellm no longer has where read."""
    import litellm.caching.caching_handler as caching
    from litellm import utils

    from .symbols import messages_module

    gone = []
    setup = getattr(utils, SETUP, None)
    if getattr(utils, APPLIED, None) is None or setup is None:
        gone.append(f"litellm.utils.{APPLIED} / {SETUP}")
    elif APPLIED not in inspect.getsource(setup):
        gone.append(f"litellm.utils.{SETUP} no longer calls {APPLIED}")
    if getattr(caching, CACHING_HANDLER, None) is None:
        gone.append(f"litellm.caching.caching_handler.{CACHING_HANDLER}")
    if getattr(messages_module("handler"), MESSAGES_HANDLER, None) is None:
        gone.append(f"litellm's Messages handler {MESSAGES_HANDLER}")
    client = getattr(utils, "client", None)
    if client is None or f"def {ENTRY}(" not in inspect.getsource(client):
        gone.append(f"litellm.utils.client's {ENTRY}")
    if client is None or f"def {ASYNC_ENTRY}(" not in inspect.getsource(client):
        gone.append(f"litellm.utils.client's {ASYNC_ENTRY}")
    if client is None or "logging_obj.success_handler" not in inspect.getsource(client):
        gone.append(f"litellm.utils.client's {ENTRY} local logging_obj")
    gone.extend(_missing_azure())
    return gone


def _missing_azure() -> list[str]:
    from litellm.llms.azure import azure

    handler, method, make = AZURE_CHAT
    owner = getattr(azure, handler, None)
    code = getattr(owner, method, None)
    maker = getattr(owner, make, None)
    if code is None or maker is None:
        return [f"litellm.llms.azure.azure.{handler}.{method} / {make}"]
    source = inspect.getsource(code)
    # The whole sync call logs its request (pre_call) before it takes its client.
    logged, taken = source.rfind("pre_call("), source.rfind(f"self.{make}(")
    parameters = inspect.signature(maker).parameters
    if not 0 <= logged < taken or not all(
        name in parameters and f"{name}={name}" in source[taken:] for name in AZURE_CLIENT_ARGS
    ):
        return [f"litellm's {handler}.{method} no longer takes its client as read"]
    return []


__all__ = [
    "azure_whole_client",
    "call_frames",
    "call_setup",
    "caller",
    "caching_call_type",
    "entry_logging_objects",
    "local_values",
    "missing",
    "under_messages_handler",
]
