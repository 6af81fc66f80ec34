"""Row-group copy in a MAJOR (compaction.core.row_group_copy, compaction.spark.row_group_copy): the files no delete
applies to are concatenated at the Parquet row-group level, the others decoded, in one commit; every reader gets the
same rows, the copied file's metadata is right, and on v3 every row keeps its row id and last-updated sequence
number (read through Spark's ``_row_id`` / ``_last_updated_sequence_number`` metadata columns)."""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any

import pyarrow.parquet as pq
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.spark.major import ROW_GROUP_COPY_PROPERTY
from compaction.spark.validation import ValidationLevel
from icecompact_testing import engines as E
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table, rows_diff, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
ROWS_PER_FILE = 6_000
COPY_SETTINGS = {"row_group_copy_min_row_group_bytes": 1024, "major_full_rewrite": True}


def _append_file(spark: Any, ref: str, first_id: int, *extra: str, day: str = "2024-01-01") -> None:
    """One data file of ROWS_PER_FILE rows (partition ``day``, one Spark task), ids from ``first_id``; ``extra``:
    more column expressions."""
    (spark.range(first_id, first_id + ROWS_PER_FILE, 1, 1)
     .selectExpr("id", "CAST(id % 97 AS INT) AS bucket", "sha2(CAST(id AS STRING), 256) AS payload",
                 f"DATE'{day}' AS day", *extra)
     .writeTo(ref).append())


def _live_data_files(spark: Any, ref: str) -> dict[str, int]:
    return {r["file_path"]: int(r["record_count"])
            for r in spark.sql(f"SELECT file_path, record_count FROM {ref}.data_files").collect()}


def _lineage(spark: Any, ref: str) -> Counter[tuple[Any, ...]]:
    return Counter(tuple(r) for r in spark.sql(
        f"SELECT id, _row_id, _last_updated_sequence_number FROM {ref}").collect())


@pytest.mark.parametrize("format_version", [2, 3])
def test_major_copies_clean_files_row_groups_and_decodes_the_rest_in_one_commit(
        spark, sqlite_catalog: CatalogConfig, format_version: int) -> None:  # type: ignore[no-untyped-def]
    ref = f"{sqlite_catalog.name}.rg.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.rg")
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, bucket INT, payload STRING, day DATE) USING iceberg "
              f"PARTITIONED BY (day) TBLPROPERTIES ('format-version' = '{format_version}', "
              "'write.delete.mode' = 'merge-on-read', 'write.update.mode' = 'merge-on-read', "
              "'write.distribution-mode' = 'none')")
    for i in range(4):
        _append_file(spark, ref, i * ROWS_PER_FILE)
    if format_version >= 3:
        # Row ids written in the files: what a compaction's output holds (Iceberg's rewrite writes both lineage
        # columns). The fresh file appended after them inherits its ids from the file and must be decoded.
        spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_data_files(table => 'rg.t', options => map("
                  "'rewrite-all', 'true', 'target-file-size-bytes', '200000', 'max-file-group-size-bytes', '200000'))")
        _append_file(spark, ref, 4 * ROWS_PER_FILE)
    spark.sql(f"UPDATE {ref} SET bucket = -1 WHERE id = 5")  # a delete on one file, its new row in a fresh file
    before_files = _live_data_files(spark, ref)
    sizes = {r["file_path"]: int(r["file_size_in_bytes"])
             for r in spark.sql(f"SELECT file_path, file_size_in_bytes FROM {ref}.data_files").collect()}
    target = 16 * max(sizes.values())  # every file is small next to it: all are picked, packed into one
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('write.target-file-size-bytes' = '{target}')")
    catalog = sqlite_catalog.load()
    before = read_table(catalog.load_table(("rg", "t")))
    lineage_before = _lineage(spark, ref) if format_version >= 3 else None

    run = compact_in_process(spark, sqlite_catalog, "rg.t", CompactionMode.MAJOR, level=ValidationLevel.CHECKSUM,
                             overrides=COPY_SETTINGS, now=NOW, clean=True)
    assert [p.status for p in run.partitions] == ["committed"]

    table = catalog.load_table(("rg", "t"))
    snapshot = table.current_snapshot()
    copied = snapshot.summary[ROW_GROUP_COPY_PROPERTY]
    after_files = _live_data_files(spark, ref)
    new_files = set(after_files) - set(before_files)
    multi_group = {p: pq.ParquetFile(p.removeprefix("file:")).metadata.num_row_groups for p in new_files}
    copies = [p for p, groups in multi_group.items() if groups > 1]
    assert len(copies) == 1, multi_group
    n_sources = multi_group[copies[0]]
    assert copied == f"{n_sources} files into 1"
    # The sources: the files no delete applies to (v3: with row ids written); the file the UPDATE deleted from and
    # the UPDATE's own new file are decoded (v3: the fresh append too).
    expected_sources = 3 if format_version == 2 else len(before_files) - 3
    assert n_sources == expected_sources, (n_sources, before_files)
    assert sum(after_files.values()) == sum(before_files.values()) - 1  # the deleted row, applied by the rewrite

    # Metadata of the copied file as pyiceberg reads it from the manifest: what Iceberg's own writer would record.
    entry = next(t.file for t in table.scan().plan_files() if t.file.file_path == copies[0])
    footer = pq.ParquetFile(copies[0].removeprefix("file:")).metadata
    assert entry.record_count == footer.num_rows
    assert entry.split_offsets == [footer.row_group(g).column(0).data_page_offset if
                                   footer.row_group(g).column(0).dictionary_page_offset is None else
                                   footer.row_group(g).column(0).dictionary_page_offset
                                   for g in range(footer.num_row_groups)]
    ids = [r[0] for r in spark.sql(f"SELECT id FROM {ref} WHERE _file = '{copies[0]}'").collect()]
    assert len(ids) == footer.num_rows
    id_field = table.schema().find_field("id").field_id
    assert int.from_bytes(entry.lower_bounds[id_field], "little", signed=True) == min(ids)
    assert int.from_bytes(entry.upper_bounds[id_field], "little", signed=True) == max(ids)
    assert entry.null_value_counts[id_field] == 0

    # Every reader gets the rows of before.
    after = read_table(table)
    assert after.rows == before.rows, rows_diff(before.rows, after.rows)
    assert spark_rows(spark, ref) == before.rows
    for engine in (E.DUCKDB_NO_CACHE, E.PYICEBERG):
        read = E.read_rows(engine, table)
        assert read.rows == before.rows, (engine, rows_diff(before.rows, read.rows or Counter()))
    if lineage_before is not None:
        assert _lineage(spark, ref) == lineage_before, "a row's id or last-updated sequence number changed"


def test_files_of_an_older_schema_are_decoded_and_the_current_schemas_copied(
        spark, sqlite_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """Clean files written before a column was added are decoded (their footer shows another schema: a copied row
    group would lack the column's id), the clean files of the current schema are copied, and every row is kept."""
    ref = f"{sqlite_catalog.name}.rg.evolved"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.rg")
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, bucket INT, payload STRING, day DATE) USING iceberg "
              f"PARTITIONED BY (day) TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
              "'write.distribution-mode' = 'none')")
    for i in range(3):
        _append_file(spark, ref, i * ROWS_PER_FILE)
    spark.sql(f"ALTER TABLE {ref} ADD COLUMN note STRING")
    for i in range(3, 5):
        _append_file(spark, ref, i * ROWS_PER_FILE, "CAST(id AS STRING) AS note")
    spark.sql(f"DELETE FROM {ref} WHERE id = 5")  # the first file is decoded from the start
    before_files = _live_data_files(spark, ref)
    sizes = [int(r[0]) for r in spark.sql(f"SELECT file_size_in_bytes FROM {ref}.data_files").collect()]
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('write.target-file-size-bytes' = '{16 * max(sizes)}')")
    catalog = sqlite_catalog.load()
    before = read_table(catalog.load_table(("rg", "evolved")))

    run = compact_in_process(spark, sqlite_catalog, "rg.evolved", CompactionMode.MAJOR,
                             level=ValidationLevel.CHECKSUM, overrides=COPY_SETTINGS, now=NOW, clean=True)
    assert [p.status for p in run.partitions] == ["committed"]

    table = catalog.load_table(("rg", "evolved"))
    assert table.current_snapshot().summary[ROW_GROUP_COPY_PROPERTY] == "2 files into 1"  # the new schema's files
    after_files = _live_data_files(spark, ref)
    assert not set(after_files) & set(before_files)  # every file rewritten: the older ones decoded
    assert sum(after_files.values()) == sum(before_files.values()) - 1
    after = read_table(table)
    assert after.rows == before.rows, rows_diff(before.rows, after.rows)
    assert spark_rows(spark, ref) == before.rows


def test_a_file_group_with_no_copy_candidate_is_decoded_before_the_others_are_split(
        spark, sqlite_catalog: CatalogConfig, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Two partitions in one MAJOR: one has clean files (their footers are read, their row groups copied), the other
    only files with a delete. The second's file group goes to the cluster before any footer of the first is read,
    even when the action plans it last; every row is kept."""
    import compaction.spark.major as major
    import compaction.spark.row_group_copy as rgc

    ref = f"{sqlite_catalog.name}.rg.order"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.rg")
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, bucket INT, payload STRING, day DATE) USING iceberg "
              f"PARTITIONED BY (day) TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
              "'write.update.mode' = 'merge-on-read', 'write.distribution-mode' = 'none')")
    for i in range(4):
        _append_file(spark, ref, i * ROWS_PER_FILE)  # day 2024-01-01: a delete on the first file, 3 clean ones copied
    for i in range(2):  # day 2024-01-02: a delete on each file, decoded
        _append_file(spark, ref, (10 + i) * ROWS_PER_FILE, day="2024-01-02")
    spark.sql(f"DELETE FROM {ref} WHERE id IN (5, {10 * ROWS_PER_FILE}, {11 * ROWS_PER_FILE})")
    sizes = [int(r[0]) for r in spark.sql(f"SELECT file_size_in_bytes FROM {ref}.data_files").collect()]
    spark.sql(f"ALTER TABLE {ref} SET TBLPROPERTIES ('write.target-file-size-bytes' = '{16 * max(sizes)}')")
    catalog = sqlite_catalog.load()
    before = read_table(catalog.load_table(("rg", "order")))

    events: list[tuple[str, int]] = []
    real_candidates, real_copy_eligible = rgc._candidates, major.copy_eligible

    def candidates(*args: Any, **kwargs: Any) -> Any:
        events.append(("split", len(args[4])))
        return real_candidates(*args, **kwargs)

    def copy_eligible(spark_: Any, table: Any, groups: list[Any], **kwargs: Any) -> Any:
        decode = kwargs.pop("decode")
        clean_first = sorted(groups, key=lambda g: any(int(t.deletes().size()) for t in g.fileScanTasks()))

        def recorded(group: Any) -> None:
            events.append(("decode", int(group.fileScanTasks().size())))
            decode(group)

        return real_copy_eligible(spark_, table, clean_first, decode=recorded, **kwargs)

    monkeypatch.setattr(rgc, "_candidates", candidates)
    monkeypatch.setattr(major, "copy_eligible", copy_eligible)
    run = compact_in_process(spark, sqlite_catalog, "rg.order", CompactionMode.MAJOR, level=ValidationLevel.CHECKSUM,
                             overrides=COPY_SETTINGS, now=NOW, clean=True)
    assert sorted(p.status for p in run.partitions) == ["committed", "committed"]
    assert [kind for kind, _ in events][:2] == ["decode", "split"], events  # the deleted day's group first
    table = catalog.load_table(("rg", "order"))
    assert table.current_snapshot().summary[ROW_GROUP_COPY_PROPERTY] == "3 files into 1"
    assert read_table(table).rows == before.rows


@pytest.mark.unit
def test_the_policy_key_turns_row_group_copy_off() -> None:
    """``compaction.row-group-copy.enabled=false`` reaches the rewrite as disabled settings, and disabled settings
    return the planned groups untouched before anything is read (no Spark, no table needed)."""
    from compaction.core.policy import CompactionPolicy
    from compaction.spark.major import row_group_copy_for
    from compaction.spark.row_group_copy import copy_eligible

    off = row_group_copy_for(CompactionPolicy.resolve({"compaction.row-group-copy.enabled": "false"}), "major")
    on = row_group_copy_for(CompactionPolicy.resolve({"compaction.row-group-copy.min-row-group-bytes": "1024"}),
                            "major")
    assert (off.enabled, on.enabled, on.min_row_group_bytes) == (False, True, 1024)
    assert not row_group_copy_for(CompactionPolicy.resolve({}), "minor").enabled  # a fragment merge never copies
    groups = [object(), object()]
    decoded: list[object] = []
    pending = copy_eligible(None, None, list(groups), settings=off, planner=None, decode=decoded.append)
    assert decoded == groups and pending.result() == []
