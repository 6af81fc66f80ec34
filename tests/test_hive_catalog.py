"""``type: hive`` catalogs on a real Hive Metastore (a throwaway Thrift metastore: icecompact_testing.hive_metastore,
Hive 2.3 from PySpark's own jars, Derby inside, tables on the local file system).

Both engines go through the metastore: pyiceberg's HiveCatalog (Thrift, the ``thrift`` package) for the host's
reads and a concurrent writer's commit, Iceberg's Java HiveCatalog inside Spark (in this process and in a
spark-submit job) for the workload, the compactions and maintenance. Every commit takes an HMS table lock, and the
metastore's ``metadata_location`` is what each engine reads back. Tables are module-scoped and tiny: MINOR then MAJOR
on a v2 table (equality deletes, position deletes; the MAJOR overtaken by a writer, refused and retried) and on a v3
table (equality deletes -> deletion vectors, MINOR through spark-submit), then maintenance.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlparse

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import ConfigError
from compaction.core.maintenance import MaintenanceAction as A
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.demo.workload import BASE_TS_US, WorkloadResult, WorkloadSpec, generate, spark_rows, ts_from_micros
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.metadata.inspect import inspect_table
from compaction.ops.maintenance import maintain_table
from compaction.ops.runner import run_table
from compaction.spark import job as job_module
from compaction.spark import major as major_module
from compaction.spark import task as task_module
from compaction.spark.job import COMMITTED
from compaction.spark.session import register_catalog
from compaction.spark.validation import ValidationLevel
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table
from test_minor import assert_deletes_settled, fragment_overrides

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


# -- the metastore and its catalog ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def hive_catalog(hive_metastore, spark) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A ``type: hive`` catalog on the metastore (``uri`` thrift://, ``warehouse`` the metastore's own), registered
    in pyiceberg and in Spark."""
    catalog = hive_metastore.catalog(f"hms_{uuid.uuid4().hex[:8]}")
    register_catalog(spark, catalog)
    return catalog


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def _hms_table(server: Any, database: str, name: str) -> Any:
    """The metastore's own record of a table (its parameters hold Iceberg's metadata pointer)."""
    from pyiceberg.catalog.hive import _HiveClient

    with _HiveClient(server.uri) as client:
        return client.get_table(dbname=database, tbl_name=name)


def _held_locks(server: Any) -> list[Any]:
    """The metastore's current locks (``SHOW LOCKS``): every commit of either engine takes one and must release it."""
    from hive_metastore.ttypes import ShowLocksRequest
    from pyiceberg.catalog.hive import _HiveClient

    with _HiveClient(server.uri) as client:
        return list(client.show_locks(ShowLocksRequest()).locks or [])


# -- module-scoped tables -------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def v2_table(spark, hive_catalog: CatalogConfig) -> WorkloadResult:  # type: ignore[no-untyped-def]
    """Format v2, ``days(ts)`` over two days: equality deletes (CDC style) and position deletes (Spark DELETE)."""
    spec = WorkloadSpec(seed=41, format_version=2, partitioning="days_ts", days_span=2, commits=4, rows_per_commit=30,
                        eq_delete_fraction=0.6, null_key_fraction=0.0)
    return generate(spark, hive_catalog, "hv2.t", spec)


@pytest.fixture(scope="module")
def v3_table(spark, hive_catalog: CatalogConfig) -> WorkloadResult:  # type: ignore[no-untyped-def]
    """Format v3: equality deletes and deletion vectors."""
    spec = WorkloadSpec(seed=21, format_version=3, partitioning="days_ts", days_span=2, commits=3,
                        eq_delete_fraction=0.8)
    return generate(spark, hive_catalog, "hv3.t", spec)


# -- configuration (no JVM) -----------------------------------------------------------------------------------------

def test_a_hive_catalog_gives_both_engines_the_same_metastore() -> None:
    """One definition, two engines: the same ``uri`` and ``warehouse`` for pyiceberg and Spark; pyiceberg's own
    keys stay out of Spark's conf; a ``thrift://`` uri alone means Hive (as pyiceberg infers it); a Hive catalog
    without a thrift uri is refused before any engine would start an embedded metastore."""
    props = {"type": "hive", "uri": "thrift://hms-1:9083,thrift://hms-2:9083", "warehouse": "file:///data/wh",
             "hive.hive2-compatible": "true", "lock-check-retries": "8", "ugi": "etl:etl",
             "hadoop.iceberg.hive.lock-timeout-ms": "60000"}
    catalog = CatalogConfig("lake", props)
    assert catalog.is_hive and not catalog.is_sql
    conf = catalog.spark_conf()
    prefix = "spark.sql.catalog.lake"
    assert conf[prefix] == "org.apache.iceberg.spark.SparkCatalog"
    assert conf[f"{prefix}.type"] == "hive"
    assert conf[f"{prefix}.uri"] == props["uri"]
    assert conf[f"{prefix}.warehouse"] == "file:///data/wh"
    assert conf[f"{prefix}.cache-enabled"] == "false"
    assert conf[f"{prefix}.hadoop.iceberg.hive.lock-timeout-ms"] == "60000"
    assert not {f"{prefix}.{k}" for k in ("hive.hive2-compatible", "lock-check-retries", "ugi")} & set(conf)
    assert "io-impl" not in " ".join(conf)
    assert CatalogConfig("lake", {"uri": "thrift://hms:9083"}).catalog_type == "hive"
    # pyiceberg writes the HMS column types Java does (a Hive 2 metastore refuses its timestamptz type otherwise),
    # unless told otherwise; opening the catalog does not connect yet.
    assert CatalogConfig("lake", {"type": "hive", "uri": "thrift://127.0.0.1:9"}).load().properties[
        "hive.hive2-compatible"] == "true"
    assert CatalogConfig("lake", {"type": "hive", "uri": "thrift://127.0.0.1:9", "hive.hive2-compatible": "false"}
                         ).load().properties["hive.hive2-compatible"] == "false"
    s3 = CatalogConfig("lake", {"type": "hive", "uri": "thrift://hms:9083", "warehouse": "s3://bucket/wh"})
    assert s3.spark_conf()[f"{prefix}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    for bad in ({"type": "hive"}, {"type": "hive", "uri": "http://hms:9083"}):
        with pytest.raises(ConfigError, match="uri"):
            CatalogConfig("lake", bad).spark_conf()
        with pytest.raises(ConfigError, match="uri"):
            CatalogConfig("lake", bad).load()


# -- MINOR then MAJOR -----------------------------------------------------------------------------------------------

def _once(action: Callable[[], None]) -> Callable[[], None]:
    done: list[bool] = []

    def run() -> None:
        if not done:
            done.append(True)
            action()
    return run


@pytest.mark.spark
def test_v2_minor_then_a_major_overtaken_by_a_writer(spark, hive_metastore, hive_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                     v2_table: WorkloadResult, monkeypatch) -> None:
    """v2 on the metastore: MINOR (fragments merged, equality deletes -> position deletes; checksum validation),
    rows equal. Then a full MAJOR that another writer overtakes between planning and commit (deterministic: the
    writer runs inside our rewrite call): a Spark DELETE and INSERT through Java's HiveCatalog and a table property
    set through pyiceberg's HiveCatalog, each under its own HMS lock. Our commit is refused, the partition re-planned
    and retried; no row lost or resurrected, pyiceberg's commit kept, no lock left behind, and the metastore's
    pointer is the table both engines read."""
    workload, name = v2_table, "hv2.t"
    table = hive_catalog.load().load_table(workload.identifier)
    # The table lives where the metastore put its database: <warehouse>/hv2.db/t, on both engines.
    assert table.location().rstrip("/").endswith("/warehouse/hv2.db/t"), table.location()
    assert urlparse(table.location()).path.startswith(urlparse(hive_metastore.warehouse).path)
    before = read_table(table)
    assert before.rows == workload.expected_rows
    assert spark_rows(spark, workload.table) == before.rows
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    assert any(d.delete_kind == "position" for d in before.delete_files)

    overrides = fragment_overrides(inspect_table(hive_catalog, name))
    minors = compact_in_process(spark, hive_catalog, name, CompactionMode.MINOR, level=ValidationLevel.CHECKSUM,
                                overrides=overrides, now=NOW, clean=True).partitions
    assert all(p.kind == "minor" for p in minors)
    assert sum(p.rewritten_data_files for p in minors) > 0, "no fragment was merged"
    assert sum(p.converted_rows for p in minors) > 0, "no equality delete was converted"
    assert all(p.validation["result"] == "passed" for p in minors if p.status == COMMITTED), minors
    after = read_table(hive_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    assert_deletes_settled(after, minors)

    expected: Counter[tuple[Any, ...]] = Counter(after.rows)
    # One victim per day partition: whichever partition is rewritten first, a file of it loses a row meanwhile.
    victims = sorted({min(r[0] for r in expected if r[2].date() == day) for day in {r[2].date() for r in expected}})
    assert len(victims) == 2
    ts_us = BASE_TS_US + 3_600_000_000

    def writer() -> None:
        spark.sql(f"DELETE FROM {workload.table} WHERE id IN ({', '.join(map(str, victims))})")
        for row in [r for r in expected if r[0] in victims]:
            del expected[row]
        spark.sql(f"INSERT INTO {workload.table} VALUES (9000001, 'EU', timestamp_micros({ts_us}), 7, 'concurrent')")
        expected[(9_000_001, "EU", ts_from_micros(ts_us), 7, "concurrent")] += 1
        # A commit through pyiceberg's HiveCatalog too (its own lock, its own HMS column types): metadata only,
        # as pyiceberg's writes of a partitioned table need its optional native transforms.
        with hive_catalog.load().load_table(workload.identifier).transaction() as tx:
            tx.set_properties({"icecompact.test.writer": "pyiceberg"})

    race_ran: list[BaseException | None] = []

    def writer_recorded() -> None:
        try:
            writer()
        except BaseException as e:  # surfaced by the assertion below (our rewrite would only see a failure)
            race_ran.append(e)
            raise
        race_ran.append(None)

    race = _once(writer_recorded)
    original = major_module.rewrite_partition

    def overtaken_rewrite(spark_, table_, *args, **kwargs):  # type: ignore[no-untyped-def]
        race()
        return original(spark_, table_, *args, **kwargs)

    # Wherever it is looked up: a group's one action (job), a partition's attempt (task), a full rewrite (major).
    for module in (job_module, task_module, major_module):
        monkeypatch.setattr(module, "rewrite_partition", overtaken_rewrite)
    majors = compact_in_process(spark, hive_catalog, name, CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                                overrides={**overrides, "major_full_rewrite": True}, now=NOW, clean=True).partitions
    assert race_ran == [None], f"the writer failed: {race_ran}"
    assert all(p.kind == "major" for p in majors)
    raced = [p for p in majors if p.conflicts]
    assert raced, ("the MAJOR overtaken by the writer must have been refused and retried",
                   [(p.label, p.status, p.commit_snapshot_ids) for p in majors], race_ran)
    assert all(p.status == COMMITTED for p in raced), [(p.label, p.status, p.error) for p in raced]
    final_table = hive_catalog.load().load_table(workload.identifier)
    final = read_table(final_table)
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(d.delete_kind == "equality" for d in final.delete_files)
    assert final_table.properties.get("icecompact.test.writer") == "pyiceberg", "pyiceberg's commit was lost"
    # The metastore's record: an Iceberg table whose pointer is the snapshot both engines read, its previous one
    # kept, and no lock left by any of the commits (Java's and pyiceberg's).
    hms = _hms_table(hive_metastore, "hv2", "t")
    assert hms.parameters["table_type"].upper() == "ICEBERG"
    assert hms.parameters["metadata_location"] == final_table.metadata_location
    assert hms.parameters.get("previous_metadata_location")
    assert _held_locks(hive_metastore) == []


@pytest.mark.spark
def test_v3_minor_through_spark_submit_then_major(spark, hive_metastore, hive_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                  v3_table: WorkloadResult, ledger: Ledger) -> None:
    """v3 on the metastore: MINOR through spark-submit (``icecompact run``'s path: the job's own Spark gets the
    catalog from the same definition and commits through the metastore), equality deletes -> deletion vectors;
    then a full MAJOR that applies the DVs and removes them. Rows equal after each."""
    workload, name = v3_table, "hv3.t"
    before = read_table(hive_catalog.load().load_table(workload.identifier))
    assert before.rows == workload.expected_rows
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    assert any(d.delete_kind == "deletion_vector" for d in before.delete_files)

    lines: list[str] = []
    report = run_table(hive_catalog, name, mode=CompactionMode.MINOR, ledger=ledger, progress=lines.append,
                       validation="count", overrides={"fragment-ratio": 1 << 40})
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines[-20:])
    outcomes = ledger.outcomes(report.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.kind is CompactionKind.MINOR for o in outcomes)
    assert all(o.validation_result == "passed" for o in outcomes)
    after = read_table(hive_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert after.delete_files and all(d.delete_kind == "deletion_vector" for d in after.delete_files)
    assert all(d.path.endswith(".puffin") for d in after.delete_files)
    assert all(len(deletes) <= 1 for deletes in after.applicable_deletes.values())

    compact_in_process(spark, hive_catalog, name, CompactionMode.MAJOR, level=ValidationLevel.COUNT,
                       overrides={"major_full_rewrite": True}, now=NOW, clean=True)
    final_table = hive_catalog.load().load_table(workload.identifier)
    final = read_table(final_table)
    assert final.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert not final.delete_files, "the DVs of the rewritten files were not removed"
    assert _hms_table(hive_metastore, "hv3", "t").parameters["metadata_location"] == final_table.metadata_location
    assert _held_locks(hive_metastore) == []


# -- maintenance ----------------------------------------------------------------------------------------------------

@pytest.mark.spark
def test_every_maintenance_action_on_the_metastore(spark, hive_catalog: CatalogConfig, v3_table: WorkloadResult,  # type: ignore[no-untyped-def]
                                                   tmp_path: Path) -> None:
    """Expiry, manifest rewrite and orphan removal on a table of the metastore (the v3 table, compacted or not: the
    test reads its state first): the planted orphan (and only it) is deleted, the rows read the same before and
    after."""
    workload, name = v3_table, "hv3.t"
    table = hive_catalog.load().load_table(workload.identifier)
    before = read_table(table)
    assert before.rows == workload.expected_rows
    snapshots_before = len(table.metadata.snapshots)
    assert snapshots_before > 2
    orphan = Path(urlparse(table.location()).path) / "data" / f"orphan-{uuid.uuid4().hex}.parquet"
    orphan.write_bytes(b"not referenced by any metadata" * 10)
    live_files = {f.path for f in before.data_files} | {d.path for d in before.delete_files}
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report = maintain_table(hive_catalog, name, spark=spark, ledger=ledger, overrides={
            "max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
            "orphans_enabled": True, "orphans_older_than_s": 0, "clock_skew_s": 0})
        assert report.plan.actions == (A.EXPIRE_SNAPSHOTS, A.REWRITE_MANIFESTS, A.DELETE_ORPHAN_FILES)
        assert report.status == "succeeded", [r.to_dict() for r in report.results]
        by_action = {r.action: r for r in report.results}
        assert by_action[A.EXPIRE_SNAPSHOTS].detail["snapshots_expired"] == snapshots_before - 1
        orphans = by_action[A.DELETE_ORPHAN_FILES]
        assert orphans.files_removed == 1 and orphans.bytes_removed == 300, orphans.to_dict()
    assert not orphan.exists()
    after_table = hive_catalog.load().load_table(workload.identifier)
    assert all(after_table.io.new_input(p).exists() for p in live_files)
    after = read_table(after_table)
    assert after.rows == before.rows
    assert spark_rows(spark, workload.table) == before.rows
    assert len(after_table.metadata.snapshots) == 2  # the newest kept, plus the manifest rewrite on top
