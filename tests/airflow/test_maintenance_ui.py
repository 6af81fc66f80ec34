"""The table page's metadata and maintenance section rendered from real ledger data: health samples
recorded by ``compaction.ops.fleet`` from a real table (pyiceberg writes it, no Spark) as it grows, and maintenance runs
recorded through the ledger's maintenance API; the page shows snapshots, metadata file size, manifests and bytes
referenced over time with the maintenance runs marked, and what each action removed."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa

from compaction.catalog import CatalogConfig
from compaction.ops.fleet import record_sample, sample_table
from compaction.ledger import Ledger
from icecompact_airflow.health import health_from_state, maintenance_history, render_table_page, table_history

T0 = dt.datetime(2025, 7, 1, 12, 0, tzinfo=dt.timezone.utc)


def test_table_page_shows_metadata_over_time_and_what_maintenance_removed(tmp_path: Path) -> None:
    catalog = CatalogConfig.sqlite("mui", tmp_path / "catalog.db", tmp_path / "warehouse")
    cat = catalog.load()
    cat.create_namespace("ns")
    schema = pa.schema([("id", pa.int64())])
    table = cat.create_table("ns.t", schema=schema, properties={"format-version": "2"})
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        recorded = []
        for i in range(3):
            table.append(pa.table({"id": [i]}, schema=schema))
            sample, state = sample_table(catalog, "ns.t", ledger=ledger)
            recorded.append(record_sample(sample, "ui", ledger=ledger, now=T0 + dt.timedelta(minutes=10 * i)))
        assert [r.snapshots for r in recorded if r] == [1, 2, 3]
        latest = recorded[-1]
        assert latest is not None and latest.manifests == 3 and latest.metadata_file_bytes and latest.manifest_bytes
        assert latest.referenced_bytes == (latest.data_bytes + latest.delete_bytes + latest.manifest_bytes
                                           + latest.metadata_file_bytes)

        run_id = ledger.start_maintenance("ns.t", "mui", "plan-1", '{"actions": []}', now=T0 + dt.timedelta(minutes=15))
        ledger.record_maintenance_action(run_id, "expire_snapshots", "succeeded", reason="2 snapshot(s) older than 5 min",
                                         files_removed=4, bytes_removed=12_345, duration_ms=2100,
                                         detail={"snapshots_expired": 2})
        ledger.record_maintenance_action(run_id, "delete_orphan_files", "refused", reason="scheme mismatch",
                                         files_removed=0, bytes_removed=None, duration_ms=10)
        ledger.finish_maintenance(run_id, "partial", error="scheme mismatch", now=T0 + dt.timedelta(minutes=16))

        samples = [s.to_dict() for s in ledger.health_samples("ns.t", catalog="mui")]
        maintenance = maintenance_history(ledger, "ns.t", "mui")
        history = table_history(ledger, "ns.t", "mui")
    page = render_table_page(health_from_state("mui", "ns.t", state, sample), history, "/compaction",
                             samples=samples, maintenance=maintenance, now=T0 + dt.timedelta(minutes=30))

    assert '<svg id="metadata-chart"' in page
    for key in ("snapshots", "metadata_file_bytes", "manifests", "referenced_bytes"):
        points = re.search(rf'class="series-{key}"[^>]* points="([^"]+)"', page)
        assert points is not None, key
    snapshots_line = re.search(r'class="series-snapshots"[^>]* points="([^"]+)"', page)
    assert snapshots_line is not None
    ys = [float(p.split(",")[1]) for p in snapshots_line.group(1).split()]
    assert ys[0] > ys[-1]  # snapshots grew: the line rises (SVG y grows downwards)
    assert "snapshots: 3" in page and "manifests (current snapshot): 3" in page
    marker = re.search(r'<line class="maintenance-marker"[^>]*><title>([^<]+)</title>', page)
    assert marker is not None and "expire_snapshots: succeeded, 4 file(s), 12.1 KiB" in marker.group(1)
    rows = re.findall(r'<tr class="maintenance-action">(.*?)</tr>', page)
    assert len(rows) == 2
    assert "expire_snapshots" in rows[0] and ">4<" in rows[0] and "12.1 KiB" in rows[0] and "partial" in rows[0]
    assert "delete_orphan_files" in rows[1] and "refused" in rows[1] and "scheme mismatch" in rows[1]
    assert 'href="/compaction/api/tables/ns.t/maintenance?catalog=mui"' in page
