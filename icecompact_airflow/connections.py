"""Configuration from Airflow connections, with the platform's embedded defaults.

* Catalog ``NAME``: the Airflow connection ``icecompact_catalog_<NAME>`` when it exists, else pyiceberg's own
  configuration (``.pyiceberg.yaml``, ``PYICEBERG_CATALOG__*``), else - for the default name - the embedded SQLite
  catalog under ``$ICECOMPACT_HOME``. See :meth:`compaction.catalog.CatalogConfig.resolve`. The connection's
  ``extra`` JSON holds the pyiceberg properties that are not secret; its login and password fields the secrets:

  - SQL catalog (``type`` ``sql``, the default): ``{"uri": "postgresql+psycopg2://compactor@db:5432/iceberg",
    "warehouse": "file:///data/wh"}``; the password field is the database password.
  - REST catalog (``"type": "rest"``, or an ``http(s)://`` uri): ``{"type": "rest", "uri":
    "https://catalog.example.com/api/catalog", "warehouse": "analytics", "s3.endpoint": ..., "s3.region": ...}``;
    login + password are OAuth2 client credentials (``credential=login:password``), a password alone is a bearer
    ``token``. An S3 secret key the catalog does not vend may sit in extra as ``s3.secret-access-key`` (Airflow
    masks extra values whose key contains "secret" in task logs).
* Spark: the connection ``spark_default`` (provider ``spark`` type); when it does not exist, the master is
  ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]`` in client mode (see :mod:`icecompact_airflow.operators`). The same
  master serves every Spark application a task starts: the per-group spark-submit, the resident executor started
  when none is alive, and the post-hoc check (:func:`icecompact_airflow.hooks.spark_settings`).
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
    from compaction.catalog import (
        CATALOG_ENV,
        EMBEDDED_CATALOG_NAME,
        REST_CATALOG,
        CatalogConfig,
        validate_catalog_name,
    )

    requested = name or os.environ.get(CATALOG_ENV) or EMBEDDED_CATALOG_NAME
    validate_catalog_name(requested)
    conn = lookup(catalog_conn_id(requested))
    if conn is None:
        return CatalogConfig.resolve(name)
    extra = conn.extra_dejson if hasattr(conn, "extra_dejson") else {}
    props = {str(k): str(v) for k, v in dict(extra or {}).items() if v is not None and not isinstance(v, dict)}
    if getattr(conn, "host", None) and "uri" not in props:
        props["uri"] = str(conn.host)
    from compaction.core.errors import ConfigError

    if "uri" not in props:
        raise ConfigError(f"Airflow connection {catalog_conn_id(requested)!r} defines no catalog uri "
                          f"(put it in the connection's host or in extra as \"uri\")")
    if CatalogConfig(requested, props).catalog_type == REST_CATALOG:
        return CatalogConfig(requested, _rest_secrets(props, conn, catalog_conn_id(requested)))
    props.setdefault("type", "sql")
    if getattr(conn, "login", None):
        props.setdefault("user", str(conn.login))
    if getattr(conn, "password", None):
        props["password"] = str(conn.password)
    return CatalogConfig(requested, props)


def _rest_secrets(props: dict[str, str], conn: Any, conn_id: str) -> dict[str, str]:
    """A REST catalog's authentication from the connection's login/password fields: both are OAuth2 client
    credentials (``credential``, exchanged for a token at the catalog's token endpoint), a password alone is a
    bearer ``token``. The fields win over the same property in extra."""
    from compaction.catalog import REST_CATALOG
    from compaction.core.errors import ConfigError

    login, password = getattr(conn, "login", None), getattr(conn, "password", None)
    props = {**props, "type": props.get("type") or REST_CATALOG}
    if login and password:
        props["credential"] = f"{login}:{password}"
    elif password:
        props["token"] = str(password)
    elif login:
        raise ConfigError(f"Airflow connection {conn_id!r}: a login (OAuth2 client id) needs its secret in the "
                          f"password field; for a bearer token, leave the login empty")
    return props


def connection_env(catalog: Any) -> dict[str, str]:
    """``AIRFLOW_CONN_ICECOMPACT_CATALOG_<NAME>`` defining ``catalog`` as an Airflow connection, its secrets in the
    connection's login/password fields (not in the URI, not in extra): a SQL catalog's database password; a REST
    catalog's OAuth2 client credentials (login:password) or bearer token (password). What has no field of its own
    (a REST catalog's S3 secret key) stays in extra."""
    import json

    props = dict(catalog.properties)
    conn: dict[str, Any] = {"conn_type": "generic"}
    if catalog.is_sql:
        from sqlalchemy.engine import make_url

        url = make_url(props["uri"])
        password = props.pop("password", None) or url.password
        # URL.set(password=None) keeps the password (None means "unchanged"); the named tuple's _replace drops it.
        props["uri"] = url._replace(password=None).render_as_string(hide_password=False)
        if password:
            conn["password"] = password
    else:
        credential, token = props.pop("credential", None), props.pop("token", None)
        if credential:
            conn["login"], _, conn["password"] = credential.partition(":")
            if token:  # one password field: a bearer token besides client credentials stays in extra
                props["token"] = token
        elif token:
            conn["password"] = token
        props.setdefault("type", catalog.catalog_type)
    conn["extra"] = props
    return {f"AIRFLOW_CONN_ICECOMPACT_CATALOG_{catalog.name.upper()}": json.dumps(conn)}
