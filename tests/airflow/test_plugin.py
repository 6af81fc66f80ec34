"""The UI plugin under a real api-server: refused without Airflow auth, JSON right for a real table, and a headless
Chromium rendering the health page with real data (screenshot kept as a test artifact)."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest
from af_support import ApiServer, AuthProxy, catalog_connection_env, png_pixels

from compaction.catalog import CatalogConfig
from compaction.cli import partition_health_rows
from compaction.core.plan import CompactionMode
from compaction.metadata.inspect import inspect_table
from compaction.ledger import Ledger, RunStatus, RunTrigger
from compaction.ops.runner import run_table
from compaction.demo.workload import WorkloadSpec, generate

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def _get(url: str, token: str | None = None) -> tuple[int, bytes]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _chromium(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--hide-scrollbars", "--no-first-run", *args],
                          capture_output=True, text=True, timeout=180, check=True)


def test_plugin_health_and_history_behind_airflow_auth(spark, sqlite_catalog: CatalogConfig, airflow_db: Path,
                                                      artifacts: Path) -> None:
    assert Path(CHROMIUM).exists(), "Debian package chromium is required (scripts/install.sh --with-browser)"
    generate(spark, sqlite_catalog, "ui.events",
             WorkloadSpec(seed=23, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=3))
    # A real compaction of one day, so the page has both: partitions with deletes, and a run's before/after.
    report = run_table(sqlite_catalog, "ui.events", mode=CompactionMode.MAJOR, validation="count",
                       partition_filter="ts >= '2024-01-01' and ts < '2024-01-02'", trigger=RunTrigger.TEST)
    assert report.status is RunStatus.SUCCEEDED and report.outcomes, report.errors
    state = inspect_table(sqlite_catalog, "ui.events")
    labels = [p.key.label() for p in state.partitions]
    assert len(labels) == 3 and sum(len(p.delete_files) for p in state.partitions) > 0

    q = f"catalog={sqlite_catalog.name}"
    paths = [f"/compaction/?{q}", f"/compaction/tables/ui.events?{q}", f"/compaction/api/tables?{q}",
             f"/compaction/api/tables/ui.events/health?{q}", f"/compaction/api/tables/ui.events/runs?{q}",
             f"/compaction/api/runs/{report.run_id}"]
    server = ApiServer(env=catalog_connection_env(sqlite_catalog))
    proxy = None
    try:
        server.wait_ready()
        for path in paths:  # no credentials, and a forged token
            assert _get(server.url + path)[0] == 401, path
            assert _get(server.url + path, token="not.a.jwt")[0] == 403, path
        token = server.token("viewer")

        status, body = _get(server.url + f"/compaction/api/tables?{q}", token)
        assert status == 200 and json.loads(body) == {"catalog": sqlite_catalog.name, "tables": ["ui.events"]}
        status, body = _get(server.url + f"/compaction/api/tables/ui.events/health?{q}", token)
        assert status == 200, body
        health = json.loads(body)
        expected = partition_health_rows(state)
        assert health["snapshot_id"] == state.snapshot_id
        assert [r["partition"] for r in health["partitions"]] == labels
        for got, want in zip(health["partitions"], expected):
            for key in ("data_files", "data_records", "position_delete_files", "equality_delete_files",
                        "delete_ratio"):
                assert got[key] == want[key], (got["partition"], key)
        assert health["totals"]["delete_files"] == sum(len(p.delete_files) for p in state.partitions)

        status, body = _get(server.url + f"/compaction/api/tables/ui.events/runs?{q}", token)
        runs = json.loads(body)["runs"]
        assert status == 200 and runs[0]["run_id"] == report.run_id and runs[0]["status"] == "succeeded"
        with Ledger.open() as ledger:
            stored = [o.to_dict() for o in ledger.outcomes(report.run_id)]
        assert runs[0]["outcomes"] == json.loads(json.dumps(stored))
        compacted = runs[0]["outcomes"][0]
        assert compacted["delete_files_before"] > 0 and compacted["delete_files_after"] == 0
        status, body = _get(server.url + f"/compaction/api/runs/{report.run_id}", token)
        assert status == 200 and json.loads(body)["run"]["run_id"] == report.run_id
        assert _get(server.url + f"/compaction/api/tables/{quote('ui.events; drop')}/health?{q}", token)[0] == 400

        # A real browser, carrying the viewer's token through a header-adding proxy.
        proxy = AuthProxy(server.url, token)
        page = f"{proxy.url}/compaction/tables/ui.events?{q}"
        shot = artifacts / "plugin-health-page.png"
        shot.unlink(missing_ok=True)
        _chromium(f"--screenshot={shot}", "--window-size=1100,1300", page)
        dom = _chromium("--dump-dom", page).stdout
    finally:
        if proxy is not None:
            proxy.stop()
        server.stop()

    for label in labels:
        assert f'<td class="partition">{label}</td>' in dom, label
    assert "<svg" in dom and 'class="ratio"' in dom and "before" in dom
    assert report.run_id[:8] in dom
    data = shot.read_bytes()
    width, height, colours = png_pixels(data)
    assert (width, height) == (1100, 1300) and len(data) > 20_000
    assert len(colours) > 50, "a rendered page, not a blank screenshot"
    assert (220, 38, 38) in colours, "the delete-ratio bars of the SVG chart are drawn"
