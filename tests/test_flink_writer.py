"""The real writer of production's equality deletes beside our compaction: a Flink upsert job (PyFlink 2.1 with
Iceberg's Flink sink, testing/icecompact_testing/flink.py) streams a seeded CDC stream into a v2 and a v3 table,
committing every checkpoint, while MINOR and then MAJOR compact the tables in this process's Spark session.

Checked: the shapes Flink writes (data files and equality deletes in one commit, position deletes / DVs for keys
updated twice within a checkpoint, on that checkpoint's own data files); after it all, the reference reader and
Spark read exactly the stream's final state (nothing lost, nothing resurrected); MINOR converted every equality
delete; Flink committed on top of our compaction snapshots; and the Flink job never failed - with its restart
strategy off and no failed checkpoint tolerated, a failed checkpoint or commit would have failed it."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter
from pathlib import Path

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.results import PartitionResult, PartitionStatus
from compaction.spark.validation import ValidationLevel
from icecompact_testing.flink import FlinkWriter, StreamSpec
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import OracleResult, read_table, spark_rows

TABLES = {"flink.v2": 2, "flink.v3": 3}
#: Two partitions per table: what matters is the shapes and the race, and each partition is a compaction task.
SPEC = StreamSpec(seed=23, regions=2)
#: A streaming table's compaction retries conflicts with the writer's commits (one a second here) more than a
#: batch table's would.
MAX_RETRIES = 8
COMMITTED, CONFLICT = PartitionStatus.COMMITTED, PartitionStatus.CONFLICT
SETTLED = (COMMITTED, PartitionStatus.NO_OP, PartitionStatus.SKIPPED)


def _read(catalog: CatalogConfig, table: str) -> OracleResult:
    return read_table(catalog.load().load_table(tuple(table.split("."))))


def _flink_snapshots(catalog: CatalogConfig, table: str) -> dict[int, dict[str, str]]:
    tbl = catalog.load().load_table(tuple(table.split(".")))
    summaries = {s.snapshot_id: dict(s.summary.additional_properties) if s.summary else {} for s in tbl.snapshots()}
    return {sid: summary for sid, summary in summaries.items() if "flink.job-id" in summary}


def _assert_flink_shapes(catalog: CatalogConfig, table: str, format_version: int) -> None:
    """What Iceberg's Flink upsert sink writes, read from the table (no compaction has run yet)."""
    state = _read(catalog, table)
    flink = _flink_snapshots(catalog, table)
    assert flink, "no commit of the Flink job"
    by_snapshot: dict[int, set[str]] = {}
    for entry in (*state.data_files, *state.delete_files):
        by_snapshot.setdefault(entry.snapshot_id or 0, set()).add("data" if entry.is_data else entry.delete_kind or "")
    assert set(by_snapshot) <= set(flink), "every live file is the Flink job's"
    # Data files and equality deletes (the upserts' deletes of older rows) in one commit.
    assert any({"data", "equality"} <= kinds for kinds in by_snapshot.values()), by_snapshot
    # A key upserted twice within a checkpoint: a position delete (v2) / a DV (v3) on that checkpoint's own data file.
    positional = "position" if format_version == 2 else "deletion_vector"
    assert any(positional in kinds for kinds in by_snapshot.values()), by_snapshot
    assert not any(("position" if format_version == 3 else "deletion_vector") in kinds
                   for kinds in by_snapshot.values()), by_snapshot
    data_snapshot = {d.path: d.snapshot_id for d in state.data_files}
    for path, deletes in state.applicable_deletes.items():
        for d in deletes:
            if d.delete_kind != "equality":
                assert d.snapshot_id == data_snapshot[path], f"{d.path} deletes rows of an earlier commit's {path}"
    assert any(d.delete_kind != "equality" for ds in state.applicable_deletes.values() for d in ds)
    assert state.deleted_rows_by_data_file, "the upserts deleted no row"


def test_flink_upsert_writer_beside_minor_and_major(spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    catalog = sqlite_catalog
    catalog.load()  # pyiceberg's SQL catalog tables (V1 schema) before Flink's JdbcCatalog opens the database
    writer = FlinkWriter.start(catalog, TABLES, tmp_path / "flink", spec=SPEC)
    outcomes: dict[str, list[PartitionResult]] = {"minor": [], "major": []}
    try:
        def feed_and_wait(batches: int) -> None:
            for _ in range(batches):
                writer.feed(1)
                for table in TABLES:
                    writer.wait_committed(catalog, table)

        feed_and_wait(3)
        for table, version in TABLES.items():
            _assert_flink_shapes(catalog, table, version)

        # MINOR, then MAJOR, each on both tables while the job keeps committing batches.
        for name, mode in (("minor", CompactionMode.MINOR), ("major", CompactionMode.MAJOR)):
            errors: list[BaseException] = []

            def compact(name: str = name, mode: CompactionMode = mode, errors: list[BaseException] = errors) -> None:
                try:
                    for table in TABLES:
                        run = compact_in_process(spark, catalog, table, mode, now=dt.datetime.now(dt.timezone.utc),
                                                 max_retries=MAX_RETRIES)
                        outcomes[name] += run.partitions
                except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
                    errors.append(e)

            # A batch committed after the previous phase's commits, so the plan always has equality deletes to
            # work on (else the plan depends on whether Flink's last commit came before or after our last one).
            feed_and_wait(1)
            thread = threading.Thread(target=compact, name=f"compaction-{name}")
            thread.start()
            feed_and_wait(3)
            thread.join()
            assert not errors, errors
        # Batches after both compactions: Flink's RowDeltas on top of our snapshots.
        feed_and_wait(2)
        final = writer.stop()
    except BaseException:
        writer.kill()
        raise

    assert final["state"] == "CANCELED" and final["cancelled"] and final["exit_code"] == 0, (final, writer.log_tail())
    assert final.get("error") is None
    for name, results in outcomes.items():
        assert results, f"{name}: nothing planned"
        assert all(p.status in (*SETTLED, CONFLICT) for p in results), \
            "\n".join(f"{p.label} {p.status} {p.reason} {p.error}" for p in results)
        assert any(p.status == COMMITTED for p in results), [(p.label, p.status, p.reason) for p in results]
    # The MINOR beside the writer removed delete files (equality deletes converted, positional ones merged).
    assert sum(p.removed_delete_files for p in outcomes["minor"] if p.status == COMMITTED) > 0

    expected = Counter(writer.expected().values())
    assert len(expected) > 100
    for table, version in TABLES.items():
        tbl = catalog.load().load_table(tuple(table.split(".")))
        flink = _flink_snapshots(catalog, table)
        ours = {s.snapshot_id for s in tbl.snapshots()} - set(flink)
        assert ours, f"{table}: no compaction commit"
        # Flink committed on top of our snapshots (the last two batches at least): its RowDelta, which validates
        # no data file, applied its equality deletes to the files our compaction wrote.
        parents = {s.snapshot_id: s.parent_snapshot_id for s in tbl.snapshots()}
        assert any(parents[s] in ours for s in flink), table

        # The final MINOR, the writer stopped: every equality delete converted, the rows kept.
        before = _read(catalog, table)
        assert any(d.delete_kind == "equality" for d in before.delete_files), "Flink's last batches left none"
        results = compact_in_process(spark, catalog, table, CompactionMode.MINOR, level=ValidationLevel.CHECKSUM,
                                     now=dt.datetime.now(dt.timezone.utc), max_retries=MAX_RETRIES).partitions
        assert all(p.status in SETTLED for p in results), \
            "\n".join(f"{p.label} {p.status} {p.reason} {p.error}" for p in results)
        after = _read(catalog, table)
        assert not [d.path for d in after.delete_files if d.delete_kind == "equality"], \
            (table, [(p.label, p.status, p.reason) for p in results])
        assert before.rows == after.rows == expected, f"{table}: the stream's final state is not what is read"
        assert spark_rows(spark, f"{catalog.name}.{table}") == expected, f"{table}: Spark reads another state"
        assert not [d for d in after.delete_files if d.delete_kind == ("position" if version == 3 else
                                                                        "deletion_vector")]
