"""The retry policy of a partition's compaction: what a failure leads to, as one table (pure; no I/O, no clock).

The Spark job classifies what it caught into a :class:`FailureKind` (it knows the Java class names,
``compaction.spark.task.classify_failure``) and looks the action up here (:func:`retry_rule`), by the kind and by
whether the attempt has commits of its own on the table that are not validated yet: a failure after a commit can never
be retried or dropped, because the commit is on main already and was not checked.

The rules follow what Iceberg says about each exception:

* ``ValidationException`` from a commit's conflict checks (``RewriteFiles`` / ``RowDelta`` validating against a
  concurrent writer's snapshot): the operation aborts and nothing is committed; the files it planned from may be gone
  or have new deletes, so the attempt is planned again from the current snapshot (re-inspected, re-decided).
* ``CommitFailedException`` ("a commit fails because of out of date metadata"): a ``CleanableFailure``, the commit
  did not land and Iceberg already removed its new files after its own ``commit.retry.num-retries``; re-planned as
  a conflict.
* ``CommitStateUnknownException``: "Cannot determine whether the commit was successful or not ... Please check to see
  whether or not your commit was successful before retrying this commit. Retrying an already successful operation
  will result in duplicate records or unintentional modifications. At this time no files will be deleted". So it is
  never retried and nothing is deleted or undone on its account: the partition stops, and whether the commit landed
  is decided by reading the table (the post-hoc check of the next plan validates a snapshot of ours that no check
  recorded; compaction.core.posthoc). Our own earlier, known commits are only rolled back by a compare-and-swap
  that checks the table first (see ROLL_BACK).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from compaction.core.results import CONFLICT, FAILED, SKIPPED, UNSUPPORTED, PartitionStatus

__all__ = [
    "FailureKind", "RetryAction", "RetryLimit", "Backoff", "RetryRule", "RETRY_TABLE", "retry_rule",
    "CONFLICT_BACKOFF", "CATALOG_POLL", "CATALOG_OUTAGE_WAIT_S", "CATALOG_RETRY_INTERVAL_S",
]

#: How long a partition waits for an unreachable catalog (a database restart, a failover) before it fails; it tries
#: again every CATALOG_RETRY_INTERVAL_S seconds.
CATALOG_OUTAGE_WAIT_S = 120.0
CATALOG_RETRY_INTERVAL_S = 3.0


class FailureKind(str, enum.Enum):
    """What kind of failure ended an attempt (classified by the Spark layer from the Java exception chain)."""

    #: Iceberg's ValidationException from a commit's conflict checks, or our own conflict checks (a concurrent writer).
    COMMIT_CONFLICT = "commit_conflict"
    #: Iceberg's CommitFailedException: the commit lost the race for the table metadata and did not land.
    COMMIT_FAILED = "commit_failed"
    #: Iceberg's CommitStateUnknownException: the commit may or may not have landed.
    COMMIT_STATE_UNKNOWN = "commit_state_unknown"
    #: The catalog's service or database did not answer (connection refused or lost): transient.
    CATALOG_UNAVAILABLE = "catalog_unavailable"
    #: The object store answered with transient errors on every attempt of a read (retried where it is read).
    STORAGE_UNAVAILABLE = "storage_unavailable"
    #: Our post-commit check found the committed snapshot's rows differ from its parent's.
    VALIDATION_MISMATCH = "validation_mismatch"
    #: The table's shape is one this platform does not compact.
    UNSUPPORTED_TABLE = "unsupported_table"
    #: A commit of ours waited ``compaction.yield.max-wait`` for the table's write leases and gave up
    #: (compaction.core.yielding).
    YIELDED_TO_WRITERS = "yielded_to_writers"
    #: Anything else (a Spark job failure, a bug).
    OTHER = "other"


class RetryAction(str, enum.Enum):
    """What the partition's attempt loop does next."""

    #: Start a new attempt from a fresh scan of the current snapshot (a stale plan is decided again), after a backoff.
    REPLAN_AND_RETRY = "replan_and_retry"
    #: Start the same attempt over once the catalog answers; nothing of ours is on the table.
    RETRY_SAME = "retry_same"
    #: Our commits are on main but not checked: wait for the catalog, then check them (kept when they pass).
    VALIDATE_WHEN_AVAILABLE = "validate_when_available"
    #: Undo our unchecked commits, newest first, each only while it is still the table's current snapshot (one
    #: compare-and-swap of the table metadata, no file deleted); a commit with another on top needs attention.
    ROLL_BACK = "roll_back"
    #: Stop without retrying, undoing or deleting anything; what landed is decided later by reading the table.
    STOP_CHECK_POST_HOC = "stop_check_post_hoc"
    #: Record the partition as unsupported (reported apart, not a failure of the platform).
    SKIP_UNSUPPORTED = "skip_unsupported"
    #: Fail the partition; nothing of ours is on the table, the next run plans it again.
    GIVE_UP = "give_up"


class RetryLimit(str, enum.Enum):
    """What bounds a retrying action."""

    NONE = "none"  # the action does not retry
    MAX_RETRIES = "max_retries"  # the run's conflict retries (--max-retries; core.run_options)
    CATALOG_OUTAGE = "catalog_outage"  # while the catalog has been unreachable for less than CATALOG_OUTAGE_WAIT_S


@dataclass(frozen=True)
class Backoff:
    """The wait before retry ``n`` (1-based): ``base_s * factor ** (n - 1)``, at most ``cap_s``."""

    base_s: float
    factor: float
    cap_s: float

    def delay_s(self, retry: int) -> float:
        return float(min(self.cap_s, self.base_s * self.factor ** max(0, retry - 1)))


#: Between attempts after a conflict: 0.5, 1, 2, 4, 8, then 10 s.
CONFLICT_BACKOFF = Backoff(base_s=0.5, factor=2.0, cap_s=10.0)
#: Between tries while the catalog is unreachable: a fixed interval.
CATALOG_POLL = Backoff(base_s=CATALOG_RETRY_INTERVAL_S, factor=1.0, cap_s=CATALOG_RETRY_INTERVAL_S)


@dataclass(frozen=True)
class RetryRule:
    """One row of the table: the action, its bound and backoff, and what follows when it stops."""

    action: RetryAction
    limit: RetryLimit = RetryLimit.NONE
    backoff: Backoff | None = None
    #: Whether a retry uses up one of the run's retries (an outage is not a conflict: it does not).
    uses_a_retry: bool = False
    #: What is done once the limit is spent (a retrying action) - GIVE_UP or ROLL_BACK.
    then: RetryAction | None = None
    #: The partition's status when this rule ends its work without a rollback (given up, stopped, limit spent);
    #: None when the rollback's outcome (rolled_back / needs_attention) or the check decides it.
    status: PartitionStatus | None = None


_REPLAN = RetryRule(RetryAction.REPLAN_AND_RETRY, RetryLimit.MAX_RETRIES, CONFLICT_BACKOFF, uses_a_retry=True,
                    then=RetryAction.GIVE_UP, status=CONFLICT)
_ROLL_BACK = RetryRule(RetryAction.ROLL_BACK)

#: (kind, whether the attempt has unchecked commits of its own on the table) -> rule.
RETRY_TABLE: dict[tuple[FailureKind, bool], RetryRule] = {
    # Nothing of this attempt is on the table.
    (FailureKind.COMMIT_CONFLICT, False): _REPLAN,
    (FailureKind.COMMIT_FAILED, False): _REPLAN,
    # Never retried, nothing deleted: the commit may have landed (CommitStateUnknownException, module docstring).
    (FailureKind.COMMIT_STATE_UNKNOWN, False): RetryRule(RetryAction.STOP_CHECK_POST_HOC, status=FAILED),
    (FailureKind.CATALOG_UNAVAILABLE, False): RetryRule(RetryAction.RETRY_SAME, RetryLimit.CATALOG_OUTAGE, CATALOG_POLL,
                                                         then=RetryAction.GIVE_UP, status=FAILED),
    # The reads retried with backoff already (compaction.metadata.storage_retry); the error is retryable for the
    # orchestrator, which runs the partition again later.
    (FailureKind.STORAGE_UNAVAILABLE, False): RetryRule(RetryAction.GIVE_UP, status=FAILED),
    # Raised only by the check of a commit; with no commit left to check there is nothing to undo (rolled_back).
    (FailureKind.VALIDATION_MISMATCH, False): _ROLL_BACK,
    (FailureKind.UNSUPPORTED_TABLE, False): RetryRule(RetryAction.SKIP_UNSUPPORTED, status=UNSUPPORTED),
    (FailureKind.OTHER, False): RetryRule(RetryAction.GIVE_UP, status=FAILED),
    # Yielded to a writer that announced itself: not a failure of ours, the next run plans the partition again.
    (FailureKind.YIELDED_TO_WRITERS, False): RetryRule(RetryAction.GIVE_UP, status=SKIPPED),
    # Our commits are on main, unchecked: never kept silently, never retried on top of (a retry would build on rows
    # nobody checked). Checking reads only, so an outage is waited out and the check run then; every other failure
    # undoes them by compare-and-swap, which reads the table's current snapshot first - so a CommitStateUnknown on
    # top of our commits is never undone blindly: if it landed, our snapshot is no longer current and nothing is
    # rolled back (needs_attention).
    (FailureKind.CATALOG_UNAVAILABLE, True): RetryRule(RetryAction.VALIDATE_WHEN_AVAILABLE, RetryLimit.CATALOG_OUTAGE,
                                                        CATALOG_POLL, then=RetryAction.ROLL_BACK),
    (FailureKind.COMMIT_CONFLICT, True): _ROLL_BACK,
    (FailureKind.COMMIT_FAILED, True): _ROLL_BACK,
    (FailureKind.COMMIT_STATE_UNKNOWN, True): _ROLL_BACK,
    (FailureKind.STORAGE_UNAVAILABLE, True): _ROLL_BACK,
    (FailureKind.VALIDATION_MISMATCH, True): _ROLL_BACK,
    (FailureKind.UNSUPPORTED_TABLE, True): _ROLL_BACK,
    (FailureKind.OTHER, True): _ROLL_BACK,
    (FailureKind.YIELDED_TO_WRITERS, True): _ROLL_BACK,
}


def retry_rule(kind: FailureKind, *, committed: bool) -> RetryRule:
    """The rule for a failure of ``kind``; ``committed``: the attempt has commits on the table not yet validated."""
    return RETRY_TABLE[(kind, committed)]
