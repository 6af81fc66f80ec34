"""The other Iceberg REST catalog servers users run, throwaway (icecompact_testing.catalog_servers): Nessie and
Iceberg's REST reference server (``RESTCatalogServer``), tables on the session's SeaweedFS S3, each server started
once for the session on first use. Per server: what its config endpoint says and how our catalog layer reads it,
MINOR then MAJOR on a v2 and a v3 merge-on-read table with equality deletes and position deletes / DVs (rows checked
equal before and after by the reference reader and Spark), a MAJOR overtaken by a concurrent writer (refused,
retried, nothing lost or resurrected), and maintenance on the compacted table.

Tables are module-scoped and tiny (a catalog per server for the module); compactions run in this process, except
the v2 MAJOR on Nessie, through spark-submit (``icecompact run``'s path: the catalog's Spark conf, which on Nessie
is not the REST client's, and its secrets file). What a server does differently is asserted where it shows
(docs/catalogs.md, "Tested catalog servers").
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.maintenance import MaintenanceAction as A
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.demo.workload import BASE_TS_US, WorkloadResult, WorkloadSpec, generate, spark_rows, ts_from_micros
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.maintenance import maintain_table
from compaction.ops.runner import run_table
from compaction.spark import jvm as J
from compaction.spark import major as major_module
from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
from compaction.spark.job import COMMITTED
from compaction.spark.session import register_catalog
from compaction.spark.validation import ValidationLevel
from icecompact_testing.catalog_servers import NESSIE, SERVERS, config_response
from icecompact_testing.inprocess import compact_in_process
from icecompact_testing.oracle import read_table
from objectstore.test_s3_compaction import FULL, _once
from test_minor import assert_deletes_settled, fragment_overrides

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


@pytest.fixture(scope="module", params=SERVERS)
def server(request, catalog_servers) -> Any:  # type: ignore[no-untyped-def]
    return catalog_servers(request.param)


@pytest.fixture(scope="module")
def catalog(spark, server) -> CatalogConfig:  # type: ignore[no-untyped-def]
    """A catalog of ``server`` as a user configures it, registered in the session's Spark."""
    config = server.catalog()
    register_catalog(spark, config)
    return config


@pytest.fixture()
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


@pytest.fixture(scope="module")
def v2_table(spark, catalog: CatalogConfig) -> WorkloadResult:  # type: ignore[no-untyped-def]
    """A v2 table (days(ts), 2 days): equality deletes (Java API) and position deletes (Spark DML)."""
    spec = WorkloadSpec(seed=41, format_version=2, partitioning="days_ts", days_span=2, commits=3,
                        rows_per_commit=30, eq_delete_fraction=0.6, null_key_fraction=0.0)
    return generate(spark, catalog, "cs.v2", spec)


def _rows(catalog: CatalogConfig, workload: WorkloadResult) -> Any:
    return read_table(catalog.load().load_table(workload.identifier))


def test_the_catalog_layer_reads_each_server(server: Any, catalog: CatalogConfig) -> None:
    """The config endpoint's answer and what our catalog layer makes of it: pyiceberg's catalog and Spark's conf."""
    answer = config_response(server)
    defaults, overrides = answer.get("defaults") or {}, answer.get("overrides") or {}
    loaded = catalog.load()
    loaded.create_namespace_if_not_exists("cs_probe")
    assert ("cs_probe",) in loaded.list_namespaces()
    prefix = f"spark.sql.catalog.{catalog.name}"
    conf, secrets = catalog.spark_conf(), catalog.spark_secret_conf()
    found = catalog.ask_rest_server()
    assert found is not None
    if server.kind == NESSIE:
        # Nessie names the branch in a path prefix, its warehouse location and its own API in the answer; our
        # catalog layer gives Spark Iceberg's NessieCatalog on that API (the REST API serves one snapshot a table).
        assert overrides.get("nessie.is-nessie-catalog") == "true" and defaults.get("prefix") == "main", answer
        assert defaults.get("warehouse") == server.warehouse_location, answer
        assert found.kind == "nessie"
        assert conf[f"{prefix}.catalog-impl"] == "org.apache.iceberg.nessie.NessieCatalog"
        assert f"{prefix}.type" not in conf
        assert conf[f"{prefix}.uri"] == f"http://127.0.0.1:{server.port}/api/v2"
        assert conf[f"{prefix}.ref"] == "main" and conf[f"{prefix}.warehouse"] == server.warehouse_location
        assert secrets == {f"{prefix}.s3.secret-access-key": catalog.properties["s3.secret-access-key"]}
    else:
        # The reference server: no prefix, namespace parts separated by "." (%2E), S3 credentials vended per table (the
        # catalog has none of its own).
        assert "prefix" not in defaults and "prefix" not in overrides, answer
        assert overrides.get("namespace-separator") == "%2E", answer
        assert found.kind == ""
        assert conf[f"{prefix}.type"] == "rest" and f"{prefix}.catalog-impl" not in conf
        assert not secrets
    assert conf[f"{prefix}.io-impl"] == "org.apache.iceberg.aws.s3.S3FileIO"
    assert f"{prefix}.credential" not in conf and f"{prefix}.rest.auth.type" not in conf  # no OAuth2 here


def test_v2_minor_then_major(spark, catalog: CatalogConfig, server: Any, v2_table: WorkloadResult,  # type: ignore[no-untyped-def]
                             ledger: Ledger) -> None:
    """v2: MINOR in this process (fragments merged, equality deletes -> position deletes), then a full MAJOR (on
    Nessie through spark-submit: the catalog's Spark conf and secrets file as ``icecompact run`` makes them); the
    rows the same before and after, through the reference reader and Spark."""
    workload, name = v2_table, "cs.v2"
    table = catalog.load().load_table(workload.identifier)
    assert table.metadata_location.startswith(f"{server.warehouse_location.rsplit('/', 1)[0]}/")
    before = read_table(table)
    assert before.rows == workload.expected_rows == spark_rows(spark, workload.table)
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    assert any(d.delete_kind == "position" for d in before.delete_files)
    from compaction.metadata.inspect import inspect_table

    overrides = fragment_overrides(inspect_table(catalog, name))
    minors = compact_in_process(spark, catalog, name, CompactionMode.MINOR,
                                level=ValidationLevel.COUNT, overrides=overrides,
                                now=NOW, clean=True).partitions
    assert sum(p.converted_rows for p in minors) > 0, "no equality delete was converted"
    assert all(p.validation["result"] == "passed" for p in minors if p.status == COMMITTED), minors
    after = _rows(catalog, workload)
    assert after.rows == before.rows == spark_rows(spark, workload.table)
    assert not any(d.delete_kind == "equality" for d in after.delete_files)
    assert_deletes_settled(after, minors)

    if server.kind == NESSIE:
        # Through spark-submit (the conf a job gets on a Nessie server is not the REST client's: see the catalog
        # test); on the reference server in this process, to keep the module short.
        report = run_table(catalog, name, mode=CompactionMode.MAJOR, ledger=ledger, validation="count",
                           overrides={"major.full-rewrite": "true"})
        assert report.status is RunStatus.SUCCEEDED, report.errors
        outcomes = ledger.outcomes(report.run_id)
        assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.kind is CompactionKind.MAJOR
                                for o in outcomes)
    else:
        majors = compact_in_process(spark, catalog, name, CompactionMode.MAJOR,
                                    level=ValidationLevel.COUNT, overrides=FULL,
                                    now=NOW, clean=True).partitions
        assert all(p.kind == "major" for p in majors)
    after_major = _rows(catalog, workload)
    assert after_major.rows == before.rows == spark_rows(spark, workload.table)
    assert not after_major.applicable_deletes
    history = int(J.load_table(spark, workload.table).snapshots().size())  # Spark's side of the catalog
    served = len(catalog.load().load_table(workload.identifier).metadata.snapshots)  # pyiceberg's: REST
    assert history > 4
    # Nessie's REST API serves the current snapshot only (why Spark goes through its own API); others serve all.
    assert served == (1 if server.kind == NESSIE else history)


def test_v3_minor_then_major(spark, catalog: CatalogConfig, server: Any) -> None:  # type: ignore[no-untyped-def]
    """v3: MINOR turns equality deletes into deletion vectors (Puffin files on S3), a full MAJOR applies and removes
    them; the rows the same throughout. Nessie 0.99 knows spec versions 1 and 2 only: asked for v3 through its REST
    API it makes a v2 table without a word; a v3 table made through its own API cannot be loaded through REST, and
    our inspection says why."""
    if server.kind == NESSIE:
        from pyiceberg.schema import Schema
        from pyiceberg.types import LongType, NestedField

        from compaction.demo.tables import create_table
        from compaction.metadata.inspect import inspect_table

        loaded = catalog.load()
        made = loaded.create_table("cs.v3_rest", Schema(NestedField(1, "id", LongType(), required=False)),
                                   properties={"format-version": "3"})
        assert made.metadata.format_version == 2
        create_table(spark, f"{catalog.name}.cs.v3", "id bigint", "", {"format-version": "3"})
        with pytest.raises(Exception, match="spec version 3"):
            inspect_table(catalog, "cs.v3")
        return
    spec = WorkloadSpec(seed=21, format_version=3, partitioning="days_ts", days_span=2, commits=3,
                        rows_per_commit=30, eq_delete_fraction=0.8, null_key_fraction=0.0)
    workload = generate(spark, catalog, "cs.v3", spec)
    before = _rows(catalog, workload)
    assert before.rows == workload.expected_rows == spark_rows(spark, workload.table)
    assert any(d.delete_kind == "equality" for d in before.delete_files)
    assert any(d.delete_kind == "deletion_vector" for d in before.delete_files)
    minors = compact_in_process(spark, catalog, "cs.v3", CompactionMode.MINOR,
                                level=ValidationLevel.COUNT, overrides={"fragment_ratio": 1 << 40},
                                now=NOW, clean=True).partitions
    after = _rows(catalog, workload)
    assert after.rows == before.rows == spark_rows(spark, workload.table)
    assert after.delete_files and all(d.delete_kind == "deletion_vector" for d in after.delete_files)
    assert all(d.path.startswith("s3://") and d.path.endswith(".puffin") for d in after.delete_files)
    assert all(len(deletes) <= 1 for deletes in after.applicable_deletes.values())
    assert_deletes_settled(after, minors)
    compact_in_process(spark, catalog, "cs.v3", CompactionMode.MAJOR,
                       level=ValidationLevel.NONE, overrides=FULL, now=NOW, clean=True)
    after_major = _rows(catalog, workload)
    assert after_major.rows == before.rows and not after_major.delete_files


def test_major_overtaken_by_a_writer_retries(spark, catalog: CatalogConfig, server: Any,  # type: ignore[no-untyped-def]
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer commits through the server between our MAJOR's planning and its commit (deterministic: it
    runs inside our rewrite call): a Spark DELETE, an equality delete and an append. The server refuses our commit
    (or Iceberg's validation of it does), the partition is re-read and retried: nothing lost or resurrected."""
    spec = WorkloadSpec(seed=41, format_version=2, partitioning="days_ts", days_span=1, commits=3,
                        rows_per_commit=30, eq_delete_fraction=0.8, null_key_fraction=0.0)
    workload = generate(spark, catalog, "cs.race", spec)
    expected: Counter[tuple[Any, ...]] = Counter(_rows(catalog, workload).rows)
    assert expected == workload.expected_rows
    live_ids = sorted({row[0] for row in expected})
    day = 19723  # the one day partition (2024-01-01)

    def writer() -> None:
        position_victim, equality_victim = live_ids[1], live_ids[-2]
        spark.sql(f"DELETE FROM {workload.table} WHERE id = {position_victim}")
        write_and_commit(spark, J.load_table(spark, workload.table),
                         [EqualityDeleteSpec(("id",), ((equality_victim,),), partition=(day,))])
        ts_us = BASE_TS_US + 3_600_000_000
        spark.sql(f"INSERT INTO {workload.table} VALUES (9000001, 'EU', timestamp_micros({ts_us}), 7, 'concurrent')")
        for row in [r for r in expected if r[0] in (position_victim, equality_victim)]:
            del expected[row]
        expected[(9000001, "EU", ts_from_micros(ts_us), 7, "concurrent")] += 1

    race: Callable[[], None] = _once(writer)
    original = major_module.rewrite_partition

    def overtaken_rewrite(spark_, table, *args, **kwargs):  # type: ignore[no-untyped-def]
        race()
        return original(spark_, table, *args, **kwargs)

    monkeypatch.setattr(major_module, "rewrite_partition", overtaken_rewrite)
    majors = compact_in_process(spark, catalog, "cs.race", CompactionMode.MAJOR,
                                level=ValidationLevel.COUNT, overrides=FULL,
                                now=NOW, clean=True).partitions
    assert [p.status for p in majors] == [COMMITTED], [(p.label, p.status, p.error) for p in majors]
    assert majors[0].conflicts, "the MAJOR overtaken by the writer must have been refused and retried"
    final = _rows(catalog, workload)
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not final.applicable_deletes


def test_maintenance(spark, catalog: CatalogConfig, server: Any, v2_table: WorkloadResult,  # type: ignore[no-untyped-def]
                     ledger: Ledger) -> None:
    """Expiry, manifest rewrite and orphan removal on the (compacted) v2 table; the rows read the same after.

    On Nessie the table has ``gc.enabled=false`` (Iceberg's NessieCatalog sets it on every table it creates: files
    that other branches or older Nessie commits reference are not in this branch's snapshots): expiry and orphan
    removal are refused, the planted orphan stays, and only the manifest rewrite runs."""
    import uuid

    workload = v2_table
    table = catalog.load().load_table(workload.identifier)
    before = read_table(table)
    snapshots_before = len(table.metadata.snapshots)
    location = str(table.metadata.location)
    data_path = str(table.metadata.properties.get("write.data.path") or f"{location}/data").rstrip("/")
    orphan = f"{data_path}/orphan-{uuid.uuid4().hex}.parquet"
    with table.io.new_output(orphan).create() as out:
        out.write(b"not referenced by any metadata" * 10)
    live_files = {f.path for f in before.data_files} | {d.path for d in before.delete_files}
    report = maintain_table(catalog, "cs.v2", spark=spark, ledger=ledger, overrides={
        "max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
        "orphans_enabled": True, "orphans_older_than_s": 0, "clock_skew_s": 0})
    assert report.status == "succeeded", [r.to_dict() for r in report.results]
    by_action = {r.action: r for r in report.results}
    after_table = catalog.load().load_table(workload.identifier)
    if server.kind == NESSIE:
        assert table.metadata.properties.get("gc.enabled") == "false"
        for action in (A.EXPIRE_SNAPSHOTS, A.DELETE_ORPHAN_FILES):
            decision = report.plan.decision(action)
            assert not decision.run and "gc.enabled=false" in decision.reason, decision
        assert A.REWRITE_MANIFESTS in by_action, report.plan.to_json()
        assert after_table.io.new_input(orphan).exists(), "an orphan was deleted on a gc.enabled=false table"
    else:
        assert snapshots_before > 2
        assert report.plan.actions == (A.EXPIRE_SNAPSHOTS, A.REWRITE_MANIFESTS, A.DELETE_ORPHAN_FILES)
        assert by_action[A.EXPIRE_SNAPSHOTS].detail["snapshots_expired"] == snapshots_before - 1
        orphans = by_action[A.DELETE_ORPHAN_FILES]
        assert orphans.files_removed == 1 and orphans.detail["sample"] == [orphan], orphans.to_dict()
        assert not after_table.io.new_input(orphan).exists()
    assert all(after_table.io.new_input(p).exists() for p in live_files)
    after = read_table(after_table)
    assert after.rows == before.rows == spark_rows(spark, workload.table)
