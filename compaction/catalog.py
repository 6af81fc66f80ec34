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
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping

from compaction import settings
from compaction.core.errors import CatalogError, ConfigError
from compaction.core.redaction import REDACTED, is_secret_key, known_secret_parts, redact_text, redact_url_credentials

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

EMBEDDED_CATALOG_NAME = "icecompact"
CATALOG_ENV = "ICECOMPACT_CATALOG"
CATALOG_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
SECRET_KEYS = frozenset({"password", "jdbc.password", "credential", "token", "s3.secret-access-key",
                         "s3.session-token"})
SQL_CATALOG = "sql"
REST_CATALOG = "rest"
HIVE_CATALOG = "hive"
S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"
#: pyiceberg property -> Iceberg Java property, where the two differ (FileIO and REST client keys).
JAVA_PROPERTY_NAMES = {"s3.region": "client.region"}
#: pyiceberg-only properties that mean nothing to Iceberg's Java catalogs.
PYICEBERG_ONLY = frozenset({"type", "py-io-impl", "downcast-ns-timestamp-to-us-on-write"})
#: pyiceberg's own keys of a Hive catalog (its Thrift client's user and Kerberos settings, its lock polling, its Hive 2
#: column types): Iceberg's Java HiveCatalog reads its counterparts from the Hadoop conf (``hadoop.*`` keys of the
#: catalog, e.g. ``hadoop.iceberg.hive.lock-timeout-ms``), under other names and units.
PYICEBERG_ONLY_HIVE = frozenset({"ugi", "hive.hive2-compatible", "hive.kerberos-authentication",
                                 "hive.kerberos-service-name", "lock-check-min-wait-time", "lock-check-max-wait-time",
                                 "lock-check-retries"})
#: pyiceberg writes a ``timestamptz`` column into the metastore as ``timestamp with local time zone``, a type Hive 2
#: metastores refuse in every commit ("type expected at the position 0"); Iceberg's Java HiveCatalog on Spark's Hive 2.3
#: client writes ``timestamp``. On by default, so that both engines write the same HMS columns on any metastore.
HIVE2_COMPATIBLE = "hive.hive2-compatible"
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
        """``sql``, ``rest``, ``hive`` or another pyiceberg catalog type; inferred from the uri as pyiceberg does when
        unset (``http(s)://``: REST, ``thrift://``: Hive, anything else: SQL)."""
        explicit = self.properties.get("type")
        if explicit:
            return explicit.lower()
        uri = self.properties.get("uri", "")
        if uri.startswith(("http://", "https://")):
            return REST_CATALOG
        if uri.startswith("thrift://"):
            return HIVE_CATALOG
        return SQL_CATALOG if uri else ""

    @property
    def is_sql(self) -> bool:
        return self.catalog_type == SQL_CATALOG

    @property
    def is_hive(self) -> bool:
        return self.catalog_type == HIVE_CATALOG

    def load(self) -> Catalog:
        """Return the pyiceberg catalog (errors wrapped as CatalogError)."""
        if not self.catalog_type:
            raise ConfigError(f"catalog {self.name!r}: set 'type' (sql, rest, ...) and 'uri'")
        if self.is_hive:
            self._check_hive_uri()
            try:
                import thrift  # noqa: F401  (pyiceberg's 'hive' extra)
            except ImportError:
                raise ConfigError(f"catalog {self.name!r}: a Hive catalog needs the thrift package "
                                  "(pip install 'pyiceberg[hive]')") from None
        try:
            if self.is_sql:
                from pyiceberg.catalog.sql import SqlCatalog

                return SqlCatalog(self.name, **self._pyiceberg_properties())
            from pyiceberg.catalog import load_catalog

            props = {**self.properties, "type": self.catalog_type}
            if self.is_hive:
                props.setdefault(HIVE2_COMPATIBLE, "true")
            return load_catalog(self.name, **props)
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
            return {f"{prefix}.{k}": v for k, v in self._spark_properties().items() if not _java_secret(k)} | {
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
            return {f"{prefix}.{k}": v for k, v in self._spark_properties().items() if _java_secret(k)}
        _, _, password = self._jdbc()
        return {f"{prefix}.jdbc.password": password} if password else {}

    def _java_properties(self) -> dict[str, str]:
        """The properties of a non-SQL catalog as Iceberg's Java ``SparkCatalog`` reads them.

        Hive: ``uri`` (the metastore's ``thrift://host:port``, comma-separated for several) is required - Iceberg's
        Java HiveCatalog without one would silently start an embedded metastore inside every Spark driver; Java
        sets it as ``hive.metastore.uris`` and ``warehouse`` as ``hive.metastore.warehouse.dir``, which only a
        namespace created through Spark uses (a table goes under its database's location, as the metastore
        reports it, on both engines). pyiceberg's own keys (:data:`PYICEBERG_ONLY_HIVE`) are left out."""
        if not self.properties.get("uri") and self.catalog_type == REST_CATALOG:
            raise ConfigError(f"catalog {self.name!r}: property 'uri' is required")
        hive = self.is_hive
        if hive:
            self._check_hive_uri()
        props = {JAVA_PROPERTY_NAMES.get(k, k): v for k, v in self.properties.items()
                 if k not in PYICEBERG_ONLY and not (hive and k in PYICEBERG_ONLY_HIVE)}
        props["type"] = self.catalog_type
        if self.catalog_type == REST_CATALOG:
            # pyiceberg's default token endpoint; Java's relative default is deprecated (and logs so on every start).
            if "credential" in props and "oauth2-server-uri" not in props:
                props["oauth2-server-uri"] = props["uri"].rstrip("/") + "/v1/oauth/tokens"
            if ("credential" in props or "token" in props) and "rest.auth.type" not in props:
                props["rest.auth.type"] = "oauth2"
            if "io-impl" not in props and self._uses_s3():
                props["io-impl"] = S3_FILE_IO
        if hive and "io-impl" not in props and self._uses_s3():
            # Spark has no Hadoop S3 file system of its own (S3A is not in its jars): Iceberg's S3FileIO, as for REST.
            props["io-impl"] = S3_FILE_IO
        return props

    def _check_hive_uri(self) -> None:
        uris = [u.strip() for u in self.properties.get("uri", "").split(",") if u.strip()]
        if not uris:
            raise ConfigError(f"catalog {self.name!r}: property 'uri' is required (thrift://metastore-host:9083)")
        bad = [u for u in uris if not u.startswith("thrift://")]
        if bad:
            raise ConfigError(f"catalog {self.name!r}: a Hive metastore uri is thrift://host:port, not "
                              f"{redact_url_credentials(bad[0])!r}")

    def _uses_s3(self) -> bool:
        return any(k.startswith("s3.") for k in self.properties) or self.properties.get("warehouse", "").startswith(
            ("s3://", "s3a://"))

    # REST servers that differ ------------------------------------------------------------------------------
    def ask_rest_server(self) -> RestServer | None:
        """What this catalog's REST server is, from its config answer (``GET /v1/config``, defaults and overrides
        merged as clients merge them), read through pyiceberg so that the catalog's auth applies; remembered for the
        process (per catalog definition), so that :meth:`spark_conf` and :meth:`spark_secret_conf` follow what that
        server needs (:meth:`_spark_properties`). ``None`` for a catalog that is not REST or a server that does not
        answer. Host side only: the session builder and the spark-submit conf (compaction.spark.session) call it."""
        if self.catalog_type != REST_CATALOG:
            return None
        key = self._server_key()
        if key not in _REST_SERVERS:
            try:
                answer = {str(k): str(v) for k, v in self.load().properties.items()}
            except (CatalogError, ConfigError):
                return None
            _REST_SERVERS[key] = RestServer.from_config(answer)
        return _REST_SERVERS[key]

    def _server_key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted((str(k), str(v)) for k, v in self.properties.items()))

    def _spark_properties(self) -> dict[str, str]:
        """:meth:`_java_properties`; on a Nessie server, its own API for Spark (:func:`_nessie_spark_properties`)."""
        props = self._java_properties()
        server = _REST_SERVERS.get(self._server_key()) if self.catalog_type == REST_CATALOG else None
        if server is not None and server.kind == NESSIE_SERVER:
            return _nessie_spark_properties(self.name, props, server.config)
        return props

    def redacted_uri(self) -> str:
        return redact_url_credentials(self.properties.get("uri", ""))

    def describe(self) -> dict[str, str]:
        """The properties with every secret masked: what logs, errors and reprs show."""
        return {k: (REDACTED if k in SECRET_KEYS or is_secret_key(k) else (self.redacted_uri() if k == "uri" else v))
                for k, v in self.properties.items()}

    def __repr__(self) -> str:
        # A catalog lands in tracebacks, pytest failure reports and Airflow logs: never with its secrets.
        return f"CatalogConfig(name={self.name!r}, properties={self.describe()!r})"


def _redact(text: str, properties: Mapping[str, str]) -> str:
    """``text`` with every secret value of ``properties`` masked (and whatever else looks like a password)."""
    known = [part for key in SECRET_KEYS if properties.get(key) for part in known_secret_parts(properties[key])]
    return redact_text(text, known)


# REST servers that differ (docs/catalogs.md, "Tested catalog servers") -----------------------------------------------
#: Nessie's config answer carries this override: the server is Nessie (its IcebergConfigurer).
NESSIE_MARKER = "nessie.is-nessie-catalog"
NESSIE_SERVER = "nessie"
NESSIE_CATALOG_IMPL = "org.apache.iceberg.nessie.NessieCatalog"
#: Secret keys of the Java side that have no pyiceberg counterpart (Nessie's own client's auth).
JAVA_SECRET_KEYS = frozenset({"authentication.token", "authentication.oauth2.client-secret"})
#: REST client keys that mean nothing to Nessie's own client.
_REST_ONLY = frozenset({"type", "uri", "warehouse", "prefix", "credential", "token", "scope", "oauth2-server-uri",
                        "rest.auth.type"})


#: Servers asked (:meth:`CatalogConfig.ask_rest_server`), by catalog definition.
_REST_SERVERS: dict[tuple[str, tuple[tuple[str, str], ...]], RestServer] = {}


def _java_secret(key: str) -> bool:
    return key in SECRET_KEYS or key in JAVA_SECRET_KEYS


@dataclass(frozen=True)
class RestServer:
    """What a REST catalog's server said of itself: its kind (``nessie``, or ``""`` for any other) and its config
    answer."""

    kind: str
    config: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, answer: Mapping[str, str]) -> RestServer:
        nessie = str(answer.get(NESSIE_MARKER, "")).strip().lower() == "true"
        return cls(NESSIE_SERVER if nessie else "", dict(answer))


def _nessie_spark_properties(name: str, props: Mapping[str, str], answer: Mapping[str, str]) -> dict[str, str]:
    """Spark's catalog on a Nessie server: Iceberg's ``NessieCatalog`` on Nessie's own API (``<core-base-uri>v2``),
    the branch and warehouse location Nessie's config answer names, the FileIO keys as for REST.

    Why not its Iceberg REST API: Nessie renders every table's metadata from its own model, and that model keeps the
    *current snapshot only* (history lives in Nessie's commits). After our commit the REST client's table knows our
    snapshot and nothing before it, while a compaction job looks up its base snapshot (sequence numbers, the parent
    its validation compares with, the ancestry that finds its own commit). Through Nessie's API the client writes
    the metadata file itself and keeps the snapshot history Iceberg keeps; both APIs serve the same tables (one
    content key per table on the branch), so the host side (pyiceberg: inspect, plan, the UI) stays on REST."""
    core = answer.get("nessie.core-base-uri")
    location = answer.get("warehouse")
    if not core or not location:
        raise ConfigError(f"catalog {name!r}: the Nessie server's config answer names no "
                          f"{'nessie.core-base-uri' if not core else 'warehouse location'}")
    out = {k: v for k, v in props.items() if k not in _REST_ONLY}
    out["catalog-impl"] = NESSIE_CATALOG_IMPL
    out["uri"] = core.rstrip("/") + "/v2"
    prefix = urllib.parse.unquote(answer.get("prefix", ""))
    out["ref"] = prefix.split("|", 1)[0] or answer.get("nessie.default-branch.name") or "main"
    out["warehouse"] = location
    if "io-impl" not in out and answer.get("io-impl"):
        out["io-impl"] = answer["io-impl"]
    if "client.region" not in out and answer.get("client.region"):
        out["client.region"] = answer["client.region"]
    if props.get("token"):
        out["authentication.type"] = "BEARER"
        out["authentication.token"] = props["token"]
    elif props.get("credential"):
        client_id, _, secret = props["credential"].partition(":")
        out["authentication.type"] = "OAUTH2"
        out["authentication.oauth2.token-endpoint"] = props.get("oauth2-server-uri") or ""
        out["authentication.oauth2.client-id"] = client_id
        out["authentication.oauth2.client-secret"] = secret
        if props.get("scope"):
            out["authentication.oauth2.client-scopes"] = props["scope"]
    return out
