"""Counts of what the attack suites tried, printed at the end of a pytest run.

The property tests, fault injection and memory tests add to these counters as they run;
``conftest.py`` prints them in the terminal summary, so the figures in the README's
reliability section come from a real run, and any run shows its own. Counted:

* ``streams``: generated stream bodies fed to the gate (one per hypothesis example run,
  shrinking included), each replayed whole and split;
* ``bad_streams``: those the independent oracle says must be quarantined;
* ``released_bad``: bad streams the gate released anyway (a test fails if this is not 0);
* ``responses_streams``, ``responses_bad_streams``, ``responses_released_bad``: the same
  for generated Responses streams (``test_core_responses_properties.py``), and
  ``responses_bytewise``: those of them also fed one byte at a time;
* ``faults``: faults injected through the real litellm over loopback (cuts, stalls, HTTP
  errors, oversized upstreams), each a separate request;
* ``fault_releases``: tool calls released in those requests (a test fails if not 0).
"""

from __future__ import annotations

from collections import Counter

COUNTS: Counter[str] = Counter()

LABELS = {
    "streams": "generated streams fed to the core",
    "bad_streams": "  of which the oracle says quarantine",
    "released_bad": "  of which the gate released",
    "responses_streams": "generated Responses streams fed to the core",
    "responses_bad_streams": "  of which the Responses oracle says quarantine",
    "responses_released_bad": "  of which the gate released",
    "responses_bytewise": "  of which fed one byte at a time",
    "anthropic_streams": "generated Anthropic streams fed to the core",
    "gemini_streams": "generated Gemini streams fed to the core",
    "ollama_streams": "generated Ollama streams fed to the core",
    "faults": "faults injected through litellm over loopback",
    "fault_releases": "  tool calls released in them",
}


def count(key: str, n: int = 1) -> None:
    COUNTS[key] += n


def summary() -> list[str]:
    if not COUNTS:
        return []
    return [f"{LABELS.get(k, k)}: {COUNTS[k]:,}" for k in LABELS if k in COUNTS] + [
        f"{k}: {v:,}" for k, v in sorted(COUNTS.items()) if k not in LABELS
    ]
