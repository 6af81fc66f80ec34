"""The compaction DAG and the overview on each catalog server users run besides SeaweedFS's: Nessie and Iceberg's
REST reference server (tables on the session's SeaweedFS) and a Hive Metastore. The catalog exists only as an Airflow
connection; ``dag.test()`` runs plan, a real spark-submit of the compaction and the record; the overview (the data
the plugin's page renders) then shows the table with that run."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from compaction.catalog import CatalogConfig
from compaction.demo.workload import WorkloadSpec, generate
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.fleet import PointerCache, build_overview
from compaction.spark.session import register_catalog
from icecompact_testing.catalog_servers import SERVERS
from icecompact_testing.oracle import read_table
from af_support import fresh_dag, task_states

KINDS = (*SERVERS, "hive")


@pytest.fixture(params=KINDS)
def server_catalog(request, spark) -> CatalogConfig:  # type: ignore[no-untyped-def]
    name = f"afs_{request.param.replace('-', '_')}_{uuid.uuid4().hex[:6]}"
    if request.param == "hive":
        catalog = request.getfixturevalue("hive_metastore").catalog(name)
    else:
        catalog = request.getfixturevalue("catalog_servers")(request.param).catalog(name)
    register_catalog(spark, catalog)
    return catalog


def test_dag_test_compacts_and_the_overview_shows_the_run(spark, server_catalog: CatalogConfig,  # type: ignore[no-untyped-def]
                                                          airflow_db: Path, catalog_conn: Any) -> None:
    catalog_conn(server_catalog)
    namespace = f"afs{uuid.uuid4().hex[:6]}"
    workload = generate(spark, server_catalog, f"{namespace}.events",
                        WorkloadSpec(seed=29, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    before = read_table(server_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"

    dag_run = fresh_dag().test(run_conf={"tables": [f"{namespace}.*"], "catalog": server_catalog.name,
                                         "mode": "major"})
    states = task_states(dag_run)
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", states
    assert states[("compact", 0)] == "success", states
    after = read_table(server_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes

    table_ref = f"{namespace}.events"
    with Ledger.open() as ledger:
        (run,) = [r for r in ledger.runs(limit=500) if r.airflow_run_id == dag_run.run_id]
        assert run.status is RunStatus.SUCCEEDED and run.catalog == server_catalog.name and run.table_ref == table_ref
        outcomes = ledger.outcomes(run.run_id)
        assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.validation_result == "passed"
                                for o in outcomes)
        overview = build_overview(server_catalog, ledger, budget_s=None, pointer_cache=PointerCache(workers=2))
    (row,) = [r for r in overview.tables if r.table_ref == table_ref]
    assert row.error is None and row.current and row.sample is not None
    assert row.last_run is not None and row.last_run.run_id == run.run_id
