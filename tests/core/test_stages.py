"""A job group's order of steps as data: the stages listed from its tasks, in the order the job runs them."""

from __future__ import annotations

import pytest

from compaction.core.model import PartitionKey
from compaction.core.plan import CompactionKind, CompactionTask
from compaction.core.stages import Stage, group_stages, is_selective

FULL, SELECTIVE_MAJOR, MINOR = "full", "selective", "minor"


def _task(i: int, what: str) -> CompactionTask:
    kind = CompactionKind.MINOR if what == MINOR else CompactionKind.MAJOR
    return CompactionTask(f"t{i}", PartitionKey(0, ()), kind, (f"d{i}",), (), 1, full_rewrite=what == FULL)


def test_selective_tasks_are_minors_and_majors_that_do_not_rewrite_everything() -> None:
    assert [is_selective(_task(0, w)) for w in (FULL, SELECTIVE_MAJOR, MINOR)] == [False, True, True]


@pytest.mark.parametrize(("kinds", "expected"), [
    ((FULL,), [Stage.FULL_REWRITE, Stage.REPORT, Stage.EACH_PARTITION]),
    ((MINOR,), [Stage.MINOR_FILE_REWRITE, Stage.REPORT, Stage.MINOR_READ, Stage.MINOR_COMMIT, Stage.EACH_PARTITION]),
    # A selective MAJOR may be part of the full rewrite (an unpartitioned spec's full MAJOR rewrites every file).
    ((SELECTIVE_MAJOR,), [Stage.FULL_REWRITE, Stage.MAJOR_FILE_REWRITE, Stage.REPORT, Stage.MINOR_READ,
                          Stage.MINOR_COMMIT, Stage.EACH_PARTITION]),
    ((MINOR, FULL, SELECTIVE_MAJOR), [Stage.FULL_REWRITE, Stage.MINOR_FILE_REWRITE, Stage.MAJOR_FILE_REWRITE,
                                      Stage.REPORT, Stage.MINOR_READ, Stage.MINOR_COMMIT, Stage.EACH_PARTITION]),
    ((), [Stage.REPORT, Stage.EACH_PARTITION]),
])
def test_with_group_commits_the_rewrites_then_the_conversions_then_each_partition(
        kinds: tuple[str, ...], expected: list[Stage]) -> None:
    assert group_stages([_task(i, w) for i, w in enumerate(kinds)], group_commit=True) == expected


def test_without_group_commits_only_the_minor_read_is_shared() -> None:
    assert group_stages([_task(0, FULL)], group_commit=False) == [Stage.EACH_PARTITION]
    assert group_stages([_task(0, FULL), _task(1, MINOR)], group_commit=False) == [Stage.MINOR_READ,
                                                                                  Stage.EACH_PARTITION]


def test_every_group_ends_with_each_partition_on_its_own() -> None:
    for group_commit in (False, True):
        for kinds in ((), (FULL,), (MINOR,), (SELECTIVE_MAJOR, MINOR)):
            stages = group_stages([_task(i, w) for i, w in enumerate(kinds)], group_commit=group_commit)
            assert stages[-1] is Stage.EACH_PARTITION and stages.count(Stage.EACH_PARTITION) == 1
