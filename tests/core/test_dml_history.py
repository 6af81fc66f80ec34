"""Timing a commit between the DML commits of writers that do not announce themselves
(compaction.core.dml_history): which commits count as DML, their cadence, and the quiet part of the cycle."""

from __future__ import annotations

import pytest

from compaction.core.dml_history import (
    DML_DURATION_MIN_S,
    LONE_DML_HORIZON_S,
    LONE_DML_MAX_WAIT_S,
    SnapshotView,
    decide_dml_window,
    decide_work_start,
    dml_cadence,
    dml_duration_s,
    is_validating_dml,
)
from compaction.core.policy import CompactionPolicy
from compaction.core.posthoc import PLAN_PROPERTY
from compaction.core.yielding import GateAction

POLICY = CompactionPolicy()
_ids = iter(range(1, 1_000_000))


def snap(t: float, operation: str = "delete", **summary: str) -> SnapshotView:
    return SnapshotView(next(_ids), t, operation, summary or {"added-position-delete-files": "1"})


def spark_dml(t: float) -> SnapshotView:
    return snap(t, "overwrite", **{"added-data-files": "1", "added-dvs": "2", "spark.app.id": "local-1"})


def history(*dml_times: float, noise_every: float = 2.0) -> list[SnapshotView]:
    """DML commits at ``dml_times`` among streaming equality-delete commits every ``noise_every`` seconds."""
    end = max(dml_times) + 5
    stream = [snap(i * noise_every, "overwrite", **{"added-equality-delete-files": "4", "added-data-files": "4"})
              for i in range(int(end / noise_every))]
    return sorted([*stream, *(spark_dml(t) for t in dml_times)], key=lambda s: s.committed_at)


def test_only_row_level_dml_of_other_writers_counts() -> None:
    assert is_validating_dml(snap(0, "delete", **{"added-position-delete-files": "3"}))
    assert is_validating_dml(spark_dml(0))
    assert is_validating_dml(snap(0, "overwrite", **{"deleted-data-files": "2", "added-data-files": "2"}))  # CoW
    assert not is_validating_dml(snap(0, "append", **{"added-data-files": "1"}))
    assert not is_validating_dml(snap(0, "replace", **{"deleted-data-files": "9", "added-data-files": "1"}))
    assert not is_validating_dml(snap(0, "overwrite", **{"added-equality-delete-files": "4"}))  # streaming upsert
    # Flink's upserts do not validate (they never fail because of us); our own commits do not count either.
    assert not is_validating_dml(snap(0, "overwrite", **{"added-position-delete-files": "1", "flink.job-id": "j"}))
    assert not is_validating_dml(snap(0, "delete", **{"added-dvs": "5", PLAN_PROPERTY: "plan-1"}))
    assert not is_validating_dml(snap(0, "delete", **{"added-position-delete-files": "not-a-number"}))


def test_cadence_of_the_recent_dml_commits() -> None:
    assert dml_cadence(history(10, 40)[:-1]) is not None
    assert dml_cadence([s for s in history(10) if not is_validating_dml(s)]) is None  # no DML: no cadence
    one = dml_cadence(history(10))
    assert one is not None and one.gap_s is None and one.last_at == 10  # a DML writer, its rhythm not known yet
    two = dml_cadence(history(10, 40))
    assert two is not None and two.gap_s == pytest.approx(30)
    cadence = dml_cadence(history(10, 42, 74, 105, 138))
    assert cadence is not None
    assert cadence.last_at == 138 and cadence.commits == 5
    assert cadence.gap_s == pytest.approx(31)  # the shortest gap: a DML may start that soon
    assert cadence.typical_gap_s == pytest.approx(32)
    assert 0 < cadence.jitter_s <= 4
    # A pipeline that changed its schedule is judged by its recent commits.
    old_then_new = dml_cadence(history(*[i * 300.0 for i in range(6)], *[1500 + i * 20.0 for i in range(1, 13)]))
    assert old_then_new is not None and old_then_new.gap_s == pytest.approx(20)


def ours(t: float) -> SnapshotView:
    return snap(t, "replace", **{"deleted-data-files": "4", "added-data-files": "1"})


def test_a_gap_with_a_commit_of_ours_in_it_is_no_measure_of_the_rhythm() -> None:
    # The DML that should have committed at ~70 failed because a rewrite landed at 62 and was retried: 100.
    retried = dml_cadence(sorted([*history(10, 40, 100, 130), ours(62)], key=lambda s: s.committed_at))
    assert retried is not None and retried.gap_s == pytest.approx(30) and retried.typical_gap_s == pytest.approx(30)
    # Every gap had one in its second half: the rhythm is not known, as with a single DML commit.
    unknown = dml_cadence(sorted([*history(10, 70), ours(52)], key=lambda s: s.committed_at))
    assert unknown is not None and unknown.gap_s is None and unknown.last_at == 70
    mine = snap(50, "delete", **{"added-dvs": "5", PLAN_PROPERTY: "plan-1"})  # a MINOR of ours
    assert dml_cadence(sorted([*history(10, 70), mine], key=lambda s: s.committed_at)).gap_s is None  # type: ignore[union-attr]
    # Our commits timed right after each DML commit (what this rule makes them) leave the rhythm known.
    timed = dml_cadence(sorted([*history(10, 40, 70, 100), ours(12), ours(43), ours(71)], key=lambda s: s.committed_at))
    assert timed is not None and timed.gap_s == pytest.approx(30)


def test_a_writer_whose_rhythm_is_unknown_gets_commits_right_after_its_commits_only() -> None:
    single = dml_cadence(history(100))
    assert single is not None and single.commits == 1 and not single.disrupted_after_quiet
    assert decide_dml_window(single, now=105, commit_in_s=3, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    one = dml_cadence(sorted([*history(40, 100), ours(90)], key=lambda s: s.committed_at))
    assert one is not None and one.gap_s is None
    right_after = decide_dml_window(one, now=103, commit_in_s=3, waited_s=0, policy=POLICY)
    assert right_after.action is GateAction.COMMIT and "not known yet" in right_after.reason
    later = decide_dml_window(one, now=130, commit_in_s=3, waited_s=0, policy=POLICY)
    assert later.action is GateAction.WAIT and later.retry_in_s == 1.0
    overdue = decide_dml_window(one, now=220, commit_in_s=3, waited_s=90, policy=POLICY)
    assert overdue.action is GateAction.COMMIT_ANYWAY
    assert decide_dml_window(one, now=100 + 301, commit_in_s=3, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    no_wait = CompactionPolicy.resolve({"compaction.yield.max-wait": "0"})
    assert decide_dml_window(one, now=130, commit_in_s=3, waited_s=0, policy=no_wait).commits


def at_rest_history() -> list[SnapshotView]:
    return [s for s in history(100) if s.committed_at <= 100]


def test_a_single_dml_commit_is_waited_for_once_and_briefly() -> None:
    # The first run of a pipeline's job on a cadence, or a one-off DELETE, on a table the stream keeps writing to: a
    # commit landing after the quiet part waits for a second DML commit (the job's next run) ...
    single = dml_cadence(history(100))
    assert single is not None and single.written_after
    waiting = decide_dml_window(single, now=125, commit_in_s=3, waited_s=0, policy=POLICY)
    assert waiting.action is GateAction.WAIT and "one DML commit" in waiting.reason
    # ... at most LONE_DML_MAX_WAIT_S, and not past the policy's bound ...
    assert decide_dml_window(single, now=125, commit_in_s=3, waited_s=59, policy=POLICY).action is GateAction.WAIT
    gave_up = decide_dml_window(single, now=125, commit_in_s=3, waited_s=LONE_DML_MAX_WAIT_S, policy=POLICY)
    assert gave_up.action is GateAction.COMMIT_ANYWAY
    short = CompactionPolicy.resolve({"compaction.yield.max-wait": "20"})
    assert decide_dml_window(single, now=125, commit_in_s=3, waited_s=20, policy=short).action is GateAction.COMMIT_ANYWAY
    # ... only while that commit is recent ...
    assert decide_dml_window(single, now=100 + LONE_DML_HORIZON_S + 1, commit_in_s=3, waited_s=0,
                             policy=POLICY).action is GateAction.COMMIT
    # ... and once: after a commit of ours landed past the quiet part, a one-off DELETE delays nothing more.
    spent = dml_cadence(sorted([*history(100), ours(111)], key=lambda s: s.committed_at))
    assert spent is not None and spent.disrupted_after_quiet
    assert decide_dml_window(spent, now=125, commit_in_s=3, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    quiet = dml_cadence(sorted([*history(100), ours(106)], key=lambda s: s.committed_at))
    assert quiet is not None and not quiet.disrupted_after_quiet
    assert decide_dml_window(quiet, now=125, commit_in_s=3, waited_s=0, policy=POLICY).action is GateAction.WAIT
    # A DML on a table no other writer wrote to since is a one-off (a fix by hand): nothing to wait for.
    at_rest = dml_cadence(at_rest_history())
    assert at_rest is not None and at_rest.commits == 1 and not at_rest.written_after
    assert decide_dml_window(at_rest, now=125, commit_in_s=3, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    # Our own commits after it do not make the table live.
    ours_only = dml_cadence(sorted([*at_rest_history(), ours(104)], key=lambda s: s.committed_at))
    assert ours_only is not None and not ours_only.written_after
    # The job's second commit, after the wait, makes its rhythm known.
    second = dml_cadence(sorted([*history(100, 135), ours(106)], key=lambda s: s.committed_at))
    assert second is not None and second.gap_s == pytest.approx(35)
    assert decide_dml_window(second, now=136, commit_in_s=3, waited_s=10, policy=POLICY).action is GateAction.COMMIT


def test_the_time_our_commit_takes_to_land_counts() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))  # quiet until 29 s after a DML commit
    assert decide_dml_window(cadence, now=140, commit_in_s=2, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    slow = decide_dml_window(cadence, now=140, commit_in_s=12, waited_s=0, policy=POLICY)
    assert slow.action is GateAction.WAIT


def test_duration_is_a_fraction_of_the_gap_unless_the_policy_says() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))
    assert cadence is not None
    assert dml_duration_s(cadence, POLICY) == pytest.approx(10)
    assert dml_duration_s(cadence, CompactionPolicy.resolve({"compaction.yield.dml-duration": "25s"})) == 25
    fast = dml_cadence(history(0, 2, 4, 6, noise_every=100))
    assert fast is not None and dml_duration_s(fast, POLICY) == DML_DURATION_MIN_S


def test_commits_in_the_quiet_part_of_the_cycle_waits_in_the_busy_part() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))  # gap 40 s, ~10 s each, no jitter: quiet until 29 s after
    assert cadence is not None
    right_after = decide_dml_window(cadence, now=125, commit_in_s=0, waited_s=0, policy=POLICY)
    assert right_after.action is GateAction.COMMIT and "5 s after" in right_after.reason
    assert decide_dml_window(cadence, now=125, commit_in_s=20, waited_s=0, policy=POLICY).commits
    # Later in the cycle, a rewrite landing 20 s from now would land while the next DML runs.
    busy = decide_dml_window(cadence, now=135, commit_in_s=20, waited_s=0, policy=POLICY)
    assert busy.action is GateAction.WAIT and not busy.commits and busy.retry_in_s == 1.0
    late = decide_dml_window(cadence, now=152, commit_in_s=0, waited_s=0, policy=POLICY)
    assert late.action is GateAction.WAIT and "likely running" in late.reason
    # The DML committed while we waited: the history read again shows it, and the next quiet part opens.
    after_it = dml_cadence(history(0, 40, 80, 120, 161))
    assert decide_dml_window(after_it, now=162, commit_in_s=0, waited_s=9, policy=POLICY).action is GateAction.COMMIT


def test_never_waits_when_waiting_cannot_help() -> None:
    assert decide_dml_window(None, now=0, commit_in_s=0, waited_s=0, policy=POLICY).action is GateAction.COMMIT
    assert dml_cadence(history(0, 40, 80, 120)) is not None
    cadence = dml_cadence(history(0, 40, 80, 120))
    stopped = decide_dml_window(cadence, now=120 + 3 * 40 + 1, commit_in_s=0, waited_s=0, policy=POLICY)
    assert stopped.action is GateAction.COMMIT and "have not committed" in stopped.reason
    outlasting = decide_dml_window(cadence, now=150, commit_in_s=35, waited_s=0, policy=POLICY)
    assert outlasting.action is GateAction.COMMIT and "waiting would not help" in outlasting.reason
    back_to_back = decide_dml_window(cadence, now=150, commit_in_s=0, waited_s=0,
                                     policy=CompactionPolicy.resolve({"compaction.yield.dml-duration": "40s"}))
    assert back_to_back.action is GateAction.COMMIT


def test_waits_at_most_one_cycle_or_the_policy_bound() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))
    assert cadence is not None
    overdue = decide_dml_window(cadence, now=165, commit_in_s=0, waited_s=40, policy=POLICY)
    assert overdue.action is GateAction.COMMIT_ANYWAY and "did not come" in overdue.reason
    no_wait = CompactionPolicy.resolve({"compaction.yield.max-wait": "0"})
    assert decide_dml_window(cadence, now=152, commit_in_s=0, waited_s=0, policy=no_wait).commits
    near_bound = decide_dml_window(cadence, now=152, commit_in_s=0, waited_s=39.5, policy=POLICY)
    assert near_bound.action is GateAction.WAIT and near_bound.retry_in_s == pytest.approx(0.5)


def test_a_clock_ahead_of_ours_counts_as_just_committed() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))
    assert decide_dml_window(cadence, now=118, commit_in_s=0, waited_s=0, policy=POLICY).action is GateAction.COMMIT


def test_a_rewrite_starts_only_where_its_work_and_commit_fit_before_the_next_dml() -> None:
    cadence = dml_cadence(history(0, 40, 80, 120))  # gap 40 s, ~10 s each: quiet until 29 s after a DML commit
    assert cadence is not None
    # 20 s after the last DML commit, a commit alone (3 s) lands in the quiet part, but a rewrite of 8 s before it
    # would commit while the next DML runs, which deletes rows of the files it replaces: Iceberg refuses the commit.
    assert decide_dml_window(cadence, now=140, commit_in_s=3, waited_s=0, policy=POLICY).commits
    late = decide_work_start(cadence, now=140, work_s=8, commit_in_s=3, waited_s=0, policy=POLICY)
    assert late.action is GateAction.WAIT and "likely running" in late.reason
    early = decide_work_start(cadence, now=125, work_s=8, commit_in_s=3, waited_s=0, policy=POLICY)
    assert early.action is GateAction.COMMIT
    # Once the DML it waited for committed, the work starts, and its commit then falls in the quiet part.
    after_it = dml_cadence(history(0, 40, 80, 120, 160))
    started = decide_work_start(after_it, now=161, work_s=8, commit_in_s=3, waited_s=21, policy=POLICY)
    assert started.action is GateAction.COMMIT
    assert decide_dml_window(after_it, now=161 + 8, commit_in_s=3, waited_s=0, policy=POLICY).commits
    # Work that outlasts the quiet part never waits: no moment to start it would help.
    long = decide_work_start(cadence, now=140, work_s=30, commit_in_s=3, waited_s=0, policy=POLICY)
    assert long.action is GateAction.COMMIT and "waiting would not help" in long.reason
