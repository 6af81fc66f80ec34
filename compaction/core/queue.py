"""Pure rules of the work queue that feeds resident executors (compaction/ledger/queue.py, compaction/ops/executor.py).

No I/O: the ledger and the executor loop call these with the facts they read, so the rules are tested alone.

* A claimed work item holds a *lease* its executor renews by heartbeat. When the lease runs out (the executor died,
  hung or lost the database) the item is taken back: re-queued when it recorded no progress and has attempts left,
  otherwise failed with the progress it recorded. Re-running an item that committed something is avoided: its
  checkpoint says what was committed and validated, and the rest is planned afresh by the next run (a commit the
  check never saw is checked post hoc, compaction/core/posthoc.py).
* A resident executor leaves cleanly (between items, never in the middle of one) after a number of groups or when
  its JVM heap stays above a limit, so that a long-lived session cannot accumulate leaks; its supervisor starts a
  fresh one.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass

#: How a run's job groups are executed: ``submit`` (a spark-submit per run or group) or ``resident`` (queued for a
#: long-running executor of the catalog).
EXECUTOR_CHOICES = ("submit", "resident")
EXECUTOR_DEFAULT = "submit"
LEASE_SECONDS_DEFAULT = 60.0
HEARTBEAT_SECONDS_DEFAULT = 10.0
MAX_ATTEMPTS_DEFAULT = 2
POLL_SECONDS_DEFAULT = 1.0
MAX_GROUPS_DEFAULT = 200
HEAP_LIMIT_FRACTION_DEFAULT = 0.8
#: An executor whose heartbeat is older than this is presumed dead (a Spark application takes ~20 s to start).
EXECUTOR_STALE_SECONDS_DEFAULT = 120.0


class WorkStatus(str, enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_terminal(self) -> bool:
        return self in (WorkStatus.DONE, WorkStatus.FAILED, WorkStatus.CANCELLED)


class ExpiredLease(str, enum.Enum):
    REQUEUE = "requeue"
    FAIL = "fail"


def on_expired_lease(attempts: int, max_attempts: int, has_progress: bool) -> ExpiredLease:
    """What to do with a running item whose lease ran out after ``attempts`` claims."""
    if has_progress or attempts >= max_attempts:
        return ExpiredLease.FAIL
    return ExpiredLease.REQUEUE


def lease_expired(expires_at: _dt.datetime | None, now: _dt.datetime) -> bool:
    return expires_at is not None and expires_at <= now


@dataclass(frozen=True)
class RestartLimits:
    """When a resident executor leaves to be replaced by a fresh one (0 / None: never for that reason)."""

    max_groups: int = MAX_GROUPS_DEFAULT
    heap_limit_fraction: float | None = HEAP_LIMIT_FRACTION_DEFAULT

    def __post_init__(self) -> None:
        if self.max_groups < 0:
            raise ValueError(f"max_groups must be >= 0, not {self.max_groups}")
        if self.heap_limit_fraction is not None and not 0.0 < self.heap_limit_fraction <= 1.0:
            raise ValueError(f"heap_limit_fraction must be in (0, 1], not {self.heap_limit_fraction}")


def restart_reason(limits: RestartLimits, groups_run: int, heap_used: int, heap_max: int) -> str | None:
    """Why the executor should leave now (checked between items, after a GC), or None to carry on."""
    if limits.max_groups and groups_run >= limits.max_groups:
        return f"ran {groups_run} group(s) (limit {limits.max_groups})"
    if limits.heap_limit_fraction is not None and heap_max > 0 and heap_used > limits.heap_limit_fraction * heap_max:
        return (f"JVM heap {heap_used // 2**20} MiB of {heap_max // 2**20} MiB after GC "
                f"(limit {limits.heap_limit_fraction:.0%})")
    return None


def executor_alive(heartbeat_at: _dt.datetime | None, now: _dt.datetime,
                   stale_after_s: float = EXECUTOR_STALE_SECONDS_DEFAULT) -> bool:
    return heartbeat_at is not None and (now - heartbeat_at).total_seconds() < stale_after_s
