"""One source of truth for how Spark is configured: the in-process SparkSession used by tests and tools, and the
spark-submit command used in production are built from the same :func:`spark_conf` and :func:`jar_paths`.

Jars: the official Iceberg Spark runtime of the installed Spark line, ``iceberg-aws-bundle`` (the AWS SDK for
``S3FileIO``) and the JDBC drivers, pinned and fetched from Maven Central into the cache at install time
(:mod:`compaction.spark.artifacts`). A Spark whose image already carries Iceberg (``$SPARK_HOME/jars``) gets none of
ours; ``ICECOMPACT_SPARK_PACKAGES`` (e.g. ``org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0,
org.postgresql:postgresql:42.7.14``) hands resolution to Spark's own ``spark.jars.packages`` instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from compaction.spark import artifacts
from compaction.spark.artifacts import MavenJar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SPARK_PACKAGES_ENV = "ICECOMPACT_SPARK_PACKAGES"
SPARK_MASTER_ENV = "ICECOMPACT_SPARK_MASTER"
SPARK_HAS_AWS_BUNDLE_ENV = "ICECOMPACT_SPARK_HAS_AWS_BUNDLE"
SPARK_MASTER_DEFAULT = "local[2]"
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
    # PySpark 4 records the Python call site of every Column operation for its error messages (a conf read and two
    # JVM calls per operation, plus a stack walk): validation builds thousands of partition predicates, which took
    # longer than the rewrite itself. Errors still name the failing operation.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
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
    """Local jars Spark needs: empty when the user chose Maven packages; none of Iceberg's when the Spark image
    carries its own runtime (the JDBC drivers still, when the image lacks them)."""
    if settings_.packages:
        return []
    image_jars = spark_home_jar_names()
    wanted = artifacts.jars_for(artifacts.iceberg_release(), aws_bundle=not provides_aws_bundle())
    return [artifacts.cached_path(jar) for jar in wanted if not _image_has(jar, image_jars)]


def _image_has(jar: MavenJar, image_jars: frozenset[str]) -> bool:
    """Whether a Spark image's jars hold ``jar`` in any version (any Iceberg runtime counts as the runtime)."""
    runtime = "iceberg-spark-runtime-"
    prefix = runtime if jar.artifact.startswith(runtime) else jar.artifact + "-"
    return any(name.startswith(prefix) for name in image_jars)


def spark_home_jar_names() -> frozenset[str]:
    """The jar file names of ``$SPARK_HOME/jars`` (a cluster image's own), empty without ``SPARK_HOME``."""
    spark_home = os.environ.get("SPARK_HOME")
    if not spark_home:
        return frozenset()
    return frozenset(p.name for p in (Path(spark_home) / "jars").glob("*.jar"))


def provides_aws_bundle() -> bool:
    """True when the user's Spark already has Iceberg's AWS bundle (``$SPARK_HOME/jars/iceberg-aws-bundle-*.jar``,
    or ``ICECOMPACT_SPARK_HAS_AWS_BUNDLE=1`` for a cluster whose image has it where this machine cannot see): then
    theirs is used and ours is not added (two SDK copies on one class path)."""
    if os.environ.get(SPARK_HAS_AWS_BUNDLE_ENV, "").strip().lower() in ("1", "true", "yes"):
        return True
    return any(name.startswith("iceberg-aws-bundle-") for name in spark_home_jar_names())


def spark_conf(settings_: SparkSettings, catalogs: Iterable[CatalogConfig]) -> dict[str, str]:
    """Every Spark conf entry except secrets and jars."""
    conf = dict(BASE_CONF)
    for catalog in catalogs:
        check_catalog_classes(catalog)
        catalog.ask_rest_server()  # a REST server that differs shapes the conf (CatalogConfig._spark_properties)
        conf.update(catalog.spark_conf())
    if settings_.packages:
        conf["spark.jars.packages"] = settings_.packages
    conf.update(settings_.extra_conf)
    return conf


def check_catalog_classes(catalog: CatalogConfig) -> None:
    """A Hive catalog runs Iceberg's ``HiveCatalog``, which talks to the metastore with the Hive metastore client of
    Spark's own class path (``hive-metastore-*.jar``: in PySpark's jars and in Spark distributions built with Hive,
    not in Iceberg's runtime): a ``$SPARK_HOME`` without it is refused here, not at the job's first table load."""
    if not catalog.is_hive:
        return
    image_jars = spark_home_jar_names()
    if image_jars and not any(name.startswith("hive-metastore-") for name in image_jars):
        raise ConfigError(f"catalog {catalog.name!r} is a Hive catalog, but the Spark at $SPARK_HOME has no Hive "
                          f"metastore client (no hive-metastore-*.jar in {os.environ.get('SPARK_HOME')}/jars): use "
                          "a Spark distribution built with Hive support")


def _check_java() -> None:
    if not (os.environ.get("JAVA_HOME") or any((Path(p) / "java").exists() for p in os.environ.get("PATH", "").split(os.pathsep))):
        raise ConfigError("java not found: install a Java 17 or 21 runtime (apt-get install openjdk-17-jre-headless)")


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
    check_catalog_classes(catalog)
    catalog.ask_rest_server()
    for key, value in {**catalog.spark_conf(), **catalog.spark_secret_conf()}.items():
        spark.conf.set(key, value)
