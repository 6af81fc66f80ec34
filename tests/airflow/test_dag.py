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
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate
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
    assert parsed["dags"] == ["iceberg_compaction", "iceberg_compaction_on_health", "iceberg_maintenance"]
    assert parsed["heavy"] == [], f"parsing imported {parsed['heavy']}"
    assert parsed["tasks"] == ["compact", "compact_resident", "discover", "inspect", "job_groups", "plan", "record",
                               "run_failed", "summary"]
    dag = fresh_dag()
    assert dag.catchup is False
    # record and summary run whatever happened (ALL_DONE), so a leaf fails the DAG run when any task failed (the soak
    # saw a run whose discover failed during a database restart end 'success').
    watcher = dag.get_task("run_failed")
    assert str(watcher.trigger_rule) in ("one_failed", "TriggerRule.ONE_FAILED")
    assert watcher.upstream_task_ids == set(dag.task_ids) - {"run_failed"}
    assert dag.get_task("discover").retries == 2 and dag.get_task("compact").retries == 0
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


def test_dag_test_on_the_resident_executor_waits_deferred(spark, sqlite_catalog: CatalogConfig, airflow_db: Path,
                                                         catalog_conn) -> None:
    """executor=resident: no spark-submit task; compact_resident queues the plans, starts the catalog's executor and
    defers (dags test runs its trigger in line); record reads the results from the queue."""
    from compaction.ops.executor import stop_executors

    catalog_conn(sqlite_catalog)
    workload = generate(spark, sqlite_catalog, "afr.events",
                        WorkloadSpec(seed=23, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes
    conf = {"tables": ["afr.*"], "catalog": sqlite_catalog.name, "mode": "major", "executor": "resident"}
    try:
        dag_run = fresh_dag().test(run_conf=conf)
        states = task_states(dag_run)
        assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", states
        assert states[("compact_resident", -1)] == "success"
        assert states[("compact", -1)] == "skipped", "no spark-submit task ran"
        after = read_table(sqlite_catalog.load().load_table(workload.identifier))
        assert after.rows == before.rows == workload.expected_rows and not after.applicable_deletes
        (run,) = _runs_of(dag_run.run_id)
        assert run.status is RunStatus.SUCCEEDED
        with Ledger.open() as ledger:
            outcomes = ledger.outcomes(run.run_id)
            (item,) = ledger.work_items(run_id=run.run_id)
            executors = ledger.executors(catalog=sqlite_catalog.name)
        assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.validation_result == "passed"
                                for o in outcomes)
        assert item.status.value == "done" and len(executors) == 1 and executors[0].groups_run >= 1
    finally:
        with Ledger.open() as ledger:
            stop_executors(ledger, sqlite_catalog.name, progress=lambda _m: None)


def test_health_dag_run_by_hand_plans_queues_waits_deferred_and_records(spark, sqlite_catalog: CatalogConfig,
                                                                        airflow_db: Path, catalog_conn) -> None:
    """iceberg_compaction_on_health's one task, run by hand (an asset event names its tables the same way): plan,
    queue for the resident executor, defer, record."""
    from compaction.ops.executor import stop_executors

    catalog_conn(sqlite_catalog)
    workload = generate(spark, sqlite_catalog, "afh.events",
                        WorkloadSpec(seed=25, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    conf = {"tables": ["afh.*"], "catalog": sqlite_catalog.name, "policy": {"major.delete-ratio": 0.01}}
    try:
        dag_run = fresh_dag("iceberg_compaction_on_health").test(run_conf=conf)
        states = task_states(dag_run)
        assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", states
        assert states == {("compact", -1): "success"}
        after = read_table(sqlite_catalog.load().load_table(workload.identifier))
        assert after.rows == before.rows == workload.expected_rows and not after.applicable_deletes
        (run,) = _runs_of(dag_run.run_id)
        assert run.status is RunStatus.SUCCEEDED and run.airflow_dag_id == "iceberg_compaction_on_health"
        with Ledger.open() as ledger:
            assert ledger.work_items(run_id=run.run_id)[0].status.value == "done"
            assert all(o.validation_result == "passed" for o in ledger.outcomes(run.run_id))
    finally:
        with Ledger.open() as ledger:
            stop_executors(ledger, sqlite_catalog.name, progress=lambda _m: None)


def test_dag_test_compacts_a_rest_catalog_table_on_s3(spark, rest_catalog: CatalogConfig, airflow_db: Path,
                                                     catalog_conn) -> None:
    # The catalog exists only as the Airflow connection (conftest keeps PYICEBERG_CATALOG__* out of the environment):
    # every task, and the spark-submit of compact, resolve it from there.
    from af_support import catalog_connection_env

    (connection,) = catalog_connection_env(rest_catalog).values()
    defined = json.loads(connection)
    assert defined["extra"]["type"] == "rest" and "credential" not in defined["extra"]
    assert f"{defined['login']}:{defined['password']}" == rest_catalog.properties["credential"]
    catalog_conn(rest_catalog)
    workload = generate(spark, rest_catalog, "afr.events",
                        WorkloadSpec(seed=23, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=2))
    table = rest_catalog.load().load_table(workload.identifier)
    assert table.metadata_location.startswith("s3://")
    before = read_table(table)
    assert before.applicable_deletes, "the scenario must start with deletes"

    dag_run = fresh_dag().test(run_conf={"tables": ["afr.*"], "catalog": rest_catalog.name, "mode": "major"})
    states = task_states(dag_run)
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", states
    assert [i for (t, i) in states if t == "compact"] == [0] and states[("compact", 0)] == "success"
    after = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes
    (run,) = _runs_of(dag_run.run_id)
    assert run.status is RunStatus.SUCCEEDED and run.catalog == rest_catalog.name and run.table_ref == "afr.events"
    with Ledger.open() as ledger:
        outcomes = ledger.outcomes(run.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED and o.validation_result == "passed"
                            for o in outcomes)


def _plan_of(run) -> dict:  # type: ignore[no-untyped-def,type-arg]
    with Ledger.open() as ledger:
        record = ledger.plan(run.plan_id)
    assert record is not None
    return json.loads(record.plan_json)


def _days(partitions: list) -> set:  # type: ignore[type-arg]
    epoch = _dt.date(1970, 1, 1)
    return {epoch + _dt.timedelta(days=f["value"]) for d in partitions for f in d["partition"]["fields"]
            if f["name"] == "ts_day"}


def test_a_run_plans_only_its_data_intervals_partitions(spark, sqlite_catalog: CatalogConfig, airflow_db: Path,
                                                        catalog_conn) -> None:
    catalog_conn(sqlite_catalog)
    generate(spark, sqlite_catalog, "bf.events",
             WorkloadSpec(seed=22, partitioning="days_ts", commits=2, rows_per_commit=20, days_span=3))
    conf = {"tables": ["bf.events"], "catalog": sqlite_catalog.name, "mode": "major", "dry_run": True}
    logical_date = _dt.datetime(2024, 1, 3, tzinfo=UTC)

    # window=data_interval makes a manual dag.test() behave like a backfill run of that logical date.
    dag_run = fresh_dag().test(logical_date=logical_date, run_conf={**conf, "window": "data_interval"})
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "success", task_states(dag_run)
    start, end = dag_run.data_interval_start, dag_run.data_interval_end
    assert end - start == _dt.timedelta(days=1) and start.hour == 0
    interval_days = {start.date()}
    (run,) = _runs_of(dag_run.run_id)
    assert run.dry_run and run.status is RunStatus.SUCCEEDED
    plan = _plan_of(run)
    assert plan["partition_filter"]["text"] == (f"ts >= '{start.date()}T00:00:00+00:00' and "
                                                f"ts < '{end.date()}T00:00:00+00:00'")
    assert _days(plan["decisions"]) == interval_days
    assert plan["groups"] and _days([t for g in plan["groups"] for t in g["tasks"]]) == interval_days
    assert "compact" not in {t for (t, i) in task_states(dag_run) if i >= 0}, "a dry run starts no Spark job"

    # The same logical date as a plain manual run (window auto) plans every partition: three days.
    manual = fresh_dag().test(logical_date=logical_date, run_conf=conf)
    (run_all,) = _runs_of(manual.run_id)
    all_days = _days(_plan_of(run_all)["decisions"])
    assert interval_days < all_days and len(all_days) == 3
    assert _plan_of(run_all)["partition_filter"] is None


def test_invalid_params_fail_before_any_work(sqlite_catalog: CatalogConfig, airflow_db: Path, catalog_conn,
                                             capfd: pytest.CaptureFixture[str]) -> None:
    catalog_conn(sqlite_catalog)
    bad = {"tables": ["bf.events"], "catalog": sqlite_catalog.name, "partition_filter": "ts_day = 1 or 1 = 1"}
    dag_run = fresh_dag().test(run_conf=bad)
    states = task_states(dag_run)
    assert str(getattr(dag_run.state, "value", dag_run.state)) == "failed"
    assert states[("discover", -1)] == "failed"
    assert all(state in ("upstream_failed", "skipped") or task in ("discover", "record", "summary", "run_failed")
               for (task, _), state in states.items()), states
    assert states[("run_failed", -1)] == "failed", "the leaf that fails the run when any task failed"
    assert not [i for (t, i) in states if t == "compact" and i >= 0], "no Spark job"
    assert _runs_of(dag_run.run_id) == [], "no ledger run"
    log = "".join(capfd.readouterr())  # the task log (Airflow's structlog writes to the console in dag.test)
    assert "ConfigError: invalid DAG param partition_filter='ts_day = 1 or 1 = 1': invalid partition filter " \
           "'ts_day = 1 or 1 = 1': cannot parse at character 15" in log

    # Valid syntax, but a column the table does not have: discover binds the filter to each selected table.
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import DayTransform
    from pyiceberg.types import LongType, NestedField, StringType, TimestamptzType

    loaded = sqlite_catalog.load()
    loaded.create_namespace("bf")
    loaded.create_table("bf.events", Schema(NestedField(1, "id", LongType()), NestedField(2, "ts", TimestamptzType()),
                                            NestedField(3, "note", StringType())),
                        partition_spec=PartitionSpec(PartitionField(2, 1000, DayTransform(), "ts_day")))
    for text, error in [("nosuch = 1", "ConfigError: invalid DAG param partition_filter='nosuch = 1': invalid "
                                       "partition filter: unknown column 'nosuch' in bf.events"),
                        ("note = 'x'", "PlanningError: invalid DAG param partition_filter=\"note = 'x'\": partition "
                                       "filter: note = 'x' can never narrow the partitions of bf.events")]:
        dag_run = fresh_dag().test(run_conf={**bad, "partition_filter": text})
        states = task_states(dag_run)
        assert states[("discover", -1)] == "failed" and _runs_of(dag_run.run_id) == []
        assert not [i for (t, i) in states if t in ("inspect", "compact") and i >= 0], states
        assert error in "".join(capfd.readouterr())

    # A value outside the Param schema is refused when the run is created, before any task runs.
    from airflow.sdk.exceptions import ParamValidationError

    with pytest.raises(ParamValidationError, match="max_parallel_jobs"):
        fresh_dag().test(run_conf={"max_parallel_jobs": 0})


def test_a_retried_record_task_reports_a_recorded_failure_again(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression test: on a retry, record found the run already terminal and returned without raising,
    # so a retried record turned a failed compaction into a green task.
    from compaction.core.errors import RewriteJobError
    from compaction.ledger import Ledger, RunStatus
    from icecompact_airflow import tasks

    monkeypatch.setenv("ICECOMPACT_LEDGER_URL", f"sqlite:///{tmp_path / 'ledger.db'}")
    with Ledger.open() as ledger:
        failed = ledger.start_run("db.t", "cat")
        ledger.finish_run(failed, RunStatus.FAILED, exit_code=8, error="job group 0 wrote no result")
        fine = ledger.start_run("db.t2", "cat")
        ledger.finish_run(fine, RunStatus.SUCCEEDED, exit_code=0)
    plans = [{"table": "db.t", "run_id": failed, "plan_path": str(tmp_path / "plan.json"), "groups": [0]},
             {"table": "db.t2", "run_id": fine, "plan_path": str(tmp_path / "plan2.json"), "groups": [0]}]
    with pytest.raises(RewriteJobError, match=f"run {failed}\\): failed"):
        tasks.record(plans, {})
    assert [r["status"] for r in tasks.record(plans[1:], {})] == ["succeeded"]
