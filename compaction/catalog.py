"""Catalog configuration, one source for both engines.

Configuration follows pyiceberg's own conventions: ``.pyiceberg.yaml`` (``$PYICEBERG_HOME``, ``~``, cwd) and
``PYICEBERG_CATALOG__<NAME>__<KEY>`` environment variables, e.g.::

    catalog:
      prod:
        type: sql
        uri: postgresql+psycopg2://compactor@db:5432/iceberg
        warehouse: file:///data/warehouse
        password: ...            # or PYICEBERG_CATALOG__PROD__PASSWORD

      lake:
        type: rest
        uri: https://catalog.example.com/api/catalog
        warehouse: analytics            # a warehouse name (Polaris, Lakekeeper) or s3://bucket
        credential: CLIENT_ID:SECRET    # OAuth2 client credentials (or token: ... for a bearer token)
        s3.endpoint: https://s3.example.com    # S3-compatible storage; s3.* as pyiceberg reads them
        s3.region: us-east-1
        s3.path-style-access: "true"
        s3.access-key-id: ...           # when the catalog vends no credentials
        s3.secret-access-key: ...

The same properties produce the pyiceberg catalog (metadata-only work in Airflow) and the Spark ``SparkCatalog``
conf used inside spark-submit: ``type: sql`` becomes Iceberg's JDBC catalog (both sides use the same catalog name,
because Iceberg's JDBC catalog and pyiceberg's SQL catalog key every row by it); ``type: rest`` becomes Iceberg's
REST catalog with ``S3FileIO`` when the storage is S3 (pyiceberg's ``s3.*`` keys translated to Java's); any other
type (``glue``, ``hive``, ``nessie``, ...) is passed to both engines as it is, untested here. Secrets (database
password, OAuth2 credential, bearer token, S3 secret key, session token) are kept apart from the rest of the Spark
conf so that callers can ship them in a private properties file instead of argv (see
:meth:`CatalogConfig.spark_secret_conf`).

When no catalog is configured, the embedded default is a SQLite catalog plus a local warehouse under
``$ICECOMPACT_HOME`` (single writer; see docs/operations.md on SQLite and concurrent commits).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from compaction import settings
from compaction.core.errors import CatalogError, ConfigError
from compaction.core.redaction import REDACTED, known_secret_parts, redact_text, redact_url_credentials

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

EMBEDDED_CATALOG_NAME = "icecompact"
CATALOG_ENV = "ICECOMPACT_CATALOG"
CATALOG_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
SECRET_KEYS = frozenset({"password", "jdbc.password", "credential", "token", "s3.secret-access-key",
                         "s3.session-token"})
SQL_CATALOG = "sql"
REST_CATALOG = "rest"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
#: pyiceberg property -> Iceberg Java property, where the two differ (FileIO and REST client keys).
JAVA_PROPERTY_NAMES = {"s3.region": "client.region"}
#: pyiceberg-only properties that mean nothing to Iceberg's Java catalogs.
PYICEBERG_ONLY = frozenset({"type", "py-io-impl", "downcast-ns-timestamp-to-us-on-write"})
SPARK_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"


def validate_catalog_name(name: str) -> str:
    if not CATALOG_NAME_PATTERN.match(name or ""):
        raise ConfigError(
            f"invalid catalog name {name!r}: use letters, digits and underscores, starting with a letter"
        )
    return name


@dataclass(frozen=True)
class CatalogConfig:
    """A named catalog and its pyiceberg-style properties."""

    name: str
    properties: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_catalog_name(self.name)

    # Construction ---------------------------------------------------------------------------------------
    @classmethod
    def embedded(cls, home: Path | None = None) -> CatalogConfig:
        root = home or settings.home()
        warehouse = root / "warehouse"
        warehouse.mkdir(parents=True, exist_ok=True)
        return cls(
            EMBEDDED_CATALOG_NAME,
            {"type": "sql", "uri": f"sqlite:///{root / 'catalog.db'}", "warehouse": warehouse.as_uri()},
        )

    @classmethod
    def sqlite(cls, name: str, db_path: Path, warehouse: Path) -> CatalogConfig:
        warehouse.mkdir(parents=True, exist_ok=True)
        return cls(name, {"type": "sql", "uri": f"sqlite:///{db_path.resolve()}", "warehouse": warehouse.resolve().as_uri()})

    @classmethod
    def resolve(cls, name: str | None = None) -> CatalogConfig:
        """Find a catalog by name in pyiceberg's configuration; with no name, ``$ICECOMPACT_CATALOG``, then the
        embedded default. A name that is configured nowhere is an error (never silently the embedded one)."""
        from pyiceberg.utils.config import Config

        requested = name or os.environ.get(CATALOG_ENV)
        if not requested or requested == EMBEDDED_CATALOG_NAME:
            config = Config().get_catalog_config(EMBEDDED_CATALOG_NAME) if requested else None
            if not config:
                return cls.embedded()
            requested = EMBEDDED_CATALOG_NAME
        validate_catalog_name(requested)
        config = Config().get_catalog_config(requested)
        if not config:
            raise CatalogError(
                f"unknown catalog {requested!r}: define it in .pyiceberg.yaml or with "
                f"PYICEBERG_CATALOG__{requested.upper()}__URI (known: {Config().get_known_catalogs() or 'none'})"
            )
        props = {str(k): str(v) for k, v in config.items() if not isinstance(v, dict)}
        return cls(requested, props)

    # pyiceberg side -------------------------------------------------------------------------------------
    @property
    def catalog_type(self) -> str:
        """``sql``, ``rest`` or another pyiceberg catalog type; inferred from the uri as pyiceberg does when unset."""
        explicit = self.properties.get("type")
        if explicit:
            return explicit.lower()
        uri = self.properties.get("uri", "")
        if uri.startswith(("http://", "https://")):
            return REST_CATALOG
        return SQL_CATALOG if uri else ""

    @property
    def is_sql(self) -> bool:
        return self.catalog_type == SQL_CATALOG

    def load(self) -> Catalog:
        """Return the pyiceberg catalog (errors wrapped as CatalogError)."""
        if not self.catalog_type:
            raise ConfigError(f"catalog {self.name!r}: set 'type' (sql, rest, ...) and 'uri'")
        try:
            if self.is_sql:
                from pyiceberg.catalog.sql import SqlCatalog

                return SqlCatalog(self.name, **self._pyiceberg_properties())
            from pyiceberg.catalog import load_catalog

            return load_catalog(self.name, **{**self.properties, "type": self.catalog_type})
        except Exception as e:  # SQLAlchemy/driver/HTTP errors enter here
            raise CatalogError(f"cannot open catalog {self.name!r} at {self.redacted_uri()}: "
                               f"{_redact(str(e), self.properties)}") from e

    def _pyiceberg_properties(self) -> dict[str, str]:
        props = dict(self.properties)
        props.pop("type", None)
        password = props.pop("password", None)
        user = props.pop("user", None)
        if password is not None or user is not None:
            from sqlalchemy.engine import make_url

            url = make_url(props["uri"])
            url = url.set(username=user or url.username, password=password or url.password)
            props["uri"] = url.render_as_string(hide_password=False)
        return props

    # Spark side -----------------------------------------------------------------------------------------
    def _jdbc(self) -> tuple[str, str | None, str | None]:
        """(jdbc url, user, password) for Iceberg's JdbcCatalog."""
        uri = self.properties.get("uri")
        if not uri:
            raise ConfigError(f"catalog {self.name!r}: property 'uri' is required")
        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError

        try:
            url = make_url(uri)
        except ArgumentError as e:
            raise ConfigError(f"catalog {self.name!r}: invalid uri {self.redacted_uri()}") from e
        backend = url.get_backend_name()
        user = self.properties.get("user") or url.username
        password = self.properties.get("password") or url.password
        if backend == "sqlite":
            if not url.database or url.database == ":memory:":
                raise ConfigError(f"catalog {self.name!r}: an in-memory SQLite catalog cannot be shared with Spark")
            return f"jdbc:sqlite:{Path(url.database).resolve()}", None, None
        if backend == "postgresql":
            host = url.host or "localhost"
            port = f":{url.port}" if url.port else ""
            return f"jdbc:postgresql://{host}{port}/{url.database or ''}", user, password
        raise ConfigError(f"catalog {self.name!r}: SQL backend {backend!r} is not supported (sqlite, postgresql)")

    def spark_conf(self) -> dict[str, str]:
        """Spark conf for this catalog, without secrets.

        The catalog's table cache is always off: other writers commit while our jobs run, and a cached instance (kept
        up to ``cache.expiration-interval-ms``) would serve metadata older than the snapshots we commit and validate
        through another instance - Spark's time travel then fails with "Cannot find snapshot with ID"."""
        prefix = f"spark.sql.catalog.{self.name}"
        fresh_metadata = {f"{prefix}.cache-enabled": "false"}
        if not self.is_sql:
            return {f"{prefix}.{k}": v for k, v in self._java_properties().items() if k not in SECRET_KEYS} | {
                prefix: SPARK_CATALOG_CLASS} | fresh_metadata
        jdbc_url, user, _ = self._jdbc()
        conf = {
            prefix: SPARK_CATALOG_CLASS,
            **fresh_metadata,
            f"{prefix}.type": "jdbc",
            f"{prefix}.uri": jdbc_url,
            # pyiceberg's SqlCatalog writes the V1 schema (with iceberg_type); keep Java on the same layout.
            f"{prefix}.jdbc.schema-version": "V1",
        }
        if "warehouse" in self.properties:
            conf[f"{prefix}.warehouse"] = self.properties["warehouse"]
        if user:
            conf[f"{prefix}.jdbc.user"] = user
        return conf

    def spark_secret_conf(self) -> dict[str, str]:
        """Only the secret part of the Spark conf (ship it in a 0600 properties file, never in argv)."""
        prefix = f"spark.sql.catalog.{self.name}"
        if not self.is_sql:
            return {f"{prefix}.{k}": v for k, v in self._java_properties().items() if k in SECRET_KEYS}
        _, _, password = self._jdbc()
        return {f"{prefix}.jdbc.password": password} if password else {}

    def _java_properties(self) -> dict[str, str]:
        """The properties of a non-SQL catalog as Iceberg's Java ``SparkCatalog`` reads them."""
        if not self.properties.get("uri") and self.catalog_type == REST_CATALOG:
            raise ConfigError(f"catalog {self.name!r}: property 'uri' is required")
        props = {JAVA_PROPERTY_NAMES.get(k, k): v for k, v in self.properties.items() if k not in PYICEBERG_ONLY}
        props["type"] = self.catalog_type
        if self.catalog_type == REST_CATALOG:
            # pyiceberg's default token endpoint; Java's relative default is deprecated (and logs so on every start).
            if "credential" in props and "oauth2-server-uri" not in props:
                props["oauth2-server-uri"] = props["uri"].rstrip("/") + "/v1/oauth/tokens"
            if ("credential" in props or "token" in props) and "rest.auth.type" not in props:
                props["rest.auth.type"] = "oauth2"
            if "io-impl" not in props and self._uses_s3():
                props["io-impl"] = S3_FILE_IO
        return props

    def _uses_s3(self) -> bool:
        return any(k.startswith("s3.") for k in self.properties) or self.properties.get("warehouse", "").startswith(
            ("s3://", "s3a://"))

    def redacted_uri(self) -> str:
        return redact_url_credentials(self.properties.get("uri", ""))

    def describe(self) -> dict[str, str]:
        return {k: (REDACTED if k in SECRET_KEYS else (self.redacted_uri() if k == "uri" else v)) for k, v in self.properties.items()}


def _redact(text: str, properties: Mapping[str, str]) -> str:
    """``text`` with every secret value of ``properties`` masked (and whatever else looks like a password)."""
    known = [part for key in SECRET_KEYS if properties.get(key) for part in known_secret_parts(properties[key])]
    return redact_text(text, known)