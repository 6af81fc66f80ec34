"""MINOR compaction (equality deletes -> position deletes / DVs, position-delete merging) preserves content on
randomized CDC tables, judged by the independent oracle and by Spark's read."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark import group_reads
from compaction.spark import task as task_module
from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, run_group
from compaction.spark.validation import ValidationLevel
from icecompact_testing import random_shape_seeds
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import ancestor_ids, read_table
from compaction.demo.workload import WorkloadSpec, generate, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
# 20 random shapes that all have equality deletes (the generator's random specs sometimes turn them off).
SEEDS = random_shape_seeds(300)  # random table shapes (icecompact_testing)


def assert_deletes_settled(after, outcomes) -> None:  # type: ignore[no-untyped-def]
    """No equality-delete file is left in a partition whose compaction committed, and every data file has at most
    one position delete / DV applying (the form MINOR and the selective MAJOR leave)."""
    compacted = {(p.partition["spec_id"], tuple(f["value"] for f in p.partition["fields"]))
                 for p in outcomes if p.status == COMMITTED}
    for d in after.delete_files:
        if d.delete_kind == "equality":
            assert (d.spec_id, tuple(d.partition)) not in compacted, f"equality delete left in a compacted partition: {d.path}"
    for path, deletes in after.applicable_deletes.items():
        positional = [d for d in deletes if d.delete_kind != "equality"]
        assert len(positional) <= 1, (path, positional)


#: No data file is a fragment (target size // ratio is 0): a MINOR only converts and merges deletes.
NO_FRAGMENTS = {"fragment_ratio": 1 << 40}


def fragment_overrides(state) -> dict[str, int]:  # type: ignore[no-untyped-def]
    """Policy overrides that make about half of a tiny table's data files fragments (smaller than the median file)
    and the rest segments, none of them small segments: the fragment/segment split at test scale."""
    sizes = sorted(f.size_bytes for p in state.partitions for f in p.data_files)
    median = sizes[len(sizes) // 2]
    return {"target_file_size_bytes": 8 * median, "min_file_size_bytes": median}


@pytest.mark.parametrize("seed", SEEDS)
def test_minor_preserves_rows_and_removes_equality_deletes(spark, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    catalog: CatalogConfig = request.getfixturevalue("postgres_catalog" if seed % 2 else "sqlite_catalog")
    spec = WorkloadSpec.random(seed, use_equality_deletes=True, eq_delete_fraction=0.7, reinsert_fraction=0.5)
    workload = generate(spark, catalog, "cdc.m", spec)
    pyiceberg_catalog = catalog.load()
    before = read_table(pyiceberg_catalog.load_table(workload.identifier))
    assert before.rows == workload.expected_rows, "oracle and generator model disagree before compaction"
    n_eq_before = sum(1 for d in before.delete_files if d.delete_kind == "equality")
    assert n_eq_before > 0, f"scenario without equality deletes (spec {spec})"

    level = [ValidationLevel.CHECKSUM, ValidationLevel.COUNT, ValidationLevel.NONE][seed % 3]
    overrides = fragment_overrides(inspect_table(catalog, "cdc.m"))
    # Half the seeds match equality deletes in Spark, half on the driver (these tables are far below the default
    # limit), with both catalogs on each side.
    overrides["minor_driver_match_max_rows"] = 0 if (seed // 2) % 2 else 1 << 40
    fragment_limit = overrides["target_file_size_bytes"] // 8
    run = compact_in_process(spark, catalog, "cdc.m", CompactionMode.MINOR, level=level, overrides=overrides, now=NOW)
    compaction_plan, outcomes = run.plan, run.partitions
    assert all(p.kind == "minor" for p in outcomes)
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), \
        "\n".join(f"{p.label} {p.status} {p.error}" for p in outcomes)
    assert any(p.status == COMMITTED for p in outcomes)

    table = pyiceberg_catalog.load_table(workload.identifier)
    after = read_table(table)
    assert after.rows == before.rows, f"rows changed by MINOR (spec {spec})"
    assert spark_rows(spark, workload.table) == before.rows, "Spark disagrees with the oracle after MINOR"
    # MINOR rewrote fragment files only: a segment is kept, unless Iceberg dropped it because position deletes
    # of its own delete every row (delete ratio 1).
    after_paths = {d.path for d in after.data_files}
    gone = [d for d in before.data_files if d.path not in after_paths]
    for d in gone:
        if d.file_size_in_bytes >= fragment_limit:
            scoped = sum(x.record_count for x in before.applicable_deletes.get(d.path, ()) if x.delete_kind != "equality")
            assert scoped >= d.record_count, f"segment {d.path} rewritten by MINOR"
    planned = sum(int(dec.metrics["rewritten_data_files"]) for dec in compaction_plan.decisions
                  if dec.kind is CompactionKind.MINOR)
    if planned:
        assert sum(p.rewritten_data_files for p in outcomes) > 0, "fragments were planned for merging, none merged"
        assert any(d.file_size_in_bytes < fragment_limit for d in gone)
    # Every partition that was compacted has no equality-delete file left, and each of its data files has at
    # most one position delete / DV applying.
    assert_deletes_settled(after, outcomes)

    # The ledger's "after" is what a scan at the commit finds, counting the partition's own files only (on an
    # evolved table the scan also selects older specs' files, counted under their own partition: job.own_counts).
    from compaction.core.plan import partition_key_from_dict
    from compaction.spark import jvm as J
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.group_reads import own_counts
    from compaction.spark.partition_files import scan_partition

    jtable = J.load_table(spark, workload.table)
    for p in outcomes:
        if p.status == COMMITTED:
            key = partition_key_from_dict(p.partition)
            expression = java_partition_expression(spark, jtable, key)
            scanned = scan_partition(spark, jtable, expression, p.commit_snapshot_ids[-1], with_applied=False)
            assert own_counts(spark, jtable, scanned, key) == p.after, p.label

    # A second MINOR finds no delete to merge or convert in the compacted partitions. (It may still find
    # fragments: at this scale a Parquet file's own overhead is most of its size, so merged files stay small.)
    state = inspect_table(catalog, "cdc.m")
    replan = plan(state, CompactionPolicy.resolve(state.properties, overrides), CompactionMode.MINOR, NOW)
    compacted_labels = {p.label for p in outcomes if p.status == COMMITTED}
    for d in replan.decisions:
        if d.partition.label() in compacted_labels:
            st_ = next(x for x in state.partitions if x.key == d.partition)
            assert d.metrics["mergeable_delete_files"] == 0 and d.metrics["equality_delete_files"] == 0, (
                d.reason, [(f.path[-60:], f.data_sequence_number, f.file_sequence_number) for f in st_.data_files],
                [(x.path[-20:], x.content.value, x.data_sequence_number, x.file_sequence_number, (x.referenced_data_file or "")[-60:])
                 for x in st_.delete_files],
                [(p.label, p.commit_snapshot_ids, p.rewritten_data_files, p.removed_delete_files, p.added_delete_files)
                 for p in outcomes if p.label == d.partition.label()])


def test_run_minor_through_spark_submit(spark, sqlite_catalog: CatalogConfig, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The spark-submit path (entry point, shipped code, py4j callbacks for Iceberg's DV writer) on a v3 table."""
    from compaction.ledger import Ledger, OutcomeStatus, RunStatus
    from compaction.ops.runner import run_table

    workload = generate(spark, sqlite_catalog, "e2e.minor", WorkloadSpec(
        seed=21, format_version=3, partitioning="days_ts", commits=3, eq_delete_fraction=0.8, days_span=2))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        lines: list[str] = []
        report = run_table(sqlite_catalog, "e2e.minor", mode=CompactionMode.MINOR, ledger=ledger,
                           progress=lines.append, validation="checksum")
        assert report.status is RunStatus.SUCCEEDED, (report.errors, lines[-20:])
        assert any(line.startswith("icecompact: MINOR") for line in lines)
        outcomes = ledger.outcomes(report.run_id)
        assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.kind is CompactionKind.MINOR
                                for o in outcomes)
        assert all(o.validation_result == "passed" for o in outcomes)
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    # Every file of this tiny table is a fragment: MINOR merged them (through the spark-submit path too).
    assert len(after.data_files) < len(before.data_files)
    assert all(d.delete_kind == "deletion_vector" for d in after.delete_files)


@pytest.mark.parametrize("format_version,granularity", [(2, "file"), (2, "partition"), (3, "file")])
def test_minor_on_partition_values_that_need_escaping(spark, sqlite_catalog: CatalogConfig, format_version: int,
                                                      granularity: str) -> None:  # type: ignore[no-untyped-def]
    """Partition directories with '+', '%', ':', ' ' and '*' (Iceberg URL-encodes values, Spark escapes paths and
    globs): equality-delete files there are read and attributed to the right delete file. v2 writes one position
    delete file per data file, or per partition under ``write.delete.granularity=partition``."""
    from compaction.spark import jvm as J
    from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit

    ref = f"{sqlite_catalog.name}.odd.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.odd")
    spark.sql(f"CREATE TABLE {ref} (id bigint, region string, note string) USING iceberg PARTITIONED BY (region) "
              f"TBLPROPERTIES ('format-version'='{format_version}', 'write.delete.mode'='merge-on-read', "
              f"'write.delete.granularity'='{granularity}')")
    regions = ["a b", "x+y", "p%3Aq", "c:d*e", "plain"]
    rows = [(i, regions[i % len(regions)], f"n{i}") for i in range(40)]
    spark.createDataFrame(rows, "id bigint, region string, note string").writeTo(ref).append()
    table = J.load_table(spark, ref)
    # Two equality-delete commits per partition; the second one also re-deletes a key of the first (duplicates).
    for round_ in range(2):
        table.refresh()
        write_and_commit(spark, table, [
            EqualityDeleteSpec(("id",), tuple((i,) for i, r, _ in rows if r == region and i % 4 in (round_, 2)),
                               partition=(region,))
            for region in regions
        ])
    spark.sql(f"DELETE FROM {ref} WHERE id = 7")  # a position delete / DV too
    before = read_table(sqlite_catalog.load().load_table(("odd", "t")))
    assert sum(1 for d in before.delete_files if d.delete_kind == "equality") == 2 * len(regions)

    outcomes = compact_in_process(spark, sqlite_catalog, "odd.t", CompactionMode.MINOR, level=ValidationLevel.CHECKSUM,
                                  now=NOW).partitions
    assert len(outcomes) == len(regions)
    assert all(p.status == COMMITTED for p in outcomes), "\n".join(f"{p.label} {p.status} {p.error}" for p in outcomes)
    assert sum(p.converted_rows for p in outcomes) == sum(1 for i, _, _ in rows if i % 4 in (0, 1, 2))
    after = read_table(sqlite_catalog.load().load_table(("odd", "t")))
    assert after.rows == before.rows
    from icecompact_testing.oracle import spark_rows as oracle_spark_rows

    assert oracle_spark_rows(spark, ref) == before.rows
    assert not [d for d in after.delete_files if d.delete_kind == "equality"]
    if format_version == 2:
        _assert_position_delete_metrics_are_icebergs(spark, J.load_table(spark, ref), granularity)
        # Each partition ends with exactly one position-delete file per data file, or one for the partition.
        per_partition = Counter(d.partition[0] for d in after.delete_files if d.delete_kind == "position")
        if granularity == "partition":
            assert set(per_partition.values()) == {1}, per_partition
        assert all(d.referenced_data_file is None for d in after.delete_files
                   if "icecompact-posdel-" in d.path) == (granularity == "partition")
        state = inspect_table(sqlite_catalog, "odd.t")
        replan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MINOR, NOW)
        assert not [d for d in replan.decisions if d.kind is CompactionKind.MINOR], "MINOR's output is not settled"


FILE_PATH_ID = 2147483546  # MetadataColumns.DELETE_FILE_PATH


def _assert_position_delete_metrics_are_icebergs(spark, table, granularity: str) -> None:  # type: ignore[no-untyped-def]
    """The metrics MINOR committed for its position-delete files are what Iceberg's own footer reader computes
    (``ParquetUtil.fileMetrics`` with ``MetricsConfig.forPositionDelete``), and the sizes/counts are right."""
    from compaction.spark import jvm as J
    from compaction.spark.compat import position_delete_metrics_config
    from compaction.spark.partition_files import _iterate

    j = J.jvm(spark)
    table.refresh()
    config = position_delete_metrics_config(spark, table)
    checked = 0
    for task in _iterate(table.newScan().planFiles()):
        for d in task.deletes():
            if "icecompact-posdel-" not in str(d.location()):
                continue
            expected = j.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(table.io().newInputFile(d.location()), config)
            for name in ("columnSizes", "valueCounts", "nullValueCounts", "nanValueCounts", "lowerBounds", "upperBounds"):
                # What the manifest keeps is Iceberg's choice (1.12 keeps fewer metrics of the pos column than the
                # footer yields): every value kept must be the footer's.
                kept, footer = getattr(d, name)(), getattr(expected, name)()
                for field_id in list(kept.keySet()) if kept is not None else []:
                    assert footer.containsKey(field_id), (name, field_id, str(d.location()))
                    assert footer.get(field_id) == kept.get(field_id), (name, field_id, str(d.location()))
            # The referenced file's bounds are what readers prune position deletes by: always kept.
            assert d.lowerBounds().containsKey(FILE_PATH_ID) and d.upperBounds().containsKey(FILE_PATH_ID)
            assert int(expected.recordCount()) == int(d.recordCount())
            assert int(table.io().newInputFile(d.location()).getLength()) == int(d.fileSizeInBytes())
            if granularity == "file":
                assert str(d.referencedDataFile()) == str(task.file().location())
            else:
                assert d.referencedDataFile() is None
            checked += 1
    assert checked > 0


PARTITIONS_PER_SEED = 3


def test_plain_parquet_read_finds_the_rows_icebergs_reader_finds(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """MINOR reads the data files' equality columns as plain Parquet (field ids, ``_metadata.row_index``) unless
    ``raw_read_blocker`` says Iceberg's reader is needed, or matches them on the driver (small work); each must find
    exactly the same (file, position) set as Iceberg's reader, already-deleted rows included, on random shapes (keys
    with nulls, multi-column keys, spec evolution, v2/v3)."""
    from compaction.spark import jvm as J
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.minor import (
        collect_positions,
        decide_work,
        driver_matched_positions,
        matched_positions,
        raw_read_blocker,
    )
    from compaction.spark.partition_files import scan_partition
    from pyspark.sql import functions as F

    compared, raw_used, driver_used = 0, 0, 0
    # 310: v2, identity(region) in a (id, region) key: Iceberg's reader. 312: v3, days(ts), nulls: plain Parquet.
    # The first PARTITIONS_PER_SEED partitions with equality work of each (two Spark reads per partition).
    for seed in (310, 312):
        compared_in_seed = 0
        spec = WorkloadSpec.random(seed, use_equality_deletes=True, eq_delete_fraction=0.7, reinsert_fraction=0.5)
        name = f"raw.t{seed}"
        workload = generate(spark, sqlite_catalog, name, spec)
        state = inspect_table(sqlite_catalog, name)
        compaction_plan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MINOR, NOW)
        table = J.load_table(spark, workload.table)
        base = int(table.currentSnapshot().snapshotId())
        for decision in compaction_plan.decisions:
            key = decision.partition
            if decision.kind is not CompactionKind.MINOR or key.is_unpartitioned:
                continue
            if compared_in_seed == PARTITIONS_PER_SEED:
                break
            expression = java_partition_expression(spark, table, key)
            work = decide_work(spark, table, key, scan_partition(spark, table, expression, base, with_applied=False),
                               whole_table=False)
            if not work.eq_targets:
                continue
            ids = sorted({fid for d in work.equality.values() for fid in
                          (int(i) for i in str(d.equalityFieldIds().toString()).strip("[] ").split(",") if i.strip())})
            raw_used += raw_read_blocker(spark, table, work, ids) is None
            plain = collect_positions(matched_positions(spark, table, workload.table, base, F.lit(True), work))
            iceberg = collect_positions(matched_positions(spark, table, workload.table, base, F.lit(True), work,
                                                          raw=False))
            assert plain == iceberg, (seed, key.label())
            driver = driver_matched_positions(spark, table, work, max_rows=1 << 40)
            if driver is not None:
                assert driver == iceberg, (seed, key.label())
                if not driver_used:  # through the table's FileIO, as on an object store (seekable py4j reads)
                    assert driver_matched_positions(spark, table, work, max_rows=1 << 40,
                                                    through_file_io=True) == iceberg, (seed, key.label())
                driver_used += 1
            compared += 1
            compared_in_seed += 1
    assert compared >= 2 and 1 <= raw_used < compared, (compared, raw_used)
    assert 1 <= driver_used < compared, (compared, driver_used)  # seed 310's identity-partition key goes to Spark


def test_position_deletes_read_on_the_driver_are_the_ones_spark_reads(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """The Parquet position deletes a v2 MINOR merges, read on the driver (by local path, and through the table's
    FileIO as on an object store) and in Spark: the same positions of the same data files, rows naming a data file
    that gets no new file of ours left out."""
    from compaction.spark import jvm as J
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.minor import absorbed_position_rows, absorbed_positions, collect_positions, decide_work
    from compaction.spark.partition_files import scan_partition

    name = f"{sqlite_catalog.name}.raw.positions"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.raw")
    spark.sql(f"CREATE TABLE {name} (id bigint, part string) USING iceberg PARTITIONED BY (part) TBLPROPERTIES "
              "('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.delete.granularity'='partition')")
    for batch in range(3):
        spark.sql(f"INSERT INTO {name} SELECT id, 'p' FROM range({batch * 100}, {batch * 100 + 100})")
    # Two DELETEs on the first data file (one also on the second): not the settled form, so both are merged.
    spark.sql(f"DELETE FROM {name} WHERE id % 7 = 0 AND id BETWEEN 50 AND 150")
    spark.sql(f"DELETE FROM {name} WHERE id % 5 = 0 AND id BETWEEN 10 AND 40")
    table = J.load_table(spark, name)
    state = inspect_table(sqlite_catalog, "raw.positions")
    key = state.partitions[0].key
    base = int(table.currentSnapshot().snapshotId())
    files = scan_partition(spark, table, java_partition_expression(spark, table, key), base, with_applied=False)
    work = decide_work(spark, table, key, files, whole_table=False)
    in_spark = collect_positions(absorbed_positions(spark, work, table))
    assert len(work.positional) == 2 and len(in_spark) == 2, (work.positional, in_spark)
    assert absorbed_position_rows(spark, work, table, driver_max_rows=1 << 40) == in_spark
    assert absorbed_position_rows(spark, work, table, driver_max_rows=1 << 40, through_file_io=True) == in_spark
    one = sorted(in_spark)[0]  # the other data file then gets no new file: its rows are left out
    work.data_files = {one: work.data_files[one]}
    assert absorbed_position_rows(spark, work, table, driver_max_rows=1 << 40) == {one: in_spark[one]}


def test_a_group_of_minor_partitions_commits_once_and_each_partition_is_validated(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """The MINOR partitions of a job group share one RowDelta; every partition is still checked on its own rows
    (the base value from the group read equals the commit's), and the content is unchanged."""
    workload = generate(spark, sqlite_catalog, "cdc.mg", WorkloadSpec(
        seed=41, partitioning="days_ts", days_span=3, commits=3, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    run = compact_in_process(spark, sqlite_catalog, "cdc.mg", CompactionMode.MINOR, level=ValidationLevel.CHECKSUM,
                             overrides=NO_FRAGMENTS, now=NOW)
    compaction_plan, parts = run.plan, run.partitions
    committed = [p for p in parts if p.status == COMMITTED]
    assert len(committed) >= 2 and len(compaction_plan.groups) == 1, [(p.label, p.status, p.error) for p in parts]
    # One conversion commit for the group (a MINOR first rewrites the files Iceberg's planner drops: here files
    # whose every row a position delete removed, in their own, earlier commit).
    assert len({p.commit_snapshot_ids[-1] for p in committed}) == 1
    table = sqlite_catalog.load().load_table(workload.identifier)
    commit = committed[0].commit_snapshot_ids[-1]
    rewrites = {sid for p in committed for sid in p.commit_snapshot_ids[:-1]}
    assert table.snapshot_by_id(commit).parent_snapshot_id in {compaction_plan.base_snapshot_id} | rewrites
    for p in committed:
        # One check per step: a conversion landing right on its fragment merge is checked with it in one step.
        steps = [c.get("commits", [c["snapshot_id"]]) for c in p.validation["checks"]]
        assert [sid for step in steps for sid in step] == p.commit_snapshot_ids, (steps, p.commit_snapshot_ids)
        check = p.validation["checks"][-1]
        assert check["ok"] and check["before"] == check["after"] and check["before"]["rows"] > 0
        assert p.after["equality_delete_files"] == 0 < p.before["equality_delete_files"]
    # Each partition was compared on its own rows: their counts add up to the table's.
    assert sum(p.validation["checks"][-1]["before"]["rows"] for p in committed) == before.row_count
    after = read_table(table)
    assert after.rows == before.rows
    assert not any(d.delete_kind == "equality" for d in after.delete_files)


def test_keeps_a_file_group_follows_icebergs_group_filter() -> None:
    """BinPackRewriteFilePlanner.filterFileGroups: a group is rewritten with two picked files, a delete-heavy one, or
    more picked bytes than max-file-size-bytes; one picked file alone is dropped."""
    from compaction.spark.major import _PlannedFile, keeps_a_file_group

    options = {"max-file-size-bytes": "1000"}
    segment = _PlannedFile(length=900, picked=False, delete_heavy=False, has_deletes=True)
    fragment = _PlannedFile(length=10, picked=True, delete_heavy=False, has_deletes=True)
    dead = _PlannedFile(length=900, picked=True, delete_heavy=True, has_deletes=True)
    huge = _PlannedFile(length=1001, picked=True, delete_heavy=False, has_deletes=False)
    assert not keeps_a_file_group([], options)
    assert not keeps_a_file_group([[segment, segment], [segment, fragment], [fragment]], options)
    assert keeps_a_file_group([[segment, fragment], [fragment, fragment]], options)
    assert keeps_a_file_group([[segment, dead]], options)
    assert keeps_a_file_group([[huge]], options)


@pytest.mark.parametrize("fragments", [False, True], ids=["nothing-to-merge", "fragments"])
def test_a_minor_group_with_nothing_to_merge_runs_no_rewrite_action(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, fragments: bool) -> None:
    """A MINOR group whose partitions have no two fragment files and no fully deleted file skips Iceberg's rewrite
    action (and the scans and checks around it): only the conversion commits. With fragments, the action runs."""
    from compaction.spark import job

    name = f"cdc.nm{int(fragments)}"
    # Every delete an equality delete: no position delete can make a data file fully deleted.
    workload = generate(spark, sqlite_catalog, name, WorkloadSpec(
        seed=43, partitioning="days_ts", days_span=3, commits=3, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=1.0))
    state = inspect_table(sqlite_catalog, name)
    calls: list[object] = []
    real = job.rewrite_partition  # the job's and the task's own name for Iceberg's rewrite (major.rewrite_partition)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs.get("selection"))
        return real(*args, **kwargs)

    for module in (job, task_module):
        monkeypatch.setattr(module, "rewrite_partition", counted)
    overrides = fragment_overrides(state) if fragments else NO_FRAGMENTS
    run = compact_in_process(spark, sqlite_catalog, name, CompactionMode.MINOR, overrides=overrides, now=NOW)
    compaction_plan, parts = run.plan, run.partitions
    committed = [p for p in parts if p.status == COMMITTED]
    assert len(committed) >= 2 and len(compaction_plan.groups) == 1, [(p.label, p.status, p.error) for p in parts]
    assert len(calls) == (1 if fragments else 0), calls
    table = sqlite_catalog.load().load_table(workload.identifier)
    after = read_table(table)
    assert after.rows == workload.expected_rows
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    for p in committed:
        assert p.validation["result"] == "passed" and p.validation["checks"], p.validation
        assert (p.rewritten_data_files > 0) == fragments, (p.label, p.rewritten_data_files)


def _minor_group_with_a_writer_after_the_read(spark, catalog: CatalogConfig, table: str, monkeypatch,  # type: ignore[no-untyped-def]
                                              writer) -> tuple[list, list[int], list[str]]:
    """Plan MINOR on ``table`` (one group of four partitions) and run it with ``writer()`` called right after the
    group's read, before any commit. Returns (partition results, partitions per group read, progress lines)."""
    from compaction.spark import job as job_module

    original = job_module._prepare_minor_group
    reads: list[int] = []

    def racing_prepare(spark_, plan_, tasks, progress):  # type: ignore[no-untyped-def]
        prepared = original(spark_, plan_, tasks, progress)
        reads.append(len(prepared))
        if len(reads) == 1:
            writer()
        return prepared

    monkeypatch.setattr(job_module, "_prepare_minor_group", racing_prepare)
    state = inspect_table(catalog, table)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties, NO_FRAGMENTS), CompactionMode.MINOR, NOW)
    assert len(compaction_plan.groups) == 1 and len(compaction_plan.groups[0].tasks) == 4, compaction_plan.groups
    lines: list[str] = []
    (result,) = [run_group(spark, compaction_plan, g.group_id, level=ValidationLevel.COUNT, progress=lines.append)
                 for g in compaction_plan.groups]
    return result.partitions, reads, lines


@pytest.mark.parametrize("format_version", [2, 3])
def test_minor_group_absorbs_a_writers_deletes_on_its_data_files_without_reading_again(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, format_version: int) -> None:
    """A writer's DELETE (a position delete, or on v3 a DV, for data files the conversion writes to) lands in two
    partitions between the group's read and its commit. Its positions are still right (every file they were read
    from is live); the writer's new delete files are absorbed beside the converted equality deletes (on v3 a second
    DV for a data file would be invalid: the writer's DV is merged into ours). All four partitions commit at once,
    with no second read. Rows: exactly the writer's model."""
    workload = generate(spark, sqlite_catalog, "cdc.stale", WorkloadSpec(
        seed=43, format_version=format_version, partitioning="days_ts", days_span=4, commits=3,
        rows_per_commit=40, evolve_spec=False, use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    by_day: dict[object, tuple] = {}
    for row in sorted(before.rows, key=repr):
        by_day.setdefault(row[2].date(), row)
    assert len(by_day) == 4, by_day
    victims = [by_day[day] for day in sorted(by_day)[:2]]
    expected = Counter(before.rows)
    for row in victims:
        del expected[row]
    writer_snapshot: list[int] = []

    def writer() -> None:
        ids = ", ".join(str(int(row[0])) for row in victims)
        spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({ids})")
        writer_snapshot.append(sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id)

    parts, reads, lines = _minor_group_with_a_writer_after_the_read(spark, sqlite_catalog, "cdc.stale", monkeypatch,
                                                                   writer)
    assert [p.status for p in parts] == [COMMITTED] * 4, [(p.label, p.status, p.error) for p in parts]
    assert reads == [4], (reads, lines)  # the group read only
    assert not any("changed since the group read" in line for line in lines), lines
    (commit,) = {p.commit_snapshot_ids[-1] for p in parts}
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert writer_snapshot[0] in ancestor_ids(table, commit)
    after = read_table(table)
    assert after.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    if format_version >= 3:  # the spec: at most one DV per data file
        targets = [d.referenced_data_file for d in after.delete_files if d.is_deletion_vector]
        assert len(targets) == len(set(targets)), targets


@pytest.mark.parametrize("format_version", [2, 3])
def test_minor_group_keeps_its_read_across_a_writers_deletes_on_its_own_new_files(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, format_version: int) -> None:
    """Between the group's read and its commit a writer appends rows to two partitions and deletes one of them again
    (a position delete, or on v3 a DV, naming only the writer's new data file: what a streaming upsert writer commits
    every checkpoint). Nothing the read covers changed, so the group commits all four partitions at once without
    reading again, and the rows are exactly the writer's."""
    workload = generate(spark, sqlite_catalog, "cdc.newdel", WorkloadSpec(
        seed=44, format_version=format_version, partitioning="days_ts", days_span=4, commits=3,
        rows_per_commit=40, evolve_spec=False, use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    by_day: dict[object, list[tuple]] = {}
    for row in sorted((r for r in before.rows if r[0] is not None), key=repr):
        by_day.setdefault(row[2].date(), []).append(row)
    assert len(by_day) == 4, by_day
    # Three rows copied under new ids into each of two partitions (a new data file each), then one deleted again.
    copied = [row for day in sorted(by_day)[:2] for row in by_day[day][:3]]
    new_ids = [int(row[0]) + 900_000 for row in copied]
    expected = Counter(before.rows)
    expected.update([(int(row[0]) + 900_000, *row[1:4], "new") for row in copied[1:]])
    writer_snapshots: list[int] = []

    def writer() -> None:
        ids = ", ".join(str(int(row[0])) for row in copied)
        spark.sql(f"INSERT INTO {workload.table} SELECT id + 900000, region, ts, amount, 'new' "
                  f"FROM {workload.table} WHERE id IN ({ids})")
        spark.sql(f"DELETE FROM {workload.table} WHERE id = {new_ids[0]}")
        writer_snapshots.append(sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id)

    parts, reads, lines = _minor_group_with_a_writer_after_the_read(spark, sqlite_catalog, "cdc.newdel", monkeypatch,
                                                                   writer)
    assert [p.status for p in parts] == [COMMITTED] * 4, [(p.label, p.status, p.error) for p in parts]
    assert reads == [4], (reads, lines)
    assert len({p.commit_snapshot_ids[-1] for p in parts}) == 1, [(p.label, p.commit_snapshot_ids) for p in parts]
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    writer_deletes = [d for d in after.delete_files if d.snapshot_id in writer_snapshots]
    assert [d.delete_kind for d in writer_deletes] == ["position" if format_version == 2 else "deletion_vector"], \
        after.delete_files
    assert after.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(d.delete_kind == "equality" for d in after.delete_files)

def _minor_group_of_three(spark, catalog: CatalogConfig, table: str):  # type: ignore[no-untyped-def]
    """Plan MINOR on ``table`` with its own policy (one group of three partitions) and run the group at ``count``:
    (partition results, progress lines)."""
    state = inspect_table(catalog, table)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MINOR, NOW)
    (group,) = compaction_plan.groups
    assert len(group.tasks) == 3, group
    lines: list[str] = []
    result = run_group(spark, compaction_plan, group.group_id, level=ValidationLevel.COUNT, progress=lines.append)
    parts = result.partitions
    return parts, lines


def test_a_group_fragment_merge_refused_by_a_writers_delete_is_planned_again(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:
    """The group's fragment merge (one Iceberg action) is refused because a writer's DELETE added a position delete
    to a file it replaces (seen in the soak: "found new position delete for replaced data file"). The merge is
    planned again from the new snapshot, as a group; no partition is reported compacted with its fragments left
    (the conversion alone used to be committed, and a partition's fragments piled up run after run)."""
    from compaction.core.errors import CommitConflictError
    from compaction.spark import job as job_module

    workload = generate(spark, sqlite_catalog, "cdc.refused", WorkloadSpec(
        seed=44, partitioning="days_ts", days_span=3, commits=4, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    victims = sorted(before.rows, key=repr)[:3]
    expected = Counter(before.rows)
    for row in victims:
        del expected[row]
    original = job_module.rewrite_partition
    calls: list[str] = []

    def refused_once(spark_, table, expression, **kwargs):  # type: ignore[no-untyped-def]
        calls.append("rewrite")
        if len(calls) == 1:  # the writer's DELETE lands while the action runs; Iceberg refuses its commit
            ids = ", ".join(str(int(row[0])) for row in victims)
            spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({ids})")
            raise CommitConflictError("Cannot commit, found new position delete for replaced data file")
        return original(spark_, table, expression, **kwargs)

    for module in (job_module, task_module):
        monkeypatch.setattr(module, "rewrite_partition", refused_once)
    parts, lines = _minor_group_of_three(spark, sqlite_catalog, "cdc.refused")
    assert [p.status for p in parts] == [COMMITTED] * 3, [(p.label, p.status, p.error) for p in parts]
    assert calls == ["rewrite", "rewrite"], (calls, lines)  # refused, then once more as a group
    for p in parts:  # every partition's fragments merged, and the refused attempt on its record
        assert p.after["data_files"] < p.before["data_files"], (p.label, p.before, p.after)
        assert p.attempts == 2 and len(p.conflicts) == 1, (p.label, p.attempts, p.conflicts)
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == expected, "rows lost or resurrected"
    assert not any(d.delete_kind == "equality" for d in after.delete_files)


def test_a_group_fragment_merge_checked_with_its_conversion_is_undone_with_it(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:
    """The group's fragment merge is not checked on its own: the conversion's positions are read meanwhile, the
    conversion commits right on top of it, and one check compares each partition's rows after the conversion with
    its rows before the merge. When that check fails, both commits are undone."""
    from compaction.core.errors import CommitValidationError
    from compaction.spark import job as job_module

    workload = generate(spark, sqlite_catalog, "cdc.unchecked", WorkloadSpec(
        seed=44, partitioning="days_ts", days_span=3, commits=4, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    head = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    real_validate, real_prepare = job_module.validate, job_module._prepare_minor_group
    checked: list[list[str]] = []
    reads: list[int] = []

    def fails_for_the_merge(spark_, table, ref, catalog, key, commit_ids, *args, **kwargs):  # type: ignore[no-untyped-def]
        operations = [str(table.snapshot(int(sid)).operation()) for sid in commit_ids]
        checked.append(operations)
        if "replace" in operations:
            raise CommitValidationError("injected: the merge's rows differ")
        return real_validate(spark_, table, ref, catalog, key, commit_ids, *args, **kwargs)

    def counted_prepare(*args, **kwargs):  # type: ignore[no-untyped-def]
        prepared = real_prepare(*args, **kwargs)
        reads.append(len(prepared))
        return prepared

    monkeypatch.setattr(job_module, "validate", fails_for_the_merge)
    monkeypatch.setattr(job_module, "_prepare_minor_group", counted_prepare)
    parts, lines = _minor_group_of_three(spark, sqlite_catalog, "cdc.unchecked")
    assert {p.status for p in parts} == {"rolled_back"}, [(p.label, p.status, p.error) for p in parts]
    assert all(p.error_class == "CommitValidationError" for p in parts), [p.error_class for p in parts]
    # One check of both commits, the merge first: no check of the merge alone.
    assert checked and checked[0][0] == "replace" and len(checked[0]) == 2, checked
    assert reads == [3], (reads, lines)  # the conversion's positions were read once, beside the merge's outcome
    assert all(len(p.commit_snapshot_ids) == 2 for p in parts), [p.commit_snapshot_ids for p in parts]
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head
    assert read_table(table).rows == workload.expected_rows


def test_a_job_group_reads_no_snapshots_rows_twice(spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A MINOR group merges fragments (one commit), then converts deletes (one commit, right on top of it). Both are
    checked in one step: each partition's rows after the conversion (from metadata) against its rows before the
    merge. The rows at the merge's commit are never read (a pass over the key columns with every equality delete
    applied: seconds of each health-triggered run), and no snapshot's rows are read twice."""
    from compaction.spark import job as job_module

    workload = generate(spark, sqlite_catalog, "cdc.once", WorkloadSpec(
        seed=45, partitioning="days_ts", days_span=3, commits=5, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    reads: list[tuple[int, str]] = []
    real_one, real_many = group_reads.fingerprint, group_reads.snapshot_fingerprints

    def one(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
        reads.append((int(snapshot_id), str(predicate)))
        return real_one(spark_, ref, snapshot_id, predicate, level)

    def many(spark_, ref, requests, level):  # type: ignore[no-untyped-def]
        reads.extend((int(sid), str(predicate)) for sid, predicate in requests)
        return real_many(spark_, ref, requests, level)

    monkeypatch.setattr(group_reads, "fingerprint", one)
    monkeypatch.setattr(group_reads, "snapshot_fingerprints", many)
    state = inspect_table(sqlite_catalog, "cdc.once")
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties, fragment_overrides(state)),
                           CompactionMode.MINOR, NOW)
    (group,) = compaction_plan.groups
    parts = run_group(spark, compaction_plan, group.group_id, level=ValidationLevel.COUNT).partitions
    assert len(parts) >= 2 and {p.status for p in parts} == {COMMITTED}, [(p.label, p.status, p.error) for p in parts]
    merged = [p for p in parts if p.rewritten_data_files]
    assert len(merged) >= 2 and all(len(p.validation["checks"]) == 1 for p in merged), [p.validation for p in parts]
    table = sqlite_catalog.load().load_table(workload.identifier)
    merges = set()
    for p in merged:
        (check,) = p.validation["checks"]
        merge, conversion = p.commit_snapshot_ids
        merges.add(merge)
        assert check["commits"] == [merge, conversion] and check["snapshot_id"] == conversion
        assert check["parent_id"] == table.snapshot_by_id(merge).parent_snapshot_id and check["ok"]
        assert check["before"]["rows"] == check["after"]["rows"] > 0
    assert not merges & {sid for sid, _ in reads}, (merges, sorted(reads))
    assert len(reads) == len(set(reads)), sorted(reads)
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows == workload.expected_rows


def test_a_group_reads_its_commits_parents_in_one_job_when_a_writer_touched_every_partition(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch) -> None:
    """A writer appends to every partition once the group's base rows are being read: that read no longer gives
    the rows of any partition at the parent of our first commit, so each is read - for all partitions of the group
    in the Spark job that reads the commit's own rows, not in one job per partition (a streaming table: every run,
    seconds of each)."""
    from compaction.spark import job as job_module

    workload = generate(spark, sqlite_catalog, "cdc.parents", WorkloadSpec(
        seed=46, partitioning="days_ts", days_span=3, commits=5, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    state = inspect_table(sqlite_catalog, "cdc.parents")
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties, fragment_overrides(state)),
                           CompactionMode.MINOR, NOW)
    (group,) = compaction_plan.groups
    jobs: list[list[int]] = []
    real_one, real_many, real_group_rows = (group_reads.fingerprint, group_reads.snapshot_fingerprints,
                                            job_module._group_rows)

    def one(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
        jobs.append([int(snapshot_id)])
        return real_one(spark_, ref, snapshot_id, predicate, level)

    def many(spark_, ref, requests, level):  # type: ignore[no-untyped-def]
        jobs.append([int(sid) for sid, _ in requests])
        return real_many(spark_, ref, requests, level)

    def group_rows_then_a_writer(*args, **kwargs):  # type: ignore[no-untyped-def]
        rows = real_group_rows(*args, **kwargs)
        # One more copy of a row of each partition (days of ts in UTC).
        spark.sql(f"INSERT INTO {workload.table} SELECT * FROM {workload.table} WHERE id IN (SELECT min(id) FROM "
                  f"{workload.table} GROUP BY floor(unix_micros(ts) / 86400000000))")
        return rows

    monkeypatch.setattr(group_reads, "fingerprint", one)
    monkeypatch.setattr(group_reads, "snapshot_fingerprints", many)
    monkeypatch.setattr(job_module, "_group_rows", group_rows_then_a_writer)
    parts = run_group(spark, compaction_plan, group.group_id, level=ValidationLevel.COUNT).partitions
    assert len(parts) >= 2 and {p.status for p in parts} == {COMMITTED}, [(p.label, p.status, p.error) for p in parts]
    merged = [p for p in parts if p.rewritten_data_files]
    assert len(merged) >= 2, [p.validation for p in parts]
    merge_commit = {int(p.commit_snapshot_ids[0]) for p in merged}
    (writer,) = {int(p.validation["checks"][0]["parent_id"]) for p in merged}
    assert len(merge_commit) == 1 and all(p.validation["result"] == "passed" for p in parts)
    # The writer's snapshot read once for all partitions, in one job; the merge commit's rows are not read (the
    # conversion right on top of it is checked with it, its own rows from metadata).
    (job,) = [j for j in jobs if writer in j]
    assert job.count(writer) == len(merged) and not merge_commit & {sid for j in jobs for sid in j}, jobs
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert read_table(table).rows == read_table(table, writer).rows


def _minor_at_count(spark, catalog: CatalogConfig, table_name: str, group_commit: bool):  # type: ignore[no-untyped-def]
    """A MINOR of every partition (no fragment merge) at ``count``: the partitions' outcomes."""
    state = inspect_table(catalog, table_name)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties, NO_FRAGMENTS), CompactionMode.MINOR, NOW)
    results = [run_group(spark, compaction_plan, g.group_id, level=ValidationLevel.COUNT, group_commit=group_commit)
               for g in compaction_plan.groups]
    return [p for r in results for p in r.partitions]


@pytest.mark.parametrize("group_commit", [True, False])
def test_a_commit_whose_answer_is_lost_is_found_and_undone_not_run_again(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, group_commit: bool) -> None:
    """The RowDelta (a group's, or one partition's) lands but its answer is lost (the caller learns of no commit):
    the job looks for our snapshot before anything else, finds it and undoes it, so the partitions end rolled back -
    not tried again, where our own commit would read as "changed since planning" and the partition as skipped, the
    landed snapshot never checked."""
    from compaction.spark import minor

    workload = generate(spark, sqlite_catalog, "cdc.ml", WorkloadSpec(
        seed=42, partitioning="days_ts", days_span=2, commits=2, rows_per_commit=30, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    head = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    real_commit = minor.commit_changes
    landed: list[int] = []

    def answer_lost(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["committed"] = landed  # what the commit recorded never reaches the caller
        real_commit(*args, **kwargs)
        raise RuntimeError("injected: connection reset after the catalog took the commit")

    monkeypatch.setattr(minor, "commit_changes", answer_lost)
    parts = _minor_at_count(spark, sqlite_catalog, "cdc.ml", group_commit=group_commit)
    assert landed, "the commit did not land"
    assert len(parts) >= 2 and {p.status for p in parts} == {"rolled_back"}, \
        [(p.label, p.status, p.error) for p in parts]
    if group_commit:
        assert all(p.commit_snapshot_ids == landed[-1:] for p in parts)
    else:  # one commit per partition, each found and undone
        assert sorted(sid for p in parts for sid in p.commit_snapshot_ids) == sorted(landed)
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head
    assert read_table(table).rows == workload.expected_rows


@pytest.mark.parametrize("group_commit", [True, False])
def test_a_post_commit_check_failure_undoes_the_minor_commit(spark, sqlite_catalog: CatalogConfig, monkeypatch,  # type: ignore[no-untyped-def]
                                                              group_commit: bool) -> None:
    """Our own check after the commit fails: the commit is rolled back (not merely reported so), per partition and
    for a group commit alike."""
    from compaction.spark import minor

    workload = generate(spark, sqlite_catalog, "cdc.mu", WorkloadSpec(
        seed=42, partitioning="days_ts", days_span=2, commits=2, rows_per_commit=30, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    head = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    real_check = minor.check_no_conflicting_changes

    def fails_after_commit(spark_, table, expression, base_id, commit_id, work):  # type: ignore[no-untyped-def]
        if commit_id is not None:
            raise minor.CommitConflictError("injected: a concurrent rewrite added older data")
        return real_check(spark_, table, expression, base_id, commit_id, work)

    monkeypatch.setattr(minor, "check_no_conflicting_changes", fails_after_commit)
    parts = _minor_at_count(spark, sqlite_catalog, "cdc.mu", group_commit)
    assert parts and {p.status for p in parts} == {"rolled_back"}, [(p.label, p.status, p.error) for p in parts]
    assert all(p.error_class == "CommitValidationError" and p.commit_snapshot_ids for p in parts)
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert table.current_snapshot().snapshot_id == head
    assert read_table(table).rows == workload.expected_rows


@pytest.mark.parametrize("format_version", [2, 3])
@pytest.mark.parametrize("group_commit", [True, False])
@pytest.mark.parametrize("lose_a_position", [False, True], ids=["right", "a-position-lost"])
def test_the_count_check_of_a_minor_takes_the_commits_rows_from_metadata(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, format_version: int, group_commit: bool,
        lose_a_position: bool) -> None:
    """At ``count`` the commit's side of a MINOR's check is taken from metadata (record counts less the counts of
    the DVs / position-delete files just written, each data file having exactly one), not read, and it still
    catches a conversion that lost a deleted row's position: the commit is undone, the rows unchanged."""
    from compaction.spark import minor

    workload = generate(spark, sqlite_catalog, "cdc.mm", WorkloadSpec(
        seed=43, partitioning="days_ts", days_span=2, commits=3, rows_per_commit=40, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7, format_version=format_version))
    head = sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id
    if lose_a_position:
        real_union = minor.union_positions

        def loses_one(*parts):  # type: ignore[no-untyped-def]
            merged = real_union(*parts)
            first = min(path for path, positions in merged.items() if positions)
            merged[first] = merged[first][1:]  # the row at this position would be resurrected
            return merged

        monkeypatch.setattr(minor, "union_positions", loses_one)
    parts = _minor_at_count(spark, sqlite_catalog, "cdc.mm", group_commit)
    table = sqlite_catalog.load().load_table(workload.identifier)
    assert read_table(table).rows == workload.expected_rows
    checks = [c for p in parts for c in p.validation.get("checks", [])]
    from_metadata = [c for c in checks if "after_from" in c]
    if lose_a_position:
        # The partition whose position was lost is undone (with a group commit, the whole group); the others of a
        # per-partition run commit their own, right, conversions.
        statuses = [p.status for p in parts]
        assert "rolled_back" in statuses and set(statuses) <= {"rolled_back", COMMITTED}, statuses
        if group_commit:
            assert set(statuses) == {"rolled_back"} and table.current_snapshot().snapshot_id == head
        failed = [c for c in from_metadata if not c["ok"]]
        assert failed and all(c["after"]["rows"] == c["before"]["rows"] + 1 for c in failed), checks
    else:
        assert len(parts) >= 2 and {p.status for p in parts} == {COMMITTED}, [(p.label, p.status, p.error) for p in parts]
        # Every conversion's check took the commit's rows from metadata, and they were right.
        assert len(from_metadata) == len(parts) and all(c["ok"] for c in from_metadata), checks
        live = spark.read.format("iceberg").load(workload.table).count()
        assert sum(c["after"]["rows"] for c in from_metadata) == live


def test_minor_removes_an_equality_delete_whose_keys_match_no_row_of_its_partition(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    """An equality delete on (id, region) committed into partition region='EU' with region='US' keys can never
    apply to a row of that partition. Iceberg's metrics-based pruning hides it from a row-filtered scan, while the
    planner counts it from the manifests: MINOR must see it, convert nothing and remove it."""
    from compaction.spark import jvm as J
    from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit

    table = f"{sqlite_catalog.name}.cdc.orphan_eq"
    spark.sql(f"DROP TABLE IF EXISTS {table}")
    spark.sql(f"CREATE TABLE {table} (id BIGINT, region STRING, v STRING) USING iceberg PARTITIONED BY (region) "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'EU', 'a'), (2, 'EU', 'b'), (3, 'US', 'c')")
    jtable = J.load_table(spark, table)
    write_and_commit(spark, jtable, [EqualityDeleteSpec(("id", "region"), ((1, "US"), (2, "US")), partition=("EU",))])
    def rows() -> list[tuple[object, ...]]:
        return sorted(tuple(r) for r in spark.table(table).collect())

    before = rows()
    assert len(before) == 3

    state = inspect_table(sqlite_catalog, "cdc.orphan_eq")
    eu = next(p for p in state.partitions if p.key.fields[0].value == "EU")
    assert len(eu.equality_delete_files) == 1
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MINOR, NOW)
    assert [d.kind for d in compaction_plan.decisions if d.partition == eu.key] == [CompactionKind.MINOR]
    results = [run_group(spark, compaction_plan, g.group_id, level=ValidationLevel.COUNT) for g in compaction_plan.groups]
    outcomes = [p for r in results for p in r.partitions]
    assert [p.status for p in outcomes] == [COMMITTED], [(p.label, p.status, p.error) for p in outcomes]
    assert rows() == before
    after = inspect_table(sqlite_catalog, "cdc.orphan_eq")
    assert not [d for p in after.partitions for d in p.equality_delete_files], "the equality delete is still live"
    replan = plan(after, CompactionPolicy.resolve(after.properties), CompactionMode.MINOR, NOW)
    assert all(d.kind is CompactionKind.NONE for d in replan.decisions), [d.reason for d in replan.decisions]


def test_the_rewrite_action_works_after_another_session_became_the_active_one(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    """PySpark makes a new session the JVM's active one; Iceberg's rewrite action registers the catalog it stages
    file groups in (default_cache_iceberg) on SparkSession.active(), so without care it ends up on the other session
    and the action fails with "Catalog 'default_cache_iceberg' ... is not defined"."""
    jvm = spark.sparkContext._jvm
    workload = generate(spark, sqlite_catalog, "cdc.act", WorkloadSpec(
        seed=44, partitioning="days_ts", days_span=1, commits=3, rows_per_commit=30, evolve_spec=False,
        use_equality_deletes=True, eq_delete_fraction=0.7))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    other = spark.newSession()
    other.sql("SELECT 1").collect()
    jvm.org.apache.spark.sql.SparkSession.setActiveSession(other._jsparkSession)
    jvm.org.apache.spark.sql.SparkSession.setDefaultSession(other._jsparkSession)
    try:
        run = compact_in_process(spark, sqlite_catalog, "cdc.act", CompactionMode.MINOR, now=NOW)
    finally:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        jvm.org.apache.spark.sql.SparkSession.setDefaultSession(spark._jsparkSession)
    parts = run.partitions
    assert parts and all(p.status == COMMITTED for p in parts), [(p.label, p.status, p.error) for p in parts]
    assert sum(p.rewritten_data_files for p in parts) > 0
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows == before.rows
