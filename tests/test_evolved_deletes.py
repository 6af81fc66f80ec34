"""Equality deletes written under an unpartitioned spec are global (Iceberg spec, "Scan Planning"). On a
table that started unpartitioned and then gained a partition field, inspection, health and planning count them in
the new spec's partitions too, as Iceberg's own scan planning applies them."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.catalog import CatalogConfig
from compaction.cli import partition_health_rows
from compaction.core.attribution import GlobalDeleteIndex
from compaction.core.errors import UnsupportedTableError
from compaction.core.health import sample_from_state
from compaction.core.model import DeleteContent
from compaction.core.plan import CompactionKind
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark import jvm as J
from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
from compaction.spark.partition_files import scan_partition
from compaction.demo.workload import WorkloadSpec, generate

NOW = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def _evolved_with_global_deletes(spark, catalog: CatalogConfig, version: int) -> str:  # type: ignore[no-untyped-def]
    # Unpartitioned for the first two rounds, then ADD PARTITION FIELD bucket(4, id); every round after the first
    # commits equality deletes written with the unpartitioned spec (global), also after the evolution.
    spec = WorkloadSpec(seed=28, format_version=version, partitioning="unpartitioned", commits=4, rows_per_commit=40,
                        evolve_spec=True, global_eq_deletes=True, use_equality_deletes=True, eq_delete_fraction=0.7,
                        noise_eq_deletes=False)
    name = f"evolved.global_v{version}"
    generate(spark, catalog, name, spec)
    return name


@pytest.mark.parametrize("version", [2, 3])
def test_global_equality_deletes_count_in_the_new_specs_partitions(spark, sqlite_catalog: CatalogConfig,
                                                                   version: int) -> None:
    name = _evolved_with_global_deletes(spark, sqlite_catalog, version)
    state = inspect_table(sqlite_catalog, name)
    owners = [p for p in state.partitions if p.key.is_unpartitioned]
    assert len(owners) == 1 and owners[0].equality_delete_files, "scenario: global equality deletes"
    newer = [p for p in state.partitions if not p.key.is_unpartitioned and p.data_files]
    assert newer, "scenario: partitions of the evolved spec"
    # Scenario check: none of the new spec's partitions has an equality delete of its own.
    assert not any(p.equality_delete_files for p in newer)

    # What Iceberg's own scan planning (DeleteFileIndex) applies to each data file of the new spec's partitions.
    table = J.load_table(spark, f"{sqlite_catalog.name}.{name}")
    table.refresh()
    exprs = J.jvm(spark).org.apache.iceberg.expressions.Expressions
    scanned = scan_partition(spark, table, exprs.alwaysTrue(), state.snapshot_id, with_applied=True)
    eq_paths = {path for path, _ in scanned.deletes if path in {d.path for d in owners[0].equality_delete_files}}
    partition_of = {f.path: p.key for p in state.partitions for f in p.data_files}
    iceberg_applies: dict[object, set[str]] = {}
    for data_path, refs in scanned.applied.items():
        iceberg_applies.setdefault(partition_of[data_path], set()).update(r[0] for r in refs if r[0] in eq_paths)

    index = GlobalDeleteIndex.of(state.partitions)
    rows = {r["partition"]: r for r in partition_health_rows(state)}
    applying_somewhere = 0
    for p in newer:
        ours = {d.path for d in index.attribute(p).global_from_elsewhere}
        # Ours is metadata-only (no column statistics): a superset of what Iceberg applies after its stats pruning.
        assert iceberg_applies.get(p.key, set()) <= ours, p.key.label()
        row = rows[p.key.label()]
        assert row["equality_delete_files"] == row["global_equality_delete_files"] == len(ours)
        applying_somewhere += bool(iceberg_applies.get(p.key))
    assert applying_somewhere, "scenario: Iceberg applies global deletes to the new spec's data files"

    policy = CompactionPolicy.resolve(state.properties)
    major = plan(state, policy, "major", NOW)
    decisions = {d.partition: d for d in major.decisions}
    for p in newer:
        if iceberg_applies.get(p.key):
            d = decisions[p.key]
            assert d.kind is CompactionKind.MAJOR, d.reason
            assert "global equality-delete file" in d.reason and d.metrics["full_rewrite"] == 1, d.reason
            tasks = [t for t in major.tasks if t.partition == p.key]
            older = {f.path for f in p.data_files
                     if any(f.data_sequence_number < g.data_sequence_number for g in index.attribute(p).global_from_elsewhere)}
            assert older <= {f for t in tasks for f in t.data_files}, "the MAJOR rewrites every file they apply to"

    # Health: the same counts per partition, each file once in the table totals.
    sample = sample_from_state(state, policy, plan(state, policy, "auto", NOW))
    detail = {h.label: h for h in sample.partitions_detail}
    for p in newer:
        assert detail[p.key.label()].equality_delete_files == rows[p.key.label()]["equality_delete_files"]
    assert sample.equality_delete_files == sum(1 for p in state.partitions for d in p.delete_files
                                               if d.content is DeleteContent.EQUALITY)


def test_an_equality_delete_on_a_nested_field_is_refused_with_nothing_committed(spark,  # type: ignore[no-untyped-def]
                                                                                 sqlite_catalog: CatalogConfig) -> None:
    # Iceberg's reader finds a delete file's columns through its struct layout: a nested field written as a top-level
    # column would be a delete that no reader applies, so the writer refuses it.
    name = f"{sqlite_catalog.name}.evolved.nested_key"
    spark.sql(f"CREATE TABLE {name} (id BIGINT, info STRUCT<a: INT, b: STRING>) USING iceberg "
              "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {name} VALUES (1, named_struct('a', 7, 'b', 'x'))")
    table = J.load_table(spark, name)
    before = table.currentSnapshot().snapshotId()
    with pytest.raises(UnsupportedTableError, match="'info.a' is nested"):
        write_and_commit(spark, table, [EqualityDeleteSpec(columns=("info.a",), rows=((7,),))])
    table.refresh()
    assert table.currentSnapshot().snapshotId() == before
    assert spark.table(name).count() == 1
    # A top-level key of the same table is written and applied.
    write_and_commit(spark, table, [EqualityDeleteSpec(columns=("id",), rows=((1,),))])
    assert spark.table(name).count() == 0
