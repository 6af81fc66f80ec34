"""Compaction of Iceberg merge-on-read tables: discover -> inspect -> plan -> compact (Spark) -> record -> summary.

Thin on purpose: task bodies live in :mod:`icecompact_airflow.tasks`, the Spark step is the provider's
``SparkSubmitOperator`` (:class:`icecompact_airflow.operators.CompactionSubmitOperator`) mapped over the job groups
of every plan in the ``icecompact_spark`` pool, or, with param ``executor`` = ``resident``, one deferred task that
queues the plans for the catalog's long-running executor (:mod:`icecompact_airflow.resident`). Parsing imports only Airflow, the Spark provider and our constants
(no pyspark, no pyiceberg). Scheduled and backfill runs compact the partitions of their data interval on
time-partitioned tables (param ``window``); see README "Airflow".
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

from airflow.sdk import CronDataIntervalTimetable, Param, TriggerRule, dag, get_current_context, task

from compaction.core.queue import EXECUTOR_CHOICES, EXECUTOR_DEFAULT
from compaction.core.run_options import (
    MAX_PARALLEL_JOBS_DEFAULT,
    MAX_PARALLEL_JOBS_LIMIT,
    MAX_RETRIES_DEFAULT,
    MAX_RETRIES_LIMIT,
    VALIDATION_DEFAULT,
    VALIDATION_LEVELS,
)
from icecompact_airflow import (DAG_ID, EXECUTOR_ENV, POOL, SCHEDULE_DEFAULT, SCHEDULE_ENV, WINDOW_CHOICES,
                                WINDOW_DEFAULT, WINDOW_ENV)
from icecompact_airflow.operators import CompactionSubmitOperator
from icecompact_airflow.resident import CompactionQueueOperator


def _schedule() -> CronDataIntervalTimetable | None:
    text = (os.environ.get(SCHEDULE_ENV) or SCHEDULE_DEFAULT).strip()
    if text.lower() in ("none", "null", "manual"):
        return None
    # An interval timetable: a run's data interval is the period it covers (a cron trigger has an empty one).
    return CronDataIntervalTimetable(text, timezone="UTC")


def _window_default() -> str:
    text = (os.environ.get(WINDOW_ENV) or WINDOW_DEFAULT).strip()
    if text not in WINDOW_CHOICES:
        raise ValueError(f"{WINDOW_ENV}={text!r}: expected one of {', '.join(WINDOW_CHOICES)}")
    return text


def _executor_default() -> str:
    text = (os.environ.get(EXECUTOR_ENV) or EXECUTOR_DEFAULT).strip()
    if text not in EXECUTOR_CHOICES:
        raise ValueError(f"{EXECUTOR_ENV}={text!r}: expected one of {', '.join(EXECUTOR_CHOICES)}")
    return text


def _context() -> dict[str, Any]:
    context = get_current_context()
    run = context["dag_run"]
    run_type = getattr(run.run_type, "value", run.run_type)
    return {
        "params": dict(context["params"]),
        "run_type": str(run_type),
        "data_interval_start": context.get("data_interval_start"),
        "data_interval_end": context.get("data_interval_end"),
        "dag_id": run.dag_id,
        "dag_run_id": run.run_id,
    }


def _items(values: Any) -> list[Any]:
    """The results of a mapped upstream task (a lazy sequence; empty when it was skipped)."""
    if values is None:
        return []
    return [values[i] for i in range(len(values))]


@dag(
    dag_id=DAG_ID,
    schedule=_schedule(),
    start_date=_dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    # A catalog or ledger database that is briefly unreachable (a restart, a failover) fails a metadata task; a retry
    # after it is back lets the run carry on. The Spark step has its own conflict retries (compact: retries=0).
    default_args={"retries": 2, "retry_delay": _dt.timedelta(seconds=20)},
    tags=["iceberg", "compaction"],
    doc_md=__doc__,
    render_template_as_native_obj=True,
    params={
        "tables": Param(["*"], type=["array", "string"],
                        description="NAMESPACE.TABLE names or glob patterns over the catalog's tables ('*' = all)"),
        "mode": Param("auto", enum=["auto", "minor", "major"], description="auto decides per partition"),
        "partition_filter": Param(None, type=["null", "string"],
                                  description="Iceberg row filter on source columns, e.g. \"ts >= '2024-01-02'\" "
                                              "(pyiceberg's filter language, not SQL; see docs/partition-filters.md)"),
        "dry_run": Param(False, type="boolean", description="plan and record only; no Spark job"),
        "policy": Param({}, type="object", description="policy overrides, e.g. {\"major.delete-ratio\": 0.2}"),
        "max_parallel_jobs": Param(MAX_PARALLEL_JOBS_DEFAULT, type="integer", minimum=1, maximum=MAX_PARALLEL_JOBS_LIMIT,
                                   description="concurrent Spark jobs (always 1 on a SQLite catalog)"),
        "validation": Param(VALIDATION_DEFAULT, enum=list(VALIDATION_LEVELS),
                            description=f"post-commit check: {VALIDATION_DEFAULT} (default) or checksum"),
        "max_retries": Param(MAX_RETRIES_DEFAULT, type="integer", minimum=0, maximum=MAX_RETRIES_LIMIT,
                             description="conflict retries per partition"),
        "catalog": Param(None, type=["null", "string"],
                         description="catalog name (Airflow connection icecompact_catalog_<name>, .pyiceberg.yaml, "
                                     "or the embedded default)"),
        "window": Param(_window_default(), enum=list(WINDOW_CHOICES),
                        description="auto: scheduled/backfill runs compact their data interval's partitions, "
                                    "manual runs every partition (default: $ICECOMPACT_DAG_WINDOW or auto)"),
        "executor": Param(_executor_default(), enum=list(EXECUTOR_CHOICES),
                          description="submit: a spark-submit per job group (task compact); resident: queue the "
                                      "work for the catalog's long-running Spark executor and wait deferred (task "
                                      "compact_resident; default: $ICECOMPACT_DAG_EXECUTOR or submit)"),
    },
)
def iceberg_compaction() -> None:
    @task
    def discover() -> list[str]:
        from icecompact_airflow import tasks

        with tasks.fail_fast():
            return tasks.discover(_context()["params"])

    @task
    def inspect(table: str) -> dict[str, Any]:
        from icecompact_airflow import tasks

        with tasks.fail_fast():
            return tasks.inspect(table, _context()["params"])

    @task
    def plan(inspection: dict[str, Any]) -> dict[str, Any]:
        from icecompact_airflow import tasks

        ctx = _context()
        with tasks.fail_fast():
            return tasks.plan(inspection, ctx["params"], run_type=ctx["run_type"],
                              data_interval_start=ctx["data_interval_start"],
                              data_interval_end=ctx["data_interval_end"], dag_id=ctx["dag_id"],
                              dag_run_id=ctx["dag_run_id"])

    @task
    def job_groups(plans: Any) -> list[dict[str, Any]]:
        from icecompact_airflow import tasks

        with tasks.fail_fast():
            return tasks.job_groups(_items(plans), _context()["params"])

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def record(plans: Any) -> list[dict[str, Any]]:
        from icecompact_airflow import tasks

        with tasks.fail_fast():
            return tasks.record(_items(plans), _context()["params"])

    @task(trigger_rule=TriggerRule.ALL_DONE)
    def summary(plans: Any) -> dict[str, Any]:
        from icecompact_airflow import tasks

        with tasks.fail_fast():
            return tasks.summary(_items(plans), _context()["params"])

    @task(trigger_rule=TriggerRule.ONE_FAILED, retries=0)
    def run_failed() -> None:
        """Fails the DAG run when any task failed. record and summary run whatever happened upstream (ALL_DONE),
        so without this leaf a run whose discover or inspect failed would end 'success'."""
        raise RuntimeError("a task of this DAG run failed; see the failed task's log")

    discovered = discover()
    inspected = inspect.expand(table=discovered)
    plans = plan.expand(inspection=inspected)
    jobs = job_groups(plans)
    compact = CompactionSubmitOperator.partial(
        task_id="compact",
        pool=POOL,
        validation="{{ params.validation }}",
        max_retries="{{ params.max_retries }}",
        max_parallel_jobs="{{ params.max_parallel_jobs }}",
        retries=0,
    ).expand_kwargs(jobs)
    resident = CompactionQueueOperator(task_id="compact_resident", plans=plans, retries=0)
    recorded = record(plans)
    [compact, resident] >> recorded
    summarized = summary(plans)
    recorded >> summarized
    [discovered, inspected, plans, jobs, compact, resident, recorded, summarized] >> run_failed()


iceberg_compaction()
