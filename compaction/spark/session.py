"""One source of truth for how Spark is configured: the in-process SparkSession used by tests and tools, and the
spark-submit command used in production are built from the same :func:`spark_conf` and :func:`jar_paths`.

Jars: the Iceberg Spark runtime from the ``snowpark-connect-deps-iceberg`` wheel plus the companion jar built by
:mod:`compaction.spark.jar_repair`, the REST client's httpclient5 and the AWS SDK v2 for ``S3FileIO`` built by
:mod:`compaction.spark.object_store_jars` (both at install time), plus Debian's JDBC drivers. Users who can reach Maven set
``ICECOMPACT_SPARK_PACKAGES`` (e.g. ``org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0,
org.postgresql:postgresql:42.7.4``) and the bundled jars are not used.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from compaction import settings
from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_PACKAGES_ENV = "ICECOMPACT_SPARK_PACKAGES"
SPARK_MASTER_ENV = "ICECOMPACT_SPARK_MASTER"
SPARK_HAS_AWS_BUNDLE_ENV = "ICECOMPACT_SPARK_HAS_AWS_BUNDLE"
SPARK_MASTER_DEFAULT = "local[2]"
JDBC_DRIVER_JARS = (Path("/usr/share/java/sqlite-jdbc.jar"), Path("/usr/share/java/postgresql.jar"))
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"

# Sane local defaults; every key can be overridden by SparkSettings.extra_conf.
BASE_CONF: Mapping[str, str] = {
    "spark.sql.extensions": ICEBERG_EXTENSIONS,
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "true",
    "spark.log.level": "WARN",
}


@dataclass(frozen=True)
class SparkSettings:
    master: str = SPARK_MASTER_DEFAULT
    app_name: str = "icecompact"
    packages: str | None = None
    extra_conf: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, **overrides: object) -> SparkSettings:
        values: dict[str, object] = {
            "master": os.environ.get(SPARK_MASTER_ENV) or SPARK_MASTER_DEFAULT,
            "packages": os.environ.get(SPARK_PACKAGES_ENV) or None,
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def jar_paths(settings_: SparkSettings) -> list[Path]:
    """Local jars Spark needs: empty when the user chose Maven packages."""
    if settings_.packages:
        return []
    from compaction.spark.jar_repair import ensure_companion_jar, find_runtime_jar
    from compaction.spark.object_store_jars import object_store_jars

    runtime = find_runtime_jar()
    jars = [runtime]
    companion = ensure_companion_jar(settings.cache_dir(), runtime)
    if companion is not None:
        jars.append(companion)
    jars.extend(object_store_jars(settings.cache_dir(), aws_sdk=not provides_aws_bundle()))
    for driver in JDBC_DRIVER_JARS:
        if driver.exists():
            jars.append(driver.resolve())
    return jars


def provides_aws_bundle() -> bool:
    """True when the user's Spark already has Iceberg's AWS bundle (``$SPARK_HOME/jars/iceberg-aws-bundle-*.jar``,
    or ``ICECOMPACT_SPARK_HAS_AWS_BUNDLE=1`` for a cluster whose image has it where this machine cannot see): then
    theirs is used, and our AWS SDK companion is not added (two SDK copies on one class path)."""
    if os.environ.get(SPARK_HAS_AWS_BUNDLE_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    spark_home = os.environ.get("SPARK_HOME")
    return bool(spark_home) and any((Path(spark_home) / "jars").glob("iceberg-aws-bundle-*.jar"))


def spark_conf(settings_: SparkSettings, catalogs: Iterable[CatalogConfig]) -> dict[str, str]:
    """Every Spark conf entry except secrets and jars."""
    conf = dict(BASE_CONF)
    for catalog in catalogs:
        conf.update(catalog.spark_conf())
    if settings_.packages:
        conf["spark.jars.packages"] = settings_.packages
    conf.update(settings_.extra_conf)
    return conf


def _check_java() -> None:
    if not (os.environ.get("JAVA_HOME") or any((Path(p) / "java").exists() for p in os.environ.get("PATH", "").split(os.pathsep))):
        raise ConfigError("java not found: install a Java 17 runtime (apt-get install openjdk-17-jre-headless)")


def build_session(catalogs: Iterable[CatalogConfig], settings_: SparkSettings | None = None) -> SparkSession:
    """Create (or return the active) SparkSession configured for the given catalogs."""
    _check_java()
    settings_ = settings_ or SparkSettings.from_environment()
    catalogs = list(catalogs)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(settings_.master).appName(settings_.app_name)
    conf = spark_conf(settings_, catalogs)
    jars = jar_paths(settings_)
    if jars:
        conf["spark.jars"] = ",".join(str(j) for j in jars)
        # JDBC drivers are looked up through DriverManager from the driver's system class loader.
        conf["spark.driver.extraClassPath"] = os.pathsep.join(str(j) for j in jars)
    for key, value in conf.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    # Secrets are set on the running session, never as builder conf: pyspark passes builder conf to the JVM on its
    # command line (visible in /proc/*/cmdline). Iceberg reads catalog conf lazily, on the catalog's first use.
    for catalog in catalogs:
        for key, value in catalog.spark_secret_conf().items():
            session.conf.set(key, value)
    return session


def register_catalog(spark: SparkSession, catalog: CatalogConfig) -> None:
    """Add a catalog to a running session (Spark reads ``spark.sql.catalog.*`` lazily, on first use)."""
    for key, value in {**catalog.spark_conf(), **catalog.spark_secret_conf()}.items():
        spark.conf.set(key, value)
