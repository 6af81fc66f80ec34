"""Create test and benchmark tables with Spark DDL in any catalog, REST catalogs on SeaweedFS included.

Spark's ``CREATE TABLE`` sends a REST catalog a schema whose field ids start at 0; SeaweedFS's catalog reads a
partition field's ``source-id`` 0 as missing and answers 400 when the first column is a partition source (e.g.
``bucket(4, id)``). Real catalogs accept it, so the DDL itself is not at fault: for a REST catalog the table is first
created in a local Hadoop staging catalog by the same DDL, and its schema (ids from 1), partition spec and
properties are handed to the REST catalog through Iceberg's Java API (``Catalog.buildTable``). Either way the table
is what the DDL says.

On a REST catalog whose storage is S3, ``write.data.path`` is set to ``<location>/_data``: SeaweedFS's table bucket
refuses any file under ``data/`` that is not ``.parquet``/``.orc``/``.avro``, so v3 deletion vectors (``.puffin``)
could not be written there. Iceberg readers follow the file paths in the manifests, so nothing else changes.
"""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

STAGING_CATALOG = "icecompact_ddl_staging"
DATA_FOLDER = "_data"


def catalog_type(spark: SparkSession, catalog: str) -> str:
    """The ``type`` a Spark Iceberg catalog was registered with (``jdbc``, ``rest``, ...; ``""`` when unset)."""
    return str(spark.conf.get(f"spark.sql.catalog.{catalog}.type", "") or "").lower()


def create_table(
    spark: SparkSession,
    ident: str,
    columns_ddl: str,
    partitioned_by: str,
    properties: Mapping[str, str],
    *,
    replace: bool = False,
) -> None:
    """``CREATE TABLE ident (columns_ddl) USING iceberg [PARTITIONED BY (partitioned_by)] TBLPROPERTIES (...)``.

    ``ident`` is ``catalog.namespace.name`` (already quoted where needed); the DDL parts come from our own code,
    never from user input."""
    catalog, _, rest = ident.partition(".")
    namespace = ident.rsplit(".", 1)[0]
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
    if replace:
        spark.sql(f"DROP TABLE IF EXISTS {ident} PURGE")
    partition_clause = f" PARTITIONED BY ({partitioned_by})" if partitioned_by else ""
    props = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
    tail = f"({columns_ddl}) USING iceberg{partition_clause} TBLPROPERTIES ({props})"
    if catalog_type(spark, catalog.strip("`")) != "rest":
        spark.sql(f"CREATE TABLE {ident} {tail}")
        return
    _create_through_staging(spark, catalog.strip("`"), rest, tail, properties)


def _staging(spark: SparkSession) -> str:
    key = f"spark.sql.catalog.{STAGING_CATALOG}"
    if not spark.conf.get(key, None):
        warehouse = Path(tempfile.mkdtemp(prefix="icecompact-ddl-"))
        spark.conf.set(key, "org.apache.iceberg.spark.SparkCatalog")
        spark.conf.set(f"{key}.type", "hadoop")
        spark.conf.set(f"{key}.warehouse", warehouse.as_uri())
    return STAGING_CATALOG


def _create_through_staging(spark: SparkSession, catalog: str, name: str, tail: str,
                            properties: Mapping[str, str]) -> None:
    from compaction.spark.jvm import jvm

    staging = f"{_staging(spark)}.ddl.t_{uuid.uuid4().hex[:12]}"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {_staging(spark)}.ddl")
    spark.sql(f"CREATE TABLE {staging} {tail}")
    try:
        j = jvm(spark)
        jss = spark._jsparkSession
        staged = j.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(jss, staging)
        target_catalog = j.org.apache.iceberg.spark.Spark3Util.loadIcebergCatalog(jss, catalog)
        parts = [p.strip("`") for p in name.split(".")]
        identifier = j.org.apache.iceberg.catalog.TableIdentifier.parse(".".join(parts))
        props = j.java.util.HashMap()
        for key, value in properties.items():
            props.put(key, value)
        table = (target_catalog.buildTable(identifier, staged.schema()).withPartitionSpec(staged.spec())
                 .withSortOrder(staged.sortOrder()).withProperties(props).create())
        if table.location().startswith(("s3://", "s3a://")) and "write.data.path" not in properties:
            table.updateProperties().set("write.data.path", f"{table.location().rstrip('/')}/{DATA_FOLDER}").commit()
        # Spark caches the catalog's table list; the next statement must see the new table.
        spark.sql(f"REFRESH TABLE {catalog}.{name}")
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {staging}")
