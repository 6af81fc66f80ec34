"""The plugin's FastAPI app (mounted by ``plugins/icecompact_plugin.py`` under ``/compaction``).

Every route requires Airflow's authentication and read access to the ``iceberg_compaction`` DAG, through the
api-server's own dependency (:func:`airflow.api_fastapi.core_api.security.requires_access_dag`: the JWT from the
``Authorization: Bearer`` header or the UI's session cookie, validated by the configured auth manager). Without
a valid token: 401/403.

Pages: ``/`` (the overview: every table of the catalog with its health, the planner's decision now, its last run
and delete files over time, sortable, most urgent first), ``/tables/{table}`` (health over time with the runs marked,
"compact now", partition health, run history with before/after per partition). ``POST /tables/{table}/compact``
starts a run of the DAG for the table through Airflow's REST API as the logged-in user
(:mod:`icecompact_airflow.airflow_api`): Airflow's permissions decide. JSON: ``/api/overview``, ``/api/tables``,
``/api/tables/{table}/health``, ``/api/tables/{table}/samples``, ``/api/tables/{table}/runs``,
``/api/tables/{table}/maintenance`` (maintenance runs with what each action removed), ``/api/runs/{run_id}``.
The table page also shows the metadata over time (snapshots, metadata file, manifests, bytes referenced; from
the health samples) with the maintenance runs marked, and what maintenance removed.
``?catalog=NAME`` selects a catalog (default: the DAG's default resolution).

Every page reads metadata and the ledger only (never data files); every inspection records a health sample.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import BackgroundTasks, Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from icecompact_airflow import DAG_ID

if TYPE_CHECKING:
    from compaction.ops.fleet import Overview

PREFIX = "/compaction"


def _auth() -> Any:
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return Depends(requires_access_dag("GET", param_dag_id=DAG_ID))


def _catalog(name: str | None) -> Any:
    from compaction.core.errors import CompactionError
    from icecompact_airflow.connections import resolve_catalog

    try:
        return resolve_catalog(name or None)
    except CompactionError as e:
        raise HTTPException(status_code=400, detail=str(e)) from None


def _table(name: str, catalog: Any) -> str:
    from compaction.core.errors import CompactionError
    from compaction.core.identifiers import parse_table_identifier

    try:
        return parse_table_identifier(name, catalog.name).dotted
    except CompactionError as e:
        raise HTTPException(status_code=400, detail=str(e)) from None


def _health(catalog: Any, table: str) -> dict[str, Any]:
    from compaction.core.errors import CatalogError, CompactionError
    from icecompact_airflow.health import table_health

    try:
        return table_health(catalog, table)  # records a health sample
    except CatalogError as e:
        raise HTTPException(status_code=404, detail=str(e)) from None
    except CompactionError as e:
        raise HTTPException(status_code=400, detail=str(e)) from None


def _tables(catalog: Any) -> list[str]:
    from compaction.core.errors import CompactionError

    try:
        loaded = catalog.load()
        return sorted(".".join(i) for ns in loaded.list_namespaces() for i in loaded.list_tables(ns))
    except CompactionError as e:
        raise HTTPException(status_code=502, detail=str(e)) from None
    except Exception as e:  # the catalog database's own errors
        raise HTTPException(status_code=502, detail=f"cannot list the tables of catalog {catalog.name!r}: {e}") from None


def _base(request: Request) -> str:
    return str(request.scope.get("root_path") or PREFIX).rstrip("/")


def _ledger() -> Any:
    from compaction.ledger import Ledger, LedgerError

    try:
        return Ledger.open()
    except LedgerError as e:
        raise HTTPException(status_code=503, detail=str(e)) from None


def _token(request: Request) -> str | None:
    from icecompact_airflow.airflow_api import user_token

    return user_token(request.headers, request.cookies)


def _default_catalog_name() -> str:
    import os

    from compaction.catalog import CATALOG_ENV, EMBEDDED_CATALOG_NAME

    return os.environ.get(CATALOG_ENV) or EMBEDDED_CATALOG_NAME


def _refresh_in_background(catalog: Any, names: list[str]) -> None:
    """Re-inspect the tables the overview showed from an older sample (after the answer was sent)."""
    from compaction.core.errors import CompactionError
    from compaction.ops.fleet import refresh_tables
    from compaction.ledger import Ledger

    try:
        with Ledger.open() as ledger:
            refresh_tables(catalog, names, ledger, source="ui")
    except CompactionError:
        pass


def _table_page(request: Request, table: str, catalog: str | None, flash: tuple[str, str] | None = None,
                status_code: int = 200) -> HTMLResponse:
    import datetime as _dt

    from icecompact_airflow import airflow_api
    from icecompact_airflow.health import maintenance_history, render_table_page, table_history

    cat = _catalog(catalog)
    name = _table(table, cat)
    health = _health(cat, name)
    token = _token(request)
    with _ledger() as ledger:
        history = table_history(ledger, name, cat.name)
        samples = [s.to_dict() for s in ledger.health_samples(name, catalog=cat.name, limit=500)]
        maintenance = maintenance_history(ledger, name, cat.name)
    known = {r["airflow_run_id"] for r in history["runs"] if r.get("airflow_run_id")}
    dag_runs = airflow_api.dag_runs(airflow_api.api_base(str(request.url)), token)
    pending = [r for r in airflow_api.runs_for_table(dag_runs, name, cat.name, _default_catalog_name())
               if r.get("dag_run_id") not in known]
    page = render_table_page(health, history, _base(request), samples=samples, pending=pending,
                             form_token=airflow_api.form_token(token), flash=flash,
                             now=_dt.datetime.now(_dt.timezone.utc), maintenance=maintenance)
    return HTMLResponse(page, status_code=status_code)


def create_app() -> FastAPI:
    from airflow.api_fastapi.core_api.security import get_user

    app = FastAPI(title="icecompact", description=__doc__, dependencies=[_auth()])

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, background: BackgroundTasks, catalog: str | None = None, sort: str = "attention",
              order: str | None = None) -> str:
        from icecompact_airflow.health import render_overview

        cat = _catalog(catalog)
        overview = _overview(cat)
        if overview.stale:
            background.add_task(_refresh_in_background, cat, list(overview.stale))
        descending = None if order not in ("asc", "desc") else order == "desc"
        return render_overview(overview, _base(request), sort, descending)

    @app.get("/api/overview")
    def api_overview(background: BackgroundTasks, catalog: str | None = None) -> dict[str, Any]:
        cat = _catalog(catalog)
        overview = _overview(cat)
        if overview.stale:
            background.add_task(_refresh_in_background, cat, list(overview.stale))
        return overview.to_dict()

    @app.get("/tables/{table}", response_class=HTMLResponse)
    def table_page(table: str, request: Request, catalog: str | None = None,
                   triggered: str | None = None) -> HTMLResponse:
        flash = None
        if triggered:
            flash = ("ok", f"Started DAG run {triggered} of iceberg_compaction for this table (see the run history).")
        return _table_page(request, table, catalog, flash)

    @app.post("/tables/{table}/compact", response_class=HTMLResponse)
    async def compact_now(table: str, request: Request, catalog: str | None = None,
                          user: Any = Depends(get_user)) -> Any:
        from urllib.parse import parse_qs

        from starlette.concurrency import run_in_threadpool

        from icecompact_airflow import airflow_api

        form = {k: v[-1] for k, v in parse_qs((await request.body()).decode("utf-8", errors="replace")).items()}
        token = _token(request)
        if not airflow_api.check_form_token(token, form.get("form_token")):
            raise HTTPException(status_code=403, detail="the form is stale or was not sent from this page: reload it")
        name = str(getattr(user, "username", None) or user.get_name())
        return await run_in_threadpool(_compact_now, request, table, catalog, form, token, name)

    def _compact_now(request: Request, table: str, catalog: str | None, form: dict[str, str],
                     token: str | None, user: str) -> Any:
        from urllib.parse import quote

        from compaction.core.errors import CompactionError
        from icecompact_airflow import DAG_ID, airflow_api
        from icecompact_airflow.params import parse_params

        cat = _catalog(catalog)
        name = _table(table, cat)
        conf: dict[str, Any] = {
            "tables": [name],
            "catalog": cat.name,
            "mode": form.get("mode") or "auto",
            "partition_filter": (form.get("partition_filter") or "").strip() or None,
            "dry_run": form.get("dry_run") in ("true", "on", "1"),
        }
        try:  # the DAG's own validation, and the filter bound to this table: mistakes are shown here, not later
            parse_params(conf)
            if conf["partition_filter"]:
                from compaction.metadata.filters import compile_partition_filter
                from compaction.metadata.inspect import load_table

                identity, loaded = load_table(cat, name)
                compile_partition_filter(loaded, conf["partition_filter"], table_name=identity.dotted)
        except CompactionError as e:
            return _table_page(request, name, cat.name, ("refused", f"Not started: {e}"), 400)
        result = airflow_api.trigger_dag_run(airflow_api.api_base(str(request.url)), token, conf,
                                             note=f"compact now from the icecompact UI by {user}")
        if not result.ok:
            if result.status in (401, 403):
                message = (f"Refused by Airflow: {user} may read {DAG_ID} but not trigger it (HTTP {result.status}: "
                           f"{result.detail}). Ask an Airflow admin for permission to trigger DAG runs of {DAG_ID}.")
            else:
                message = f"Airflow did not start the run (HTTP {result.status}): {result.detail}"
            return _table_page(request, name, cat.name, ("refused", message),
                               result.status if result.status in (401, 403) else 502)
        target = (f"{_base(request)}/tables/{quote(name)}?catalog={quote(cat.name)}"
                  f"&triggered={quote(result.dag_run_id or '')}")
        return RedirectResponse(target, status_code=303)

    @app.get("/api/tables")
    def api_tables(catalog: str | None = None) -> dict[str, Any]:
        cat = _catalog(catalog)
        return {"catalog": cat.name, "tables": _tables(cat)}

    @app.get("/api/tables/{table}/health")
    def api_health(table: str, catalog: str | None = None) -> dict[str, Any]:
        cat = _catalog(catalog)
        return _health(cat, _table(table, cat))

    @app.get("/api/tables/{table}/samples")
    def api_samples(table: str, catalog: str | None = None, limit: int = 500) -> dict[str, Any]:
        cat = _catalog(catalog)
        name = _table(table, cat)
        with _ledger() as ledger:
            samples = ledger.health_samples(name, catalog=cat.name, limit=max(1, min(limit, 5000)))
        return {"table": name, "catalog": cat.name, "samples": [s.to_dict() for s in samples]}

    @app.get("/api/tables/{table}/runs")
    def api_runs(table: str, catalog: str | None = None, limit: int = 20) -> dict[str, Any]:
        from icecompact_airflow.health import table_history

        cat = _catalog(catalog)
        with _ledger() as ledger:
            return table_history(ledger, _table(table, cat), cat.name, limit=max(1, min(limit, 500)))

    @app.get("/api/tables/{table}/maintenance")
    def api_maintenance(table: str, catalog: str | None = None, limit: int = 20) -> dict[str, Any]:
        from icecompact_airflow.health import maintenance_history

        cat = _catalog(catalog)
        name = _table(table, cat)
        with _ledger() as ledger:
            runs = maintenance_history(ledger, name, cat.name, limit=max(1, min(limit, 500)))
        return {"table": name, "catalog": cat.name, "maintenance": runs}

    @app.get("/api/runs/{run_id}")
    def api_run(run_id: str) -> dict[str, Any]:
        from icecompact_airflow.health import run_detail

        with _ledger() as ledger:
            detail = run_detail(ledger, run_id)
        if detail is None:
            raise HTTPException(status_code=404, detail=f"unknown run {run_id!r}")
        return detail

    return app


#: Seconds the overview may spend re-inspecting changed tables before it answers (default 0.5; the rest are shown
#: from their previous sample and re-inspected after the answer).
REFRESH_BUDGET_ENV = "ICECOMPACT_UI_REFRESH_BUDGET_S"
#: Age in seconds beyond which a REST catalog's cached table pointers are read again in the background (default 30).
POINTER_MAX_AGE_ENV = "ICECOMPACT_UI_POINTER_MAX_AGE_S"


def _seconds(variable: str, default: float) -> float:
    import os

    try:
        return float(os.environ.get(variable) or default)
    except ValueError:
        return default


def _overview(catalog: Any) -> Overview:
    from compaction.core.errors import CompactionError
    from compaction.ops.fleet import POINTER_MAX_AGE_S, REFRESH_BUDGET_S, build_overview

    budget = _seconds(REFRESH_BUDGET_ENV, REFRESH_BUDGET_S)
    with _ledger() as ledger:
        try:
            return build_overview(catalog, ledger, budget_s=budget, source="ui",
                                  pointer_max_age_s=_seconds(POINTER_MAX_AGE_ENV, POINTER_MAX_AGE_S))
        except CompactionError as e:
            raise HTTPException(status_code=502, detail=str(e)) from None
