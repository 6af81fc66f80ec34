"""Compaction triggered by table health: :class:`TableHealthTrigger`, an Airflow 3 event trigger for an
``AssetWatcher``, and :class:`CompactOnHealthOperator`, the one task of the event-driven DAG
``iceberg_compaction_on_health`` (dags/iceberg_health.py).

The trigger runs in the triggerer: one loop per catalog watches every matching table
(:class:`compaction.ops.watch.HealthWatcher`: one metadata-pointer query per poll, new manifests only, the planner's
``auto`` decision, a per-table rate limit, nothing fired while a run of the table waits to start) and yields one event
per table that needs work. Its kwargs are names and numbers, never a secret (the catalog is resolved in the
triggerer from its Airflow connection).

The operator plans the tables of the events that triggered its DAG run (all partitions: the decision is the
planner's, as in the event), queues the plans for the catalog's resident executor, waits deferred and records the
outcomes: one Airflow task per run, which holds no worker slot while Spark works.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator, Mapping, Sequence

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from compaction.core.triggering import MIN_INTERVAL_SECONDS_DEFAULT, POLL_SECONDS_DEFAULT


class TableHealthTrigger(BaseEventTrigger):
    """Yields ``{"catalog", "table", "snapshot_id", "partitions", "kinds", ...}`` whenever a watched table's ``auto``
    plan turns to work (see :mod:`compaction.ops.watch`)."""

    def __init__(self, catalog: str | None = None, tables: Sequence[str] = ("*",),
                 poll_s: float = POLL_SECONDS_DEFAULT, min_interval_s: float = MIN_INTERVAL_SECONDS_DEFAULT,
                 policy: Mapping[str, Any] | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.catalog = catalog
        self.tables = list(tables)
        self.poll_s = float(poll_s)
        self.min_interval_s = float(min_interval_s)
        self.policy = dict(policy or {})

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"catalog": self.catalog, "tables": self.tables, "poll_s": self.poll_s,
                 "min_interval_s": self.min_interval_s, "policy": self.policy})

    def _watcher(self) -> Any:
        from compaction.ledger import Ledger
        from compaction.ops.watch import HealthWatcher
        from icecompact_airflow.connections import resolve_catalog

        return HealthWatcher(resolve_catalog(self.catalog), self.tables, overrides=self.policy,
                             min_interval_s=self.min_interval_s, ledger=Ledger.open(),
                             progress=self.log.debug)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from compaction.core.errors import CompactionError

        watcher = await asyncio.to_thread(self._watcher)
        try:
            while True:
                try:
                    events = await asyncio.to_thread(watcher.poll)
                except CompactionError as e:  # catalog or ledger briefly unreachable: keep watching
                    self.log.warning("health watch of catalog %s: %s", self.catalog, e)
                    events = []
                for event in events:
                    self.log.info("%s.%s needs compaction: %s", event["catalog"], event["table"], event["kinds"])
                    yield TriggerEvent(event)  # type: ignore[no-untyped-call]
                await asyncio.sleep(self.poll_s)
        finally:
            await asyncio.to_thread(watcher.ledger.close)


def triggering_tables(context: Mapping[str, Any]) -> list[tuple[str | None, str]]:
    """(catalog, table) of the health events that triggered this DAG run, in order, without repeats."""
    out: dict[tuple[str | None, str], None] = {}
    for events in dict(context.get("triggering_asset_events") or {}).values():
        for event in events:
            payload = dict((getattr(event, "extra", None) or {}).get("payload") or {})
            if payload.get("table"):
                out[(payload.get("catalog"), str(payload["table"]))] = None
    return list(out)


class CompactOnHealthOperator(BaseOperator):
    """Plan the triggering tables, queue them for the resident executor, wait deferred, record."""

    ui_color = "#9fd5a8"

    def __init__(self, *, poll_s: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.poll_s = poll_s

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        from icecompact_airflow import tasks
        from icecompact_airflow.params import parse_params
        from icecompact_airflow.resident import WorkItemsTrigger, queue_plans

        raw = dict(context["params"])
        tables = triggering_tables(context)
        if not tables:  # a manual run: the tables of its params
            params = parse_params(raw)
            tables = [(params.catalog, t) for t in tasks.discover(raw)]
        run = context["dag_run"]
        plans: list[dict[str, Any]] = []
        for catalog, table in tables:
            table_params = {**raw, "catalog": catalog or raw.get("catalog"), "tables": [table], "window": "all"}
            plans.append(tasks.plan({"table": table, "snapshot_id": None}, table_params, run_type="asset_triggered",
                                    data_interval_start=None, data_interval_end=None, dag_id=run.dag_id,
                                    dag_run_id=run.run_id, echo=self.log.info))
        work = [p for p in plans if p.get("plan_path")]
        if not work:
            raise AirflowSkipException("no table has work any more")
        params = parse_params({**raw, "catalog": work[0]["catalog"]})
        item_ids = queue_plans(work, params, log=self.log.info)
        self.defer(trigger=WorkItemsTrigger(item_ids, self.poll_s, echo=work), method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> Any:
        from icecompact_airflow import tasks
        from icecompact_airflow.resident import restart_lost_executors

        plans: list[dict[str, Any]] = list(event["echo"])
        if event.get("status") == "executor_lost":
            restart_lost_executors(self, event, plans, self.poll_s)
        raw = dict(context["params"])
        return tasks.record(plans, {**raw, "catalog": plans[0]["catalog"]}, echo=self.log.info)
