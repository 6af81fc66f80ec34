"""When a compaction commit falls between the DML commits of writers that do not announce themselves.

A merge-on-read DML (Spark DELETE / UPDATE / MERGE) fails when a commit of ours lands between its start and its own
commit: Iceberg's ``RowDelta`` validates that the data files its position deletes name still exist (a MAJOR or a
fragment merge removed them) and that no delete file / DV was added since its scan (a MINOR adds exactly those).
A writer holding a lease is waited for (``compaction.core.yielding``); for the others, the table's history tells
when they commit: most DML jobs run on a cadence (a scheduled MERGE, a CDC batch every N seconds), and a commit of
ours that lands right after one of their commits, before the next has started, fails none of them.

This module is the pure rule, fed the table's recent snapshots and a ``now``: which commits are row-level DML of
another writer, their cadence (the shortest recent gap between two of their commits in whose second half no commit
failing a DML fell: a DML failed by us is retried, so its gap is no measure of the writer's rhythm), and whether a
commit of ours landing in ``commit_in_s`` falls in the quiet part of the cycle (commit), in the part where a DML is
likely running (wait for its commit, then commit), or whether no waiting helps (no DML in the history, DML back to
back, or our commit outlasting the quiet part: commit). A writer whose rhythm is not known yet gets our commits only
right after its commits; so does a writer with a single DML commit on a table others keep writing to, for a shorter
while and one wait only (it may be a one-off DELETE, or the first run of a pipeline's job whose second run is under
way).
"""

from __future__ import annotations

import bisect
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
    "LONE_DML_HORIZON_S",
    "LONE_DML_MAX_WAIT_S",
    "RECENT_DML_COMMITS",
    "SUMMARY_KEYS",
    "SnapshotView",
    "decide_dml_window",
    "decide_work_start",
    "dml_cadence",
    "dml_duration_s",
    "fails_dml_in_flight",
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
#: A DML writer whose rhythm is not known yet (a commit failing DML in the second half of every gap between its
#: commits: it may have failed and delayed a DML): a commit of ours lands at most this long after its last DML
#: commit ...
UNKNOWN_RHYTHM_QUIET_S = 10.0
#: ... or waits at most this long for its next one ...
UNKNOWN_RHYTHM_MAX_WAIT_S = 90.0
#: ... unless it has not committed for this long.
UNKNOWN_RHYTHM_HORIZON_S = 300.0
#: A single DML commit in the history of a table that other writers kept writing to since: the first run of a
#: pipeline's DML job, or a one-off. Commits of ours landing later than :data:`UNKNOWN_RHYTHM_QUIET_S` after it wait
#: for a second DML commit at most this long ...
LONE_DML_MAX_WAIT_S = 60.0
#: ... only while it is this recent, and only until one commit failing DML has landed after that quiet part
#: (``DmlCadence.disrupted_after_quiet``): a one-off DELETE costs one wait, not one per commit.
LONE_DML_HORIZON_S = 120.0


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


def fails_dml_in_flight(snapshot: SnapshotView) -> bool:
    """A commit that fails a merge-on-read DML running across it: a rewrite (``replace``: data files removed) or a
    commit of ours (a MINOR's position deletes / DVs). A DML failed by one is retried later, so the gap between
    its neighbouring DML commits says nothing about the writer's rhythm."""
    return snapshot.operation == "replace" or bool(snapshot.summary.get(PLAN_PROPERTY))


@dataclass(frozen=True)
class DmlCadence:
    """The table's recent DML commits: the last one, the shortest and the typical gap between two and how much it
    varies. ``gap_s`` is None when the rhythm is not known yet: one DML commit, or a commit failing DML in the
    second half of every gap (the gap may be a DML retried because of it)."""

    last_at: float
    gap_s: float | None
    typical_gap_s: float | None
    jitter_s: float
    commits: int
    #: A commit failing DML landed later than :data:`UNKNOWN_RHYTHM_QUIET_S` after the last DML commit.
    disrupted_after_quiet: bool = False
    #: Another writer (not a DML, not a commit failing DML) committed after the last DML commit: the table is live.
    written_after: bool = False


def dml_cadence(snapshots: Sequence[SnapshotView]) -> DmlCadence | None:
    """``None`` when the history holds no DML commit of another writer."""
    ordered = sorted(snapshots, key=lambda s: s.committed_at)
    times = [s.committed_at for s in ordered if is_validating_dml(s)][-RECENT_DML_COMMITS:]
    if not times:
        return None
    disrupting = [s.committed_at for s in ordered if fails_dml_in_flight(s)]
    disrupted_after_quiet = bool(disrupting) and disrupting[-1] > times[-1] + UNKNOWN_RHYTHM_QUIET_S
    written_after = any(s.committed_at > times[-1] and not is_validating_dml(s) and not fails_dml_in_flight(s)
                        for s in ordered)
    # A commit failing DML in the second half of a gap may have failed the DML that was to end it (retried later:
    # a longer gap); one in the first half landed before the next DML started (a DML runs a quarter of a gap, as
    # assumed below), as our commits timed by this rule do.
    gaps = [later - earlier for earlier, later in zip(times, times[1:])
            if later > earlier and bisect.bisect_right(disrupting, (earlier + later) / 2)
            == bisect.bisect_left(disrupting, later)]
    if not gaps:
        return DmlCadence(last_at=times[-1], gap_s=None, typical_gap_s=None, jitter_s=0.0, commits=len(times),
                          disrupted_after_quiet=disrupted_after_quiet, written_after=written_after)
    typical = statistics.median(gaps)
    # Twice the median absolute deviation: one late DML (a longer gap) does not widen it much.
    jitter = min(0.5 * typical, 2.0 * statistics.median(abs(g - typical) for g in gaps))
    # The shortest gap, not the typical one: a DML may start that soon after the last commit.
    return DmlCadence(last_at=times[-1], gap_s=min(gaps), typical_gap_s=typical, jitter_s=jitter, commits=len(times),
                      disrupted_after_quiet=disrupted_after_quiet, written_after=written_after)


def dml_duration_s(cadence: DmlCadence, policy: CompactionPolicy) -> float:
    if policy.yield_dml_duration_seconds > 0:
        return float(policy.yield_dml_duration_seconds)
    if cadence.gap_s is None:
        return DML_DURATION_MIN_S
    return max(DML_DURATION_MIN_S, DML_DURATION_FRACTION * cadence.gap_s)


def decide_dml_window(cadence: DmlCadence | None, *, now: float, commit_in_s: float, waited_s: float,
                      policy: CompactionPolicy, poll_s: float = POLL_S_DEFAULT) -> GateDecision:
    """Whether a commit of ours expected to land ``commit_in_s`` from ``now`` (epoch seconds) goes ahead.

    ``cadence``: of the history read at ``now`` (a DML committed while we waited moves ``last_at``, which opens the
    next quiet part); ``waited_s``: how long this commit has waited for one."""
    if cadence is None:
        return GateDecision(GateAction.COMMIT, "no DML commit in the table's recent history")
    since = max(0.0, now - cadence.last_at)  # another writer's clock may run ahead of ours
    lands_at = since + commit_in_s
    if cadence.gap_s is None or cadence.typical_gap_s is None:
        lone = cadence.commits < 2
        if lone and not cadence.written_after:
            # No other writer since: a one-off DML on a table at rest (a fix by hand, a test), not a pipeline's.
            return GateDecision(GateAction.COMMIT, "one DML commit in the table's recent history and no write "
                                "since: no rhythm to time by")
        if lone and cadence.disrupted_after_quiet:
            # The one wait a single DML commit gets is spent: a one-off DELETE must not delay every commit after it.
            return GateDecision(GateAction.COMMIT, "one DML commit in the table's recent history, and a commit of "
                                "ours landed after it: no rhythm to time by")
        if since > (LONE_DML_HORIZON_S if lone else UNKNOWN_RHYTHM_HORIZON_S):
            return GateDecision(GateAction.COMMIT, f"the table's DML writers have not committed for {since:.0f} s")
        if lands_at <= UNKNOWN_RHYTHM_QUIET_S:
            return GateDecision(GateAction.COMMIT, f"lands {lands_at:.0f} s after the table's last DML commit (their "
                                "rhythm is not known yet)")
        if lone:
            return _wait_or_commit(min(float(policy.yield_max_wait_seconds), LONE_DML_MAX_WAIT_S), waited_s, poll_s,
                                   "one DML commit so far: its job may run again", since)
        return _wait_or_commit(min(float(policy.yield_max_wait_seconds), UNKNOWN_RHYTHM_MAX_WAIT_S), waited_s, poll_s,
                               "a DML writer commits to this table, its rhythm not known yet", since)
    gap, typical = cadence.gap_s, cadence.typical_gap_s
    if since > STOPPED_AFTER_GAPS * typical + cadence.jitter_s:
        return GateDecision(GateAction.COMMIT, f"the table's DML writers have not committed for {since:.0f} s")
    duration = dml_duration_s(cadence, policy)
    # The next DML may commit as soon as the shortest gap after the last one and start ~duration before that.
    quiet_until = gap - duration - SAFETY_MARGIN_S
    rhythm = f"DML commits every {gap:.0f}-{typical:.0f} s, each running ~{duration:.0f} s"
    if commit_in_s > quiet_until:
        return GateDecision(GateAction.COMMIT, f"no quiet window fits this commit ({rhythm}): waiting would not help")
    if lands_at <= quiet_until:
        return GateDecision(GateAction.COMMIT, f"lands {lands_at:.0f} s after the table's last DML commit, before the "
                            f"next is expected to start ({rhythm})")
    return _wait_or_commit(min(float(policy.yield_max_wait_seconds), typical + cadence.jitter_s), waited_s, poll_s,
                           rhythm, since)


def _wait_or_commit(max_wait: float, waited_s: float, poll_s: float, rhythm: str, since: float) -> GateDecision:
    if waited_s >= max_wait:
        return GateDecision(GateAction.COMMIT_ANYWAY, f"committed after waiting {waited_s:.0f} s for a DML commit "
                            f"that did not come ({rhythm})")
    return GateDecision(GateAction.WAIT, f"a DML of the table is likely running ({rhythm}, the last {since:.0f} s "
                        "ago): waiting for its commit", max(0.05, min(poll_s, max_wait - waited_s)))


def decide_work_start(cadence: DmlCadence | None, *, now: float, work_s: float, commit_in_s: float, waited_s: float,
                      policy: CompactionPolicy, poll_s: float = POLL_S_DEFAULT) -> GateDecision:
    """Whether to start now the work of a commit that Iceberg refuses when a DML commits during that work: a
    rewrite's ``RewriteFiles`` fails with "found new position delete for replaced data file" once the DML deleted
    rows of a file it replaces (validateFromSnapshot: the new files would resurrect them). The work (``work_s``)
    and its commit (``commit_in_s``) must then both fit in the quiet part of the cycle, as the commit alone does in
    :func:`decide_dml_window`. Where they do not, waiting for the DML's commit before the work costs no more than
    the commit window waiting for it after the work, and the work is not thrown away when the DML hits its files."""
    return decide_dml_window(cadence, now=now, commit_in_s=work_s + commit_in_s, waited_s=waited_s, policy=policy,
                             poll_s=poll_s)
