"""What a released call leaves behind once its caller is done with it, before any collection.

litellm's own stream objects hold each other in reference cycles, and the gate's objects for
a call (the tap, the attempt) hang from them until Python's collector passes: in a proxy
that has moved them to an old generation, that can be long after the stream ended. So once a
call is released the gate keeps none of its text or value: the released call has them, and
they go when the caller lets go of it. Measured here with the collector off, through the real
litellm against the loopback upstream, as the allocations still alive that the gate's own
files made (tracemalloc). Before this was so, three 128 KiB calls left 0.8 to 1.2 MiB of
the gate's (the withheld bytes, the parsed value and, on the wrapper, litellm's text lent to
the release, each kept by the attempt); now 6 to 8 KiB a call of counts and statuses.
"""

from __future__ import annotations

import gc
import json
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import litellm
import pytest
from loopback import call, kwargs, tool_calls

from litellm_toolgate import ToolGate, ToolGateGuardrail
from litellm_toolgate.loopback.upstream import FakeUpstream, Scripted, calls_stream

PACKAGE = str(Path(__file__).resolve().parent.parent / "litellm_toolgate")
TOOLS = json.loads((Path(PACKAGE).parent / "config_examples" / "tools.json").read_text())
ARGUMENTS = json.dumps({"path": "notes.txt", "content": "q" * 128 * 1024})
CALLS = 3


def _entry(how: str) -> tuple[Callable[..., Any], Callable[..., Any], Callable[[], None]]:
    """The sync and async calls of one way to use the gate, and how to put it away."""
    if how == "wrapper":
        gate = ToolGate(TOOLS)
        return gate.completion, gate.acompletion, lambda: None
    guardrail = ToolGateGuardrail(TOOLS)
    saved = litellm.callbacks
    litellm.callbacks = [guardrail]

    def put_away() -> None:
        litellm.callbacks = saved
        for name in dir(litellm):  # litellm copies callbacks into lists of its own
            value = getattr(litellm, name, None)
            if isinstance(value, list):
                value[:] = [cb for cb in value if cb is not guardrail]
        guardrail.close()

    return litellm.completion, litellm.acompletion, put_away


def _released_once(upstream: FakeUpstream, sync: Any, asynchronous_call: Any, a: bool) -> int:
    """One streamed 128 KiB call, read to its end; the number of calls released."""
    upstream.enqueue(Scripted(calls_stream([("call_1", "write_file", ARGUMENTS)])))
    chunks, fault = call(sync, asynchronous_call, kwargs(upstream), asynchronous=a)
    assert fault is None
    return len(tool_calls(chunks))


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("how", ["wrapper", "callback"])
def test_a_released_call_leaves_no_text_of_the_gates_before_a_collection(
    upstream: FakeUpstream, how: str, asynchronous: bool
) -> None:
    sync, asynchronous_call, put_away = _entry(how)
    try:
        assert _released_once(upstream, sync, asynchronous_call, asynchronous) >= 1  # warm-up
        gc.collect()
        gc.disable()
        tracemalloc.start()
        try:
            released = [
                _released_once(upstream, sync, asynchronous_call, asynchronous)
                for _ in range(CALLS)
            ]
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
            gc.enable()
    finally:
        put_away()
    assert all(released), released
    kept = snapshot.filter_traces([tracemalloc.Filter(True, PACKAGE + "/*")])
    held = sum(stat.size for stat in kept.statistics("filename"))
    # Less than one call's argument text for all three calls together.
    assert held < len(ARGUMENTS), (held, [str(s) for s in kept.statistics("filename")[:4]])
