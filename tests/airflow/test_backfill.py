"""`airflow backfill create` for real: a scheduler and an api-server run the queued runs, and each backfill run plans
exactly the partitions of its own day (dry runs: the planning is what is under test, no Spark job is needed)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import threading
from pathlib import Path

from af_support import AIRFLOW_HOME, ApiServer, airflow_cli, catalog_connection_env
from icecompact_testing.airflow_processes import AirflowProcesses

from compaction.catalog import CatalogConfig
from compaction.ledger import Ledger, RunStatus
from compaction.demo.workload import WorkloadSpec, generate

EPOCH = _dt.date(1970, 1, 1)


def _backfill_runs(table: str) -> list:  # type: ignore[type-arg]
    with Ledger.open() as ledger:
        return [(r, json.loads(ledger.plan(r.plan_id).plan_json)) for r in ledger.runs(table, limit=50)
                if (r.airflow_run_id or "").startswith("backfill__")]


def _dag_run_states() -> dict[str, str]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        runs = session.scalars(select(DagRun).where(DagRun.dag_id == "iceberg_compaction",
                                                    DagRun.run_id.like("backfill__%")))
        return {r.run_id: str(getattr(r.state, "value", r.state)) for r in runs}


def test_backfill_create_compacts_exactly_its_days(spark, sqlite_catalog: CatalogConfig, airflow_db: Path) -> None:
    generate(spark, sqlite_catalog, "bk.events",
             WorkloadSpec(seed=25, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=3))
    server = ApiServer()
    env = {**catalog_connection_env(sqlite_catalog),
           "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{server.url}/execution/",
           "AIRFLOW__SCHEDULER__USE_JOB_SCHEDULE": "False"}  # only the backfill's runs, no scheduled run
    airflow = AirflowProcesses(AIRFLOW_HOME, {**os.environ, **env})
    try:
        server.wait_ready()
        airflow_cli("dags", "reserialize", env=env)
        scheduler = airflow.start("scheduler", "scheduler")
        airflow_cli("dags", "unpause", "iceberg_compaction", env=env)
        conf = {"tables": ["bk.events"], "catalog": sqlite_catalog.name, "mode": "major", "dry_run": True}
        airflow_cli("backfill", "create", "--dag-id", "iceberg_compaction", "--from-date", "2024-01-01",
                    "--to-date", "2024-01-02", "--dag-run-conf", json.dumps(conf), env=env)
        for _ in range(1200):  # until both DAG runs have finished (bounded wait, no timing asserted)
            states = _dag_run_states()
            if len(states) == 2 and set(states.values()) <= {"success", "failed"}:
                break
            assert scheduler.poll() is None, (AIRFLOW_HOME / "scheduler.log").read_text()[-3000:]
            threading.Event().wait(0.5)
        else:
            raise AssertionError(f"backfill runs did not finish: {(AIRFLOW_HOME / 'scheduler.log').read_text()[-3000:]}")
    finally:
        airflow_cli("dags", "pause", "iceberg_compaction", check=False)
        airflow.stop()
        server.stop()

    assert set(states.values()) == {"success"}, states
    runs = _backfill_runs("bk.events")
    assert {r.airflow_run_id for r, _ in runs} == set(states)
    planned = {}
    for run, plan in runs:
        assert run.status is RunStatus.SUCCEEDED and run.dry_run
        day = _dt.date.fromisoformat(run.airflow_run_id[len("backfill__"):][:10]) - _dt.timedelta(days=1)
        after = day + _dt.timedelta(days=1)
        assert plan["partition_filter"]["text"] == f"ts >= '{day}T00:00:00+00:00' and ts < '{after}T00:00:00+00:00'"
        days = {EPOCH + _dt.timedelta(days=f["value"]) for d in plan["decisions"] for f in d["partition"]["fields"]}
        assert days == {day}, (run.airflow_run_id, days)
        planned[run.airflow_run_id] = day
    assert sorted(planned.values()) == [_dt.date(2024, 1, 1), _dt.date(2024, 1, 2)]  # 2024-01-03 untouched
