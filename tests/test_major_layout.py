"""The layout of a MAJOR (``compaction.major.strategy`` = binpack | sort | zorder, and a bin-pack that honours
the table's sort order) on seeded random CDC tables, with real Spark + Iceberg: the rows stay exactly the same (the
reference reader and Spark), every data file of a compacted partition is rewritten, and each new file holds its rows
in the order asked for."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow.parquet as pq
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.core.policy import CompactionPolicy
from compaction.spark import jvm as J
from compaction.core.results import COMMITTED, FAILED, NO_OP, SKIPPED
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SORT = {"major_strategy": "sort", "major_sort_columns": "amount DESC NULLS LAST, id"}
ZORDER = {"major_strategy": "zorder", "major_sort_columns": "amount, id"}
#: (seed, strategy): both format versions, several partitionings (checked by the first test).
CASES = [(101, "sort"), (102, "zorder"), (105, "sort"), (106, "zorder")]


def _data_files(spark: Any, ref: str) -> list[tuple[str, int, int]]:
    """(path, sort_order_id, spec_id) of the live data files."""
    rows = spark.sql(f"SELECT file_path, sort_order_id, spec_id FROM {ref}.data_files").collect()
    return [(r.file_path, r.sort_order_id, r.spec_id) for r in rows]


def _local(path: str) -> str:
    return path[len("file:"):] if path.startswith("file:") else path


def _in_order(values: list[tuple[Any, ...]], descending: tuple[bool, ...]) -> bool:
    def key(v: tuple[Any, ...]) -> tuple[Any, ...]:
        # nulls last for a descending term, first for an ascending one (Iceberg's defaults, as asked)
        out: list[Any] = []
        for x, desc in zip(v, descending):
            if desc:
                out.append((x is None, None if x is None else -x))
            else:
                out.append((x is not None, x))
        return tuple(out)

    return all(key(a) <= key(b) for a, b in zip(values, values[1:]))


def test_cases_cover_both_format_versions_and_several_partitionings() -> None:
    specs = [WorkloadSpec.random(seed) for seed, _ in CASES]
    assert {s.format_version for s in specs} == {2, 3}
    assert len({s.partitioning for s in specs}) >= 2


@pytest.mark.parametrize("seed,strategy", CASES)
def test_clustered_major_keeps_rows_and_rewrites_every_file(spark, request, seed: int, strategy: str) -> None:  # type: ignore[no-untyped-def]
    catalog: CatalogConfig = request.getfixturevalue("postgres_catalog" if seed % 2 else "sqlite_catalog")
    spec = WorkloadSpec.random(seed)
    workload = generate(spark, catalog, "cdc.t", spec)
    before = read_table(catalog.load().load_table(workload.identifier))
    files_before = {p for p, _, _ in _data_files(spark, workload.table)}
    overrides = SORT if strategy == "sort" else ZORDER
    run = compact_in_process(spark, catalog, "cdc.t", CompactionMode.MAJOR, overrides=overrides, now=NOW)
    the_plan, outcomes = run.plan, run.partitions
    majors = [d for d in the_plan.decisions if d.kind is CompactionKind.MAJOR]
    assert majors and all(t.full_rewrite for t in the_plan.tasks)
    assert all(strategy in d.reason and "every data file" in d.reason for d in majors), [d.reason for d in majors]
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), \
        [(p.label, p.status, p.error) for p in outcomes]
    assert any(p.status == COMMITTED for p in outcomes)

    after = read_table(catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows, f"rows changed by a {strategy} MAJOR ({spec})"
    assert spark_rows(spark, workload.table) == before.rows
    assert not any(d.partition for ds in after.applicable_deletes.values() for d in ds), "a partition delete applies"
    # Every data file of a compacted partition is new (rewrite-all), so no old file overlaps the clustered ones.
    compacted_labels = {p.label for p in outcomes if p.status == COMMITTED}
    new_files = [(p, o) for p, o, _ in _data_files(spark, workload.table) if p not in files_before]
    assert new_files
    if strategy == "sort":
        for path, _order in new_files:
            table = pq.read_table(_local(path), columns=["amount", "id"])
            values = list(zip(table.column("amount").to_pylist(), table.column("id").to_pylist()))
            assert _in_order(values, (True, False)), f"{path} is not sorted by amount DESC NULLS LAST, id"
    assert compacted_labels


def test_binpack_writes_in_the_table_sort_order(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec.random(103, format_version=3)
    workload = generate(spark, sqlite_catalog, "cdc.sorted", spec)
    spark.sql(f"ALTER TABLE {workload.table} WRITE ORDERED BY id DESC").collect()
    order_id = int(J.load_table(spark, workload.table).sortOrder().orderId())
    assert order_id > 0
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    files_before = {p for p, _, _ in _data_files(spark, workload.table)}
    outcomes = compact_in_process(spark, sqlite_catalog, "cdc.sorted", CompactionMode.MAJOR,
                                  overrides={"major_full_rewrite": True}, now=NOW).partitions
    assert any(p.status == COMMITTED for p in outcomes), [(p.label, p.status, p.error) for p in outcomes]
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows == before.rows
    new_files = [(p, o) for p, o, _ in _data_files(spark, workload.table) if p not in files_before]
    assert new_files
    for path, _file_order in new_files:
        # (Iceberg 1.10's rewrite does not record the order on the file: sort_order_id stays 0; later versions do.)
        ids = pq.read_table(_local(path), columns=["id"]).column("id").to_pylist()
        assert _in_order([(i,) for i in ids], (True,)), f"{path} is not in the table's order (id DESC)"


def test_unknown_sort_column_fails_with_nothing_changed(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    workload = generate(spark, sqlite_catalog, "cdc.badsort", WorkloadSpec.random(104))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    bad_sort = {"major_strategy": "sort", "major_sort_columns": "no_such_column"}
    outcomes = compact_in_process(spark, sqlite_catalog, "cdc.badsort", CompactionMode.MAJOR, overrides=bad_sort,
                                  now=NOW).partitions
    assert outcomes and all(p.status == FAILED for p in outcomes), [(p.status, p.error) for p in outcomes]
    assert all("no column 'no_such_column'" in (p.error or "") for p in outcomes), [p.error for p in outcomes]
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.snapshot_id == before.snapshot_id and after.rows == before.rows


def test_zorder_without_columns_is_refused_before_planning() -> None:
    with pytest.raises(ConfigError, match="zorder needs the columns"):
        CompactionPolicy.resolve({"compaction.major.strategy": "zorder"})
    with pytest.raises(ConfigError, match="take no direction"):
        CompactionPolicy.resolve({"compaction.major.strategy": "zorder", "compaction.major.sort-columns": "a DESC"})
    # binpack ignores the columns, so a table may keep them while it switches strategies
    assert CompactionPolicy.resolve({"compaction.major.sort-columns": "a DESC"}).sort_columns == ()
    assert CompactionPolicy.resolve({"compaction.major.strategy": "Sort"}).to_properties()[
        "compaction.major.strategy"] == "sort"
