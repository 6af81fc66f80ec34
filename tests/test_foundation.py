"""Foundation: the official jars of the Spark line, catalog configuration and Spark <-> pyiceberg interop."""

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
from compaction.spark import artifacts
from compaction.spark.session import SparkSettings, jar_paths, spark_conf


def test_the_installed_line_uses_the_official_pinned_jars() -> None:
    """The jars a session gets are Maven Central's files for the installed PySpark's line, byte for byte: each cached
    file has the pinned digest, and the runtime is built for this Spark and Scala."""
    line = artifacts.spark_line()
    release = artifacts.iceberg_release(line)
    jars = jar_paths(SparkSettings())
    by_name = {p.name: p for p in jars}
    runtime = by_name[release.runtime.file_name]
    assert release.runtime.artifact == f"iceberg-spark-runtime-{line.name}_{line.scala}"
    for jar in artifacts.jars_for(release):
        assert artifacts.sha256_of(by_name[jar.file_name]) == jar.sha256, jar.coordinate
    with zipfile.ZipFile(runtime) as zf:
        names = set(zf.namelist())
    # Self-contained: Jackson and httpclient5 relocated inside it (what the old repaired jar lacked).
    assert "org/apache/iceberg/shaded/com/fasterxml/jackson/core/JsonFactoryBuilder.class" in names
    assert "org/apache/iceberg/shaded/org/apache/hc/client5/http/impl/classic/HttpClients.class" in names
    assert not any("companion" in p.name for p in jars)


def test_a_jar_whose_digest_differs_is_refused(tmp_path: Path) -> None:
    """A mirror serving another file for a pinned coordinate: nothing is cached and the error names both digests."""
    release = artifacts.iceberg_release()
    impostor = tmp_path / "download" / release.aws_bundle.file_name
    impostor.parent.mkdir()
    impostor.write_bytes(b"PK\x03\x04 not the published jar")
    cache = tmp_path / "cache"
    cache.mkdir()
    with pytest.raises(ConfigError, match="does not match the pinned") as caught:
        artifacts.verified_copy(impostor, release.aws_bundle, cache)
    assert release.aws_bundle.sha256 in str(caught.value)
    assert list(cache.iterdir()) == []
    with pytest.raises(ConfigError, match="make install"):
        artifacts.cached_path(release.aws_bundle, cache)


def test_constraints_pin_the_default_lines_pyspark() -> None:
    """constraints.txt (the default venv) and the line table agree on the default line's PySpark."""
    root = Path(__file__).resolve().parents[1]
    pins = dict(line.split("==", 1) for line in (root / "constraints.txt").read_text().splitlines() if "==" in line)
    assert pins["pyspark"] == artifacts.SPARK_LINES[artifacts.SPARK_LINE_DEFAULT].pyspark


def test_unsupported_lines_and_releases_are_named() -> None:
    with pytest.raises(ConfigError, match=r"Spark 3\.4\.4 is not a supported line \(supported: 3\.5, 4\.1\)"):
        artifacts.spark_line("3.4.4")
    assert artifacts.spark_line("3.5.9").scala == "2.12"
    with pytest.raises(ConfigError, match=r"Iceberg 1\.9\.2 is not pinned for Spark 4\.1"):
        artifacts.SPARK_LINES["4.1"].release("1.9.2")
    oldest = min((r.version for line in artifacts.SPARK_LINES.values() for r in line.releases),
                 key=lambda v: tuple(int(x) for x in v.split(".")))
    assert oldest == artifacts.ICEBERG_OLDEST_SUPPORTED


def test_spark_commits_iceberg_metadata(spark, sqlite_catalog: CatalogConfig) -> None:
    name = sqlite_catalog.name
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {name}.db")
    spark.sql(f"CREATE TABLE {name}.db.t (id BIGINT, v STRING) USING iceberg TBLPROPERTIES ('format-version'='2')")
    spark.sql(f"INSERT INTO {name}.db.t VALUES (1, 'a'), (2, 'b')")
    table = sqlite_catalog.load().load_table("db.t")
    assert table.metadata.format_version == 2
    assert len(table.metadata.snapshots) == 1
    assert Path(table.metadata_location.removeprefix("file:")).exists()


def test_snapshot_changes_are_each_snapshots_own_manifest_entries(spark, sqlite_catalog: CatalogConfig) -> None:
    """compat.snapshot_changes (Iceberg's SnapshotChanges where the runtime has it, the Snapshot's own methods before):
    every snapshot's added and removed data and delete files, against the ``entries`` metadata table at that
    snapshot (status 1 added, 2 deleted, by that snapshot)."""
    from compaction.spark import jvm as J
    from compaction.spark.compat import snapshot_changes
    from compaction.spark.partition_files import _iterate

    ref = f"{sqlite_catalog.name}.db.changes"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {sqlite_catalog.name}.db")
    spark.sql(f"CREATE TABLE {ref} (id BIGINT, p STRING) USING iceberg PARTITIONED BY (p) TBLPROPERTIES "
              "('format-version'='2', 'write.delete.mode'='merge-on-read', 'write.update.mode'='merge-on-read')")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 'a'), (2, 'a'), (3, 'b')")
    spark.sql(f"INSERT INTO {ref} VALUES (4, 'a'), (5, 'b')")
    spark.sql(f"DELETE FROM {ref} WHERE id IN (1, 5)")
    table = J.load_table(spark, ref)
    # A commit that removes a delete file, the same on every runtime (whether a rewrite drops the deletes of the
    # files it replaces differs between Iceberg releases).
    live_deletes = [d for task in _iterate(table.newScan().planFiles()) for d in _iterate(task.deletes())]
    table.newRowDelta().removeDeletes(live_deletes[0]).commit()
    spark.sql(f"CALL {sqlite_catalog.name}.system.rewrite_data_files(table => '{ref}', "
              "options => map('min-input-files', '1'))").collect()
    table.refresh()
    kinds = ("added data", "removed data", "added deletes", "removed deletes")
    seen = set()
    for snapshot in table.snapshots():
        sid = int(snapshot.snapshotId())
        changed = snapshot_changes(table, snapshot)
        ours = {kind: sorted(str(f.location()) for f in _iterate(files)) for kind, files in zip(kinds, (
            changed.addedDataFiles(), changed.removedDataFiles(), changed.addedDeleteFiles(),
            changed.removedDeleteFiles()))}
        rows = spark.sql(f"SELECT status, data_file.content AS content, data_file.file_path AS path "
                         f"FROM {ref}.entries VERSION AS OF {sid} WHERE snapshot_id = {sid} AND status != 0").collect()
        expected: dict[str, list[str]] = {kind: [] for kind in kinds}
        for r in rows:
            expected[f"{'added' if r.status == 1 else 'removed'} {'data' if r.content == 0 else 'deletes'}"].append(
                r.path)
        assert ours == {k: sorted(v) for k, v in expected.items()}, sid
        seen |= {kind for kind, paths in ours.items() if paths}
    assert seen == set(kinds)  # every kind of change was compared at least once


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


def test_a_catalogs_repr_shows_no_secret() -> None:
    # Tracebacks, pytest's failure reports and Airflow's logs show a CatalogConfig by its repr.
    cfg = CatalogConfig("prod", {"type": "rest", "uri": "http://alice:pw-in-uri@h:8181", "s3.secret-access-key": "sk-1",
                                 "s3.session-token": "tok-2", "rest.signing-secret": "sig-3", "warehouse": "s3://wh"})
    shown = repr(cfg) + str(cfg) + f"{cfg}"
    for secret in ("pw-in-uri", "sk-1", "tok-2", "sig-3"):
        assert secret not in shown, shown
    assert "s3://wh" in shown and "prod" in shown


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
    settings = SparkSettings(packages="org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0")
    assert jar_paths(settings) == []
    assert spark_conf(settings, [])["spark.jars.packages"].startswith("org.apache.iceberg:")
    bundled = {p.name for p in jar_paths(SparkSettings())}
    release = artifacts.iceberg_release()
    assert {release.runtime.file_name, release.aws_bundle.file_name} <= bundled
    assert {j.file_name for j in artifacts.JDBC_DRIVERS} <= bundled


def test_a_spark_image_with_its_own_jars_gets_none_of_ours(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A cluster image whose $SPARK_HOME/jars carries Iceberg's runtime, AWS bundle or a JDBC driver keeps its own:
    no second copy of any of them on one class path."""
    (tmp_path / "jars").mkdir()
    monkeypatch.setenv("SPARK_HOME", str(tmp_path))
    release = artifacts.iceberg_release()
    assert release.aws_bundle.file_name in {p.name for p in jar_paths(SparkSettings())}
    (tmp_path / "jars" / "iceberg-aws-bundle-1.11.0.jar").write_bytes(b"")
    names = {p.name for p in jar_paths(SparkSettings())}
    assert not any(n.startswith("iceberg-aws-bundle") for n in names)
    assert release.runtime.file_name in names
    (tmp_path / "jars" / "iceberg-spark-runtime-4.1_2.13-1.11.0.jar").write_bytes(b"")
    (tmp_path / "jars" / "postgresql-42.2.0.jar").write_bytes(b"")
    names = {p.name for p in jar_paths(SparkSettings())}
    assert names == {j.file_name for j in artifacts.JDBC_DRIVERS if j.artifact != "postgresql"}
    monkeypatch.delenv("SPARK_HOME")
    monkeypatch.setenv("ICECOMPACT_SPARK_HAS_AWS_BUNDLE", "1")
    assert not any(p.name.startswith("iceberg-aws-bundle") for p in jar_paths(SparkSettings()))


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
