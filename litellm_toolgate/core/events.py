"""The small vocabulary every wire protocol is normalized into.

A protocol normalizer (``chat.py`` for chat-completions SSE) turns each decoded SSE message
into zero or more of these events; the attempt machine (``attempt.py``) consumes them. The
events hold what the state machine needs and nothing more: argument fragments are carried
as opaque text and never interpreted before the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    """The upstream named its response (the chunk ``id``)."""

    response_id: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Visible text for the caller; counted, never buffered by the gate."""

    choice: int
    text: str


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A tool call was opened; its identity is pinned from here on."""

    choice: int
    index: int
    call_id: str
    name: str


@dataclass(frozen=True, slots=True)
class ArgumentDelta:
    """A fragment of a call's arguments, appended to that call's accumulator only."""

    choice: int
    index: int
    fragment: str


@dataclass(frozen=True, slots=True)
class Finish:
    """The upstream's own ``finish_reason`` for a choice."""

    choice: int
    finish_reason: str


@dataclass(frozen=True, slots=True)
class DoneMarker:
    """The ``data: [DONE]`` sentinel that closes an OpenAI-compatible chat stream."""


@dataclass(frozen=True, slots=True)
class Metadata:
    """A message that carries no choice content (usage, an empty delta): legal after the finish."""


@dataclass(frozen=True, slots=True)
class StreamError:
    """The upstream reported an error inside the stream. Only the error's type is kept."""

    error_type: str


@dataclass(frozen=True, slots=True)
class Unknown:
    """A named event this adapter does not define. Counted, never a reason to release."""

    event_type: str


WireEvent = (
    ResponseStarted
    | TextDelta
    | CallStarted
    | ArgumentDelta
    | Finish
    | DoneMarker
    | Metadata
    | StreamError
    | Unknown
)
