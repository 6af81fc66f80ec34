"""The CDC workload generator builds the tables it promises, and its Python model agrees with Spark's read."""

from __future__ import annotations

import pytest

from compaction.demo.workload import (
    DEMO_SPEC,
    EVOLUTIONS,
    PARTITIONINGS,
    WorkloadResult,
    WorkloadSpec,
    delete_file_summary,
    demo_table,
    generate,
    spark_rows,
)


def _assert_model_matches_spark(spark, result: WorkloadResult) -> None:  # type: ignore[no-untyped-def]
    actual = spark_rows(spark, result.table)
    expected = result.expected_rows
    missing, extra = expected - actual, actual - expected
    assert not missing and not extra, (
        f"{result.spec}\nstats={result.stats}\nmissing={list(missing.items())[:5]}\nextra={list(extra.items())[:5]}"
    )


def _spec_ids(spark, table: str) -> set[int]:  # type: ignore[no-untyped-def]
    return {int(r[0]) for r in spark.sql(f"SELECT DISTINCT spec_id FROM {table}.files").collect()}


def _tiny(spec: WorkloadSpec) -> WorkloadSpec:
    return spec.replace(commits=min(spec.commits, 3), rows_per_commit=min(spec.rows_per_commit, 25))


# Pure Python -----------------------------------------------------------------------------------------------------
def test_random_spec_is_deterministic_and_varied() -> None:
    assert WorkloadSpec.random(5) == WorkloadSpec.random(5)
    specs = [WorkloadSpec.random(s) for s in range(40)]
    assert {s.partitioning for s in specs} == set(PARTITIONINGS)
    assert {s.format_version for s in specs} == {2, 3}
    assert {s.key_columns for s in specs} == {("id",), ("id", "region")}
    assert {s.evolve_spec for s in specs} == {True, False}
    assert set(EVOLUTIONS) == set(PARTITIONINGS)
    assert WorkloadSpec.random(5, rows_per_commit=10_000).rows_per_commit == 10_000


@pytest.mark.parametrize(
    "changes",
    [
        {"format_version": 1},
        {"partitioning": "hours"},
        {"key_columns": ("note",)},
        {"delete_fraction": 0.8, "update_fraction": 0.5},
        {"evolve_spec": True, "commits": 1},
        {"delete_granularity": "table"},
    ],
)
def test_spec_rejects_invalid_shapes(changes: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        WorkloadSpec(**changes)  # type: ignore[arg-type]


# Spark -----------------------------------------------------------------------------------------------------------
def test_v2_workload_has_position_and_equality_deletes_evolution_and_null_keys(spark, sqlite_catalog) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(
        seed=11, format_version=2, partitioning="days_identity", key_columns=("id", "region"), commits=3,
        rows_per_commit=25, delete_fraction=0.15, update_fraction=0.15, eq_delete_fraction=0.5,
        null_key_fraction=0.2, evolve_spec=True, use_equality_deletes=True,
    )
    result = generate(spark, sqlite_catalog, "db.cdc_v2", spec)

    deletes = delete_file_summary(spark, result.table)
    assert deletes.get((1, "PARQUET"), 0) > 0, deletes  # position deletes from Spark DML
    assert deletes.get((2, "PARQUET"), 0) > 0, deletes  # equality deletes through the Java API
    assert (1, "PUFFIN") not in deletes
    assert _spec_ids(spark, result.table) == {0, 1}  # ADD PARTITION FIELD bucket(4, id) half-way
    assert result.stats["spec_evolutions"] == 1 and result.stats["eq_updated_keys"] > 0
    assert result.stats["reinserted_keys"] > 0  # keys deleted earlier came back
    assert any(row[0] is None or row[1] is None for row in result.expected_rows)  # nulls in key columns
    _assert_model_matches_spark(spark, result)

    # Equality deletes are registered with typed partition tuples (never the string 'null'), in both specs.
    eq = spark.sql(f"SELECT spec_id, partition FROM {result.table}.delete_files WHERE content = 2").collect()
    assert all("null" not in tuple(r.partition) for r in eq)


def test_jvm_partition_data_round_trips_every_data_file(spark, sqlite_catalog) -> None:  # type: ignore[no-untyped-def]
    from compaction.spark import jvm as J

    spec = WorkloadSpec(seed=3, partitioning="multi", commits=2, rows_per_commit=20, null_key_fraction=0.3,
                        evolve_spec=True, use_equality_deletes=False, delete_fraction=0.0, update_fraction=0.0)
    result = generate(spark, sqlite_catalog, "db.parts", spec)
    table = J.load_table(spark, result.table)
    files = list(J.data_files(table))
    assert files
    seen_null = False
    for f in files:
        pspec = J.spec_for(table, f.specId())
        values = J.partition_values(spark, pspec, f.partition())
        seen_null |= None in values
        rebuilt = J.partition_data(spark, pspec, values)
        assert rebuilt.equals(f.partition()), (values, f.partition().toString())
    assert seen_null
    assert list(J.int_array(spark, [3, 1])) == [3, 1]

    # Long-typed slots (identity on bigint / timestamp) hold java.lang.Long, not the Integer py4j would send.
    jvm = J.jvm(spark)
    long_spec = (jvm.org.apache.iceberg.PartitionSpec.builderFor(table.schema())
                 .identity("id").identity("ts").identity("region").build())
    pd = J.partition_data(spark, long_spec, (5, 1_704_067_200_000_000, None))
    long_class = jvm.java.lang.Class.forName("java.lang.Long")
    assert pd.get(0, long_class) == 5 and pd.get(1, long_class) == 1_704_067_200_000_000
    assert pd.get(2, jvm.java.lang.Class.forName("java.lang.String")) is None
    assert J.partition_values(spark, long_spec, pd) == (5, 1_704_067_200_000_000, None)
    _assert_model_matches_spark(spark, result)


def test_v3_workload_uses_deletion_vectors_and_equality_deletes(spark, sqlite_catalog) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(
        seed=12, format_version=3, partitioning="bucket", key_columns=("id",), commits=3, rows_per_commit=25,
        delete_fraction=0.15, update_fraction=0.15, null_key_fraction=0.1, use_equality_deletes=True,
    )
    result = generate(spark, sqlite_catalog, "db.cdc_v3", spec)
    deletes = delete_file_summary(spark, result.table)
    assert deletes.get((1, "PUFFIN"), 0) > 0, deletes  # deletion vectors
    assert (1, "PARQUET") not in deletes, deletes  # never position-delete files in v3
    assert deletes.get((2, "PARQUET"), 0) > 0, deletes
    _assert_model_matches_spark(spark, result)


@pytest.mark.parametrize("seed", [4, 6, 7, 13])
def test_random_workload_model_matches_spark(spark, sqlite_catalog, seed: int) -> None:  # type: ignore[no-untyped-def]
    spec = _tiny(WorkloadSpec.random(seed))
    result = generate(spark, sqlite_catalog, f"db.random_{seed}", spec)
    assert sum(result.expected_rows.values()) > 0
    if spec.evolve_spec:
        assert len(_spec_ids(spark, result.table)) == 2
    _assert_model_matches_spark(spark, result)


def test_global_equality_deletes_on_postgres(spark, postgres_catalog) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(
        seed=21, format_version=2, partitioning="unpartitioned", key_columns=("id",), commits=3, rows_per_commit=25,
        delete_fraction=0.15, update_fraction=0.1, null_key_fraction=0.1, evolve_spec=True, global_eq_deletes=True,
    )
    result = generate(spark, postgres_catalog, "db.global_eq", spec)
    eq_specs = spark.sql(f"SELECT DISTINCT spec_id FROM {result.table}.delete_files WHERE content = 2").collect()
    assert [r[0] for r in eq_specs] == [0]  # written with the unpartitioned spec: global deletes
    assert _spec_ids(spark, result.table) == {0, 1}
    _assert_model_matches_spark(spark, result)


def test_demo_table(spark, sqlite_catalog) -> None:  # type: ignore[no-untyped-def]
    result = demo_table(spark, sqlite_catalog, spec=DEMO_SPEC.replace(rows_per_commit=40, commits=3))
    assert result.table == f"{sqlite_catalog.name}.demo.events"
    eq_partitions = spark.sql(
        f"SELECT DISTINCT partition FROM {result.table}.delete_files WHERE content = 2"
    ).collect()
    assert len(eq_partitions) >= 2
    assert delete_file_summary(spark, result.table).get((1, "PARQUET"), 0) > 0
    days = spark.sql(f"SELECT count(DISTINCT partition) FROM {result.table}.files").collect()[0][0]
    assert days >= 3
    # Replaces an existing demo table.
    again = demo_table(spark, sqlite_catalog, spec=DEMO_SPEC.replace(rows_per_commit=5, commits=1))
    assert spark_rows(spark, again.table) == again.expected_rows
