"""One tool call's accumulator: its fragments, its stage, and what each stage found.

The attempt owns one per (choice, tool index), or per ``output_index`` on a Responses wire.
Fragments are kept as opaque bytes until the attempt reaches its terminal; then
:meth:`CallAccumulator.validate` joins them once and takes the call through the strict parse
and the schema, recording each outcome for the decision record. A quarantine drops every
buffer at once (:meth:`discard`). Its stage moves follow the call table of its wire.

Why bytes: a model streams arguments a few characters at a time, and a list of small ``str``
objects costs about 60 bytes of overhead per fragment, several times the text itself. The
attempt already encodes each fragment to count its bytes against the limits, so the encoded
fragment is appended to one ``BytesIO`` (amortized growth, about 1.1x the text). At the
terminal its ``getvalue`` hands over that very buffer as ``bytes``, trimmed in place, not
copied, and jiter parses those bytes; the text is made as a ``str`` only when something
needs it (the specification's parse of a refused text, a carrier's check that could not be
made on bytes, a caller reading :attr:`ReleasedCall.arguments`). Comparisons with a text
(:meth:`CallAccumulator.same_text`) encode the other side instead. So the decision holds
the bytes and the parsed value, not the bytes, their text and the value. ``surrogatepass``
both ways makes the round trip exact, lone surrogates included (the strict parse refuses
them later, as before).
"""

from __future__ import annotations

import hmac
import io
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from ..errors import QuarantineReason
from ..records.record import DecisionRecord, JsonStatus, PolicyStatus, SchemaStatus
from ..values.registry import ToolRegistry
from ..values.strictjson import ArgumentsError, parse_utf8_arguments
from ..wires.loads import WireFault
from ..wires.responses_items import ITEMS, Executor, Input, check_input, runs_on_server
from .state import CALL_TABLES, CallInput, CallState, Wire, next_call_state

R = QuarantineReason

EXECUTOR_NAMES = {kind: rule.executor.value for kind, rule in ITEMS.items()}
_INPUT_OF = {kind: rule.input for kind, rule in ITEMS.items()}
# An enum member read from its class costs about 70 ns on CPython 3.11 (10 for a global):
# the members the decision reads for every call, read once here.
_FREE_TEXT, _JSON_ARGUMENTS = Input.FREE_TEXT, Input.JSON_ARGUMENTS
_PARSED, _SCHEMA_VALID = CallInput.PARSED, CallInput.SCHEMA_VALID
# Characters of a text encoded at once when it is compared with the withheld bytes.
_SAME_TEXT_SLICE = 8192


@dataclass(slots=True)
class CallAccumulator:
    index: int
    call_id: str
    name: str
    opened_at: float
    wire: Wire = Wire.CHAT
    item_id: str | None = None
    kind: str = "function_call"
    """The item type (``wires/responses_items.ITEMS``): how the input is checked, who runs it."""
    state: CallState = CallState.ITEM_OPEN
    buffer: io.BytesIO | None = field(default_factory=io.BytesIO, repr=False)
    """The fragments so far, UTF-8 (``surrogatepass``); None once taken or dropped."""
    data: bytes | None = field(default=None, repr=False)
    """The whole withheld text as UTF-8, once taken from the buffer (:meth:`withheld`)."""
    nbytes: int = 0
    last_event: str = "call_started"
    stream_ms: float = 0.0
    json_status: JsonStatus = "not_parsed"
    trailing: bool | None = None
    schema_status: SchemaStatus = "not_checked"
    keyword: str | None = None
    path: str | None = None
    policy_status: PolicyStatus = "not_checked"
    policy_reason: str | None = None
    validation_ms: float = 0.0
    policy_ms: float = 0.0
    error: QuarantineReason | None = None
    arguments: str | None = field(default=None, repr=False)
    value: dict[str, Any] | None = field(default=None, repr=False)
    digest: str | None = None
    hosted: bool = False
    """A client item type the server ran itself (``runs_on_server``): a report, not a call."""
    choice: int = 0
    """The chat choice the call belongs to (0 unless the request asked for ``n > 1``)."""
    key: int | None = None
    """The attempt's key of this call where it differs from ``index`` (several choices)."""

    def move(self, event: CallInput) -> None:
        """Take one stage; a move the wire's table refuses raises its :class:`WireFault`."""
        # A table hit that names a state is the whole move; anything else (a reason, a
        # missing entry) goes through next_call_state, which raises for a missing one.
        outcome = CALL_TABLES[self.wire].get((self.state, event))
        if type(outcome) is not CallState:
            outcome = next_call_state(self.state, event, self.wire)
            if isinstance(outcome, QuarantineReason):
                raise WireFault(outcome, self.index if self.key is None else self.key)
        self.state = outcome

    def withheld(self) -> bytes:
        """The whole withheld text as UTF-8 bytes: the buffer's own, taken once, not copied."""
        data = self.data
        if data is None:
            buffer = self.buffer
            data = b"" if buffer is None else buffer.getvalue()
            self.data, self.buffer = data, None
        return data

    def join(self) -> str:
        """The whole withheld text, decoded once and kept."""
        if self.arguments is None:
            self.arguments = self.withheld().decode("utf-8", "surrogatepass")
        return self.arguments

    def same_text(self, text: str) -> bool:
        """Whether ``text`` is the withheld text, compared without decoding the withheld bytes
        (``text`` is encoded instead: ``surrogatepass`` is one to one both ways)."""
        if self.arguments is not None:
            return text == self.arguments
        held = self.data
        if held is None:
            # getvalue shares the buffer's bytes (a write after it would copy them first).
            held = b"" if self.buffer is None else self.buffer.getvalue()
        if len(text) <= _SAME_TEXT_SLICE:
            return held == text.encode("utf-8", "surrogatepass")
        # A long text is encoded a slice at a time and each slice compared in place: no
        # second whole copy of the withheld text while the decision already holds one.
        # (Encoding is per code point, surrogates included, so the slices' bytes join up
        # to the whole text's.)
        if not len(text) <= len(held) <= 4 * len(text):
            return False
        at = 0
        for start in range(0, len(text), _SAME_TEXT_SLICE):
            part = text[start : start + _SAME_TEXT_SLICE].encode("utf-8", "surrogatepass")
            if not held.startswith(part, at):
                return False
            at += len(part)
        return at == len(held)

    def adopt(self, text: str) -> None:
        """Keep ``text``, just found equal to the withheld text, as the text: a carrier's
        own copy serves as the released text, and none is decoded."""
        if self.arguments is None and type(text) is str:
            self.arguments = text

    @property
    def executor(self) -> Executor:
        return Executor.SERVER if self.hosted else ITEMS[self.kind].executor

    def validate(
        self,
        registry: ToolRegistry,
        max_depth: int,
        hmac_key: bytes | None,
        clock: Callable[[], float],
    ) -> None:
        """Take the withheld bytes; parse, then schema. A failure is kept in ``error``."""
        started = clock()
        data = self.withheld()
        if hmac_key is not None:
            self.digest = hmac.new(hmac_key, data, sha256).hexdigest()
        kind = _INPUT_OF[self.kind]
        if ITEMS[self.kind].hosted_by:  # only Responses items name a server that runs them
            self.hosted = runs_on_server(self.kind, self.name, registry.declared)
        if kind is _FREE_TEXT:
            self._validate_free_text(registry, self.join())
            self.validation_ms = (clock() - started) * 1000
            return
        reason: QuarantineReason | None = None
        value: dict[str, Any] | None = None
        try:
            value = parse_utf8_arguments(data, max_depth=max_depth)
        except ArgumentsError as err:
            reason = err.reason
        if reason is not None or value is None:
            self.json_status = "invalid"
            self.trailing = reason is R.TRAILING_DATA
            self.error = reason
        elif kind is _JSON_ARGUMENTS:
            self.json_status, self.trailing = "valid", False
            self.move(_PARSED)
            spec = registry.get(self.name)
            if spec is None:
                self.schema_status, self.error = "unknown_tool", R.UNKNOWN_TOOL
            else:
                verdict = spec.validate(value)
                if verdict is None:
                    self.schema_status = "valid"
                    self.value = value
                    self.move(_SCHEMA_VALID)
                else:
                    self.schema_status, self.error = "invalid", R.SCHEMA_INVALID
                    self.keyword, self.path = verdict.keyword, verdict.path
        else:
            self.json_status, self.trailing = "valid", False
            self.move(CallInput.PARSED)
            self._validate_structure(registry, value)
        self.validation_ms = (clock() - started) * 1000

    def _validate_free_text(self, registry: ToolRegistry, text: str) -> None:
        """A custom tool's input: the tool must be declared, the input in its format.

        A ``text`` format accepts any string (``not_checked``); a grammar (lark or regex,
        ``core/values/grammar.py``) must accept the whole input, else ``schema_invalid`` with the
        keyword ``grammar``.
        """
        self.json_status, self.trailing = "not_parsed", None
        self.move(CallInput.PARSED)
        if self.hosted:
            # The server ran it (an xAI X search step): its input is its report.
            self.value = {"input": text}
            self.move(CallInput.SCHEMA_VALID)
            return
        if f"custom:{self.name}" not in registry.declared:
            self.schema_status, self.error = "unknown_tool", R.UNKNOWN_TOOL
            return
        grammar = registry.grammars.get(self.name)
        if grammar is not None and not grammar.accepts(text):
            self.schema_status, self.error = "invalid", R.SCHEMA_INVALID
            self.keyword, self.path = "grammar", "/input"
            return
        self.schema_status = "not_checked" if grammar is None else "valid"
        self.value = {"input": text}
        self.move(CallInput.SCHEMA_VALID)

    def _validate_structure(self, registry: ToolRegistry, value: dict[str, Any]) -> None:
        """A structured client item (its shape, and that it was declared), or a report."""
        rule = ITEMS[self.kind]
        if rule.declared_by and registry.declared.isdisjoint(rule.declared_by | rule.hosted_by):
            # A call, or the report of a tool the server runs (a hosted shell's output),
            # that no declaration of the request allows.
            self.schema_status, self.error = "unknown_tool", R.UNKNOWN_TOOL
            return
        if self.executor is Executor.CLIENT:
            if registry.declared.isdisjoint(rule.declared_by):
                self.schema_status, self.error = "unknown_tool", R.UNKNOWN_TOOL
                return
            fault = check_input(self.kind, value)
            if fault is not None:
                self.schema_status, self.error = "invalid", R.SCHEMA_INVALID
                self.keyword, self.path = rule.field or "input", fault
                return
            self.schema_status = "valid"
        else:
            self.schema_status = "not_checked"  # a report: nothing to run, nothing to check
        self.value = value
        self.move(CallInput.SCHEMA_VALID)

    def hand_over(self) -> None:
        """Drop this accumulator's text and value, at a release (the released call has them)
        and at a quarantine (:meth:`discard`); the counts and statuses stay for the record."""
        self.buffer = None
        self.data = None
        self.arguments = None
        self.value = None

    def discard(self, now: float) -> None:
        """Quarantine: drop every buffer; the counts and statuses stay for the record."""
        if self.stream_ms == 0.0:
            self.stream_ms = (now - self.opened_at) * 1000
        self.state = CallState.QUARANTINED
        self.hand_over()

    def record(
        self, common: Mapping[str, Any], *, item_id: str, tool_name: str | None, error: str | None
    ) -> DecisionRecord:
        """This call's sanitized record; ``common`` holds the attempt's own fields."""
        return DecisionRecord(
            **common,
            item_id=item_id,
            call_id=self.call_id,
            stream_event=self.last_event,
            tool_name=tool_name,
            buffer_bytes=self.nbytes,
            json_status=self.json_status,
            trailing_data=self.trailing,
            schema_status=self.schema_status,
            schema_keyword=self.keyword,
            schema_path=self.path,
            policy_status=self.policy_status,
            policy_reason=self.policy_reason,
            error_class=(self.error.value if self.error else error),
            stream_ms=round(self.stream_ms, 3),
            validation_ms=round(self.validation_ms, 3),
            policy_ms=round(self.policy_ms, 3),
            content_hmac=self.digest,
            item_type=self.kind,
            executor="server" if self.executor is Executor.SERVER else "client",
        )
