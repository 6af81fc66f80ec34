"""Airflow's own REST API, called by the UI plugin *as the logged-in user* ("compact now", DAG runs of a table).

The plugin never decides who may trigger the DAG: it forwards the user's Airflow token (the ``Authorization:
Bearer`` header, else the UI's ``_token`` session cookie) to ``POST /api/v2/dags/iceberg_compaction/dagRuns``, so
Airflow's auth manager decides and a refusal (401/403) is shown to the user as such. The API is reached at
``$ICECOMPACT_AIRFLOW_API_URL`` when set (e.g. ``http://127.0.0.1:8080`` behind a proxy), else at the address the
request came in on.

Forms are protected against cross-site posts by a token bound to the user's Airflow token (HMAC with Airflow's
``[api] secret_key``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import dataclass
from typing import Any, Mapping

from icecompact_airflow import DAG_ID

API_URL_ENV = "ICECOMPACT_AIRFLOW_API_URL"
COOKIE_NAME = "_token"  # airflow.api_fastapi.auth.managers.base_auth_manager.COOKIE_NAME_JWT_TOKEN
TIMEOUT_S = 30.0


def user_token(headers: Mapping[str, str], cookies: Mapping[str, str]) -> str | None:
    """The token Airflow authenticated this request with (the same precedence as Airflow: header, then cookie)."""
    auth = headers.get("authorization") or ""
    scheme, _, value = auth.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    return cookies.get(COOKIE_NAME) or None


def api_base(request_url: str) -> str:
    """Where Airflow's REST API is reached: ``$ICECOMPACT_AIRFLOW_API_URL``, else the request's own origin."""
    import os
    from urllib.parse import urlsplit

    configured = (os.environ.get(API_URL_ENV) or "").strip()
    if configured:
        return configured.rstrip("/")
    parts = urlsplit(request_url)
    return f"{parts.scheme}://{parts.netloc}"


def _secret() -> bytes:
    try:
        from airflow.configuration import conf

        key = conf.get("api", "secret_key", fallback=None) or conf.get("api_auth", "jwt_secret", fallback=None)
    except Exception:  # noqa: BLE001 - no Airflow configuration: a per-process key (forms expire on restart)
        key = None
    return (key or _PROCESS_KEY).encode()


_PROCESS_KEY = hashlib.sha256(__file__.encode() + str(id(object())).encode()).hexdigest()


def form_token(token: str | None) -> str:
    """The anti-forgery value of a form shown to the holder of ``token``."""
    return hmac.new(_secret(), (token or "").encode(), hashlib.sha256).hexdigest()


def check_form_token(token: str | None, value: str | None) -> bool:
    return bool(value) and hmac.compare_digest(form_token(token), str(value))


@dataclass(frozen=True)
class TriggerResult:
    """What Airflow answered to a trigger: ``ok`` with the new ``dag_run_id``, or the HTTP status and detail."""

    ok: bool
    status: int
    dag_run_id: str | None
    detail: str


def _detail(body: bytes) -> str:
    try:
        data = json.loads(body)
    except ValueError:
        return body.decode("utf-8", errors="replace")[:500]
    detail = data.get("detail", data) if isinstance(data, dict) else data
    return detail if isinstance(detail, str) else json.dumps(detail)[:500]


def trigger_dag_run(base: str, token: str | None, conf: Mapping[str, Any], note: str | None = None) -> TriggerResult:
    """``POST /api/v2/dags/<DAG_ID>/dagRuns`` with ``conf``, authenticated as the holder of ``token``."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    body = {"logical_date": None, "conf": dict(conf), "note": note}
    try:
        response = httpx.post(f"{base}/api/v2/dags/{DAG_ID}/dagRuns", json=body, headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as e:
        return TriggerResult(False, 502, None, f"Airflow's API at {base} did not answer: {e}")
    if response.status_code in (200, 201):
        return TriggerResult(True, response.status_code, str(response.json().get("dag_run_id")), "")
    return TriggerResult(False, response.status_code, None, _detail(response.content))


def dag_runs(base: str, token: str | None, limit: int = 50) -> list[dict[str, Any]]:
    """The DAG's most recent runs (newest first) as the user sees them; ``[]`` when Airflow does not answer."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.get(f"{base}/api/v2/dags/{DAG_ID}/dagRuns", headers=headers, timeout=TIMEOUT_S,
                             params={"limit": limit, "order_by": "-run_after"})
    except httpx.HTTPError:
        return []
    if response.status_code != 200:
        return []
    runs = response.json().get("dag_runs", [])
    return [r for r in runs if isinstance(r, dict)]


def runs_for_table(runs: list[dict[str, Any]], table: str, catalog: str, default_catalog: str) -> list[dict[str, Any]]:
    """The DAG runs whose conf names ``table`` explicitly (not by pattern) in ``catalog``."""
    out = []
    for run in runs:
        conf = run.get("conf") or {}
        if not isinstance(conf, dict):
            continue
        tables = conf.get("tables")
        names = [tables] if isinstance(tables, str) else list(tables or [])
        names = [n.strip() for item in names if isinstance(item, str) for n in item.split(",")]
        wanted = conf.get("catalog") or default_catalog
        if table in names and wanted == catalog:
            out.append(run)
    return out
