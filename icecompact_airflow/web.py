"""The plugin's FastAPI app (mounted by ``plugins/icecompact_plugin.py`` under ``/compaction``).

Every route requires Airflow's authentication and read access to the ``iceberg_compaction`` DAG, through the
api-server's own dependency (:func:`airflow.api_fastapi.core_api.security.requires_access_dag`: the JWT from the
``Authorization: Bearer`` header or the UI's session cookie, validated by the configured auth manager). Without
a valid token: 401/403.

Pages: ``/`` (tables of the catalog), ``/tables/{table}`` (partition health with an SVG chart, run history with
before/after per partition). JSON: ``/api/tables``, ``/api/tables/{table}/health``, ``/api/tables/{table}/runs``,
``/api/runs/{run_id}``. ``?catalog=NAME`` selects a catalog (default: the DAG's default resolution).
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse

from icecompact_airflow import DAG_ID

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
        return table_health(catalog, table)
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


def create_app() -> FastAPI:
    app = FastAPI(title="icecompact", description=__doc__, dependencies=[_auth()])

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, catalog: str | None = None) -> str:
        from icecompact_airflow.health import render_index

        cat = _catalog(catalog)
        return render_index(cat.name, _tables(cat), _base(request))

    @app.get("/tables/{table}", response_class=HTMLResponse)
    def table_page(table: str, request: Request, catalog: str | None = None) -> str:
        from compaction.ledger import Ledger
        from icecompact_airflow.health import render_table_page, table_history

        cat = _catalog(catalog)
        name = _table(table, cat)
        health = _health(cat, name)
        with Ledger.open() as ledger:
            history = table_history(ledger, name, cat.name)
        return render_table_page(health, history, _base(request))

    @app.get("/api/tables")
    def api_tables(catalog: str | None = None) -> dict[str, Any]:
        cat = _catalog(catalog)
        return {"catalog": cat.name, "tables": _tables(cat)}

    @app.get("/api/tables/{table}/health")
    def api_health(table: str, catalog: str | None = None) -> dict[str, Any]:
        cat = _catalog(catalog)
        return _health(cat, _table(table, cat))

    @app.get("/api/tables/{table}/runs")
    def api_runs(table: str, catalog: str | None = None, limit: int = 20) -> dict[str, Any]:
        from compaction.ledger import Ledger
        from icecompact_airflow.health import table_history

        cat = _catalog(catalog)
        with Ledger.open() as ledger:
            return table_history(ledger, _table(table, cat), cat.name, limit=max(1, min(limit, 500)))

    @app.get("/api/runs/{run_id}")
    def api_run(run_id: str) -> dict[str, Any]:
        from compaction.ledger import Ledger
        from icecompact_airflow.health import run_detail

        with Ledger.open() as ledger:
            detail = run_detail(ledger, run_id)
        if detail is None:
            raise HTTPException(status_code=404, detail=f"unknown run {run_id!r}")
        return detail

    return app
