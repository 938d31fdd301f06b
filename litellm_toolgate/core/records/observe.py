"""What a route did on the wire: a read-only observer of one response body, for probing.

The gate decides; this module only watches. :class:`WireObserver` is fed the same raw pieces
the gate is fed (with the time each arrived, from the edge's clock) and keeps facts about the
route's way of streaming tool calls: whether it sent its terminal (a chat ``finish_reason``,
a Responses status, an Anthropic ``stop_reason``, a Gemini ``finishReason``, an Ollama
``done_reason``, a Bedrock ``stopReason``) and its end marker (``[DONE]``,
``response.completed``, ``message_stop``, Gemini's finish message, Ollama's ``done: true``
line, Bedrock's ``metadata`` event), whether a call's identity (id and name) came on its
first fragment only or on every one, the argument fragments' sizes, a usage report, and the
times to the first call fragment and to the terminal. :meth:`WireObserver.facts` returns them
as :class:`WireFacts`: counts, sizes and names of the protocol, never argument text.

The body is cut into messages by the wire's own framing decoder
(:meth:`~.wires.base.WireSpec.decoder`: SSE, Ollama's lines, Bedrock's binary event-stream
frames). After a framing fault the observer counts the piece as undecodable and starts a
fresh decoder where the framing can find its feet again (SSE at a blank line, NDJSON at a
newline); a binary event stream cannot, so nothing after its fault is read.

The observer keeps the raw pieces (:attr:`WireObserver.pieces`) so that a probe can record
them; a recording goes through :mod:`.sanitize` before it is written anywhere. Like the rest
of the core it does no I/O, imports no litellm, and raises nothing on a malformed body (the
gate's verdict on it is the gate's business): what it cannot read it counts.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from ..decision.state import Wire
from ..errors import Fault
from ..framing.decoder import FramingDecoder
from ..wires import WIRES

__all__ = ["WireFacts", "WireObserver"]

_MAX_EVENT = 64 * 1024 * 1024
_RESPONSES_TERMINALS = {
    "response.completed": "completed",
    "response.incomplete": "incomplete",
    "response.failed": "failed",
}
_RESPONSES_ARGUMENT_DELTAS = (
    "response.function_call_arguments.delta",
    "response.custom_tool_call_input.delta",
)
_RESPONSES_ARGUMENT_DONES = (
    "response.function_call_arguments.done",
    "response.custom_tool_call_input.done",
)


@dataclass(frozen=True)
class WireFacts:
    """The facts of one observed body. Times are milliseconds from the request's start."""

    wire: str
    status: int | None
    content_type: str
    pieces: int
    """Transport reads the body came in."""
    bytes: int
    utf8_split: bool
    """A read ended inside a UTF-8 sequence (the next read completed it)."""
    events: int
    undecodable: int
    """Messages whose data was not the wire's JSON (or a body the SSE decoder refused)."""
    calls: int
    fragments: int
    """Argument fragments (chat ``arguments`` pieces, Responses deltas, Anthropic
    ``input_json_delta``s, Bedrock ``toolUse.input`` deltas; on Gemini and Ollama, whose
    calls arrive whole, one per call, sized as the gate serializes its argument object)."""
    fragment_bytes_min: int | None
    fragment_bytes_max: int | None
    identity: str
    """``first`` (id and name on a call's first fragment only), ``repeated`` (on later
    fragments too), ``whole`` (every call in one fragment, with its id: chat's whole calls,
    Ollama's and Gemini's calls that carry an id), ``item`` (Responses: on the item),
    ``block`` (Anthropic and Bedrock: on the block start), ``missing`` (a call without an
    id, as Gemini's usually are: the gate names them by position) or ``-`` (no call)."""
    indexed: bool | None
    """Chat: every tool-call fragment carried an ``index`` (None without calls)."""
    arguments_in: str
    """Where argument text arrived: ``deltas``, ``done only`` (Responses: no delta, the
    ``.done`` event alone), ``start`` (Anthropic: on the block start), ``object`` (Gemini
    ``args``, Ollama ``arguments``: a JSON object, whole) or ``-``."""
    terminal: str | None
    """The wire's terminal: the chat finish reason, Responses status, Anthropic stop
    reason, Gemini ``finishReason``, Ollama ``done_reason`` (on the ``done: true`` line) or
    Bedrock ``messageStop.stopReason``."""
    end_marker: bool
    """The wire's end marker was sent: ``[DONE]`` (chat), ``response.completed``
    (Responses), ``message_stop`` (Anthropic), the message whose candidate carries a
    ``finishReason`` (Gemini: no ``[DONE]``, the finish message ends the stream), the
    ``done: true`` line (Ollama) or the ``metadata`` event after ``messageStop``
    (Bedrock). Where the finish is itself the end (Gemini, Ollama) this says it came."""
    after_end: int
    """Events after the end marker."""
    usage: bool
    """A usage report: chat ``usage``, Responses ``response.usage``, Anthropic ``usage``,
    Gemini ``usageMetadata``, Ollama ``prompt_eval_count`` / ``eval_count``, Bedrock
    ``metadata.usage``."""
    first_call_ms: float | None
    terminal_ms: float | None
    last_byte_ms: float | None
    ended: str
    """``eof`` (the body ended cleanly), ``error`` (the read failed) or ``open``."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class _Call:
    fragments: int = 0
    with_id: int = 0
    with_name: int = 0
    has_id: bool = False


@dataclass
class WireObserver:
    """Feed it one body's pieces (:meth:`feed`), then its end (:meth:`end`); read
    :meth:`facts`. ``started`` is the request's start on the same clock as ``at``."""

    wire: Wire
    started: float
    status: int | None = None
    content_type: str = ""
    path: str = ""
    """The request's URL path (the route's own path on its wire: what a replay asks)."""
    pieces: list[bytes] = field(default_factory=list, repr=False)
    """The body as read (the route's own bytes: never logged, sanitized before it is kept)."""
    _decoder: FramingDecoder | None = field(default=None, init=False, repr=False)
    _resyncs: bool = field(default=True, init=False, repr=False)
    _utf8_carry: int = 0
    _utf8_split: bool = False
    _events: int = 0
    _undecodable: int = 0
    _calls: dict[object, _Call] = field(default_factory=dict)
    _sizes: list[int] = field(default_factory=list)
    _indexed: bool | None = None
    _done_arguments: int = 0
    _start_arguments: int = 0
    _terminal: str | None = None
    _end: bool = False
    _after_end: int = 0
    _usage: bool = False
    _first_call: float | None = None
    _terminal_at: float | None = None
    _last_byte: float | None = None
    _ended: str = "open"
    _now: float = 0.0

    def __post_init__(self) -> None:
        self._decoder = self._new_decoder()
        # An SSE or NDJSON body finds its next message after a fault; a binary frame stream
        # has no boundary to find again.
        self._resyncs = self.wire is not Wire.BEDROCK

    def _new_decoder(self) -> FramingDecoder:
        return WIRES[self.wire].decoder(_MAX_EVENT)

    def feed(self, data: bytes, at: float) -> None:
        """One piece of the body as read, at time ``at``."""
        if not data:
            return
        self.pieces.append(bytes(data))
        self._last_byte = self._now = at
        self._track_utf8(data)
        decoder = self._decoder
        if decoder is None:  # a frame stream broken earlier: nothing more is read
            return
        try:
            messages = decoder.feed_fields(data)
        except Fault:
            messages = []
        for event, text, _ in messages:
            self._message(event, text)
        if decoder.error is not None:
            # The messages before the fault are read; the rest of this piece is not.
            self._undecodable += 1
            self._decoder = self._new_decoder() if self._resyncs else None

    def end(self, at: float, *, clean: bool) -> None:
        """The body ended: cleanly, or with a read error."""
        self._now = at
        self._ended = "eof" if clean else "error"

    def body(self) -> bytes:
        return b"".join(self.pieces)

    def facts(self) -> WireFacts:
        sizes = self._sizes
        return WireFacts(
            wire=self.wire.value,
            status=self.status,
            content_type=self.content_type,
            pieces=len(self.pieces),
            bytes=sum(len(p) for p in self.pieces),
            utf8_split=self._utf8_split,
            events=self._events,
            undecodable=self._undecodable,
            calls=len(self._calls),
            fragments=len(sizes),
            fragment_bytes_min=min(sizes) if sizes else None,
            fragment_bytes_max=max(sizes) if sizes else None,
            identity=self._identity(),
            indexed=self._indexed,
            arguments_in=self._arguments_in(),
            terminal=self._terminal,
            end_marker=self._end,
            after_end=self._after_end,
            usage=self._usage,
            first_call_ms=self._ms(self._first_call),
            terminal_ms=self._ms(self._terminal_at),
            last_byte_ms=self._ms(self._last_byte),
            ended=self._ended,
        )

    # ---- internals -----------------------------------------------------------------------
    def _ms(self, at: float | None) -> float | None:
        return None if at is None else round((at - self.started) * 1000, 1)

    def _track_utf8(self, data: bytes) -> None:
        """Whether a read boundary fell inside a UTF-8 sequence."""
        if self._utf8_carry and data and 0x80 <= data[0] < 0xC0:
            self._utf8_split = True
        # How many continuation bytes the last lead byte of this piece still waits for.
        carry = 0
        for back in range(1, min(4, len(data)) + 1):
            byte = data[-back]
            if byte < 0x80:
                break
            if byte >= 0xC0:
                need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
                carry = max(need - back, 0)
                break
        self._utf8_carry = carry

    def _identity(self) -> str:
        calls = list(self._calls.values())
        if not calls:
            return "-"
        if self.wire is Wire.RESPONSES:
            return "item" if all(c.has_id for c in calls) else "missing"
        if self.wire in (Wire.ANTHROPIC, Wire.BEDROCK):
            return "block" if all(c.has_id for c in calls) else "missing"
        if not all(c.has_id for c in calls):
            return "missing"
        if all(c.fragments <= 1 for c in calls):
            return "whole"
        if any(c.with_id > 1 or c.with_name > 1 for c in calls):
            return "repeated"
        return "first"

    def _arguments_in(self) -> str:
        if not self._calls:
            return "-"
        if self.wire in (Wire.GEMINI, Wire.OLLAMA):
            return "object"
        if self._sizes:
            return "deltas"
        if self._done_arguments:
            return "done only"
        if self._start_arguments:
            return "start"
        return "-"

    def _call_fragment(self, key: object, size: int | None) -> _Call:
        call = self._calls.setdefault(key, _Call())
        if size is not None:
            call.fragments += 1
            if size:
                self._sizes.append(size)
            if self._first_call is None:
                self._first_call = self._now
        return call

    def _set_terminal(self, value: str) -> None:
        if self._terminal is None:
            self._terminal = value
            self._terminal_at = self._now

    def _message(self, event: str, text: str) -> None:
        self._events += 1
        if self._end:
            self._after_end += 1
        if self.wire in (Wire.CHAT, Wire.WATSONX) and text.strip() == "[DONE]":
            self._end = True
            return
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            self._undecodable += 1
            return
        if not isinstance(data, dict):
            self._undecodable += 1
            return
        read = {
            Wire.CHAT: self._chat,
            Wire.GEMINI: self._gemini,
            Wire.OLLAMA: self._ollama,
            Wire.WATSONX: self._chat,
        }.get(self.wire)
        try:
            if read is not None:
                read(data)
            elif self.wire is Wire.RESPONSES:
                self._responses(event, data)
            elif self.wire is Wire.BEDROCK:
                self._bedrock(event, data)
            else:
                self._anthropic(event, data)
        except (TypeError, ValueError, AttributeError, RecursionError):
            # A shape no rule expected (an unhashable key, a value too deep to measure):
            # counted, never raised. The facts read before it stay.
            self._undecodable += 1

    def _chat(self, data: dict[str, Any]) -> None:
        if data.get("usage"):
            self._usage = True
        for choice in data.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            delta = choice.get("delta") or {}
            fragments = delta.get("tool_calls") if isinstance(delta, dict) else None
            for ordinal, fragment in enumerate(fragments or []):
                if not isinstance(fragment, dict):
                    continue
                index = fragment.get("index")
                has_index = isinstance(index, int)
                self._indexed = has_index if self._indexed is None else self._indexed and has_index
                function = fragment.get("function") or {}
                arguments = function.get("arguments") if isinstance(function, dict) else None
                size = len(arguments.encode()) if isinstance(arguments, str) else 0
                key = (
                    ("i", choice.get("index"), index)
                    if has_index
                    else ("w", len(self._calls), ordinal)
                )
                call = self._call_fragment(key, size)
                if fragment.get("id"):
                    call.with_id += 1
                    call.has_id = True
                if isinstance(function, dict) and function.get("name"):
                    call.with_name += 1
            finish = choice.get("finish_reason")
            if isinstance(finish, str) and finish:
                self._set_terminal(finish)

    def _responses(self, event: str, data: dict[str, Any]) -> None:
        kind = str(data.get("type") or event)
        if kind in _RESPONSES_ARGUMENT_DELTAS:
            delta = data.get("delta")
            size = len(delta.encode()) if isinstance(delta, str) else 0
            self._call_fragment(("r", data.get("item_id") or data.get("output_index")), size)
        elif kind in _RESPONSES_ARGUMENT_DONES:
            self._done_arguments += 1
            if self._first_call is None:
                self._first_call = self._now
        elif kind == "response.output_item.added":
            item = data.get("item") or {}
            if isinstance(item, dict) and item.get("type") in (
                "function_call",
                "custom_tool_call",
            ):
                call = self._call_fragment(("r", item.get("id") or data.get("output_index")), None)
                call.has_id = bool(item.get("call_id")) and bool(item.get("name"))
        elif kind in _RESPONSES_TERMINALS:
            response = data.get("response") or {}
            status = response.get("status") if isinstance(response, dict) else None
            self._set_terminal(str(status or _RESPONSES_TERMINALS[kind]))
            if isinstance(response, dict) and response.get("usage"):
                self._usage = True
            if kind == "response.completed":
                self._end = True

    def _anthropic(self, event: str, data: dict[str, Any]) -> None:
        kind = str(data.get("type") or event)
        if kind == "content_block_start":
            block = data.get("content_block") or {}
            if isinstance(block, dict) and block.get("type") in ("tool_use", "server_tool_use"):
                call = self._call_fragment(("a", data.get("index")), None)
                call.has_id = bool(block.get("id")) and bool(block.get("name"))
                if block.get("input"):
                    self._start_arguments += 1
        elif kind == "content_block_delta":
            delta = data.get("delta") or {}
            if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                partial = delta.get("partial_json")
                size = len(partial.encode()) if isinstance(partial, str) else 0
                self._call_fragment(("a", data.get("index")), size)
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            stop = delta.get("stop_reason") if isinstance(delta, dict) else None
            if isinstance(stop, str):
                self._set_terminal(stop)
            if data.get("usage"):
                self._usage = True
        elif kind == "message_start":
            message = data.get("message") or {}
            if isinstance(message, dict) and message.get("usage"):
                self._usage = True
        elif kind == "message_stop":
            self._end = True

    # ---- the wires of whole calls (Gemini, Ollama) and of event-stream frames (Bedrock) ------
    def _whole_call(self, call_id: object, name: object, arguments: object) -> None:
        """One call that arrives whole: one fragment, the size of its argument object as
        the gate serializes it (absent: ``{}``); an argument that is no object counts 0."""
        if arguments is None:
            size = 2
        elif isinstance(arguments, dict):
            size = len(json.dumps(arguments, ensure_ascii=False).encode())
        else:
            size = 0
        call = self._call_fragment(("w", len(self._calls)), size)
        if isinstance(call_id, str) and call_id:
            call.with_id += 1
            call.has_id = True
        if isinstance(name, str) and name:
            call.with_name += 1

    def _gemini(self, data: dict[str, Any]) -> None:
        if data.get("usageMetadata"):
            self._usage = True
        candidates = data.get("candidates")
        for candidate in candidates if isinstance(candidates, list) else []:
            if not isinstance(candidate, dict):
                continue
            content = candidate.get("content")
            parts = content.get("parts") if isinstance(content, dict) else None
            for part in parts if isinstance(parts, list) else []:
                call = part.get("functionCall") if isinstance(part, dict) else None
                if isinstance(call, dict):
                    self._whole_call(call.get("id"), call.get("name"), call.get("args"))
            finish = candidate.get("finishReason")
            if isinstance(finish, str) and finish:
                self._set_terminal(finish)
                self._end = True  # the finish message is the end: no [DONE] follows

    def _ollama(self, data: dict[str, Any]) -> None:
        message = data.get("message")
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        for call in calls if isinstance(calls, list) else []:
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            self._whole_call(call.get("id"), function.get("name"), function.get("arguments"))
        if "prompt_eval_count" in data or "eval_count" in data:
            self._usage = True
        if data.get("done") is True:
            self._end = True  # the done line is the end: nothing may follow it
            reason = data.get("done_reason")
            if isinstance(reason, str) and reason:
                self._set_terminal(reason)

    def _bedrock(self, event: str, data: dict[str, Any]) -> None:
        index = data.get("contentBlockIndex")
        key = ("b", index if isinstance(index, int) else None)
        if event == "contentBlockStart":
            start = data.get("start")
            use = start.get("toolUse") if isinstance(start, dict) else None
            if isinstance(use, dict):
                call = self._call_fragment(key, None)
                call.has_id = bool(use.get("toolUseId")) and bool(use.get("name"))
        elif event == "contentBlockDelta":
            delta = data.get("delta")
            use = delta.get("toolUse") if isinstance(delta, dict) else None
            if isinstance(use, dict):
                piece = use.get("input")
                self._call_fragment(key, len(piece.encode()) if isinstance(piece, str) else 0)
        elif event == "messageStop":
            stop = data.get("stopReason")
            if isinstance(stop, str) and stop:
                self._set_terminal(stop)
        elif event == "metadata":
            self._end = True  # the last event of a ConverseStream response
            if data.get("usage"):
                self._usage = True
