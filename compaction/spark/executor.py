"""The resident executor's loop: one long-lived Spark application takes work items from the ledger's queue
(compaction/ledger/queue.py) and runs their job groups with the per-group job's own code
(:func:`compaction.spark.job.run_groups`), so a MINOR of a small table costs its work, not a JVM and a Spark
application each time.

* Fresh metadata for every item: the catalog's table cache is off (``cache-enabled=false``, in every catalog's Spark
  conf: :meth:`compaction.catalog.CatalogConfig.spark_conf`), so every load reads the table's current metadata; a
  long-lived session never plans or commits against a stale table.
* The item's lease is renewed by a heartbeat thread while its groups run; checkpoints (what is committed and
  validated so far) go to the item, as the spark-submit job writes them next to its result file. An executor killed
  mid-item leaves a lease that runs out: the item is re-queued or failed by whoever looks next.
* Between items the executor leaves cleanly after a number of groups or when its heap stays high after a GC
  (:func:`compaction.core.queue.restart_reason`); its supervisor (compaction/ops/executor.py) starts a fresh one. A stop
  request (SIGTERM) is honoured between items too. Idle, it reads the queue once per poll (one indexed query) and
  writes a heartbeat every ``heartbeat_s``.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from compaction.core.errors import CompactionError, RewriteJobError
from compaction.core.plan import CompactionPlan
from compaction.core.queue import (
    HEARTBEAT_SECONDS_DEFAULT,
    LEASE_SECONDS_DEFAULT,
    POLL_SECONDS_DEFAULT,
    RestartLimits,
    restart_reason,
)
from compaction.ledger.writers import LedgerCommitGate
from compaction.spark.gate import gated

#: Exit code of an executor that wants to be replaced by a fresh one (EX_TEMPFAIL).
EXIT_RESTART = 75


@dataclass(frozen=True)
class ServeOptions:
    poll_s: float = POLL_SECONDS_DEFAULT
    lease_s: float = LEASE_SECONDS_DEFAULT
    heartbeat_s: float = HEARTBEAT_SECONDS_DEFAULT
    limits: RestartLimits = RestartLimits()
    #: Leave after this long without work (0: never).
    idle_exit_s: float = 0.0

    def __post_init__(self) -> None:
        if self.poll_s <= 0 or self.heartbeat_s <= 0 or self.lease_s <= 2 * self.heartbeat_s:
            raise ValueError(f"need poll_s > 0, heartbeat_s > 0 and lease_s > 2 x heartbeat_s "
                             f"(got {self.poll_s}, {self.heartbeat_s}, {self.lease_s})")


def heap(spark: Any, collect: bool = False) -> tuple[int, int]:
    """(used, max) bytes of the driver JVM's heap, after a GC when ``collect``."""
    runtime = spark._jvm.java.lang.Runtime.getRuntime()
    if collect:
        spark._jvm.java.lang.System.gc()
    return int(runtime.totalMemory()) - int(runtime.freeMemory()), int(runtime.maxMemory())


class _LeaseKeeper:
    """Renews an item's lease and the executor's heartbeat every ``heartbeat_s`` until stopped; remembers when the
    item was taken back."""

    def __init__(self, ledger: Any, item_id: str, executor_id: str, options: ServeOptions,
                 progress: Callable[[str], None]) -> None:
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ledger, item_id, executor_id, options, progress),
                                        name=f"lease-{item_id[:8]}", daemon=True)

    def _run(self, ledger: Any, item_id: str, executor_id: str, options: ServeOptions,
             progress: Callable[[str], None]) -> None:
        while not self._stop.wait(options.heartbeat_s):
            try:
                # The executor's own heartbeat too: a long item must not make it look dead (another would start).
                ledger.executor_heartbeat(executor_id, status="busy", current_item=item_id)
                if not ledger.renew_lease(item_id, executor_id, lease_s=options.lease_s):
                    self.lost = True
                    progress(f"executor: item {item_id} was taken back (its lease ran out); its result will not be "
                             "recorded here")
                    return
            except CompactionError as e:  # the ledger is briefly unreachable: the lease still has time
                progress(f"executor: cannot renew the lease of item {item_id} ({e}); retrying")

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _retrying(action: Callable[[], Any], what: str, progress: Callable[[str], None], within_s: float) -> Any:
    """``action()``, retried every 2 s while the ledger is unreachable (a restart, a failover), for ``within_s``."""
    started = time.monotonic()
    while True:
        try:
            return action()
        except CompactionError as e:
            if time.monotonic() - started >= within_s:
                raise
            progress(f"executor: {what}: {e}; retrying")
            time.sleep(2.0)


def _checkpoint(ledger: Any, item_id: str, executor_id: str, progress: Callable[[str], None]) -> Callable[..., None]:
    def save(gid: int, incomplete: dict[str, Any]) -> None:
        try:
            ledger.checkpoint_work(item_id, executor_id, gid, incomplete)
        except CompactionError as e:  # a checkpoint is a safety net: losing one must not fail the work
            progress(f"executor: checkpoint of item {item_id} not stored ({e})")
    return save


def run_item(spark: Any, ledger: Any, item: Any, executor_id: str, options: ServeOptions,
             progress: Callable[[str], None]) -> dict[int, dict[str, Any]]:
    """Run one claimed item's groups; store the results on the item. Returns them (group id -> result)."""
    from compaction.spark.job import error_result, run_groups
    from compaction.spark.major import rearm_fault_injection
    from compaction.spark.validation import ValidationLevel

    rearm_fault_injection()
    group_ids = list(item.group_ids)
    results: dict[int, dict[str, Any]] = {}
    error: str | None = None
    with _LeaseKeeper(ledger, item.item_id, executor_id, options, progress):
        try:
            plan = CompactionPlan.from_json(item.plan_json)
            level = ValidationLevel.parse(item.validation)
            # Every commit of ours first yields to the writers holding a lease on the table (compaction.core.yielding).
            gate = LedgerCommitGate(ledger, plan.table.catalog, f"plan {plan.plan_id} item {item.item_id}",
                                    progress=progress)
            with gated(gate, plan, progress):
                done = run_groups(spark, plan, group_ids, level=level, max_retries=item.max_retries,
                                  progress=progress, checkpoint=_checkpoint(ledger, item.item_id, executor_id, progress))
            results = {r.group_id: r.to_dict() for r in done}
        except CompactionError as e:
            results = {gid: error_result(item.plan_id, gid, item.table_ref, e).to_dict() for gid in group_ids}
        except Exception as e:  # noqa: BLE001 - one bad item must not take the executor down
            error = f"{type(e).__name__}: {e}"
            wrapped = RewriteJobError(f"the executor failed running this item: {error}")
            results = {gid: error_result(item.plan_id, gid, item.table_ref, wrapped).to_dict() for gid in group_ids}
    # Compacted and validated: the result must reach the queue, across a short ledger outage too (within the
    # lease, after which the item is someone else's to take back).
    if not _retrying(lambda: ledger.complete_work(item.item_id, executor_id, results, error=error),
                     f"recording the result of item {item.item_id}", progress, options.lease_s):
        progress(f"executor: item {item.item_id} was taken back before it finished; result not recorded")
    return results


def serve(spark: Any, ledger: Any, executor_id: str, catalog_name: str, *, options: ServeOptions = ServeOptions(),
          generation: int = 1, stop: threading.Event | None = None,
          progress: Callable[[str], None] = lambda _m: None) -> tuple[int, str]:
    """Take and run work of ``catalog_name`` until asked to stop, idle too long, or due for a restart.
    Returns (exit code, reason): 0 to stop, :data:`EXIT_RESTART` to be replaced by a fresh executor."""
    from compaction.spark import jvm as J

    J.activate(spark)
    stop = stop or threading.Event()
    groups_run = 0
    last_beat = 0.0
    idle_since = time.monotonic()

    def beat(status: str, current: str | None = None, collect: bool = False) -> tuple[int, int]:
        used, maximum = heap(spark, collect)
        ledger.executor_heartbeat(executor_id, status=status, generation=generation,
                                  groups_run=groups_run, heap_used_mb=used // 2**20, current_item=current)
        return used, maximum

    beat("idle")
    if generation > 1:  # the previous generation of this executor is gone: what it held needs no lease to run out
        for back in ledger.take_back_expired_work(dead_executor=executor_id):
            progress(f"executor: item {back.item_id} of the previous generation: {back.status.value}")
    progress(f"executor {executor_id} (generation {generation}) serving catalog {catalog_name}")
    while not stop.is_set():
        now = time.monotonic()
        item = None
        try:
            if ledger.has_pending_work([catalog_name]):
                item = ledger.claim_work(executor_id, catalogs=[catalog_name], lease_s=options.lease_s)
            if item is None:
                if now - last_beat >= options.heartbeat_s:
                    beat("idle")
                    last_beat = now
                if options.idle_exit_s and now - idle_since >= options.idle_exit_s:
                    return 0, f"idle for {options.idle_exit_s:g} s"
                stop.wait(options.poll_s)
                continue
        except CompactionError as e:  # the ledger is unreachable: wait, the queue is where the work is
            progress(f"executor: ledger unavailable ({e}); retrying")
            stop.wait(max(options.poll_s, 1.0))
            continue
        try:
            beat("busy", item.item_id)
        except CompactionError as e:  # claimed: run it; the lease keeper beats again
            progress(f"executor: heartbeat not recorded ({e})")
        progress(f"executor: item {item.item_id}: {item.table_ref} group(s) "
                 f"{', '.join(map(str, item.group_ids))} (attempt {item.attempts})")
        started = time.monotonic()
        results = run_item(spark, ledger, item, executor_id, options, progress)
        groups_run += len(item.group_ids)
        statuses = ", ".join(f"g{gid} {r.get('status')}" for gid, r in results.items())
        progress(f"executor: item {item.item_id} finished in {time.monotonic() - started:.1f} s: {statuses}")
        try:
            used, maximum = beat("idle", collect=True)
        except CompactionError as e:  # the next idle beat tries again
            progress(f"executor: heartbeat not recorded ({e})")
            used, maximum = heap(spark)
        last_beat = idle_since = time.monotonic()
        reason = restart_reason(options.limits, groups_run, used, maximum)
        if reason is not None:
            return EXIT_RESTART, reason
    return 0, "asked to stop"
