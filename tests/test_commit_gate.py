"""The ledger side of yielding to writers (compaction.ledger.writers): commit intents, and the gate every commit of
ours passes - it waits while a writer holds a lease, gives up or commits anyway after ``compaction.yield.max-wait``,
and a writer taking a lease waits for a commit already under way. Real SQLite ledger, real threads; ordering is
checked with events, never with timings."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest

from compaction.core.errors import YieldedToWritersError
from compaction.core.policy import CompactionPolicy
from compaction.core.yielding import GateAction
from compaction.ledger import Ledger, LedgerCommitGate
from compaction.ledger.errors import LedgerError

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 5, 1, 12, tzinfo=UTC)
WAIT = CompactionPolicy(yield_max_wait_seconds=120)


@pytest.fixture()
def ledger(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'l.db'}") as opened:
        yield opened


def test_commit_intents_live_until_ended_or_expired(ledger: Ledger) -> None:
    a = ledger.begin_commit_intent("db.t", "cat", "plan-1 MINOR", ttl_s=60, now=T0)
    b = ledger.begin_commit_intent("db.t", "cat", "plan-2 MAJOR", ttl_s=10, now=T0)
    ledger.begin_commit_intent("db.other", "cat", "plan-3", ttl_s=60, now=T0)
    assert {i.intent_id for i in ledger.live_commit_intents("db.t", catalog="cat", now=T0)} == {a, b}
    assert [i.intent_id for i in ledger.live_commit_intents("db.t", catalog="cat", now=T0 + dt.timedelta(seconds=11))] == [a]
    ledger.renew_commit_intent(b, ttl_s=60, now=T0 + dt.timedelta(seconds=5))
    ledger.end_commit_intent(a, now=T0 + dt.timedelta(seconds=6))
    assert [i.intent_id for i in ledger.live_commit_intents("db.t", catalog="cat", now=T0 + dt.timedelta(seconds=11))] == [b]
    ledger.end_commit_intent(a)  # ending twice is harmless


def test_a_commit_without_a_lease_goes_ahead_and_holds_its_intent_while_it_runs(ledger: Ledger) -> None:
    gate = LedgerCommitGate(ledger, "cat", "plan-1")
    with gate.commit_window("db.t", WAIT, "MINOR p=1") as decision:
        assert decision.action is GateAction.COMMIT
        [intent] = ledger.live_commit_intents("db.t", catalog="cat")
        assert intent.holder == "plan-1 MINOR p=1"
    assert ledger.live_commit_intents("db.t", catalog="cat") == []


def test_a_commit_waits_for_the_lease_and_goes_ahead_once_it_is_released(ledger: Ledger) -> None:
    lease = ledger.acquire_write_lease("db.t", "cat", "nightly-merge", ttl_s=600)
    lines: list[str] = []
    gate = LedgerCommitGate(ledger, "cat", "plan-1", poll_s=0.1, progress=lines.append)
    entered = threading.Event()
    released = threading.Event()

    def commit() -> None:
        with gate.commit_window("db.t", WAIT, "MAJOR p=1"):
            assert released.is_set(), "committed while the writer held its lease"
            entered.set()

    thread = threading.Thread(target=commit)
    thread.start()
    # While it waits, the waiting commit holds no intent: a writer starting now is not held up by it.
    while not lines:
        threading.Event().wait(0.05)
    assert "nightly-merge" in lines[0] and ledger.live_commit_intents("db.t", catalog="cat") == []
    assert not entered.is_set()
    released.set()
    ledger.release_write_lease(lease)
    thread.join(timeout=30)
    assert entered.is_set()
    assert gate.decisions[-1].action is GateAction.COMMIT and "ended after" in gate.decisions[-1].reason


def test_an_expired_lease_does_not_hold_a_commit(ledger: Ledger) -> None:
    ledger.acquire_write_lease("db.t", "cat", "crashed-writer", ttl_s=0.01)
    threading.Event().wait(0.05)
    with LedgerCommitGate(ledger, "cat", "plan-1").commit_window("db.t", WAIT, "MINOR") as decision:
        assert decision.action is GateAction.COMMIT


def test_after_the_bound_the_commit_gives_up_or_commits_anyway(ledger: Ledger) -> None:
    ledger.acquire_write_lease("db.t", "cat", "stuck-writer", ttl_s=600)
    skip = CompactionPolicy(yield_max_wait_seconds=0, yield_on_timeout="skip")
    gate = LedgerCommitGate(ledger, "cat", "plan-1")
    with pytest.raises(YieldedToWritersError, match="stuck-writer") as raised:
        with gate.commit_window("db.t", skip, "MINOR p=1"):
            pytest.fail("committed under a live lease")
    assert raised.value.exit_code == 13 and raised.value.retryable
    # The job's later commits on the table give up at once (no second wait), other tables are not affected.
    with pytest.raises(YieldedToWritersError):
        with gate.commit_window("db.t", WAIT, "MINOR p=2"):
            pytest.fail("committed under a live lease")
    with gate.commit_window("db.other", WAIT, "MINOR"):
        pass
    commit = CompactionPolicy(yield_max_wait_seconds=0, yield_on_timeout="commit")
    with LedgerCommitGate(ledger, "cat", "plan-2").commit_window("db.t", commit, "MAJOR") as decision:
        assert decision.action is GateAction.COMMIT_ANYWAY and "stuck-writer" in decision.reason
    assert ledger.live_commit_intents("db.t", catalog="cat") == []


def test_a_writer_taking_a_lease_waits_for_the_commit_under_way(ledger: Ledger) -> None:
    gate = LedgerCommitGate(ledger, "cat", "plan-1")
    inside, leave = threading.Event(), threading.Event()
    order: list[str] = []

    def commit() -> None:
        with gate.commit_window("db.t", WAIT, "MAJOR p=1"):
            inside.set()
            leave.wait(30)
            order.append("compaction committed")

    thread = threading.Thread(target=commit)
    thread.start()
    assert inside.wait(30)
    ledger.acquire_write_lease("db.t", "cat", "etl", ttl_s=600)
    with pytest.raises(LedgerError, match="still under way"):
        ledger.wait_for_commit_intents("db.t", catalog="cat", timeout_s=0)
    waiter = threading.Thread(target=lambda: (ledger.wait_for_commit_intents("db.t", catalog="cat", timeout_s=60),
                                              order.append("writer starts")))
    waiter.start()
    leave.set()
    thread.join(timeout=30)
    waiter.join(timeout=60)
    assert order == ["compaction committed", "writer starts"]


def test_a_gate_opens_its_ledger_at_the_first_commit_and_waits_out_an_outage(
        ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A spark-submit job's gate opens the ledger only when it commits, and a ledger that does not answer then (the
    database restarting) is waited for like the catalog; past the bound the commit fails with nothing committed."""
    import compaction.ledger.writers as writers

    monkeypatch.setattr(writers, "CATALOG_RETRY_INTERVAL_S", 0.01)
    opened: list[str] = []

    def flaky_open() -> Ledger:
        opened.append("try")
        if len(opened) < 3:
            raise LedgerError("connection refused")
        return ledger

    lines: list[str] = []
    gate = LedgerCommitGate(flaky_open, "cat", "job", progress=lines.append)
    assert opened == []  # nothing opened before the first commit
    with gate.commit_window("db.t", WAIT, "MINOR") as decision:
        assert decision.action is GateAction.COMMIT
    assert len(opened) == 3 and any("waiting for the ledger" in line for line in lines)

    def down() -> Ledger:
        raise LedgerError("connection refused")

    with pytest.raises(LedgerError, match="did not answer for 0 s, nothing committed"):
        with LedgerCommitGate(down, "cat", "job", outage_s=0).commit_window("db.t", WAIT, "MAJOR"):
            pytest.fail("committed without reading the leases")
