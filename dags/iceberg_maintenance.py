"""Maintenance of Iceberg tables: expire snapshots, rewrite manifests, delete orphan files (docs/maintenance.md).

Thin on purpose: one mapped task per table runs :func:`icecompact_airflow.maintenance_tasks.maintain` (plan from
metadata and the ledger's in-flight runs, Iceberg's actions on Spark, removals recorded in the ledger). Manual by
default; set ``$ICECOMPACT_MAINTENANCE_SCHEDULE`` (a cron expression or ``@daily``) to schedule it. Parsing imports only Airflow.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

from airflow.sdk import Param, dag, get_current_context, task

MAINTENANCE_DAG_ID = "iceberg_maintenance"
SCHEDULE_ENV = "ICECOMPACT_MAINTENANCE_SCHEDULE"


def _schedule() -> str | None:
    text = (os.environ.get(SCHEDULE_ENV) or "none").strip()
    return None if text.lower() in ("none", "null", "manual") else text


@dag(
    dag_id=MAINTENANCE_DAG_ID,
    schedule=_schedule(),
    start_date=_dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": _dt.timedelta(minutes=1)},
    tags=["iceberg", "maintenance"],
    doc_md=__doc__,
    params={
        "tables": Param([], type="array", description="NAMESPACE.TABLE names to maintain"),
        "catalog": Param(None, type=["null", "string"], description="catalog name (as for iceberg_compaction)"),
        "overrides": Param({}, type="object",
                           description="maintenance keys, e.g. {\"maintenance.delete-orphans.enabled\": \"true\"}"),
        "dry_run": Param(False, type="boolean", description="plan and record only"),
    },
)
def iceberg_maintenance() -> None:
    @task
    def tables() -> list[str]:
        return [str(t) for t in get_current_context()["params"]["tables"]]

    @task(max_active_tis_per_dag=1)
    def maintain(table: str) -> dict[str, Any]:
        from icecompact_airflow.maintenance_tasks import maintain as run

        return run(table, dict(get_current_context()["params"]))

    maintain.expand(table=tables())


iceberg_maintenance()
