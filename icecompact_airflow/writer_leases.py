"""Airflow listener: a task instance that declares an Iceberg table as an outlet asset
(:func:`icecompact_airflow.assets.table_asset`) holds a write lease on it from the moment it runs until it
succeeds, fails or skips itself, so no compaction commit lands under its DML (compaction.core.yielding;
docs/operations.md "Writers and compaction"). Registered by the ``icecompact`` plugin.

Taking the lease waits for a compaction commit already under way on the table, before the task's code runs. The lease
is released by holder (the task instance), so the scheduler failing a task whose worker died releases it too; a
worker that died without any callback leaves the lease to its TTL (the task's ``execution_timeout``, else
:data:`TASK_LEASE_TTL_S_DEFAULT`)."""

from __future__ import annotations

import logging
from typing import Any

from airflow.listeners import hookimpl

from icecompact_airflow.assets import table_of_asset_uri

log = logging.getLogger(__name__)

#: A task's lease lifetime when it has no ``execution_timeout``.
TASK_LEASE_TTL_S_DEFAULT = 6 * 3600.0


def _tables(task_instance: Any) -> list[tuple[str, str]]:
    task = getattr(task_instance, "task", None)
    outlets = getattr(task, "outlets", None) or ()
    found = [table_of_asset_uri(str(getattr(asset, "uri", "") or "")) for asset in outlets]
    return list(dict.fromkeys(t for t in found if t is not None))


def holder_of(task_instance: Any) -> str:
    map_index = getattr(task_instance, "map_index", -1)
    suffix = f"[{map_index}]" if map_index is not None and map_index >= 0 else ""
    return f"airflow {task_instance.dag_id}.{task_instance.task_id}{suffix} {task_instance.run_id}"


def _ttl_s(task_instance: Any) -> float:
    timeout = getattr(getattr(task_instance, "task", None), "execution_timeout", None)
    return float(timeout.total_seconds()) if timeout else TASK_LEASE_TTL_S_DEFAULT


@hookimpl
def on_task_instance_running(previous_state: Any, task_instance: Any) -> None:
    tables = _tables(task_instance)
    if not tables:
        return
    from compaction.ledger import Ledger
    from compaction.ops.leases import acquire

    holder = holder_of(task_instance)
    with Ledger.open() as ledger:
        for catalog, table in tables:
            acquire(ledger, table, catalog, holder=holder, ttl_s=_ttl_s(task_instance),
                    progress=lambda line: log.info("%s", line))
            log.info("icecompact: write lease on %s.%s held by %s: no compaction commits on it until this task ends",
                     catalog, table, holder)


def _release(task_instance: Any) -> None:
    tables = _tables(task_instance)
    if not tables:
        return
    from compaction.ledger import Ledger
    from compaction.ops.leases import release_holder

    with Ledger.open() as ledger:
        for catalog, table in tables:
            release_holder(ledger, table, catalog, holder_of(task_instance))


@hookimpl
def on_task_instance_success(previous_state: Any, task_instance: Any) -> None:
    _release(task_instance)


@hookimpl
def on_task_instance_failed(previous_state: Any, task_instance: Any, error: Any) -> None:
    _release(task_instance)


@hookimpl
def on_task_instance_skipped(previous_state: Any, task_instance: Any) -> None:
    _release(task_instance)
