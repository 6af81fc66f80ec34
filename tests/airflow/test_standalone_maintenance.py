"""The maintenance DAG on a real Spark standalone cluster (master + worker on 127.0.0.1 from the installed pyspark):
the worker plans and records, Iceberg's actions run in a spark-submit job on the cluster (``python -m compaction.spark
maintain``), never in the worker process; snapshots expire, the orphan goes, the rows stay, the ledger has it all."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest
from af_support import fresh_dag, task_states

from compaction.catalog import CatalogConfig
from compaction.ledger import Ledger
from icecompact_testing.oracle import read_table
from icecompact_testing.standalone import start_cluster
from compaction.demo.workload import WorkloadSpec, generate

#: Every action planned to run: expire all but the newest snapshot, rewrite manifests, remove orphans of any age.
EVERYTHING = {"max_snapshot_age_ms": 1, "min_snapshots_to_keep": 1, "rewrite_manifests_small_count": 2,
              "orphans_enabled": True, "orphans_older_than_s": 0}


@pytest.fixture()
def standalone(tmp_path: Path):  # type: ignore[no-untyped-def]
    cluster = start_cluster(tmp_path / "spark-standalone")
    yield cluster
    cluster.stop()


def _plant_orphan(location: str) -> Path:
    """A file under the table's data folder that no metadata references, written a day ago."""
    root = Path(urlparse(location).path if location.startswith("file:") else location)
    path = root / "data" / f"{uuid.uuid4().hex}-orphan.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not referenced by any metadata" * 10)
    old = time.time() - 86400
    os.utime(path, (old, old))
    return path


def test_maintenance_dag_runs_the_plan_on_a_standalone_cluster(  # type: ignore[no-untyped-def]
        spark, postgres_catalog: CatalogConfig, postgres_cluster, airflow_db: Path, catalog_conn, standalone,
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    catalog_conn(postgres_catalog)  # the catalog's password lives in the Airflow connection's password field
    monkeypatch.setenv("ICECOMPACT_SPARK_MASTER", standalone.master_url)  # no spark_default: the embedded default
    workload = generate(spark, postgres_catalog, "smt.events",
                        WorkloadSpec(seed=31, partitioning="days_ts", commits=3, rows_per_commit=20, days_span=2))
    table = postgres_catalog.load().load_table(workload.identifier)
    before = read_table(table)
    assert before.rows == workload.expected_rows
    snapshots_before = len(table.metadata.snapshots)
    assert snapshots_before > 2
    orphan = _plant_orphan(table.metadata.location)
    name = ".".join(workload.identifier)

    dag_run = fresh_dag("iceberg_maintenance").test(
        run_conf={"tables": [name], "catalog": postgres_catalog.name, "overrides": EVERYTHING})
    states = task_states(dag_run)
    log = "".join(capfd.readouterr())
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", (states, log[-5000:])
    assert states[("maintain", 0)] == "success"

    # What maintenance must do: snapshots expired, the orphan removed, the rows unchanged.
    table = postgres_catalog.load().load_table(workload.identifier)
    assert len(table.metadata.snapshots) == 2  # the newest kept, plus the manifest rewrite's snapshot on top
    assert not orphan.exists()
    assert read_table(table).rows == before.rows

    # The ledger has the run and every action's removals (read back from the job's result file).
    with Ledger.open() as ledger:
        [run] = ledger.maintenance_runs(name, catalog=postgres_catalog.name)
        assert run.status == "succeeded" and not run.dry_run, run
        recorded = {a.action: a for a in ledger.maintenance_actions(run.run_id)}
    assert set(recorded) == {"expire_snapshots", "rewrite_manifests", "delete_orphan_files"}, recorded
    assert all(a.status == "succeeded" for a in recorded.values()), recorded
    expired = recorded["expire_snapshots"]
    assert expired.detail["snapshots_expired"] == snapshots_before - 1
    assert expired.files_removed > 0 and expired.bytes_removed and expired.bytes_removed > 0
    assert recorded["rewrite_manifests"].detail["manifests_rewritten"] >= 2
    assert recorded["delete_orphan_files"].files_removed == 1 and recorded["delete_orphan_files"].bytes_removed == 300

    # It ran as a spark-submit job on the cluster: the job's code and jars were shipped to the cluster's executors,
    # and the catalog's password went through the properties file, never argv or the log.
    assert f"spark-submit ({standalone.master_url})" in log
    shipped = {p.name for p in standalone.executor_files()}
    assert any(n.startswith("compaction-") and n.endswith(".zip") for n in shipped), shipped  # --py-files
    assert any(n.startswith("iceberg-spark-runtime") and n.endswith(".jar") for n in shipped), shipped  # --jars
    # (the test cluster's password is also a prefix of the test session's temp dir names: drop those first)
    assert postgres_cluster.password not in log.replace("icecompact-tests", ""), "the password reached the log"
