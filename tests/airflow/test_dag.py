"""The compaction DAG under real Airflow: parsing, dag.test() with real spark-submit, backfill semantics, bad params."""

from __future__ import annotations

import datetime as _dt
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionKind
from compaction.ledger import Ledger, OutcomeStatus, RunStatus, RunTrigger
from compaction.testing.oracle import read_table
from compaction.testing.workload import WorkloadSpec, generate
from af_support import REPO, fresh_dag, task_states

UTC = _dt.timezone.utc


def _runs_of(dag_run_id: str) -> list:  # type: ignore[type-arg]
    with Ledger.open() as ledger:
        return [r for r in ledger.runs(limit=500) if r.airflow_run_id == dag_run_id]


def test_dagbag_parses_without_heavy_imports(airflow_db: Path) -> None:
    code = (
        "import sys, json\n"
        "from airflow.dag_processing.dagbag import DagBag\n"
        f"bag = DagBag(dag_folder={str(REPO / 'dags')!r})\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'pyiceberg', 'pyarrow', 'py4j'))\n"
        "print(json.dumps({'errors': {k: str(v) for k, v in bag.import_errors.items()}, 'dags': sorted(bag.dag_ids),"
        " 'heavy': heavy, 'tasks': sorted(bag.get_dag('iceberg_compaction').task_ids)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    assert parsed["errors"] == {}
    assert parsed["dags"] == ["iceberg_compaction"]
    assert parsed["heavy"] == [], f"parsing imported {parsed['heavy']}"
    assert parsed["tasks"] == ["compact", "discover", "inspect", "job_groups", "plan", "record", "summary"]
    dag = fresh_dag()
    assert dag.catchup is False
    assert dag.get_task("compact").pool == "icecompact_spark"
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"


def test_dag_test_compacts_with_spark_submit_then_has_nothing_to_do(spark, sqlite_catalog: CatalogConfig,
                                                                    airflow_db: Path, catalog_conn) -> None:
    catalog_conn(sqlite_catalog)
    workload = generate(spark, sqlite_catalog, "af.events",
                        WorkloadSpec(seed=21, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    table = sqlite_catalog.load().load_table(workload.identifier)
    before = read_table(table)
    assert before.applicable_deletes, "the scenario must start with deletes"
    conf = {"tables": ["af.*"], "catalog": sqlite_catalog.name, "mode": "major"}

    dag_run = fresh_dag().test(run_conf=conf)
    states = task_states(dag_run)
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", states
    compact = sorted(i for (t, i) in states if t == "compact")
    assert compact and compact[0] == 0 and all(states[("compact", i)] == "success" for i in compact)

    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes
    (run,) = _runs_of(dag_run.run_id)
    assert run.trigger is RunTrigger.AIRFLOW and run.airflow_dag_id == "iceberg_compaction"
    assert run.status is RunStatus.SUCCEEDED and run.table_ref == "af.events"
    with Ledger.open() as ledger:
        outcomes = ledger.outcomes(run.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.kind is CompactionKind.MAJOR for o in outcomes)
    assert all(o.delete_files_before and o.delete_files_after == 0 for o in outcomes)

    second = fresh_dag().test(run_conf=conf)
    states = task_states(second)
    assert str(getattr(second.state, "value", second.state)) == "success", states
    assert [i for (t, i) in states if t == "compact"] == [-1], "no map index: no Spark job was started"
    assert states[("compact", -1)] == "skipped"
    (run2,) = _runs_of(second.run_id)
    assert run2.status is RunStatus.SUCCEEDED
    with Ledger.open() as ledger:
        assert ledger.outcomes(run2.run_id) == []
    assert sqlite_catalog.load().load_table(workload.identifier).current_snapshot().snapshot_id == \
        after.snapshot_id
