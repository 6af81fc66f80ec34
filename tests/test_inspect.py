"""Inspection from metadata only equals what Spark's metadata tables say, for every table shape."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogError, ConfigError
from compaction.core.model import TableState
from compaction.metadata.inspect import inspect_table

MOR = ("'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read', "
       "'write.merge.mode'='merge-on-read'")


def _spark_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        raise AssertionError("unexpected timestamp partition value")
    if isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    return value


def spark_partition_counts(spark, ref: str, state: TableState) -> dict[tuple, Counter]:  # type: ignore[no-untyped-def]
    """Per (spec, partition tuple): Counter of file kinds and records from Spark's files metadata tables."""
    fields_by_spec = {p.key.spec_id: [f.name for f in p.key.fields] for p in state.partitions}
    out: dict[tuple, Counter] = {}
    has_partition = "partition" in spark.table(f"{ref}.files").columns
    rows = spark.sql(
        f"SELECT content, file_format, spec_id, {'partition' if has_partition else 'NULL AS partition'}, "
        f"record_count, file_size_in_bytes FROM {ref}.files"
    ).collect()
    for row in rows:
        names = fields_by_spec.get(row.spec_id, [])
        values = row.partition.asDict() if row.partition is not None else {}
        key = (row.spec_id, tuple(_spark_value(values[n]) for n in names))
        c = out.setdefault(key, Counter())
        kind = {0: "data", 1: "dv" if row.file_format.upper() == "PUFFIN" else "pos", 2: "eq"}[row.content]
        c[f"{kind}_files"] += 1
        c[f"{kind}_records"] += row.record_count
        c[f"{kind}_bytes"] += row.file_size_in_bytes
    return out


def our_partition_counts(state: TableState) -> dict[tuple, Counter]:
    out: dict[tuple, Counter] = {}
    for p in state.partitions:
        c = Counter()
        for kind, files in (("data", p.data_files), ("pos", p.position_delete_files),
                            ("eq", p.equality_delete_files), ("dv", p.deletion_vectors)):
            if files:
                c[f"{kind}_files"] += len(files)
                c[f"{kind}_records"] += sum(f.record_count for f in files)
                c[f"{kind}_bytes"] += sum(f.size_bytes for f in files)
        out[(p.key.spec_id, tuple(f.value for f in p.key.fields))] = c
    return out


def _make_table(spark, catalog: CatalogConfig, shape: str, version: int) -> str:  # type: ignore[no-untyped-def]
    ref = f"{catalog.name}.db.{shape}_v{version}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog.name}.db")
    partitioning = {
        "days": "PARTITIONED BY (days(ts), region)",
        "bucket": "PARTITIONED BY (bucket(4, id))",
        "unpartitioned": "",
        "evolved": "PARTITIONED BY (days(ts))",
    }[shape]
    spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, ts TIMESTAMP, region STRING, v INT) USING iceberg {partitioning} "
        f"TBLPROPERTIES ('format-version'='{version}', {MOR})"
    )
    for batch in range(3):
        values = ", ".join(
            f"({batch * 100 + i}, TIMESTAMP '2024-01-0{1 + i % 3} 0{i % 9}:00:00', "
            f"{'NULL' if i % 7 == 0 else repr(['EU', 'US'][i % 2])}, {i})"
            for i in range(20)
        )
        spark.sql(f"INSERT INTO {ref} VALUES {values}")
        if shape == "evolved" and batch == 1:
            spark.sql(f"ALTER TABLE {ref} ADD PARTITION FIELD bucket(8, id)")
    spark.sql(f"DELETE FROM {ref} WHERE v % 5 = 0")
    spark.sql(f"UPDATE {ref} SET v = v + 1000 WHERE v % 4 = 1")
    spark.sql(f"DELETE FROM {ref} WHERE v = 1002")
    return ref


@pytest.mark.parametrize(
    "shape,version",
    [("days", 2), ("days", 3), ("bucket", 2), ("unpartitioned", 2), ("unpartitioned", 3), ("evolved", 2), ("evolved", 3)],
)
def test_inspect_matches_spark_metadata(spark, sqlite_catalog: CatalogConfig, shape: str, version: int) -> None:
    ref = _make_table(spark, sqlite_catalog, shape, version)
    state = inspect_table(sqlite_catalog, ref.split(".", 1)[1])
    assert state.format_version == version
    ours = our_partition_counts(state)
    theirs = spark_partition_counts(spark, ref, state)
    assert ours == theirs
    assert any(c["pos_files"] or c["dv_files"] for c in ours.values()), "scenario must produce deletes"
    if shape == "evolved":
        assert len({spec for spec, _ in ours}) == 2
    # Totals also agree with Spark's `partitions` metadata table (which counts DVs as position deletes).
    totals = spark.sql(
        f"SELECT sum(file_count) f, sum(record_count) r, sum(position_delete_file_count) p FROM {ref}.partitions"
    ).collect()[0]
    assert totals.f == sum(p.data_file_count for p in state.partitions)
    assert totals.r == sum(p.data_records for p in state.partitions)
    assert totals.p == sum(len(p.position_delete_files) + len(p.deletion_vectors) for p in state.partitions)
    if version == 3:
        dvs = [d for p in state.partitions for d in p.deletion_vectors]
        assert dvs and all(d.referenced_data_file and d.content_offset is not None for d in dvs)


def test_inspect_empty_table_and_no_snapshot(spark, sqlite_catalog: CatalogConfig) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.db")
    spark.sql(f"CREATE TABLE {sqlite_catalog.name}.db.empty (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='2')")
    state = inspect_table(sqlite_catalog, "db.empty")
    assert state.snapshot_id is None and state.partitions == ()
    spark.sql(f"INSERT INTO {sqlite_catalog.name}.db.empty VALUES (1)")
    spark.sql(f"DELETE FROM {sqlite_catalog.name}.db.empty WHERE id = 1")
    state = inspect_table(sqlite_catalog, "db.empty")
    assert state.snapshot_id is not None
    assert sum(p.data_records for p in state.partitions) == 0


def test_inspect_bad_input(sqlite_catalog: CatalogConfig) -> None:
    with pytest.raises(CatalogError, match="not found"):
        inspect_table(sqlite_catalog, "db.missing")
    for bad in ("nodots", "db.t; DROP TABLE x", "db.`t`", "db.t--"):
        with pytest.raises(ConfigError):
            inspect_table(sqlite_catalog, bad)


@pytest.mark.parametrize("shape,version", [("days", 2), ("evolved", 3), ("unpartitioned", 2)])
def test_incremental_state_equals_a_full_build_at_every_snapshot(spark, sqlite_catalog: CatalogConfig, shape: str,
                                                                  version: int) -> None:
    """TableStateCache rebuilds only partitions whose manifests changed: at every snapshot of a history with
    inserts, row-level deletes, a compaction, a manifest rewrite and an expiry, walked forwards and then backwards,
    its state equals a full build, and a one-partition insert keeps every other partition's object."""
    from compaction.metadata.inspect import TableStateCache, load_table, table_state

    ref = _make_table(spark, sqlite_catalog, shape, version)
    name = ref.split(".", 1)[1]
    spark.sql(f"INSERT INTO {ref} VALUES (900, TIMESTAMP '2024-01-02 05:00:00', 'EU', 1)")
    spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_position_delete_files(table => '{name}')")
    spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_manifests(table => '{name}')")
    spark.sql(f"DELETE FROM {ref} WHERE v = 3")
    spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_data_files(table => '{name}', "
              "options => map('min-input-files', '2'))")
    spark.sql(f"INSERT INTO {ref} VALUES (901, TIMESTAMP '2024-01-03 06:00:00', 'US', 2)")

    identity, table = load_table(sqlite_catalog, name)
    history = [s.snapshot_id for s in table.metadata.snapshots]
    assert len(history) >= 9
    cache = TableStateCache()
    for snapshot_id in history + history[::-1]:
        assert table_state(table, identity, snapshot_id, state_cache=cache) == table_state(table, identity, snapshot_id)
    assert cache.full_builds == 1

    # One insert into one partition: the others are the very objects of the previous state.
    before = table_state(table, identity, state_cache=cache)
    spark.sql(f"INSERT INTO {ref} VALUES (902, TIMESTAMP '2024-01-01 01:00:00', 'EU', 3)")
    table = load_table(sqlite_catalog, name)[1]
    after = table_state(table, identity, state_cache=cache)
    assert after == table_state(table, identity)
    kept = [p for p in after.partitions if any(p is q for q in before.partitions)]
    if shape == "unpartitioned":
        assert kept == []
    else:
        assert len(kept) == len(after.partitions) - 1 and cache.rebuilt_partitions == 1

        # A rewrite of one partition's files writes the manifest holding every partition again, the others' entries
        # as EXISTING: their rows are unchanged, so they keep their objects and are not rebuilt.
        spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_manifests(table => '{name}')")
        table = load_table(sqlite_catalog, name)[1]
        before = table_state(table, identity, state_cache=cache)
        spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_data_files(table => '{name}', where => 'id = 902', "
                  "options => map('rewrite-all', 'true'))")
        table = load_table(sqlite_catalog, name)[1]
        after = table_state(table, identity, state_cache=cache)
        assert after == table_state(table, identity)
        previous = {p.key: p for p in before.partitions}
        changed = [p for p in after.partitions if p != previous.get(p.key)]
        assert 1 <= len(changed) < len(after.partitions)
        assert all(p is previous[p.key] for p in after.partitions if p not in changed)
        assert cache.rebuilt_partitions == len(changed)

    # Expiring snapshots changes the entries' times: a full build again, still equal.
    spark.sql(f"CALL {sqlite_catalog.name}.system.expire_snapshots(table => '{name}', retain_last => 2, "
              "older_than => TIMESTAMP '2999-01-01 00:00:00')")
    table = load_table(sqlite_catalog, name)[1]
    assert table_state(table, identity, state_cache=cache) == table_state(table, identity)
    assert cache.full_builds == 2
