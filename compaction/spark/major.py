"""MAJOR compaction of one partition: Iceberg's rewrite action with every delete applied, then our own removal of
the delete files left dangling, then the post-commit invariant check.

Iceberg rules this module relies on (Iceberg spec, "Scan Planning"; docs/validation.md):
* the rewrite keeps the *starting* sequence number (``use-starting-sequence-number``) so equality deletes committed
  concurrently still apply to the rewritten files;
* a position delete or DV applies only to the data file it names: once that file is gone it can never apply again
  (paths are unique), so removing it is always safe;
* an equality delete with data seq S applies to data files of its partition with data seq < S; removing it is safe
  only when no such file is live, and stays safe only if no concurrent commit adds one (checked after commit).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from compaction.core.errors import CommitConflictError, CommitValidationError
from compaction.core.model import DeleteContent
from compaction.spark import jvm as J
from compaction.spark.partition_files import (
    PartitionFiles,
    added_data_files,
    delete_kind,
    find_dangling_deletes,
    scan_partition,
    snapshots_between,
)

TASK_PROPERTY = "icecompact.task-attempt"
PLAN_PROPERTY = "icecompact.plan-id"


@dataclass
class MajorOutcome:
    base_snapshot_id: int | None
    commit_snapshot_ids: list[int]
    rewritten_data_files: int
    added_data_files: int
    removed_delete_files: int
    before: dict[str, int]
    after: dict[str, int]
    #: The partition's files at the last snapshot (our last commit, or the base when nothing was committed),
    #: scanned with the deletes Iceberg applies to each data file: the post-MAJOR check reuses it.
    after_files: PartitionFiles | None = None


def find_tagged_snapshot(table: Any, base_snapshot_id: int, tag: str) -> int | None:
    table.refresh()
    current = table.currentSnapshot()
    if current is None:
        return None
    for sid in reversed(snapshots_between(table, base_snapshot_id, int(current.snapshotId()))):
        summary = table.snapshot(sid).summary()
        if summary is not None and str(summary.get(TASK_PROPERTY)) == tag:
            return sid
    return None


FAULT_ENV = "ICECOMPACT_FAULT_INJECT"


_signal_point_seen = False


def _inject_fault(point: str, spark: Any = None) -> None:
    """Fault injection for the kill -9 tests; unset in normal operation. ``ICECOMPACT_FAULT_INJECT``:

    * ``sleep:<point>:<seconds>`` pauses every job at ``point`` so that a test can kill it there;
    * ``signal:<point>:<token file>`` arms one job only: the job that claims ``<token file>`` (renames it, so two
      jobs never both claim it) at its first rewrite (it has committed nothing yet) carries on, and once a Spark
      stage of the work after ``point`` is running it writes ``<token file>.pids`` (JSON: its own and its parent's
      process ids), so that a soak can kill it mid-rewrite."""
    spec = os.environ.get(FAULT_ENV, "")
    parts = spec.split(":", 2)
    if len(parts) != 3 or parts[1] != point:
        return
    if parts[0] == "sleep":
        print(f"icecompact: fault injection: sleeping {parts[2]}s at {point}", file=sys.stderr, flush=True)
        time.sleep(float(parts[2]))
    elif parts[0] == "signal" and spark is not None:
        global _signal_point_seen
        if _signal_point_seen:
            return  # only a job at its first rewrite is armed: it has committed nothing yet
        _signal_point_seen = True
        token = parts[2]
        try:
            os.rename(token, f"{token}.claimed")
        except OSError:
            return  # not armed, or another job claimed it
        print(f"icecompact: fault injection: armed at {point}", file=sys.stderr, flush=True)
        tracker = spark.sparkContext.statusTracker()

        def signal_when_running() -> None:
            for _ in range(6000):
                if tracker.getActiveStageIds():
                    # Under spark-submit the parent is the driver JVM (it launched this Python process).
                    pids = {"python": os.getpid(), "parent": os.getppid()}
                    with open(f"{token}.pids.tmp", "w") as fh:
                        json.dump(pids, fh)
                    os.rename(f"{token}.pids.tmp", f"{token}.pids")
                    return
                time.sleep(0.05)

        threading.Thread(target=signal_when_running, daemon=True).start()


#: Files larger than this are never picked for their size by a selective rewrite (Iceberg requires a maximum
#: above the target; its writers roll files at target + (max - target) / 2, but the read splits stay ~ target).
_NO_MAX_FILE_SIZE = 1 << 62
_INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class Selection:
    """Which data files Iceberg's bin-pack planner picks in a partition (BinPackRewriteFilePlanner): files smaller
    than ``min_file_size_bytes``, or whose known deleted rows (file-scoped position deletes / DVs) / rows >=
    ``delete_ratio``; a partition's picked files are rewritten when there are two or more, or one is delete-heavy.
    ``None`` (the full rewrite) picks every file with any delete, and the small files."""

    min_file_size_bytes: int
    delete_ratio: float

    def options(self) -> dict[str, str]:
        return {
            "min-file-size-bytes": str(int(self.min_file_size_bytes)),
            "max-file-size-bytes": str(_NO_MAX_FILE_SIZE),
            "delete-file-threshold": str(_INT_MAX),
            "delete-ratio-threshold": repr(float(self.delete_ratio)),
            "min-input-files": "2",
        }


def selection_for(policy: Any, kind: str) -> Selection:
    """MINOR merges the fragment files (and drops fully deleted files); a selective MAJOR rewrites the small files
    and the delete-heavy segments."""
    if kind == "minor":
        return Selection(policy.fragment_threshold_bytes, 1.0)
    return Selection(policy.small_file_threshold_bytes, policy.major_segment_delete_ratio)


def rewrite_partition(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                      plan_id: str, tag: str, selection: Selection | None = None) -> tuple[int, int, int]:
    """Run Iceberg's RewriteDataFiles on the partition in one commit; returns (rewritten, added, removed deletes).
    ``selection``: rewrite only the files it picks (None: every file with a delete, and the small files)."""
    J.activate(spark)  # the action stages its file groups through a catalog of the *active* session
    actions = J.jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    if selection is None:
        # A file with any delete is always rewritten (Iceberg: delete-file-threshold).
        options = {"delete-file-threshold": "1", "min-input-files": "2"}
    else:
        options = selection.options()
    action = actions.rewriteDataFiles(table).filter(expression).option(
        "target-file-size-bytes", str(int(target_file_size_bytes)))
    if selection is not None and int(target_file_size_bytes) <= selection.min_file_size_bytes:
        options["min-file-size-bytes"] = str(max(0, int(target_file_size_bytes) - 1))
    for name, value in options.items():
        action = action.option(name, value)
    action = (
        action
        .option("use-starting-sequence-number", "true")
        # Our own cleanup (remove_dangling_deletes) runs instead: Iceberg's runs as an untagged extra commit and
        # skips unpartitioned tables and deletes committed at the starting sequence number.
        .option("remove-dangling-deletes", "false")
        .option("partial-progress.enabled", "false")
        .snapshotProperty(TASK_PROPERTY, tag)
        .snapshotProperty(PLAN_PROPERTY, plan_id)
    )
    _inject_fault("before-rewrite", spark)
    result = action.execute()
    return (int(result.rewrittenDataFilesCount()), int(result.addedDataFilesCount()),
            int(result.removedDeleteFilesCount()))


def remove_dangling_deletes(spark: Any, table: Any, expression: Any, *, plan_id: str,
                            tag: str, covers_whole_table: bool,
                            committed: list[int] | None = None) -> tuple[int | None, int]:
    """Remove live delete files of the partitions ``expression`` selects that apply to no live data file.
    Returns (snapshot, count).

    ``committed``: the caller's list of its snapshots, which gets the cleanup's snapshot as soon as it is on main,
    before our own check runs, so that a failing check can undo it."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None:
        return None, 0
    base_id = int(current.snapshotId())
    removable = find_dangling_deletes(spark, table, base_id, expression, covers_whole_table=covers_whole_table)
    if not removable:
        return None, 0
    rewrite = table.newRewrite().validateFromSnapshot(base_id).set(TASK_PROPERTY, tag).set(PLAN_PROPERTY, plan_id)
    for d in removable:
        rewrite = rewrite.deleteFile(d)
    rewrite.commit()
    commit_id = find_tagged_snapshot(table, base_id, tag)
    if commit_id is None:
        raise CommitConflictError("dangling-delete cleanup committed but its snapshot was not found on main")
    if committed is not None:
        committed.append(commit_id)
    _check_no_older_data_added(spark, table, expression, base_id, commit_id, removable)
    return commit_id, len(removable)


def _check_no_older_data_added(spark: Any, table: Any, expression: Any, base_id: int, commit_id: int,
                               removed: list[Any]) -> None:
    """Our own check, which Iceberg does not make for removed delete files: if a commit between our base and our
    commit added a data file with data seq < S of a removed equality delete into its scope, that delete was still
    needed (a concurrent rewrite keeping its starting sequence number)."""
    equality = [d for d in removed if delete_kind(d) is DeleteContent.EQUALITY]
    if not equality:
        return
    max_seq = max(int(d.dataSequenceNumber()) for d in equality)
    expressions = J.jvm(spark).org.apache.iceberg.expressions
    for sid in snapshots_between(table, base_id, commit_id)[:-1]:
        for f in added_data_files(table, sid):
            seq = f.dataSequenceNumber()
            if seq is not None and int(seq) < max_seq:
                spec = table.specs().get(int(f.specId()))
                in_scope = expressions.Projections.inclusive(spec).project(expression)
                if expressions.Evaluator(spec.partitionType(), in_scope).eval(f.partition()):
                    raise CommitValidationError(
                        f"snapshot {sid} added data file {f.location()} with data sequence number {int(seq)} "
                        f"< {max_seq} of a removed equality delete: the delete was still needed"
                    )


def new_tag() -> str:
    return uuid.uuid4().hex


def major_compact(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                  plan_id: str, covers_whole_table: bool, before: PartitionFiles,
                  on_rewrite_commit: Callable[[int], None] | None = None,
                  committed: list[int] | None = None) -> MajorOutcome:
    """One attempt: rewrite + cleanup. Raises py4j errors from the action (the caller classifies them).
    ``committed``: the caller's list of its snapshots, appended to as soon as each commit is on main (so that the
    caller can undo them if anything after fails, even before this returns).

    ``on_rewrite_commit(snapshot_id)`` is called once the rewrite's snapshot is found on main, before the cleanup
    (the job starts reading that snapshot's rows for validation while the cleanup works on metadata)."""
    base_id = before.snapshot_id
    tag = new_tag()
    rewritten, added, removed_by_action = rewrite_partition(
        spark, table, expression, target_file_size_bytes=target_file_size_bytes, plan_id=plan_id, tag=tag
    )
    commits: list[int] = committed if committed is not None else []
    first = len(commits)
    if rewritten or added or removed_by_action:
        sid = find_tagged_snapshot(table, int(base_id), tag) if base_id is not None else None
        if sid is None:
            raise CommitConflictError("rewrite committed but its snapshot was not found on main")
        commits.append(sid)
        if on_rewrite_commit is not None:
            on_rewrite_commit(sid)
    cleanup_tag = new_tag()
    _, removed = remove_dangling_deletes(
        spark, table, expression, plan_id=plan_id, tag=cleanup_tag, covers_whole_table=covers_whole_table,
        committed=commits,
    )
    commits = commits[first:]
    table.refresh()
    last = commits[-1] if commits else base_id
    after = scan_partition(spark, table, expression, last, with_applied=True)
    return MajorOutcome(
        base_snapshot_id=base_id,
        commit_snapshot_ids=commits,
        rewritten_data_files=rewritten,
        added_data_files=added,
        removed_delete_files=removed_by_action + removed,
        before=before.counts(),
        after=after.counts(),
        after_files=after,
    )


def backoff_seconds(attempt: int, base: float = 0.5, cap: float = 10.0) -> float:
    return min(cap, base * (2 ** max(0, attempt - 1)))


def sleep_backoff(attempt: int) -> None:
    time.sleep(backoff_seconds(attempt))
