"""Memory freed at stream end: real proxies with the garbage collector off.

Two real LiteLLM proxy processes, each started by a launcher that calls ``gc.disable()``
before litellm's proxy command runs (``bench/proxysoak.py``): one with a no-op
``post_call`` guardrail, one with the gate, both in front of one loopback upstream. Each
serves the same text and tool-call streams, a few at once, after a warm-up. Then each
proxy's launcher runs one collection with ``gc.DEBUG_SAVEALL`` and counts what it found
unreachable: what would never be freed with the collector off.

* **No cycle of the gate's own.** None of the gate's objects (its types, or functions,
  generators and coroutines of its modules) is on a reference cycle that passes through no
  object of litellm's: each stream's objects go when the stream ends, by reference counting.
* **What hangs from litellm's cycles is small and fixed.** litellm's own stream objects hold
  each other in cycles (the no-op proxy leaves them too: its chunks, deltas, the response);
  the gate's objects they reach (the tap body on litellm's response, the held loggers on
  its logging object) are counted per stream and bounded.
* **Resident memory.** With the collector off litellm's cycles grow both proxies; the gate's
  growth may exceed the no-op's by at most a small allowance (a whole stream's chunks and
  attempt kept per stream would be tens of KiB).
* **No stream's reading state outlives it.** No attempt of the gate's is left reachable
  after the collection: what litellm's cycles hold of the gate reaches none.

The 10,000-stream soak is the bench's ``proxysoak`` row (``python -m bench --only
proxysoak``); this is its short version (``TOOLGATE_PROXY_SOAK_STREAMS``, 400 streams a
proxy after 100 to warm up, 1,000 streams in all: 67 s at a load average of 3; 1,600 took
268 s under a load average of 9).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from proxyproc import require_proxy

require_proxy()

from bench.common import Upstream  # noqa: E402
from bench.proxysoak import Soak, run_soak  # noqa: E402

STREAMS = int(os.environ.get("TOOLGATE_PROXY_SOAK_STREAMS", "400"))
WARM_UP = 100
# The gate's objects that litellm's own cycles reach, per stream: the closed tap body on
# litellm's httpx response, and what the hold puts on litellm's logging object (measured:
# 5 a stream before the body let go of its piece iterator and the hold of the attempt, 1
# since, text and tool calls alike). Many more would mean the gate hangs a stream's chunks
# or attempt on litellm's cycles.
HANGING_PER_STREAM = 8
# Resident growth the gate's proxy may have over the no-op's: a floor for the allocator's
# settling, and a per-stream allowance well under one stream's chunks (litellm's cycles
# keep about 180 KiB a stream with the collector off). A coarse check: the bench's 3,000
# stream run measured the gate 8.6 KiB a stream over the no-op before the closed tap body
# and the log hold let go of the attempt, the 10,000-stream run level with it since
# (docs/performance.md).
RSS_FLOOR = 16 * 2**20
RSS_PER_STREAM = 2 * 1024


@pytest.fixture(scope="module")
def soak() -> Iterator[dict[str, Soak]]:
    saved = os.environ.get("TOOLGATE_BENCH_PROXY_PYTHON")
    os.environ["TOOLGATE_BENCH_PROXY_PYTHON"] = sys.executable  # the proxy of this lane
    try:
        with Upstream() as upstream:
            yield run_soak(upstream, STREAMS, concurrency=8, samples=4, warm=WARM_UP)
    finally:
        if saved is None:
            os.environ.pop("TOOLGATE_BENCH_PROXY_PYTHON", None)
        else:
            os.environ["TOOLGATE_BENCH_PROXY_PYTHON"] = saved


def test_every_stream_ended_cleanly(soak: dict[str, Soak]) -> None:
    for kind, figures in soak.items():
        assert figures.errors == [], (kind, figures.errors[:5])


def test_the_collector_off_finds_litellms_cycles_in_both(soak: dict[str, Soak]) -> None:
    # The census works: litellm's own stream objects are in cycles behind either guardrail
    # (so the checks below look at a collection that found something).
    for kind, figures in soak.items():
        chunks = figures.by_kind().get("litellm.types.utils.ModelResponseStream", 0)
        assert chunks >= STREAMS, (kind, sorted(figures.by_kind().items())[:10])
    assert soak["noop"].gates_own() == {}


def test_no_object_of_the_gate_is_on_a_cycle_of_its_own(soak: dict[str, Soak]) -> None:
    assert soak["gate"].gates_cycles() == {}


def test_what_litellms_cycles_hold_of_the_gate_is_small_per_stream(
    soak: dict[str, Soak],
) -> None:
    hanging = soak["gate"].gates_own()
    assert sum(hanging.values()) <= HANGING_PER_STREAM * STREAMS, hanging


def test_the_gates_proxy_grows_no_more_than_the_noop_one(soak: dict[str, Soak]) -> None:
    gate, noop = soak["gate"].growth(), soak["noop"].growth()
    assert gate <= noop + RSS_FLOOR + RSS_PER_STREAM * STREAMS, (
        f"gate grew {gate / 2**20:.1f} MiB, noop {noop / 2**20:.1f} MiB over {STREAMS} streams "
        f"each (reads: gate {soak['gate'].rss}, noop {soak['noop'].rss})"
    )


def test_no_streams_reading_state_outlives_it(soak: dict[str, Soak]) -> None:
    # What litellm's cycles hold of the gate (its closed tap bodies, its logging object's
    # hold) reaches no attempt: a closed body lets go of its tap, the hold keeps the
    # decision and the attempt only weakly (edge/transport.py, edge/guardrail/loghold.py).
    # Counted at the census's collection: the attempts it found in cycles and those it left
    # reachable (an unfinished async generator among the garbage is resurrected, with what
    # it keeps, to be closed on the loop).
    live = soak["gate"].gates_live()
    attempts = live.get("litellm_toolgate.core.decision.attempt.Attempt", 0)
    assert attempts < STREAMS // 10, live


def test_the_allocators_figures_are_read_with_every_resident_size(soak: dict[str, Soak]) -> None:
    # The bench's diagnostic beside the resident size: what pymalloc and malloc hand out at
    # each read. With the collector off, litellm's cycles keep about 180 KiB a stream, so
    # what they hand out grows by far more than a quarter of that over the soak.
    for kind, figures in soak.items():
        assert len(figures.heap) == len(figures.rss), kind
        assert all(h.get("pymalloc_allocated", 0) > 0 for h in figures.heap), figures.heap
        held = figures.held()
        assert held[-1] - held[0] > STREAMS * 45 * 1024, (kind, held)
        assert figures.before_census.get("rss", 0) > 0, kind
