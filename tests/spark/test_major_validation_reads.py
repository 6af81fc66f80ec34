"""Validation (c) of a MAJOR reads the rows of every (snapshot, touched partitions) pair exactly once.

* The base rows of all partitions of a job group are read in one Spark job at the group's base snapshot, ahead (in a
  background thread, from the base's metadata file, on SQLite and PostgreSQL alike), and a partition's commit is
  compared with them when no snapshot in between touched the partition; the value used equals a direct time-travel
  read of the commit's parent.
* A partition that another writer touched after the group's base is compared with a read of its commit's parent.
* The rows of a partition's compaction snapshot are read in one Spark job (on PostgreSQL read ahead, in the
  background, while the partition's files are scanned).
* A group read that disagrees with the commit fails validation and rolls the commit back.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.core.results import ROLLED_BACK
from compaction.spark import group_reads, job, partition_files
from compaction.spark import jvm as J
from compaction.spark.expressions import java_partition_expression
from compaction.spark.group_reads import own_counts_at
from compaction.spark.task import spark_identifier
from compaction.spark import task as task_module
from compaction.spark.validation import Fingerprint, ValidationLevel, fingerprint, read_ahead_allowed
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


class _Reads:
    """Records every validation read made through the job's read functions (snapshot, predicate text, thread)."""

    def __init__(self, monkeypatch: Any) -> None:
        self.single: list[tuple[int, str]] = []
        self.batches: list[list[tuple[int, str]]] = []
        self.groups: list[tuple[int, str, list[str], str]] = []  # (snapshot, table ref, predicates, thread)
        real_single, real_batch, real_group = group_reads.fingerprint, group_reads.snapshot_fingerprints, group_reads.partition_fingerprints_query

        def single(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
            self.single.append((int(snapshot_id), str(predicate)))
            return real_single(spark_, ref, snapshot_id, predicate, level)

        def batch(spark_, ref, requests, level):  # type: ignore[no-untyped-def]
            self.batches.append([(int(s), str(p)) for s, p in requests])
            return real_batch(spark_, ref, requests, level)

        def group(spark_, ref, snapshot_id, predicates, level):  # type: ignore[no-untyped-def]
            run = real_group(spark_, ref, snapshot_id, predicates, level)

            def recorded():  # type: ignore[no-untyped-def]
                self.groups.append((int(snapshot_id), str(ref), [str(p) for p in predicates],
                                    threading.current_thread().name))
                return run()

            return recorded

        monkeypatch.setattr(group_reads, "fingerprint", single)
        monkeypatch.setattr(group_reads, "snapshot_fingerprints", batch)
        monkeypatch.setattr(group_reads, "partition_fingerprints_query", group)

    def all(self) -> list[tuple[int, str]]:
        return (self.single + [r for b in self.batches for r in b]
                + [(sid, p) for sid, _, preds, _ in self.groups for p in preds])


def _major(spark: Any, catalog: CatalogConfig, name: str, level: ValidationLevel = ValidationLevel.COUNT,
           group_commit: bool = True) -> Any:
    state = inspect_table(catalog, name)
    # The full rewrite: these tests are about the group action's validation reads and commits.
    the_plan = plan(state, CompactionPolicy.resolve(state.properties, {"major_full_rewrite": True}),
                    CompactionMode.MAJOR, NOW)
    results = [job.run_group(spark, the_plan, g.group_id, level=level, group_commit=group_commit)
               for g in the_plan.groups]
    return the_plan, [p for r in results for p in r.partitions]


def _direct_before(spark: Any, catalog: CatalogConfig, table_name: str, part: Any) -> Fingerprint | None:
    """A fresh time-travel read of the partition at its rewrite commit's parent (what the group value replaces)."""
    from compaction.core.plan import partition_key_from_dict
    from compaction.spark import jvm as J

    identifier = f"{catalog.name}.{table_name}"
    table = J.load_table(spark, identifier)
    predicate = group_reads.rows_predicate(spark, table, catalog.name, {partition_key_from_dict(part.partition)})
    return fingerprint(spark, identifier, part.validation["checks"][0]["parent_id"], predicate, ValidationLevel.COUNT)


def test_each_snapshot_is_read_once_per_partition(spark, any_catalog: CatalogConfig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    catalog = any_catalog
    workload = generate(spark, catalog, "cdc.r", WorkloadSpec(seed=21, partitioning="days_ts", commits=3,
                                                               rows_per_commit=40, days_span=2, evolve_spec=False))
    reads = _Reads(monkeypatch)
    # One action per partition (the path of a group with a single MAJOR partition, and the fallback of a group
    # action that failed): see the next test for the group action.
    the_plan, parts = _major(spark, catalog, "cdc.r", group_commit=False)
    assert len(parts) >= 2 and len(the_plan.groups) == 1
    assert all(p.status == job.COMMITTED for p in parts), [(p.label, p.status, p.error) for p in parts]
    for p in parts:
        # The rewrite, then the dangling-delete cleanup when anything was left dangling: Iceberg 1.10 leaves the
        # partition's delete files behind; 1.12's rewrite removes those of the files it replaced itself.
        assert len(p.commit_snapshot_ids) in (1, 2)
        checks = p.validation["checks"]
        assert [c["ok"] for c in checks] == [True] * len(p.commit_snapshot_ids)
        if len(checks) == 2:  # the cleanup's "before" is the rewrite's "after": one read, shared
            assert checks[1]["parent_id"] == checks[0]["snapshot_id"]
            assert checks[1]["before"] == checks[0]["after"]
        # The group's base rows stand for the rows at the parent, which a direct read confirms.
        assert checks[0]["before"] == _direct_before(spark, catalog, "cdc.r", p).to_dict()  # type: ignore[union-attr]
    commits_of_ours = sum(len(p.commit_snapshot_ids) for p in parts)
    # One group read, at the group's base, from its metadata file, in the background, one predicate per partition.
    assert len(reads.groups) == 1
    snapshot, ref, predicates, thread = reads.groups[0]
    assert snapshot == the_plan.base_snapshot_id and ref.endswith(".metadata.json")
    assert thread.startswith("icecompact-prefetch-group") and len(predicates) == len(parts)
    # Every commit snapshot of ours read once (PostgreSQL: the rewrite's read ahead while the cleanup works; SQLite:
    # a partition's commit snapshots in one Spark job).
    read_commits = [sid for sid, _ in reads.single] + [sid for b in reads.batches for sid, _ in b]
    assert sorted(read_commits) == sorted(s for p in parts for s in p.commit_snapshot_ids)
    if not read_ahead_allowed(spark, catalog.name):
        assert len(reads.batches) + len(reads.single) == len(parts)
    # Nothing read twice, nothing else read.
    assert len(reads.all()) == len(set(reads.all())) == len(parts) + commits_of_ours
    assert read_table(catalog.load().load_table(workload.identifier)).rows == workload.expected_rows


def test_a_group_action_commits_once_and_validates_each_partition_on_its_own(spark, any_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                             monkeypatch) -> None:
    """The group's MAJOR partitions go through one Iceberg action: one snapshot for all of them (the rewrite with
    the dangling deletes removed); each partition is still compared with its own rows (base from the group read, which a direct
    read confirms), and every (snapshot, partition) is read once, the commits' all in one Spark job."""
    catalog = any_catalog
    workload = generate(spark, catalog, "cdc.g", WorkloadSpec(seed=21, partitioning="days_ts", commits=3,
                                                               rows_per_commit=40, days_span=3, evolve_spec=False))
    reads = _Reads(monkeypatch)
    scanned: list[int | None] = []
    real_scan = job.scan_partition

    def recorded_scan(spark_, table_, expression, snapshot_id, **kwargs):  # type: ignore[no-untyped-def]
        scanned.append(snapshot_id)
        return real_scan(spark_, table_, expression, snapshot_id, **kwargs)

    monkeypatch.setattr(job, "scan_partition", recorded_scan)
    monkeypatch.setattr(partition_files, "scan_partition", recorded_scan)  # the scans side by side (scans_at)
    the_plan, parts = _major(spark, catalog, "cdc.g")
    assert len(parts) >= 3 and len(the_plan.groups) == 1
    # The partitions' files at the base follow from their files at the commit and the commit's changes: no
    # metadata scan at the base, and the same counts as one.
    assert the_plan.base_snapshot_id not in scanned and len(scanned) == len(parts), scanned
    java_table = J.load_table(spark, spark_identifier(the_plan))
    for t in the_plan.groups[0].tasks:
        at_base = own_counts_at(spark, java_table, java_partition_expression(spark, java_table, t.partition),
                                t.partition, the_plan.base_snapshot_id)
        assert next(p for p in parts if p.label == t.partition.label()).before == at_base
    assert all(p.status == job.COMMITTED for p in parts), [(p.label, p.status, p.error) for p in parts]
    commits = {tuple(p.commit_snapshot_ids) for p in parts}
    # One commit, shared by every partition.
    assert len(commits) == 1 and len(next(iter(commits))) == 1
    shared = next(iter(commits))
    table = catalog.load().load_table(workload.identifier)
    assert table.snapshot_by_id(shared[0]).parent_snapshot_id == the_plan.base_snapshot_id
    for p in parts:
        checks = p.validation["checks"]
        assert [c["ok"] for c in checks] == [True] * len(shared)
        assert checks[0]["before"] == _direct_before(spark, catalog, "cdc.g", p).to_dict()  # type: ignore[union-attr]
        assert all(c["before"] == c["after"] == checks[0]["before"] for c in checks)
        assert p.after["data_files"] < p.before["data_files"] and p.rewritten_data_files == p.before["data_files"]
    assert sum(p.before["records"] - p.after["records"] for p in parts) > 0  # deletes were applied
    assert len(reads.groups) == 1 and len(reads.groups[0][2]) == len(parts)
    assert not reads.single and [len(b) for b in reads.batches] == [len(shared) * len(parts)]
    assert len(reads.all()) == len(set(reads.all())) == (1 + len(shared)) * len(parts)
    assert read_table(table).rows == workload.expected_rows
    assert not read_table(table).applicable_deletes


def test_a_group_action_that_conflicts_falls_back_to_one_partition_at_a_time(spark, postgres_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                              monkeypatch) -> None:
    """Another writer (a second Spark session: its own catalog and table instance) deletes a row of a file the
    group action is rewriting, before the action commits: Iceberg's validation fails the group commit (nothing is committed), the
    conflict is recorded for every partition, and each partition is then compacted on its own (re-inspected)
    with the writer's delete kept. (PostgreSQL: two catalog clients in one JVM lock each other out on SQLite.)"""
    from compaction.spark.session import register_catalog

    catalog = postgres_catalog
    workload = generate(spark, catalog, "cdc.c", WorkloadSpec(seed=24, partitioning="days_ts", commits=3,
                                                               rows_per_commit=40, days_span=2, evolve_spec=False))
    real_rewrite = job.rewrite_partition
    victim = min(row[0] for row in workload.expected_rows if row[0] is not None)
    deleted: list[int] = []

    def rewrite_then_conflict(spark_, table, expression, **kwargs):  # type: ignore[no-untyped-def]
        if not deleted:  # the group action: the other writer commits before it (its table instance is not refreshed)
            other = spark_.newSession()
            register_catalog(other, catalog)  # the test catalog is registered at run time, per session
            other.sql(f"DELETE FROM {workload.table} WHERE id = {victim}")
            deleted.append(victim)
        return real_rewrite(spark_, table, expression, **kwargs)

    for module in (job, task_module):
        monkeypatch.setattr(module, "rewrite_partition", rewrite_then_conflict)
    _, parts = _major(spark, catalog, "cdc.c")
    assert len(parts) == 2 and all(p.status == job.COMMITTED for p in parts), [(p.label, p.status, p.error) for p in parts]
    assert all(p.conflicts and p.conflicts[0]["message"].startswith("group commit") for p in parts), [(p.conflicts, p.commit_snapshot_ids, p.attempts) for p in parts]
    assert all(p.attempts >= 2 for p in parts)
    commits = [tuple(p.commit_snapshot_ids) for p in parts]
    assert len(set(commits)) == 2  # then one rewrite per partition
    table = catalog.load().load_table(workload.identifier)
    expected = {row: n for row, n in workload.expected_rows.items() if row[0] != victim}
    assert sum(workload.expected_rows.values()) - sum(expected.values()) >= 1
    assert read_table(table).rows == expected


def test_a_partition_touched_after_the_group_base_reads_its_own_parent(spark, sqlite_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                        monkeypatch) -> None:
    catalog = sqlite_catalog
    generate(spark, catalog, "cdc.t", WorkloadSpec(seed=22, partitioning="days_ts", commits=3, rows_per_commit=40,
                                                    days_span=2, evolve_spec=False))
    reads = _Reads(monkeypatch)
    real_run_task = job.run_task
    seen: list[Any] = []
    appended: dict[str, int] = {}

    def run_task(spark_, catalog_name, plan_, task, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(task.partition)
        if len(seen) == 2:  # another writer appends a row to the second partition before its turn
            from compaction.spark import jvm as J

            identifier = f"{catalog.name}.cdc.t"
            predicate = group_reads.rows_predicate(spark_, J.load_table(spark_, identifier), catalog.name, {task.partition})
            spark_.table(identifier).where(predicate).limit(1).writeTo(identifier).append()
            appended["snapshot"] = int(J.load_table(spark_, identifier).currentSnapshot().snapshotId())
        return real_run_task(spark_, catalog_name, plan_, task, **kwargs)

    monkeypatch.setattr(job, "run_task", run_task)
    the_plan, parts = _major(spark, catalog, "cdc.t", group_commit=False)
    assert len(parts) == 2 and all(p.status == job.COMMITTED for p in parts), [(p.label, p.status) for p in parts]
    first, second = parts
    # The first partition is compared with the group read; the second, touched since, with a read of its parent.
    assert first.validation["checks"][0]["parent_id"] == the_plan.base_snapshot_id
    second_parent = second.validation["checks"][0]["parent_id"]
    assert second_parent == appended["snapshot"]
    assert [sid for b in reads.batches for sid, _ in b].count(second_parent) == 1
    assert second.validation["checks"][0]["before"] == _direct_before(spark, catalog, "cdc.t", second).to_dict()  # type: ignore[union-attr]
    table = catalog.load().load_table("cdc.t")
    assert read_table(table).rows == read_table(table, appended["snapshot"]).rows


def test_a_group_read_that_disagrees_rolls_the_commit_back(spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    catalog = sqlite_catalog
    workload = generate(spark, catalog, "cdc.w", WorkloadSpec(seed=23, partitioning="days_ts", commits=2,
                                                               rows_per_commit=40, days_span=2, evolve_spec=False))
    head = catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    real_group = group_reads.partition_fingerprints_query

    def off_by_one(spark_, ref, snapshot_id, predicates, level):  # type: ignore[no-untyped-def]
        run = real_group(spark_, ref, snapshot_id, predicates, level)
        return lambda: [Fingerprint(f.rows + 1, f.checksum) for f in run()]

    monkeypatch.setattr(group_reads, "partition_fingerprints_query", off_by_one)
    _, parts = _major(spark, catalog, "cdc.w")
    assert parts and {p.status for p in parts} == {ROLLED_BACK}
    assert all(p.error_class == "CommitValidationError" for p in parts)
    table = catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head
    assert read_table(table).rows == workload.expected_rows
