"""The proxy bench's text rows count each proxy's full collections by round.

A full collection costs a proxy 0.5-0.9 s of CPU, wherever an allocation triggers it: one
more in a proxy's share of a round moves its CPU per request by several per cent, so each
text row says how many fell in each proxy's rounds (``bench.proxyload._collections``). No
timing here: the arithmetic on a made-up cell, and the row's text.
"""

from __future__ import annotations

from bench.proxyload import Cell, _collections
from bench.report import _full_collections


def test_the_slices_collections_are_counted_by_round() -> None:
    cell = Cell()
    cell.full_collections = [1, 0, 2]
    cell.full_collection_ms = [700.0, 0.0, 1100.0]
    cell.requests = [100, 100, 100]
    full = _collections(cell)
    assert full == {"rounds": [1, 0, 2], "ms_per_request": 6.0, "cpu_s": 1.8}
    assert _full_collections(full) == (
        ", full collections 1, 0, 2 by round (1.8 s CPU, 6.00 ms a request)"
    )


def test_a_row_without_collections_says_nothing_of_them() -> None:
    assert _full_collections(None) == ""
