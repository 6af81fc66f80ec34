"""Runs one job group of a :class:`CompactionPlan` inside Spark and reports a JSON-serializable result.

Per partition: re-inspect (the plan may be stale), compact, validate, retry conflicts with backoff. One partition's
failure never loses another's committed work: every partition commits on its own.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import time
from typing import Any, Callable

from compaction.core.errors import (
    CatalogUnavailableError,
    CompactionError,
    RewriteJobError,
)
from compaction.core.identifiers import quoted
from compaction.core.model import PartitionKey
from compaction.core.plan import CompactionKind, CompactionPlan, CompactionTask, partition_key_to_dict
from compaction.core.results import (
    BAD_PARTITION_STATUSES,
    COMMITTED,
    FAILED,
    NO_OP,
    SKIPPED,
    GroupResult,
    PartitionResult,
    combine_rewrite_and_conversion,
    final_line,
)
from compaction.core.retry import FailureKind, RetryAction, retry_rule
from compaction.core.stages import Stage, group_stages, is_selective
from compaction.spark import jvm as J
from compaction.spark.compat import snapshot_changes
from compaction.spark.expressions import java_partition_expression
from compaction.spark.gate import rewrite_kind, wait_before_work
from compaction.spark.group_reads import (
    GroupRows,
    rows_predicate,
    validate,
    counted_from_metadata,
    single_spec,
    own_counts,
    own_counts_at,
    fingerprint_cache,
    read_own_rows,
    read_rows_before,
)
from compaction.spark.major import (
    find_tagged_snapshot,
    layout_for,
    new_tag,
    rewrite_partition,
    row_group_copy_for,
    selection_for,
    selection_rewrites_nothing,
)
from compaction.spark.partition_files import (
    PartitionFiles,
    PartitionKeys,
    _iterate,
    delete_ref,
    scan_partition,
    scans_at,
)
from compaction.spark.task import (
    classify_failure,
    emit,
    settled_as_stale,
    wait_for_catalog,
    run_task,
    take_outcome,
    undo,
    spark_identifier,
)
from compaction.spark.validation import FingerprintCache, ValidationLevel, classify_java_error

MAX_RETRIES_DEFAULT = 3



def _merge_tasks(tasks: tuple[CompactionTask, ...]) -> list[CompactionTask]:
    """Pieces of a split partition run as one unit here (the rewrite action bins files itself), in plan order."""
    seen: dict[Any, CompactionTask] = {}
    for task in tasks:
        seen.setdefault(task.partition, task)
    return list(seen.values())


#: How many times a job group's selective file rewrite (one Iceberg action) is tried when a writer's position delete
#: or DV on a replaced file made Iceberg refuse it, before its partitions go one by one.
GROUP_REWRITE_ROUNDS_DEFAULT = 2

#: How many times a job group's MINOR partitions are read and committed together before the partitions still left
#: (stale positions, a conflicting commit) go one by one: a second round costs one Spark job for all of them.
MINOR_GROUP_ROUNDS_DEFAULT = 2

#: Commit the MAJOR partitions of a job group together (one Iceberg rewrite action), and its MINOR partitions
#: together (one RowDelta), rather than one commit per partition.
GROUP_COMMIT_DEFAULT = True


def _current_table(spark: Any, plan: CompactionPlan) -> tuple[Any, Any]:
    """The plan's table, refreshed, and its current snapshot (None for an empty table)."""
    table = J.load_table(spark, spark_identifier(plan))
    table.refresh()
    return table, table.currentSnapshot()


def _any_of(spark: Any, expressions: list[Any]) -> Any:
    combined = expressions[0]
    for e in expressions[1:]:
        combined = getattr(J.jvm(spark).org.apache.iceberg.expressions.Expressions, "or")(combined, e)
    return combined


@dataclasses.dataclass(frozen=True)
class _BeforeFromCommit:
    """The group's partitions' files at the rewrite's base, from their files at its commit: that commit is the base's
    only child on main, so what its snapshot added and removed is every difference (the removals include the DVs and
    file-scoped position deletes Iceberg's commit drops by itself with the data files it replaces). Single-spec
    tables only (there a partition's scan selects exactly its own files, and a file's partition says which scan had
    it)."""

    base_id: int
    added: frozenset[str]
    removed_data: dict[PartitionKey, dict[str, Any]]
    removed_deletes: dict[PartitionKey, dict[tuple[str, int], Any]]

    @classmethod
    def of(cls, spark: Any, table: Any, base_id: int, commits: list[int],
           tasks: list[CompactionTask]) -> _BeforeFromCommit | None:
        """None when the commits are not exactly one snapshot whose parent is ``base_id`` (scan the base instead)."""
        if len(commits) != 1:
            return None
        snapshot = table.snapshot(int(commits[0]))
        parent = snapshot.parentId()
        if parent is None or int(parent) != int(base_id):
            return None
        changed, keys = snapshot_changes(table, snapshot), PartitionKeys(spark)
        # The planned files name their partition without a py4j round trip; a file the action rewrote that the
        # plan did not name is looked up, and so is a delete file whose path the plan names in several partitions
        # (DVs of several partitions can share one Puffin file). The snapshot's change lists hold copies already
        # (BaseSnapshot copies each entry's file), safe to keep.
        planned = {path: t.partition for t in tasks for path in t.data_files}
        planned_deletes: dict[str, PartitionKey | None] = {}
        for t in tasks:
            for path in t.delete_files:
                planned_deletes[path] = t.partition if planned_deletes.get(path, t.partition) == t.partition else None
        removed_data: dict[PartitionKey, dict[str, Any]] = {}
        for f in _iterate(changed.removedDataFiles()):
            path = str(f.location())
            key = planned.get(path)
            removed_data.setdefault(key if key is not None else keys.key_of(table, f), {})[path] = f
        removed_deletes: dict[PartitionKey, dict[tuple[str, int], Any]] = {}
        for d in _iterate(changed.removedDeleteFiles()):
            ref = delete_ref(d)
            key = planned_deletes.get(ref[0])
            removed_deletes.setdefault(key if key is not None else keys.key_of(table, d), {})[ref] = d
        added = frozenset(str(f.location()) for f in _iterate(changed.addedDataFiles()))
        return cls(int(base_id), added, removed_data, removed_deletes)

    def before(self, key: PartitionKey, after: PartitionFiles) -> PartitionFiles | None:
        try:
            return after.before_change(self.base_id, self.removed_data.get(key, {}),
                                       self.removed_deletes.get(key, {}), self.added)
        except ValueError:  # not the commit's child after all: scanned at the base instead
            return None


@dataclasses.dataclass
class _PendingCheck:
    """A committed group file rewrite (a selective task's first half) whose check is not done yet: its outcome (the
    partitions' files before and after) is settled in the background (``results``: committed / no-op results, or
    the partitions failed and the commit undone), and the comparison of its rows is left for later: run on its own
    (``compare_rows``: records each result's validation and status, undoes ``commits`` on a failure), or as one step
    with the conversion committed right on top of it (:func:`_run_minor_group`, which sets ``absorbed``)."""

    keys: frozenset[Any]
    results: concurrent.futures.Future[dict[Any, PartitionResult]]
    commits: list[int]
    compare_rows: Callable[[], None]
    absorbed: bool = False

    def committed_results(self) -> dict[Any, PartitionResult]:
        """The results whose outcome settled as committed or no-op (an undone rewrite has none)."""
        return {k: r for k, r in self.results.result().items() if r.status in (COMMITTED, NO_OP)}


def _run_major_group(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
                     progress: Callable[[str], None] | None, group: GroupRows | None,
                     selective: str | None = None, later: list[_PendingCheck] | None = None,
                     ) -> tuple[dict[Any, PartitionResult], dict[Any, list[dict[str, Any]]]]:
    """The group's MAJOR partitions in one Iceberg rewrite action over all of them, like the bare CALL: its file
    groups are rewritten concurrently, it commits once, removing the delete files it left dangling in the same commit
    (one snapshot for the job group, so a conflict in one partition costs only this group's work), then validation (c)
    of every partition against that commit, exactly as after a per-partition MAJOR.

    Returns (settled results by partition key, conflicts by key). A partition missing from the results was not settled:
    the group action failed before committing anything (a conflict with a concurrent writer, a job failure), or
    fewer than two partitions were left to compact. Those partitions then run one by one through :func:`run_task`,
    which retries and classifies per partition (the conflicts seen here are added to their results). Once the
    group committed, a failure of any partition's validation undoes the commit for every partition of the group
    (rolled back while current, otherwise needs attention): never kept silently.

    ``selective`` (``"minor"`` or ``"major"``): the first half of the group's selective tasks of that kind instead:
    one rewrite of the files the kind selects, no cleanup (the conversion that follows removes what no longer
    applies), validated the same way. A partition whose result here is committed or no_op still has its
    conversion to run (run_group).

    ``later``: once committed, the outcome is settled in the background and the comparison of the rows left for
    later (:class:`_PendingCheck`, appended there); the partitions it settles are left out of the returned results
    (the caller reads the conversion's positions meanwhile, and checks the rewrite together with the conversion
    committed on top of it, or on its own before anything else commits or reports them)."""
    settled: dict[Any, PartitionResult] = {}
    if selective is None:
        majors = [t for t in tasks if t.kind is CompactionKind.MAJOR and t.full_rewrite]
        if any(t.partition.is_unpartitioned for t in majors):
            # A full MAJOR of an unpartitioned spec's partition rewrites with the filter alwaysTrue, so every file of
            # the table a delete applies to, and every small file, whatever its spec (Iceberg projects the filter
            # onto every spec; the files of older specs are rewritten into the current one): it does the file
            # rewrite of every other MAJOR of the table too. Run as one action with them (the planner keeps every
            # overlapping partition in this group), instead of rewriting their files once here and again in
            # their own, later, rewrite.
            majors = [t for t in tasks if t.kind is CompactionKind.MAJOR]
    else:
        majors = [t for t in tasks if is_selective(t) and t.kind.value == selective]
        if any(t.partition.is_unpartitioned for t in majors):
            return settled, {}
    if len(majors) < 2:
        return settled, {}
    started, ref = time.monotonic(), quoted(plan.table)
    try:
        table, current = _current_table(spark, plan)
        if current is None:
            return settled, {}
        base_id = int(current.snapshotId())
        if selective == "minor" and _nothing_to_merge(spark, plan, table, majors):
            # Iceberg's planner would keep no file group: no action, and none of the scans and checks around it.
            # The conversion that follows scans, decides (stale plans included) and validates each partition.
            emit(progress, f"icecompact: MINOR file rewrite of {len(majors)} partitions: nothing to merge (fewer "
                            "than two fragment files and no fully deleted file in each)")
            for task in majors:
                key = task.partition
                settled[key] = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value,
                                               status=NO_OP, attempts=1, base_snapshot_id=base_id)
            return settled, {}
        if wait_before_work(rewrite_kind(selective), table=table):
            current = table.currentSnapshot()  # a DML's commit came meanwhile: the rewrite's base is after it
        base_id, base_seq = int(current.snapshotId()), int(current.sequenceNumber())
        # Planned at this base, the plan is not stale: the partitions' files at the base are only needed for the
        # outcome, and are scanned while the rewrite runs. Otherwise each is scanned first and decided
        # again if a planned file is gone.
        at_plan_base = base_id == plan.base_snapshot_id
        active: list[tuple[CompactionTask, Any, Any, PartitionResult]] = []
        for task in majors:
            key = task.partition
            result = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value, attempts=1)
            expression = java_partition_expression(spark, table, key)
            if at_plan_base:
                active.append((task, expression, None, result))
                continue
            before = scan_partition(spark, table, expression, base_id, with_applied=False)
            if settled_as_stale(plan, task, before, base_id, result, spark, table):
                result.duration_ms = int((time.monotonic() - started) * 1000)
                settled[key] = result
                continue
            active.append((task, expression, before, result))
    except Exception as e:  # each partition loads, scans and reports on its own
        emit(progress, f"icecompact: MAJOR group setup failed, running per partition: {classify_java_error(e, 'setup')}")
        return {}, {}
    if len(active) < 2:
        return settled, {}
    # On a single-spec table each partition's files at the base follow from its files after our commit and what
    # the commit changed (_BeforeFromCommit), with no metadata walk beside the rewrite; otherwise they are scanned
    # while the rewrite runs.
    derive_base = at_plan_base and single_spec(table)
    base_scans = {} if derive_base else scans_at(
        spark, table, base_id, [(t.partition, e) for t, e, b, _ in active if b is None], workers=1, with_applied=False)

    def with_base_files(after_scans: dict[PartitionKey, concurrent.futures.Future[Any]] | None = None,
                        ) -> list[tuple[CompactionTask, Any, Any, PartitionResult]]:
        derived = (_BeforeFromCommit.of(spark, table, base_id, commits, [t for t, _, _, _ in active])
                   if derive_base and after_scans is not None else None)
        complete = []
        for task, expression, before, result in active:
            if before is None:
                if derived is not None:
                    before = derived.before(task.partition, after_scans[task.partition].result())  # type: ignore[index]
                if before is None:
                    try:
                        before = base_scans[task.partition].result()
                    except Exception:  # noqa: BLE001 - scanned here: a failure then is this thread's
                        before = scan_partition(spark, table, expression, base_id, with_applied=False)
                settled_as_stale(plan, task, before, base_id, result, spark, table)  # at the plan's base: records
            complete.append((task, expression, before, result))
        return complete

    if at_plan_base:  # the planned files (the scan's figures are not there yet)
        files = sum(len(t.data_files) for t, _, _, _ in active)
        deletes = len({d for t, _, _, _ in active for d in t.delete_files})
    else:
        files = sum(int(b.counts()["data_files"]) for _, _, b, _ in active)
        deletes = sum(int(b.counts()["delete_files"]) for _, _, b, _ in active)
    what = "MAJOR" if selective is None else f"{selective.upper()} file rewrite of"
    emit(progress, f"icecompact: {what} {len(active)} partitions in one Iceberg action: {files} data / "
                    f"{deletes} delete files")
    expression = _any_of(spark, [e for _, e, _, _ in active])
    tag = new_tag()
    action_started = time.monotonic()
    commits: list[int] = []
    try:
        # A MAJOR removes the delete files its rewrite leaves dangling in the same commit; a selective rewrite leaves
        # them to its conversion step.
        rewritten, added, _ = rewrite_partition(
            spark, table, expression, plan_id=plan.plan_id, tag=tag,
            target_file_size_bytes=plan.policy.target_file_size_bytes,
            selection=None if selective is None else selection_for(plan.policy, selective),
            layout=layout_for(plan.policy, selective or "major"), remove_dangling=selective is None,
            committed=commits,
            copy=row_group_copy_for(plan.policy, selective or "major"), timed_as=rewrite_kind(selective))
        emit(progress, f"icecompact: {what} {len(active)} partitions: {rewritten} data files rewritten into "
                        f"{added} in {time.monotonic() - action_started:.1f} s")
    except Exception as e:
        label = f"{what}{' of' if selective is None else ''} {len(active)} partitions"
        err, kind = classify_failure(e, label)
        try:
            active = with_base_files()
        except Exception:  # noqa: BLE001 - the partitions' own runs scan again; their results have no counts here
            pass
        if _commit_may_have_landed(spark, table, base_id, tag, [r for _, _, _, r in active], err, progress):
            _settle_group(settled, [(t.partition, r) for t, _, _, r in active], started)
            return settled, {}
        # A full MAJOR's partitions then run one by one; a selective rewrite's are planned again as a group
        # (_GroupRun.file_rewrite), then one by one.
        emit(progress, f"icecompact: group action failed, nothing committed: {err}")
        return settled, _group_conflicts(err, kind, [t.partition for t, _, _, _ in active])

    after_of: dict[Any, Any] = {}

    def settle_outcome() -> None:
        nonlocal active
        table.refresh()
        last = commits[-1] if commits else base_id
        # The partitions' files at the commit, side by side, while the group's rows are read.
        after_scans = scans_at(spark, table, last, [(t.partition, e) for t, e, _, _ in active])
        active = with_base_files(after_scans)  # a failure here is handled as any failure of the checks after commit
        keys = PartitionKeys(spark)
        for task, _, before, result in active:
            after_of[task.partition] = after = after_scans[task.partition].result()
            own = None if single_spec(table) else functools.partial(_is_own, keys, table, task.partition)
            _group_outcome(result, before, after, commits, own_counts(spark, table, after, task.partition, keys), own)
            result.status = COMMITTED if result.commit_snapshot_ids else NO_OP

    def compare_rows(fingerprints: FingerprintCache) -> None:
        read_own_rows(spark, table, plan, level, fingerprints, commits, [t.partition for t, _, _, _ in active],
                      group=group)
        for task, part_expression, _, result in active:
            validate(spark, table, ref, plan.table.catalog, task.partition, result.commit_snapshot_ids, level,
                      base_seq if selective is None else None, part_expression, result,
                      after_files=after_of[task.partition], fingerprints=fingerprints, group=group, own_rows=True)
            result.status = COMMITTED if result.commit_snapshot_ids else NO_OP

    def timed(step: Callable[[FingerprintCache], None]) -> Callable[[FingerprintCache], None]:
        def run(fingerprints: FingerprintCache) -> None:
            step_started = time.monotonic()
            step(fingerprints)
            emit(progress, f"icecompact: {what} {len(active)} partitions: "
                            f"validation ({level.value}) in {time.monotonic() - step_started:.1f} s")
        return run

    def checked(step: Callable[[FingerprintCache], None]) -> dict[Any, PartitionResult]:
        _check_group_commit(spark, table, ref, level, commits, [r for _, _, _, r in active],
                            f"MAJOR of {len(active)} partitions", progress, step, group)
        done: dict[Any, PartitionResult] = {}
        _settle_group(done, [(t.partition, r) for t, _, _, r in active], started)
        return done

    def settle_all(fingerprints: FingerprintCache) -> None:
        settle_outcome()
        compare_rows(fingerprints)

    def compare_rows_alone() -> None:
        checked(timed(compare_rows))

    def settle_outcome_and_read_before(fingerprints: FingerprintCache) -> None:
        settle_outcome()
        if group is None or level is ValidationLevel.NONE or not commits:
            return  # nothing shares what would be read here
        rewritten = [t.partition for t, _, _, r in active if r.commit_snapshot_ids]
        try:
            # The rows before the rewrite, into the group's shared values: the later check (with the conversion,
            # or on its own) compares them, and reads them here, beside the conversion's positions.
            read_rows_before(spark, table, plan.table.catalog, fingerprints, commits[0], rewritten, group)
            table.refresh()
            if int(table.currentSnapshot().snapshotId()) != int(commits[-1]):
                # A writer committed on top of the rewrite already: the conversion cannot land right on it, so the
                # rewrite's own rows are compared too (validate, step by step); read them here as well.
                read_own_rows(spark, table, plan, level, fingerprints, list(commits), rewritten, group=group)
        except Exception:  # noqa: BLE001 - read again by that check, where a failure counts
            pass

    if later is None:
        settled.update(checked(timed(settle_all)))
    else:
        later.append(_PendingCheck(
            frozenset(t.partition for t, _, _, _ in active),
            J.in_background(spark, checked, settle_outcome_and_read_before, name="icecompact-group-check"),
            list(commits), compare_rows_alone))
    return settled, {}


def _nothing_to_merge(spark: Any, plan: CompactionPlan, table: Any, tasks: list[CompactionTask]) -> bool:
    """Whether the MINOR file rewrite of ``tasks``' partitions would rewrite nothing (one file scan of them all).
    On error, False: the rewrite then runs and reports as usual."""
    try:
        expression = _any_of(spark, [java_partition_expression(spark, table, t.partition) for t in tasks])
        return selection_rewrites_nothing(spark, table, expression,
                                          target_file_size_bytes=plan.policy.target_file_size_bytes,
                                          selection=selection_for(plan.policy, "minor"))
    except Exception:
        return False


def _group_conflicts(err: CompactionError, kind: FailureKind, keys: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """A failed group commit that committed nothing, as a conflict of each of its partitions (only a failure the retry
    table re-plans is one: other errors are met again, and reported, by the partition's own attempt)."""
    if retry_rule(kind, committed=False).action is not RetryAction.REPLAN_AND_RETRY:
        return {}
    entry = {"attempt": 0, "error_class": getattr(err, "java_class", type(err).__name__),
             "message": f"group commit: {err}"[:2000]}
    return {k: [dict(entry)] for k in keys}


def _run_minor_group(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
                     progress: Callable[[str], None] | None, group: GroupRows | None,
                     prepared: dict[Any, Any], rewrites: list[_PendingCheck] | None = None,
                     check_alone: Callable[[_PendingCheck], None] | None = None,
                     ) -> tuple[dict[Any, PartitionResult], dict[Any, list[dict[str, Any]]]]:
    """The group's MINOR partitions, whose positions :func:`_prepare_minor_group` read in one Spark job, committed
    in one RowDelta (:func:`compaction.spark.minor.commit_changes`), then validated partition by partition as after
    a per-partition MINOR, every partition's rows at the commit read in one Spark job. Same contract as
    :func:`_run_major_group`: partitions left out of the results (the commit failed before landing, their prepared
    positions are stale, fewer than two left) run one by one through :func:`run_task`; once committed, any failure
    undoes the commit for every partition of the group.

    ``rewrites``: the group's file rewrites whose rows are not compared yet. One whose committed partitions all get
    this conversion is checked with it (``absorbed``): where the conversion lands right on top of the rewrite,
    each partition's rows after the conversion are compared with its rows before the rewrite, in one step
    (validate's ``collapse``), and a failure undoes both. Any other is checked on its own first (``check_alone``):
    nothing commits on top of a rewrite that might be undone."""
    from compaction.spark.minor import PartitionChange, commit_changes

    settled: dict[Any, PartitionResult] = {}
    minors = [t for t in tasks if is_selective(t)]
    if len(minors) < 2 or any(t.partition not in prepared for t in minors):
        return settled, {}
    started, ref = time.monotonic(), quoted(plan.table)
    active: list[tuple[CompactionTask, Any, PartitionResult]] = []
    try:
        table, current = _current_table(spark, plan)
        if current is None:
            return settled, {}
        base_id = int(current.snapshotId())
        expressions = {t.partition: java_partition_expression(spark, table, t.partition) for t in minors}
        # The group read scanned each partition at its own base: scanned again (side by side) only where something
        # was committed since.
        changed = [(t.partition, expressions[t.partition]) for t in minors
                   if prepared[t.partition].snapshot_id != base_id]
        rescans = scans_at(spark, table, base_id, changed, with_applied=False)
        for task in minors:
            key, ready = task.partition, prepared[task.partition]
            result = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value, attempts=1)
            expression = expressions[key]
            before = ready.files if ready.snapshot_id == base_id else rescans[key].result()
            if settled_as_stale(plan, task, before, base_id, result, spark, table):
                result.duration_ms = int((time.monotonic() - started) * 1000)
                settled[key] = result
                continue
            usable = ready.usable_in(spark, table, before)
            if usable is None:
                continue  # changed since the group read: this partition decides and reads again on its own
            prepared[key] = usable
            change = PartitionChange(key, expression, before, usable.work, usable.positions, usable.converted_rows)
            if not change.busy:
                result.status, result.after = NO_OP, result.before
                settled[key] = result
                continue
            active.append((task, change, result))
    except Exception as e:  # each partition loads, scans and reports on its own
        emit(progress, f"icecompact: MINOR group setup failed, running per partition: {classify_java_error(e, 'setup')}")
        return {}, {}
    if len(active) < 2:
        return {k: r for k, r in settled.items() if r.status == SKIPPED}, {}
    joined: list[_PendingCheck] = []
    try:
        active_keys = {t.partition for t, _, _ in active}
        for pending_check in list(rewrites or ()):
            rewritten = {k for k, r in pending_check.committed_results().items() if r.commit_snapshot_ids}
            if single_spec(table) and rewritten <= active_keys:
                joined.append(pending_check)
            elif check_alone is not None:
                check_alone(pending_check)
                # Undone: the partitions' reads are of undone files (they are settled by the check).
                undone = set(pending_check.results.result()) - set(pending_check.committed_results())
                active = [a for a in active if a[0].partition not in undone]
    except Exception as e:  # the rewrites are checked on their own later; each partition runs on its own
        emit(progress, f"icecompact: MINOR group setup failed, running per partition: {classify_java_error(e, 'setup')}")
        return {}, {}
    if len(active) < 2:
        return {k: r for k, r in settled.items() if r.status == SKIPPED}, {}
    emit(progress, f"icecompact: MINOR {len(active)} partitions in one commit: "
                    f"{sum(len(c.work.equality) for _, c, _ in active)} equality / "
                    f"{sum(len(c.work.positional) for _, c, _ in active)} position delete files to replace")
    commits: list[int] = []
    what = f"MINOR of {len(active)} partitions"
    outcomes: list[Any] = []
    tag = new_tag()
    commit_started = time.monotonic()
    try:
        outcomes = commit_changes(spark, table, [c for _, c, _ in active],
                                  _any_of(spark, [c.expression for _, c, _ in active]),
                                  base_id=base_id, plan_id=plan.plan_id, tag=tag, committed=commits,
                                  one_dv_per_puffin_file=plan.policy.one_dv_per_puffin_file)
        emit(progress, f"icecompact: {what}: delete files written and committed in "
                        f"{time.monotonic() - commit_started:.1f} s (the commit gate's waits included)")
    except Exception as e:
        err, kind = classify_failure(e, what)
        if not commits and _commit_may_have_landed(spark, table, base_id, tag, [r for _, _, r in active], err,
                                                   progress):
            _settle_group(settled, [(t.partition, r) for t, _, r in active], started)
            return settled, {}
        if not commits:  # nothing landed: each partition tries on its own
            emit(progress, f"icecompact: MINOR group commit failed, nothing committed: {err}")
            return {k: r for k, r in settled.items() if r.status == SKIPPED}, _group_conflicts(
                err, kind, [t.partition for t, _, _ in active])
        # Committed, then something failed: never keep it silently.
        _undo_group(spark, table, commits, [r for _, _, r in active], err)
        _settle_group(settled, [(t.partition, r) for t, _, r in active], started)
        return settled, {}

    rewrite_of = {k: r for c in joined for k, r in c.committed_results().items()}
    rewrite_commits = sorted({int(sid) for c in joined for sid in c.commits},
                             key=lambda sid: int(table.snapshot(sid).sequenceNumber()))

    def check(fingerprints: FingerprintCache) -> None:
        counted = counted_from_metadata(spark, table, {t.partition: c.expression for t, c, _ in active}, commits,
                                         level)
        read_own_rows(spark, table, plan, level, fingerprints, rewrite_commits + commits,
                       [t.partition for t, _, _ in active], counted, group=group, collapse=True)
        for (task, change, result), outcome in zip(active, outcomes):
            take_outcome(result, [], outcome)
            if not single_spec(table) and result.commit_snapshot_ids:  # its own files only (see own_counts)
                result.after = own_counts_at(spark, table, change.expression, task.partition,
                                              int(result.commit_snapshot_ids[-1]))
            rewrite = rewrite_of.get(task.partition)
            steps = (list(rewrite.commit_snapshot_ids) if rewrite is not None else []) + list(
                result.commit_snapshot_ids)
            validate(spark, table, ref, plan.table.catalog, task.partition, steps, level,
                      None, change.expression, result, fingerprints=fingerprints, group=group, own_rows=True,
                      counted=counted[task.partition], collapse=True)
            result.status = COMMITTED if result.commit_snapshot_ids else NO_OP
        for rewrite in rewrite_of.values():
            rewrite.validation = {"level": level.value,
                                  "result": "skipped" if level is ValidationLevel.NONE else "passed",
                                  "checks": [], "checked_with": "the conversion committed on top of it"}

    with_rewrites = f"{what} (with its file rewrite)" if joined else what

    def timed_check(fingerprints: FingerprintCache) -> None:
        check_started = time.monotonic()
        check(fingerprints)
        emit(progress, f"icecompact: {with_rewrites}: validation ({level.value}) in "
                        f"{time.monotonic() - check_started:.1f} s")

    for pending_check in joined:
        pending_check.absorbed = True
    # A failure undoes the rewrites too: the results of their partitions (all in this commit) share it.
    _check_group_commit(spark, table, ref, level, rewrite_commits + commits,
                        [r for _, _, r in active] + [r for r in rewrite_of.values() if r.commit_snapshot_ids],
                        with_rewrites, progress, timed_check, group)
    _settle_group(settled, [(t.partition, r) for t, _, r in active], started)
    return settled, {}


def _add_conflicts(conflicts: dict[Any, list[dict[str, Any]]], seen: dict[Any, list[dict[str, Any]]]) -> None:
    """Add a group round's conflicts to those of the rounds before (each one an attempt of its partition)."""
    for key, entries in seen.items():
        conflicts[key] = conflicts.get(key, []) + entries


def _check_group_commit(spark: Any, table: Any, ref: str, level: ValidationLevel, commits: list[int],
                        results: list[PartitionResult], what: str, progress: Callable[[str], None] | None,
                        check: Callable[[FingerprintCache], None], group: GroupRows | None = None) -> None:
    """Run ``check`` of a group's commits (on main already). A catalog outage is waited out and the check run again:
    neither checking nor undoing the commit can happen before the catalog answers, and the check only reads (see
    run_task). Any other failure undoes the commits for every partition of the group: never kept silently."""
    unavailable_since: float | None = None
    while True:
        # shared: every partition compares the same commits (and the group's earlier checks read some of them)
        fingerprints = fingerprint_cache(spark, ref, level, group)
        try:
            if unavailable_since is not None:
                table.refresh()
            check(fingerprints)
            if unavailable_since is not None:
                for result in results:
                    note = "the catalog was unavailable after the commit; validated once it answered"
                    result.reason = f"{result.reason}; {note}" if result.reason else note
            return
        except Exception as e:
            err, kind = classify_failure(e, what)
            if commits and retry_rule(kind, committed=True).action is RetryAction.VALIDATE_WHEN_AVAILABLE:
                unavailable_since = wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    continue
            # Any other failure with the commits on main, or the outage outlasting the wait (the rule's ``then``):
            # roll back.
            _undo_group(spark, table, commits, results, err)
            return
        finally:
            fingerprints.close()


def _commit_may_have_landed(spark: Any, table: Any, base_id: int, tag: str, results: list[PartitionResult],
                            err: CompactionError, progress: Callable[[str], None] | None) -> bool:
    """After a group commit raised with nothing recorded: whether it may have landed anyway, in which case the group's
    partitions are settled here (``results``) and must not be run again one by one.

    Iceberg's rule for a commit whose outcome is unknown (``CommitStateUnknownException``, or a connection reset after
    the catalog took the commit) is to look at the table before anything else: a retry planned from the new state
    would find our own commit as "changed since planning" and skip, leaving that commit unchecked. So: our tagged
    snapshot found on main -> undone while it is still current (``undo``: compare-and-swap, no file deleted; else
    needs_attention), and the next run plans again; the table not readable -> each partition failed with the error
    (the next run's post-hoc check covers a snapshot of ours that landed); not found -> False (it did not land).
    A catalog that cannot be reached (the outage that failed the commit) is waited for, as any catalog outage
    (CATALOG_OUTAGE_WAIT_S), before the outcome is called unknown."""
    unavailable_since: float | None = None
    while True:
        try:
            landed = find_tagged_snapshot(table, base_id, tag)
            break
        except Exception as e:  # noqa: BLE001 - any failure to look means: unknown
            lookup_error = classify_java_error(e, "lookup of the group commit")
            if isinstance(lookup_error, CatalogUnavailableError):
                unavailable_since = wait_for_catalog(lookup_error, unavailable_since, progress)
                if unavailable_since is not None:
                    continue
            emit(progress, f"icecompact: group commit failed ({err}) and the table could not be read to see "
                            f"whether it landed: {lookup_error}")
            for result in results:
                result.status, result.error_class, result.exit_code = FAILED, type(err).__name__, err.exit_code
                result.error = f"commit outcome unknown: {err}"
            return True
    if landed is None:
        return False
    emit(progress, f"icecompact: group commit failed ({err}) but its snapshot {landed} is on the table: undoing it")
    _undo_group(spark, table, [landed], results, err)
    return True


def _undo_group(spark: Any, table: Any, commits: list[int], results: list[PartitionResult],
                err: CompactionError) -> None:
    """A group commit landed, then a check failed: undo it, and every partition of the group shares the outcome."""
    status = undo(spark, table, commits)
    for result in results:
        result.status, result.error_class, result.exit_code = status, type(err).__name__, err.exit_code
        result.error, result.commit_snapshot_ids = str(err), list(commits)


def _settle_group(settled: dict[Any, PartitionResult], done: list[tuple[Any, PartitionResult]],
                  started: float) -> None:
    """Add the group's partitions to ``settled``, each with an equal share of the group's wall time. (Their progress
    line is printed by run_group once each outcome is final: a selective partition still has its conversion.)"""
    share = int((time.monotonic() - started) * 1000 / len(done))
    for key, result in done:
        result.duration_ms = share
        settled[key] = result


def _group_outcome(result: PartitionResult, before: Any, after: Any, commits: list[int],
                   after_counts: dict[str, int], own: Callable[[Any], bool] | None = None) -> None:
    """A partition's share of the group's commits, from its files before and after (``after_counts``: its own
    files after, see :func:`own_counts`). ``own(file)``: whether a file is the partition's own (its spec and
    partition); a multi-spec scan also selects other specs' files (see :func:`own_counts`), which are counted in
    their own partition only, so that the partitions' file counts add up to what the commits did."""
    def mine(files: dict[Any, Any]) -> set[Any]:
        return {ref for ref, f in files.items() if own is None or own(f)}

    before_data, after_data = mine(before.data), mine(after.data)
    before_deletes, after_deletes = mine(before.deletes), mine(after.deletes)
    result.rewritten_data_files = len(before_data - after_data)
    result.added_data_files = len(after_data - before_data)
    result.removed_delete_files = len(before_deletes - after_deletes)
    result.after = after_counts
    changed = result.rewritten_data_files or result.added_data_files or result.removed_delete_files
    result.commit_snapshot_ids = list(commits) if changed else []


def _is_own(keys: PartitionKeys, table: Any, key: PartitionKey, f: Any) -> bool:
    return bool(keys.key_of(table, f) == key)


def _prepare_minor_group(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask],
                         progress: Callable[[str], None] | None) -> dict[Any, Any]:
    """The MINOR partitions of a group read their rows in one Spark job (see minor.prepare_group). Best effort:
    if it fails, every partition does its own reading, with the usual error handling."""
    keys = [t.partition for t in tasks if is_selective(t) and not t.partition.is_unpartitioned]
    if len(keys) < 2:
        return {}
    from compaction.spark.minor import prepare_group

    identifier = spark_identifier(plan)
    started = time.monotonic()
    try:
        table = J.load_table(spark, identifier)
        keyed = [(key, java_partition_expression(spark, table, key)) for key in keys]
        prepared = prepare_group(spark, table, quoted(plan.table), keyed,
                                 rows_predicate(spark, table, plan.table.catalog, set(keys)),
                                 driver_max_rows=plan.policy.minor_driver_match_max_rows)
        emit(progress, f"icecompact: MINOR read {len(prepared)} partitions in one Spark job in "
                        f"{time.monotonic() - started:.1f} s")
        return prepared
    except Exception as e:  # each partition retries on its own and reports its own error
        emit(progress, f"icecompact: MINOR group read failed, reading per partition: {classify_java_error(e, 'prepare')}")
        return {}


def _group_rows(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask],
                level: ValidationLevel) -> GroupRows | None:
    """Validation state shared by the group's partitions, based at the table's current snapshot (None at level
    none, or when the table cannot be loaded: each partition then reports that itself)."""
    if level is ValidationLevel.NONE:
        return None
    keys = [t.partition for t in tasks if t.kind in (CompactionKind.MAJOR, CompactionKind.MINOR)]
    identifier = spark_identifier(plan)
    try:
        table = J.load_table(spark, identifier)
        metadata = table.operations().refresh()
        current = metadata.currentSnapshot()
        group = GroupRows(spark, table, quoted(plan.table), plan.table.catalog, keys,
                          int(current.snapshotId()) if current is not None else None, level,
                          base_metadata_file=str(metadata.metadataFileLocation()))
    except Exception:
        return None
    group.read_ahead()
    return group


def run_group(spark: Any, plan: CompactionPlan, group_id: int, *, level: ValidationLevel,
              max_retries: int = MAX_RETRIES_DEFAULT,
              progress: Callable[[str], None] | None = None,
              group_commit: bool = GROUP_COMMIT_DEFAULT,
              checkpoint: Callable[[dict[str, Any]], None] | None = None) -> GroupResult:
    """Run job group ``group_id`` of ``plan``. ``checkpoint`` receives an incomplete result (``status``
    ``incomplete``) whenever a partition's work is committed and validated, so that a job killed later still leaves
    a record of what it changed (the spark-submit entry point writes it next to the result file)."""
    each = None if checkpoint is None else (lambda _gid, incomplete: checkpoint(incomplete))
    return run_groups(spark, plan, [group_id], level=level, max_retries=max_retries, progress=progress,
                      group_commit=group_commit, checkpoint=each)[0]


def run_groups(spark: Any, plan: CompactionPlan, group_ids: list[int], *, level: ValidationLevel,
               max_retries: int = MAX_RETRIES_DEFAULT,
               progress: Callable[[str], None] | None = None,
               group_commit: bool = GROUP_COMMIT_DEFAULT,
               checkpoint: Callable[[int, dict[str, Any]], None] | None = None) -> list[GroupResult]:
    """Run several job groups of ``plan`` in this process as one unit of work: their MAJOR partitions in one Iceberg
    rewrite action (its file groups rewritten concurrently, as ``CALL rewrite_data_files`` does over a whole
    table), their MINOR partitions in one RowDelta, one group read for validation, instead of one of each per group
    run one after the other. Results are reported per group, as :func:`run_group` reports them (``checkpoint``
    receives each group's incomplete result, with its id)."""
    J.activate(spark)
    groups = {g.group_id: g for g in plan.groups}
    results = {gid: GroupResult(plan.plan_id, gid, str(plan.table)) for gid in dict.fromkeys(group_ids)}
    owner: dict[str, int] = {}  # partition label -> its group
    planned: list[CompactionTask] = []
    for gid in results:
        if gid not in groups:
            results[gid].status, results[gid].exit_code = "failed", 4
            results[gid].error = f"plan {plan.plan_id} has no job group {gid} (groups: {sorted(groups)})"
            continue
        for task in groups[gid].tasks:
            owner.setdefault(task.partition.label(), gid)
            planned.append(task)
    tasks = _merge_tasks(tuple(planned))
    reported = _run_tasks(spark, plan, tasks, level=level, max_retries=max_retries, progress=progress,
                          group_commit=group_commit,
                          checkpoint=None if checkpoint is None else functools.partial(
                              _checkpoint_per_group, plan, owner, checkpoint))
    for part in reported:
        results[owner[part.label]].partitions.append(part)
    for gid, result in results.items():
        if gid in groups:
            _finish_group(result)
    return list(results.values())


def _checkpoint_per_group(plan: CompactionPlan, owner: dict[str, int],
                          checkpoint: Callable[[int, dict[str, Any]], None], parts: list[PartitionResult]) -> None:
    by_group: dict[int, list[PartitionResult]] = {gid: [] for gid in dict.fromkeys(owner.values())}
    for part in parts:
        by_group[owner[part.label]].append(part)
    for gid, group_parts in by_group.items():
        incomplete = GroupResult(plan.plan_id, gid, str(plan.table), status="incomplete", partitions=group_parts,
                                 exit_code=RewriteJobError.exit_code,
                                 error="the job ended before it reported every partition (killed or crashed)")
        checkpoint(gid, incomplete.to_dict())


def _finish_group(result: GroupResult) -> None:
    bad = [p for p in result.partitions if p.status in BAD_PARTITION_STATUSES]
    if not bad:
        result.status = "succeeded"
    else:
        result.status = "partial" if len(bad) < len(result.partitions) else "failed"
        result.exit_code = max((p.exit_code for p in bad), default=0) or RewriteJobError.exit_code
        result.error = "; ".join(f"{p.label}: {p.status}{': ' + p.error if p.error else ''}" for p in bad)[:4000]


@dataclasses.dataclass
class _GroupRun:
    """What the stages of a job group (:func:`compaction.core.stages.group_stages`) share while they run."""

    spark: Any
    plan: CompactionPlan
    tasks: list[CompactionTask]
    level: ValidationLevel
    max_retries: int
    progress: Callable[[str], None] | None
    group_commit: bool
    checkpoint: Callable[[list[PartitionResult]], None] | None
    group: GroupRows | None
    settled: dict[Any, PartitionResult] = dataclasses.field(default_factory=dict)
    #: Selective tasks whose file rewrite is done and validated (their conversion is still to run).
    rewrites: dict[Any, PartitionResult] = dataclasses.field(default_factory=dict)
    reported: list[PartitionResult] = dataclasses.field(default_factory=list)
    #: Conflicts of the group commits, by partition: each one an attempt of the partition.
    conflicts: dict[Any, list[dict[str, Any]]] = dataclasses.field(default_factory=dict)
    #: The tasks the group conversion works on, and their positions read as a group.
    pending: list[CompactionTask] = dataclasses.field(default_factory=list)
    prepared: dict[Any, Any] = dataclasses.field(default_factory=dict)
    announced: set[Any] = dataclasses.field(default_factory=set)
    #: Committed file rewrites whose check is not done (their partitions are in neither ``rewrites`` nor ``settled``).
    checks: list[_PendingCheck] = dataclasses.field(default_factory=list)

    def await_outcomes(self) -> None:
        """Wait for the file rewrites' outcomes; the partitions of a rewrite undone meanwhile are settled."""
        for check in list(self.checks):
            if not check.committed_results():
                self.checks.remove(check)
                self._file(check)

    def _file(self, check: _PendingCheck) -> None:
        for key, part in check.results.result().items():
            (self.rewrites if part.status in (COMMITTED, NO_OP) else self.settled)[key] = part

    def check_alone(self, check: _PendingCheck) -> None:
        """Compare the rows of ``check``'s rewrite on their own (undone on a failure); file its partitions."""
        self.checks.remove(check)
        if check.committed_results():
            check.compare_rows()
        self._file(check)

    def await_checks(self) -> None:
        """Finish every file rewrite check, each on its own; file their partitions as after a check in line."""
        self.await_outcomes()
        while self.checks:
            self.check_alone(self.checks[0])

    def file_absorbed(self) -> None:
        """File the partitions of the rewrites checked together with the conversion committed on top of them."""
        for check in [c for c in self.checks if c.absorbed]:
            self.checks.remove(check)
            self._file(check)

    def save_progress(self) -> None:
        if self.checkpoint is None:
            return
        parts = {p.label: p for p in self.reported}
        for key, part in self.settled.items():
            parts.setdefault(key.label(), part)
        for key, part in self.rewrites.items():
            if key.label() not in parts and part.commit_snapshot_ids:  # a rewrite with nothing to merge is no outcome
                parts[key.label()] = dataclasses.replace(
                    part, reason="file rewrite committed and validated; the job ended before the rest of the work")
        self.checkpoint(list(parts.values()))

    def announce_final(self) -> None:
        """One progress line per partition, printed once, when its outcome is final (see :func:`final_line`): a
        selective partition's file rewrite is not final until its conversion has run."""
        for key, part in self.settled.items():
            if key not in self.announced:
                self.announced.add(key)
                emit(self.progress, final_line(part))

    def full_rewrite(self) -> None:
        done, seen = _run_major_group(self.spark, self.plan, self.tasks, level=self.level, progress=self.progress,
                                      group=self.group)
        self.settled.update(done)
        _add_conflicts(self.conflicts, seen)

    def file_rewrite(self, kind: str) -> None:
        # Not the tasks the full rewrite settled (an unpartitioned spec's full MAJOR covers every MAJOR).
        candidates = [t for t in self.tasks if t.partition not in self.settled]
        for _ in range(GROUP_REWRITE_ROUNDS_DEFAULT):
            # The outcome of the rewrite before is settled before this one starts; the rows of both are compared
            # later (with the conversion committed on top of them, or each on its own).
            self.await_outcomes()
            # The outcome is settled in the background: the conversion's read (minor_read) runs meanwhile.
            done, seen = _run_major_group(self.spark, self.plan, candidates, level=self.level, progress=self.progress,
                                          group=self.group, selective=kind, later=self.checks)
            for key, part in done.items():
                (self.rewrites if part.status in (COMMITTED, NO_OP) else self.settled)[key] = part
            _add_conflicts(self.conflicts, seen)
            # A writer's DELETE / MERGE added a position delete or DV to a file the rewrite replaces
            # (Iceberg refuses the commit): plan the rewrite again from the new snapshot, as a group.
            candidates = [t for t in candidates if t.partition in seen]
            if not candidates:
                break

    def report(self) -> None:
        self.announce_final()
        self.save_progress()

    def minor_read(self) -> None:
        checking = {key for check in self.checks for key in check.keys}
        self.pending = [t for t in self.tasks if t.partition not in self.settled]
        if self.group_commit:
            # The group conversion is only the second half of a selective task: a partition whose file rewrite did
            # not run as a group (it conflicted again, or was alone of its kind) does both halves on its own
            # (run_task), or its fragments and delete-heavy files would stay while it is reported compacted.
            # A rewrite still being checked counts as done here; one whose check fails is dropped below.
            self.pending = [t for t in self.pending
                            if not is_selective(t) or t.partition in self.rewrites or t.partition in checking]
        self.prepared = _prepare_minor_group(self.spark, self.plan, self.pending, self.progress)
        if checking:
            self.await_outcomes()
            # A failed outcome undid the rewrite (and settled the partition failed): its read is of undone files.
            self.pending = [t for t in self.pending if t.partition not in self.settled]
            self.prepared = {k: v for k, v in self.prepared.items() if k not in self.settled}
            self.report()

    def minor_commit(self) -> None:
        self.await_outcomes()
        for group_round in range(MINOR_GROUP_ROUNDS_DEFAULT):
            done, seen = _run_minor_group(self.spark, self.plan, self.pending, level=self.level,
                                          progress=self.progress, group=self.group, prepared=self.prepared,
                                          rewrites=self.checks, check_alone=self.check_alone)
            self.file_absorbed()
            # A partition settled here without the conversion committing on its rewrite (nothing left to convert,
            # or too few partitions to commit as a group): its rewrite is checked on its own now, so that its
            # result is combined with the rewrite's (nothing of ours committed on top of that rewrite).
            for check in [c for c in self.checks if c.keys & done.keys()]:
                self.check_alone(check)
            for key, part in done.items():
                if key in self.conflicts:  # the group commit of the round before conflicted: this is its retry
                    part.conflicts = self.conflicts[key] + part.conflicts
                    part.attempts += len(self.conflicts.pop(key))
            self.settled.update({k: combine_rewrite_and_conversion(self.rewrites.get(k), r) for k, r in done.items()})
            _add_conflicts(self.conflicts, seen)
            self.report()
            # Left out although the group read covered them: the group commit conflicted before landing (a writer's
            # DML committed first, typically the one the commit gate waited for), or a writer's change since the
            # read could not be moved onto (PreparedMinor.usable_in). The first keep their positions: the next
            # round's setup moves them onto the new snapshot. The others are read again as a group (one Spark job)
            # rather than one partition at a time.
            left = [t for t in self.pending if t.partition not in self.settled and t.partition in self.prepared]
            if group_round + 1 == MINOR_GROUP_ROUNDS_DEFAULT or len(left) < 2:
                break
            stale = [t for t in left if t.partition not in seen]
            if len(stale) < len(left):
                emit(self.progress, f"icecompact: MINOR group commit of {len(left) - len(stale)} partitions conflicted "
                                    "with a writer's commit: committing again on the new snapshot")
            if stale:
                emit(self.progress, f"icecompact: MINOR {len(stale)} partitions changed since the group read: "
                                    "reading again")
                self.prepared = {**self.prepared, **_prepare_minor_group(self.spark, self.plan, stale,
                                                                         self.progress)}
            self.pending = left

    def each_partition(self) -> None:
        self.await_checks()
        for task in self.tasks:
            if task.partition in self.settled:
                self.reported.append(self.settled[task.partition])
                continue
            part = run_task(self.spark, self.plan.table.catalog, self.plan, task, level=self.level,
                            max_retries=self.max_retries, progress=self.progress,
                            prepared=self.prepared.get(task.partition), group=self.group)
            if task.partition in self.conflicts:
                part.conflicts = self.conflicts[task.partition] + part.conflicts
                part.attempts += len(self.conflicts[task.partition])
            self.settled[task.partition] = combine_rewrite_and_conversion(self.rewrites.get(task.partition), part)
            self.reported.append(self.settled[task.partition])
            self.report()


_STAGE_STEPS: dict[Stage, Callable[[_GroupRun], None]] = {
    Stage.FULL_REWRITE: _GroupRun.full_rewrite,
    Stage.MINOR_FILE_REWRITE: functools.partial(_GroupRun.file_rewrite, kind="minor"),
    Stage.MAJOR_FILE_REWRITE: functools.partial(_GroupRun.file_rewrite, kind="major"),
    Stage.REPORT: _GroupRun.report,
    Stage.MINOR_READ: _GroupRun.minor_read,
    Stage.MINOR_COMMIT: _GroupRun.minor_commit,
    Stage.EACH_PARTITION: _GroupRun.each_partition,
}


def _run_tasks(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
               max_retries: int, progress: Callable[[str], None] | None, group_commit: bool,
               checkpoint: Callable[[list[PartitionResult]], None] | None) -> list[PartitionResult]:
    """Every task, stage by stage (:func:`compaction.core.stages.group_stages`): the MAJOR and selective rewrites
    together, the MINOR conversions together, then each partition not settled so far on its own (:func:`run_task`).
    ``checkpoint`` receives what is committed and validated so far whenever that grows."""
    run = _GroupRun(spark, plan, tasks, level, max_retries, progress, group_commit, checkpoint,
                    group=_group_rows(spark, plan, tasks, level))
    try:
        for stage in group_stages(tasks, group_commit=group_commit):
            _STAGE_STEPS[stage](run)
    finally:
        # A check still running reads through the group's shared state: it ends before that is closed.
        concurrent.futures.wait([check.results for check in run.checks])
        if run.group is not None:
            run.group.close()
    return run.reported


def error_result(plan_id: str, group_id: int, table: str, error: CompactionError) -> GroupResult:
    return GroupResult(plan_id, group_id, table, status="failed", error=str(error), exit_code=error.exit_code)
