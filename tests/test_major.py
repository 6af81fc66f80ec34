"""MAJOR compaction preserves content on randomized CDC tables (independent oracle + Spark's read)."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, run_group
from compaction.spark.validation import ValidationLevel
from icecompact_testing import random_shape_seeds
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SEEDS = random_shape_seeds(100)  # random table shapes (icecompact_testing)


FULL = {"major_full_rewrite": True}  # the classic MAJOR: every file a delete applies to is rewritten


@pytest.mark.parametrize("seed", SEEDS)
def test_major_preserves_rows_on_random_cdc_tables(spark, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    # Half the scenarios on SQLite, half on PostgreSQL: the oracle must agree with Spark on both catalogs.
    catalog: CatalogConfig = request.getfixturevalue("postgres_catalog" if seed % 2 else "sqlite_catalog")
    spec = WorkloadSpec.random(seed)
    workload = generate(spark, catalog, "cdc.t", spec)
    pyiceberg_catalog = catalog.load()
    before = read_table(pyiceberg_catalog.load_table(workload.identifier))
    assert before.rows == workload.expected_rows, "oracle and generator model disagree before compaction"
    assert spark_rows(spark, workload.table) == before.rows, "oracle and Spark disagree before compaction"

    # Every level is exercised; most seeds skip the Spark re-reads to keep the suite fast (the oracle checks).
    level = [ValidationLevel.CHECKSUM, ValidationLevel.COUNT, ValidationLevel.NONE, ValidationLevel.NONE][seed % 4]
    run = compact_in_process(spark, catalog, "cdc.t", CompactionMode.MAJOR, level=level, overrides=FULL, now=NOW)
    compaction_plan, outcomes = run.plan, run.partitions
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), [(p.label, p.status, p.error) for p in outcomes]
    # A partition is skipped only when an earlier rewrite (whose filter also matched it, e.g. across specs)
    # already took care of it.
    assert all(p.reason.startswith("changed since planning") for p in outcomes if p.status == SKIPPED)
    majors = [d for d in compaction_plan.decisions if d.kind is CompactionKind.MAJOR]
    assert len(outcomes) == len(majors)

    after = read_table(pyiceberg_catalog.load_table(workload.identifier))
    assert after.rows == before.rows, f"rows changed by MAJOR (spec {spec})"
    assert spark_rows(spark, workload.table) == before.rows
    # No delete still applies to a live data file, except global equality deletes (unpartitioned spec) on
    # partitions that had no delete file of their own and therefore were not planned for MAJOR.
    compacted = {p.label for p in outcomes}
    for path, deletes in after.applicable_deletes.items():
        for d in deletes:
            assert d.delete_kind == "equality" and not d.partition, (path, d)
    if after.snapshot_id != before.snapshot_id:
        assert compacted


def test_major_rolls_back_a_commit_that_fails_validation(spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Layer (c) is not decorative: a checksum mismatch rolls the compaction snapshot back."""
    from compaction.spark import group_reads
    from compaction.spark.validation import Fingerprint

    workload = generate(spark, sqlite_catalog, "cdc.v", WorkloadSpec(seed=5, partitioning="days_ts", commits=2))
    head_before = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    calls = {"n": 0}

    def lying_fingerprint(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        return Fingerprint(calls["n"], None)  # never equal: simulates rows lost by a commit

    def lying_fingerprints(spark_, ref, requests, level):  # type: ignore[no-untyped-def]
        return [lying_fingerprint(spark_, ref, s, p, level) for s, p in requests]

    monkeypatch.setattr(group_reads, "fingerprint", lying_fingerprint)
    monkeypatch.setattr(group_reads, "snapshot_fingerprints", lying_fingerprints)
    results = compact_in_process(spark, sqlite_catalog, "cdc.v", CompactionMode.MAJOR, overrides=FULL, now=NOW).groups
    statuses = {p.status for r in results for p in r.partitions}
    assert statuses == {"rolled_back"}
    assert all(r.exit_code == 9 for r in results)
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head_before
    assert read_table(table).rows == workload.expected_rows


@pytest.mark.parametrize("group_commit", [True, False])
def test_a_failing_check_after_the_rewrite_commit_undoes_it(spark, sqlite_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                           monkeypatch, group_commit: bool) -> None:
    """Our check after the rewrite's one commit (files replaced, dangling deletes removed) fails: the commit is rolled
    back (its snapshot is known to the caller as soon as it lands, before the check), for a group and per
    partition."""
    from compaction.core.errors import CommitValidationError
    from compaction.spark import job, major

    workload = generate(spark, sqlite_catalog, "cdc.u", WorkloadSpec(seed=43, partitioning="days_ts", commits=3,
                                                                      rows_per_commit=40, days_span=2, evolve_spec=False))
    head = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id

    def older_data_found(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise CommitValidationError("injected: a concurrent rewrite added older data")

    monkeypatch.setattr(major, "_check_no_older_data_added", older_data_found)
    state = inspect_table(sqlite_catalog, "cdc.u")
    the_plan = plan(state, CompactionPolicy.resolve(state.properties, FULL), CompactionMode.MAJOR, NOW)
    results = [job.run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT, group_commit=group_commit)
               for g in the_plan.groups]
    parts = [p for r in results for p in r.partitions]
    assert parts and {p.status for p in parts} == {"rolled_back"}, [(p.label, p.status, p.error) for p in parts]
    assert all(len(p.commit_snapshot_ids) == 1 for p in parts)  # the rewrite with the dangling deletes removed
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head
    assert read_table(table).rows == workload.expected_rows


@pytest.mark.parametrize("seed", [130, 131, 132, 133, 134, 135])
def test_selective_major_rewrites_small_and_delete_heavy_files_only(spark, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    """The default MAJOR on files of several sizes: the small files and the segments whose own position deletes
    pass the segment delete ratio are rewritten, the other segments are left alone with their deletes converted
    and merged; no equality delete is left, and the rows are the same (reference reader and Spark)."""
    from test_minor import assert_deletes_settled, fragment_overrides

    catalog: CatalogConfig = request.getfixturevalue("postgres_catalog" if seed % 2 else "sqlite_catalog")
    spec = WorkloadSpec.random(seed, use_equality_deletes=True)
    workload = generate(spark, catalog, "cdc.sel", spec)
    pyiceberg_catalog = catalog.load()
    before = read_table(pyiceberg_catalog.load_table(workload.identifier))
    state = inspect_table(catalog, "cdc.sel")
    overrides = fragment_overrides(state)
    small_limit = int(overrides["min_file_size_bytes"])
    ratio = 0.1
    run = compact_in_process(spark, catalog, "cdc.sel", CompactionMode.MAJOR,
                             overrides={**overrides, "major_segment_delete_ratio": ratio}, now=NOW)
    assert not any(t.full_rewrite for t in run.plan.tasks)
    outcomes = run.partitions
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), [(p.label, p.status, p.error) for p in outcomes]

    after = read_table(pyiceberg_catalog.load_table(workload.identifier))
    assert after.rows == before.rows, f"rows changed by MAJOR (spec {spec})"
    assert spark_rows(spark, workload.table) == before.rows
    # A segment's known deleted rows, as Iceberg's planner counts them: position deletes / DVs scoped to that one
    # file (``referenced_data_file``, or equal file_path bounds: the inspected state resolves both).
    known: dict[str, int] = {}
    seq = {f.path: f.data_sequence_number for p in state.partitions for f in p.data_files}
    for p in state.partitions:
        for x in p.delete_files:
            ref = x.referenced_data_file
            if x.content.value != "equality" and ref in seq and seq[ref] <= x.data_sequence_number:
                known[ref] = known.get(ref, 0) + x.record_count
    after_paths = {d.path for d in after.data_files}
    for d in before.data_files:
        if d.path in after_paths or d.file_size_in_bytes < small_limit:
            continue
        assert min(known.get(d.path, 0), d.record_count) / d.record_count >= ratio, \
            f"segment under the ratio rewritten: {d.path}"
    assert_deletes_settled(after, outcomes)


def test_a_job_that_ends_early_leaves_a_record_of_what_it_committed(spark, postgres_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                    tmp_path) -> None:
    # Regression test: a job SIGKILLed after some partitions were committed and validated wrote no result, so the
    # ledger recorded every partition failed while 7 validated snapshots of that run were on main. The job now
    # checkpoints an incomplete result after each validated step; record takes what it reports.
    from compaction.ledger import Ledger, OutcomeStatus, RunStatus
    from compaction.ops.runner import finish_recorded_run, record_group_result
    from compaction.ops.submit import progress_path, read_group_result

    generate(spark, postgres_catalog, "cdc.t", WorkloadSpec(seed=17, commits=4, rows_per_commit=40, days_span=3,
                                                           partitioning="days_ts"))
    state = inspect_table(postgres_catalog, "cdc.t")
    the_plan = plan(state, CompactionPolicy.resolve(state.properties, FULL), CompactionMode.MAJOR, NOW)
    group = the_plan.groups[0]
    assert len(group.partitions) >= 2
    checkpoints: list[dict] = []  # type: ignore[type-arg]
    final = run_group(spark, the_plan, group.group_id, level=ValidationLevel.COUNT, checkpoint=checkpoints.append)
    assert final.status == "succeeded" and checkpoints
    assert all(c["status"] == "incomplete" and c["error"] for c in checkpoints)
    last = checkpoints[-1]
    assert {p["label"] for p in last["partitions"]} == {p.label for p in final.partitions}
    table = postgres_catalog.load().load_table(("cdc", "t"))
    on_main = {s.snapshot_id for s in table.snapshots()}
    assert all(set(p["commit_snapshot_ids"]) <= on_main for p in last["partitions"] if p["status"] == COMMITTED)

    # As if the job had been killed after its first partition: only a progress file, reporting one partition.
    result_path = tmp_path / "result-g0.json"
    killed = {**last, "partitions": last["partitions"][:1]}
    progress_path(result_path).write_text(__import__("json").dumps(killed))
    result, error = read_group_result(result_path)
    assert result == killed and "ended before writing its result" in (error or "")
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        run_id = ledger.start_run(plan=the_plan)
        recorded = record_group_result(ledger, run_id, the_plan, group.group_id, result, error, "count")
        status, exit_code = finish_recorded_run(ledger, run_id, recorded.outcomes,
                                                [recorded.error] if recorded.error else [], [recorded.exit_code])
        outcomes = {o.partition_label: o for o in ledger.outcomes(run_id)}
    first = killed["partitions"][0]["label"]
    assert outcomes[first].status is OutcomeStatus.COMMITTED and outcomes[first].commit_snapshot_id in on_main
    assert all(o.status is OutcomeStatus.FAILED for label, o in outcomes.items() if label != first)
    assert status is RunStatus.PARTIAL and exit_code != 0


def test_at_checksum_a_commit_that_only_removes_deletes_is_checked_by_count(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """Removing a delete file that still applies makes rows live again: the row count catches it, so such a commit
    (our dangling-delete cleanup) is compared by count even at level checksum, and the check says so."""
    from compaction.core.errors import CommitValidationError
    from compaction.core.model import DeleteContent
    from compaction.core.plan import partition_key_to_dict
    from compaction.core.results import PartitionResult
    from compaction.spark import group_reads
    from compaction.spark import jvm as J
    from compaction.spark.partition_files import delete_kind

    workload = generate(spark, sqlite_catalog, "cdc.rm", WorkloadSpec(seed=44, partitioning="unpartitioned", commits=3,
                                                                       use_equality_deletes=True))
    table = J.load_table(spark, workload.table)
    table.refresh()
    tasks = table.newScan().planFiles()
    live = []
    try:
        it = tasks.iterator()
        while it.hasNext():
            live += list(it.next().deletes())
    finally:
        tasks.close()
    still_applies = next(d for d in live if delete_kind(d) in (DeleteContent.EQUALITY, DeleteContent.POSITION))
    rewrite = table.newRewrite()
    rewrite.deleteFile(still_applies)
    rewrite.commit()
    table.refresh()
    sid = int(table.currentSnapshot().snapshotId())
    assert group_reads.only_removes_deletes(table, sid)
    key = inspect_table(sqlite_catalog, "cdc.rm").partitions[0].key
    result = PartitionResult(partition_key_to_dict(key), key.label(), "major")
    expression = J.jvm(spark).org.apache.iceberg.expressions.Expressions.alwaysTrue()
    with pytest.raises(CommitValidationError, match="rows differ"):
        group_reads.validate(spark, table, workload.table, sqlite_catalog.name, key, [sid], ValidationLevel.CHECKSUM, None,
                      expression, result)
    (check,) = result.validation["checks"]
    assert check["compared"].startswith("rows") and not check["ok"]
    assert check["after"]["rows"] > check["before"]["rows"]
