"""The DAG's Spark step on a real Spark standalone cluster (master + worker on 127.0.0.1 from the installed pyspark):
the jars, the Spark conf, the catalog secret (properties file) and the compaction package (--py-files zip) ship."""

from __future__ import annotations

from pathlib import Path

import pytest
from af_support import fresh_dag, task_states

from compaction.catalog import CatalogConfig
from compaction.ledger import Ledger, OutcomeStatus
from icecompact_testing.oracle import read_table
from icecompact_testing.standalone import start_cluster
from compaction.demo.workload import WorkloadSpec, generate


@pytest.fixture()
def standalone(tmp_path: Path):  # type: ignore[no-untyped-def]
    cluster = start_cluster(tmp_path / "spark-standalone")
    yield cluster
    cluster.stop()


def test_dag_compacts_on_a_standalone_cluster(spark, postgres_catalog: CatalogConfig, postgres_cluster, airflow_db: Path,
                                             catalog_conn, standalone, monkeypatch: pytest.MonkeyPatch,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    catalog_conn(postgres_catalog)  # the catalog's password lives in the Airflow connection's password field
    monkeypatch.setenv("ICECOMPACT_SPARK_MASTER", standalone.master_url)  # no spark_default: the DAG's default
    workload = generate(spark, postgres_catalog, "sa.events",
                        WorkloadSpec(seed=24, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    before = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes

    dag_run = fresh_dag().test(run_conf={"tables": ["sa.events"], "catalog": postgres_catalog.name, "mode": "major"})
    states = task_states(dag_run)
    log = "".join(capfd.readouterr())
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", (states, log[-5000:])
    assert states[("compact", 0)] == "success"

    after = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes
    with Ledger.open() as ledger:
        (run,) = [r for r in ledger.runs(limit=500) if r.airflow_run_id == dag_run.run_id]
        assert all(o.status is OutcomeStatus.COMMITTED for o in ledger.outcomes(run.run_id))

    # The job ran on the cluster, and what the executors fetched is what spark-submit shipped.
    command = next(line for line in log.splitlines() if "Spark-Submit cmd:" in line)
    assert f"--master {standalone.master_url}" in command
    assert "--properties-file" in command and "jdbc.password" not in command
    # (the test cluster's password is also a prefix of the test session's temp dir names: drop those first)
    assert postgres_cluster.password not in log.replace("icecompact-tests", ""), "the password reached the log"
    shipped = {p.name for p in standalone.executor_files()}
    assert any(n.startswith("compaction-") and n.endswith(".zip") for n in shipped), shipped  # --py-files
    assert any(n.startswith("iceberg-spark-runtime") and n.endswith(".jar") for n in shipped), shipped  # --jars
