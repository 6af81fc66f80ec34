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
from compaction.maintenance import maintain_table
from compaction.testing.oracle import read_table
from compaction.testing.workload import WorkloadSpec, generate, spark_rows


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
