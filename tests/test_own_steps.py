"""Which of our commits ``validate`` compares as one step (compaction.spark.group_reads.own_steps): a commit of ours
joins the step of the commit before it only when that commit is its parent (nothing else landed in between)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from compaction.spark.group_reads import own_steps


@dataclass(frozen=True)
class _Snapshot:
    parent: int

    def parentId(self) -> int:  # noqa: N802 - Iceberg's Java name
        return self.parent


class _Table:
    def __init__(self, parents: dict[int, int]) -> None:
        self._parents = parents

    def snapshot(self, snapshot_id: int) -> _Snapshot:
        return _Snapshot(self._parents[snapshot_id])


# base 1 -> merge 2 -> conversion 3; a writer's 4 on top of 3 -> our 5
TABLE = _Table({2: 1, 3: 2, 5: 4})


@pytest.mark.unit
def test_commits_right_on_top_of_each_other_are_one_step_from_the_first_ones_parent() -> None:
    assert own_steps(TABLE, [2, 3], collapse=True) == [(3, 1, (2, 3))]


@pytest.mark.unit
def test_without_collapse_or_with_a_writers_commit_between_each_commit_is_its_own_step() -> None:
    assert own_steps(TABLE, [2, 3], collapse=False) == [(2, 1, (2,)), (3, 2, (3,))]
    assert own_steps(TABLE, [2, 3, 5], collapse=True) == [(3, 1, (2, 3)), (5, 4, (5,))]
    assert own_steps(TABLE, [2, 5], collapse=True) == [(2, 1, (2,)), (5, 4, (5,))]
    assert own_steps(TABLE, [], collapse=True) == []
