"""Maintenance on a REST catalog with tables on S3 (SeaweedFS): Hadoop cannot list ``s3://`` here (the tables use
Iceberg's S3FileIO), so the listings behind the expiry's byte count and orphan removal go through the table's
FileIO. Every action runs, the planted orphan (and only it) is deleted, and the rows read the same before and
after."""

from __future__ import annotations

import uuid
from pathlib import Path

from compaction.catalog import CatalogConfig
from compaction.core.maintenance import MaintenanceAction as A
from compaction.ledger import Ledger
from compaction.ops.maintenance import maintain_table
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate, spark_rows


def test_every_maintenance_action_on_rest_and_s3(spark, rest_catalog: CatalogConfig, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    spec = WorkloadSpec(seed=24, format_version=3, partitioning="days_ts", days_span=2, commits=4, rows_per_commit=20)
    workload = generate(spark, rest_catalog, "s3maint.t", spec)
    name = "s3maint.t"
    table = rest_catalog.load().load_table(workload.identifier)
    location = str(table.metadata.location)
    assert location.startswith("s3://")
    before = read_table(table)
    snapshots_before = len(table.metadata.snapshots)
    assert snapshots_before > 2
    # A file nothing references, in the table's data folder (where a failed job's output would be).
    data_path = str(table.metadata.properties.get("write.data.path") or f"{location}/data").rstrip("/")
    orphan = f"{data_path}/orphan-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(orphan).create() as out:
        out.write(b"not referenced by any metadata" * 10)
    live_files = {f.path for f in before.data_files} | {d.path for d in before.delete_files}
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report = maintain_table(rest_catalog, name, spark=spark, ledger=ledger, overrides={
            "max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
            "orphans_enabled": True, "orphans_older_than_s": 0, "clock_skew_s": 0})
        assert report.plan.actions == (A.EXPIRE_SNAPSHOTS, A.REWRITE_MANIFESTS, A.DELETE_ORPHAN_FILES)
        assert report.status == "succeeded", [r.to_dict() for r in report.results]
        by_action = {r.action: r for r in report.results}
        expired = by_action[A.EXPIRE_SNAPSHOTS]
        assert expired.detail["snapshots_expired"] == snapshots_before - 1
        assert expired.files_removed > 0 and (expired.bytes_removed or 0) > 0  # measured by S3 listings
        orphans = by_action[A.DELETE_ORPHAN_FILES]
        assert orphans.files_removed == 1 and orphans.bytes_removed == 300, orphans.to_dict()
        assert orphans.detail["sample"] == [orphan]
    after_table = rest_catalog.load().load_table(workload.identifier)
    assert not after_table.io.new_input(orphan).exists()
    assert all(after_table.io.new_input(p).exists() for p in live_files)
    after = read_table(after_table)
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows


def test_metadata_versions_that_left_the_log_are_deleted_where_the_rest_server_kept_them(  # type: ignore[no-untyped-def]
        spark, rest_catalog: CatalogConfig, tmp_path: Path) -> None:
    """SeaweedFS's REST server writes every metadata version (v1.metadata.json, v2, ...) and keeps them all, although
    the table asks for the ones leaving the log to be deleted (write.metadata.delete-after-commit.enabled): storage
    grows by a metadata file per commit. Maintenance deletes the versions older than the whole log, keeps the log
    and the current one, and the table reads the same."""
    from compaction.spark.maintenance import dropped_metadata_files, metadata_version

    ref = f"{rest_catalog.name}.s3meta.t"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {rest_catalog.name}.s3meta")
    spark.sql(f"CREATE TABLE {ref} (id bigint, g int) USING iceberg TBLPROPERTIES ("
              "'write.metadata.previous-versions-max' = '2', 'write.metadata.delete-after-commit.enabled' = 'true')")
    for i in range(6):
        spark.sql(f"INSERT INTO {ref} VALUES ({i}, {i % 2})")
    table = rest_catalog.load().load_table(("s3meta", "t"))
    folder = table.metadata_location.rsplit("/", 1)[0]
    log = [e.metadata_file for e in table.metadata.metadata_log]
    kept = {table.metadata_location, *log}
    versions_before = sorted(p for p in _metadata_files(table, folder))
    stale = dropped_metadata_files(versions_before, table.metadata_location, log)
    assert len(log) == 2 and len(stale) >= 4, versions_before  # the server kept what left the log
    before = sorted(r[0] for r in spark.sql(f"SELECT id FROM {ref}").collect())
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report = maintain_table(rest_catalog, "s3meta.t", spark=spark, ledger=ledger, overrides={
            "expire_enabled": False, "rewrite_manifests_enabled": False})
    assert report.plan.actions == (A.METADATA_FILES,), report.plan.to_json()
    [result] = report.results
    assert result.status == "succeeded" and result.files_removed == len(stale) and (result.bytes_removed or 0) > 0
    left = set(_metadata_files(table, folder))
    assert left == set(versions_before) - set(stale) and kept <= left
    oldest_kept = min(metadata_version(p.rsplit("/", 1)[-1]) or 0 for p in kept)
    assert all((metadata_version(p.rsplit("/", 1)[-1]) or 0) >= oldest_kept for p in left)
    assert sorted(r[0] for r in spark.sql(f"SELECT id FROM {ref}").collect()) == before == list(range(6))


def _metadata_files(table, folder: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The metadata.json files in the table's metadata folder, listed with pyarrow through the table's FileIO."""
    from pyarrow import fs

    scheme, rest = folder.split("://", 1)
    filesystem = table.io.fs_by_scheme(scheme, rest.split("/", 1)[0])
    infos = filesystem.get_file_info(fs.FileSelector(rest, recursive=False))
    return [f"{scheme}://{i.path}" for i in infos if i.path.endswith(".metadata.json")]
