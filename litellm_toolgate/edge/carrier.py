"""What the caller is handed: litellm's chunks with tool-call fragments taken out.

Every tool-call fragment is removed from its chunk and kept only to cross-check litellm's
own assembly against the wire; a chunk left with nothing visible is dropped. The chunk that
carries the finish reason, and every chunk after it, is held. After the attempt released,
one chunk holding every released call (arguments exactly as on the wire) goes out, then the
held chunks. A chunk for any choice other than 0 is withheld whole and fails the check.
:func:`response_carrier` reads a non-streamed response the same way, for the same check.
No I/O; litellm's chunk types only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from litellm.types.utils import (
    ChatCompletionDeltaToolCall,
    Delta,
    Function,
    ModelResponseStream,
    StreamingChoices,
)

from ..core.attempt import Carrier, CarrierCall
from ..core.policy import ReleasedCall

_VISIBLE = ("content", "role", "reasoning_content", "thinking_blocks", "audio", "images")


@dataclass
class _Assembled:
    call_id: str | None = None
    name: str | None = None
    fragments: list[str] = field(default_factory=list)


class CarrierChunks:
    """Withholds tool-call fragments and the finish; builds the release. No I/O."""

    def __init__(self) -> None:
        self.calls: dict[int, _Assembled] = {}
        self.held: list[Any] = []
        self.finish_reason: str | None = None
        self.foreign = False

    def admit(self, chunk: Any) -> Any | None:
        """The chunk to pass on now, or None when it is withheld or held."""
        withheld = False
        choices = getattr(chunk, "choices", None) or []
        if any(getattr(choice, "index", 0) != 0 for choice in choices):
            # Only choice 0 is gated; another choice is withheld whole and fails the check.
            self.foreign = True
            return None
        for choice in choices:
            delta = getattr(choice, "delta", None)
            if delta is not None:
                withheld |= self._strip(delta)
            finish = getattr(choice, "finish_reason", None)
            if finish:
                self.finish_reason = finish if self.finish_reason is None else "<repeated>"
                self.held.append(chunk)
                return None
        if self.held:
            self.held.append(chunk)
            return None
        if (
            withheld
            and not any(getattr(c.delta, f, None) for c in chunk.choices for f in _VISIBLE)
            and not getattr(chunk, "usage", None)
        ):
            return None
        return chunk

    def _strip(self, delta: Any) -> bool:
        stripped = False
        if getattr(delta, "function_call", None) is not None:
            self.foreign = True
            delta.function_call = None
            stripped = True
        for fragment in getattr(delta, "tool_calls", None) or []:
            index = getattr(fragment, "index", None)
            if not isinstance(index, int):
                self.foreign = True
                continue
            call = self.calls.setdefault(index, _Assembled())
            call.call_id = call.call_id or getattr(fragment, "id", None)
            function = getattr(fragment, "function", None)
            name = getattr(function, "name", None)
            call.name = call.name or name
            arguments = getattr(function, "arguments", None)
            if arguments:
                call.fragments.append(arguments)
        if getattr(delta, "tool_calls", None) is not None:
            delta.tool_calls = None
            stripped = True
        return stripped

    def carrier(self) -> Carrier:
        return Carrier(
            {
                i: CarrierCall(c.call_id, c.name, "".join(c.fragments))
                for i, c in self.calls.items()
            },
            self.finish_reason,
            foreign=self.foreign,
        )

    def release(self, released: list[ReleasedCall]) -> list[Any]:
        if not released:
            return list(self.held)
        template = self.held[0]
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
                                index=call.index,
                                function=Function(name=call.name, arguments=call.arguments),
                            )
                            for call in released
                        ],
                    ),
                )
            ],
        )
        return [chunk, *self.held]


def response_carrier(response: Any) -> Carrier:
    """What litellm made of a non-streamed response: choice 0's calls and finish reason."""
    choices = getattr(response, "choices", None) or [None]
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
