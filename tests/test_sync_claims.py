"""edge.sync.claims: calls armed per thread and call id, claimed once by a one-time token."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from litellm_toolgate.edge.sync.claims import ClaimTable, Vouches, new_token


@dataclass
class Claim:
    call_id: str
    token: str = field(default_factory=new_token)
    thread: int = field(default_factory=threading.get_ident)


def _elsewhere(work: Any) -> Any:
    """``work()`` run on another thread; its result."""
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(work()))
    thread.start()
    thread.join()
    return out[0]


def test_a_claim_is_taken_once_by_its_token() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    claim = Claim("call-1")
    table.add(claim)
    assert len(table) == 1
    assert table.take(claim.token) is claim
    assert table.take(claim.token) is None
    assert table.take(new_token()) is None


def test_a_claim_is_taken_only_on_the_thread_that_armed_it() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    claim = Claim("call-1")
    table.add(claim)
    assert _elsewhere(lambda: table.take(claim.token)) is None
    assert table.take(claim.token) is None  # the token is spent: that request was refused
    assert table.settle("call-1") is claim  # and the call, never claimed, is refused


def test_arming_a_call_again_voids_its_earlier_claim() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    first, retry = Claim("call-1"), Claim("call-1")
    table.add(first)
    table.add(retry)
    assert len(table) == 1
    assert table.take(first.token) is None
    assert table.take(retry.token) is retry


def test_settling_forgets_this_threads_claim_of_the_call() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    claim = Claim("call-1")
    table.add(claim)
    assert _elsewhere(lambda: table.settle("call-1")) is None  # same id, another thread
    assert table.settle("call-2") is None
    assert table.settle("call-1") is claim
    assert len(table) == 0
    assert table.take(claim.token) is None
    assert table.settle("call-1") is None


def test_a_call_is_vouched_for_on_its_thread_while_it_is_made() -> None:
    vouches = Vouches()
    assert "call-1" not in vouches
    with vouches.vouched("call-1"):
        assert "call-1" in vouches
        assert "call-2" not in vouches
        assert not _elsewhere(lambda: "call-1" in vouches)
    assert "call-1" not in vouches


def test_tokens_are_fresh_and_header_safe() -> None:
    tokens = {new_token() for _ in range(100)}
    assert len(tokens) == 100
    assert all(t.replace("-", "").replace("_", "").isalnum() for t in tokens)


def test_a_thread_holds_one_claim_whatever_became_of_the_earlier_ones() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    for n in range(1000):  # calls that failed before they were settled
        table.add(Claim(f"call-{n}"))
    assert len(table) == 1 and table.threads == 1


def test_claims_of_ended_threads_are_swept() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    for n in range(3 * ClaimTable.SWEEP):
        _elsewhere(lambda n=n: table.add(Claim(f"call-{n}")))
    assert table.threads <= ClaimTable.SWEEP + 1


def test_a_claim_put_back_is_taken_again_until_its_call_is_settled() -> None:
    table: ClaimTable[Claim] = ClaimTable()
    claim = Claim("call-1")
    table.add(claim)
    assert table.take(claim.token) is claim
    table.put_back(claim)  # the host resends the same request (a rate limit, say)
    assert table.take(claim.token) is claim
    assert len(table) == 0  # claimed: nothing is left of it
    table.put_back(claim)
    assert table.settle("call-1") is claim  # the call ended (its failure was logged)
    assert table.take(claim.token) is None and len(table) == 0
    later = Claim("call-2")
    table.add(later)
    table.put_back(claim)  # the thread armed another call since: not put back
    assert table.take(claim.token) is None and table.take(later.token) is later


def test_a_claim_the_table_forgets_on_its_own_is_handed_to_dropped() -> None:
    """Voided by its thread's next claim or swept with its ended thread: the host is told
    (it gives back what the claim holds); taken or settled claims are not reported."""
    dropped: list[str] = []
    table: ClaimTable[Claim] = ClaimTable(dropped=lambda claim: dropped.append(claim.call_id))
    table.add(Claim("call-1"))
    table.add(Claim("call-2"))  # voids call-1
    assert dropped == ["call-1"]
    taken = Claim("call-3")
    table.add(taken)  # voids call-2
    assert table.take(taken.token) is taken
    settled = Claim("call-4")
    table.add(settled)
    assert table.settle("call-4") is settled
    assert dropped == ["call-1", "call-2"]
    for n in range(2 * ClaimTable.SWEEP):
        _elsewhere(lambda n=n: table.add(Claim(f"gone-{n}")))
    assert sum(name.startswith("gone-") for name in dropped) >= ClaimTable.SWEEP


def test_the_last_resort_says_only_what_the_gate_knows() -> None:
    """Issue 38, 11: a held refusal whose request never reached a claiming transport, and
    whose answer is not found: the last resort does not claim that the call "was not sent"
    (the gate cannot know) nor that it "went out through an HTTP client" (litellm may have
    answered it without a request); the refusal it carries is typed, with the same text."""
    from litellm_toolgate.core.errors import ToolGateError
    from litellm_toolgate.edge.sync import claiming

    kwargs = {"litellm_call_id": f"call-{new_token()}"}
    claiming.CLAIMS.refuse(
        kwargs, "this sync call's request is not visible to the gate; it was not sent"
    )
    try:
        claiming.check_claimed(kwargs)
    except claiming.SyncCallStopped as stop:
        stopped = stop
    else:
        raise AssertionError("an unanswered refusal passed")
    message = str(stopped)
    assert "not visible to the gate" in message
    assert "not sent" not in message and "went out through" not in message
    assert "no request at all" in message
    assert isinstance(stopped.refusal, ToolGateError) and str(stopped.refusal) == message
