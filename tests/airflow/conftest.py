"""Real Airflow for the DAG and plugin tests (environment set by af_support, imported first)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import af_support  # noqa: F401  (sets AIRFLOW_HOME etc. before anything imports airflow)
import pytest
from af_support import AIRFLOW_HOME, ARTIFACTS, airflow_cli, catalog_connection_env


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """The metadata DB migrated once per session, and the Spark pool."""
    airflow_cli("db", "migrate")
    airflow_cli("pools", "set", "icecompact_spark", "4", "icecompact Spark jobs")
    return AIRFLOW_HOME


@pytest.fixture()
def catalog_conn(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Register a catalog as an Airflow connection (AIRFLOW_CONN_ICECOMPACT_CATALOG_<NAME>) for one test."""

    def register(catalog: Any) -> None:
        for key, value in catalog_connection_env(catalog).items():
            monkeypatch.setenv(key, value)

    return register


@pytest.fixture(scope="session")
def artifacts() -> Iterator[Path]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield ARTIFACTS
