"""A snapshot of ours found on main without a check (its job was killed between the commit and the check)
is checked at the next plan, undone if it fails while still current, and the ledger says what happened.

In-process: the check (compaction.spark.posthoc) on a real Iceberg table with a real ledger, for a good commit, a bad
one that is current (rolled back) and a bad one a writer committed on top of (needs attention). End to end: a job
killed by SIGKILL right after its rewrite committed (fault injection ``after-rewrite``), then ``run_table`` again,
which checks that commit through spark-submit before planning.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any, Sequence

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.model import TableIdentity
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table, load_table
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.posthoc import pending_checks, run_posthoc_checks
from compaction.ops.runner import run_table
from compaction.spark import jvm as J
from compaction.spark.major import PLAN_PROPERTY, rewrite_partition
from compaction.spark.posthoc import check_snapshots
from compaction.spark.validation import ValidationLevel
from icecompact_testing.oracle import read_table
from icecompact_testing.processes import SparkSubmitKiller
from compaction.demo.workload import WorkloadSpec, generate

NOW = dt.datetime.now(dt.timezone.utc)


@pytest.fixture()
def ledger(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def _in_process(spark: Any):  # type: ignore[no-untyped-def]
    def check(identity: TableIdentity, snapshot_ids: Sequence[int], level: str) -> list[dict[str, Any]]:
        return check_snapshots(spark, identity, list(snapshot_ids), ValidationLevel.parse(level))

    return check


def _failed_run(ledger: Ledger, catalog: CatalogConfig, name: str) -> str:
    """A plan of the table whose run the ledger has as failed (its job was killed): returns the plan id."""
    state = inspect_table(catalog, name)
    the_plan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MAJOR, NOW)
    run_id = ledger.start_run(plan=the_plan, now=NOW)
    ledger.finish_run(run_id, RunStatus.FAILED, exit_code=8, error="job group 0: killed", now=NOW)
    return the_plan.plan_id


def _jtable(spark: Any, workload: Any) -> Any:
    table = J.load_table(spark, workload.table)
    table.refresh()
    return table


def _drop_a_data_file(spark: Any, workload: Any, plan_id: str) -> int:
    """A commit 'of ours' that loses rows: it deletes one live data file."""
    table = _jtable(spark, workload)
    tasks = table.newScan().planFiles()
    try:
        data_file = tasks.iterator().next().file()
    finally:
        tasks.close()
    delete = table.newDelete()
    delete.deleteFile(data_file)
    delete.set(PLAN_PROPERTY, plan_id)
    delete.commit()
    table.refresh()
    return int(table.currentSnapshot().snapshotId())


def test_a_good_commit_is_checked_once_and_passes(spark, sqlite_catalog: CatalogConfig, ledger: Ledger) -> None:  # type: ignore[no-untyped-def]
    workload = generate(spark, sqlite_catalog, "ph.good", WorkloadSpec(seed=21, partitioning="days_ts", commits=3))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    plan_id = _failed_run(ledger, sqlite_catalog, "ph.good")
    everything = J.jvm(spark).org.apache.iceberg.expressions.Expressions.alwaysTrue()
    rewrite_partition(spark, _jtable(spark, workload), everything, target_file_size_bytes=1 << 27, plan_id=plan_id,
                      tag="t1")
    identity, table = load_table(sqlite_catalog, "ph.good")
    sid = table.current_snapshot().snapshot_id
    lines: list[str] = []
    results = run_posthoc_checks(ledger, identity, table, _in_process(spark), validation="count",
                                 progress=lines.append, now=NOW)
    assert [(r["snapshot_id"], r["result"]) for r in results] == [(sid, "passed")], results
    assert any("never checked" in line for line in lines)
    (check,) = ledger.snapshot_checks("ph.good", sqlite_catalog.name)
    assert (check.snapshot_id, check.source, check.result, check.plan_id) == (sid, "post-hoc", "passed", plan_id)
    # Checked once: the next plan has nothing left to check.
    assert all(d.action == "skip" for d in pending_checks(ledger, identity, table, NOW))
    assert run_posthoc_checks(ledger, identity, table, _in_process(spark), validation="count", now=NOW) == []
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.snapshot_id == sid and after.rows == before.rows


def test_a_bad_current_commit_is_rolled_back(spark, sqlite_catalog: CatalogConfig, ledger: Ledger) -> None:  # type: ignore[no-untyped-def]
    workload = generate(spark, sqlite_catalog, "ph.bad", WorkloadSpec(seed=22, partitioning="identity", commits=2))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    plan_id = _failed_run(ledger, sqlite_catalog, "ph.bad")
    bad = _drop_a_data_file(spark, workload, plan_id)
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows != before.rows
    identity, table = load_table(sqlite_catalog, "ph.bad")
    (result,) = run_posthoc_checks(ledger, identity, table, _in_process(spark), validation="checksum", now=NOW)
    assert (result["snapshot_id"], result["result"], result["level"]) == (bad, "rolled_back", "checksum"), result
    assert "rows differ" in result["detail"]
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.snapshot_id == before.snapshot_id and after.rows == before.rows
    (check,) = ledger.snapshot_checks("ph.bad", sqlite_catalog.name)
    assert (check.snapshot_id, check.result) == (bad, "rolled_back")


def test_a_bad_commit_under_a_writers_commit_needs_attention(spark, sqlite_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                             ledger: Ledger) -> None:
    workload = generate(spark, sqlite_catalog, "ph.under", WorkloadSpec(seed=23, partitioning="identity", commits=2))
    plan_id = _failed_run(ledger, sqlite_catalog, "ph.under")
    bad = _drop_a_data_file(spark, workload, plan_id)
    spark.sql(f"INSERT INTO {workload.table} SELECT * FROM {workload.table} LIMIT 1").collect()  # a writer's commit
    head = _jtable(spark, workload).currentSnapshot().snapshotId()
    identity, table = load_table(sqlite_catalog, "ph.under")
    (result,) = run_posthoc_checks(ledger, identity, table, _in_process(spark), validation="count", now=NOW)
    assert (result["snapshot_id"], result["result"]) == (bad, "needs_attention"), result
    assert "not of its plan" in result["detail"]
    assert _jtable(spark, workload).currentSnapshot().snapshotId() == head  # the writer's commit stays


def test_a_job_killed_between_commit_and_check_is_checked_by_the_next_run(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    workload = generate(spark, sqlite_catalog, "ph.kill", WorkloadSpec(seed=24, partitioning="days_ts", commits=2))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    monkeypatch.setenv("ICECOMPACT_FAULT_INJECT", "sleep:after-rewrite:600")
    on_output = SparkSubmitKiller("ph.kill")

    report = run_table(sqlite_catalog, "ph.kill", mode=CompactionMode.MAJOR, ledger=ledger, progress=on_output,
                       max_parallel_jobs=1)
    assert on_output.killed and report.status is RunStatus.FAILED
    assert all(o.status is OutcomeStatus.FAILED for o in ledger.outcomes(report.run_id))
    identity, table = load_table(sqlite_catalog, "ph.kill")
    unchecked = table.current_snapshot().snapshot_id
    assert unchecked != before.snapshot_id, "the rewrite committed before the kill"
    assert table.current_snapshot().summary.get(PLAN_PROPERTY) == report.plan.plan_id
    assert [d.snapshot.snapshot_id for d in pending_checks(ledger, identity, table, dt.datetime.now(dt.timezone.utc))
            if d.action == "validate"] == [unchecked]

    monkeypatch.delenv("ICECOMPACT_FAULT_INJECT")
    lines: list[str] = []
    again = run_table(sqlite_catalog, "ph.kill", mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append)
    assert again.status is RunStatus.SUCCEEDED, (again.errors, lines)
    assert any(f"post-hoc check of snapshot {unchecked}: passed" in line for line in lines), lines
    post_hoc = [c for c in ledger.snapshot_checks("ph.kill", sqlite_catalog.name) if c.source == "post-hoc"]
    assert [(c.snapshot_id, c.result, c.plan_id) for c in post_hoc] == [(unchecked, "passed", report.plan.plan_id)]
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows and not after.applicable_deletes
