"""The merge-on-read oracle against Spark's read: position deletes (file- and partition-scoped), v3 deletion vectors,
hand-made equality deletes (sequence-number rule, null keys, multi-column keys, partition scoping, global deletes),
schema evolution and time travel. Every comparison is a multiset of normalized rows."""

from __future__ import annotations

import datetime as dt
import urllib.parse
import uuid
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from compaction.catalog import CatalogConfig
from icecompact_testing.oracle import (
    NAN,
    DeleteKind,
    OracleResult,
    decode_deletion_vector,
    normalize_row,
    normalize_value,
    read_table,
    rows_diff,
    spark_rows,
)

MOR_V2 = ("'format-version'='2','write.delete.mode'='merge-on-read','write.update.mode'='merge-on-read',"
          "'write.merge.mode'='merge-on-read'")
MOR_V3 = MOR_V2.replace("'format-version'='2'", "'format-version'='3'")


# --------------------------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------------------------


def _table(catalog: CatalogConfig, name: str):  # type: ignore[no-untyped-def]
    return catalog.load().load_table(f"db.{name}")


def assert_oracle_matches_spark(spark, catalog: CatalogConfig, name: str, snapshot_id: int | None = None) -> OracleResult:  # type: ignore[no-untyped-def]
    table = _table(catalog, name)
    result = read_table(table, snapshot_id)
    expected = spark_rows(spark, f"{catalog.name}.db.{name}", snapshot_id)
    assert result.rows == expected, rows_diff(expected, result.rows)
    assert sum(result.live_rows_by_partition.values()) == result.row_count == sum(expected.values())
    return result


def assert_all_snapshots_match(spark, catalog: CatalogConfig, name: str) -> dict[int, OracleResult]:  # type: ignore[no-untyped-def]
    """Oracle == Spark at the current snapshot and, by time travel, at every older one."""
    table = _table(catalog, name)
    out = {None: assert_oracle_matches_spark(spark, catalog, name)}
    for snapshot in table.metadata.snapshots:
        out[snapshot.snapshot_id] = assert_oracle_matches_spark(spark, catalog, name, snapshot.snapshot_id)
    assert out[None].rows == out[table.metadata.current_snapshot_id].rows
    return out  # type: ignore[return-value]


def current_snapshot_id(catalog: CatalogConfig, name: str) -> int:
    return _table(catalog, name).metadata.current_snapshot_id  # type: ignore[return-value]


_ARROW_TYPES = {"long": pa.int64(), "int": pa.int32(), "string": pa.string(), "double": pa.float64(), "date": pa.date32()}


def add_equality_deletes(  # type: ignore[no-untyped-def]
    spark,
    table_ref: str,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    partition: Mapping[str, Any] | None = None,
    spec_id: int | None = None,
) -> str:
    """Write an equality delete file by hand (Parquet, columns carry field ids) and commit it with a RowDelta.

    ``partition`` maps partition field names to internal values (int days for ``days()``, int for buckets, str or
    None for identity strings); it is set on a typed ``PartitionData`` (never a partition path: a path parses
    null as the string 'null'). ``spec_id`` defaults to the table's current spec."""
    jvm = spark._jvm
    gateway = spark.sparkContext._gateway
    table = jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(spark._jsparkSession, table_ref)
    schema = table.schema()
    spec = table.spec() if spec_id is None else table.specs().get(spec_id)

    fields, ids = [], []
    for name in columns:
        f = schema.findField(name)
        ids.append(f.fieldId())
        fields.append(pa.field(name, _ARROW_TYPES[f.type().toString()], metadata={b"PARQUET:field_id": str(f.fieldId()).encode()}))
    arrow = pa.Table.from_pylist([dict(zip(columns, r)) for r in rows], schema=pa.schema(fields))

    location = table.locationProvider().newDataLocation(f"eq-delete-{uuid.uuid4().hex}.parquet")
    local = Path(urllib.parse.urlparse(location).path)
    local.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(arrow, local)

    metrics = jvm.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
        table.io().newInputFile(location), jvm.org.apache.iceberg.MetricsConfig.forTable(table)
    )
    eq_ids = gateway.new_array(jvm.int, len(ids))
    for i, fid in enumerate(ids):
        eq_ids[i] = fid
    builder = (
        jvm.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec)
        .ofEqualityDeletes(eq_ids)
        .withPath(location)
        .withFormat("parquet")
        .withFileSizeInBytes(local.stat().st_size)
        .withRecordCount(len(rows))
        .withMetrics(metrics)
    )
    if spec.isPartitioned():
        data = jvm.org.apache.iceberg.PartitionData(spec.partitionType())
        names = [spec.fields().get(i).name() for i in range(spec.fields().size())]
        assert set(partition or {}) == set(names), f"partition must give {names}"
        for i, pname in enumerate(names):
            data.set(i, (partition or {})[pname])
        builder = builder.withPartition(data)
    table.newRowDelta().addDeletes(builder.build()).commit()
    spark.sql(f"REFRESH TABLE {table_ref}")
    return location


def spark_live_counts_by_partition(spark, sql: str) -> dict[tuple[Any, ...], int]:  # type: ignore[no-untyped-def]
    return {tuple(r[:-1]): r[-1] for r in spark.sql(sql).collect()}


def nonzero(d: Mapping[Any, int]) -> dict[Any, int]:
    return {k: v for k, v in d.items() if v}


# --------------------------------------------------------------------------------------------------------------
# Normalization
# --------------------------------------------------------------------------------------------------------------


def test_normalize_value() -> None:
    aware = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert normalize_value(aware) == dt.datetime(2024, 1, 1, 10)
    assert normalize_value(bytearray(b"ab")) == b"ab" and type(normalize_value(bytearray(b"ab"))) is bytes
    assert normalize_value(float("nan")) is NAN
    assert normalize_row([float("nan"), None]) == normalize_row([float("nan"), None])
    assert normalize_value(Decimal("1.50")) == Decimal("1.5")
    assert normalize_value({"a": [1, 2]}) == frozenset({("a", (1, 2))})
    assert normalize_value(uuid.UUID(int=1)) == str(uuid.UUID(int=1))


def test_decode_deletion_vector_framing() -> None:
    import struct
    import zlib

    from pyroaring import BitMap

    # One container of each kind: bitset (0..65535), array (next 64K), run (the one after).
    low = BitMap(range(0, 60_000, 2)) | BitMap(range(65_536, 70_536, 3)) | BitMap(range(141_072, 151_072))
    low.run_optimize()
    high = BitMap([7, 9])
    vector = struct.pack("<Q", 2) + struct.pack("<I", 0) + low.serialize() + struct.pack("<I", 1) + high.serialize()
    body = bytes([0xD1, 0xD3, 0x39, 0x64]) + vector
    blob = struct.pack(">I", len(body)) + body + struct.pack(">I", zlib.crc32(body))
    positions = decode_deletion_vector(blob).to_pylist()
    assert positions == sorted(low) + [(1 << 32) + 7, (1 << 32) + 9]


# --------------------------------------------------------------------------------------------------------------
# Position deletes (v2) and deletion vectors (v3), written by Spark
# --------------------------------------------------------------------------------------------------------------


def test_v2_position_deletes_partitioned_by_day_and_region(spark, any_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    c = any_catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {c}.db")
    # Partition-scoped position deletes: one delete file may name several data files (referenced_data_file null).
    spark.sql(f"""CREATE TABLE {c}.db.orders (id bigint, ts timestamp, region string, amount decimal(10,2),
                  score double, day date, note binary) USING iceberg PARTITIONED BY (days(ts), region)
                  TBLPROPERTIES ({MOR_V2}, 'write.delete.granularity'='partition')""")
    spark.sql(f"""INSERT INTO {c}.db.orders VALUES
        (1, timestamp'2024-01-01 01:00:00', 'EU', 10.50, 1.5, date'2024-01-01', X'01'),
        (2, timestamp'2024-01-01 02:00:00', 'EU', 11.00, double('NaN'), date'2024-01-01', NULL),
        (3, timestamp'2024-01-01 03:00:00', 'US', 12.25, NULL, NULL, X'0203'),
        (4, timestamp'2024-01-02 04:00:00', NULL, NULL, -0.0, date'2024-01-02', X''),
        (5, timestamp'2024-01-02 05:00:00', 'US', 1.00, 2.0, date'2024-01-02', NULL)""")
    spark.sql(f"""INSERT INTO {c}.db.orders VALUES
        (6, timestamp'2024-01-01 06:00:00', 'EU', 6.00, 6.0, date'2024-01-01', NULL),
        (7, timestamp'2024-01-02 07:00:00', NULL, 7.00, 7.0, NULL, X'07')""")
    first = current_snapshot_id(any_catalog, "orders")
    spark.sql(f"DELETE FROM {c}.db.orders WHERE id IN (1, 6, 4)")  # two EU files and the null-region partition
    spark.sql(f"UPDATE {c}.db.orders SET amount = amount + 1, score = 9.5 WHERE region = 'US'")
    spark.sql(f"""MERGE INTO {c}.db.orders t
        USING (SELECT * FROM VALUES (2L, 'upd'), (7L, 'del'), (8L, 'ins') AS s(id, op)) s ON t.id = s.id
        WHEN MATCHED AND s.op = 'del' THEN DELETE
        WHEN MATCHED THEN UPDATE SET t.amount = 99.99
        WHEN NOT MATCHED THEN INSERT (id, ts, region, amount, score, day, note)
             VALUES (s.id, timestamp'2024-01-03 08:00:00', 'EU', 8.00, NULL, date'2024-01-03', X'08')""")

    results = assert_all_snapshots_match(spark, any_catalog, "orders")
    current = results[None]
    assert {d.delete_kind for d in current.delete_files} == {DeleteKind.POSITION}
    assert any(len({p for p in current.applicable_deletes if d in current.applicable_deletes[p]}) > 1
               for d in current.delete_files), "expected a partition-scoped delete file naming several data files"
    assert sorted(r[0] for r in current.rows.elements()) == [2, 3, 5, 8]
    assert sorted(r[0] for r in results[first].rows.elements()) == [1, 2, 3, 4, 5, 6, 7]

    # Live rows per partition agree with Spark's own grouping (day ordinal, region).
    by_partition = spark_live_counts_by_partition(
        spark, f"SELECT datediff(to_date(ts), date'1970-01-01'), region, count(*) FROM {c}.db.orders GROUP BY 1, 2")
    assert nonzero({k[1]: v for k, v in current.live_rows_by_partition.items()}) == by_partition
    # Every live data file with a deleted row has an applicable delete, and vice versa for position deletes.
    assert current.data_files_with_deleted_rows == current.data_files_with_applicable_deletes


def test_v3_deletion_vectors_bucketed(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    c = sqlite_catalog.name
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"""CREATE TABLE {c}.db.events (id bigint, kind string, v int) USING iceberg
                  PARTITIONED BY (bucket(4, id)) TBLPROPERTIES ({MOR_V3})""")
    # One large-ish file per bucket so that DVs hold array, bitset and run containers.
    spark.sql(f"INSERT INTO {c}.db.events SELECT id, CASE WHEN id % 2 = 0 THEN 'even' ELSE 'odd' END, "
              f"CAST(id % 7 AS int) FROM range(0, 24000) ORDER BY id")
    spark.sql(f"DELETE FROM {c}.db.events WHERE id % 3 = 0")  # one Puffin file, several DVs (content_offset)
    spark.sql(f"DELETE FROM {c}.db.events WHERE id BETWEEN 1000 AND 15000")  # merges into the existing DVs
    spark.sql(f"UPDATE {c}.db.events SET v = -1 WHERE id IN (1, 2, 20000, 23999)")
    spark.sql(f"""MERGE INTO {c}.db.events t USING (SELECT * FROM VALUES (1L), (23998L), (50000L) AS s(id)) s
                  ON t.id = s.id WHEN MATCHED THEN DELETE WHEN NOT MATCHED THEN INSERT (id, kind, v) VALUES (s.id, 'new', 0)""")

    results = assert_all_snapshots_match(spark, sqlite_catalog, "events")
    current = results[None]
    kinds = Counter(d.delete_kind for d in current.delete_files)
    assert set(kinds) == {DeleteKind.DELETION_VECTOR}
    dvs = [d for d in current.delete_files if d.is_deletion_vector]
    assert all(d.referenced_data_file and d.content_offset is not None and d.content_size_in_bytes for d in dvs)
    assert len({d.referenced_data_file for d in dvs}) == len(dvs), "at most one DV per data file"
    table = _table(sqlite_catalog, "events")
    history = [s.snapshot_id for s in table.metadata.snapshots]
    after_first_delete = results[history[1]]
    assert any(len([d for d in after_first_delete.delete_files if d.path == p]) > 1
               for p in {d.path for d in after_first_delete.delete_files}), "expected several DVs in one Puffin file"

    by_bucket = spark_live_counts_by_partition(spark, f"SELECT {c}.system.bucket(4, id), count(*) FROM {c}.db.events GROUP BY 1")
    assert nonzero({k[1]: v for k, v in current.live_rows_by_partition.items()}) == by_bucket


def test_schema_evolution_and_nested_types_unpartitioned(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    c = sqlite_catalog.name
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"""CREATE TABLE {c}.db.profiles (id bigint, name string, tags array<string>,
                  attrs map<string, int>, addr struct<city: string, zip: int>, seen timestamp_ntz)
                  USING iceberg TBLPROPERTIES ({MOR_V2})""")
    spark.sql(f"""INSERT INTO {c}.db.profiles VALUES
        (1, 'a', array('x', 'y'), map('k', 1), named_struct('city', 'Oslo', 'zip', 150), timestamp_ntz'2024-05-01 10:00:00'),
        (2, 'b', array(), map(), named_struct('city', NULL, 'zip', NULL), NULL),
        (3, NULL, NULL, NULL, NULL, timestamp_ntz'1969-12-31 23:59:59.999999')""")
    spark.sql(f"ALTER TABLE {c}.db.profiles ADD COLUMN score double")
    spark.sql(f"ALTER TABLE {c}.db.profiles RENAME COLUMN name TO full_name")
    spark.sql(f"INSERT INTO {c}.db.profiles VALUES (4, 'd', array('z'), map('q', 2), named_struct('city', 'Rome', 'zip', 1), NULL, 4.5)")
    spark.sql(f"DELETE FROM {c}.db.profiles WHERE id = 2")
    spark.sql(f"ALTER TABLE {c}.db.profiles DROP COLUMN tags")
    spark.sql(f"UPDATE {c}.db.profiles SET score = 1.0 WHERE id IN (1, 4)")

    results = assert_all_snapshots_match(spark, sqlite_catalog, "profiles")
    current = results[None]
    assert current.columns == ("id", "full_name", "attrs", "addr", "seen", "score")
    first = _table(sqlite_catalog, "profiles").metadata.snapshots[0].snapshot_id
    assert results[first].columns == ("id", "name", "tags", "attrs", "addr", "seen")
    assert (1, "a", frozenset({("k", 1)}), ("Oslo", 150), dt.datetime(2024, 5, 1, 10), 1.0) in current.rows
    assert list(current.live_rows_by_partition) == [(0, ())]


# --------------------------------------------------------------------------------------------------------------
# Equality deletes (hand-made)
# --------------------------------------------------------------------------------------------------------------


def test_equality_deletes_sequence_numbers_and_partition_scope(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    c = sqlite_catalog.name
    ref = f"{c}.db.cdc"
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"CREATE TABLE {ref} (id bigint, region string, v string) USING iceberg PARTITIONED BY (region) TBLPROPERTIES ({MOR_V2})")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'EU', 'a'), (2, 'EU', 'b'), (1, 'US', 'x'), (NULL, 'EU', 'n1'), (NULL, 'US', 'n2')")
    before = current_snapshot_id(sqlite_catalog, "cdc")

    # Delete key id=1 and the null key, in partition EU only.
    add_equality_deletes(spark, ref, ["id"], [(1,), (None,)], partition={"region": "EU"})
    after_delete = current_snapshot_id(sqlite_catalog, "cdc")
    # Re-insert key 1 in EU after the delete: a higher data sequence number, so the delete must not apply.
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'EU', 'a2'), (NULL, 'EU', 'n3')")

    results = assert_all_snapshots_match(spark, sqlite_catalog, "cdc")
    current = results[None]
    assert sorted(current.rows.elements(), key=repr) == sorted(
        [(2, "EU", "b"), (1, "US", "x"), (None, "US", "n2"), (1, "EU", "a2"), (None, "EU", "n3")], key=repr)
    assert results[before].row_count == 5 and results[after_delete].row_count == 3

    eq = [d for d in current.delete_files if d.delete_kind == DeleteKind.EQUALITY]
    assert len(eq) == 1 and eq[0].partition == ("EU",) and eq[0].equality_ids == (1,)
    by_path = {d.path: d for d in current.data_files}
    with_eq = {p for p, ds in current.applicable_deletes.items() if eq[0] in ds}
    assert {by_path[p].partition for p in with_eq} == {("EU",)}
    assert all(by_path[p].data_sequence_number < eq[0].data_sequence_number for p in with_eq)
    assert len(with_eq) == 1, "the re-inserted file (higher data seq) and the US file are out of scope"
    assert current.live_rows_by_partition == {(0, ("EU",)): 3, (0, ("US",)): 2}


def test_equality_deletes_multi_column_key_and_day_partition(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    c = sqlite_catalog.name
    ref = f"{c}.db.multi"
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"""CREATE TABLE {ref} (id bigint, kind string, ts timestamp, v int) USING iceberg
                  PARTITIONED BY (days(ts)) TBLPROPERTIES ({MOR_V2})""")
    spark.sql(f"""INSERT INTO {ref} VALUES
        (1, 'a', timestamp'2024-03-01 01:00:00', 1), (1, 'b', timestamp'2024-03-01 02:00:00', 2),
        (2, 'a', timestamp'2024-03-01 03:00:00', 3), (2, NULL, timestamp'2024-03-01 04:00:00', 4),
        (1, 'a', timestamp'2024-03-02 01:00:00', 5)""")
    day = (dt.date(2024, 3, 1) - dt.date(1970, 1, 1)).days
    # (1,'a') and (2,NULL) die on 2024-03-01 only; (9,'z') matches nothing.
    add_equality_deletes(spark, ref, ["id", "kind"], [(1, "a"), (2, None), (9, "z")], partition={"ts_day": day})
    # A position delete on top (Spark), then an update that re-inserts a deleted key.
    spark.sql(f"DELETE FROM {ref} WHERE v = 2")
    spark.sql(f"INSERT INTO {ref} VALUES (2, NULL, timestamp'2024-03-01 05:00:00', 6)")

    results = assert_all_snapshots_match(spark, sqlite_catalog, "multi")
    assert sorted(r[3] for r in results[None].rows.elements()) == [3, 5, 6]
    assert results[None].live_rows_by_partition == {(0, (day,)): 2, (0, (day + 1,)): 1}


def test_global_equality_delete_from_unpartitioned_spec(spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """An equality delete of an unpartitioned spec applies to every partition of every spec (spec: "the delete
    file's partition spec is unpartitioned")."""
    c = sqlite_catalog.name
    ref = f"{c}.db.evolved"
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"CREATE TABLE {ref} (id bigint, region string) USING iceberg TBLPROPERTIES ({MOR_V2})")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'EU'), (2, 'EU'), (3, 'US')")
    spark.sql(f"ALTER TABLE {ref} ADD PARTITION FIELD region")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'US'), (2, 'US'), (4, NULL)")
    add_equality_deletes(spark, ref, ["id"], [(1,), (4,)], spec_id=0)
    # And a partition-scoped one in the new spec, for the null-region partition only: deletes nothing else.
    add_equality_deletes(spark, ref, ["id"], [(2,)], partition={"region": None})
    spark.sql(f"INSERT INTO {ref} VALUES (2, NULL)")  # after both deletes: stays

    results = assert_all_snapshots_match(spark, sqlite_catalog, "evolved")
    current = results[None]
    assert sorted(current.rows.elements(), key=repr) == sorted([(2, "EU"), (3, "US"), (2, "US"), (2, None)], key=repr)
    assert current.live_rows_by_partition == {(0, ()): 2, (1, ("US",)): 1, (1, (None,)): 1}
    global_eq = [d for d in current.delete_files if d.spec_id == 0 and d.delete_kind == DeleteKind.EQUALITY]
    assert len(global_eq) == 1
    older = {d.path for d in current.data_files if d.data_sequence_number < global_eq[0].data_sequence_number}
    assert {d.spec_id for d in current.data_files if d.path in older} == {0, 1}
    assert {p for p, ds in current.applicable_deletes.items() if global_eq[0] in ds} == older  # every older file
    null_scoped = [d for d in current.delete_files if d.partition == (None,)]
    assert len(null_scoped) == 1
    assert not current.dangling_delete_files


@pytest.mark.parametrize("version", [2, 3])
def test_equality_deletes_with_position_deletes_or_dvs_and_dangling(spark, sqlite_catalog: CatalogConfig, version: int) -> None:  # type: ignore[no-untyped-def]
    c = sqlite_catalog.name
    ref = f"{c}.db.mixed"
    spark.sql(f"CREATE NAMESPACE {c}.db")
    spark.sql(f"""CREATE TABLE {ref} (id bigint, region string, v double) USING iceberg PARTITIONED BY (region)
                  TBLPROPERTIES ({MOR_V3 if version == 3 else MOR_V2})""")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'EU', 1.0), (2, 'EU', double('NaN')), (3, 'EU', 3.0), (4, 'US', 4.0)")
    spark.sql(f"DELETE FROM {ref} WHERE id = 3")
    # NaN equals NaN in Iceberg Java's row comparison. Keep a non-NaN value inside the data file's [min, max]: Java
    # prunes an equality delete whose bounds (NaN excluded) do not overlap the data file's, even when both hold NaN.
    add_equality_deletes(spark, ref, ["v"], [(float("nan"),), (2.5,), (4.0,)], partition={"region": "EU"})
    spark.sql(f"DELETE FROM {ref} WHERE id = 1")  # position delete / DV after the equality delete
    spark.sql(f"INSERT INTO {ref} VALUES (5, 'EU', 4.0)")
    add_equality_deletes(spark, ref, ["id"], [(4,)], partition={"region": "ZZ"})  # a partition without data: dangles

    results = assert_all_snapshots_match(spark, sqlite_catalog, "mixed")
    current = results[None]
    assert [d.partition for d in current.dangling_delete_files] == [("ZZ",)]
    assert sorted(r[0] for r in current.rows.elements()) == [4, 5]
    kinds = {d.delete_kind for d in current.delete_files}
    assert kinds == {DeleteKind.EQUALITY, DeleteKind.DELETION_VECTOR if version == 3 else DeleteKind.POSITION}
    if version == 3:
        # The second DELETE replaced the first DV of the same data file: only one DV is live.
        assert sum(d.is_deletion_vector for d in current.delete_files) == 1
    # A full rewrite keeps the starting data sequence number: the new files are out of every delete's scope; whatever
    # delete files Iceberg leaves in metadata apply to nothing.
    spark.sql(f"CALL {c}.system.rewrite_data_files(table => 'db.mixed', options => map('rewrite-all', 'true'))")
    final = assert_oracle_matches_spark(spark, sqlite_catalog, "mixed")
    assert final.rows == current.rows
    assert not final.applicable_deletes and not final.deleted_rows_by_data_file
    assert set(final.dangling_delete_files) == set(final.delete_files)
