"""Foundation: the repaired Iceberg jar, catalog configuration and Spark <-> pyiceberg interop."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pyarrow as pa
import pytest

from compaction.catalog import EMBEDDED_CATALOG_NAME, CatalogConfig
from compaction.core.errors import CatalogError, ConfigError
from compaction.spark import jar_repair
from compaction.spark.session import SparkSettings, jar_paths, spark_conf


def test_companion_jar_relocates_jackson(tmp_path: Path) -> None:
    runtime = jar_repair.find_runtime_jar()
    assert jar_repair.needs_repair(runtime), "the bundled runtime is expected to lack relocated Jackson"
    out = tmp_path / "companion.jar"
    written = jar_repair.build_companion_jar(runtime, out)
    assert written > 100
    with zipfile.ZipFile(out) as zf:
        names = set(zf.namelist())
        builder = zf.read(jar_repair.TARGET_PREFIX + "core/JsonFactoryBuilder.class")
    assert not any(n.startswith(jar_repair.SOURCE_PREFIX) for n in names)
    # No constant may still point at the parquet-shaded package, and the class name must be the new one.
    assert b"parquet/shaded" not in builder
    assert (jar_repair.TARGET_PREFIX + "core/JsonFactoryBuilder").encode() in builder


def test_relocate_class_rejects_garbage() -> None:
    with pytest.raises(jar_repair.JarRepairError):
        jar_repair.relocate_class(b"not a class file")


def test_companion_jar_is_cached(tmp_path: Path) -> None:
    first = jar_repair.ensure_companion_jar(tmp_path)
    assert first is not None and first.exists()
    mtime = first.stat().st_mtime_ns
    assert jar_repair.ensure_companion_jar(tmp_path) == first
    assert first.stat().st_mtime_ns == mtime


def test_spark_commits_iceberg_metadata_with_repaired_jar(spark, sqlite_catalog: CatalogConfig) -> None:
    name = sqlite_catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.db")
    spark.sql(f"CREATE TABLE {name}.db.t (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {name}.db.t VALUES (1, 'a'), (2, 'b')")
    table = sqlite_catalog.load().load_table("db.t")
    assert table.metadata.format_version == 2
    assert len(table.metadata.snapshots) == 1
    assert Path(table.metadata_location.removeprefix("file:")).exists()


def test_without_companion_jar_metadata_write_fails(tmp_path: Path) -> None:
    """The bug the repair exists for: with the bare runtime jar, the first metadata write fails."""
    runtime = jar_repair.find_runtime_jar()
    script = textwrap.dedent(
        f"""
        from pyspark.sql import SparkSession
        s = (SparkSession.builder.master("local[1]")
             .config("spark.jars", {str(runtime)!r})
             .config("spark.ui.enabled", "false")
             .config("spark.sql.catalog.h", "org.apache.iceberg.spark.SparkCatalog")
             .config("spark.sql.catalog.h.type", "hadoop")
             .config("spark.sql.catalog.h.warehouse", {(tmp_path / 'wh').as_uri()!r})
             .getOrCreate())
        s.sql("CREATE TABLE h.db.t (id BIGINT) USING iceberg")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert proc.returncode != 0
    assert "JsonFactoryBuilder" in proc.stderr or "fasterxml/jackson" in proc.stderr


def test_spark_table_is_loaded_by_pyiceberg_and_back(spark, any_catalog: CatalogConfig) -> None:
    name = any_catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.spark_ns")
    spark.sql(
        f"CREATE TABLE {name}.spark_ns.events (id BIGINT, region STRING) USING iceberg PARTITIONED BY (region) "
        "TBLPROPERTIES ('format-version'='2', 'write.delete.mode'='merge-on-read')"
    )
    spark.sql(f"INSERT INTO {name}.spark_ns.events VALUES (1, 'EU'), (2, 'US'), (3, 'EU')")
    spark.sql(f"DELETE FROM {name}.spark_ns.events WHERE id = 1")

    catalog = any_catalog.load()
    table = catalog.load_table("spark_ns.events")
    rows = sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": 2, "region": "US"}, {"id": 3, "region": "EU"}]

    catalog.create_namespace("py_ns")
    created = catalog.create_table("py_ns.items", schema=pa.schema([pa.field("k", pa.int64()), pa.field("s", pa.string())]))
    created.append(pa.table({"k": [10, 20, 30], "s": ["x", None, "z"]}))
    got = spark.sql(f"SELECT k, s FROM {name}.py_ns.items ORDER BY k").collect()
    assert [(r.k, r.s) for r in got] == [(10, "x"), (20, None), (30, "z")]
    spark.sql(f"INSERT INTO {name}.py_ns.items VALUES (40, 'w')")
    assert len(catalog.load_table("py_ns.items").scan().to_arrow()) == 4


def test_catalog_from_pyiceberg_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__URI", "postgresql+psycopg2://alice:s3cret@db.example:6543/ice")
    monkeypatch.setenv("PYICEBERG_CATALOG__PROD__WAREHOUSE", "file:///data/wh")
    cfg = CatalogConfig.resolve("prod")
    conf = spark_conf(SparkSettings(), [cfg])
    assert conf["spark.sql.catalog.prod"] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf["spark.sql.catalog.prod.uri"] == "jdbc:postgresql://db.example:6543/ice"
    assert conf["spark.sql.catalog.prod.jdbc.user"] == "alice"
    assert conf["spark.sql.catalog.prod.warehouse"] == "file:///data/wh"
    assert not any("s3cret" in v for v in conf.values()), "passwords must never be in the public Spark conf"
    assert cfg.spark_secret_conf() == {"spark.sql.catalog.prod.jdbc.password": "s3cret"}
    assert "s3cret" not in str(cfg.describe())


def test_password_property_is_kept_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = CatalogConfig("prod", {"type": "sql", "uri": "postgresql+psycopg2://bob@h:5432/d", "password": "pw1"})
    assert cfg.spark_secret_conf() == {"spark.sql.catalog.prod.jdbc.password": "pw1"}
    assert "pw1" not in str(spark_conf(SparkSettings(), [cfg]))
    assert cfg.describe()["password"] == "***"


def test_embedded_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ICECOMPACT_HOME", str(tmp_path / "h"))
    monkeypatch.delenv("ICECOMPACT_CATALOG", raising=False)
    cfg = CatalogConfig.resolve(None)
    assert cfg.name == EMBEDDED_CATALOG_NAME
    assert cfg.properties["uri"] == f"sqlite:///{tmp_path / 'h' / 'catalog.db'}"
    conf = cfg.spark_conf()
    assert conf[f"spark.sql.catalog.{EMBEDDED_CATALOG_NAME}.uri"] == f"jdbc:sqlite:{tmp_path / 'h' / 'catalog.db'}"


def test_catalog_errors() -> None:
    with pytest.raises(CatalogError, match="unknown catalog 'nowhere'"):
        CatalogConfig.resolve("nowhere")
    with pytest.raises(ConfigError, match="invalid catalog name"):
        CatalogConfig("bad-name; drop", {})
    with pytest.raises(ConfigError, match="'uri' is required"):
        CatalogConfig("r", {"type": "rest"}).spark_conf()
    with pytest.raises(ConfigError, match="set 'type'"):
        CatalogConfig("n", {}).load()
    with pytest.raises(ConfigError, match="in-memory"):
        CatalogConfig("m", {"type": "sql", "uri": "sqlite:///:memory:"}).spark_conf()


def test_maven_packages_replace_bundled_jars() -> None:
    settings = SparkSettings(packages="org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.0")
    assert jar_paths(settings) == []
    assert spark_conf(settings, [])["spark.jars.packages"].startswith("org.apache.iceberg:")
    bundled = jar_paths(SparkSettings())
    assert any("iceberg-spark-runtime" in p.name for p in bundled)
    assert any("companion" in p.name for p in bundled)
    # The REST client's httpclient5 and the AWS SDK for S3FileIO, built by the install.
    assert any("httpclient5" in p.name for p in bundled) and any("awssdk" in p.name for p in bundled)


def test_users_aws_bundle_replaces_ours(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A Spark that has Iceberg's AWS bundle in $SPARK_HOME/jars gets no second AWS SDK from us."""
    (tmp_path / "jars").mkdir()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    assert any("awssdk" in p.name for p in jar_paths(SparkSettings()))
    (tmp_path / "jars" / "iceberg-aws-bundle-1.10.0.jar").write_bytes(b"")
    jars = jar_paths(SparkSettings())
    assert not any("awssdk" in p.name for p in jars)
    assert any("httpclient5" in p.name for p in jars)  # the runtime jar's own gap, which the bundle does not fill
    assert any("iceberg-spark-runtime" in p.name for p in jars)


def test_rest_catalog_spark_conf_keeps_secrets_apart() -> None:
    """A REST + S3 catalog written the pyiceberg way yields Iceberg's Java REST catalog with S3FileIO; the OAuth2
    credential and the S3 secret key go only to the secret part (the properties file), never to argv."""
    cfg = CatalogConfig("lake", {
        "type": "rest", "uri": "http://cat:8181", "warehouse": "s3://wh", "credential": "client:s3cr3t-value",
        "s3.endpoint": "http://s3:9000", "s3.region": "eu-west-1", "s3.access-key-id": "AKID",
        "s3.secret-access-key": "sk-s3cr3t", "s3.path-style-access": "true", "prefix": "p1",
    })
    public = cfg.spark_conf()
    secret = cfg.spark_secret_conf()
    p = "spark.sql.catalog.lake"
    assert public[p] == "org.apache.iceberg.spark.SparkCatalog"
    assert public[f"{p}.type"] == "rest"
    assert public[f"{p}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert public[f"{p}.client.region"] == "eu-west-1"  # pyiceberg's s3.region is Java's client.region
    assert public[f"{p}.oauth2-server-uri"] == "http://cat:8181/v1/oauth/tokens"
    assert public[f"{p}.prefix"] == "p1" and public[f"{p}.s3.endpoint"] == "http://s3:9000"
    assert "s3cr3t" not in str(public) and "sk-s3cr3t" not in str(public)
    assert secret == {f"{p}.credential": "client:s3cr3t-value", f"{p}.s3.secret-access-key": "sk-s3cr3t"}
    assert CatalogConfig("inferred", {"uri": "https://cat/api"}).catalog_type == "rest"
    # Types whose servers cannot run here are passed through as they are (documented as untested).
    glue = CatalogConfig("g", {"type": "glue", "warehouse": "s3://b/wh"}).spark_conf()
    assert glue["spark.sql.catalog.g.type"] == "glue"


def test_object_store_companions_fill_the_runtime_gaps() -> None:
    """The install-built companions hold httpclient5 where the runtime's REST client looks for it, and the AWS SDK
    under its own package, with no reference left to the wheel's relocation prefix."""
    import zipfile

    from compaction.settings import cache_dir
    from compaction.spark.object_store_jars import AWSSDK_JAR, HTTPCLIENT5_JAR

    runtime = jar_repair.find_runtime_jar()
    with zipfile.ZipFile(runtime) as zf:
        rest_client = zf.read("org/apache/iceberg/rest/HTTPClient.class")
        assert "org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients.class" not in zf.namelist()
    assert b"org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients" in rest_client
    with zipfile.ZipFile(cache_dir() / HTTPCLIENT5_JAR) as zf:
        names = set(zf.namelist())
        assert "org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients.class" in names
        assert not any(n.startswith("smfs/") for n in names)
        assert b"smfs/shaded/org/apache/hc" not in zf.read(
            "org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients.class")
    with zipfile.ZipFile(cache_dir() / AWSSDK_JAR) as zf:
        names = set(zf.namelist())
        assert "software/amazon/awssdk/services/s3/S3Client.class" in names
        assert not any("sagemaker" in n for n in names)
        assert b"smfs/shaded/software" not in zf.read("software/amazon/awssdk/services/s3/DefaultS3Client.class")
