"""The order of the steps a job group runs, as data (pure): :func:`group_stages` lists them from the group's tasks,
and the Spark job (compaction.spark.job) runs them one after the other.

With group commits, partitions of the same kind share one Iceberg action or commit: the full MAJOR rewrites first
(one rewrite action, one dangling-delete cleanup commit, then the validation of every partition), then the file
rewrites of the selective tasks (MINOR, then selective MAJOR: the files the kind selects, validated and kept on their
own), a report of what is final so far, then the conversions of those selective tasks (their positions read in one
Spark job, committed in one RowDelta, validated). Last, every partition not settled so far runs on its own, with
its own retries (compaction.spark.task.run_task). Without group commits only the group read of the MINOR positions
is shared.

A stage is listed only when the group has a task of a kind it works on; each stage still decides at run time which
tasks it takes (e.g. a group action needs two partitions left, a conversion a file rewrite that ran as a group).
"""

from __future__ import annotations

import enum
from typing import Sequence

from compaction.core.plan import CompactionKind, CompactionTask

__all__ = ["Stage", "group_stages", "is_selective"]


class Stage(str, enum.Enum):
    """One step of a job group."""

    #: The full-rewrite MAJOR partitions in one Iceberg rewrite action, the dangling-delete cleanup, validation.
    FULL_REWRITE = "full_rewrite"
    #: The file rewrite of the MINOR partitions (fragments) in one Iceberg action, validated and kept on its own.
    MINOR_FILE_REWRITE = "minor_file_rewrite"
    #: The file rewrite of the selective MAJOR partitions (small and delete-heavy files), likewise.
    MAJOR_FILE_REWRITE = "major_file_rewrite"
    #: Print the outcomes that are final and checkpoint what is committed and validated so far.
    REPORT = "report"
    #: Read the positions of the selective partitions' equality deletes in one Spark job.
    MINOR_READ = "minor_read"
    #: Convert and merge the selective partitions' deletes in one RowDelta, validated (in rounds).
    MINOR_COMMIT = "minor_commit"
    #: Every partition not settled by a group stage, on its own, with its retries.
    EACH_PARTITION = "each_partition"


def is_selective(task: CompactionTask) -> bool:
    """A MINOR, or a MAJOR that is not a full rewrite: Iceberg's rewrite of the files the kind selects (fragments;
    small and delete-heavy segments), then the conversion of the remaining deletes."""
    return task.kind is CompactionKind.MINOR or (task.kind is CompactionKind.MAJOR and not task.full_rewrite)


def group_stages(tasks: Sequence[CompactionTask], *, group_commit: bool) -> list[Stage]:
    """The stages of a job group whose tasks are ``tasks``, in the order they run."""
    selective = {t.kind for t in tasks if is_selective(t)}
    stages: list[Stage] = []
    if group_commit:
        if any(t.kind is CompactionKind.MAJOR for t in tasks):
            # The full rewrites; every MAJOR when one of them is an unpartitioned spec's (it rewrites their files too).
            stages.append(Stage.FULL_REWRITE)
        if CompactionKind.MINOR in selective:
            stages.append(Stage.MINOR_FILE_REWRITE)
        if CompactionKind.MAJOR in selective:
            stages.append(Stage.MAJOR_FILE_REWRITE)
        stages.append(Stage.REPORT)
    if selective:
        stages.append(Stage.MINOR_READ)
        if group_commit:
            stages.append(Stage.MINOR_COMMIT)
    stages.append(Stage.EACH_PARTITION)
    return stages
