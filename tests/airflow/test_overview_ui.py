"""The operator's view in a real Chromium against a real api-server, with the ledger on SQLite and on
PostgreSQL: the overview of a catalog with tables in different states ordered by need, the table page's health over
time with the runs marked, "compact now" creating a DAG run with the right conf (checked through Airflow's API) that
then shows in the run history, and a read-only user refused. One api-server per ledger backend; screenshots are kept
under tests/artifacts/. The overview and the table page also run on a REST catalog with its tables on S3 (SeaweedFS,
ledger on SQLite), which the api-server knows only from its Airflow connection."""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.error
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import quote

import pytest
from af_support import ApiServer, Browser, airflow_cli, catalog_connection_env, png_pixels

from compaction.catalog import CatalogConfig
from compaction.ops.fleet import record_sample, sample_state
from compaction.metadata.inspect import load_table, table_state
from compaction.ledger import Ledger, RunStatus, RunTrigger
from compaction.demo.workload import WorkloadSpec, generate

DAG = "iceberg_compaction"
HEAVY, CLEAN, BROKEN = "ui.heavy", "ui.clean", "ui.broken"
FLEET = {HEAVY, CLEAN, BROKEN}


def _request(url: str, token: str | None = None, data: bytes | None = None,
             headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    all_headers = {**(headers or {}), **({"Authorization": f"Bearer {token}"} if token else {})}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=all_headers), timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def _build_fleet(spark: Any, catalog: CatalogConfig) -> CatalogConfig:
    """Three tables: one with many deletes (MAJOR due), a clean one, one whose last run failed."""
    from compaction.spark.session import register_catalog
    from compaction.demo.tables import create_table

    register_catalog(spark, catalog)
    generate(spark, catalog, HEAVY, WorkloadSpec(seed=31, partitioning="days_ts", commits=3, rows_per_commit=20,
                                                 days_span=3))
    catalog.load().load_table(HEAVY).transaction().set_properties(
        {"compaction.major.delete-ratio": "0.01"}).commit_transaction()
    for name in (CLEAN, BROKEN):
        create_table(spark, f"{catalog.name}.{name}", "id bigint, region string", "region",
                     {"format-version": "2", "write.delete.mode": "merge-on-read"})
        spark.sql(f"INSERT INTO {catalog.name}.{name} VALUES (1, 'EU'), (2, 'US'), (3, 'US')")
    return catalog


@pytest.fixture(scope="module")
def fleet_catalog(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> CatalogConfig:
    root = tmp_path_factory.mktemp("ui-fleet")
    return _build_fleet(spark, CatalogConfig.sqlite(f"fl_{uuid.uuid4().hex[:8]}", root / "catalog.db",
                                                    root / "warehouse"))


@pytest.fixture(scope="module")
def rest_fleet_catalog(spark: Any, object_store: Any) -> CatalogConfig:
    """The same fleet in a REST catalog with its tables on S3: the overview reads its pointers through the catalog
    API, and the api-server knows the catalog only from its Airflow connection."""
    return _build_fleet(spark, object_store.catalog(f"flr_{uuid.uuid4().hex[:8]}"))


@pytest.fixture(scope="module")
def serialized_dag(airflow_db: Path) -> None:
    """The DAG in the metadata DB (the REST API triggers serialized DAGs only)."""
    airflow_cli("dags", "reserialize")


@dataclass
class UI:
    backend: str
    catalog: CatalogConfig
    ledger_url: str
    server: ApiServer
    admin: str
    viewer: str
    heavy_runs: list[str]

    def page(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.server.url}/compaction{path}{sep}catalog={self.catalog.name}"


def _seed_ledger(url: str, catalog: CatalogConfig) -> list[str]:
    """Health over time of the heavy table from its real snapshots (one sample per snapshot, an hour apart), two runs
    between them, and a failed last run for the broken table."""
    now = dt.datetime.now(dt.timezone.utc)
    identity, table = load_table(catalog, HEAVY)
    snapshots = [s.snapshot_id for s in table.metadata.snapshots]
    runs = []
    with Ledger.open(url) as ledger:
        for i, snapshot_id in enumerate(snapshots):
            at = now - dt.timedelta(hours=len(snapshots) - i)
            state = table_state(table, identity, snapshot_id)
            record_sample(sample_state(state, now=at),
                          "cli", ledger=ledger, now=at)
            if i in (1, 3):
                run_id = ledger.start_run(HEAVY, catalog.name, trigger=RunTrigger.TEST, dry_run=(i == 3),
                                          now=at + dt.timedelta(minutes=20))
                ledger.finish_run(run_id, RunStatus.SUCCEEDED, 0, now=at + dt.timedelta(minutes=22))
                runs.append(run_id)
        failed = ledger.start_run(BROKEN, catalog.name, trigger=RunTrigger.TEST, now=now - dt.timedelta(minutes=30))
        ledger.finish_run(failed, RunStatus.FAILED, 1, error="spark-submit exited 1", now=now - dt.timedelta(minutes=29))
    return runs


#: Ledger backends with the SQLite fleet catalog, and ``rest``: the REST fleet catalog (ledger on SQLite).
LEDGER_BACKENDS = ["sqlite", "postgres"]
WITH_REST = [*LEDGER_BACKENDS, "rest"]


@pytest.fixture(scope="module")
def ui(request: pytest.FixtureRequest, serialized_dag: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[UI]:
    backend = request.param
    catalog: CatalogConfig = request.getfixturevalue("rest_fleet_catalog" if backend == "rest" else "fleet_catalog")
    if backend == "postgres":
        cluster: Any = request.getfixturevalue("postgres_cluster")
        url = str(cluster.sqlalchemy_uri(cluster.create_database()))
    else:
        url = f"sqlite:///{tmp_path_factory.mktemp('ui-ledger') / 'ledger.db'}"
    heavy_runs = _seed_ledger(url, catalog)
    server = ApiServer(env={**catalog_connection_env(catalog), "ICECOMPACT_LEDGER_URL": url,
                            "ICECOMPACT_UI_REFRESH_BUDGET_S": "120"})
    try:
        server.wait_ready()
        yield UI(backend, catalog, url, server, server.token("admin"), server.token("viewer"), heavy_runs)
    finally:
        server.stop()


@pytest.fixture()
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def _shot(browser: Browser, artifacts: Path, name: str) -> None:
    path = artifacts / name
    path.unlink(missing_ok=True)
    data = browser.screenshot(path)
    width, height, colours = png_pixels(data)
    assert width >= 1400 and height >= 600 and len(colours) > 30, f"{name}: a rendered page"


def _dag_runs(ui: UI) -> dict[str, dict[str, Any]]:
    status, body = _request(f"{ui.server.url}/api/v2/dags/{DAG}/dagRuns?limit=100", ui.admin)
    assert status == 200, body
    return {r["dag_run_id"]: r for r in json.loads(body)["dag_runs"]}


# ------------------------------------------------------------------------------------------------ overview
@pytest.mark.parametrize("ui", WITH_REST, indirect=True)
def test_overview_orders_tables_by_need(ui: UI, browser: Browser, artifacts: Path) -> None:
    assert _request(ui.page("/"))[0] == 401  # Airflow's authentication in front of every page
    browser.set_cookie(ui.server.url, "_token", ui.admin)  # logged in as the Airflow UI does it: a session cookie
    assert browser.goto(ui.page("/")) == 200
    rows = browser.eval("[...document.querySelectorAll('#overview tr.table-row')].map(r => ({table: r.dataset.table, "
                        "level: +r.dataset.level, badge: r.querySelector('.badge').textContent, "
                        "decision: (r.querySelector('td.decision') || {}).textContent || '', "
                        "deletes: (r.querySelector('td.deletes') || {}).textContent || '', "
                        "run: r.querySelector('td.last-run').textContent, "
                        "spark: r.querySelectorAll('svg.spark polyline').length}))")
    if ui.backend == "rest":
        # The session's REST catalogs share SeaweedFS's one warehouse: other tests' tables are listed too.
        rows = [r for r in rows if r["table"] in FLEET]
    assert [r["table"] for r in rows] == [BROKEN, HEAVY, CLEAN], rows
    broken, heavy, clean = rows
    assert broken["badge"] == "last run failed" and broken["run"].startswith("failed")
    assert heavy["badge"] == "major compaction due" and heavy["decision"].startswith("MAJOR")
    assert "delete ratio" in heavy["decision"]  # the planner's reason
    assert int(heavy["deletes"].split()[0]) > 0 and heavy["spark"] == 1
    assert heavy["run"].startswith("succeeded (dry run)")  # the most recent run of the table
    assert clean["badge"] == "healthy" and clean["decision"].startswith("NONE") and clean["run"].startswith("never")
    assert broken["level"] > heavy["level"] > clean["level"]
    _shot(browser, artifacts, f"overview-{ui.backend}.png")

    # Sortable: by table name, then back to the default order (by need).
    def listed() -> list[str]:
        tables = browser.eval("[...document.querySelectorAll('#overview tr.table-row')].map(r => r.dataset.table)")
        return [t for t in tables if t in FLEET or ui.backend != "rest"]

    assert browser.click("#overview th a[href*='sort=table']") == 200
    assert listed() == sorted([BROKEN, HEAVY, CLEAN])
    assert browser.click("#overview th a[href*='sort=delete_files']") == 200
    assert listed()[0] == HEAVY

    # The JSON twin: the same order, every table sampled at its current metadata file.
    status, body = _request(ui.page("/api/overview"), ui.viewer)
    overview = json.loads(body)
    tables = [t for t in overview["tables"] if t["table"] in FLEET or ui.backend != "rest"]
    assert status == 200 and [t["table"] for t in tables] == [BROKEN, HEAVY, CLEAN]
    assert all(t["current"] for t in tables)
    assert not FLEET & set(overview["stale"]) if ui.backend == "rest" else overview["stale"] == []
    if ui.backend == "rest":  # no listing query: pointers from the catalog API, cached since the first answer
        assert overview["pointers"]["source"] == "catalog API" and overview["pointers"]["cached"] is True
        assert "tables and metadata pointers read from the catalog API" in browser.dom()
    else:
        assert overview["pointers"] == {**overview["pointers"], "source": "catalog database", "cached": False}
    with Ledger.open(ui.ledger_url) as ledger:
        latest = ledger.latest_health_samples(ui.catalog.name)
    assert (FLEET <= set(latest) if ui.backend == "rest" else set(latest) == FLEET) and latest[CLEAN].source == "ui"


# ------------------------------------------------------------------------------------------------ table page
@pytest.mark.parametrize("ui", WITH_REST, indirect=True)
def test_table_page_chart_and_compact_now(ui: UI, browser: Browser, artifacts: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    browser.set_cookie(ui.server.url, "_token", ui.admin)
    page = ui.page(f"/tables/{HEAVY}")
    assert browser.goto(page) == 200
    chart = browser.eval("(() => { const c = document.querySelector('svg#history-chart'); return c && {"
                         "markers: c.querySelectorAll('line.run-marker').length, "
                         "samples: c.querySelectorAll('circle.sample').length, "
                         "series: [...c.querySelectorAll('polyline')].map(p => p.getAttribute('class')), "
                         "deletes: c.querySelector('polyline.series-delete_files').getAttribute('points')}; })()")
    assert chart is not None, "the health-over-time chart is drawn"
    assert chart["markers"] == len(ui.heavy_runs)
    with Ledger.open(ui.ledger_url) as ledger:
        samples = ledger.health_samples(HEAVY, catalog=ui.catalog.name)
    assert chart["samples"] == len(samples) >= 4  # one per snapshot, and the UI's own inspection
    assert set(chart["series"]) == {"series-data_files", "series-fragment_files", "series-delete_files",
                                    "series-delete_ratio"}
    ys = {float(p.split(",")[1]) for p in chart["deletes"].split()}
    assert len(ys) > 1, "delete files changed over time"
    assert browser.eval("document.querySelectorAll('#health td.partition').length") == 3  # partition health kept
    assert browser.eval("document.querySelector('#decision').textContent").startswith("Planner now")
    _shot(browser, artifacts, f"table-page-{ui.backend}.png")

    # Compact now: the form, as an admin.
    before = set(_dag_runs(ui))
    browser.eval("document.querySelector('#compact-now select[name=mode]').value = 'major';"
                 "document.querySelector('#compact-now input[name=partition_filter]').value = \"ts >= '2024-01-02'\";"
                 "document.querySelector('#compact-now input[name=dry_run]').checked = true; true")
    assert browser.click("#compact-now button[type=submit]") == 200
    flash = browser.eval("document.querySelector('#flash').textContent")
    match = re.search(r"Started DAG run (\S+) of", flash)
    assert match, flash
    dag_run_id = match.group(1)
    runs = _dag_runs(ui)
    assert set(runs) - before == {dag_run_id}
    conf = {"tables": [HEAVY], "catalog": ui.catalog.name, "mode": "major", "partition_filter": "ts >= '2024-01-02'",
            "dry_run": True}
    assert runs[dag_run_id]["conf"] == conf
    assert runs[dag_run_id]["run_type"] == "manual" and "admin" in str(runs[dag_run_id].get("note"))
    # (The Airflow metadata DB is shared by both ledger backends: the other backend's DAG runs may be listed too.)
    pending = browser.eval("[...document.querySelectorAll('#runs tr.pending')].map(r => r.textContent)")
    mine = [p for p in pending if dag_run_id in p]
    assert len(mine) == 1 and "queued (Airflow) (dry run)" in mine[0], pending
    _shot(browser, artifacts, f"compact-now-{ui.backend}.png")

    # The DAG run's own tasks (inspect, plan; a dry run submits nothing) record it in the ledger: the history then
    # shows the ledger's run, linked to the DAG run, and no pending duplicate.
    from icecompact_airflow import tasks

    for key, value in catalog_connection_env(ui.catalog).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", ui.ledger_url)
    inspection = tasks.inspect(HEAVY, conf, echo=lambda _m: None)
    planned = tasks.plan(inspection, conf, run_type="manual", data_interval_start=None, data_interval_end=None,
                         dag_id=DAG, dag_run_id=dag_run_id, echo=lambda _m: None)
    assert browser.goto(page) == 200
    rows = browser.eval("[...document.querySelectorAll('#runs tr')].slice(1).map(r => r.textContent)")
    assert not [p for p in browser.eval("[...document.querySelectorAll('#runs tr.pending')].map(r => r.textContent)")
                if dag_run_id in p]
    mine = [r for r in rows if dag_run_id in r]
    assert len(mine) == 1 and planned["run_id"][:8] in mine[0] and "succeeded (dry run)" in mine[0], rows
    assert browser.eval("document.querySelectorAll('svg#history-chart line.run-marker').length") == \
        len(ui.heavy_runs) + 1


@pytest.mark.parametrize("ui", LEDGER_BACKENDS, indirect=True)
def test_read_only_user_is_refused(ui: UI, browser: Browser, artifacts: Path) -> None:
    browser.set_cookie(ui.server.url, "_token", ui.viewer)
    assert browser.goto(ui.page(f"/tables/{CLEAN}")) == 200  # the viewer may read
    before = set(_dag_runs(ui))
    assert browser.click("#compact-now button[type=submit]") == 403
    flash = browser.eval("document.querySelector('#flash.refused').textContent")
    assert flash.startswith("Refused by Airflow: viewer may read iceberg_compaction but not trigger it"), flash
    _shot(browser, artifacts, f"refused-{ui.backend}.png")
    assert set(_dag_runs(ui)) == before, "no DAG run was created"

    # A post without the page's form token (another site's form) or without credentials never reaches Airflow.
    form = b"mode=major&dry_run=true"
    headers = {"Content-Type": "application/x-www-form-urlencoded"}
    status, body = _request(ui.page(f"/tables/{quote(CLEAN)}/compact"), ui.admin, form, headers)
    assert status == 403 and b"form is stale" in body
    assert _request(ui.page(f"/tables/{quote(CLEAN)}/compact"), None, form, headers)[0] == 401
    assert set(_dag_runs(ui)) == before
