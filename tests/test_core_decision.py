"""The decision's memory: the withheld text stays UTF-8 bytes through parse and schema.

The attempt accumulates a call's fragments as UTF-8 and hands jiter those very bytes at the
terminal; the text is decoded only when something reads it (the released call's
``arguments``), or a carrier that assembled the same text lends its own copy. So the
decision holds the bytes and the parsed value, not also a text and a second copy of the
bytes for the parser.
"""

from __future__ import annotations

import copy
import json
import pickle
import tracemalloc
from typing import Any

import jiter
import pytest

from litellm_toolgate.core import Attempt, Carrier, CarrierCall, PolicyDecision, ToolRegistry
from litellm_toolgate.core.rules.policy import ReleasedCall

WRITE_FILE = {
    "type": "function",
    "function": {
        "name": "write_file",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            "required": ["path", "content"],
            "additionalProperties": False,
        },
    },
}


def sse(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return sse({"id": "c-1", "object": "chat.completion.chunk", "choices": [choice]})


def body(arguments: str, fragment: int) -> bytes:
    pieces = [arguments[i : i + fragment] for i in range(0, len(arguments), fragment)]
    opened = {"index": 0, "id": "call-w", "type": "function", "function": {"name": "write_file"}}
    out = [chunk({"role": "assistant", "tool_calls": [opened]})]
    out += [
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}) for piece in pieces
    ]
    out += [chunk({}, "tool_calls"), b"data: [DONE]\n\n"]
    return b"".join(out)


def streamed(arguments: str, fragment: int = 64) -> Attempt:
    attempt = Attempt(ToolRegistry.from_tools([WRITE_FILE]))
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    data = body(arguments, fragment)
    for start in range(0, len(data), 65_536):
        attempt.receive_bytes(data[start : start + 65_536])
    attempt.receive_eof()
    return attempt


def file_arguments(size: int, mark: str = "\u00e9") -> str:
    line = f"def f(x):\n    return x * 2  # {mark}\n"
    content = line * (size // len(line.encode()))
    return json.dumps({"path": "src/f.py", "content": content}, ensure_ascii=False)


def decide_all(attempt: Attempt, carrier: Carrier | None = None) -> list[ReleasedCall]:
    for call in attempt.conclude(carrier):
        attempt.decide(call.index, PolicyDecision.approve())
    return attempt.release()


def traced_peak(action: Any) -> tuple[int, Any]:
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        result = action()
        peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return peak, result


@pytest.mark.parametrize("mark", ["bench", "\u00e9", "\u20ac", "\U0001f600"])
def test_memory_through_the_decision_is_the_bytes_and_the_parse(mark: str) -> None:
    arguments = file_arguments(512 * 1024, mark)
    withheld = len(arguments.encode())
    # What the parser alone takes at its peak on these bytes: the value, and for text that
    # is not ASCII a transient buffer of jiter's own besides.
    parser, _ = traced_peak(
        lambda: jiter.from_json(arguments.encode(), allow_inf_nan=False, catch_duplicate_keys=True)
    )
    attempt = streamed(arguments)
    peak, released = traced_peak(lambda: decide_all(attempt))
    # The withheld bytes plus the parser's own peak, and nothing else of any size: decoding
    # a text besides them, or copying the bytes for the parser, would add 1x.
    assert peak <= withheld + parser + 0.1 * withheld, (peak / withheld, parser / withheld)
    if mark.isascii():
        assert peak <= 2.2 * withheld, peak / withheld  # the budget, for ASCII text
    assert released[0].arguments == arguments
    assert released[0].value == json.loads(arguments)


@pytest.mark.parametrize("lent", [False, True], ids=["withheld-bytes", "carrier-text"])
def test_an_attempt_that_outlives_its_release_holds_no_argument_text(lent: bool) -> None:
    # An attempt can outlive its stream (an edge's objects in a cycle of litellm's, until the
    # collector's pass): once released, what the caller needs is the released call's, and
    # the attempt keeps only counts and statuses, whatever text the release handed on.
    arguments = file_arguments(256 * 1024)
    withheld = len(arguments.encode())
    tracemalloc.start()
    try:
        attempt = streamed(arguments)
        carrier = None
        if lent:  # a copy of litellm's own, lent to the released call
            theirs = "".join([arguments[:100], arguments[100:]])
            carrier = Carrier({0: CarrierCall("call-w", "write_file", theirs)}, "tool_calls")
            del theirs
        released = decide_all(attempt, carrier)
        assert released[0].value["path"] == "src/f.py"
        with_the_release = tracemalloc.get_traced_memory()[0]
        del released, carrier
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The withheld bytes and the parsed value went with the released call.
    assert with_the_release - after >= 1.5 * withheld, (with_the_release - after) / withheld
    assert attempt.records()[0].buffer_bytes == withheld  # the counts stay for the record
    assert attempt.records()[0].execution_state == "released"


def test_the_decision_decodes_no_text() -> None:
    arguments = file_arguments(4096)
    attempt = streamed(arguments)
    calls = attempt.conclude()
    call = attempt._calls[0]
    assert call.arguments is None and call.data == arguments.encode()
    assert "return x" not in repr(call)
    assert calls[0].arguments == json.loads(arguments)
    attempt.decide(0, PolicyDecision.approve())
    released = attempt.release()
    assert released[0].arguments == arguments


def test_a_carrier_with_the_same_text_lends_it() -> None:
    arguments = file_arguments(4096)
    attempt = streamed(arguments)
    theirs = "".join([arguments[:100], arguments[100:]])  # a copy of litellm's own
    carrier = Carrier({0: CarrierCall("call-w", "write_file", theirs)}, "tool_calls")
    released = decide_all(attempt, carrier)
    assert released[0].arguments is theirs
    assert "return x" not in repr(attempt._calls[0])


def test_a_carrier_with_other_text_is_refused() -> None:
    arguments = file_arguments(4096)
    attempt = streamed(arguments)
    other = arguments.replace("é", "e")
    carrier = Carrier({0: CarrierCall("call-w", "write_file", other)}, "tool_calls")
    with pytest.raises(Exception) as caught:
        attempt.conclude(carrier)
    assert getattr(caught.value, "reason", None) is not None
    assert caught.value.reason.value == "carrier_mismatch"  # type: ignore[attr-defined]


def test_a_released_call_decodes_its_bytes_when_read() -> None:
    text = '{"s": "caf\u00e9 \U0001f600"}'
    call = ReleasedCall(0, "call-1", "t", text.encode("utf-8"), {"s": "caf\u00e9 \U0001f600"})
    assert call._text is None
    assert call.arguments == text
    assert call.arguments is call.arguments  # decoded once, then kept
    assert call._utf8 is None
    assert call == ReleasedCall(0, "call-1", "t", text, {"s": "caf\u00e9 \U0001f600"})
    assert "caf" not in repr(call) and repr(call).startswith("ReleasedCall(index=0")
    with pytest.raises(AttributeError):
        call.name = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(call)
    assert pickle.loads(pickle.dumps(call)) == call
    assert copy.copy(call) == call and copy.deepcopy(call) == call
