"""The ledger's work queue (compaction/ledger/queue.py) on SQLite and PostgreSQL: claims, leases, take-back,
single-writer catalogs, executors; concurrent claimers never take one item twice and lose none."""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path
from typing import Any, Iterator

import pytest

from compaction.core.queue import WorkStatus
from compaction.ledger import Ledger

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 1, 1, 12, tzinfo=UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


@pytest.fixture(params=["sqlite", "postgres"])
def queue_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'ledger.db'}"
    cluster: Any = request.getfixturevalue("postgres_cluster")
    return str(cluster.sqlalchemy_uri(cluster.create_database()))


@pytest.fixture()
def ledger(queue_url: str) -> Iterator[Ledger]:
    with Ledger.open(queue_url) as opened:
        yield opened


def enqueue(ledger: Ledger, catalog: str = "c", groups: tuple[int, ...] = (0,), now: dt.datetime = T0,
            table: str = "db.t", **kwargs: Any) -> str:
    return ledger.enqueue_work('{"plan": 1}', plan_id="p1", table_ref=table, catalog=catalog, group_ids=groups,
                               now=now, **kwargs).item_id


def test_claim_complete_and_ownership(ledger: Ledger) -> None:
    first = enqueue(ledger, groups=(0, 1))
    second = enqueue(ledger, now=at(1))
    other_catalog = enqueue(ledger, catalog="other", now=at(-5))
    assert ledger.has_pending_work(["c"], now=at(2)) and not ledger.has_pending_work(["none"], now=at(2))
    item = ledger.claim_work("e1", catalogs=["c"], lease_s=30, now=at(2))
    assert item is not None and item.item_id == first and item.status is WorkStatus.RUNNING
    assert item.attempts == 1 and item.executor_id == "e1" and item.group_ids == (0, 1)
    assert item.lease_expires_at == at(32)
    assert not ledger.renew_lease(first, "e2", lease_s=30, now=at(3))  # not its item
    assert ledger.renew_lease(first, "e1", lease_s=30, now=at(10))
    assert ledger.checkpoint_work(first, "e1", 0, {"status": "incomplete", "partitions": []})
    assert not ledger.complete_work(first, "e2", {0: {"status": "succeeded"}, 1: {"status": "succeeded"}})
    assert ledger.complete_work(first, "e1", {0: {"status": "succeeded"}, 1: {"status": "partial"}}, now=at(11))
    done = ledger.work_items([first])[0]
    assert done.status is WorkStatus.DONE and done.finished_at == at(11) and done.lease_expires_at is None
    assert done.result_of(1) == {"status": "partial"} and done.error is None
    assert not ledger.complete_work(first, "e1", {})  # finished already
    nxt = ledger.claim_work("e1", catalogs=["c"], now=at(12))
    assert nxt is not None and nxt.item_id == second
    assert ledger.claim_work("e1", catalogs=["c"], now=at(13)) is None
    assert ledger.work_items([other_catalog])[0].status is WorkStatus.QUEUED
    # A group without a result fails the item.
    assert ledger.complete_work(second, "e1", {}, now=at(14))
    failed = ledger.work_items([second])[0]
    assert failed.status is WorkStatus.FAILED and "no result for group(s) [0]" in (failed.error or "")


def test_expired_lease_requeues_then_fails_keeping_progress(ledger: Ledger) -> None:
    item_id = enqueue(ledger, max_attempts=2)
    assert ledger.claim_work("dead", catalogs=["c"], lease_s=10, now=at(0)) is not None
    assert ledger.take_back_expired_work(now=at(9)) == []
    assert not ledger.has_pending_work(["c"], now=at(9)) and ledger.has_pending_work(["c"], now=at(10))
    back = ledger.take_back_expired_work(now=at(10))
    assert [i.item_id for i in back] == [item_id] and back[0].status is WorkStatus.QUEUED
    assert "ran out" in (back[0].error or "") and back[0].executor_id is None
    assert not ledger.renew_lease(item_id, "dead", now=at(11))  # the dead executor lost it
    again = ledger.claim_work("e2", catalogs=["c"], lease_s=10, now=at(12))
    assert again is not None and again.attempts == 2
    assert ledger.checkpoint_work(item_id, "e2", 0, {"status": "incomplete", "partitions": [{"x": 1}]})
    # Taken back by the next claimer: no attempts left (and progress): failed, the checkpoint kept.
    assert ledger.claim_work("e3", catalogs=["c"], now=at(30)) is None
    failed = ledger.work_items([item_id])[0]
    assert failed.status is WorkStatus.FAILED and failed.finished_at == at(30)
    assert failed.result_of(0) == {"status": "incomplete", "partitions": [{"x": 1}]}
    assert not ledger.complete_work(item_id, "e2", {0: {"status": "succeeded"}})  # too late: not recorded


def test_progress_is_never_rerun(ledger: Ledger) -> None:
    item_id = enqueue(ledger, max_attempts=5)
    ledger.claim_work("e1", catalogs=["c"], lease_s=10, now=at(0))
    ledger.checkpoint_work(item_id, "e1", 0, {"status": "incomplete"})
    back = ledger.take_back_expired_work(now=at(20))
    assert back[0].status is WorkStatus.FAILED and "checkpointed is kept" in (back[0].error or "")


def test_exclusive_items_of_a_catalog_run_one_at_a_time(ledger: Ledger) -> None:
    a = enqueue(ledger, exclusive=True)
    b = enqueue(ledger, exclusive=True, now=at(1))
    c = enqueue(ledger, catalog="pg", exclusive=False, now=at(2))
    first = ledger.claim_work("e1", catalogs=["c", "pg"], now=at(3))
    assert first is not None and first.item_id == a
    nxt = ledger.claim_work("e2", catalogs=["c", "pg"], now=at(4))
    assert nxt is not None and nxt.item_id == c  # b waits: its catalog takes one commit at a time
    assert ledger.claim_work("e2", catalogs=["c", "pg"], now=at(5)) is None
    ledger.complete_work(a, "e1", {0: {}}, now=at(6))
    last = ledger.claim_work("e2", catalogs=["c"], now=at(7))
    assert last is not None and last.item_id == b


def test_a_table_is_compacted_by_one_item_at_a_time(ledger: Ledger) -> None:
    # The health watcher queues a table's next run while its current one runs: it waits for it, whichever
    # executor polls, while other tables' items run beside it.
    running = enqueue(ledger)
    behind = enqueue(ledger, now=at(1))
    other = enqueue(ledger, table="db.u", now=at(2))
    first = ledger.claim_work("e1", catalogs=["c"], now=at(3))
    assert first is not None and first.item_id == running
    nxt = ledger.claim_work("e2", catalogs=["c"], now=at(4))
    assert nxt is not None and nxt.item_id == other
    assert ledger.has_pending_work(["c"], now=at(5))
    assert ledger.claim_work("e2", catalogs=["c"], now=at(5)) is None
    ledger.complete_work(running, "e1", {0: {}}, now=at(6))
    last = ledger.claim_work("e2", catalogs=["c"], now=at(7))
    assert last is not None and last.item_id == behind


def test_cancel_only_queued(ledger: Ledger) -> None:
    running, queued = enqueue(ledger), enqueue(ledger, now=at(1))
    ledger.claim_work("e1", catalogs=["c"], now=at(2))
    assert ledger.cancel_queued_work([running, queued], "the waiter timed out", now=at(3)) == 1
    by_id = {i.item_id: i for i in ledger.work_items([running, queued])}
    assert by_id[queued].status is WorkStatus.CANCELLED and by_id[queued].error == "the waiter timed out"
    assert by_id[running].status is WorkStatus.RUNNING


def test_one_executor_start_per_catalog(ledger: Ledger) -> None:
    assert ledger.claim_executor_start("x1", catalog="c", host="h", master="local[2]", stale_after_s=60, now=at(0))
    assert not ledger.claim_executor_start("x2", catalog="c", host="h", master="local[2]", stale_after_s=60, now=at(30))
    assert ledger.claim_executor_start("y1", catalog="d", host="h", master="local[2]", stale_after_s=60, now=at(30))
    rec = ledger.executor_heartbeat("x1", status="idle", pid=123, generation=1, groups_run=0, heap_used_mb=80,
                                    now=at(50))
    assert rec.alive(at(100), 60) and not rec.alive(at(110), 60)
    # Its heartbeat stopped: another may start.
    assert ledger.claim_executor_start("x3", catalog="c", host="h", master="local[2]", stale_after_s=60, now=at(111))
    ledger.stop_executor("x3", "asked to stop", now=at(112))
    assert {e.executor_id for e in ledger.executors(catalog="c")} == {"x1"}
    stopped = [e for e in ledger.executors(catalog="c", include_stopped=True) if e.executor_id == "x3"][0]
    assert stopped.status == "stopped" and stopped.stop_reason == "asked to stop"


def test_concurrent_claimers_take_each_item_exactly_once(ledger: Ledger, queue_url: str) -> None:
    """Four threads, each with its own engine, claim and complete 40 items as fast as they can."""
    ids = {enqueue(ledger, now=at(i), table=f"db.t{i}") for i in range(40)}
    taken: dict[str, list[str]] = {}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def claimer(name: str) -> None:
        try:
            with Ledger.open(queue_url, timeout=60) as own:
                while True:
                    item = own.claim_work(name, catalogs=["c"], lease_s=600, now=at(100))
                    if item is None:
                        return
                    with lock:
                        taken.setdefault(item.item_id, []).append(name)
                    assert own.complete_work(item.item_id, name, {0: {"by": name}}, now=at(101))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=claimer, args=(f"e{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, errors
    assert set(taken) == ids and all(len(v) == 1 for v in taken.values())
    items = ledger.work_items(ids)
    assert all(i.status is WorkStatus.DONE and i.results[0]["by"] == taken[i.item_id][0] for i in items)


def test_a_run_whose_waiter_died_is_recorded_from_its_work_items(ledger: Ledger) -> None:
    from compaction.core.model import PartitionFieldValue, PartitionKey, TableIdentity
    from compaction.core.plan import (CompactionKind, CompactionMode, CompactionPlan, CompactionTask, JobGroup,
                                      PartitionDecision, partition_key_to_dict)
    from compaction.core.policy import CompactionPolicy
    from compaction.ops.runner import settle_queued_runs
    from compaction.ledger import OutcomeStatus, RunStatus

    k0, k1 = (PartitionKey(0, (PartitionFieldValue("p", "identity", "p", v),)) for v in ("a", "b"))
    plan = CompactionPlan(
        plan_id="", created_at=T0, table=TableIdentity("c", ("db",), "t"), base_snapshot_id=1, base_sequence_number=1,
        format_version=2, mode=CompactionMode.AUTO, policy=CompactionPolicy(),
        decisions=(PartitionDecision(k0, CompactionKind.MINOR, "r", {}), PartitionDecision(k1, CompactionKind.MINOR, "r", {})),
        groups=(JobGroup(0, (CompactionTask("t0", k0, CompactionKind.MINOR, (), ("e0",), 10),)),
                JobGroup(1, (CompactionTask("t1", k1, CompactionKind.MINOR, (), ("e1",), 10),))),
    ).with_content_id()
    run_id = ledger.start_run(plan=plan, now=at(0))
    item = ledger.enqueue_work(plan.to_json(), plan_id=plan.plan_id, table_ref="db.t", catalog="c",
                               group_ids=[0, 1], run_id=run_id, now=at(0))
    ledger.claim_work("e1", catalogs=["c"], now=at(1))
    from compaction.core.results import GroupResult, PartitionResult

    # What the executor stores for a group: the job's result JSON (compaction.core.results, versioned).
    done = GroupResult(plan.plan_id, 0, "db.t", partitions=[PartitionResult(
        partition_key_to_dict(k0), k0.label(), "minor", status="committed", commit_snapshot_ids=[5],
        validation={"level": "count", "result": "passed"})]).to_dict()
    ledger.complete_work(item.item_id, "e1", {0: done}, now=at(10))  # group 1 never reported
    assert settle_queued_runs(ledger, "db.t", "c", now=at(20)) == []  # within the grace: the waiter may record it
    assert ledger.run(run_id).status is RunStatus.RUNNING
    assert settle_queued_runs(ledger, "db.t", "c", now=at(45)) == [run_id]
    run = ledger.run(run_id)
    assert run.status is RunStatus.PARTIAL and run.finished_at is not None
    by_label = {o.partition_label: o for o in ledger.outcomes(run_id)}
    assert by_label[k0.label()].status is OutcomeStatus.COMMITTED and by_label[k0.label()].commit_snapshot_id == 5
    assert by_label[k1.label()].status is OutcomeStatus.FAILED
    assert settle_queued_runs(ledger, "db.t", "c", now=at(60)) == []  # once


def test_a_restarted_executor_takes_back_its_own_items_at_once(ledger: Ledger) -> None:
    mine, other = enqueue(ledger), enqueue(ledger, now=at(1), table="db.u")
    ledger.claim_work("x1", catalogs=["c"], lease_s=60, now=at(2))
    ledger.claim_work("x2", catalogs=["c"], lease_s=60, now=at(3))
    back = ledger.take_back_expired_work(now=at(4), dead_executor="x1")
    assert [(i.item_id, i.status) for i in back] == [(mine, WorkStatus.QUEUED)]
    assert "restarted" in (back[0].error or "")
    assert ledger.work_items([other])[0].status is WorkStatus.RUNNING  # another executor's lease still holds
