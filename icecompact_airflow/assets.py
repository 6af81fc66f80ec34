"""The Airflow asset of an Iceberg table: ``iceberg://<catalog>/<namespace>.<table>``.

A task that writes a table declares it as an outlet (``outlets=[table_asset("db.events", catalog="lake")]``); while
such a task instance runs it holds a write lease on the table (:mod:`icecompact_airflow.writer_leases`), so no
compaction commit lands under its DML (docs/operations.md "Writers and compaction")."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from compaction.core.errors import ConfigError
from compaction.catalog import validate_catalog_name
from compaction.core.identifiers import parse_table_identifier

TABLE_ASSET_SCHEME = "iceberg"


def table_asset_uri(table: str, *, catalog: str) -> str:
    validate_catalog_name(catalog)
    return f"{TABLE_ASSET_SCHEME}://{catalog}/{parse_table_identifier(table, catalog).dotted}"


def table_asset(table: str, *, catalog: str) -> Any:
    """The ``Asset`` naming ``catalog``'s ``NAMESPACE.TABLE``."""
    from airflow.sdk import Asset

    uri = table_asset_uri(table, catalog=catalog)
    return Asset(name=uri, uri=uri)


def table_of_asset_uri(uri: str) -> tuple[str, str] | None:
    """(catalog, ``NAMESPACE.TABLE``) of a table asset's URI; None for any other asset."""
    parts = urlsplit(uri or "")
    if parts.scheme != TABLE_ASSET_SCHEME or not parts.netloc:
        return None
    try:
        validate_catalog_name(parts.netloc)
        return parts.netloc, parse_table_identifier(parts.path.lstrip("/"), parts.netloc).dotted
    except ConfigError:
        return None
