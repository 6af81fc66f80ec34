"""Compaction yields to writers that announce themselves with a write lease (compaction.core.yielding,
compaction.ledger.writers, docs/operations.md "Writers and compaction"): real Spark, real Iceberg, a real SQLite
ledger. A Spark DELETE whose writer holds a lease commits while our compaction, ready to commit, waits; the
compaction commits after the lease is released, on top of the writer's snapshot, and validates. A lease that
outlives ``compaction.yield.max-wait`` makes the compaction give up with nothing committed (``skip``)."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from pathlib import Path

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.results import COMMITTED, SKIPPED
from compaction.demo.workload import WorkloadSpec, generate, spark_rows
from compaction.ledger import Ledger, LedgerCommitGate
from icecompact_testing.inprocess import InProcessRun, compact_in_process
from icecompact_testing.oracle import ancestor_ids, read_table

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _snapshot_ids(catalog: CatalogConfig, identifier: tuple[str, str]) -> list[int]:
    return [s.snapshot_id for s in catalog.load().load_table(identifier).snapshots()]


def _minor_under_a_lease(spark, catalog: CatalogConfig, workload, ledger: Ledger, victims: list,  # type: ignore[no-untyped-def]
                         waiting_line: str) -> tuple[InProcessRun, list[str], int]:
    """A MINOR of ``workload`` run while a writer holds a lease: once the compaction waits at a commit
    (``waiting_line`` in its progress), no commit of ours has landed; the writer's merge-on-read DELETE of
    ``victims`` commits (it would fail on a commit of ours between its start and its commit), then the lease ends
    and the compaction finishes. Returns (the run, its progress lines, the writer's snapshot)."""
    name = ".".join(workload.identifier)
    snapshots_before = _snapshot_ids(catalog, workload.identifier)
    lease = ledger.acquire_write_lease(name, catalog.name, "nightly-delete", ttl_s=600)
    lines: list[str] = []
    waiting = threading.Event()

    def progress(line: str) -> None:
        lines.append(line)
        if waiting_line in line:
            waiting.set()

    gate = LedgerCommitGate(ledger, catalog.name, "test-run", poll_s=0.2, progress=progress)
    runs: list[InProcessRun] = []
    errors: list[BaseException] = []

    def compact() -> None:
        try:
            runs.append(compact_in_process(spark, catalog, name, CompactionMode.MINOR, now=NOW, gate=gate,
                                           progress=progress))
        except BaseException as e:  # noqa: BLE001 - re-raised below
            errors.append(e)

    thread = threading.Thread(target=compact, name="compaction")
    thread.start()
    assert waiting.wait(300) or not thread.is_alive(), lines
    assert not errors, errors
    ours_while_waiting = [s for s in _snapshot_ids(catalog, workload.identifier) if s not in snapshots_before]
    assert ours_while_waiting == [], "a compaction commit landed under the writer's lease"
    ids = ", ".join(str(int(r[0])) for r in victims)
    spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({ids})")
    writer_snapshot = catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    ledger.release_write_lease(lease)
    thread.join(timeout=600)
    assert not thread.is_alive() and not errors, errors
    (run,) = runs
    run.assert_clean()
    return run, lines, writer_snapshot


@pytest.mark.parametrize("format_version,conversion_only", [(2, False), (3, True)])
def test_a_writer_holding_a_lease_commits_first_and_the_compaction_after_it(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path, format_version: int, conversion_only: bool) -> None:
    """v2: the MINOR merges its fragment files first, a rewrite the writer's position deletes on them make Iceberg
    refuse; it is planned again from the writer's snapshot. v3, no fragment files: the conversion's DVs meet the
    writer's DVs for the same data files (Iceberg refuses a second DV); the group conversion absorbs those and
    commits again on the writer's snapshot, without reading the positions again (PreparedMinor.rebased_in)."""
    name = f"cdc.yield_minor_v{format_version}"
    workload = generate(spark, sqlite_catalog, name, WorkloadSpec(
        seed=51, format_version=format_version, partitioning="days_ts", days_span=3, commits=3, rows_per_commit=40,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    if conversion_only:  # no file is a fragment
        spark.sql(f"ALTER TABLE {workload.table} SET TBLPROPERTIES ('compaction.fragment-ratio'='100000000')")
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    victims = sorted((r for r in before.rows if r[0] is not None), key=repr)[:3]
    expected = Counter(before.rows)
    for row in victims:
        del expected[row]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        run, lines, writer_snapshot = _minor_under_a_lease(spark, sqlite_catalog, workload, ledger, victims,
                                                           "waiting for the write lease of nightly-delete")
        assert all(p.status == COMMITTED for p in run.partitions), [(p.label, p.status, p.reason) for p in run.partitions]
        # Ours came after the writer's: every commit of ours descends from the writer's snapshot.
        table = sqlite_catalog.load().load_table(workload.identifier)
        for sid in {c for p in run.partitions for c in p.commit_snapshot_ids}:
            assert writer_snapshot in ancestor_ids(table, sid)
        assert any("the writers' leases ended after" in line for line in lines), lines
        if conversion_only:
            # Refused once, then committed on the writer's snapshot with the positions read before.
            assert any("conflicted with a writer's commit: committing again on the new snapshot" in line
                       for line in lines), lines
            assert not any("reading again" in line for line in lines), lines
            assert [p.attempts for p in run.partitions] == [2] * len(run.partitions), lines
        assert ledger.live_commit_intents(name, catalog=sqlite_catalog.name) == []
    after = read_table(table)
    assert after.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(d.delete_kind == "equality" for d in after.delete_files)


def test_a_writers_delete_in_one_partition_leaves_only_its_fragments_for_the_next_run(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:
    """The MINOR's fragment merge of three partitions waits at its commit for a leased writer whose DELETE hits
    fragment files of one partition: Iceberg refuses the rewrite as written (a new position delete for a replaced
    file), so the merge commits the other two partitions' file groups instead of writing everything again, and
    leaves the hit partition's fragments, untouched, to the next run. Rows: exactly the writer's model."""
    name = "cdc.yield_narrow"
    workload = generate(spark, sqlite_catalog, name, WorkloadSpec(
        seed=51, format_version=2, partitioning="days_ts", days_span=3, commits=3, rows_per_commit=40,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    first_day = min(r[2].date() for r in before.rows if r[0] is not None)
    victims = sorted((r for r in before.rows if r[0] is not None and r[2].date() == first_day), key=repr)[:2]
    expected = Counter(before.rows)
    for row in victims:
        del expected[row]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        run, lines, _ = _minor_under_a_lease(spark, sqlite_catalog, workload, ledger, victims,
                                             "file rewrite: waiting for the write lease of nightly-delete")
    assert not any("group action failed" in line for line in lines), lines
    merged = [line for line in lines if "MINOR file rewrite of 3 partitions:" in line and "rewritten into" in line]
    assert len(merged) == 1 and merged[0].split("rewritten into ")[1].startswith("2 "), lines
    table = sqlite_catalog.load().load_table(workload.identifier)
    day_label = f"ts_day={(first_day - dt.date(1970, 1, 1)).days}"
    hit = [p for p in run.partitions if day_label in p.label]
    assert len(hit) == 1 and hit[0].status == COMMITTED, [(p.label, p.status) for p in run.partitions]
    data_files = Counter(str(task.file.partition) for task in table.scan().plan_files())
    assert sorted(data_files.values())[-1] > 1 and sorted(data_files.values())[:2] == [1, 1], data_files
    after = read_table(table)
    assert after.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected


def test_a_lease_outliving_the_wait_makes_the_compaction_give_up_with_nothing_committed(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:
    workload = generate(spark, sqlite_catalog, "cdc.yield_major", WorkloadSpec(
        seed=52, format_version=3, partitioning="days_ts", days_span=2, commits=3, rows_per_commit=30,
        use_equality_deletes=True))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    snapshots_before = _snapshot_ids(sqlite_catalog, workload.identifier)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        lease = ledger.acquire_write_lease("cdc.yield_major", sqlite_catalog.name, "stuck-merge", ttl_s=600)
        gate = LedgerCommitGate(ledger, sqlite_catalog.name, "test-run", poll_s=0.2)
        run = compact_in_process(spark, sqlite_catalog, "cdc.yield_major", CompactionMode.MAJOR, now=NOW, gate=gate,
                                 overrides={"compaction.yield.max-wait": "1s"})
        assert run.partitions and all(p.status == SKIPPED for p in run.partitions), \
            [(p.label, p.status, p.reason, p.error) for p in run.partitions]
        assert all("yielded to the write lease of stuck-merge" in (p.reason or "") for p in run.partitions)
        assert _snapshot_ids(sqlite_catalog, workload.identifier) == snapshots_before
        # Released: the next run compacts.
        ledger.release_write_lease(lease)
        again = compact_in_process(spark, sqlite_catalog, "cdc.yield_major", CompactionMode.MAJOR, now=NOW,
                                   gate=LedgerCommitGate(ledger, sqlite_catalog.name, "test-run-2"))
        again.assert_clean()
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.delete_files


def test_a_spark_submit_run_yields_to_a_lease_in_the_hosts_ledger(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:
    """``icecompact run`` hands its ledger to the spark-submit job (through the environment): the job's commits
    wait for the lease, and give up after ``yield.max-wait`` with nothing committed (the in-process tests above show
    the compaction going ahead once the lease ends)."""
    from compaction.ledger import OutcomeStatus
    from compaction.ops.runner import run_table

    workload = generate(spark, sqlite_catalog, "cdc.yield_submit", WorkloadSpec(
        seed=53, format_version=2, partitioning="identity", commits=2, rows_per_commit=30))
    snapshots_before = _snapshot_ids(sqlite_catalog, workload.identifier)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        lease = ledger.acquire_write_lease("cdc.yield_submit", sqlite_catalog.name, "etl-merge", ttl_s=600)
        lines: list[str] = []
        report = run_table(sqlite_catalog, "cdc.yield_submit", mode=CompactionMode.MAJOR, ledger=ledger,
                           overrides={"yield.max-wait": "1s"}, progress=lines.append)
        outcomes = ledger.outcomes(report.run_id)
        assert outcomes and all(o.status is OutcomeStatus.SKIPPED for o in outcomes), \
            [(o.partition_label, o.status, o.error) for o in outcomes]
        assert any("yielded to the write lease of etl-merge" in line for line in lines), lines
        assert _snapshot_ids(sqlite_catalog, workload.identifier) == snapshots_before
        assert ledger.live_commit_intents("cdc.yield_submit", catalog=sqlite_catalog.name) == []
        ledger.release_write_lease(lease)
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == workload.expected_rows
