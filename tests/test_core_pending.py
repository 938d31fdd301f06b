"""core.pending: per-request state between hooks, keyed by a token only the gate makes."""

from __future__ import annotations

from typing import Any

from litellm_toolgate.core.decision.pending import PendingTable

HOLDERS = ("metadata", "litellm_metadata")


def _table() -> PendingTable[str]:
    return PendingTable(HOLDERS, "token")


def test_a_value_is_found_once_by_the_token_in_its_metadata() -> None:
    table = _table()
    request: dict[str, Any] = {"litellm_call_id": "chosen-by-the-client"}
    table.remember(request, "tap", bound=10)
    assert set(request["metadata"]) == {"token"}  # created when the request had none
    assert len(table) == 1
    # The later hook gets another object sharing only the metadata.
    later = {"metadata": request["metadata"]}
    assert table.take(later) == "tap"
    assert table.take(later) is None
    assert len(table) == 0


def test_the_token_goes_into_every_holder_and_overwrites_the_clients() -> None:
    table = _table()
    request: dict[str, Any] = {"metadata": {"token": "forged"}, "litellm_metadata": {}}
    table.remember(request, "tap", bound=10)
    token = request["metadata"]["token"]
    assert token != "forged" and request["litellm_metadata"]["token"] == token
    assert table.take({"litellm_metadata": {"token": token}}) == "tap"


def test_two_requests_with_the_same_call_id_keep_their_own_values() -> None:
    table = _table()
    first: dict[str, Any] = {"litellm_call_id": "same", "metadata": {}}
    second: dict[str, Any] = {"litellm_call_id": "same", "metadata": {}}
    table.remember(first, "first", bound=10)
    table.remember(second, "second", bound=10)
    assert table.take(second) == "second"
    assert table.take(first) == "first"


def test_a_retried_request_drops_its_earlier_value() -> None:
    table = _table()
    request: dict[str, Any] = {"metadata": {}}
    table.remember(request, "first try", bound=10)
    earlier = request["metadata"]["token"]
    table.remember(request, "retry", bound=10)
    assert len(table) == 1
    assert table.take({"metadata": {"token": earlier}}) is None
    assert table.take(request) == "retry"


def test_an_ambiguous_or_unknown_request_gets_nothing() -> None:
    table = _table()
    one: dict[str, Any] = {"metadata": {}}
    two: dict[str, Any] = {"metadata": {}}
    table.remember(one, "one", bound=10)
    table.remember(two, "two", bound=10)
    mixed = {"metadata": one["metadata"], "litellm_metadata": two["metadata"]}
    assert table.take(mixed) is None  # refused, never merged: both are forgotten
    assert len(table) == 0
    assert table.take({}) is None
    assert table.take({"metadata": {"token": 7}}) is None  # not a token of the table's
    assert table.take({"metadata": "not a mapping"}) is None
    table.remember(one, "one", bound=10)
    forged = {"metadata": {"token": 7}, "litellm_metadata": one["metadata"]}
    assert table.take(forged) is None  # two values, one of them not even a token
    assert len(table) == 0


def test_the_table_is_bounded_oldest_out_first() -> None:
    table = _table()
    requests: list[dict[str, Any]] = [{"metadata": {}} for _ in range(5)]
    for i, request in enumerate(requests):
        table.remember(request, f"tap-{i}", bound=3)
    assert len(table) == 3
    assert table.take(requests[0]) is None and table.take(requests[1]) is None
    assert [table.take(r) for r in requests[2:]] == ["tap-2", "tap-3", "tap-4"]
