"""The small vocabulary every wire protocol is normalized into.

A protocol normalizer (``wires/chat.py`` for chat-completions SSE, ``wires/responses.py``
for Responses SSE) turns each decoded SSE message into zero or more of these events; the
attempt machine (``attempt.py``, through ``ledger.py``) consumes them. The events hold what
the state machine needs and nothing more: argument text is carried opaque and never interpreted
before the terminal, and it is kept out of every ``repr``.

Chat streams use the first group only. A Responses stream adds the stages its protocol
declares for a function-call item (``ArgumentsDone``, ``ItemDone``) and its response-level
terminals (``ResponseCompleted`` with the output's calls, ``ResponseIncomplete``); there a
call's ``index`` is the item's ``output_index`` and ``item_id`` its output item id.

An Anthropic Messages stream (``wires/anthropic.py``) uses the first group with a call's
``index`` the content block's ``index``, ``message_stop`` as the ``DoneMarker``, the
``stop_reason`` as the ``Finish``, and one stage of its own: ``BlockStop``, a tool block's
``content_block_stop``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


def slot(choice: int, index: int, choices: int) -> int:
    """The attempt's key of tool index ``index`` of ``choice`` among ``choices`` choices: the
    tool index itself for one choice, and one distinct key per (choice, index) for several
    (a fault names a call by it)."""
    return index if choices == 1 else index * choices + choice


@dataclass(frozen=True, slots=True)
class ResponseStarted:
    """The upstream named its response (the chunk ``id``)."""

    response_id: str


# The two events of nearly every wire event are built once per event, and a frozen
# dataclass's own __init__ stores each field through object.__setattr__, which looks the
# name up on the type each time: for these two, half the cost of building one. Their
# __init__ stores each field through its slot's descriptor instead (bound below, once the
# slotted class exists): the same object, still frozen, equal and hashed as before.


@dataclass(frozen=True, slots=True, init=False)
class TextDelta:
    """Visible text for the caller; counted, never buffered by the gate."""

    choice: int
    text: str

    def __init__(self, choice: int, text: str) -> None:
        _text_choice(self, choice)
        _text_text(self, text)


@dataclass(frozen=True, slots=True)
class CallStarted:
    """A tool call was opened; its identity is pinned from here on."""

    choice: int
    index: int
    call_id: str
    name: str
    item_id: str | None = None
    """The Responses output item id (None on a chat wire)."""
    kind: str = "function_call"
    """The item type (``core/wires/responses_items.ITEMS``); a chat tool call is a function call."""


@dataclass(frozen=True, slots=True, init=False)
class ArgumentDelta:
    """A fragment of a call's arguments, appended to that call's accumulator only."""

    choice: int
    index: int
    fragment: str = field(repr=False)

    def __init__(self, choice: int, index: int, fragment: str) -> None:
        _argument_choice(self, choice)
        _argument_index(self, index)
        _argument_fragment(self, fragment)


def _slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    setter: Callable[[object, object], None] = vars(cls)[name].__set__
    return setter


_text_choice = _slot_setter(TextDelta, "choice")
_text_text = _slot_setter(TextDelta, "text")
_argument_choice = _slot_setter(ArgumentDelta, "choice")
_argument_index = _slot_setter(ArgumentDelta, "index")
_argument_fragment = _slot_setter(ArgumentDelta, "fragment")


@dataclass(frozen=True, slots=True)
class Finish:
    """The upstream's own ``finish_reason`` for a choice."""

    choice: int
    finish_reason: str


@dataclass(frozen=True, slots=True)
class ChoiceFinish:
    """The ``finish_reason`` of one choice of several (``n > 1``) while another choice is
    still open: that choice's own terminal. The last choice to finish is a :class:`Finish`,
    the stream's terminal. Content-free for the stream's state."""

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


@dataclass(frozen=True, slots=True)
class ArgumentsDone:
    """Responses ``function_call_arguments.done``: the item's whole arguments, as claimed."""

    index: int
    arguments: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ItemDone:
    """Responses ``output_item.done`` for a function call whose identity matched the pinned
    one (the normalizer checks that); its arguments are left for the ledger to compare."""

    index: int
    arguments: str | None = field(repr=False)


@dataclass(frozen=True, slots=True)
class CompletedCall:
    """One function-call item listed in ``response.completed``'s ``output``."""

    item_id: str | None
    call_id: str | None
    name: str | None
    arguments: str | None = field(repr=False)
    status: str | None = None


@dataclass(frozen=True, slots=True)
class ResponseCompleted:
    """Responses ``response.completed`` with status ``completed``, and the calls it lists."""

    calls: tuple[CompletedCall, ...]


@dataclass(frozen=True, slots=True)
class ResponseIncomplete:
    """Responses ``response.incomplete``, or a final response whose status is not completed."""

    status: str


@dataclass(frozen=True, slots=True)
class BlockStop:
    """Anthropic ``content_block_stop`` for a ``tool_use`` block: its input is complete.

    ``from_start``: no ``input_json_delta`` carried text, so the arguments are the start
    block's ``input`` (litellm's chat chunks then show no argument text for the call).
    """

    index: int
    from_start: bool = False


WireEvent = (
    ResponseStarted
    | TextDelta
    | CallStarted
    | ArgumentDelta
    | Finish
    | ChoiceFinish
    | DoneMarker
    | Metadata
    | StreamError
    | Unknown
    | ArgumentsDone
    | ItemDone
    | ResponseCompleted
    | ResponseIncomplete
    | BlockStop
)
