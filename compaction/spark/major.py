"""MAJOR compaction of one partition: the file groups Iceberg's rewrite action plans and writes, committed by us in
one RewriteFiles together with the removal of the delete files left dangling, then the post-commit invariant check.

Iceberg rules this module relies on (Iceberg spec, "Scan Planning"; docs/validation.md):
* the rewrite keeps the *starting* sequence number (``use-starting-sequence-number``) so equality deletes committed
  concurrently still apply to the rewritten files;
* a position delete or DV applies only to the data file it names: once that file is gone it can never apply again
  (paths are unique), so removing it is always safe;
* an equality delete with data seq S applies to data files of its partition with data seq < S; removing it is safe
  only when no such file is live, and stays safe only if no concurrent commit adds one (checked after commit).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from compaction.core.errors import CommitConflictError, CommitValidationError, ConfigError
from compaction.core.model import DeleteContent
from compaction.core.posthoc import PLAN_PROPERTY as POSTHOC_PLAN_PROPERTY
from compaction.core.policy import MAJOR_SORT_COLUMNS, MAJOR_STRATEGY, SortColumn
from compaction.spark import jvm as J
from compaction.spark.compat import snapshot_changes
from compaction.spark.gate import commit_window, warm_history
from compaction.spark.row_group_copy import CopiedFile, RowGroupCopySettings, copy_eligible, delete_quietly
from compaction.spark.partition_files import (
    PartitionFiles,
    _iterate,
    added_data_files,
    delete_kind,
    delete_ref,
    find_dangling_deletes,
    java_list,
    position_delete_target,
    scan_partition,
    snapshots_between,
)

TASK_PROPERTY = "icecompact.task-attempt"
NO_ROW_GROUP_COPY = RowGroupCopySettings(enabled=False, min_row_group_bytes=0)
#: Snapshot summary of a rewrite that copied row groups: how many files went into how many new ones.
ROW_GROUP_COPY_PROPERTY = "icecompact.row-group-copies"
PLAN_PROPERTY = POSTHOC_PLAN_PROPERTY  # the post-hoc check finds our snapshots by it (compaction.core.posthoc)


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


def plan_snapshots_since(table: Any, base_snapshot_id: int, plan_id: str) -> list[int]:
    """Our plan's snapshots on main after ``base_snapshot_id``, oldest first (refreshes ``table``)."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None:
        return []
    out = []
    for sid in snapshots_between(table, base_snapshot_id, int(current.snapshotId())):
        summary = table.snapshot(sid).summary()
        if summary is not None and str(summary.get(PLAN_PROPERTY)) == plan_id:
            out.append(sid)
    return out


FAULT_ENV = "ICECOMPACT_FAULT_INJECT"


_signal_point_seen = False


def rearm_fault_injection() -> None:
    """A new unit of work in a long-lived process (a resident executor's next work item) counts as a new job for
    ``signal`` fault injection (see :func:`_inject_fault`)."""
    global _signal_point_seen
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
#: Iceberg's "min-input-files" for every rewrite we run: a file group of two or more picked files is rewritten
#: (SizeBasedFileRewritePlanner.enoughInputFiles: ``group.size() > 1 && group.size() >= min-input-files``, so a
#: value of 1 would not make a single file enough either).
_MIN_INPUT_FILES = 2


@dataclass(frozen=True)
class Selection:
    """Which data files Iceberg's bin-pack planner picks in a partition (BinPackRewriteFilePlanner): files smaller
    than ``min_file_size_bytes``, or whose known deleted rows (file-scoped position deletes / DVs) / rows >=
    ``delete_ratio``; a partition's picked files are rewritten when there are two or more, or one is delete-heavy.
    ``None`` (the full rewrite) picks every file with any delete, and the small files.

    ``rewrite_lone_small_files`` (MAJOR): a small file with deletes that Iceberg would leave alone because it is the
    only file picked in its file group is rewritten too (see :func:`_lone_small_file_options`)."""

    min_file_size_bytes: int
    delete_ratio: float
    rewrite_lone_small_files: bool = False

    def options(self) -> dict[str, str]:
        return {
            "min-file-size-bytes": str(int(self.min_file_size_bytes)),
            "max-file-size-bytes": str(_NO_MAX_FILE_SIZE),
            "delete-file-threshold": str(_INT_MAX),
            "delete-ratio-threshold": repr(float(self.delete_ratio)),
            "min-input-files": str(_MIN_INPUT_FILES),
        }


def selection_for(policy: Any, kind: str) -> Selection:
    """MINOR merges the fragment files (and drops fully deleted files); a selective MAJOR rewrites the small files
    and the delete-heavy segments, a lone small file with deletes included (docs/policy.md)."""
    if kind == "minor":
        return Selection(policy.fragment_threshold_bytes, 1.0)
    return Selection(policy.small_file_threshold_bytes, policy.major_segment_delete_ratio,
                     rewrite_lone_small_files=True)


@dataclass(frozen=True)
class _PlannedFile:
    """One data file as Iceberg's rewrite planner sees it (a whole-file ``FileScanTask``)."""

    length: int
    picked: bool  # BinPackRewriteFilePlanner.filterFiles: outside the size range, or delete-heavy
    delete_heavy: bool  # tooHighDeleteRatio: the group is rewritten whatever its size
    has_deletes: bool


def _planner_groups(spark: Any, table: Any, expression: Any, options: dict[str, str]) -> list[list[_PlannedFile]]:
    """The data files of ``expression`` grouped as Iceberg 1.10's BinPackRewriteFilePlanner groups them
    (``groupByPartition``): by partition for files of the current spec, and every file of an older spec in one
    group ("treating all such files as un-partitioned", they are rewritten into the current spec). Bin packing
    within a group (``max-file-group-size-bytes``, 100 GiB) is not modelled: one group per partition."""
    current = table.currentSnapshot()
    if current is None:
        return []
    j = J.jvm(spark)
    min_size, max_size = int(options["min-file-size-bytes"]), int(options["max-file-size-bytes"])
    ratio = float(options["delete-ratio-threshold"])
    file_scoped = j.org.apache.iceberg.util.ContentFileUtil.isFileScoped
    current_spec = int(table.spec().specId())
    decoder = J.PartitionDecoder(spark, table.specs())
    groups: dict[tuple[Any, ...], list[_PlannedFile]] = {}
    scan = table.newScan().useSnapshot(int(current.snapshotId())).filter(expression).ignoreResiduals()
    for task in _iterate(scan.planFiles()):
        f = task.file()
        spec_id = int(f.specId())
        key = ("current", decoder.values(spec_id, f.partition())) if spec_id == current_spec else ("older specs",)
        deletes = java_list(task.deletes())
        records = int(f.recordCount())
        known_deleted = sum(int(d.recordCount()) for d in deletes if file_scoped(d))
        heavy = bool(deletes) and records > 0 and min(known_deleted, records) / records >= ratio
        length = int(task.length())
        groups.setdefault(key, []).append(_PlannedFile(
            length=length, picked=length < min_size or length > max_size or heavy, delete_heavy=heavy,
            has_deletes=bool(deletes)))
    return list(groups.values())


def _selection_options(selection: Selection, target_file_size_bytes: int) -> dict[str, str]:
    options = selection.options()
    if target_file_size_bytes <= selection.min_file_size_bytes:
        options["min-file-size-bytes"] = str(max(0, target_file_size_bytes - 1))
    return options


def keeps_a_file_group(groups: list[list[_PlannedFile]], options: dict[str, str]) -> bool:
    """Whether Iceberg 1.10's bin-pack planner keeps any of ``groups`` under ``options`` without ``rewrite-all`` or
    a delete-file threshold (a selection's): a group is rewritten when two or more of its files are picked
    (``enoughInputFiles`` / ``enoughContent`` need ``group.size() > 1``), its picked files hold more than
    ``max-file-size-bytes`` (``tooMuchContent``), or one is delete-heavy (``tooHighDeleteRatio``); otherwise
    ``filterFileGroups`` drops it. Errs towards True: a kept group costs the action, a dropped one nothing."""
    max_size = int(options["max-file-size-bytes"])
    for group in groups:
        picked = [f for f in group if f.picked]
        if len(picked) >= 2 or any(f.delete_heavy for f in picked) or sum(f.length for f in picked) > max_size:
            return True
    return False


def selection_rewrites_nothing(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                               selection: Selection) -> bool:
    """True when a selective rewrite of ``expression`` (:func:`rewrite_partition` with ``selection``) would
    rewrite no file: Iceberg's planner keeps no file group (:func:`keeps_a_file_group`). A MINOR of partitions with
    fewer than two fragment files and no file all of whose rows are deleted is such a case; its file rewrite, with
    the scans and checks around it, is then skipped (one file scan here instead)."""
    if selection.rewrite_lone_small_files:
        return False  # its lone-file options are derived from the groups: not modelled here
    options = _selection_options(selection, int(target_file_size_bytes))
    return not keeps_a_file_group(_planner_groups(spark, table, expression, options), options)


def _lone_small_file_options(groups: list[list[_PlannedFile]], options: dict[str, str],
                             target_file_size_bytes: int) -> dict[str, str]:
    """Options under which Iceberg also rewrites a small file with deletes that is the only file picked in its group.

    Iceberg 1.10 (SizeBasedFileRewritePlanner.planFileGroups, BinPackRewriteFilePlanner.filterFileGroups) keeps a
    group of picked files only when it has two or more files (``enoughInputFiles``/``enoughContent``: both require
    ``group.size() > 1``, so ``min-input-files`` cannot make one file enough), holds more than
    ``max-file-size-bytes`` (``tooMuchContent``), or one of its files reaches ``delete-file-threshold`` /
    ``delete-ratio-threshold``. Those two are per-file triggers that also *pick* every other file reaching them
    (``filterFiles``), and ``rewrite-all`` picks every file: none of them selects one small file only. So:

    * a lone small file with neighbours in its group is merged with the smallest of them: ``min-file-size-bytes``
      is raised just above that neighbour's size (it must stay below the target: Iceberg checks target > min), so
      the group has two picked files;
    * a lone small file alone in its group (typically the last file of an older spec) can only be picked by
      ``delete-file-threshold=1``, which then also rewrites every file with a delete in the rewrite's scope: the
      price of leaving no delete on a small file MAJOR covers.
    """
    min_size = int(options["min-file-size-bytes"])
    raise_to = min_size
    needs_delete_trigger = False
    for group in groups:
        picked = [f for f in group if f.picked]
        if len(picked) != 1 or not picked[0].has_deletes or picked[0].delete_heavy:
            continue
        lone = picked[0]
        if lone.length > int(options["max-file-size-bytes"]):
            continue  # tooMuchContent: Iceberg rewrites it anyway
        neighbours = sorted(f.length for f in group if f is not lone)
        if neighbours and neighbours[0] + 1 < int(target_file_size_bytes):
            raise_to = max(raise_to, neighbours[0] + 1)
        else:
            needs_delete_trigger = True
    adjusted = dict(options)
    adjusted["min-file-size-bytes"] = str(raise_to)
    if needs_delete_trigger:
        adjusted["delete-file-threshold"] = "1"
    return adjusted


@dataclass(frozen=True)
class Layout:
    """How a rewrite lays out its rows (``compaction.major.strategy``): ``binpack`` (in the table's sort order when
    it has one), ``sort`` (by ``columns``, else the table's sort order) or ``zorder`` (by ``columns``)."""

    strategy: str = "binpack"
    columns: tuple[SortColumn, ...] = ()

    @property
    def clusters(self) -> bool:
        return self.strategy != "binpack"


def layout_for(policy: Any, kind: str) -> Layout:
    """A MAJOR's layout is the policy's; MINOR's merge of fragment files stays a plain bin-pack (no shuffle: it is
    the cheap step, and the next MAJOR lays its rows out)."""
    if kind != "major":
        return Layout()
    return Layout(policy.major_strategy, policy.sort_columns)


def row_group_copy_for(policy: Any, kind: str) -> RowGroupCopySettings:
    """A MAJOR copies row groups as the policy's ``compaction.row-group-copy.*`` say; a MINOR's fragment merge never
    does (fragments' row groups are far below any useful size)."""
    if kind != "major":
        return NO_ROW_GROUP_COPY
    return RowGroupCopySettings(enabled=bool(policy.row_group_copy_enabled),
                                min_row_group_bytes=int(policy.row_group_copy_min_row_group_bytes))


def _checked_columns(table: Any, layout: Layout) -> None:
    schema = table.schema()
    missing = [c.name for c in layout.columns if schema.findField(c.name) is None]
    if missing:
        raise ConfigError(f"{MAJOR_SORT_COLUMNS}: no column {', '.join(map(repr, missing))} in the table's schema "
                          f"(columns: {', '.join(str(f.name()) for f in schema.columns())})")


def _sort_order(spark: Any, table: Any, columns: tuple[SortColumn, ...]) -> Any:
    iceberg = J.jvm(spark).org.apache.iceberg
    builder = iceberg.SortOrder.builderFor(table.schema())
    for c in columns:
        nulls = iceberg.NullOrder.NULLS_FIRST if c.nulls_first else iceberg.NullOrder.NULLS_LAST
        builder = builder.asc(c.name, nulls) if c.ascending else builder.desc(c.name, nulls)
    return builder.build()


def apply_layout(spark: Any, table: Any, action: Any, layout: Layout) -> Any:
    """Pick Iceberg's rewrite runner for ``layout``: ``sort()`` / ``sort(order)`` (SparkSortFileRewriteRunner: a
    range shuffle, rows sorted within each output file, the files' sort_order_id set when the order is the table's)
    or ``zOrder(columns)``; nothing for a bin-pack of an unsorted table. Both shuffling runners use the same file
    selection as the bin-pack (SparkShufflingDataRewritePlanner extends BinPackRewriteFilePlanner), so every
    option we set keeps its meaning."""
    sorted_table = bool(table.sortOrder().isSorted())
    if layout.strategy == "binpack":
        # Iceberg's bin-pack writes with the table's distribution and ordering turned off; a table that declares a
        # sort order (WRITE ORDERED BY) expects every writer to honour it.
        return action.sort() if sorted_table else action
    _checked_columns(table, layout)
    if layout.strategy == "sort":
        if layout.columns:
            return action.sort(_sort_order(spark, table, layout.columns))
        if not sorted_table:
            raise ConfigError(f"{MAJOR_STRATEGY}=sort: the table has no sort order and {MAJOR_SORT_COLUMNS} is empty")
        return action.sort()
    gateway = spark.sparkContext._gateway
    names = gateway.new_array(gateway.jvm.java.lang.String, len(layout.columns))
    for i, c in enumerate(layout.columns):
        names[i] = c.name
    return action.zOrder(names)


def full_rewrite_options(table: Any) -> dict[str, str]:
    """Options of the full rewrite: every data file Iceberg's scan planning applies a delete to is picked
    (``delete-file-threshold=1``: BinPackRewriteFilePlanner.tooManyDeletes is ``task.deletes().size() >= 1``) and
    its group rewritten whatever its size (filterFileGroups keeps a group with such a file), small files too.

    Files of an older spec are grouped together and rewritten into ``output-spec-id`` like any other
    (BinPackRewriteFilePlanner.groupByPartition; SizeBasedFileRewritePlanner.outputSpecId defaults to the current
    spec): set explicitly, so that the rows of older specs a full rewrite touches always land in the current spec.
    Files of older specs with no delete applying are not picked (Iceberg does not rewrite them for their spec)."""
    return {
        "delete-file-threshold": "1",
        "min-input-files": str(_MIN_INPUT_FILES),
        "output-spec-id": str(int(table.spec().specId())),
    }


def _rewrite_action(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                    selection: Selection | None, layout: Layout) -> Any:
    """Iceberg's RewriteDataFiles action for ``expression`` with the options of ``selection`` and ``layout``."""
    J.activate(spark)  # the action stages its file groups through a catalog of the *active* session
    actions = J.jvm(spark).org.apache.iceberg.spark.actions.SparkActions.get(spark._jsparkSession)
    if selection is None:
        options = full_rewrite_options(table)
        if layout.clusters:
            # A file left out would overlap the clustered ones on every column (BinPackRewriteFilePlanner:
            # rewrite-all picks every file of the filter and keeps every file group).
            options["rewrite-all"] = "true"
    else:
        options = _selection_options(selection, int(target_file_size_bytes))
        if selection.rewrite_lone_small_files:
            groups = _planner_groups(spark, table, expression, options)
            options = _lone_small_file_options(groups, options, int(target_file_size_bytes))
    action = apply_layout(spark, table, actions.rewriteDataFiles(table), layout).filter(expression).option(
        "target-file-size-bytes", str(int(target_file_size_bytes)))
    for name, value in options.items():
        action = action.option(name, value)
    return action.option("use-starting-sequence-number", "true").option("partial-progress.enabled", "false")


def _rewritten_groups(spark: Any, table: Any, action: Any, base_id: int,
                      copy: RowGroupCopySettings = NO_ROW_GROUP_COPY,
                      on_planned: Callable[[list[Any]], None] | None = None) -> tuple[list[Any], list[CopiedFile]]:
    """Plan ``action``'s file groups from ``base_id`` and write each group's new files, without committing: the
    action's own planner and runner (its ``init`` and ``rewriteFiles``), so every option means what it means to
    ``CALL rewrite_data_files``. Each returned RewriteFileGroup holds its rewritten and added files; ``copy``: the
    planned files whose rows cannot change are concatenated at the row-group level instead (the returned copies),
    the groups reduced to the rest. On a failure the files written so far are deleted (never committed).
    ``on_planned(groups)``: called with the planned file groups (every file the rewrite will replace) before any is
    written."""
    J.call_declared(spark, action, "init", J.jvm(spark).java.lang.Long.valueOf(int(base_id)))
    planner = J.declared_field(action, "planner")
    plan = planner.plan()
    if int(plan.totalGroupCount()) == 0:
        return [], []
    groups = list(_iterate(plan.groups()))
    if on_planned is not None:
        on_planned(groups)
    # As the action: up to max-concurrent-file-group-rewrites groups at once (a group of partitions has one file
    # group per partition; one at a time would leave a cluster idle between small groups). Each group is handed
    # over as soon as the row-group copy has taken its files out, so the cluster decodes while footers are read.
    rewrites = J.SparkThreadPool(spark, workers=int(J.declared_field(action, "maxConcurrentFileGroupRewrites")),
                                 name="rewrite-group")
    futures: list[concurrent.futures.Future[Any]] = []

    def decode(group: Any) -> None:
        futures.append(rewrites.submit(lambda g: J.call_declared(spark, action, "rewriteFiles", plan, g), group))

    try:
        pending = copy_eligible(spark, table, groups, settings=copy, planner=planner, decode=decode)
    except BaseException:
        _abandon_rewrites(table, futures)
        raise
    finally:
        rewrites.close()
    try:
        done = _rewrite_groups(table, futures)
    except BaseException:
        pending.discard()
        raise
    try:
        copies = pending.result()
    except Exception:
        _delete_added_files(table, done)
        raise
    return done, copies


def _early_result(early: list[concurrent.futures.Future[tuple[frozenset[str], list[Any]]]],
                  removed: frozenset[str]) -> list[Any] | None:
    """The dangling deletes found from the planned files, when the rewrite replaced exactly those files; None
    otherwise (also when that search failed: the caller searches again, in its own thread, and meets the error)."""
    if not early:
        return None
    try:
        planned_removed, dangling = early[0].result()
    except Exception:  # noqa: BLE001 - searched again by the caller
        return None
    return dangling if planned_removed == removed else None


def _planned_locations(groups: list[Any]) -> frozenset[str]:
    return frozenset(str(t.file().location()) for g in groups for t in _iterate(g.fileScanTasks()))


def _rewrite_groups(table: Any, futures: list[concurrent.futures.Future[Any]]) -> list[Any]:
    """The rewritten file groups once every group's new files are written; on a failure the files written so far
    are deleted and the failure raised."""
    concurrent.futures.wait(futures)
    failed = [f.exception() for f in futures if f.exception() is not None]
    done = [f.result() for f in futures if f.exception() is None]
    if failed:
        _delete_added_files(table, done)
        raise failed[0]  # type: ignore[misc]
    return done


def _abandon_rewrites(table: Any, futures: list[concurrent.futures.Future[Any]]) -> None:
    """Wait for the group rewrites started and delete what they wrote (their rewrite failed elsewhere)."""
    concurrent.futures.wait(futures)
    _delete_added_files(table, [f.result() for f in futures if f.exception() is None])


def _delete_added_files(table: Any, groups: list[Any], copies: Sequence[CopiedFile] = ()) -> None:
    """Best effort: a file left is an orphan, never referenced."""
    delete_quietly(table, [str(f.location()) for g in groups for f in _iterate(g.addedFiles())]
                   + [str(c.added.location()) for c in copies])


def _landed(table: Any, base_id: int, tag: str) -> int | None | bool:
    """Our tagged snapshot after a failed commit: its id, None when the table shows it did not land, False when the
    table cannot be read (then it may have landed)."""
    try:
        return find_tagged_snapshot(table, base_id, tag)
    except Exception:  # noqa: BLE001 - unknown
        return False


def _removed_deletes(groups: list[Any], dangling: list[Any]) -> dict[tuple[str, int], Any]:
    """The delete files a rewrite's commit removes: the DVs of its rewritten files (the action's ``danglingDVs``) and
    ``dangling``, each once (DVs share Puffin files: identified with their offset)."""
    out: dict[tuple[str, int], Any] = {}
    for d in [d for g in groups for d in _iterate(g.danglingDVs())] + list(dangling):
        out.setdefault(delete_ref(d), d)
    return out


#: Iceberg's mark of a commit failure after which the commit is known not to have landed (CommitFailedException,
#: ValidationException); CommitStateUnknownException and I/O errors are not.
_CLEANABLE_FAILURE = "org.apache.iceberg.exceptions.CleanableFailure"


def _commit_rewrite(spark: Any, table: Any, groups: list[Any], dangling: list[Any], *, base_id: int,
                    plan_id: str, tag: str, what: str = "file rewrite",
                    copies: Sequence[CopiedFile] = (), narrow_on_conflict: bool = False,
                    work_of: str | None = None) -> tuple[int, list[Any], list[CopiedFile]]:
    """One RewriteFiles of ours for the rewritten groups and the delete files left dangling, validated from the
    rewrite's base and keeping its data sequence number (as Iceberg's RewriteDataFilesCommitManager commits a
    rewrite: ``validateFromSnapshot`` fails it when a delete was added since for a rewritten file; the new files
    keep the starting sequence number so that equality deletes committed meanwhile still apply to them).
    Returns (snapshot, the groups and copies committed). ``work_of``: the kind of rewrite whose work this commit ends
    (what the commit gate expects of the next one).

    ``narrow_on_conflict`` (a selective rewrite, no dangling deletes): when Iceberg refuses the commit because a
    writer's DML deleted rows of some rewritten files since the base (the DML the commit gate waited for, typically),
    the groups and copies holding those files are dropped (their new files deleted, never committed) and the rest
    is committed: their files are still exactly the base's, and the dropped ones are rewritten by a later run.

    Unlike the action's commit, Iceberg's clean-up waits until we know the outcome (J.DeferredCleanup), and the new
    data files are deleted only when the table shows the commit did not land: a commit whose answer was lost can
    have landed although it failed (a JDBC catalog's retry, CommitStateUnknownException)."""
    base_seq = int(table.snapshot(int(base_id)).sequenceNumber())
    cleanup = J.DeferredCleanup(spark)

    def build(kept: list[Any], kept_copies: Sequence[CopiedFile]) -> Any:
        rewrite = (cleanup.attach(table.newRewrite()).validateFromSnapshot(int(base_id)).dataSequenceNumber(base_seq)
                   .set(TASK_PROPERTY, tag).set(PLAN_PROPERTY, plan_id))
        for group in kept:
            for f in _iterate(group.rewrittenFiles()):
                rewrite = rewrite.deleteFile(f)
            for f in _iterate(group.addedFiles()):
                rewrite = rewrite.addFile(f)
        for copy in kept_copies:
            for f in copy.sources:
                rewrite = rewrite.deleteFile(f)
            rewrite = rewrite.addFile(copy.added)
        if kept_copies:
            rewrite = rewrite.set(ROW_GROUP_COPY_PROPERTY,
                                  f"{sum(len(c.sources) for c in kept_copies)} files into {len(kept_copies)}")
        for d in _removed_deletes(kept, dangling).values():
            rewrite = rewrite.deleteFile(d)
        return rewrite

    def did_not_land(error: Exception) -> bool:
        java = getattr(error, "java_exception", None)
        return (java is not None and J.is_instance(java, _CLEANABLE_FAILURE)
                and _landed(table, base_id, tag) is None)

    # The gate times the commit itself: a writer holding a lease goes first, and a commit is kept out of the
    # part of a DML cycle where the writer's own commit would be failed by it (compaction.core.yielding).
    with commit_window(what, table=table, work_of=work_of):
        narrowable = narrow_on_conflict and not dangling
        while True:
            try:
                build(groups, copies).commit()
                break
            except Exception as e:
                if not did_not_land(e):
                    raise
                narrowed = _without_files_deleted_since(spark, table, base_id, groups, copies) if narrowable else None
                if narrowed is None:
                    _delete_added_files(table, groups, copies)  # definitely not on the table
                    raise
                kept, kept_copies = narrowed
                _delete_added_files(table, [g for g in groups if g not in kept],
                                    [c for c in copies if c not in kept_copies])
                groups, copies, narrowable = kept, kept_copies, False  # narrowed once
    commit_id = find_tagged_snapshot(table, int(base_id), tag)
    if commit_id is None:
        raise CommitConflictError(f"{what} committed but its snapshot was not found on main")
    cleanup.committed(table, commit_id)
    return commit_id, groups, list(copies)


def _without_files_deleted_since(spark: Any, table: Any, base_id: int, groups: list[Any],
                                 copies: Sequence[CopiedFile]) -> tuple[list[Any], list[CopiedFile]] | None:
    """The groups and copies none of whose files got a position delete / DV since ``base_id``, or None when that
    does not explain the refusal (no file of ours got one, a position delete whose data file metadata cannot tell,
    a data file of ours removed) or nothing would be left. Equality deletes committed since are no reason: the new
    files keep the base's data sequence number, so those still apply to them."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None:
        return None
    ours = {str(f.location()) for g in groups for f in _iterate(g.rewrittenFiles())}
    ours |= {str(f.location()) for c in copies for f in c.sources}
    hit: set[str] = set()
    for sid in snapshots_between(table, int(base_id), int(current.snapshotId())):
        changed = snapshot_changes(table, table.snapshot(int(sid)))
        for f in _iterate(changed.removedDataFiles()):
            if str(f.location()) in ours:
                return None  # someone else rewrote a file of ours
        for d in _iterate(changed.addedDeleteFiles()):
            if delete_kind(d) is DeleteContent.EQUALITY:
                continue
            target = position_delete_target(spark, d)
            if target is None:
                return None
            if target in ours:
                hit.add(target)
    if not hit:
        return None
    kept = [g for g in groups if not any(str(f.location()) in hit for f in _iterate(g.rewrittenFiles()))]
    kept_copies = [c for c in copies if not any(str(f.location()) in hit for f in c.sources)]
    if not kept and not kept_copies:
        return None
    return kept, kept_copies


def rewrite_partition(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                      plan_id: str, tag: str, selection: Selection | None = None,
                      layout: Layout = Layout(), remove_dangling: bool = False, covers_whole_table: bool = False,
                      committed: list[int] | None = None,
                      copy: RowGroupCopySettings = NO_ROW_GROUP_COPY, timed_as: str = "major") -> tuple[int, int, int]:
    """Rewrite the partition's files as Iceberg's RewriteDataFiles plans and writes them, in one commit of ours;
    returns (rewritten data files, added data files, removed delete files). ``selection``: rewrite only the files it
    picks (None: every file with a delete, and the small files; under a clustering ``layout``, every data file of
    the partition). ``remove_dangling``: the same commit removes the partition's delete files that no data file
    left live needs (:func:`find_dangling_deletes`; ``covers_whole_table`` as there), also when nothing is
    rewritten. ``committed``: gets the commit's snapshot as soon as it is on main, before our own checks.
    ``timed_as``: the kind of rewrite (gate.REWRITE_KINDS) whose typical duration this one's work adds to (from the
    job's ``gate.wait_before_work`` to this commit)."""
    current = table.currentSnapshot()
    if current is None:
        return 0, 0, 0
    base_id = int(current.snapshotId())  # the action's base: the table's current snapshot, as Iceberg's execute()
    action = _rewrite_action(spark, table, expression, target_file_size_bytes=target_file_size_bytes,
                             selection=selection, layout=layout)
    _inject_fault("before-rewrite", spark)
    # Row groups are copied only where the action's runner would write rows in no particular order: a plain
    # bin-pack of a table without a sort order (a sort or z-order, or the table's order, reorders every row).
    copies_allowed = layout.strategy == "binpack" and not bool(table.sortOrder().isSorted())
    # The delete files left dangling are found from the planned files while the rewrite writes them (a metadata
    # walk in the driver, overlapping the Spark jobs); the search runs again if the rewrite replaced other files.
    early: list[concurrent.futures.Future[tuple[frozenset[str], list[Any]]]] = []

    def search_dangling(removed: frozenset[str]) -> list[Any]:
        return find_dangling_deletes(spark, table, base_id, expression, covers_whole_table=covers_whole_table,
                                     removed_data=removed)

    def search_planned(planned_groups: list[Any]) -> tuple[frozenset[str], list[Any]]:
        removed = _planned_locations(planned_groups)
        return removed, search_dangling(removed)

    def planned(planned_groups: list[Any]) -> None:
        early.append(J.in_background(spark, search_planned, planned_groups, name="icecompact-dangling"))

    warm_history(table)
    groups, copies = _rewritten_groups(spark, table, action, base_id, copy if copies_allowed else NO_ROW_GROUP_COPY,
                                       on_planned=planned if remove_dangling else None)
    dangling: list[Any] = []
    try:
        if remove_dangling:
            rewritten_paths = frozenset(str(f.location()) for g in groups for f in _iterate(g.rewrittenFiles()))
            rewritten_paths |= {str(f.location()) for c in copies for f in c.sources}
            found = _early_result(early, rewritten_paths)
            dangling = found if found is not None else search_dangling(rewritten_paths)
    except Exception:
        _delete_added_files(table, groups, copies)
        raise
    if not groups and not dangling and not copies:
        return 0, 0, 0
    # A selective rewrite (no dangling deletes, no check that every delete is gone after it) may commit fewer
    # groups than it wrote when a writer's DML deleted rows of some rewritten files meanwhile.
    commit_id, groups, copies = _commit_rewrite(spark, table, groups, dangling, base_id=base_id, plan_id=plan_id,
                                                tag=tag, copies=copies, work_of=timed_as,
                                                narrow_on_conflict=selection is not None and not remove_dangling)
    if committed is not None:
        committed.append(commit_id)
    _inject_fault("after-rewrite", spark)  # committed, not yet checked: the window the post-hoc check closes
    _check_no_older_data_added(spark, table, expression, base_id, commit_id, dangling)
    rewritten = sum(int(g.rewrittenFiles().size()) for g in groups) + sum(len(c.sources) for c in copies)
    added = sum(int(g.addedFiles().size()) for g in groups) + len(copies)
    return rewritten, added, len(_removed_deletes(groups, dangling))


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
    commit_id, _, _ = _commit_rewrite(spark, table, [], removable, base_id=base_id, plan_id=plan_id, tag=tag,
                                      what="dangling-delete cleanup")
    if committed is not None:
        committed.append(commit_id)
    _check_no_older_data_added(spark, table, expression, base_id, commit_id, removable)
    return commit_id, len(removable)


def _check_no_older_data_added(spark: Any, table: Any, expression: Any, base_id: int, commit_id: int,
                               removed: list[Any]) -> None:
    """Our own check, which Iceberg does not make for removed delete files: if a commit between our base and our
    commit added a data file with data seq < S of a removed equality delete into its scope, that delete was still
    needed (a concurrent rewrite keeping its starting sequence number)."""
    between = snapshots_between(table, base_id, commit_id)[:-1]
    if not between:
        return  # nothing was committed between our base and our commit
    equality = [d for d in removed if delete_kind(d) is DeleteContent.EQUALITY]
    if not equality:
        return
    specs = table.specs()
    # A global equality delete (unpartitioned spec) applies to data files of every partition of every spec: any
    # older data file added anywhere needed it. A partitioned one only to its own partition (``expression``'s).
    global_seqs = [int(d.dataSequenceNumber()) for d in equality if specs.get(int(d.specId())).isUnpartitioned()]
    max_global_seq = max(global_seqs, default=-1)
    max_seq = max(int(d.dataSequenceNumber()) for d in equality)
    expressions = J.jvm(spark).org.apache.iceberg.expressions
    for sid in between:
        for f in added_data_files(table, sid):
            seq = f.dataSequenceNumber()
            if seq is None or int(seq) >= max_seq:
                continue
            needed = int(seq) < max_global_seq
            if not needed:
                spec = specs.get(int(f.specId()))
                in_scope = expressions.Projections.inclusive(spec).project(expression)
                needed = bool(expressions.Evaluator(spec.partitionType(), in_scope).eval(f.partition()))
            if needed:
                raise CommitValidationError(
                    f"snapshot {sid} added data file {f.location()} with data sequence number {int(seq)} "
                    f"< {max_seq} of a removed equality delete: the delete was still needed"
                )


def new_tag() -> str:
    return uuid.uuid4().hex


def major_compact(spark: Any, table: Any, expression: Any, *, target_file_size_bytes: int,
                  plan_id: str, covers_whole_table: bool, before: PartitionFiles,
                  on_rewrite_commit: Callable[[int], None] | None = None,
                  committed: list[int] | None = None, layout: Layout = Layout(),
                  copy: RowGroupCopySettings = NO_ROW_GROUP_COPY) -> MajorOutcome:
    """One attempt: the rewrite and the removal of the delete files it leaves dangling, in one commit. Raises py4j
    errors from Iceberg (the caller classifies them). ``committed``: the caller's list of its snapshots, appended
    to as soon as the commit is on main (so that the caller can undo it if anything after fails, even before this
    returns).

    ``on_rewrite_commit(snapshot_id)`` is called once the commit is on main (the job starts reading that snapshot's
    rows for validation while the partition's files are scanned)."""
    base_id = before.snapshot_id
    commits: list[int] = committed if committed is not None else []
    first = len(commits)
    rewritten, added, removed = rewrite_partition(
        spark, table, expression, target_file_size_bytes=target_file_size_bytes, plan_id=plan_id, tag=new_tag(),
        layout=layout, remove_dangling=True, covers_whole_table=covers_whole_table, committed=commits, copy=copy)
    commits = commits[first:]
    if commits and on_rewrite_commit is not None:
        on_rewrite_commit(commits[-1])
    table.refresh()
    last = commits[-1] if commits else base_id
    after = scan_partition(spark, table, expression, last, with_applied=True)
    return MajorOutcome(
        base_snapshot_id=base_id,
        commit_snapshot_ids=commits,
        rewritten_data_files=rewritten,
        added_data_files=added,
        removed_delete_files=removed,
        before=before.counts(),
        after=after.counts(),
        after_files=after,
    )
