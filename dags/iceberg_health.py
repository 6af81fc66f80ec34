"""Compaction triggered by table health: an event-driven DAG (Airflow 3 ``AssetWatcher``) whose trigger watches the
tables' metadata and starts a run as soon as a table's ``auto`` decision turns to MINOR or MAJOR (docs/executors.md).

Enabled by ``$ICECOMPACT_HEALTH_TABLES`` (comma-separated NAMESPACE.TABLE names or glob patterns); catalog
``$ICECOMPACT_HEALTH_CATALOG`` (default: as the other DAGs), poll every ``$ICECOMPACT_HEALTH_POLL_S`` seconds (2),
at most one event per table every ``$ICECOMPACT_HEALTH_MIN_INTERVAL_S`` seconds (15). Without it the DAG runs only
when triggered by hand (param ``tables``). One task per run: plan the triggering tables, queue them for the catalog's
resident executor, wait deferred, record. Parsing imports only Airflow and our constants.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any

from airflow.sdk import Asset, AssetWatcher, Param, dag

from compaction.core.run_options import MAX_RETRIES_DEFAULT, MAX_RETRIES_LIMIT, VALIDATION_DEFAULT, VALIDATION_LEVELS
from compaction.core.triggering import MIN_INTERVAL_SECONDS_DEFAULT, POLL_SECONDS_DEFAULT
from icecompact_airflow.health_trigger import CompactOnHealthOperator, TableHealthTrigger

HEALTH_DAG_ID = "iceberg_compaction_on_health"
TABLES_ENV, CATALOG_ENV = "ICECOMPACT_HEALTH_TABLES", "ICECOMPACT_HEALTH_CATALOG"
POLL_ENV, MIN_INTERVAL_ENV = "ICECOMPACT_HEALTH_POLL_S", "ICECOMPACT_HEALTH_MIN_INTERVAL_S"


def _schedule() -> list[Asset] | None:
    tables = [t.strip() for t in (os.environ.get(TABLES_ENV) or "").split(",") if t.strip()]
    if not tables:
        return None
    catalog = (os.environ.get(CATALOG_ENV) or "").strip() or None
    trigger = TableHealthTrigger(catalog=catalog, tables=tables,
                                 poll_s=float(os.environ.get(POLL_ENV) or POLL_SECONDS_DEFAULT),
                                 min_interval_s=float(os.environ.get(MIN_INTERVAL_ENV) or MIN_INTERVAL_SECONDS_DEFAULT))
    name = f"icecompact_health_{catalog or 'default'}"
    return [Asset(name=name, uri=f"icecompact://{catalog or 'default'}/health",
                  watchers=[AssetWatcher(name=f"{name}_watcher", trigger=trigger)])]


@dag(
    dag_id=HEALTH_DAG_ID,
    schedule=_schedule(),
    start_date=_dt.datetime(2024, 1, 1, tzinfo=_dt.timezone.utc),
    catchup=False,
    max_active_runs=4,
    default_args={"retries": 1, "retry_delay": _dt.timedelta(seconds=10)},
    tags=["iceberg", "compaction"],
    doc_md=__doc__,
    params={
        "tables": Param(["*"], type=["array", "string"], description="tables of a manual run (events name theirs)"),
        "catalog": Param(None, type=["null", "string"], description="catalog of a manual run"),
        "policy": Param({}, type="object", description="policy overrides"),
        "validation": Param(VALIDATION_DEFAULT, enum=list(VALIDATION_LEVELS), description="post-commit check"),
        "max_retries": Param(MAX_RETRIES_DEFAULT, type="integer", minimum=0, maximum=MAX_RETRIES_LIMIT,
                             description="conflict retries per partition"),
        "executor": Param("resident", enum=["resident"], description="the resident executor of the catalog"),
    },
)
def iceberg_compaction_on_health() -> Any:
    CompactOnHealthOperator(task_id="compact", retries=0)


iceberg_compaction_on_health()
