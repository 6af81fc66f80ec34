"""MAJOR on tables whose partition spec evolved: real Spark, real Iceberg, content checked with the
reference reader (icecompact_testing.oracle), which decides which delete applies to which live data file from the
table's metadata by the spec's rules (sequence numbers, partition, global equality deletes) independently of ours."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.metadata.inspect import inspect_table
from compaction.spark import jvm as J
from compaction.demo import workload
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import OracleResult, read_table
from compaction.demo.workload import WorkloadSpec, generate, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
UNPARTITIONED_TO_REGION = "ADD PARTITION FIELD region"


def _unpartitioned_spec_ids(table) -> set[int]:  # type: ignore[no-untyped-def]
    return {sid for sid, spec in table.metadata.specs().items() if not spec.fields}


def _sql(spark, statement: str) -> None:  # type: ignore[no-untyped-def]
    spark.sql(statement).collect()


def _insert_one_file(spark, table: str, select: str) -> None:  # type: ignore[no-untyped-def]
    """INSERT writing exactly one data file (one Spark task)."""
    _sql(spark, f"INSERT INTO {table} SELECT /*+ REPARTITION(1) */ * FROM ({select})")


# Defect 1 ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("format_version", [2, 3])
def test_selective_major_rewrites_a_lone_small_file_with_deletes(spark, sqlite_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                 format_version: int) -> None:
    """Iceberg keeps a file group only with two picked files or a delete-heavy one (min-input-files), so a small file
    alone in its group kept its deletes (as a DV / position delete) after a selective MAJOR. Two shapes: the only
    file left of the old (unpartitioned) spec, and a small file next to one large segment in a current partition."""
    table = f"{sqlite_catalog.name}.ev.lone"
    _sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.ev")
    _sql(spark, f"CREATE TABLE {table} (id bigint, region string, payload string) USING iceberg TBLPROPERTIES ("
                f"'format-version'='{format_version}', 'write.delete.mode'='merge-on-read', "
                f"'write.update.mode'='merge-on-read', 'write.merge.mode'='merge-on-read', "
                f"'write.distribution-mode'='none')")
    # Twenty rows per small file, one deleted: far below every delete ratio (no full rewrite, nothing delete-heavy).
    _insert_one_file(spark, table, "SELECT id, 'US', 'old' FROM range(1, 21)")  # old spec, small
    _sql(spark, f"ALTER TABLE {table} {UNPARTITIONED_TO_REGION}")
    # One large segment of region EU (incompressible payloads), then one small EU file.
    _insert_one_file(spark, table, "SELECT id + 100, 'EU', sha2(cast(id AS string), 256) FROM range(0, 3000)")
    _insert_one_file(spark, table, "SELECT id, 'EU', 'new' FROM range(30, 50)")
    _sql(spark, f"DELETE FROM {table} WHERE id IN (1, 30)")
    pyiceberg_table = sqlite_catalog.load().load_table(("ev", "lone"))
    before = read_table(pyiceberg_table)
    sizes = sorted(f.file_size_in_bytes for f in before.data_files)
    assert len(sizes) == 3 and sizes[1] * 4 < sizes[2], sizes
    small_limit = (sizes[1] + sizes[2]) // 2  # the two tiny files are small, the segment is not
    lone_files = {f.path for f in before.data_files if f.file_size_in_bytes < small_limit}
    assert lone_files <= set(before.applicable_deletes), "both small files carry a delete before"

    run = compact_in_process(spark, sqlite_catalog, "ev.lone", CompactionMode.MAJOR, now=NOW,
                             overrides={"target_file_size_bytes": 8 * sizes[2], "min_file_size_bytes": small_limit})
    run.assert_finished()
    the_plan = run.plan
    assert the_plan.tasks and not any(t.full_rewrite for t in the_plan.tasks)

    after = read_table(sqlite_catalog.load().load_table(("ev", "lone")))
    assert after.rows == before.rows
    assert spark_rows_of(spark, table) == before.rows
    assert not lone_files & {f.path for f in after.data_files}, "a lone small file with deletes was kept"
    for f in after.data_files:
        if f.file_size_in_bytes < small_limit:
            assert f.path not in after.applicable_deletes, f"a delete still applies to small file {f.path}"


def spark_rows_of(spark, table: str):  # type: ignore[no-untyped-def]
    from collections import Counter

    return Counter(tuple(r) for r in spark.sql(f"SELECT id, region, payload FROM {table}").collect())


# Defects 2 and 3 -----------------------------------------------------------------------------------------------------
def _assert_no_delete_applies(result: OracleResult) -> None:
    """By the spec's rule, computed by the reference reader from metadata: no delete file applies to a live data
    file (position deletes / DVs naming it, equality deletes of its partition or global ones with a higher data
    sequence number), and no global equality delete is left once nothing older is live."""
    assert not result.applicable_deletes, {p: sorted(d.path for d in ds) for p, ds in result.applicable_deletes.items()}


@pytest.mark.parametrize("format_version", [2, 3])
def test_full_rewrite_major_leaves_no_delete_on_an_evolved_table_with_global_equality_deletes(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, monkeypatch, format_version: int) -> None:
    monkeypatch.setitem(workload.EVOLUTIONS, "unpartitioned", UNPARTITIONED_TO_REGION)  # type: ignore[index]
    spec = WorkloadSpec(seed=281 + format_version, format_version=format_version, partitioning="unpartitioned",
                        evolve_spec=True, global_eq_deletes=True, commits=4, rows_per_commit=40, days_span=2)
    wl = generate(spark, sqlite_catalog, "ev.full", spec)
    pyiceberg_catalog = sqlite_catalog.load()
    before = read_table(pyiceberg_catalog.load_table(wl.identifier))
    assert before.rows == wl.expected_rows
    unpartitioned = _unpartitioned_spec_ids(pyiceberg_catalog.load_table(wl.identifier))
    assert any(d.delete_kind == "equality" and d.spec_id in unpartitioned for d in before.delete_files), \
        "scenario without a global equality delete"
    sizes = sorted(f.file_size_in_bytes for f in before.data_files)
    median = sizes[len(sizes) // 2]

    run = compact_in_process(spark, sqlite_catalog, "ev.full", CompactionMode.MAJOR, now=NOW,
                             overrides={"major_full_rewrite": True, "target_file_size_bytes": 8 * median,
                                        "min_file_size_bytes": median})
    run.assert_finished()
    the_plan = run.plan
    assert all(t.full_rewrite for t in the_plan.tasks)

    table = pyiceberg_catalog.load_table(wl.identifier)
    after = read_table(table)
    assert after.rows == before.rows
    assert spark_rows(spark, wl.table) == before.rows
    _assert_no_delete_applies(after)
    # Defect 3: every global equality delete is now dangling (nothing older is live) and was removed.
    assert not [d.path for d in after.delete_files if d.delete_kind == "equality" and d.spec_id in unpartitioned]
    # The rows the rewrite moved left the old spec: every data file written by it is of the current spec.
    current_spec = table.metadata.default_spec_id
    old = {f.path for f in before.data_files}
    assert all(f.spec_id == current_spec for f in after.data_files if f.path not in old)


def test_dangling_cleanup_judges_a_global_equality_delete_against_every_partition(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    """A global equality delete is dangling only when no live data file of any partition of any spec has a lower
    data sequence number: a cleanup scoped to one partition keeps it while an older file lives elsewhere, and
    removes it once none does (before: never judged unless the scan covered the whole table)."""
    from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
    from compaction.spark.expressions import java_partition_expression
    from compaction.spark.major import remove_dangling_deletes, rewrite_partition
    from compaction.spark.partition_files import find_dangling_deletes

    name = f"{sqlite_catalog.name}.ev.dangle"
    _sql(spark, f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.ev")
    _sql(spark, f"CREATE TABLE {name} (id bigint, region string) USING iceberg TBLPROPERTIES ("
                f"'format-version'='2', 'write.delete.mode'='merge-on-read')")
    _insert_one_file(spark, name, "VALUES (1L, 'US'), (2L, 'US')")  # spec 0
    _sql(spark, f"ALTER TABLE {name} {UNPARTITIONED_TO_REGION}")
    _insert_one_file(spark, name, "VALUES (3L, 'EU'), (4L, 'EU'), (5L, 'EU')")  # spec 1, region EU
    jtable = J.load_table(spark, name)
    jtable.refresh()
    spec0 = next(sid for sid in J.spec_ids(jtable) if not jtable.specs().get(sid).isPartitioned())
    # Global (spec 0, unpartitioned) and the last commit: a rewrite starting now keeps its sequence number S, so
    # Iceberg's own drop of deletes older than every data file (data seq < the table's lowest) never takes it.
    write_and_commit(spark, jtable, [EqualityDeleteSpec(("id",), ((1,), (3,)), spec0, ())])
    jtable.refresh()
    state = inspect_table(sqlite_catalog, "ev.dangle")
    eu = next(p.key for p in state.partitions if p.key.spec_id == int(jtable.spec().specId())
              and p.key.fields[0].value == "EU")
    eu_expression = java_partition_expression(spark, jtable, eu)
    everything = J.jvm(spark).org.apache.iceberg.expressions.Expressions.alwaysTrue()
    assert spark_rows_of_ids(spark, name) == {2, 4, 5}

    # MAJOR of region EU only: the global delete still applies to the spec-0 file (region US, not in scope).
    rewrite_partition(spark, jtable, eu_expression, target_file_size_bytes=1 << 27, plan_id="t", tag="t1")
    jtable.refresh()
    current = int(jtable.currentSnapshot().snapshotId())
    assert find_dangling_deletes(spark, jtable, current, eu_expression, covers_whole_table=False) == [], \
        "the global delete still applies to the older file of spec 0"

    # Rewrite the rest: nothing older than the delete is live any more -> dangling, also for a cleanup of EU only.
    rewrite_partition(spark, jtable, everything, target_file_size_bytes=1 << 27, plan_id="t", tag="t2")
    jtable.refresh()
    current = int(jtable.currentSnapshot().snapshotId())
    dangling = find_dangling_deletes(spark, jtable, current, eu_expression, covers_whole_table=False)
    assert [str(d.content().toString()) for d in dangling] == ["EQUALITY_DELETES"]
    _, removed = remove_dangling_deletes(spark, jtable, eu_expression, plan_id="t", tag="t3",
                                         covers_whole_table=False)
    assert removed == 1
    after = read_table(sqlite_catalog.load().load_table(("ev", "dangle")))
    assert not after.delete_files and not after.applicable_deletes
    assert spark_rows_of_ids(spark, name) == {2, 4, 5}


def spark_rows_of_ids(spark, table: str) -> set[int]:  # type: ignore[no-untyped-def]
    return {int(r[0]) for r in spark.sql(f"SELECT id FROM {table}").collect()}


def test_major_of_an_evolved_table_rewrites_every_file_once(spark, sqlite_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                            monkeypatch) -> None:
    """The unpartitioned spec's MAJOR rewrites with the filter alwaysTrue, i.e. every file of the table a delete
    applies to and every small file, of every spec. Run on its own before the current spec's partitions, their files
    were rewritten again by their own MAJOR ("changed since planning, re-evaluated"). Now the plan keeps the
    overlapping partitions in one job group and the job rewrites them in one action: a count, never a timing."""
    monkeypatch.setitem(workload.EVOLUTIONS, "unpartitioned", UNPARTITIONED_TO_REGION)  # type: ignore[index]
    spec = WorkloadSpec(seed=287, format_version=2, partitioning="unpartitioned", evolve_spec=True,
                        global_eq_deletes=True, commits=4, rows_per_commit=40, days_span=2)
    wl = generate(spark, sqlite_catalog, "ev.once", spec)
    pyiceberg_catalog = sqlite_catalog.load()
    before_table = pyiceberg_catalog.load_table(wl.identifier)
    before = read_table(before_table)
    base_snapshots = {s.snapshot_id for s in before_table.metadata.snapshots}
    sizes = sorted(f.file_size_in_bytes for f in before.data_files)
    median = sizes[len(sizes) // 2]

    run = compact_in_process(spark, sqlite_catalog, "ev.once", CompactionMode.MAJOR, now=NOW,
                             overrides={"major_full_rewrite": True, "target_file_size_bytes": 8 * median,
                                        "min_file_size_bytes": median})
    run.assert_finished()
    the_plan, outcomes = run.plan, run.partitions
    keys = {t.partition for t in the_plan.tasks}
    assert any(k.is_unpartitioned for k in keys) and len({k.spec_id for k in keys}) == 2
    assert len(the_plan.groups) == 1
    assert not [p.label for p in outcomes if "changed since planning" in p.reason]

    table = pyiceberg_catalog.load_table(wl.identifier)
    after = read_table(table)
    assert after.rows == before.rows
    _assert_no_delete_applies(after)
    ours = [s for s in table.metadata.snapshots if s.snapshot_id not in base_snapshots]
    removed = sum(int(s.summary.additional_properties.get("deleted-data-files", 0)) if s.summary else 0 for s in ours)
    originals = {f.path for f in before.data_files} - {f.path for f in after.data_files}
    assert originals and removed == len(originals), "a file written by the run was rewritten again by it"
    assert sum(p.rewritten_data_files for p in outcomes) == len(originals), "each file counted in its own partition"
    assert len([s for s in ours if s.summary and s.summary.operation.value == "replace"]) <= 2  # rewrite + cleanup
