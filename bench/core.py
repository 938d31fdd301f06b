"""The gate core alone, without litellm or a socket: throughput, decision latency, memory.

* ``core``: the core fed the raw body in 64 KiB pieces, vs the floor (:func:`floor_decode`:
  a bare SSE line split plus ``json.loads`` of every data line over the same pieces).
* ``decision``: parse + schema + policy for one call, for a document of many small objects
  (the schema's worst case) and one long string (a file's content).
* ``memory``: tracemalloc peak over the withheld argument bytes, while streaming, held at
  the terminal event, and through the decision.
"""

from __future__ import annotations

import codecs
import gc
import json
import statistics
import time
import tracemalloc

import jiter
import jsonschema_rs

from bench.bodies import TOOLS, count_events, file_arguments, rows_arguments, tool_body
from bench.common import Row, Timer, pair_rows, summary
from bench.report import log
from litellm_toolgate import PolicyDecision
from litellm_toolgate.core.decision.attempt import Attempt
from litellm_toolgate.core.records.metrics import Observers
from litellm_toolgate.core.values.registry import ToolRegistry

PIECE = 65_536


# ---- the core alone ---------------------------------------------------------------------------
def floor_decode(pieces: list[bytes]) -> int:
    """The floor: incremental UTF-8, a line split, json.loads of every data line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    rest = ""
    n = 0
    for piece in pieces:
        lines = (rest + decoder.decode(piece)).split("\n")
        rest = lines.pop()
        for line in lines:
            if line.startswith("data:"):
                data = line[5:].lstrip(" ")
                if data != "[DONE]":
                    json.loads(data)
                n += 1
    return n


def core_stream(
    registry: ToolRegistry, pieces: list[bytes], observers: Observers | None = None
) -> Attempt:
    attempt = Attempt(registry, observers=observers)
    attempt.bind_response(content_type="text/event-stream", streamed=True)
    for piece in pieces:
        attempt.receive_bytes(piece)
    attempt.receive_eof()
    return attempt


def core_whole(registry: ToolRegistry, pieces: list[bytes]) -> None:
    attempt = core_stream(registry, pieces)
    for call in attempt.conclude():
        attempt.decide(call.index, PolicyDecision.approve())
    attempt.release()


def split(body: bytes, size: int = PIECE) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


def core_section(shapes: list[tuple[str, bytes, int]]) -> list[Row]:
    registry = ToolRegistry.from_tools(TOOLS)
    rows: list[Row] = []
    for label, body, repeats in shapes:
        pieces = split(body)
        events = count_events(body)
        assert floor_decode(pieces) == events
        floor_decode(pieces)
        core_whole(registry, pieces)
        base: list[Timer] = []
        stream: list[Timer] = []
        whole: list[Timer] = []
        for _ in range(repeats):
            with Timer() as t:
                floor_decode(pieces)
            base.append(t)
            with Timer() as t:
                core_stream(registry, pieces)
            stream.append(t)
            with Timer() as t:
                core_whole(registry, pieces)
            whole.append(t)
        rows.append(pair_rows("core", f"stream {label}", base, stream, events, 1.5))
        log(rows[-1])
        rows.append(pair_rows("core", f"stream + decision {label}", base, whole, events, None))
        log(rows[-1])
    return rows


# ---- decision latency -------------------------------------------------------------------------
def prepared(registry: ToolRegistry, name: str, arguments: str) -> Attempt:
    fragments = max(1, len(arguments) // 64)
    body, _ = tool_body(fragments + 5, arguments=arguments, name=name)
    return core_stream(registry, split(body))


def floor_decision(arguments: str, validator: jsonschema_rs.Validator) -> None:
    """The floor of a decision: jiter's parse (duplicate keys refused) and jsonschema-rs."""
    value = jiter.from_json(arguments.encode(), allow_inf_nan=False, catch_duplicate_keys=True)
    if not validator.is_valid(value):
        raise AssertionError("the bench's arguments fit their schema")


def decision_section(sizes: list[tuple[str, int, int]]) -> list[Row]:
    """Decision latency, paired against the floor (:func:`floor_decision`) on the same text.

    Times are this thread's CPU time (nanosecond resolution on Linux): the decision is CPU
    bound, and on a shared machine wall time mostly measures the other processes. Budgets,
    judged on the median of the per-pair ratios: many small objects <= 1.5x the floor, one
    long string <= 2x; the absolute budgets of the previous round stay in the row as
    ``budget_us`` for the README.
    """
    registry = ToolRegistry.from_tools(TOOLS)
    budgets = {2_048: 50.0, 16_384: 200.0, 1_048_576: 10_000.0}
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    rows: list[Row] = []
    for shape, tool, make, ratio_budget in (
        ("many small objects", "record_rows", rows_arguments, 1.5),
        ("one long string", "write_file", file_arguments, 2.0),
    ):
        validator = jsonschema_rs.validator_for(schemas[tool], validate_formats=False)
        for label, size, repeats in sizes:
            arguments = make(size)
            times: list[float] = []
            floors: list[float] = []
            for i in range(repeats + 1):
                # Each attempt is streamed right before its decision, as on a gated stream
                # (the decision follows the last byte received, so the withheld bytes are
                # still in the cache, as the floor's text is), and dropped once decided, as
                # the floor's value is: a decided attempt left alive keeps its value, which
                # every later GC pass would walk.
                attempt = prepared(registry, tool, arguments)
                started = time.thread_time()
                floor_decision(arguments, validator)
                floor_elapsed = time.thread_time() - started
                started = time.thread_time()
                for call in attempt.conclude():
                    attempt.decide(call.index, PolicyDecision.approve())
                elapsed = time.thread_time() - started
                attempt.release()
                del attempt
                if i:  # the first one warms the validator cache
                    times.append(elapsed * 1e6)
                    floors.append(floor_elapsed * 1e6)
            ratios = [t / f for t, f in zip(times, floors, strict=True)]
            judged = ratio_budget if size > 2_048 or shape == "many small objects" else None
            row: Row = {
                "section": "decision",
                "name": f"{label} {shape}",
                "bytes": len(arguments),
                "us": summary(times),
                "floor_us": summary(floors),
                "ratio": summary(ratios),
                "budget_us": budgets.get(size),
                "budget_ratio": judged,
            }
            if judged is not None:
                row["met"] = statistics.median(ratios) <= judged
            rows.append(row)
            log(row)
    return rows


# ---- memory -----------------------------------------------------------------------------------
def memory_section(size: int, fragment_sizes: list[int]) -> list[Row]:
    registry = ToolRegistry.from_tools(TOOLS)
    arguments = file_arguments(size)
    withheld = len(arguments.encode())
    rows: list[Row] = []
    for fragment in fragment_sizes:
        body, _ = tool_body(max(6, withheld // fragment + 5), arguments=arguments)
        pieces = split(body)
        gc.collect()
        tracemalloc.start()
        try:
            start = tracemalloc.get_traced_memory()[0]
            attempt = core_stream(registry, pieces)
            streamed_peak = tracemalloc.get_traced_memory()[1] - start
            held = tracemalloc.get_traced_memory()[0] - start
            tracemalloc.reset_peak()
            for call in attempt.conclude():
                attempt.decide(call.index, PolicyDecision.approve())
            released = attempt.release()
            decided_peak = tracemalloc.get_traced_memory()[1] - start
            assert released and released[0].arguments == arguments
            del attempt, released
        finally:
            tracemalloc.stop()
        row: Row = {
            "section": "memory",
            "name": f"{withheld // 1024} KiB withheld, {fragment}-byte fragments",
            "withheld_bytes": withheld,
            "streaming_peak_ratio": streamed_peak / withheld,
            "held_at_terminal_ratio": held / withheld,
            "decision_peak_ratio": decided_peak / withheld,
            "budget_ratio": 1.35,
            "decision_budget_ratio": 2.2,
            "met": streamed_peak / withheld <= 1.35 and decided_peak / withheld <= 2.2,
        }
        rows.append(row)
        log(row)
    return rows
