"""One tool call's accumulator: its fragments, its stage, and what each stage found.

The attempt owns one per (choice, tool index). Fragments are kept as opaque bytes until the
attempt reaches its terminal; then :meth:`CallAccumulator.validate` joins them once and takes
the call through the strict parse and the schema, recording each outcome for the decision
record. A quarantine drops every buffer at once (:meth:`discard`).

Why bytes: a model streams arguments a few characters at a time, and a list of small ``str``
objects costs about 60 bytes of overhead per fragment, several times the text itself. The
attempt already encodes each fragment to count its bytes against the limits, so the encoded
fragment is appended to one ``bytearray`` (amortized growth, about 1.1x the text) and decoded
once at the terminal. ``surrogatepass`` both ways makes the round trip exact, lone surrogates
included (the strict parse refuses them later, as before).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any

from .errors import QuarantineReason
from .records import JsonStatus, PolicyStatus, SchemaStatus
from .registry import ToolRegistry
from .state import CallInput, CallState, next_call_state
from .strictjson import ArgumentsError, parse_arguments

R = QuarantineReason


@dataclass(slots=True)
class CallAccumulator:
    index: int
    call_id: str
    name: str
    opened_at: float
    state: CallState = CallState.ITEM_OPEN
    buffer: bytearray = field(default_factory=bytearray, repr=False)
    """The fragments so far, UTF-8 (``surrogatepass``); emptied once joined or dropped."""
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
    arguments: str | None = None
    value: dict[str, Any] | None = None
    digest: str | None = None

    def move(self, event: CallInput) -> None:
        self.state = next_call_state(self.state, event)

    @property
    def fragments(self) -> list[str]:
        """The withheld text as pieces: one piece while held, none once dropped."""
        if self.arguments is not None:
            return [self.arguments]
        return [self.buffer.decode("utf-8", "surrogatepass")] if self.buffer else []

    def join(self) -> str:
        """The whole withheld text, decoded once; the byte buffer is released."""
        if self.arguments is None:
            self.arguments = self.buffer.decode("utf-8", "surrogatepass")
            self.buffer = bytearray()
        return self.arguments

    def validate(
        self,
        registry: ToolRegistry,
        max_depth: int,
        hmac_key: bytes | None,
        clock: Callable[[], float],
    ) -> None:
        """Join the fragments once; parse, then schema. A failure is kept in ``error``."""
        started = clock()
        text = self.join()
        if hmac_key is not None:
            self.digest = hmac.new(
                hmac_key, text.encode("utf-8", "surrogatepass"), sha256
            ).hexdigest()
        reason: QuarantineReason | None = None
        value: dict[str, Any] | None = None
        try:
            value = parse_arguments(text, max_depth=max_depth)
        except ArgumentsError as err:
            reason = err.reason
        if reason is not None or value is None:
            self.json_status = "invalid"
            self.trailing = reason is R.TRAILING_DATA
            self.error = reason
        else:
            self.json_status, self.trailing = "valid", False
            self.move(CallInput.PARSED)
            spec = registry.get(self.name)
            if spec is None:
                self.schema_status, self.error = "unknown_tool", R.UNKNOWN_TOOL
            else:
                verdict = spec.validate(value)
                if verdict is None:
                    self.schema_status = "valid"
                    self.value = value
                    self.move(CallInput.SCHEMA_VALID)
                else:
                    self.schema_status, self.error = "invalid", R.SCHEMA_INVALID
                    self.keyword, self.path = verdict.keyword, verdict.path
        self.validation_ms = (clock() - started) * 1000

    def discard(self, now: float) -> None:
        """Quarantine: drop every buffer; the counts and statuses stay for the record."""
        if self.stream_ms == 0.0:
            self.stream_ms = (now - self.opened_at) * 1000
        self.state = CallState.QUARANTINED
        self.buffer = bytearray()
        self.arguments = None
        self.value = None
