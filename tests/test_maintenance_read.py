"""The maintenance planner's direct read of a SQL catalog's metadata file equals the state built from pyiceberg's
loaded table (snapshots, refs, properties, manifests, metadata size), including a tag and a branch with their own
retention. No Spark: the table is written with pyiceberg."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from compaction.catalog import CatalogConfig
from compaction.metadata.inspect import load_table
from compaction.ops.maintenance import maintenance_state, read_state


def test_read_state_equals_the_pyiceberg_state(tmp_path: Path) -> None:
    catalog = CatalogConfig.sqlite("mr", tmp_path / "catalog.db", tmp_path / "warehouse")
    cat = catalog.load()
    cat.create_namespace("ns")
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    table = cat.create_table("ns.t", schema=schema,
                             properties={"format-version": "2", "history.expire.max-snapshot-age-ms": "3600000"})
    for i in range(3):
        table.append(pa.table({"id": [i, i + 10], "v": ["a", "b"]}, schema=schema))
    snapshots = table.metadata.snapshots
    with table.manage_snapshots() as ms:
        ms.create_tag(snapshots[0].snapshot_id, "first", max_ref_age_ms=86_400_000)
        ms.create_branch(snapshots[1].snapshot_id, "side", max_snapshot_age_ms=60_000, min_snapshots_to_keep=2)

    identity, loaded = load_table(catalog, "ns.t")
    expected = maintenance_state(loaded, identity)
    got = read_state(catalog, "ns.t")
    assert got.refs and {r.name for r in got.refs} == {"main", "first", "side"}
    assert sorted(got.refs, key=lambda r: r.name) == sorted(expected.refs, key=lambda r: r.name)
    assert got.snapshots == expected.snapshots and len(got.snapshots) == 3
    assert (got.table, got.location, got.format_version, dict(got.properties), got.current_snapshot_id,
            got.manifest_sizes, got.metadata_location, got.metadata_file_bytes, got.metadata_log_entries) == (
        expected.table, expected.location, expected.format_version, dict(expected.properties),
        expected.current_snapshot_id, expected.manifest_sizes, expected.metadata_location,
        expected.metadata_file_bytes, expected.metadata_log_entries)
