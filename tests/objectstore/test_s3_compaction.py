"""The Spark-side correctness families on a REST catalog with tables on S3 (SeaweedFS): MINOR and MAJOR on v2 and v3,
a concurrent writer racing our commit, kill -9 mid-rewrite, other engines reading the result through S3, and a
rewrite output large enough for S3FileIO's multipart upload.

Every table lives in the session's one SeaweedFS; namespaces are per test (a REST warehouse is shared by every
catalog name). Workloads are tiny and a table serves several checks where it can, to keep the family within a few
minutes of suite time. (SeaweedFS's REST catalog registers a table from a metadata file without its snapshots, so
the SQL tests' trick of a clone by ``register_table`` does not work here: MAJOR follows MINOR on the same table.)
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.metadata.inspect import inspect_table
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from compaction.spark import jvm as J
from compaction.spark import job as job_module
from compaction.spark import group_reads, task as task_module
from compaction.spark import major as major_module
from compaction.spark import minor as minor_module
from compaction.spark import partition_files as partition_files_module
from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
from compaction.spark.job import COMMITTED
from compaction.spark.validation import ValidationLevel
from compaction.demo.object_store import traffic_delta
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table
from compaction.demo.tables import create_table
from compaction.demo.workload import BASE_TS_US, WorkloadSpec, generate, spark_rows, ts_from_micros
from test_engines import check_engines
from test_minor import assert_deletes_settled, fragment_overrides

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
FULL = {"major_full_rewrite": True}


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def _data_files_with_position_and_equality_deletes(state: Any) -> int:
    """Data files that both a position delete and an equality delete apply to: MINOR leaves each with one file."""
    return sum(1 for deletes in state.applicable_deletes.values()
               if {d.delete_kind for d in deletes} >= {"position", "equality"})


def test_v2_minor_then_selective_major_on_s3(spark, rest_catalog: CatalogConfig, request,  # type: ignore[no-untyped-def]
                                             monkeypatch) -> None:
    """v2 on S3: MINOR (fragment merge, equality deletes -> position deletes merged with a data file's existing
    position deletes into one file; checksum validation), then a selective MAJOR (count validation) of what is still
    small or delete-heavy; after each, the reference reader, Spark, pyiceberg and DuckDB read the same rows through
    S3."""
    spec = WorkloadSpec(seed=41, format_version=2, partitioning="days_ts", days_span=2, commits=4, rows_per_commit=30,
                        eq_delete_fraction=0.6, null_key_fraction=0.0)
    workload = generate(spark, rest_catalog, "s3v2.t", spec)
    table = rest_catalog.load().load_table(workload.identifier)
    assert table.metadata_location.startswith("s3://")
    before = read_table(table)
    assert spark_rows(spark, workload.table) == before.rows
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    assert _data_files_with_position_and_equality_deletes(before), "the scenario must have deletes to merge"
    overrides = fragment_overrides(inspect_table(rest_catalog, "s3v2.t"))
    # Validation reads the group's base rows ahead, from the base's metadata file with the table's FileIO (Spark's
    # own metadata-file load goes through Hadoop, which cannot open s3://).
    static_loads: list[str] = []
    original_static = group_reads.static_table_frame

    def recorded_static(spark_, table_, metadata_file, snapshot_id):  # type: ignore[no-untyped-def]
        static_loads.append(metadata_file)
        return original_static(spark_, table_, metadata_file, snapshot_id)

    monkeypatch.setattr(group_reads, "static_table_frame", recorded_static)
    # The equality deletes are matched on the driver, the key columns copied out of S3 through the table's FileIO.
    copied: list[str] = []
    original_copy = minor_module.sparse_local_copy

    def recorded_copy(spark_, table_, location, target, **columns):  # type: ignore[no-untyped-def]
        copied.append(location)
        return original_copy(spark_, table_, location, target, **columns)

    monkeypatch.setattr(minor_module, "sparse_local_copy", recorded_copy)
    minors = compact_in_process(spark, rest_catalog, "s3v2.t", CompactionMode.MINOR, level=ValidationLevel.CHECKSUM,
                                overrides=overrides, now=NOW, clean=True).partitions
    assert static_loads and all(m.startswith("s3://") for m in static_loads), static_loads
    assert copied and all(location.startswith("s3://") for location in copied), copied
    assert all(p.kind == "minor" for p in minors)
    assert sum(p.rewritten_data_files for p in minors) > 0, "no fragment was merged"
    assert sum(p.converted_rows for p in minors) > 0, "no equality delete was converted"
    assert all(p.validation["result"] == "passed" for p in minors if p.status == COMMITTED), minors
    after = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    assert_deletes_settled(after, minors)
    assert all(d.path.startswith("s3://") for d in after.delete_files)
    check_engines(spark, rest_catalog, workload.table, workload.identifier, "minor", request)

    major_run = compact_in_process(spark, rest_catalog, "s3v2.t", CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                                   overrides={**overrides, "major_segment_delete_ratio": 0.1}, now=NOW, clean=True)
    the_plan, majors = major_run.plan, major_run.partitions
    assert not any(t.full_rewrite for t in the_plan.tasks)
    assert all(p.kind == "major" for p in majors)
    after_major = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after_major.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert_deletes_settled(after_major, majors)
    check_engines(spark, rest_catalog, workload.table, workload.identifier, "major", request)


def test_v3_minor_through_spark_submit_then_full_major_on_s3(spark, rest_catalog: CatalogConfig, ledger: Ledger,  # type: ignore[no-untyped-def]
                                                              request) -> None:
    """v3 on S3: MINOR through spark-submit (equality deletes -> deletion vectors in Puffin files on S3, written by
    Iceberg's DV writer through py4j callbacks), then a full-rewrite MAJOR (validation none) that applies the DVs
    and removes them; after each, every engine reads the same rows through S3."""
    spec = WorkloadSpec(seed=21, format_version=3, partitioning="days_ts", days_span=2, commits=3,
                        eq_delete_fraction=0.8)
    workload = generate(spark, rest_catalog, "s3v3.t", spec)
    before = read_table(rest_catalog.load().load_table(workload.identifier))
    assert before.rows == workload.expected_rows
    assert any(d.delete_kind == "equality" for d in before.delete_files)

    lines: list[str] = []
    # No data file is a fragment: every delete is converted (this tiny table's files would all be merged otherwise,
    # applying every delete, and no DV would be written).
    report = run_table(rest_catalog, "s3v3.t", mode=CompactionMode.MINOR, ledger=ledger, progress=lines.append,
                       validation="count", overrides={"fragment-ratio": 1 << 40})
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines[-20:])
    outcomes = ledger.outcomes(report.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.kind is CompactionKind.MINOR for o in outcomes)
    assert all(o.validation_result == "passed" for o in outcomes)
    after = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert after.delete_files and all(d.delete_kind == "deletion_vector" for d in after.delete_files)
    assert all(d.path.startswith("s3://") and d.path.endswith(".puffin") for d in after.delete_files)
    assert all(len(deletes) <= 1 for deletes in after.applicable_deletes.values())
    check_engines(spark, rest_catalog, workload.table, workload.identifier, "minor", request)

    compact_in_process(spark, rest_catalog, "s3v3.t", CompactionMode.MAJOR, level=ValidationLevel.NONE, overrides=FULL,
                       now=NOW, clean=True)
    after_major = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after_major.rows == before.rows
    assert not after_major.delete_files, "the DVs of the rewritten files were not removed"
    check_engines(spark, rest_catalog, workload.table, workload.identifier, "major", request)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()
    return run


def test_major_overtaken_by_a_writer_on_the_rest_catalog_retries(spark, rest_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                  monkeypatch) -> None:
    """Another writer commits through the REST catalog between our MAJOR's planning and its commit (deterministic:
    the writer runs inside our rewrite call, whose table instance still plans from the old snapshot): a Spark
    DELETE (a position delete on a file we rewrite), an equality delete and an append. The REST catalog's commit
    validation refuses our rewrite, the partition is re-inspected and retried; no row lost or resurrected."""
    # Partition-scoped position deletes (one delete file names several data files): which files they name is read
    # from the files themselves, through the table's FileIO on S3 (compaction.spark.file_io_reads), by the cleanup
    # of dangling deletes and by the MAJOR's validation.
    spec = WorkloadSpec(seed=41, format_version=2, partitioning="days_ts", days_span=1, commits=3, rows_per_commit=40,
                        eq_delete_fraction=0.8, null_key_fraction=0.0, delete_granularity="partition")
    workload = generate(spark, rest_catalog, "s3race.t", spec)
    expected: Counter[tuple[Any, ...]] = Counter(read_table(rest_catalog.load().load_table(workload.identifier)).rows)
    assert expected == workload.expected_rows
    live_ids = sorted({row[0] for row in expected})
    day = 19723  # the one day partition (2024-01-01)

    def writer() -> None:
        position_victim, equality_victim = live_ids[1], live_ids[-2]
        spark.sql(f"DELETE FROM {workload.table} WHERE id = {position_victim}")
        write_and_commit(spark, J.load_table(spark, workload.table),
                         [EqualityDeleteSpec(("id",), ((equality_victim,),), partition=(day,))])
        ts_us = BASE_TS_US + 3_600_000_000
        spark.sql(f"INSERT INTO {workload.table} VALUES (9000001, 'EU', timestamp_micros({ts_us}), 7, 'concurrent')")
        for row in [r for r in expected if r[0] in (position_victim, equality_victim)]:
            del expected[row]
        expected[(9000001, "EU", ts_from_micros(ts_us), 7, "concurrent")] += 1

    race = _once(writer)
    original = major_module.rewrite_partition

    def overtaken_rewrite(spark_, table, *args, **kwargs):  # type: ignore[no-untyped-def]
        race()
        return original(spark_, table, *args, **kwargs)

    monkeypatch.setattr(major_module, "rewrite_partition", overtaken_rewrite)
    read_through_file_io: list[str] = []
    original_read = partition_files_module.read_parquet_rows

    def recorded_read(table, schema, location):  # type: ignore[no-untyped-def]
        read_through_file_io.append(location)
        return original_read(table, schema, location)

    monkeypatch.setattr(partition_files_module, "read_parquet_rows", recorded_read)
    majors = compact_in_process(spark, rest_catalog, "s3race.t", CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                                overrides=FULL, now=NOW, clean=True).partitions
    assert [p.status for p in majors] == [COMMITTED], [(p.label, p.status, p.error) for p in majors]
    if len(majors[0].commit_snapshot_ids) > 1:
        # A cleanup commit (Iceberg 1.10 leaves the partition-scoped deletes dangling; 1.12's rewrite removes them
        # itself, and then there is nothing to examine): it found them dangling by reading them through the FileIO.
        assert read_through_file_io, "no partition-scoped position delete was read (through the FileIO)"
    assert majors[0].conflicts, "the MAJOR overtaken by the writer must have been refused and retried"
    final = read_table(rest_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not final.applicable_deletes


def test_v3_minor_overtaken_by_a_spark_delete_on_the_rest_catalog_retries(spark, rest_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                                         monkeypatch) -> None:
    """A Spark DELETE (deletion vectors for every data file) commits through the REST catalog between our MINOR's
    own pre-commit check and its commit (deterministic: run at that point of the attempt). v3 allows one DV per data
    file, so Iceberg refuses our RowDelta (a DV was added concurrently for a file we give a new DV); the partition is
    re-read and retried, and its new DVs hold the writer's deletes too: nothing lost or resurrected."""
    spec = WorkloadSpec(seed=41, format_version=3, partitioning="days_ts", days_span=1, commits=3, rows_per_commit=40,
                        eq_delete_fraction=0.8, null_key_fraction=0.0)
    workload = generate(spark, rest_catalog, "s3dv.t", spec)
    expected: Counter[tuple[Any, ...]] = Counter(read_table(rest_catalog.load().load_table(workload.identifier)).rows)

    def writer() -> None:
        first_id_of_file: dict[str, int] = {}
        for row in spark.sql(f"SELECT id, _file FROM {workload.table} ORDER BY id").collect():
            first_id_of_file.setdefault(row["_file"], int(row["id"]))
        victims = sorted(first_id_of_file.values())
        spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({', '.join(map(str, victims))})")
        for row in [r for r in expected if r[0] in victims]:
            del expected[row]

    race = _once(writer)
    original = minor_module.check_no_conflicting_changes

    def racing_check(spark_, table, expression, base_id, commit_id, work):  # type: ignore[no-untyped-def]
        original(spark_, table, expression, base_id, commit_id, work)
        if commit_id is None:  # after our check, before our commit
            race()

    monkeypatch.setattr(minor_module, "check_no_conflicting_changes", racing_check)
    minors = compact_in_process(spark, rest_catalog, "s3dv.t", CompactionMode.MINOR, level=ValidationLevel.COUNT,
                                overrides={"fragment_ratio": 1 << 40}, now=NOW, clean=True).partitions
    assert [p.status for p in minors] == [COMMITTED], [(p.label, p.status, p.error) for p in minors]
    assert minors[0].conflicts, "the MINOR overtaken by the writer's DVs must have been refused and retried"
    assert "concurrently added DV" in minors[0].conflicts[0]["message"], minors[0].conflicts
    final = read_table(rest_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(d.delete_kind == "equality" for d in final.delete_files)
    assert all(len(deletes) == 1 for deletes in final.applicable_deletes.values())


# -- kill -9 mid-rewrite, and a rewrite output that goes multipart ------------------------------------------------

#: S3's minimum part size. S3FileIO starts a multipart upload once a file passes part size x s3.multipart.threshold
#: (1.5). Its Java property is ``s3.multipart.part-size-bytes`` (``S3FileIOProperties.MULTIPART_SIZE``; default 32 MB).
MULTIPART_SIZE = 5 * 1024 * 1024
#: Rows of ~64 incompressible-ish bytes each (a SHA-256 in hex): ~4 MB a batch, each appended as one file that stays
#: under the multipart threshold (7.5 MB); the MAJOR's output (all batches, one file) passes it.
BATCH_ROWS = 100_000
BATCHES = 3


@pytest.fixture()
def multipart_catalog(spark, object_store) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A REST catalog of the session's SeaweedFS whose S3FileIO uploads parts of 5 MB (the S3 minimum)."""
    from compaction.spark.session import register_catalog

    catalog = CatalogConfig(f"rm_{uuid.uuid4().hex[:8]}",
                            {**object_store.catalog_properties(), "s3.multipart.part-size-bytes": str(MULTIPART_SIZE)})
    register_catalog(spark, catalog)
    return catalog


def _kill_when_rewriting(token: Path, table_name: str, killed: list[int]) -> threading.Thread:
    """Once the armed job's rewrite has a Spark stage running (it writes ``<token>.pids``), SIGKILL its spark-submit
    process group: the job dies while Iceberg's rewrite writes files to S3."""
    def watch() -> None:
        for _ in range(6000):
            if token.with_name(token.name + ".pids").exists():
                for proc in psutil.process_iter(["cmdline"]):
                    cmd = " ".join(proc.info["cmdline"] or [])
                    if "org.apache.spark.deploy.SparkSubmit" in cmd and table_name in cmd:
                        killed.append(proc.pid)
                        os.killpg(os.getpgid(proc.pid), signal.SIGKILL)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_kill_9_mid_rewrite_on_s3_then_a_multipart_rewrite(spark, object_store, multipart_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                          ledger: Ledger, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A MAJOR through spark-submit is SIGKILLed while its rewrite runs: the table is unchanged, every file its
    metadata references is whole, the ledger says failed. The next run writes one ~12 MB file, uploaded in parts
    (S3FileIO's multipart upload, parts of 5 MB; the server's request counters show it), and every engine reads it
    back. (SeaweedFS gives a multipart object a plain MD5 ETag, without the usual ``-<parts>``.)"""
    catalog = multipart_catalog
    ref = f"{catalog.name}.s3big.t"
    create_table(spark, ref, "id bigint, payload string", "", {
        "format-version": "2", "write.delete.mode": "merge-on-read", "write.parquet.compression-codec": "zstd"})
    appends = object_store.s3_traffic()
    for batch in range(BATCHES):
        (spark.range(batch * BATCH_ROWS, (batch + 1) * BATCH_ROWS, numPartitions=1)
         .selectExpr("id", "sha2(cast(id AS string), 256) AS payload").writeTo(ref).append())
    # A multipart upload is one POST to create it, a PUT per part and a POST to complete it; POST is otherwise only
    # a multi-object delete, which nothing here makes.
    assert traffic_delta(appends, object_store.s3_traffic())["requests"].get("POST", 0) == 0, "inputs uploaded whole"
    spark.sql(f"DELETE FROM {ref} WHERE id % 1000 = 0")  # position deletes: the MAJOR rewrites every file
    identifier = ("s3big", "t")
    table = catalog.load().load_table(identifier)
    before = read_table(table)
    head = table.current_snapshot().snapshot_id
    assert len(before.data_files) == BATCHES
    assert all(d.file_size_in_bytes < MULTIPART_SIZE * 1.5 for d in before.data_files)

    token = tmp_path / "kill-token"
    token.write_text("")
    monkeypatch.setenv("ICECOMPACT_FAULT_INJECT", f"signal:before-rewrite:{token}")
    killed: list[int] = []
    watcher = _kill_when_rewriting(token, "s3big.t", killed)
    report = run_table(catalog, "s3big.t", mode=CompactionMode.MAJOR, ledger=ledger, overrides={
        "major.full-rewrite": "true", "target-file-size-bytes": str(256 << 20)})
    watcher.join(timeout=5)
    assert killed, "the job never reached the rewrite"
    assert report.status is RunStatus.FAILED and report.exit_code == 8, (report.status, report.errors)
    table = catalog.load().load_table(identifier)
    assert table.current_snapshot().snapshot_id == head, "a killed job committed"
    after_kill = read_table(table)  # reads every file the metadata references, through S3: all whole
    assert after_kill.rows == before.rows
    assert {d.path for d in after_kill.data_files} == {d.path for d in before.data_files}
    run = ledger.run(report.run_id)
    assert run is not None and run.status is RunStatus.FAILED
    assert all(o.status is OutcomeStatus.FAILED for o in ledger.outcomes(report.run_id))

    monkeypatch.delenv("ICECOMPACT_FAULT_INJECT")
    rewrite = object_store.s3_traffic()
    again = run_table(catalog, "s3big.t", mode=CompactionMode.MAJOR, ledger=ledger, overrides={
        "major.full-rewrite": "true", "target-file-size-bytes": str(256 << 20)})
    assert again.status is RunStatus.SUCCEEDED, again.errors
    table = catalog.load().load_table(identifier)
    after = read_table(table)
    assert after.rows == before.rows and not after.applicable_deletes
    (rewritten,) = after.data_files
    assert rewritten.file_size_in_bytes > 1.5 * MULTIPART_SIZE  # past the multipart threshold
    traffic = traffic_delta(rewrite, object_store.s3_traffic())["requests"]
    assert traffic.get("POST", 0) >= 2 and traffic.get("PUT", 0) >= 3, f"no multipart upload: {traffic}"
    from icecompact_testing import engines as E

    for engine in (E.PYICEBERG, E.DUCKDB_NO_CACHE):
        assert E.read_rows(engine, table).rows == before.rows, engine


def test_delete_file_columns_are_found_by_field_id_then_by_name() -> None:
    """The FileIO read of delete files picks columns as Spark's Parquet reader does with field-id reads on: by
    ``parquet.field.id`` when the file has ids (a renamed column is still found; a missing id reads as nulls), by
    name when the file has none."""
    import pyarrow as pa
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from compaction.spark.file_io_reads import _file_columns, _scheme

    wanted = StructType([StructField("c1", LongType(), True, {"parquet.field.id": 1}),
                         StructField("c7", StringType(), True, {"parquet.field.id": 7})])
    with_ids = pa.schema([pa.field("renamed_id", pa.int64(), metadata={b"PARQUET:field_id": b"1"}),
                          pa.field("c7", pa.string(), metadata={b"PARQUET:field_id": b"3"})])
    assert _file_columns(with_ids, wanted) == ["renamed_id", None]
    without_ids = pa.schema([pa.field("c1", pa.int64()), pa.field("other", pa.string())])
    assert _file_columns(without_ids, wanted) == ["c1", None]
    position_delete = StructType([StructField("file_path", StringType()), StructField("pos", LongType())])
    assert _file_columns(pa.schema([pa.field("file_path", pa.string()), pa.field("pos", pa.int64())]),
                         position_delete) == ["file_path", "pos"]
    assert [_scheme(x) for x in ("s3://b/k", "file:/tmp/x", "/tmp/x", "S3A://b/k")] == ["s3", "file", "file", "s3a"]


def test_major_row_group_copy_through_s3fileio(spark, rest_catalog: CatalogConfig) -> None:  # type: ignore[no-untyped-def]
    """A MAJOR's row-group copy on S3 (S3FileIO reads the sources and writes the new file; its footer is read back
    through it): the clean files' row groups land in one new file on S3, the file with a delete is decoded, every
    row is kept."""
    import pyarrow.parquet as pq

    from compaction.spark.major import ROW_GROUP_COPY_PROPERTY
    from icecompact_testing.oracle import spark_rows as reference_spark_rows

    namespace = f"rg_{uuid.uuid4().hex[:8]}"
    ref = f"{rest_catalog.name}.{namespace}.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {rest_catalog.name}.{namespace}")
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, payload STRING) USING iceberg TBLPROPERTIES ('format-version' = '2', "
              "'write.delete.mode' = 'merge-on-read', 'write.target-file-size-bytes' = '67108864')")
    for i in range(3):
        (spark.range(i * 5000, (i + 1) * 5000, 1, 1).selectExpr("id", "sha2(CAST(id AS STRING), 256) AS payload")
         .writeTo(ref).append())
    spark.sql(f"DELETE FROM {ref} WHERE id = 3")
    catalog = rest_catalog.load()
    before = read_table(catalog.load_table((namespace, "t")))
    compact_in_process(spark, rest_catalog, f"{namespace}.t", CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                       overrides={**FULL, "row_group_copy_min_row_group_bytes": 1024}, now=NOW, clean=True)
    table = catalog.load_table((namespace, "t"))
    assert table.current_snapshot().summary.get(ROW_GROUP_COPY_PROPERTY) == "2 files into 1"
    files = [t.file for t in table.scan().plan_files()]
    groups = sorted(pq.ParquetFile(table.io.new_input(f.file_path).open()).metadata.num_row_groups for f in files)
    assert groups == [1, 2] and all(f.file_path.startswith("s3://") for f in files)
    assert read_table(table).rows == before.rows
    assert reference_spark_rows(spark, ref) == before.rows
