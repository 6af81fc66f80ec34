"""Maintenance on real Spark + Iceberg: every action on v2/v3, partitioned and evolved tables with the
reference reader equal before and after; orphan removal beside an uncommitted compaction and a writer's staged
files; a scheme mismatch refused; expiry during a compaction run leaves the run validated."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.maintenance import MaintenanceAction as A
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan as make_plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table, load_table as py_load_table
from compaction.ledger import Ledger, RunStatus
from compaction.ops.maintenance import maintain_table
from compaction.spark.job import COMMITTED, run_group
from compaction.spark.jvm import data_files, load_table
from compaction.spark.validation import ValidationLevel
from icecompact_testing.oracle import read_table, spark_rows
from compaction.demo.workload import WorkloadSpec, generate

EVERYTHING = {"max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
              "orphans_enabled": True, "orphans_older_than_s": 0}
ORPHANS_ONLY = {"expire_enabled": False, "rewrite_manifests_enabled": False, "orphans_enabled": True,
                "orphans_older_than_s": 0}


def local(path: str) -> Path:
    return Path(urlparse(path).path if "://" in path or path.startswith("file:") else path)


def _ledger(tmp_path: Path) -> Ledger:
    return Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}")


def _plant_orphan(location: str, name: str = "orphan.parquet", age_s: float = 86400.0) -> Path:
    path = local(location) / "data" / f"{uuid.uuid4().hex}-{name}"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not referenced by any metadata" * 10)
    old = time.time() - age_s
    os.utime(path, (old, old))
    return path


def _copy_data_file(spark, table_ref: str) -> tuple[object, Path]:  # type: ignore[no-untyped-def]
    """(the Java DataFile of one live data file, a byte-identical copy of it under the data directory): the file a
    writer or a compaction has written but not committed yet."""
    jtable = load_table(spark, table_ref)
    jtable.refresh()
    original = next(iter(data_files(jtable)))
    src = local(str(original.location()))
    dst = src.with_name(f"uncommitted-{uuid.uuid4().hex}.parquet")
    shutil.copyfile(src, dst)  # a fresh mtime: written now
    return original, dst


@pytest.mark.parametrize("version,evolve", [(2, False), (3, False), (2, True), (3, True)])
def test_every_action_keeps_the_rows(spark, sqlite_catalog: CatalogConfig, tmp_path: Path, version: int,  # type: ignore[no-untyped-def]
                                     evolve: bool) -> None:
    spec = WorkloadSpec(seed=41 + version, format_version=version, partitioning="days_ts", commits=3,
                        rows_per_commit=20, evolve_spec=evolve)
    work = generate(spark, sqlite_catalog, f"mt.t{version}{'e' if evolve else ''}", spec)
    identity, table = py_load_table(sqlite_catalog, ".".join(work.identifier))
    before = read_table(table)
    assert before.rows == work.expected_rows
    snapshots_before = len(table.metadata.snapshots)
    orphan = _plant_orphan(table.metadata.location)
    with _ledger(tmp_path) as ledger:
        report = maintain_table(sqlite_catalog, ".".join(work.identifier), spark=spark, overrides=EVERYTHING,
                                ledger=ledger)
        assert report.plan.actions == (A.EXPIRE_SNAPSHOTS, A.REWRITE_MANIFESTS, A.DELETE_ORPHAN_FILES), report.plan.to_json()
        assert report.status == "succeeded", [r.to_dict() for r in report.results]
        by_action = {r.action: r for r in report.results}
        expired = by_action[A.EXPIRE_SNAPSHOTS]
        assert expired.detail["snapshots_expired"] == snapshots_before - 1
        assert expired.files_removed > 0 and expired.bytes_removed and expired.bytes_removed > 0
        assert by_action[A.REWRITE_MANIFESTS].detail["manifests_rewritten"] >= 2
        orphans = by_action[A.DELETE_ORPHAN_FILES]
        assert orphans.files_removed == 1 and orphans.bytes_removed == 300 and not orphan.exists()
        [run] = ledger.maintenance_runs(identity.dotted, catalog=identity.catalog)
        assert run.status == "succeeded"
        recorded = {a.action: a for a in ledger.maintenance_actions(run.run_id)}
        assert recorded["delete_orphan_files"].files_removed == 1
        assert recorded["expire_snapshots"].bytes_removed == expired.bytes_removed
    _, table = py_load_table(sqlite_catalog, ".".join(work.identifier))
    after = read_table(table)
    # the newest snapshot kept by min-snapshots-to-keep=1, plus the manifest rewrite's REPLACE on top of it
    assert len(table.metadata.snapshots) == 2
    assert after.rows == before.rows
    assert spark_rows(spark, work.table) == before.rows


def test_orphans_spare_an_uncommitted_compaction_and_a_writers_staged_files(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:
    # Inserts only: replacing a file by its copy then keeps every row (no delete names the original's path).
    spec = WorkloadSpec(seed=5, format_version=2, partitioning="days_ts", commits=2, rows_per_commit=20,
                        delete_fraction=0.0, update_fraction=0.0, reinsert_fraction=0.0, use_equality_deletes=False,
                        noise_eq_deletes=False)
    work = generate(spark, sqlite_catalog, "mt.orphans", spec)
    name = ".".join(work.identifier)
    identity, table = py_load_table(sqlite_catalog, name)
    before = read_table(table)
    orphan = _plant_orphan(table.metadata.location)
    with _ledger(tmp_path) as ledger:
        # (a) a compaction run in flight that has written its replacement file, (b) a writer that staged a file
        run_id = ledger.start_run(identity.dotted, identity.catalog, status=RunStatus.RUNNING)
        lease = ledger.acquire_write_lease(identity.dotted, identity.catalog, "test-writer")
        time.sleep(0.05)
        compacted_from, compaction_file = _copy_data_file(spark, work.table)
        appended_from, writer_file = _copy_data_file(spark, work.table)

        report = maintain_table(sqlite_catalog, name, spark=spark, overrides=ORPHANS_ONLY, ledger=ledger)
        [result] = report.results
        assert result.status == "succeeded" and result.files_removed == 1, result.to_dict()
        assert not orphan.exists()
        assert compaction_file.exists() and writer_file.exists()
        assert "in-flight" in report.plan.decision(A.DELETE_ORPHAN_FILES).reason

        # both commit afterwards: the compaction replaces a file by its identical copy, the writer appends its file
        jv = spark.sparkContext._jvm
        jtable = load_table(spark, work.table)
        jtable.refresh()
        spec_of = jtable.specs()
        replacement = jv.org.apache.iceberg.DataFiles.builder(spec_of.get(compacted_from.specId())) \
            .copy(compacted_from).withPath(f"file:{compaction_file}").build()
        rewrite = jtable.newRewrite()
        rewrite.deleteFile(compacted_from)
        rewrite.addFile(replacement)
        rewrite.commit()
        ledger.finish_run(run_id, RunStatus.SUCCEEDED, 0)
        staged = jv.org.apache.iceberg.DataFiles.builder(spec_of.get(appended_from.specId())) \
            .copy(appended_from).withPath(f"file:{writer_file}").build()
        jtable.newAppend().appendFile(staged).commit()
        ledger.release_write_lease(lease)
    _, table = py_load_table(sqlite_catalog, name)
    after = read_table(table)
    assert after.row_count == before.row_count + int(appended_from.recordCount())


@pytest.mark.parametrize("prefix", ["s3a://bucket", "s3://bucket/"])
def test_orphan_removal_refuses_a_scheme_mismatch(spark, sqlite_catalog: CatalogConfig, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                 prefix: str) -> None:
    spec = WorkloadSpec(seed=9, format_version=2, partitioning="days_ts", commits=1, rows_per_commit=10)
    work = generate(spark, sqlite_catalog, "mt.schemes", spec)
    original, copy = _copy_data_file(spark, work.table)
    old = time.time() - 86400
    os.utime(copy, (old, old))
    # Metadata references the copy under another scheme (and bucket authority): the same file to a human, not
    # provably the same storage to Iceberg.
    jv = spark.sparkContext._jvm
    jtable = load_table(spark, work.table)
    other = jv.org.apache.iceberg.DataFiles.builder(jtable.specs().get(original.specId())).copy(original) \
        .withPath(f"{prefix}{copy}").build()
    jtable.newAppend().appendFile(other).commit()
    with _ledger(tmp_path) as ledger:
        report = maintain_table(sqlite_catalog, ".".join(work.identifier), spark=spark, overrides=ORPHANS_ONLY,
                                ledger=ledger)
        [result] = report.results
        assert result.status == "refused", result.to_dict()
        assert "another scheme or authority" in (result.error or "")
        assert report.exit_code == 11
        [action] = ledger.maintenance_actions(report.run_id or "")
        assert action.status == "refused"
    assert copy.exists()


def test_expiry_during_a_compaction_run_leaves_the_run_validated(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path) -> None:
    spec = WorkloadSpec(seed=11, format_version=2, partitioning="days_ts", commits=3, rows_per_commit=20)
    work = generate(spark, sqlite_catalog, "mt.during", spec)
    name = ".".join(work.identifier)
    state = inspect_table(sqlite_catalog, name)
    compaction_plan = make_plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MAJOR,
                                dt.datetime.now(dt.timezone.utc))
    assert compaction_plan.groups
    with _ledger(tmp_path) as ledger:
        run_id = ledger.start_run(plan=compaction_plan, status=RunStatus.RUNNING)
        # a writer commits after the plan: the plan's base is no longer the head and old enough to expire
        time.sleep(0.05)
        spark.sql(f"INSERT INTO {work.table} SELECT * FROM {work.table} LIMIT 3")
        report = maintain_table(sqlite_catalog, name, spark=spark, ledger=ledger,
                                overrides={"max_snapshot_age_ms": 1, "rewrite_manifests_enabled": False,
                                           "clock_skew_s": 0})
        assert compaction_plan.base_snapshot_id in report.plan.protected_snapshot_ids
        assert report.status == "succeeded" and report.results, report.plan.to_json()
        _, table = py_load_table(sqlite_catalog, name)
        assert table.metadata.snapshot_by_id(compaction_plan.base_snapshot_id) is not None
        results = [run_group(spark, compaction_plan, g.group_id, level=ValidationLevel.parse("count"))
                   for g in compaction_plan.groups]
        ledger.finish_run(run_id, RunStatus.SUCCEEDED, 0)
    partitions = [p for r in results for p in r.partitions]
    assert partitions and all(p.status == COMMITTED for p in partitions), [(p.status, p.error) for p in partitions]
    assert all(p.validation.get("result") == "passed" for p in partitions), [p.validation for p in partitions]


def test_cli_maintain_dry_run_and_plan_show_the_decisions(spark, sqlite_catalog: CatalogConfig, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                          monkeypatch, capsys) -> None:
    from compaction.cli import main as cli_main

    spec = WorkloadSpec(seed=3, format_version=2, partitioning="days_ts", commits=2, rows_per_commit=10)
    work = generate(spark, sqlite_catalog, "mt.cli", spec)
    home = tmp_path / "pyiceberg-home"
    home.mkdir()
    lines = ["catalog:", f"  {sqlite_catalog.name}:"] + [f"    {k}: '{v}'" for k, v in sqlite_catalog.properties.items()]
    (home / ".pyiceberg.yaml").write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("PYICEBERG_HOME", str(home))
    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", f"sqlite:///{tmp_path / 'cli-ledger.db'}")
    name = ".".join(work.identifier)
    assert cli_main(["--catalog", sqlite_catalog.name, "maintain", name, "--dry-run",
                     "--set", "history.expire.max-snapshot-age-ms=1"]) == 0
    out = capsys.readouterr().out
    assert "expire_snapshots" in out and "RUN" in out and "orphan removal off" in out and "dry run" in out
    assert cli_main(["--catalog", sqlite_catalog.name, "plan", name, "--no-record"]) == 0
    out = capsys.readouterr().out
    assert "maintenance m-" in out and "rewrite_manifests" in out
    assert cli_main(["--catalog", sqlite_catalog.name, "maintain", name, "--dry-run", "--set", "nope=1"]) == 2
    with Ledger.open(f"sqlite:///{tmp_path / 'cli-ledger.db'}") as ledger:
        [run] = ledger.maintenance_runs(name, catalog=sqlite_catalog.name)
        assert run.dry_run and run.status == "succeeded"


def test_manifest_rewrite_that_races_a_commit_is_retried_on_the_new_table(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    """The maintenance soak's failure (3 of 18 runs): a commit that replaces a manifest between a manifest rewrite's
    read and its commit makes Iceberg refuse the rewrite with a ValidationException it does not retry. Staged here
    deterministically with Iceberg's own API; the retry rewrites the table as it is after the commit."""
    from compaction.spark.maintenance import is_manifest_conflict, retry_on_manifest_conflict

    spec = WorkloadSpec(seed=13, format_version=2, partitioning="days_ts", commits=3, rows_per_commit=20,
                        delete_fraction=0.0, update_fraction=0.0, reinsert_fraction=0.0, use_equality_deletes=False,
                        noise_eq_deletes=False)
    work = generate(spark, sqlite_catalog, "mt.race", spec)
    name = ".".join(work.identifier)
    jtable = load_table(spark, work.table)
    jtable.refresh()
    # a manifest and one data file it holds: deleting the file makes Iceberg rewrite that manifest
    doomed = jtable.currentSnapshot().dataManifests(jtable.io()).get(0)
    files = spark.sparkContext._jvm.org.apache.iceberg.ManifestFiles.read(doomed, jtable.io(), jtable.specs()).iterator()
    assert files.hasNext()
    victim = files.next().copy()
    files.close()
    _, before_table = py_load_table(sqlite_catalog, name)
    expected = read_table(before_table).row_count - int(victim.recordCount())
    attempts: list[str] = []

    def attempt():  # type: ignore[no-untyped-def]
        if not attempts:
            attempts.append("stale")
            stale = jtable.rewriteManifests()
            stale.deleteManifest(doomed)
            other = load_table(spark, work.table)  # a concurrent writer: its delete rewrites the doomed manifest
            other.refresh()
            other.newDelete().deleteFile(victim).commit()
            stale.commit()  # raises: the manifest it replaces is gone
            raise AssertionError("the stale rewrite committed")
        attempts.append("fresh")
        actions = spark.sparkContext._jvm.org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
        return actions.rewriteManifests(jtable).execute()

    result, used, conflict = retry_on_manifest_conflict(attempt, jtable.refresh, pause_s=lambda _n: 0.0)
    assert attempts == ["stale", "fresh"] and used == 2
    assert result is not None and conflict and "could not be found in the latest snapshot" in conflict
    _, after_table = py_load_table(sqlite_catalog, name)
    after = read_table(after_table)
    assert after.row_count == expected
    assert after_table.current_snapshot().summary.operation.value == "replace"  # the fresh rewrite committed

    # Every attempt losing: nothing committed, reported as a conflict (the caller defers); other errors propagate.
    def always_stale():  # type: ignore[no-untyped-def]
        raise RuntimeError(f"py4j: org.apache.iceberg.exceptions.ValidationException: {conflict}")

    assert is_manifest_conflict(RuntimeError(f"ValidationException: {conflict}"))
    assert retry_on_manifest_conflict(always_stale, lambda: None, attempts=3, pause_s=lambda _n: 0.0)[:2] == (None, 3)
    with pytest.raises(RuntimeError, match="other"):
        retry_on_manifest_conflict(lambda: (_ for _ in ()).throw(RuntimeError("other failure")), lambda: None)


def test_storage_profile_classifies_every_file_by_what_references_it(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    """The maintenance soak's breakdown of storage: the current snapshot's files are live, files only an older
    snapshot references are retained history, and an unreferenced file is young or old by the orphan age."""
    from icecompact_testing.maintenance_soak import STORAGE_CLASSES, list_storage, storage_profile

    ref = f"{sqlite_catalog.name}.mt.profile"
    spark.sql(f"CREATE TABLE {ref} (id bigint, grp int) USING iceberg PARTITIONED BY (grp) "
              "TBLPROPERTIES ('format-version' = '2')")
    spark.sql(f"INSERT INTO {ref} VALUES (1, 0), (2, 1)")
    spark.sql(f"INSERT INTO {ref} VALUES (3, 0)")
    replaced = {str(local(r[0])) for r in spark.sql(f"SELECT file_path FROM {ref}.files WHERE partition.grp = 0").collect()}
    spark.sql(f"INSERT OVERWRITE {ref} PARTITION (grp = 0) VALUES (4)")  # grp=0's two files: history only now
    location = str(sqlite_catalog.load().load_table("mt.profile").metadata.location)
    old = _plant_orphan(location, age_s=7200)
    young = _plant_orphan(location, age_s=0)
    profile = storage_profile(spark, ref, location, orphan_age_s=3600)
    assert set(profile) == set(STORAGE_CLASSES)
    current = {str(local(r[0])): int(r[1]) for r in spark.sql(f"SELECT file_path, file_size_in_bytes FROM {ref}.files").collect()}
    assert profile["live"] == {"files": len(current), "bytes": sum(current.values())}
    sizes = {p: b for p, b, _m in list_storage(location)}
    assert profile["unreferenced_old"] == {"files": 1, "bytes": sizes[str(old)]}
    assert profile["unreferenced_young"]["files"] >= 1 and str(young) in sizes
    assert profile["retained_history"]["bytes"] >= sum(sizes[p] for p in replaced)
    assert sum(v["bytes"] for v in profile.values()) == sum(sizes.values())


@pytest.mark.parametrize("version", [2, 3])
def test_expiry_on_the_driver_removes_what_the_spark_action_removes(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig, tmp_path: Path, version: int) -> None:
    """Two identical tables (same seeded workload): one expired by Iceberg's Spark action, the other by the table
    API on the driver (what large histories get): the same snapshots go, the same files by kind, the rows stay."""
    spec = WorkloadSpec(seed=61 + version, format_version=version, partitioning="days_ts", commits=4,
                        rows_per_commit=20)
    results = {}
    for executor, threshold in (("spark", 10**9), ("driver", 0)):
        work = generate(spark, sqlite_catalog, f"mt.exp{executor}{version}", spec)
        name = ".".join(work.identifier)
        _, table = py_load_table(sqlite_catalog, name)
        before = read_table(table)
        with _ledger(tmp_path) as ledger:
            report = maintain_table(sqlite_catalog, name, spark=spark, ledger=ledger, overrides={
                "max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_enabled": False,
                "expire_driver_min_snapshots": threshold})
        [result] = report.results
        assert result.status == "succeeded" and result.detail["executor"] == executor, result.to_dict()
        _, table = py_load_table(sqlite_catalog, name)
        assert len(table.metadata.snapshots) == 1
        assert read_table(table).rows == before.rows == work.expected_rows
        results[executor] = result
    spark_detail, driver_detail = results["spark"].detail, results["driver"].detail
    assert driver_detail["snapshots_expired"] == spark_detail["snapshots_expired"] > 0
    assert driver_detail["data_and_delete_files"] == (spark_detail["data_files"] + spark_detail["position_delete_files"]
                                                      + spark_detail["equality_delete_files"])
    assert (driver_detail["manifests"], driver_detail["manifest_lists"]) == (
        spark_detail["manifests"], spark_detail["manifest_lists"])
    assert results["driver"].files_removed == results["spark"].files_removed > 0
