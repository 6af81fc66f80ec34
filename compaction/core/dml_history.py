"""When a compaction commit falls between the DML commits of writers that do not announce themselves.

A merge-on-read DML (Spark DELETE / UPDATE / MERGE) fails when a commit of ours lands between its start and its own
commit: Iceberg's ``RowDelta`` validates that the data files its position deletes name still exist (a MAJOR or a
fragment merge removed them) and that no delete file / DV was added since its scan (a MINOR adds exactly those).
A writer holding a lease is waited for (``compaction.core.yielding``); for the others, the table's history tells
when they commit: most DML jobs run on a cadence (a scheduled MERGE, a CDC batch every N seconds), and a commit of
ours that lands right after one of their commits, before the next has started, fails none of them.

This module is the pure rule, fed the table's recent snapshots and a ``now``: which commits are row-level DML of
another writer, their cadence, and whether a commit of ours landing in ``commit_in_s`` falls in the quiet part of
the cycle (commit), in the part where a DML is likely running (wait for its commit, then commit), or whether no
waiting helps (no cadence, DML back to back, or our rewrite outlasting the quiet part: commit).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Mapping, Sequence

from compaction.core.policy import CompactionPolicy
from compaction.core.posthoc import PLAN_PROPERTY
from compaction.core.yielding import POLL_S_DEFAULT, GateAction, GateDecision

__all__ = [
    "DML_DURATION_FRACTION",
    "DML_DURATION_MIN_S",
    "DML_OPERATIONS",
    "DmlCadence",
    "RECENT_DML_COMMITS",
    "SUMMARY_KEYS",
    "SnapshotView",
    "decide_dml_window",
    "dml_cadence",
    "dml_duration_s",
    "is_validating_dml",
]

#: Iceberg's operations of a row-level DML: a merge-on-read DELETE commits ``delete`` (deletes only), an UPDATE /
#: MERGE ``overwrite`` (data and deletes); copy-on-write DML commits ``overwrite`` too. ``append`` and ``replace``
#: (compaction) are not DML.
DML_OPERATIONS = frozenset({"overwrite", "delete"})
#: Summary keys of a commit that a DML fails on: it added position deletes / DVs or removed data files.
_DML_COUNTS = ("added-position-delete-files", "added-dvs", "deleted-data-files")
#: Flink's upsert commits do not validate referenced files or concurrent deletes (Iceberg PR #10200): they never
#: fail because of a compaction, so their cadence does not constrain ours.
_FLINK_JOB_ID = "flink.job-id"
#: The summary keys the rule reads (an edge reading the history fetches only these).
SUMMARY_KEYS = (*_DML_COUNTS, _FLINK_JOB_ID, PLAN_PROPERTY)

#: A cadence needs at least two gaps.
MIN_DML_COMMITS = 3
#: The cadence of the most recent DML commits: a pipeline that changed its schedule is judged by its new one.
RECENT_DML_COMMITS = 12
#: No DML commit for this many typical gaps: the cadence has stopped, nothing is expected in flight.
STOPPED_AFTER_GAPS = 3.0
#: ``compaction.yield.dml-duration=auto``: a DML is assumed to run this fraction of the gap between DML commits
#: before it commits (the table's history has their commits, not their starts) ...
DML_DURATION_FRACTION = 0.25
#: ... and at least this long.
DML_DURATION_MIN_S = 2.0
#: Slack between our landing and the earliest expected start of the next DML (clocks, catalog latency).
SAFETY_MARGIN_S = 1.0


@dataclass(frozen=True)
class SnapshotView:
    """One snapshot of the table's history, as the rule needs it (``summary``: at least :data:`SUMMARY_KEYS`)."""

    snapshot_id: int
    committed_at: float  # epoch seconds
    operation: str
    summary: Mapping[str, str]


def _count(summary: Mapping[str, str], key: str) -> int:
    try:
        return int(summary.get(key) or 0)
    except ValueError:
        return 0


def is_validating_dml(snapshot: SnapshotView) -> bool:
    """A row-level DML commit of another writer: the kind of job whose next commit a compaction of ours can fail."""
    if snapshot.operation not in DML_OPERATIONS:
        return False
    if snapshot.summary.get(PLAN_PROPERTY) or snapshot.summary.get(_FLINK_JOB_ID):
        return False
    return any(_count(snapshot.summary, key) > 0 for key in _DML_COUNTS)


@dataclass(frozen=True)
class DmlCadence:
    """The table's recent DML commits: the last one, the typical gap between two and how much it varies."""

    last_at: float
    gap_s: float
    jitter_s: float
    commits: int


def dml_cadence(snapshots: Sequence[SnapshotView]) -> DmlCadence | None:
    """``None`` when the history shows no cadence (fewer than :data:`MIN_DML_COMMITS` DML commits)."""
    times = sorted(s.committed_at for s in snapshots if is_validating_dml(s))[-RECENT_DML_COMMITS:]
    if len(times) < MIN_DML_COMMITS:
        return None
    gaps = [later - earlier for earlier, later in zip(times, times[1:])]
    gap = statistics.median(gaps)
    if gap <= 0:
        return None
    # Twice the median absolute deviation: one retried DML (a doubled gap) does not widen it much.
    jitter = min(0.5 * gap, 2.0 * statistics.median(abs(g - gap) for g in gaps))
    return DmlCadence(last_at=times[-1], gap_s=gap, jitter_s=jitter, commits=len(times))


def dml_duration_s(cadence: DmlCadence, policy: CompactionPolicy) -> float:
    if policy.yield_dml_duration_seconds > 0:
        return float(policy.yield_dml_duration_seconds)
    return max(DML_DURATION_MIN_S, DML_DURATION_FRACTION * cadence.gap_s)


def decide_dml_window(cadence: DmlCadence | None, *, now: float, commit_in_s: float, waited_s: float,
                      policy: CompactionPolicy, poll_s: float = POLL_S_DEFAULT) -> GateDecision:
    """Whether a commit of ours expected to land ``commit_in_s`` from ``now`` (epoch seconds) goes ahead.

    ``cadence``: of the history read at ``now`` (a DML committed while we waited moves ``last_at``, which opens the
    next quiet part); ``waited_s``: how long this commit has waited for one."""
    if cadence is None:
        return GateDecision(GateAction.COMMIT, "no DML cadence in the table's history")
    gap = cadence.gap_s
    since = max(0.0, now - cadence.last_at)  # another writer's clock may run ahead of ours
    if since > STOPPED_AFTER_GAPS * gap + cadence.jitter_s:
        return GateDecision(GateAction.COMMIT, f"the table's DML writers have not committed for {since:.0f} s")
    duration = dml_duration_s(cadence, policy)
    # The next DML is expected to commit ~gap after the last one and to have started ~duration before that.
    quiet_until = gap - cadence.jitter_s - duration - SAFETY_MARGIN_S
    rhythm = f"DML commits every ~{gap:.0f} s, each running ~{duration:.0f} s"
    if commit_in_s > quiet_until:
        return GateDecision(GateAction.COMMIT, f"no quiet window fits this commit ({rhythm}): waiting would not help")
    lands_at = since + commit_in_s
    if lands_at <= quiet_until:
        return GateDecision(GateAction.COMMIT, f"lands {lands_at:.0f} s after the table's last DML commit, before the "
                            f"next is expected to start ({rhythm})")
    max_wait = min(float(policy.yield_max_wait_seconds), gap + cadence.jitter_s)
    if waited_s >= max_wait:
        return GateDecision(GateAction.COMMIT_ANYWAY, f"committed after waiting {waited_s:.0f} s for a DML commit "
                            f"that did not come ({rhythm})")
    return GateDecision(GateAction.WAIT, f"a DML of the table is likely running ({rhythm}, the last {since:.0f} s "
                        "ago): waiting for its commit", max(0.05, min(poll_s, max_wait - waited_s)))
