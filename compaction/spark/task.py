"""One partition's compaction as a state machine: re-inspect (the plan may be stale), compact, validate, retry a
conflict with backoff, wait out a catalog outage, undo what a failed validation left (:func:`run_task`). A failure is
classified here (:func:`classify_failure`, from the Java exception chain); what it leads to is the retry table's
(compaction.core.retry)."""

from __future__ import annotations

import functools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from compaction.core.errors import (
    CatalogUnavailableError,
    CommitConflictError,
    CommitValidationError,
    CompactionError,
    StorageUnavailableError,
    UnsupportedTableError,
    YieldedToWritersError,
)
from compaction.core.identifiers import quoted
from compaction.core.model import DeleteContent
from compaction.core.plan import CompactionKind, CompactionPlan, CompactionTask, partition_key_to_dict
from compaction.core.planner import evaluate_partition
from compaction.core.results import (
    COMMITTED,
    FAILED,
    NEEDS_ATTENTION,
    NO_OP,
    ROLLED_BACK,
    SKIPPED,
    UNSUPPORTED,
    UNSUPPORTED_PREFIX,
    PartitionResult,
    rewrite_decided_reason,
)
from compaction.core.retry import (
    CATALOG_OUTAGE_WAIT_S,
    CATALOG_POLL,
    FailureKind,
    RetryAction,
    retry_rule,
)
from compaction.core.stages import is_selective
from compaction.spark import jvm as J
from compaction.spark.expressions import java_partition_expression
from compaction.spark.gate import rewrite_kind, wait_before_work
from compaction.spark.group_reads import (
    GroupRows,
    rows_predicate,
    validate,
    counted_from_metadata,
    single_spec,
    own_counts,
    settle_after_counts,
    fingerprint_cache,
)
from compaction.spark.major import (
    find_tagged_snapshot,
    layout_for,
    major_compact,
    new_tag,
    row_group_copy_for,
    plan_snapshots_since,
    rewrite_partition,
    selection_for,
)
from compaction.spark.partition_files import PartitionFiles, PartitionKeys, delete_kind, scan_partition
from compaction.spark.validation import (
    FingerprintCache,
    ValidationLevel,
    classify_java_error,
    java_exception_chain,
    read_ahead_allowed,
    rollback_if_current,
)


def emit(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


def settled_as_stale(plan: CompactionPlan, task: CompactionTask, before: Any, base_id: int | None,
                      result: PartitionResult, spark: Any = None, table: Any = None) -> bool:
    """Record the partition's files at the attempt's base (its own files only, see :func:`own_counts`); if the plan
    is stale (a planned file is gone), decide again from what is there now, with the plan's own policy and mode.
    True when that decision is to do nothing (the result is then final: SKIPPED)."""
    result.base_snapshot_id = base_id
    result.before = own_counts(spark, table, before, task.partition)
    planned_files = set(task.data_files) | set(task.delete_files)
    present = set(before.data) | {path for path, _ in before.deletes}
    if base_id == plan.base_snapshot_id or planned_files <= present:
        return False
    if table is not None and not single_spec(table):
        # Its own files only (see own_counts): the scan also selected other specs' files (all of them for an
        # unpartitioned spec's partition), which their own partitions compact; judged here too, they re-planned a
        # partition whose files were all rewritten ("8 small files" that were the current spec's new files).
        keys = PartitionKeys(spark)
        own = PartitionFiles(before.snapshot_id, has_applied=False)
        own.data = {path: f for path, f in before.data.items() if keys.key_of(table, f) == task.partition}
        own.data_sequence = {path: before.data_sequence[path] for path in own.data}
        # Global equality deletes (written unpartitioned) still apply to its older files (Iceberg spec, "Scan
        # Planning"): they stay in its state, as the planner counts them.
        own.deletes = {ref: d for ref, d in before.deletes.items() if keys.key_of(table, d) == task.partition
                       or (delete_kind(d) is DeleteContent.EQUALITY and keys.key_of(table, d).is_unpartitioned)}
        before = own
    decision = evaluate_partition(before.to_state(task.partition, spark), plan.policy, plan.mode, plan.format_version)
    if decision.kind is CompactionKind.NONE:
        result.status, result.reason = SKIPPED, f"changed since planning: {decision.reason}"
        result.after = result.before
        return True
    result.reason = f"changed since planning, re-evaluated: {decision.reason}"
    return False


def failure_kind(err: CompactionError, chain: Sequence[tuple[str, str]] = ()) -> FailureKind:
    """The kind of a classified failure (:func:`classify_java_error`), for the retry table (compaction.core.retry).
    ``chain``: the Java exception chain it was classified from (class name, message), outermost first."""
    if isinstance(err, CommitValidationError):
        return FailureKind.VALIDATION_MISMATCH
    if isinstance(err, CatalogUnavailableError):
        return FailureKind.CATALOG_UNAVAILABLE
    if isinstance(err, CommitConflictError):
        if str(getattr(err, "java_class", "")).endswith(".CommitFailedException"):
            return FailureKind.COMMIT_FAILED
        return FailureKind.COMMIT_CONFLICT
    if isinstance(err, UnsupportedTableError):
        return FailureKind.UNSUPPORTED_TABLE
    if isinstance(err, StorageUnavailableError):
        return FailureKind.STORAGE_UNAVAILABLE
    if isinstance(err, YieldedToWritersError):
        return FailureKind.YIELDED_TO_WRITERS
    # Wrapped or not (a Spark or runtime exception around it): the commit may have landed.
    if any(cls.endswith(".CommitStateUnknownException") for cls, _ in chain):
        return FailureKind.COMMIT_STATE_UNKNOWN
    return FailureKind.OTHER


def classify_failure(error: BaseException, what: str) -> tuple[CompactionError, FailureKind]:
    """``error`` as the platform's error (:func:`classify_java_error`, its message names ``what``) and its kind."""
    err = classify_java_error(error, what)
    return err, failure_kind(err, java_exception_chain(error))


def wait_for_catalog(err: CompactionError, since: float | None,
                      progress: Callable[[str], None] | None) -> float | None:
    """Sleep one retry interval while the catalog has been unreachable for less than CATALOG_OUTAGE_WAIT_S; returns
    when the outage started, or ``None`` once waiting longer is pointless (the caller fails)."""
    since = since or time.monotonic()
    if time.monotonic() - since >= CATALOG_OUTAGE_WAIT_S:
        return None
    emit(progress, f"icecompact: {err}; waiting for the catalog")
    time.sleep(CATALOG_POLL.delay_s(1))
    return since


def validate_after_outage(err: CompactionError, since: float | None,
                           progress: Callable[[str], None] | None, spark: Any, table: Any, ref: str,
                           plan: CompactionPlan, task: CompactionTask, commits: list[int], level: ValidationLevel,
                           base_sequence_number: int | None, expression: Any, result: PartitionResult) -> float | None:
    """Wait for the catalog (up to CATALOG_OUTAGE_WAIT_S), then validate ``commits``; raises CommitValidationError
    when they fail, re-raises the outage when it outlasts the wait. Returns when the outage started."""
    while True:
        since = wait_for_catalog(err, since, progress)
        if since is None:
            raise err
        try:
            table.refresh()
            validate(spark, table, ref, plan.table.catalog, task.partition, commits, level, base_sequence_number,
                      expression, result)
            return since
        except CommitValidationError:
            raise
        except Exception as e:  # noqa: BLE001 - still down: wait again; anything else goes to the caller
            again, kind = classify_failure(e, f"{task.kind.value.upper()} {task.partition.label()}")
            if kind is not FailureKind.CATALOG_UNAVAILABLE:
                raise
            err = again


def run_task(spark: Any, catalog_name: str, plan: CompactionPlan, task: CompactionTask, *,
             level: ValidationLevel, max_retries: int,
             progress: Callable[[str], None] | None = None, prepared: Any = None,
             group: GroupRows | None = None) -> PartitionResult:
    key = task.partition
    result = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value)
    started = time.monotonic()
    ref = quoted(plan.table)
    identifier = spark_identifier(plan)
    unavailable_since: float | None = None
    rewrite_reason = ""
    while True:
        try:
            table = J.load_table(spark, identifier)
            break
        except Exception as e:
            err, kind = classify_failure(e, f"cannot load {identifier}")
            if retry_rule(kind, committed=False).action is RetryAction.RETRY_SAME:
                unavailable_since = wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    continue
            result.error, result.exit_code, result.status = str(err), err.exit_code, FAILED
            return result
    if task.kind not in (CompactionKind.MAJOR, CompactionKind.MINOR):
        result.status = UNSUPPORTED
        result.reason = f"{UNSUPPORTED_PREFIX}{task.kind.value} compaction is not implemented by this version of the Spark job"
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result
    if is_selective(task):
        compact = functools.partial(selective_attempt, kind=task.kind.value)
    else:
        compact = major_attempt
    attempt = 0
    while True:
        attempt += 1
        result.attempts = attempt
        commits: list[int] = []  # filled by the attempt as soon as it has committed anything
        fingerprints = fingerprint_cache(spark, ref, level, group)
        base_id = None
        try:
            # Every attempt starts with a rewrite (a MAJOR, or a selective one's file rewrite), which a writer's DML
            # committing during it makes Iceberg refuse.
            wait_before_work(rewrite_kind(task.kind.value if is_selective(task) else None), table=table)
            table.refresh()
            current = table.currentSnapshot()
            base_id = int(current.snapshotId()) if current is not None else None
            expression = java_partition_expression(spark, table, key)
            # Which deletes apply to which file is not needed here (MAJOR reads it after the rewrite, in validate;
            # MINOR derives it from metadata by the spec's rules).
            before = scan_partition(spark, table, expression, base_id, with_applied=False)
            if settled_as_stale(plan, task, before, base_id, result, spark, table):
                break
            emit(progress, f"icecompact: {task.kind.value.upper()} {key.label()} attempt {attempt}: "
                            f"{result.before['data_files']} data / {result.before['delete_files']} delete files "
                            f"({result.before['equality_delete_files']} equality)")
            if not result.kept_snapshot_ids:  # the reason of the attempt that may make (and keep) a file rewrite
                rewrite_reason = result.reason
            compact(Attempt(spark, plan, table, ref, key, expression, before, current, level, fingerprints,
                             attempt, prepared, group), result, commits)
            result.status = COMMITTED if commits or result.kept_snapshot_ids else NO_OP
            break
        except Exception as e:  # py4j errors from Iceberg and our own, classified; the action is core.retry's
            err, kind = classify_failure(e, f"{task.kind.value.upper()} {key.label()}")
            if not commits and base_id is not None:
                commits.extend(_landed_unrecorded(table, base_id, plan.plan_id, result, err, progress))
            rule = retry_rule(kind, committed=bool(commits))
            action = rule.action
            if action is RetryAction.VALIDATE_WHEN_AVAILABLE:
                # Committed, then the catalog went away (e.g. during validation's reads): the snapshots are on main,
                # and neither validating nor undoing them can happen until it answers. Validation is read-only, so
                # wait and validate what was committed (kept when it passes, undone when it fails); the rest of
                # the attempt (a cleanup, a conversion) is left to the next run, which plans from what is there.
                kept_checks = [c for c in result.validation.get("checks", [])
                               if c.get("snapshot_id") in result.kept_snapshot_ids]
                try:
                    unavailable_since = validate_after_outage(
                        err, unavailable_since, progress, spark, table, ref, plan, task, commits, level,
                        None if is_selective(task) else int(current.sequenceNumber()), expression, result)
                except Exception as again:  # noqa: BLE001 - a failed check, or the outage outlasting the wait
                    err, kind = classify_failure(again, f"{task.kind.value.upper()} {key.label()}")
                    # Either way the commits stay unchecked: the rule once the wait is spent, or the failure's own
                    # rule with commits on the table (both roll back).
                    action = (rule.then if kind is FailureKind.CATALOG_UNAVAILABLE
                              else retry_rule(kind, committed=True).action) or RetryAction.ROLL_BACK
                else:
                    result.status = COMMITTED
                    result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
                    # The revalidation checked this attempt's commits; a rewrite kept before it was checked then.
                    result.validation["checks"] = kept_checks + list(result.validation.get("checks", []))
                    note = "the catalog was unavailable after the commit; validated once it answered"
                    result.reason = f"{result.reason}; {note}" if result.reason else note
                    break
            if action is RetryAction.ROLL_BACK:  # never keep an unchecked commit silently
                result.error, result.error_class, result.exit_code = str(err), type(err).__name__, err.exit_code
                result.status = undo(spark, table, commits)
                result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
                break
            if action is RetryAction.RETRY_SAME:
                # Nothing of ours is committed: the attempt can start over once the catalog answers.
                unavailable_since = wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    if not rule.uses_a_retry:
                        attempt -= 1
                    continue
            elif action is RetryAction.REPLAN_AND_RETRY:
                result.conflicts.append({"attempt": attempt, "error_class": getattr(err, "java_class", type(err).__name__),
                                         "message": str(err)[:2000]})
                if attempt <= max_retries:
                    emit(progress, f"icecompact: conflict on {key.label()} (attempt {attempt}), retrying: {err}")
                    time.sleep(rule.backoff.delay_s(attempt) if rule.backoff else 0.0)
                    continue  # the next attempt scans the current snapshot and decides again
            elif action is RetryAction.SKIP_UNSUPPORTED:
                result.reason = f"{UNSUPPORTED_PREFIX}{err}"
            elif kind is FailureKind.YIELDED_TO_WRITERS:
                result.reason = str(err)
            result.status = rule.status or FAILED
            result.error, result.error_class, result.exit_code = str(err), type(err).__name__, err.exit_code
            break
        finally:
            fingerprints.close()  # never leave a read-ahead Spark job running into the next attempt or partition
    if result.kept_snapshot_ids:
        result.commit_snapshot_ids = result.kept_snapshot_ids + [
            sid for sid in result.commit_snapshot_ids if sid not in result.kept_snapshot_ids]
        if result.status in (NO_OP, SKIPPED):  # e.g. a retry found nothing left to convert after our rewrite
            # The kept rewrite decided the outcome: its reason, not the skip of the step that found nothing left.
            result.status = COMMITTED
            result.reason = rewrite_reason or rewrite_decided_reason(result.kept_snapshot_ids)
        elif result.status != COMMITTED:
            note = (f"the file rewrite (snapshot {', '.join(map(str, result.kept_snapshot_ids))}, validated) holds; "
                    "the conversion did not")
            result.reason = f"{result.reason}; {note}" if result.reason else note
    if result.status in (COMMITTED, NO_OP):
        try:
            settle_after_counts(spark, table, expression, key, result)
        except Exception:  # noqa: BLE001 - counts are a report; the committed, validated work stands without them
            pass
    result.duration_ms = int((time.monotonic() - started) * 1000)
    return result


def _landed_unrecorded(table: Any, base_id: int, plan_id: str, result: PartitionResult, err: CompactionError,
                       progress: Callable[[str], None] | None) -> list[int]:
    """After an attempt failed with nothing recorded: our plan's snapshots that landed anyway since the attempt's base
    (a commit whose answer was lost: ``CommitStateUnknownException``, or a connection reset after the catalog took
    it). Iceberg's rule is to look at the table before retrying; counted as the attempt's commits, they meet the
    retry table's rule for commits on the table (checked or undone, never left unchecked - a retry would read them
    as a change since planning and skip). Unreadable table: none found (the failure's own rule applies)."""
    try:
        landed = [sid for sid in plan_snapshots_since(table, base_id, plan_id)
                  if sid not in result.kept_snapshot_ids and sid not in result.commit_snapshot_ids]
    except Exception:  # noqa: BLE001 - cannot look: as before, the failure decides
        return []
    if landed:
        # Said in the partition's reason too: the failure's own message reads as if nothing landed (a JDBC catalog
        # reports a lost answer as CommitFailedException, then the retry's ValidationException).
        note = (f"snapshot(s) {', '.join(map(str, landed))} of this plan landed although the commit failed: the "
                "catalog took it and its answer was lost")
        result.reason = f"{result.reason}; {note}" if result.reason else note
        emit(progress, f"icecompact: {result.label}: {note} ({err})")
    return landed


@dataclass
class Attempt:
    """What one attempt on one partition works from (the table state it read at its start)."""

    spark: Any
    plan: CompactionPlan
    table: Any
    ref: str
    key: Any
    expression: Any
    before: Any  # PartitionFiles at the base snapshot
    base_snapshot: Any  # Java Snapshot or None
    level: ValidationLevel
    fingerprints: FingerprintCache
    number: int
    prepared: Any  # minor.PreparedMinor for this partition, or None
    group: GroupRows | None = None  # shared by the partitions of the job group (validation)

    @property
    def base_id(self) -> int | None:
        return int(self.base_snapshot.snapshotId()) if self.base_snapshot is not None else None

    @property
    def base_seq(self) -> int | None:
        return int(self.base_snapshot.sequenceNumber()) if self.base_snapshot is not None else None


def take_outcome(result: PartitionResult, commits: list[int], outcome: Any) -> None:
    """Copy a Major/MinorOutcome into the result; ``commits`` first, so that a failure afterwards is undone."""
    commits.extend(sid for sid in outcome.commit_snapshot_ids if sid not in commits)
    result.commit_snapshot_ids = list(commits)
    for name in ("rewritten_data_files", "added_data_files", "removed_delete_files", "added_delete_files",
                 "converted_rows"):
        if hasattr(outcome, name):
            setattr(result, name, getattr(outcome, name))
    result.after = outcome.after


def major_attempt(a: Attempt, result: PartitionResult, commits: list[int]) -> None:
    spark, table, key = a.spark, a.table, a.key
    covers_whole_table = key.is_unpartitioned and len(list(table.specs().keySet())) == 1
    read_ahead = None
    if (a.level is not ValidationLevel.NONE and a.base_id is not None and int(table.specs().size()) == 1
            and read_ahead_allowed(spark, a.plan.table.catalog)):
        # (The base rows of ``key`` come from the group's read when ``key`` is one of the group's partitions.)
        # Read-ahead for validation (c): with a single spec, the rewrite filtered on ``key`` can only touch
        # ``key`` (the filter's projection onto the one spec is exactly that partition), so the base rows
        # of ``key`` are read while Iceberg's action runs, and the rewrite snapshot's rows while our cleanup
        # works on metadata. validate still derives the touched partitions from each commit and reads
        # whatever else it needs; this only changes when the reads happen.
        touched = frozenset({key})
        predicate = rows_predicate(spark, table, a.plan.table.catalog, {key})
        if a.group is None or key not in a.group.keys:
            a.fingerprints.prefetch(a.base_id, touched, predicate)
        read_ahead = functools.partial(a.fingerprints.prefetch, keys=touched, predicate=predicate)
    outcome = major_compact(
        spark, table, a.expression, target_file_size_bytes=a.plan.policy.target_file_size_bytes,
        plan_id=a.plan.plan_id, covers_whole_table=covers_whole_table, before=a.before,
        on_rewrite_commit=read_ahead, committed=commits, layout=layout_for(a.plan.policy, "major"),
        copy=row_group_copy_for(a.plan.policy, "major"),
    )
    take_outcome(result, commits, outcome)
    validate(spark, table, a.ref, a.plan.table.catalog, key, commits, a.level, a.base_seq, a.expression, result,
              after_files=outcome.after_files, fingerprints=a.fingerprints, group=a.group)


def selective_attempt(a: Attempt, result: PartitionResult, commits: list[int], *, kind: str) -> None:
    """Rewrite the selected files (keeping the starting sequence number, so equality deletes committed meanwhile
    still apply to the new files) and validate that commit on its own: from then on it is kept, a valid state of the
    table by itself. Then convert the equality deletes of the files left and merge position deletes (one RowDelta)
    and validate that commit; a failure undoes the conversion only, a conflict retries it (run_task)."""
    from compaction.spark.minor import minor_compact

    spark, table, key = a.spark, a.table, a.key
    before, prepared = a.before, a.prepared if a.number == 1 else None
    # A rewrite kept by an earlier attempt (whose conversion then conflicted) stays validated: keep its checks.
    checks = [c for c in result.validation.get("checks", []) if c.get("snapshot_id") in result.kept_snapshot_ids]
    if a.base_id is not None:
        tag = new_tag()
        rewritten, added, _ = rewrite_partition(
            spark, table, a.expression, target_file_size_bytes=a.plan.policy.target_file_size_bytes,
            plan_id=a.plan.plan_id, tag=tag, selection=selection_for(a.plan.policy, kind),
            layout=layout_for(a.plan.policy, kind),
            copy=row_group_copy_for(a.plan.policy, kind), timed_as=rewrite_kind(kind))
        if rewritten or added:
            sid = find_tagged_snapshot(table, a.base_id, tag)
            if sid is None:
                raise CommitConflictError("rewrite committed but its snapshot was not found on main")
            commits.append(sid)
            result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
            validate(spark, table, a.ref, a.plan.table.catalog, key, [sid], a.level, None, a.expression, result,
                      fingerprints=a.fingerprints, group=a.group)
            checks += list(result.validation.get("checks", []))
            commits.remove(sid)
            result.kept_snapshot_ids.append(sid)
            result.rewritten_data_files += rewritten
            result.added_data_files += added
            table.refresh()
            before, prepared = scan_partition(spark, table, a.expression, sid, with_applied=False), None
    outcome = minor_compact(
        spark, table, a.expression, rows_predicate(spark, table, a.plan.table.catalog, {key}), key,
        table_ref=a.ref, plan_id=a.plan.plan_id, tag=uuid.uuid4().hex, whole_table=key.is_unpartitioned,
        before=before, prepared=prepared, committed=commits,
        one_dv_per_puffin_file=a.plan.policy.one_dv_per_puffin_file,
        driver_max_rows=a.plan.policy.minor_driver_match_max_rows,
    )
    commits.extend(sid for sid in outcome.commit_snapshot_ids if sid not in commits)
    result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
    result.removed_delete_files = outcome.removed_delete_files
    result.added_delete_files = outcome.added_delete_files
    result.converted_rows = outcome.converted_rows
    result.after = outcome.after
    validate(spark, table, a.ref, a.plan.table.catalog, key, commits, a.level, None, a.expression, result,
              fingerprints=a.fingerprints, group=a.group,
              counted=counted_from_metadata(spark, table, {key: a.expression}, commits, a.level)[key])
    result.validation["checks"] = checks + list(result.validation.get("checks", []))


def undo(spark: Any, table: Any, commits: list[int]) -> str:
    """Roll our snapshots back newest first while each is still current; otherwise flag for a human (also when the
    rollback itself cannot reach the catalog: the job reports that instead of dying with it)."""
    for sid in reversed(commits):
        parent = table.snapshot(int(sid)).parentId()
        try:
            rolled_back = parent is not None and rollback_if_current(spark, table, sid, int(parent))
        except Exception:  # noqa: BLE001 - the catalog is gone; what is on main is for a human to look at
            rolled_back = False
        if not rolled_back:
            return NEEDS_ATTENTION
    return ROLLED_BACK


def spark_identifier(plan: CompactionPlan) -> str:
    return ".".join((plan.table.catalog, *plan.table.namespace, plan.table.name))
