"""What the caller is handed: litellm's chunks with tool-call fragments taken out.

Every tool-call fragment is kept only to cross-check litellm's own assembly against the
wire, and never handed out; a chunk with nothing visible besides is dropped. litellm keeps
the chunks it yielded and assembles them for its success callbacks (spend logs, tracing),
so its objects are never changed: a chunk that must go out without its fragments goes out
as a copy, and litellm's record of the stream ends up holding the released calls exactly as
the caller received them. The chunk that
carries the finish reason, and every chunk after it, is held. After the attempt released,
one chunk holding every released call (arguments exactly as on the wire) goes out, then the
held chunks. A chunk for any choice other than 0 is withheld whole and fails the check.
:func:`response_carrier` reads a non-streamed response the same way, for the same check.

A request for several choices (``n > 1``) gets :class:`ChoicesCarrierChunks` instead
(:func:`chat_carrier`), so a stream of one choice pays nothing for it. litellm keeps each
choice's index on the chunks it hands over (both supported versions), but it shows one
finish reason for the whole stream: the first one on the wire, under index 0, and no other.
So calls are collected per (choice, tool index), a chunk showing text passes live whatever
its choice, and the one finish litellm shows must be choice 0's on the wire (else the
carrier disagrees with the wire: ``carrier_mismatch``). The release is one chunk per choice
holding that choice's calls, in choice order, then the held chunks.
No I/O; litellm's chunk types only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...core.decision.attempt import Carrier, CarrierCall
from ...core.decision.events import slot
from ...core.rules.policy import ReleasedCall
from ...core.wires.chat import LITELLM_VISIBLE_DELTA_FIELDS
from ..seam.symbols import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

_ABSENT = object()
_PLAIN: dict[tuple[type, str | tuple[str, ...]], bool] = {}


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    """``getattr(obj, name, default)``, without pydantic's slow path for litellm's chunk types.

    litellm keeps most of a delta's keys as pydantic "extra" values, and reading an extra
    (or an absent name) runs pydantic's Python-level ``__getattr__``: about a microsecond
    each, a dozen per chunk, which profiling showed to be most of the gate's per-chunk
    cost. A pydantic model keeps declared fields in the instance ``__dict__`` and extras
    in ``__pydantic_extra__``; a name found in neither and not defined on the class is
    absent, which is what ``getattr`` would conclude too. Anything else (a property, an
    object that is not a pydantic model) is left to ``getattr`` itself. This runs a few
    times per chunk, so whether a name is defined on the class is asked once per type.
    """
    plain = _PLAIN.get((type(obj), name))
    if plain is None:
        plain = _plain(type(obj), name)
    if plain:
        values = obj.__dict__
        if name in values:
            return values[name]
        extra: Any = getattr(obj, "__pydantic_extra__", _ABSENT)
        if extra is None:
            return default
        if extra is not _ABSENT:
            return extra.get(name, default)
    return getattr(obj, name, default)


def _plain(cls: type, name: str) -> bool:
    """Whether ``name`` on an instance of ``cls`` is a plain value (see :func:`_attr`)."""
    plain = _PLAIN[cls, name] = not _defined_on_class(cls, name) and any(
        "__dict__" in k.__dict__ for k in cls.__mro__
    )
    return plain


def _defined_on_class(cls: type, name: str) -> bool:
    return any(name in k.__dict__ for k in cls.__mro__)


def _attrs(obj: Any, names: tuple[str, ...]) -> list[Any]:
    """``[_attr(obj, name) for name in names]``, reading the model's two dicts once."""
    plain = _PLAIN.get((type(obj), names))
    if plain is None:
        plain = _PLAIN[type(obj), names] = all(_attr_is_plain(type(obj), n) for n in names)
    if plain:
        values = obj.__dict__
        extra: Any = getattr(obj, "__pydantic_extra__", _ABSENT)
        if type(extra) is dict:
            return [values[n] if n in values else extra.get(n) for n in names]
        if extra is None:
            return [values.get(n) for n in names]
    return [_attr(obj, n) for n in names]


def _attr_is_plain(cls: type, name: str) -> bool:
    plain = _PLAIN.get((cls, name))
    return _plain(cls, name) if plain is None else plain


def _shows(delta: Any) -> bool:
    """Whether litellm's delta carries something the caller reads besides tool calls."""
    return delta is not None and any(_attrs(delta, LITELLM_VISIBLE_DELTA_FIELDS))


_CHOICE = ("index", "delta", "finish_reason")
_DELTA = ("function_call", "tool_calls")
_FRAGMENT = ("index", "id", "function")
_FUNCTION = ("name", "arguments")


def _all_plain(cls: type, names: tuple[str, ...]) -> bool:
    return all(_attr_is_plain(cls, n) for n in names)


# Whether litellm's own chunk types keep every name the carrier reads as a plain value (see
# _attr). Then :meth:`CarrierChunks.admit` reads them straight from the instance's two
# dicts, without a call per name: litellm yields one chunk per wire event, and the reads
# were most of the carrier's cost per chunk. Asked once; a litellm that turns one of these
# into a property takes the general path, which asks per type.
_PLAIN_TYPES = (
    _all_plain(ModelResponseStream, ("choices", "usage"))
    and _all_plain(StreamingChoices, _CHOICE)
    and _all_plain(Delta, _DELTA + LITELLM_VISIBLE_DELTA_FIELDS)
    and _all_plain(ChatCompletionDeltaToolCall, _FRAGMENT)
    and _all_plain(Function, _FUNCTION)
)
_DELTA_READ = frozenset(_DELTA + LITELLM_VISIBLE_DELTA_FIELDS)


# Fragments kept apart before they are joined into one block (see _Assembled).
_JOIN_EVERY = 64


@dataclass
class _Assembled:
    """One call as litellm's chunks carry it: its id, name and argument text.

    A model streams arguments a few characters at a time, and a small ``str`` costs about
    50 bytes besides its text: kept one object per fragment, a withheld call's text would
    cost the carrier several times its size while the call is withheld (about 2.8x at 32
    bytes a fragment, 15x at 4). The last fragments are joined into one block every
    :data:`_JOIN_EVERY`, so the text costs about its own size (each byte copied once more).
    """

    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)
    blocks: list[str] = field(default_factory=list)

    def add(self, text: str) -> None:
        fragments = self.fragments
        fragments.append(text)
        if len(fragments) >= _JOIN_EVERY:
            self.blocks.append("".join(fragments))
            fragments.clear()

    @property
    def arguments(self) -> str:
        """The whole text, joined once and then kept as the one block (not beside its parts:
        the joined text is what the decision compares and what the release hands out)."""
        blocks = self.blocks
        if self.fragments or len(blocks) != 1:
            blocks[:] = ["".join(blocks + self.fragments)]
            self.fragments.clear()
        return blocks[0]


def _clear(obj: Any, name: str) -> None:
    """``setattr(obj, name, None)``, without pydantic's slow path for an extra value.

    Setting an extra value runs pydantic's ``__setattr__``, which looks the name up on the
    class through its metaclass on every call (about ten microseconds on the chunk types,
    paid once per tool-call chunk). For a value that is already an extra, already marked
    as set, on a model that neither validates assignments nor is frozen, and that the class
    does not define, pydantic would store the new value in ``__pydantic_extra__`` and do
    nothing else; that is done here directly (litellm's own chunk constructor writes its
    extras the same way). Anything else goes through ``setattr``.
    """
    extra = getattr(obj, "__pydantic_extra__", None)
    config = getattr(type(obj), "model_config", None)
    if (
        isinstance(extra, dict)
        and name in extra
        and isinstance(config, dict)
        and not config.get("validate_assignment")
        and not config.get("frozen")
        and name in getattr(obj, "__pydantic_fields_set__", ())
        and not _defined_on_class(type(obj), name)
    ):
        extra[name] = None
    else:
        setattr(obj, name, None)


def _without_calls(chunk: Any) -> Any:
    """A copy of ``chunk`` whose deltas carry no tool calls; ``chunk`` is left as it was.

    Shallow copies down to each delta (the only objects changed); the rest is shared.
    """
    copied = chunk.model_copy()
    choices = []
    for original in _attr(chunk, "choices") or []:
        choice = original.model_copy()
        delta = _attr(choice, "delta")
        if delta is not None:
            delta = delta.model_copy()
            if _attr(delta, "function_call") is not None:
                delta.function_call = None
            if _attr(delta, "tool_calls") is not None:
                _clear(delta, "tool_calls")
            choice.delta = delta
        choices.append(choice)
    copied.choices = choices
    return copied


class CarrierChunks:
    """Withholds tool-call fragments and the finish; builds the release. No I/O."""

    def __init__(self) -> None:
        self.calls: dict[int, _Assembled] = {}
        self.held: list[Any] = []
        self.finish_reason: str | None = None
        self.foreign = False

    def admit(self, chunk: Any) -> Any | None:
        """The chunk to pass on now, or None when it is withheld or held."""
        # Nearly every chunk is litellm's own type with one choice, and nothing is held yet:
        # then the steps of _admit_any, reading litellm's models from their dicts (the
        # chunk's, and the choice's extras, where litellm keeps all of a choice's fields).
        if type(chunk) is not ModelResponseStream or not _PLAIN_TYPES or self.held:
            return self._admit_any(chunk)
        values = chunk.__dict__
        choices = values.get("choices", _ABSENT)
        if type(choices) is not list or len(choices) != 1:
            return self._admit_any(chunk)
        model = choices[0]
        if type(model) is not StreamingChoices or model.__dict__:
            return self._admit_any(chunk)
        choice = model.__pydantic_extra__
        if type(choice) is not dict:
            return self._admit_any(chunk)
        index = choice.get("index", 0)  # what _admit_any reads for an absent or None index
        if index != 0:
            self.foreign = True
            return None
        delta = choice.get("delta")
        withheld = False
        fields: dict[str, Any] | None = None  # the delta's extras, holding every name read
        if delta is not None:
            if type(delta) is Delta:
                extra = delta.__pydantic_extra__
                if type(extra) is dict and delta.__dict__.keys().isdisjoint(_DELTA_READ):
                    fields = extra
            if fields is not None:
                function_call = fields.get("function_call")
                tool_calls = fields.get("tool_calls")
            else:
                function_call, tool_calls = _attrs(delta, _DELTA)
            if function_call is not None or tool_calls is not None:
                self._collect(function_call, tool_calls)
                withheld = True
        finish = choice.get("finish_reason")
        if finish:
            self.finish_reason = finish if self.finish_reason is None else "<repeated>"
            self.held.append(_without_calls(chunk) if withheld else chunk)
            return None
        if not withheld:
            return chunk
        if fields is not None:
            shows = any(map(fields.get, LITELLM_VISIBLE_DELTA_FIELDS))
        else:
            shows = _shows(delta)
        if shows:
            return _without_calls(chunk)
        if "usage" in values:
            usage = values["usage"]
        else:
            extra = chunk.__pydantic_extra__
            usage = extra.get("usage") if type(extra) is dict else _attr(chunk, "usage")
        return _without_calls(chunk) if usage else None

    def _admit_any(self, chunk: Any) -> Any | None:
        """:meth:`admit` for any chunk, asking each name through :func:`_attr`."""
        withheld = False
        read = []
        for choice in _attr(chunk, "choices") or []:
            index, delta, finish = _attrs(choice, _CHOICE)
            if index is None:  # absent, or None: only an absent index is choice 0
                index = _attr(choice, "index", 0)
            if index != 0:
                # Only choice 0 is gated; another choice is withheld whole and fails the check.
                self.foreign = True
                return None
            read.append((delta, finish))
        for delta, finish in read:
            if delta is not None:
                function_call, tool_calls = _attrs(delta, _DELTA)
                if function_call is not None or tool_calls is not None:
                    self._collect(function_call, tool_calls)
                    withheld = True
            if finish:
                self.finish_reason = finish if self.finish_reason is None else "<repeated>"
                self.held.append(_without_calls(chunk) if withheld else chunk)
                return None
        if self.held:
            self.held.append(_without_calls(chunk) if withheld else chunk)
            return None
        if not withheld:
            return chunk
        if not any(_shows(delta) for delta, _ in read) and not _attr(chunk, "usage"):
            return None
        return _without_calls(chunk)

    def _collect(self, function_call: Any, tool_calls: Any) -> None:
        """Note a delta's tool-call fragments (and a legacy function call, which is foreign)."""
        if function_call is not None:
            self.foreign = True
        for fragment in tool_calls or []:
            if type(fragment) is ChatCompletionDeltaToolCall and _PLAIN_TYPES:
                values = fragment.__dict__  # declared fields of litellm's type live here
                try:
                    index, call_id, function = values["index"], values["id"], values["function"]
                except KeyError:
                    index, call_id, function = _attrs(fragment, _FRAGMENT)
            else:
                index, call_id, function = _attrs(fragment, _FRAGMENT)
            if not isinstance(index, int):
                self.foreign = True
                continue
            call = self.calls.get(index)
            if call is None:
                call = self.calls[index] = _Assembled()
            if not call.call_id:  # the first id given is kept
                call.call_id = call_id
            if type(function) is Function and _PLAIN_TYPES:
                values = function.__dict__
                try:
                    name, arguments = values["name"], values["arguments"]
                except KeyError:
                    name, arguments = _attrs(function, _FUNCTION)
            else:
                name, arguments = _attrs(function, _FUNCTION)
            if not call.name:
                call.name = name
            if arguments:
                call.add(arguments)

    def carrier(self) -> Carrier:
        return Carrier(
            {i: CarrierCall(c.call_id, c.name, c.arguments) for i, c in self.calls.items()},
            self.finish_reason,
            foreign=self.foreign,
        )

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        if not released:
            return list(self.held)
        template = self.held[0]
        # Each call goes out under the tool index litellm gave it (on an Anthropic wire the
        # core keys calls by content block index, litellm numbers them 0, 1, ...).
        shown = {c.call_id: i for i, c in self.calls.items() if c.call_id}
        chunk = ModelResponseStream(
            id=template.id,
            created=template.created,
            model=template.model,
            choices=[
                StreamingChoices(
                    index=0,
                    finish_reason=None,
                    delta=Delta(
                        content=None,
                        tool_calls=[
                            ChatCompletionDeltaToolCall(
                                id=call.call_id,
                                type="function",
                                index=shown.get(call.call_id, call.index),
                                function=Function(name=call.name, arguments=call.arguments),
                            )
                            for call in released
                        ],
                    ),
                )
            ],
        )
        return [chunk, *self.held]


class ChoicesCarrierChunks(CarrierChunks):
    """:class:`CarrierChunks` for a request of ``choices`` choices (see the module text)."""

    def __init__(self, choices: int) -> None:
        super().__init__()
        self.choices = choices
        self.finishes: dict[int, str] = {}
        self._where: dict[int, tuple[int, int]] = {}  # key -> (choice, tool index)

    def admit(self, chunk: Any) -> Any | None:
        withheld = False
        finished = False
        shows = False
        for choice in _attr(chunk, "choices") or []:
            index, delta, finish = _attrs(choice, _CHOICE)
            if index is None:
                index = _attr(choice, "index", 0)
            if type(index) is not int or not 0 <= index < self.choices:
                self.foreign = True
                return None
            if delta is not None:
                function_call, tool_calls = _attrs(delta, _DELTA)
                if function_call is not None or tool_calls is not None:
                    self._collect_choice(index, function_call, tool_calls)
                    withheld = True
                shows = shows or _shows(delta)
            if finish:
                finished = True
                if index == 0:
                    self.finish_reason = finish if self.finish_reason is None else "<repeated>"
                else:
                    self.finishes[index] = finish if index not in self.finishes else "<repeated>"
        if finished or (self.held and not shows):
            # A finish waits for the release; so does what carries nothing to read after it.
            self.held.append(_without_calls(chunk) if withheld else chunk)
            return None
        if not withheld:
            return chunk
        if not shows and not _attr(chunk, "usage"):
            return None
        return _without_calls(chunk)

    def _collect_choice(self, choice: int, function_call: Any, tool_calls: Any) -> None:
        """:meth:`CarrierChunks._collect` of one choice: its calls kept under their key."""
        if function_call is not None:
            self.foreign = True
        for fragment in tool_calls or []:
            index, call_id, function = _attrs(fragment, _FRAGMENT)
            if type(index) is not int or index < 0:
                self.foreign = True
                continue
            key = slot(choice, index, self.choices)
            call = self.calls.get(key)
            if call is None:
                call = self.calls[key] = _Assembled()
                self._where[key] = (choice, index)
            if not call.call_id:
                call.call_id = call_id
            name, arguments = _attrs(function, _FUNCTION)
            if not call.name:
                call.name = name
            if arguments:
                call.add(arguments)

    def carrier(self) -> Carrier:
        carrier = super().carrier()
        return Carrier(
            carrier.calls, carrier.finish_reason, foreign=carrier.foreign, finishes=self.finishes
        )

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        if not released:
            return list(self.held)
        template = self.held[0]
        shown = {
            (self._where[k][0], c.call_id): self._where[k][1]
            for k, c in self.calls.items()
            if c.call_id
        }
        chunks = []
        for choice in sorted({call.choice for call in released}):
            calls = [call for call in released if call.choice == choice]
            chunks.append(
                ModelResponseStream(
                    id=template.id,
                    created=template.created,
                    model=template.model,
                    choices=[
                        StreamingChoices(
                            index=choice,
                            finish_reason=None,
                            delta=Delta(
                                content=None,
                                tool_calls=[
                                    ChatCompletionDeltaToolCall(
                                        id=call.call_id,
                                        type="function",
                                        index=shown.get((choice, call.call_id), call.index),
                                        function=Function(name=call.name, arguments=call.arguments),
                                    )
                                    for call in calls
                                ],
                            ),
                        )
                    ],
                )
            )
        return [*chunks, *self.held]


def chat_carrier(choices: int) -> CarrierChunks:
    """The carrier of litellm's chat chunks for a request of ``choices`` choices."""
    return CarrierChunks() if choices == 1 else ChoicesCarrierChunks(choices)


def response_carrier(response: Any) -> Carrier:
    """What litellm made of a non-streamed response: choice 0's calls and finish reason, or
    with several choices every choice's, its calls keyed as the attempt keys them."""
    choices = getattr(response, "choices", None) or [None]
    if len(choices) > 1:
        return _choices_carrier(response, choices)
    message = getattr(choices[0], "message", None)
    return Carrier(
        {
            i: CarrierCall(
                getattr(tc, "id", None),
                getattr(tc.function, "name", None),
                getattr(tc.function, "arguments", None) or "",
            )
            for i, tc in enumerate(getattr(message, "tool_calls", None) or [])
        },
        getattr(choices[0], "finish_reason", None),
        foreign=len(choices) != 1 or getattr(message, "function_call", None) is not None,
    )


def _choices_carrier(response: Any, choices: list[Any]) -> Carrier:
    """:func:`response_carrier` of a whole response of several choices: each must stand at
    its own index, and each shows its own finish reason."""
    count = len(choices)
    calls: dict[int, CarrierCall] = {}
    finishes: dict[int, str] = {}
    foreign = False
    for position, choice in enumerate(choices):
        message = getattr(choice, "message", None)
        if getattr(choice, "index", None) != position or (
            getattr(message, "function_call", None) is not None
        ):
            foreign = True
        for i, tc in enumerate(getattr(message, "tool_calls", None) or []):
            calls[slot(position, i, count)] = CarrierCall(
                getattr(tc, "id", None),
                getattr(tc.function, "name", None),
                getattr(tc.function, "arguments", None) or "",
            )
        finish = getattr(choice, "finish_reason", None)
        if position and isinstance(finish, str):
            finishes[position] = finish
    return Carrier(
        calls,
        getattr(choices[0], "finish_reason", None),
        foreign=foreign,
        finishes=finishes,
    )
