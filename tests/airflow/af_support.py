"""Shared set-up of the Airflow tests: its own AIRFLOW_HOME, SQLite metadata DB, the repo's dags/ and plugins/
folders, simple auth manager users. Configured at import (by conftest.py), before anything imports airflow."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
AIRFLOW_HOME = Path(tempfile.mkdtemp(prefix="icecompact-airflow-"))
AIRFLOW_ENV = {
    "AIRFLOW_HOME": str(AIRFLOW_HOME),
    "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
    "AIRFLOW__CORE__PLUGINS_FOLDER": str(REPO / "plugins"),
    "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
    "AIRFLOW__CORE__PARALLELISM": "2",
    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{AIRFLOW_HOME / 'airflow.db'}",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer",
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(AIRFLOW_HOME / "passwords.json"),
    "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
    "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex,
    "AIRFLOW__API__SECRET_KEY": uuid.uuid4().hex,
    "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
    "ICECOMPACT_DAG_SCHEDULE": "@daily",
}
PASSWORDS = {"admin": "admin-" + uuid.uuid4().hex[:8], "viewer": "viewer-" + uuid.uuid4().hex[:8]}
os.environ.update(AIRFLOW_ENV)
(AIRFLOW_HOME / "passwords.json").write_text(json.dumps(PASSWORDS))
os.environ.pop("AIRFLOW_CONN_SPARK_DEFAULT", None)  # the DAG's embedded default Spark master is tested
ARTIFACTS = Path(os.environ.get("ICECOMPACT_TEST_ARTIFACTS") or REPO / "tests" / "artifacts")


def airflow_cli(*args: str, check: bool = True, timeout: float = 600, env: dict[str, str] | None = None,
                ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(Path(sys.executable).with_name("airflow")), *args], capture_output=True, text=True,
                          timeout=timeout, check=check, env={**os.environ, **(env or {})})

def catalog_connection_env(catalog: Any) -> dict[str, str]:
    """``AIRFLOW_CONN_ICECOMPACT_CATALOG_<NAME>`` defining ``catalog`` as an Airflow connection, with the database
    password in the connection's password field (not in the URI, not in extra)."""
    from sqlalchemy.engine import make_url

    props = dict(catalog.properties)
    url = make_url(props["uri"])
    password = props.pop("password", None) or url.password
    props["uri"] = url.set(password=None).render_as_string(hide_password=False)
    conn: dict[str, Any] = {"conn_type": "generic", "extra": props}
    if password:
        conn["password"] = password
    return {f"AIRFLOW_CONN_ICECOMPACT_CATALOG_{catalog.name.upper()}": json.dumps(conn)}


def fresh_dag() -> Any:
    """A freshly parsed DAG object (a DAG reused after an empty mapping would skip mapped tasks)."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags"))
    assert not bag.import_errors, bag.import_errors
    return bag.get_dag("iceberg_compaction")

def task_states(dag_run: Any) -> dict[tuple[str, int], str]:
    return {(ti.task_id, ti.map_index): str(getattr(ti.state, "value", ti.state)) for ti in dag_run.get_task_instances()}
