"""The DAG's resident path (param ``executor`` = ``resident``): queue every plan for the catalog's long-running Spark
executor (compaction/ops/executor.py) and wait for it *deferred*, so that waiting holds no worker slot.

* :class:`CompactionQueueOperator` (task ``compact_resident``) enqueues one work item per plan (all of a plan's job
  groups: one process, one rewrite action), starts an executor for each catalog that has none alive, then defers to
  :class:`WorkItemsTrigger`. A retry of the task finds the items of its runs already queued and waits for them
  instead of queueing them again.
* :class:`WorkItemsTrigger` polls the ledger (one query per poll) from the triggerer, takes back leases that ran out,
  and fires when every item is terminal, or when a catalog with unfinished work has no live executor (the operator
  then starts one on a worker and defers again). Its kwargs hold ids only, never a secret.
* The ``record`` task reads the items' results from the ledger (:func:`icecompact_airflow.tasks.record`) exactly as
  it reads the result files of spark-submit jobs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator, Mapping, Sequence

from airflow.sdk import BaseOperator
from airflow.triggers.base import BaseTrigger, TriggerEvent

POLL_SECONDS_DEFAULT = 1.0
TAKE_BACK_EVERY_S = 5.0


class WorkItemsTrigger(BaseTrigger):
    """Fires ``{"status": "done", "items": {id: status}}`` when every item is terminal, or
    ``{"status": "executor_lost", "catalogs": [...]}`` when unfinished work of a catalog has no live executor; both
    carry ``echo`` (what the deferring task needs back: ``dags test`` resumes a task with the event only, not with
    the kwargs it deferred with). Nothing secret in ``echo``: it is stored with the trigger."""

    def __init__(self, item_ids: Sequence[str], poll_s: float = POLL_SECONDS_DEFAULT, echo: Any = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.item_ids = list(item_ids)
        self.poll_s = float(poll_s)
        self.echo = echo

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"item_ids": self.item_ids, "poll_s": self.poll_s, "echo": self.echo})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from compaction.core.errors import CompactionError
        from compaction.ledger import Ledger

        ledger = None
        last_take_back = 0.0
        try:
            while True:
                try:
                    if ledger is None:
                        ledger = await asyncio.to_thread(Ledger.open)
                    take_back = time.monotonic() - last_take_back >= TAKE_BACK_EVERY_S
                    if take_back:
                        last_take_back = time.monotonic()
                    event = await asyncio.to_thread(_poll, ledger, self.item_ids, take_back)
                except CompactionError as e:
                    # The ledger database briefly unreachable (a restart, a failover) must not fail the waiting
                    # task: the work goes on in the executor, and its results are in the queue when we are back.
                    self.log.warning("waiting for work items: %s; retrying", e)
                    event = None
                    await asyncio.sleep(max(self.poll_s, 2.0))
                if event is not None:
                    yield TriggerEvent({**event, "echo": self.echo})  # type: ignore[no-untyped-call]
                    return
                await asyncio.sleep(self.poll_s)
        finally:
            if ledger is not None:
                await asyncio.to_thread(ledger.close)


def _poll(ledger: Any, item_ids: list[str], take_back: bool) -> dict[str, Any] | None:
    import datetime as _dt

    if take_back:
        ledger.take_back_expired_work()
    items = ledger.work_items(item_ids)
    if len(items) == len(item_ids) and all(i.status.is_terminal for i in items):
        return {"status": "done", "items": {i.item_id: i.status.value for i in items}}
    if take_back:
        now = _dt.datetime.now(_dt.timezone.utc)
        waiting = sorted({i.catalog for i in items if not i.status.is_terminal})
        lost = [c for c in waiting if not any(e.alive(now) for e in ledger.executors(catalog=c))]
        if lost:
            return {"status": "executor_lost", "catalogs": lost}
    return None


def ensure_executors(ledger: Any, catalogs: Any, *, log: Any) -> None:
    """A live executor for each catalog: started detached on this worker when there is none, on the master of the
    Spark connection (as the ``submit`` path's jobs)."""
    from compaction.ops.executor import ensure_executor
    from icecompact_airflow.hooks import spark_settings

    settings = spark_settings()
    for catalog in catalogs:
        if ensure_executor(catalog, ledger, spark_settings=settings, ledger_url=ledger.connection_url(),
                           progress=log) is None:
            log(f"catalog {catalog.name}: a live executor serves it")


def queue_plans(plans: Sequence[Any], params: Any, *, log: Any) -> list[str]:
    """One work item per plan with work (its job groups together), executors ensured; the items' ids. A plan whose
    run has items already (a retried task) is not queued again: its items are returned."""
    from pathlib import Path

    from compaction.core.plan import CompactionPlan
    from compaction.ledger import Ledger
    from compaction.ops.runner import is_single_writer
    from icecompact_airflow.connections import resolve_catalog

    item_ids: list[str] = []
    catalogs: dict[str, Any] = {}
    with Ledger.open() as ledger:
        for p in plans:
            catalog = catalogs.setdefault(p["catalog"], resolve_catalog(p["catalog"]))
            existing = ledger.work_items(run_id=str(p["run_id"]))
            if existing:
                item_ids.extend(i.item_id for i in existing)
                continue
            plan = CompactionPlan.from_json(Path(p["plan_path"]).read_text())
            item = ledger.enqueue_work(plan.to_json(), plan_id=plan.plan_id, table_ref=plan.table.dotted,
                                       catalog=catalog.name, group_ids=[int(g) for g in p["groups"]],
                                       run_id=str(p["run_id"]), validation=params.validation,
                                       max_retries=params.max_retries, exclusive=is_single_writer(catalog))
            log(f"{p['table']}: groups {p['groups']} queued as work item {item.item_id}")
            item_ids.append(item.item_id)
        ensure_executors(ledger, catalogs.values(), log=log)
    return item_ids


def restart_lost_executors(operator: BaseOperator, event: Mapping[str, Any], plans: Sequence[Mapping[str, Any]],
                           poll_s: float) -> None:
    """After an ``executor_lost`` event: start an executor for each catalog named, then defer again on the work
    items of ``plans`` (raises Airflow's deferral)."""
    from compaction.ledger import Ledger
    from icecompact_airflow.connections import resolve_catalog

    operator.log.warning("no live executor for %s: starting one", ", ".join(event["catalogs"]))
    with Ledger.open() as ledger:
        ensure_executors(ledger, [resolve_catalog(c) for c in event["catalogs"]], log=operator.log.info)
        item_ids = [i.item_id for p in plans for i in ledger.work_items(run_id=str(p["run_id"]))]
    operator.defer(trigger=WorkItemsTrigger(item_ids, poll_s, echo=event.get("echo")),
                   method_name="execute_complete")


class CompactionQueueOperator(BaseOperator):
    """Queue the plans of this DAG run for resident executors and wait deferred (see the module doc)."""

    template_fields: Sequence[str] = ("plans",)
    ui_color = "#9fd5a8"

    def __init__(self, *, plans: Any, poll_s: float = POLL_SECONDS_DEFAULT, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.plans = plans
        self.poll_s = poll_s

    def _plans(self) -> list[dict[str, Any]]:
        plans = self.plans or []
        return [dict(p) for p in (plans[i] for i in range(len(plans))) if p and p.get("plan_path")]

    def execute(self, context: Any) -> Any:
        from airflow.sdk.exceptions import AirflowSkipException

        from icecompact_airflow.params import parse_params

        params = parse_params(dict(context["params"]))
        if params.executor != "resident" or params.dry_run:
            raise AirflowSkipException(f"executor {params.executor}: the compact task runs the job groups")
        plans = self._plans()
        if not plans:
            raise AirflowSkipException("no plan has work")
        item_ids = queue_plans(plans, params, log=self.log.info)
        self.defer(trigger=WorkItemsTrigger(item_ids, self.poll_s), method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any]) -> dict[str, Any]:
        if event.get("status") == "executor_lost":
            restart_lost_executors(self, event, self._plans(), self.poll_s)
        items = dict(event.get("items") or {})
        for item_id, status in items.items():
            self.log.info("work item %s: %s", item_id, status)
        return items
