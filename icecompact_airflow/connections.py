"""Configuration from Airflow connections, with the platform's embedded defaults.

* Catalog ``NAME``: the Airflow connection ``icecompact_catalog_<NAME>`` when it exists (its ``extra`` JSON holds
  pyiceberg-style properties such as ``{"uri": "postgresql+psycopg2://compactor@db:5432/iceberg",
  "warehouse": "file:///data/wh"}``; its password field is the database password, kept out of ``extra``), else
  pyiceberg's own configuration (``.pyiceberg.yaml``, ``PYICEBERG_CATALOG__*``), else - for the default name - the
  embedded SQLite catalog under ``$ICECOMPACT_HOME``. See :meth:`compaction.catalog.CatalogConfig.resolve`.
* Spark: the connection ``spark_default`` (provider ``spark`` type); when it does not exist, the master is
  ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]`` in client mode (see :mod:`icecompact_airflow.operators`).
"""

from __future__ import annotations

import logging
import os
from typing import Any, Callable

from icecompact_airflow import CATALOG_CONN_PREFIX

log = logging.getLogger(__name__)


def get_connection(conn_id: str) -> Any | None:
    """The Airflow connection ``conn_id``, or ``None`` when it is not defined anywhere (metadata DB, env, secrets).

    Works inside a task (Task SDK) and in the api-server (plugin)."""
    try:
        from airflow.sdk import BaseHook

        return BaseHook.get_connection(conn_id)
    except Exception as e:  # AirflowNotFoundException, or no task context in the api-server
        if type(e).__name__ != "AirflowNotFoundException":
            try:
                from airflow.models.connection import Connection

                return Connection.get_connection_from_secrets(conn_id)
            except Exception:  # noqa: BLE001 - not defined
                return None
        return None


def catalog_conn_id(name: str) -> str:
    return f"{CATALOG_CONN_PREFIX}{name}"


def resolve_catalog(name: str | None, lookup: Callable[[str], Any | None] = get_connection):  # type: ignore[no-untyped-def]
    """The :class:`~compaction.catalog.CatalogConfig` for ``name`` (``None``: ``$ICECOMPACT_CATALOG`` or the
    embedded catalog), from an Airflow connection when one exists."""
    from compaction.catalog import CATALOG_ENV, EMBEDDED_CATALOG_NAME, CatalogConfig, validate_catalog_name

    requested = name or os.environ.get(CATALOG_ENV) or EMBEDDED_CATALOG_NAME
    validate_catalog_name(requested)
    conn = lookup(catalog_conn_id(requested))
    if conn is None:
        return CatalogConfig.resolve(name)
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    props = {str(k): str(v) for k, v in dict(extra or {}).items() if v is not None and not isinstance(v, dict)}
    props.setdefault("type", "sql")
    if getattr(conn, "host", None) and "uri" not in props:
        props["uri"] = str(conn.host)
    if getattr(conn, "login", None):
        props.setdefault("user", str(conn.login))
    if getattr(conn, "password", None):
        props["password"] = str(conn.password)
    from compaction.core.errors import ConfigError

    if "uri" not in props:
        raise ConfigError(f"Airflow connection {catalog_conn_id(requested)!r} defines no catalog uri "
                          f"(put it in the connection's host or in extra as \"uri\")")
    return CatalogConfig(requested, props)


def connection_env(catalog: Any) -> dict[str, str]:
    """``AIRFLOW_CONN_ICECOMPACT_CATALOG_<NAME>`` defining ``catalog`` as an Airflow connection, with the database
    password in the connection's password field (not in the URI, not in extra)."""
    import json

    from sqlalchemy.engine import make_url

    props = dict(catalog.properties)
    url = make_url(props["uri"])
    password = props.pop("password", None) or url.password
    props["uri"] = url.set(password=None).render_as_string(hide_password=False)
    conn: dict[str, Any] = {"conn_type": "generic", "extra": props}
    if password:
        conn["password"] = password
    return {f"AIRFLOW_CONN_ICECOMPACT_CATALOG_{catalog.name.upper()}": json.dumps(conn)}
