"""Runs one job group of a :class:`CompactionPlan` inside Spark and reports a JSON-serializable result.

Per partition: re-inspect (the plan may be stale), compact, validate, retry conflicts with backoff. One partition's
failure never loses another's committed work: every partition commits on its own.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from compaction.core.errors import (
    CatalogUnavailableError,
    CommitConflictError,
    CommitValidationError,
    CompactionError,
    RewriteJobError,
    UnsupportedTableError,
)
from compaction.core.identifiers import quoted
from compaction.core.model import DeleteContent, PartitionKey
from compaction.core.plan import CompactionKind, CompactionPlan, CompactionTask, partition_key_to_dict
from compaction.core.results import (
    BAD_PARTITION_STATUSES,
    UNSUPPORTED_PREFIX,
    GroupResult,
    PartitionResult,
    PartitionStatus,
    combine_rewrite_and_conversion,
    final_line,
    rewrite_decided_reason,
)
from compaction.core.planner import evaluate_partition
from compaction.spark import jvm as J
from compaction.spark.expressions import java_partition_expression, spark_partition_predicate
from compaction.spark.file_io_reads import spark_can_read, static_table_frame
from compaction.spark.major import (
    find_tagged_snapshot,
    layout_for,
    major_compact,
    new_tag,
    remove_dangling_deletes,
    rewrite_partition,
    selection_for,
    selection_rewrites_nothing,
    sleep_backoff,
)
from compaction.spark.partition_files import (
    PartitionFiles,
    PartitionKeys,
    _iterate,
    delete_kind,
    delete_ref,
    live_rows_from_metadata,
    scan_partition,
    touched_partitions,
)
from compaction.spark.validation import (
    FingerprintCache,
    ValidationLevel,
    Fingerprint,
    classify_java_error,
    combine_fingerprints,
    fingerprint,
    partition_fingerprints_query,
    read_ahead_allowed,
    rollback_if_current,
    snapshot_fingerprints,
)

MAX_RETRIES_DEFAULT = 3
#: How long a partition waits for an unreachable catalog (a database restart, a failover) before it fails; it retries
#: every CATALOG_RETRY_INTERVAL_S seconds. Only work that has committed nothing is retried.
CATALOG_OUTAGE_WAIT_S = 120.0
CATALOG_RETRY_INTERVAL_S = 3.0

# Partition statuses written to the result (compaction.core.results, the one vocabulary of job, ledger and reports).
COMMITTED = PartitionStatus.COMMITTED
NO_OP = PartitionStatus.NO_OP
SKIPPED = PartitionStatus.SKIPPED
CONFLICT = PartitionStatus.CONFLICT
FAILED = PartitionStatus.FAILED
ROLLED_BACK = PartitionStatus.ROLLED_BACK
NEEDS_ATTENTION = PartitionStatus.NEEDS_ATTENTION
UNSUPPORTED = PartitionStatus.UNSUPPORTED


def _merge_tasks(tasks: tuple[CompactionTask, ...]) -> list[CompactionTask]:
    """Pieces of a split partition run as one unit here (the rewrite action bins files itself), in plan order."""
    seen: dict[Any, CompactionTask] = {}
    for task in tasks:
        seen.setdefault(task.partition, task)
    return list(seen.values())


def _emit(progress: Callable[[str], None] | None, message: str) -> None:
    if progress is not None:
        progress(message)


#: Predicates built in this process, by (session, table UUID, catalog, keys). Validation asks for the same partitions'
#: predicates many times per group, and each costs a dozen JVM calls per partition field; a partition spec never
#: changes once written (Iceberg spec: specs are immutable, a change adds a new spec id), so neither does a predicate.
_PREDICATES: collections.OrderedDict[tuple[Any, ...], Any] = collections.OrderedDict()
_PREDICATES_MAX = 512


def _table_identity(table: Any) -> str:
    try:
        return f"uuid:{table.uuid()}"
    except Exception:  # noqa: BLE001 - a format-version 1 table written before table UUIDs existed has none
        return f"name:{table.name()}:{table.location()}"


def rows_predicate(spark: Any, table: Any, catalog_name: str, keys: set[Any]) -> Any:
    """OR of the row predicates of ``keys``; an unpartitioned key means every row."""
    from pyspark.sql import functions as F

    if any(k.is_unpartitioned for k in keys):
        return F.lit(True)
    cache_key = (id(spark), _table_identity(table), catalog_name, frozenset(keys))
    cached = _PREDICATES.get(cache_key)
    if cached is not None:
        _PREDICATES.move_to_end(cache_key)
        return cached
    condition = F.lit(False)
    for key in sorted(keys, key=lambda k: k.sort_key()):
        condition = condition | spark_partition_predicate(spark, table, catalog_name, key)
    _PREDICATES[cache_key] = condition
    if len(_PREDICATES) > _PREDICATES_MAX:
        _PREDICATES.popitem(last=False)
    return condition


class GroupRows:
    """What validation (c) of one job group shares between its partitions.

    * ``touched(sid)``: the partitions a snapshot touched (:func:`touched_partitions`), computed once per snapshot
      for the whole group (a snapshot never changes).
    * ``base(table, sid, keys)``: the fingerprint of ``keys`` at ``sid`` taken from one read of *every* partition of
      the group at the group's base snapshot (:func:`partition_fingerprints`: one Spark job instead of one per
      partition), when that is provably the same set of rows: ``sid`` descends from the base on main and every
      snapshot after the base up to ``sid`` touched only *other* partitions of the keys' own (partitioned) spec.
      Files of such a partition hold none of the keys' rows and its deletes apply only to its own data files, so
      every file that holds or deletes a row of ``keys`` is as it was at the base. (A touched partition of another
      spec could hold such rows, and an unpartitioned spec's equality deletes apply everywhere: then, or if the
      group read fails, it answers None and the caller reads ``sid`` itself.) Several keys are summed only when
      they belong to one spec (disjoint row sets).
    """

    #: Longest ancestry walked from a commit's parent back to the group's base (each step may be a touched walk).
    MAX_STEPS = 200

    def __init__(self, spark: Any, table: Any, ref: str, catalog_name: str, keys: list[Any],
                 base_snapshot_id: int | None, level: ValidationLevel, base_metadata_file: str | None = None) -> None:
        self.spark, self.ref, self.level = spark, ref, level
        self.base_snapshot_id = base_snapshot_id
        self.base_metadata_file = base_metadata_file
        self._table = table
        self.keys = list(dict.fromkeys(keys))
        self._predicates = [rows_predicate(spark, table, catalog_name, {k}) for k in self.keys]
        self._values: dict[Any, Fingerprint | None] | None = None
        self._failed = False
        self._touched: dict[int, frozenset[Any]] = {}
        #: (snapshot id, partition keys) -> fingerprint, shared by the group's checks (see _fingerprint_cache).
        self.known_fingerprints: dict[Any, Fingerprint | None] = {}
        self._partition_keys = PartitionKeys(spark)
        self._pending: Future[list[Fingerprint | None]] | None = None
        self._executor: ThreadPoolExecutor | None = None

    def read_ahead(self) -> None:
        """Start the group read in a background thread: it then overlaps the first partition's compaction instead of
        delaying its validation.

        The background read loads the table from the metadata file of the base snapshot (Iceberg's static table:
        ``spark.read.format("iceberg").load(<metadata.json>)``), not through the catalog: it never touches the
        catalog nor the table instance this thread commits through (Spark's catalog shares one instance, whose
        next use after a commit refreshes through the catalog; on SQLite two threads doing that break, see
        :func:`read_ahead_allowed`). Same snapshot, same files, same rows. If that read fails (e.g. a FileIO only
        the catalog configures), the group is read again through the catalog in the committing thread."""
        if (self.level is ValidationLevel.NONE or self.base_snapshot_id is None or not self.base_metadata_file
                or self._pending is not None):
            return
        try:
            loaded: dict[str, Any] = {}
            if not spark_can_read(self.spark, self._table, [self.base_metadata_file]):
                # S3FileIO & co: Spark loads a metadata.json path through Hadoop, which has no s3:// file system;
                # the same static table loaded with the table's FileIO (never the catalog's shared instance).
                loaded["frame"] = static_table_frame(self.spark, self._table, self.base_metadata_file,
                                                     self.base_snapshot_id)
            # Built here (table loaded, queries analysed); only their execution runs in the background.
            run = partition_fingerprints_query(self.spark, self.base_metadata_file, self.base_snapshot_id,
                                               self._predicates, self.level, **loaded)
        except Exception:  # read through the catalog when first needed instead
            return
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="icecompact-prefetch-group")
        spark = self.spark

        def run_active() -> Any:
            J.activate(spark)  # the background thread's own active session (see jvm.activate)
            return run()

        self._pending = self._executor.submit(run_active)

    def close(self) -> None:
        """Wait for a read-ahead still running (never leave a Spark job behind) and stop the thread."""
        if self._pending is not None:
            try:
                self._pending.result()
            except Exception:  # nobody asked for this value any more
                pass
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def touched(self, table: Any, snapshot_id: int) -> frozenset[Any]:
        sid = int(snapshot_id)
        if sid not in self._touched:
            self._touched[sid] = frozenset(touched_partitions(self.spark, table, sid, partition_keys=self._partition_keys))
        return self._touched[sid]

    def base(self, table: Any, snapshot_id: int, keys: frozenset[Any]) -> Fingerprint | None:
        if (self.level is ValidationLevel.NONE or self.base_snapshot_id is None or self._failed or not keys
                or not keys <= set(self.keys) or len({k.spec_id for k in keys}) != 1):
            return None
        spec_id = next(iter(keys)).spec_id
        sid: int | None = int(snapshot_id)
        for _ in range(self.MAX_STEPS):
            if sid is None:
                return None  # not a descendant of the group's base
            if sid == self.base_snapshot_id:
                break
            if any(t in keys or t.spec_id != spec_id or t.is_unpartitioned for t in self.touched(table, sid)):
                return None
            snapshot = table.snapshot(sid)
            parent = snapshot.parentId() if snapshot is not None else None
            sid = int(parent) if parent is not None else None
        else:
            return None
        values = self._read()
        if values is None:
            return None
        return combine_fingerprints([v for v in (values[k] for k in keys) if v is not None])

    def _read(self) -> dict[Any, Fingerprint | None] | None:
        if self._values is None and not self._failed:
            try:
                if self._pending is not None:
                    try:
                        got = self._pending.result()
                    except Exception:  # a failed read-ahead is read again, in this thread
                        got = self._compute(self.ref)
                else:
                    got = self._compute(self.ref)
                self._values = dict(zip(self.keys, got))
            except Exception:  # each partition then reads its own base rows, where errors surface
                self._failed = True
        return self._values

    def _compute(self, table_ref: str) -> list[Fingerprint | None]:
        # ``partition_fingerprints_query`` is looked up when called (tests replace it in this module).
        return partition_fingerprints_query(self.spark, table_ref, int(self.base_snapshot_id),  # type: ignore[arg-type]
                                            self._predicates, self.level)()


def _validate(spark: Any, table: Any, ref: str, catalog_name: str, key: Any, commits: list[int],
              level: ValidationLevel, base_sequence_number: int | None, expression: Any,
              result: PartitionResult, after_files: Any = None,
              fingerprints: FingerprintCache | None = None, group: GroupRows | None = None,
              own_rows: bool = False, counted: Mapping[int, int] | None = None) -> None:
    """Layer (c): rows equal in every compaction snapshot and its parent; no pre-existing delete still applies.

    ``after_files``: the partition's files at ``commits[-1]`` scanned with applied deletes, when the caller has
    them (``MajorOutcome.after_files``); otherwise they are scanned here. ``fingerprints``: the caller's cache,
    possibly holding a read-ahead of the base snapshot (see run_task). ``group``: the job group's shared state
    (touched partitions of each snapshot, the group's base rows read in one Spark job; see :class:`GroupRows`).
    ``own_rows``: compare only ``key``'s rows even where a commit touched other partitions too (a group rewrite),
    when that is provably the same test, only stricter: the table has a single partition spec, so a rewrite writes
    every row back into the partition it came from and no other partition holds or deletes rows of ``key``.
    ``counted``: ``key``'s live rows at some of ``commits``, exact from metadata (:func:`_counted_from_metadata`),
    taken as the commit's side at ``count`` instead of a read, where the commit touched ``key`` alone."""
    checks: list[dict[str, Any]] = []
    exact = counted if level is ValidationLevel.COUNT and counted else {}
    from_metadata: set[int] = set()
    # A snapshot never changes, so the rows of (snapshot, touched partitions) are read once: our cleanup commit's
    # parent is our rewrite commit, whose rows were just read as the rewrite's "after".
    cache = fingerprints if fingerprints is not None else _fingerprint_cache(spark, ref, level, group)
    rows_at = cache.get

    pairs: list[tuple[int, int, Fingerprint | None, Any, Any]] = []  # (commit, parent, before, keys, predicate)
    # A commit that only removes delete files (our dangling-delete cleanup) can change no value and lose no row:
    # removing a delete can only make rows live again, which raises the count. Count proves it, from metadata when
    # no delete is left, instead of a checksum pass over every column (bench/scale.py: one of ~5 full reads).
    by_count = {sid for sid in commits if _compared_by_count(table, sid, level)}
    count_cache = _fingerprint_cache(spark, ref, ValidationLevel.COUNT) if by_count else None
    for sid in commits:
        parent = int(table.snapshot(int(sid)).parentId())
        if level is ValidationLevel.NONE:
            pairs.append((sid, parent, None, None, None))  # nothing is compared: touched partitions not needed
            continue
        # The rows that can have moved: every partition whose files the commit added or removed. A rewrite
        # filtered on one partition may also select files of other specs (Iceberg projects the filter onto
        # every spec) and write their rows into other partitions of the current spec.
        keys = group.touched(table, sid) if group is not None else frozenset(touched_partitions(spark, table, sid))
        if own_rows and key in keys and _single_spec(table):
            keys = frozenset({key})
        if int(sid) in exact and keys == frozenset({key}):
            from_metadata.add(int(sid))
        predicate = rows_predicate(spark, table, catalog_name, set(keys))
        pairs.append((sid, parent, group.base(table, parent, keys) if group is not None else None, keys, predicate))
    if level is not ValidationLevel.NONE:
        # Every snapshot still to read, in one Spark job (a cleanup's parent is the rewrite: read once).
        cache.get_many([(parent, keys, predicate) for _, parent, before, keys, predicate in pairs if before is None]
                       + [(sid, keys, predicate) for sid, _, _, keys, predicate in pairs
                          if sid not in by_count and int(sid) not in from_metadata])

    for sid, parent, before, keys, predicate in pairs:
        if level is ValidationLevel.NONE:
            after = None
        else:
            if before is None:
                before = rows_at(parent, keys, predicate)
            if int(sid) in from_metadata:
                after = Fingerprint(int(exact[int(sid)]), None)
            elif sid in by_count and count_cache is not None:
                after = count_cache.get(int(sid), keys, predicate)
            else:
                after = rows_at(int(sid), keys, predicate)
        if sid in by_count:
            ok = before is not None and after is not None and before.rows == after.rows
        else:
            ok = before == after
        checks.append({"snapshot_id": sid, "parent_id": int(parent), "before": before and before.to_dict(),
                       "after": after and after.to_dict(), "ok": ok,
                       **({"compared": "rows (it only removed delete files)"} if sid in by_count else {}),
                       **({"after_from": "metadata (exact: record counts less DV / own position-delete counts)"}
                          if int(sid) in from_metadata else {})})
        if not ok:
            result.validation = {"level": level.value, "result": "failed", "checks": checks}
            raise CommitValidationError(
                f"partition {result.label}: rows differ between snapshot {sid} and its parent {parent} "
                f"({before} != {after})"
            )
    if commits and result.kind == CompactionKind.MAJOR.value and base_sequence_number is not None:
        if after_files is None or after_files.snapshot_id != commits[-1] or not after_files.has_applied:
            after_files = scan_partition(spark, table, expression, commits[-1], with_applied=True)
        after_files.refine_position_deletes(spark, table)
        # Deletes committed concurrently (seq > our base) legitimately apply to the rewritten files.
        leftovers = sorted(
            path for path, refs in after_files.applied.items()
            for ref in refs if int(after_files.deletes[ref].dataSequenceNumber()) <= base_sequence_number
        )
        if leftovers:
            result.validation = {"level": level.value, "result": "failed", "checks": checks,
                                 "files_with_deletes": leftovers[:20]}
            raise CommitValidationError(
                f"partition {result.label}: {len(leftovers)} live data file(s) still have a pre-existing delete "
                "applied after MAJOR"
            )
    result.validation = {"level": level.value, "result": "passed" if level is not ValidationLevel.NONE else "skipped",
                         "checks": checks}


def _counted_from_metadata(spark: Any, table: Any, expressions: Mapping[Any, Any], commits: list[int],
                           level: ValidationLevel) -> dict[Any, dict[int, int]]:
    """Each partition's (``expressions``: key -> partition expression) live rows at each of our conversion commits
    where metadata tells them exactly (see :func:`live_rows_from_metadata`): after a MINOR, each data file with
    deletes usually has exactly one, the DV or position-delete file just written, so the commit's side of a
    ``count`` check needs no read of the data (bench/scale.py: ~1 s of a MINOR at ``l``). The files the commit added
    are ours, their positions distinct. Only at ``count`` and on a single-spec table (where the scan selects
    exactly the partition's files)."""
    out: dict[Any, dict[int, int]] = {key: {} for key in expressions}
    if level is not ValidationLevel.COUNT or not _single_spec(table):
        return out
    for sid in commits:
        snapshot = table.snapshot(int(sid))
        if snapshot is None:
            continue
        ours = {delete_ref(d) for d in _iterate(snapshot.addedDeleteFiles(table.io()))}  # once for the group
        for key, expression in expressions.items():
            live = live_rows_from_metadata(scan_partition(spark, table, expression, int(sid), with_applied=True), ours)
            if live is not None:
                out[key][int(sid)] = live
    return out


def _compared_by_count(table: Any, snapshot_id: int, level: ValidationLevel) -> bool:
    """At checksum, a commit that only removes delete files is compared by row count (see _validate)."""
    return level is ValidationLevel.CHECKSUM and _only_removes_deletes(table, snapshot_id)


def _only_removes_deletes(table: Any, snapshot_id: int) -> bool:
    """The snapshot's summary says it removed delete files and added or removed nothing else (Iceberg's snapshot
    summary counts: SnapshotSummary)."""
    snapshot = table.snapshot(int(snapshot_id))
    summary = None if snapshot is None else snapshot.summary()
    if summary is None:
        return False

    def count(key: str) -> int:
        value = summary.get(key)
        return int(str(value)) if value is not None else 0

    removed = count("removed-delete-files") + count("removed-position-delete-files") + count(
        "removed-equality-delete-files") + count("removed-dvs")
    added = (count("added-data-files") + count("deleted-data-files") + count("added-delete-files")
             + count("added-position-delete-files") + count("added-equality-delete-files") + count("added-dvs"))
    return removed > 0 and added == 0


def _single_spec(table: Any) -> bool:
    return int(table.specs().size()) == 1


def own_counts(spark: Any, table: Any, files: PartitionFiles, key: PartitionKey,
               partition_keys: PartitionKeys | None = None) -> dict[str, int]:
    """The before/after counts of ``key``: only the files written under ``key``'s own spec and partition.

    Iceberg projects a partition's filter onto every spec, so on a table whose spec evolved a scan of ``key`` also
    selects the files of an older spec whose coarser partition matches (every file of spec 0's ``region=EU`` under
    each ``region=EU/ts_day=...`` partition of spec 1; an unpartitioned spec's files under every partition).
    Counted under every partition that selects them, the per-partition columns overlapped and did not add up to
    the table. Each file belongs to exactly one (spec, partition): counted there only, the rows add up. With a
    single spec the scan selects exactly ``key``'s files and needs no filtering (nor its py4j round trips)."""
    if table is None or _single_spec(table):
        return files.counts()
    keys = partition_keys or PartitionKeys(spark)
    own = PartitionFiles(files.snapshot_id, has_applied=False)
    own.data = {path: f for path, f in files.data.items() if keys.key_of(table, f) == key}
    own.deletes = {ref: d for ref, d in files.deletes.items() if keys.key_of(table, d) == key}
    return own.counts()


def _own_counts_at(spark: Any, table: Any, expression: Any, key: PartitionKey, snapshot_id: int) -> dict[str, int]:
    """:func:`own_counts` of ``key`` at ``snapshot_id`` (metadata scan)."""
    return own_counts(spark, table, scan_partition(spark, table, expression, snapshot_id, with_applied=False), key)


def _settle_after_counts(spark: Any, table: Any, expression: Any, key: PartitionKey, result: PartitionResult) -> None:
    """The after counts of a settled partition, its own files only. The compaction steps count every file their
    scan selected; on a multi-spec table that includes other specs' files (see :func:`own_counts`), so the partition
    is counted again at its last commit. A partition that committed nothing is as it was."""
    if result.status == NO_OP:
        result.after = dict(result.before)
    elif result.status == COMMITTED and result.commit_snapshot_ids and (not result.after or not _single_spec(table)):
        result.after = _own_counts_at(spark, table, expression, key, int(result.commit_snapshot_ids[-1]))


def _fingerprint_cache(spark: Any, ref: str, level: ValidationLevel,
                       group: GroupRows | None = None) -> FingerprintCache:
    # ``fingerprint``/``snapshot_fingerprints`` are looked up when called (tests replace them in this module).
    def one(snapshot_id: int, predicate: Any) -> Any:
        J.activate(spark)  # also runs in the cache's background thread (see jvm.activate)
        return fingerprint(spark, ref, snapshot_id, predicate, level)

    def many(requests: Any) -> Any:
        J.activate(spark)
        return snapshot_fingerprints(spark, ref, requests, level)

    # A job group's caches share their values (snapshots never change; one table, one level per group).
    shared = group.known_fingerprints if group is not None and group.level is level else None
    return FingerprintCache(one, many, known=shared)


def _settled_as_stale(plan: CompactionPlan, task: CompactionTask, before: Any, base_id: int | None,
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
    if table is not None and not _single_spec(table):
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


def _wait_for_catalog(err: CatalogUnavailableError, since: float | None,
                      progress: Callable[[str], None] | None) -> float | None:
    """Sleep one retry interval while the catalog has been unreachable for less than CATALOG_OUTAGE_WAIT_S; returns
    when the outage started, or ``None`` once waiting longer is pointless (the caller fails)."""
    since = since or time.monotonic()
    if time.monotonic() - since >= CATALOG_OUTAGE_WAIT_S:
        return None
    _emit(progress, f"icecompact: {err}; waiting for the catalog")
    time.sleep(CATALOG_RETRY_INTERVAL_S)
    return since


def _validate_after_outage(err: CatalogUnavailableError, since: float | None,
                           progress: Callable[[str], None] | None, spark: Any, table: Any, ref: str,
                           plan: CompactionPlan, task: CompactionTask, commits: list[int], level: ValidationLevel,
                           base_sequence_number: int | None, expression: Any, result: PartitionResult) -> float | None:
    """Wait for the catalog (up to CATALOG_OUTAGE_WAIT_S), then validate ``commits``; raises CommitValidationError
    when they fail, re-raises the outage when it outlasts the wait. Returns when the outage started."""
    while True:
        since = _wait_for_catalog(err, since, progress)
        if since is None:
            raise err
        try:
            table.refresh()
            _validate(spark, table, ref, plan.table.catalog, task.partition, commits, level, base_sequence_number,
                      expression, result)
            return since
        except CommitValidationError:
            raise
        except Exception as e:  # noqa: BLE001 - still down: wait again; anything else goes to the caller
            again = classify_java_error(e, f"{task.kind.value.upper()} {task.partition.label()}")
            if not isinstance(again, CatalogUnavailableError):
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
    identifier = _spark_identifier(plan)
    unavailable_since: float | None = None
    rewrite_reason = ""
    while True:
        try:
            table = J.load_table(spark, identifier)
            break
        except Exception as e:
            err = classify_java_error(e, f"cannot load {identifier}")
            if isinstance(err, CatalogUnavailableError):
                unavailable_since = _wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    continue
            result.error, result.exit_code, result.status = str(err), err.exit_code, FAILED
            return result
    if task.kind not in (CompactionKind.MAJOR, CompactionKind.MINOR):
        result.status = UNSUPPORTED
        result.reason = f"{UNSUPPORTED_PREFIX}{task.kind.value} compaction is not implemented by this version of the Spark job"
        result.duration_ms = int((time.monotonic() - started) * 1000)
        return result
    if _selective(task):
        compact = functools.partial(_selective_attempt, kind=task.kind.value)
    else:
        compact = _major_attempt
    attempt = 0
    while True:
        attempt += 1
        result.attempts = attempt
        commits: list[int] = []  # filled by the attempt as soon as it has committed anything
        fingerprints = _fingerprint_cache(spark, ref, level, group)
        try:
            table.refresh()
            current = table.currentSnapshot()
            base_id = int(current.snapshotId()) if current is not None else None
            expression = java_partition_expression(spark, table, key)
            # Which deletes apply to which file is not needed here (MAJOR reads it after the rewrite, in _validate;
            # MINOR derives it from metadata by the spec's rules).
            before = scan_partition(spark, table, expression, base_id, with_applied=False)
            if _settled_as_stale(plan, task, before, base_id, result, spark, table):
                break
            _emit(progress, f"icecompact: {task.kind.value.upper()} {key.label()} attempt {attempt}: "
                            f"{result.before['data_files']} data / {result.before['delete_files']} delete files "
                            f"({result.before['equality_delete_files']} equality)")
            if not result.kept_snapshot_ids:  # the reason of the attempt that may make (and keep) a file rewrite
                rewrite_reason = result.reason
            compact(_Attempt(spark, plan, table, ref, key, expression, before, current, level, fingerprints,
                             attempt, prepared, group), result, commits)
            result.status = COMMITTED if commits or result.kept_snapshot_ids else NO_OP
            break
        except CommitValidationError as e:
            result.error, result.error_class, result.exit_code = str(e), type(e).__name__, e.exit_code
            result.status = _undo(spark, table, commits)
            result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
            break
        except Exception as e:  # py4j errors from Iceberg, classified
            err = classify_java_error(e, f"{task.kind.value.upper()} {key.label()}")
            if commits and isinstance(err, CatalogUnavailableError):
                # Committed, then the catalog went away (e.g. during validation's reads): the snapshots are on main,
                # and neither validating nor undoing them can happen until it answers. Validation is read-only, so
                # wait and validate what was committed (kept when it passes, undone when it fails); the rest of
                # the attempt (a cleanup, a conversion) is left to the next run, which plans from what is there.
                # Found by the soak: a PostgreSQL restart between commit and check left an unvalidated snapshot.
                kept_checks = [c for c in result.validation.get("checks", [])
                               if c.get("snapshot_id") in result.kept_snapshot_ids]
                try:
                    unavailable_since = _validate_after_outage(
                        err, unavailable_since, progress, spark, table, ref, plan, task, commits, level,
                        None if _selective(task) else int(current.sequenceNumber()), expression, result)
                except CommitValidationError as failed:
                    result.error, result.error_class, result.exit_code = str(failed), type(failed).__name__, failed.exit_code
                    result.status = _undo(spark, table, commits)
                    result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
                    break
                except Exception as again:  # noqa: BLE001 - classified below as the original failure would be
                    err = classify_java_error(again, f"{task.kind.value.upper()} {key.label()}")
                else:
                    result.status = COMMITTED
                    result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
                    # The revalidation checked this attempt's commits; a rewrite kept before it was checked then.
                    result.validation["checks"] = kept_checks + list(result.validation.get("checks", []))
                    note = "the catalog was unavailable after the commit; validated once it answered"
                    result.reason = f"{result.reason}; {note}" if result.reason else note
                    break
            if commits:  # committed, then something failed (e.g. our own check): never keep it silently
                result.error, result.error_class, result.exit_code = str(err), type(err).__name__, err.exit_code
                result.status = _undo(spark, table, commits)
                result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
                break
            if isinstance(err, CatalogUnavailableError):
                # Nothing of ours is committed (checked above): the attempt can start over once the catalog answers.
                unavailable_since = _wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    attempt -= 1  # an outage is not a conflict: it does not use up the retries
                    continue
                result.status = FAILED
            elif isinstance(err, CommitConflictError):
                result.conflicts.append({"attempt": attempt, "error_class": getattr(err, "java_class", type(err).__name__),
                                         "message": str(err)[:2000]})
                if attempt <= max_retries:
                    _emit(progress, f"icecompact: conflict on {key.label()} (attempt {attempt}), retrying: {err}")
                    sleep_backoff(attempt)
                    continue
                result.status = CONFLICT
            elif isinstance(err, UnsupportedTableError):
                result.status, result.reason = UNSUPPORTED, f"{UNSUPPORTED_PREFIX}{err}"
            else:
                result.status = FAILED
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
            _settle_after_counts(spark, table, expression, key, result)
        except Exception:  # noqa: BLE001 - counts are a report; the committed, validated work stands without them
            pass
    result.duration_ms = int((time.monotonic() - started) * 1000)
    return result


@dataclass
class _Attempt:
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


def _take_outcome(result: PartitionResult, commits: list[int], outcome: Any) -> None:
    """Copy a Major/MinorOutcome into the result; ``commits`` first, so that a failure afterwards is undone."""
    commits.extend(sid for sid in outcome.commit_snapshot_ids if sid not in commits)
    result.commit_snapshot_ids = list(commits)
    for name in ("rewritten_data_files", "added_data_files", "removed_delete_files", "added_delete_files",
                 "converted_rows"):
        if hasattr(outcome, name):
            setattr(result, name, getattr(outcome, name))
    result.after = outcome.after


def _major_attempt(a: _Attempt, result: PartitionResult, commits: list[int]) -> None:
    spark, table, key = a.spark, a.table, a.key
    covers_whole_table = key.is_unpartitioned and len(list(table.specs().keySet())) == 1
    read_ahead = None
    if (a.level is not ValidationLevel.NONE and a.base_id is not None and int(table.specs().size()) == 1
            and read_ahead_allowed(spark, a.plan.table.catalog)):
        # (The base rows of ``key`` come from the group's read when ``key`` is one of the group's partitions.)
        # Read-ahead for validation (c): with a single spec, the rewrite filtered on ``key`` can only touch
        # ``key`` (the filter's projection onto the one spec is exactly that partition), so the base rows
        # of ``key`` are read while Iceberg's action runs, and the rewrite snapshot's rows while our cleanup
        # works on metadata. _validate still derives the touched partitions from each commit and reads
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
    )
    _take_outcome(result, commits, outcome)
    _validate(spark, table, a.ref, a.plan.table.catalog, key, commits, a.level, a.base_seq, a.expression, result,
              after_files=outcome.after_files, fingerprints=a.fingerprints, group=a.group)


def _selective(task: CompactionTask) -> bool:
    """A MINOR, or a MAJOR that is not a full rewrite: Iceberg's rewrite of the files the kind selects (fragments;
    small and delete-heavy segments), then the conversion of the remaining deletes (compaction.spark.minor)."""
    return task.kind is CompactionKind.MINOR or (task.kind is CompactionKind.MAJOR and not task.full_rewrite)


def _selective_attempt(a: _Attempt, result: PartitionResult, commits: list[int], *, kind: str) -> None:
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
            layout=layout_for(a.plan.policy, kind))
        if rewritten or added:
            sid = find_tagged_snapshot(table, a.base_id, tag)
            if sid is None:
                raise CommitConflictError("rewrite committed but its snapshot was not found on main")
            commits.append(sid)
            result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
            _validate(spark, table, a.ref, a.plan.table.catalog, key, [sid], a.level, None, a.expression, result,
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
    )
    commits.extend(sid for sid in outcome.commit_snapshot_ids if sid not in commits)
    result.commit_snapshot_ids = result.kept_snapshot_ids + list(commits)
    result.removed_delete_files = outcome.removed_delete_files
    result.added_delete_files = outcome.added_delete_files
    result.converted_rows = outcome.converted_rows
    result.after = outcome.after
    _validate(spark, table, a.ref, a.plan.table.catalog, key, commits, a.level, None, a.expression, result,
              fingerprints=a.fingerprints, group=a.group,
              counted=_counted_from_metadata(spark, table, {key: a.expression}, commits, a.level)[key])
    result.validation["checks"] = checks + list(result.validation.get("checks", []))


def _undo(spark: Any, table: Any, commits: list[int]) -> str:
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


#: How many times a job group's selective file rewrite (one Iceberg action) is tried when a writer's position delete
#: or DV on a replaced file made Iceberg refuse it, before its partitions go one by one.
GROUP_REWRITE_ROUNDS_DEFAULT = 2

#: How many times a job group's MINOR partitions are read and committed together before the partitions still left
#: (stale positions, a conflicting commit) go one by one: a second round costs one Spark job for all of them.
MINOR_GROUP_ROUNDS_DEFAULT = 2

#: Commit the MAJOR partitions of a job group together (one Iceberg rewrite action), and its MINOR partitions
#: together (one RowDelta), rather than one commit per partition.
GROUP_COMMIT_DEFAULT = True


def _spark_identifier(plan: CompactionPlan) -> str:
    return ".".join((plan.table.catalog, *plan.table.namespace, plan.table.name))


def _current_table(spark: Any, plan: CompactionPlan) -> tuple[Any, Any]:
    """The plan's table, refreshed, and its current snapshot (None for an empty table)."""
    table = J.load_table(spark, _spark_identifier(plan))
    table.refresh()
    return table, table.currentSnapshot()


def _any_of(spark: Any, expressions: list[Any]) -> Any:
    combined = expressions[0]
    for e in expressions[1:]:
        combined = getattr(J.jvm(spark).org.apache.iceberg.expressions.Expressions, "or")(combined, e)
    return combined


def _run_major_group(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
                     progress: Callable[[str], None] | None, group: GroupRows | None,
                     selective: str | None = None) -> tuple[dict[Any, PartitionResult], dict[Any, list[dict[str, Any]]]]:
    """The group's MAJOR partitions in one Iceberg rewrite action over all of them, like the bare CALL: its file
    groups are rewritten concurrently, it commits once (one snapshot for the job group, so a conflict in one
    partition costs only this group's work), then one dangling-delete cleanup commit, then validation (c) of every
    partition against these commits, exactly as after a per-partition MAJOR.

    Returns (settled results by partition key, conflicts by key). A partition missing from the results was not settled:
    the group action failed before committing anything (a conflict with a concurrent writer, a job failure), or
    fewer than two partitions were left to compact. Those partitions then run one by one through :func:`run_task`,
    which retries and classifies per partition (the conflicts seen here are added to their results). Once the
    group committed, a failure of the cleanup or of any partition's validation undoes both commits for every
    partition of the group (rolled back while current, otherwise needs attention): never kept silently.

    ``selective`` (``"minor"`` or ``"major"``): the first half of the group's selective tasks of that kind instead:
    one rewrite of the files the kind selects, no cleanup (the conversion that follows removes what no longer
    applies), validated the same way. A partition whose result here is committed or no_op still has its
    conversion to run (run_group)."""
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
        majors = [t for t in tasks if _selective(t) and t.kind.value == selective]
        if any(t.partition.is_unpartitioned for t in majors):
            return settled, {}
    if len(majors) < 2:
        return settled, {}
    started, ref = time.monotonic(), quoted(plan.table)
    try:
        table, current = _current_table(spark, plan)
        if current is None:
            return settled, {}
        base_id, base_seq = int(current.snapshotId()), int(current.sequenceNumber())
        if selective == "minor" and _nothing_to_merge(spark, plan, table, majors):
            # Iceberg's planner would keep no file group: no action, and none of the scans and checks around it.
            # The conversion that follows scans, decides (stale plans included) and validates each partition.
            _emit(progress, f"icecompact: MINOR file rewrite of {len(majors)} partitions: nothing to merge (fewer "
                            "than two fragment files and no fully deleted file in each)")
            for task in majors:
                key = task.partition
                settled[key] = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value,
                                               status=NO_OP, attempts=1, base_snapshot_id=base_id)
            return settled, {}
        active: list[tuple[CompactionTask, Any, Any, PartitionResult]] = []
        for task in majors:
            key = task.partition
            result = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value, attempts=1)
            expression = java_partition_expression(spark, table, key)
            before = scan_partition(spark, table, expression, base_id, with_applied=False)
            if _settled_as_stale(plan, task, before, base_id, result, spark, table):
                result.duration_ms = int((time.monotonic() - started) * 1000)
                settled[key] = result
                continue
            active.append((task, expression, before, result))
    except Exception as e:  # each partition loads, scans and reports on its own
        _emit(progress, f"icecompact: MAJOR group setup failed, running per partition: {classify_java_error(e, 'setup')}")
        return {}, {}
    if len(active) < 2:
        return settled, {}
    files = sum(int(b.counts()["data_files"]) for _, _, b, _ in active)
    deletes = sum(int(b.counts()["delete_files"]) for _, _, b, _ in active)
    what = "MAJOR" if selective is None else f"{selective.upper()} file rewrite of"
    _emit(progress, f"icecompact: {what} {len(active)} partitions in one Iceberg action: {files} data / "
                    f"{deletes} delete files")
    expression = _any_of(spark, [e for _, e, _, _ in active])
    tag = new_tag()
    action_started = time.monotonic()
    try:
        rewritten, added, _ = rewrite_partition(
            spark, table, expression, plan_id=plan.plan_id, tag=tag,
            target_file_size_bytes=plan.policy.target_file_size_bytes,
            selection=None if selective is None else selection_for(plan.policy, selective),
            layout=layout_for(plan.policy, selective or "major"))
        commits: list[int] = []
        if rewritten or added:
            sid = find_tagged_snapshot(table, base_id, tag)
            if sid is None:
                raise CommitConflictError("rewrite committed but its snapshot was not found on main")
            commits.append(sid)
        _emit(progress, f"icecompact: {what} {len(active)} partitions: {rewritten} data files rewritten into "
                        f"{added} in {time.monotonic() - action_started:.1f} s")
    except Exception as e:
        err = classify_java_error(e, f"MAJOR of {len(active)} partitions")
        _emit(progress, f"icecompact: MAJOR group action failed, running per partition: {err}")
        return settled, _group_conflicts(err, [t.partition for t, _, _, _ in active])
    cleaned = selective is not None  # a selective rewrite leaves the dangling deletes to its conversion step

    def settle(fingerprints: FingerprintCache) -> None:
        nonlocal cleaned
        if not cleaned:
            remove_dangling_deletes(spark, table, expression, plan_id=plan.plan_id, tag=new_tag(),
                                    covers_whole_table=False, committed=commits)
            cleaned = True
        table.refresh()
        last = commits[-1] if commits else base_id
        _read_own_rows(spark, table, plan, level, fingerprints, commits, [t.partition for t, _, _, _ in active])
        keys = PartitionKeys(spark)
        for task, part_expression, before, result in active:
            after = scan_partition(spark, table, part_expression, last, with_applied=True)
            own = None if _single_spec(table) else functools.partial(_is_own, keys, table, task.partition)
            _group_outcome(result, before, after, commits, own_counts(spark, table, after, task.partition, keys), own)
            _validate(spark, table, ref, plan.table.catalog, task.partition, result.commit_snapshot_ids, level,
                      base_seq if selective is None else None, part_expression, result, after_files=after,
                      fingerprints=fingerprints, group=group, own_rows=True)
            result.status = COMMITTED if result.commit_snapshot_ids else NO_OP

    def timed_settle(fingerprints: FingerprintCache) -> None:
        settle_started = time.monotonic()
        settle(fingerprints)
        _emit(progress, f"icecompact: {what} {len(active)} partitions: "
                        f"{'' if selective else 'dangling-delete cleanup and '}validation ({level.value}) in "
                        f"{time.monotonic() - settle_started:.1f} s")

    _check_group_commit(spark, table, ref, level, commits, [r for _, _, _, r in active],
                        f"MAJOR of {len(active)} partitions", progress, timed_settle, group)
    _settle_group(settled, [(t.partition, r) for t, _, _, r in active], started)
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


def _group_conflicts(err: CompactionError, keys: list[Any]) -> dict[Any, list[dict[str, Any]]]:
    """A failed group commit, as a conflict of each of its partitions (only a conflict is one: other errors are met
    again, and reported, by the partition's own attempt)."""
    if not isinstance(err, CommitConflictError):
        return {}
    entry = {"attempt": 0, "error_class": getattr(err, "java_class", type(err).__name__),
             "message": f"group commit: {err}"[:2000]}
    return {k: [dict(entry)] for k in keys}


def _run_minor_group(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
                     progress: Callable[[str], None] | None, group: GroupRows | None,
                     prepared: dict[Any, Any]) -> tuple[dict[Any, PartitionResult], dict[Any, list[dict[str, Any]]]]:
    """The group's MINOR partitions, whose positions :func:`_prepare_minor_group` read in one Spark job, committed
    in one RowDelta (:func:`compaction.spark.minor.commit_changes`), then validated partition by partition as after
    a per-partition MINOR, every partition's rows at the commit read in one Spark job. Same contract as
    :func:`_run_major_group`: partitions left out of the results (the commit failed before landing, their prepared
    positions are stale, fewer than two left) run one by one through :func:`run_task`; once committed, any failure
    undoes the commit for every partition of the group."""
    from compaction.spark.minor import PartitionChange, commit_changes

    settled: dict[Any, PartitionResult] = {}
    minors = [t for t in tasks if _selective(t)]
    if len(minors) < 2 or any(t.partition not in prepared for t in minors):
        return settled, {}
    started, ref = time.monotonic(), quoted(plan.table)
    active: list[tuple[CompactionTask, Any, PartitionResult]] = []
    try:
        table, current = _current_table(spark, plan)
        if current is None:
            return settled, {}
        base_id = int(current.snapshotId())
        for task in minors:
            key, ready = task.partition, prepared[task.partition]
            result = PartitionResult(partition_key_to_dict(key), key.label(), task.kind.value, attempts=1)
            expression = java_partition_expression(spark, table, key)
            # The group read scanned the partition at its own base: no new scan when nothing was committed since.
            before = (ready.files if ready.snapshot_id == base_id
                      else scan_partition(spark, table, expression, base_id, with_applied=False))
            if _settled_as_stale(plan, task, before, base_id, result, spark, table):
                result.duration_ms = int((time.monotonic() - started) * 1000)
                settled[key] = result
                continue
            if not ready.still_valid_for(before):
                continue  # changed since the group read: this partition decides and reads again on its own
            change = PartitionChange(key, expression, before, ready.work, ready.positions, ready.converted_rows)
            if not change.busy:
                result.status, result.after = NO_OP, result.before
                settled[key] = result
                continue
            active.append((task, change, result))
    except Exception as e:  # each partition loads, scans and reports on its own
        _emit(progress, f"icecompact: MINOR group setup failed, running per partition: {classify_java_error(e, 'setup')}")
        return {}, {}
    if len(active) < 2:
        return {k: r for k, r in settled.items() if r.status == SKIPPED}, {}
    _emit(progress, f"icecompact: MINOR {len(active)} partitions in one commit: "
                    f"{sum(len(c.work.equality) for _, c, _ in active)} equality / "
                    f"{sum(len(c.work.positional) for _, c, _ in active)} position delete files to replace")
    commits: list[int] = []
    what = f"MINOR of {len(active)} partitions"
    outcomes: list[Any] = []
    try:
        outcomes = commit_changes(spark, table, [c for _, c, _ in active],
                                  _any_of(spark, [c.expression for _, c, _ in active]),
                                  base_id=base_id, plan_id=plan.plan_id, tag=new_tag(), committed=commits)
    except Exception as e:
        err = e if isinstance(e, CompactionError) else classify_java_error(e, what)
        if not commits:  # nothing landed: each partition tries on its own
            _emit(progress, f"icecompact: MINOR group commit failed, running per partition: {err}")
            return {k: r for k, r in settled.items() if r.status == SKIPPED}, _group_conflicts(
                err, [t.partition for t, _, _ in active])
        # Committed, then something failed: never keep it silently.
        _undo_group(spark, table, commits, [r for _, _, r in active], err)
        _settle_group(settled, [(t.partition, r) for t, _, r in active], started)
        return settled, {}

    def check(fingerprints: FingerprintCache) -> None:
        counted = _counted_from_metadata(spark, table, {t.partition: c.expression for t, c, _ in active}, commits,
                                         level)
        _read_own_rows(spark, table, plan, level, fingerprints, commits, [t.partition for t, _, _ in active],
                       counted)
        for (task, change, result), outcome in zip(active, outcomes):
            _take_outcome(result, [], outcome)
            if not _single_spec(table) and result.commit_snapshot_ids:  # its own files only (see own_counts)
                result.after = _own_counts_at(spark, table, change.expression, task.partition,
                                              int(result.commit_snapshot_ids[-1]))
            _validate(spark, table, ref, plan.table.catalog, task.partition, result.commit_snapshot_ids, level,
                      None, change.expression, result, fingerprints=fingerprints, group=group, own_rows=True,
                      counted=counted[task.partition])
            result.status = COMMITTED if result.commit_snapshot_ids else NO_OP

    _check_group_commit(spark, table, ref, level, commits, [r for _, _, r in active], what, progress, check, group)
    _settle_group(settled, [(t.partition, r) for t, _, r in active], started)
    return settled, {}


def _read_own_rows(spark: Any, table: Any, plan: CompactionPlan, level: ValidationLevel,
                   fingerprints: FingerprintCache, commits: list[int], keys: list[Any],
                   counted: Mapping[Any, Mapping[int, int]] | None = None) -> None:
    """Each partition's rows at each commit of a group (compared one partition at a time, see _validate's
    ``own_rows``), all in one Spark job; none where ``counted`` (key -> commit -> rows) has them from metadata."""
    if commits and level is not ValidationLevel.NONE and _single_spec(table):
        # Not a commit that only removes delete files at checksum: _validate compares its rows by count.
        read = [sid for sid in commits if not _compared_by_count(table, sid, level)]
        known = counted or {}
        fingerprints.get_many([(sid, frozenset({k}), rows_predicate(spark, table, plan.table.catalog, {k}))
                               for sid in read for k in keys if int(sid) not in known.get(k, {})])


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
        fingerprints = _fingerprint_cache(spark, ref, level, group)
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
            err = e if isinstance(e, CompactionError) else classify_java_error(e, what)
            if commits and isinstance(err, CatalogUnavailableError):
                unavailable_since = _wait_for_catalog(err, unavailable_since, progress)
                if unavailable_since is not None:
                    continue
            _undo_group(spark, table, commits, results, err)
            return
        finally:
            fingerprints.close()


def _undo_group(spark: Any, table: Any, commits: list[int], results: list[PartitionResult],
                err: CompactionError) -> None:
    """A group commit landed, then a check failed: undo it, and every partition of the group shares the outcome."""
    status = _undo(spark, table, commits)
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
    keys = [t.partition for t in tasks if _selective(t) and not t.partition.is_unpartitioned]
    if len(keys) < 2:
        return {}
    from compaction.spark.minor import prepare_group

    identifier = _spark_identifier(plan)
    try:
        table = J.load_table(spark, identifier)
        keyed = [(key, java_partition_expression(spark, table, key)) for key in keys]
        prepared = prepare_group(spark, table, quoted(plan.table), keyed,
                                 rows_predicate(spark, table, plan.table.catalog, set(keys)))
        _emit(progress, f"icecompact: MINOR read {len(prepared)} partitions in one Spark job")
        return prepared
    except Exception as e:  # each partition retries on its own and reports its own error
        _emit(progress, f"icecompact: MINOR group read failed, reading per partition: {classify_java_error(e, 'prepare')}")
        return {}


def _group_rows(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask],
                level: ValidationLevel) -> GroupRows | None:
    """Validation state shared by the group's partitions, based at the table's current snapshot (None at level
    none, or when the table cannot be loaded: each partition then reports that itself)."""
    if level is ValidationLevel.NONE:
        return None
    keys = [t.partition for t in tasks if t.kind in (CompactionKind.MAJOR, CompactionKind.MINOR)]
    identifier = _spark_identifier(plan)
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


def _run_tasks(spark: Any, plan: CompactionPlan, tasks: list[CompactionTask], *, level: ValidationLevel,
               max_retries: int, progress: Callable[[str], None] | None, group_commit: bool,
               checkpoint: Callable[[list[PartitionResult]], None] | None) -> list[PartitionResult]:
    """Every task, in order: the MAJOR and selective rewrites together, the MINOR conversions together, then each
    partition not settled so far on its own (:func:`run_task`). ``checkpoint`` receives what is committed and
    validated so far whenever that grows."""
    group = _group_rows(spark, plan, tasks, level)
    settled: dict[Any, PartitionResult] = {}
    rewrites: dict[Any, PartitionResult] = {}  # selective tasks whose file rewrite is done and validated
    reported: list[PartitionResult] = []

    def save_progress() -> None:
        if checkpoint is None:
            return
        parts = {p.label: p for p in reported}
        for key, part in settled.items():
            parts.setdefault(key.label(), part)
        for key, part in rewrites.items():
            if key.label() not in parts and part.commit_snapshot_ids:  # a rewrite with nothing to merge is no outcome
                parts[key.label()] = dataclasses.replace(
                    part, reason="file rewrite committed and validated; the job ended before the rest of the work")
        checkpoint(list(parts.values()))

    announced: set[Any] = set()

    def announce_final() -> None:
        """One progress line per partition, printed once, when its outcome is final (see :func:`final_line`): a
        selective partition's file rewrite is not final until its conversion has run."""
        for key, part in settled.items():
            if key not in announced:
                announced.add(key)
                _emit(progress, final_line(part))

    try:
        conflicts: dict[Any, list[dict[str, Any]]] = {}
        if group_commit:
            done, seen = _run_major_group(spark, plan, tasks, level=level, progress=progress, group=group)
            settled.update(done)
            conflicts.update(seen)
            for kind in ("minor", "major"):
                # Not the tasks the full rewrite settled (an unpartitioned spec's full MAJOR covers every MAJOR).
                candidates = [t for t in tasks if t.partition not in settled]
                for _ in range(GROUP_REWRITE_ROUNDS_DEFAULT):
                    done, seen = _run_major_group(spark, plan, candidates, level=level, progress=progress,
                                                  group=group, selective=kind)
                    for key, part in done.items():
                        (rewrites if part.status in (COMMITTED, NO_OP) else settled)[key] = part
                    _add_conflicts(conflicts, seen)
                    # A writer's DELETE / MERGE added a position delete or DV to a file the rewrite replaces
                    # (Iceberg refuses the commit): plan the rewrite again from the new snapshot, as a group.
                    candidates = [t for t in candidates if t.partition in seen]
                    if not candidates:
                        break
            announce_final()
            save_progress()
        pending = [t for t in tasks if t.partition not in settled]
        if group_commit:
            # The group conversion is only the second half of a selective task: a partition whose file rewrite did
            # not run as a group (it conflicted again, or was alone of its kind) does both halves on its own
            # (run_task), or its fragments and delete-heavy files would stay while it is reported compacted.
            pending = [t for t in pending if not _selective(t) or t.partition in rewrites]
        prepared = _prepare_minor_group(spark, plan, pending, progress)
        for group_round in range(MINOR_GROUP_ROUNDS_DEFAULT if group_commit else 0):
            done, seen = _run_minor_group(spark, plan, pending, level=level, progress=progress, group=group,
                                          prepared=prepared)
            for key, part in done.items():
                if key in conflicts:  # the group commit of the round before conflicted: this is its retry
                    part.conflicts = conflicts[key] + part.conflicts
                    part.attempts += len(conflicts.pop(key))
            settled.update({k: combine_rewrite_and_conversion(rewrites.get(k), r) for k, r in done.items()})
            _add_conflicts(conflicts, seen)
            announce_final()
            save_progress()
            # Left out although the group read covered them: a writer's position delete or DV since that read made
            # their positions stale, or the group commit conflicted before landing. Read them again as a group (one
            # Spark job) rather than one partition at a time.
            left = [t for t in pending if t.partition not in settled and t.partition in prepared]
            if group_round + 1 == MINOR_GROUP_ROUNDS_DEFAULT or len(left) < 2:
                break
            _emit(progress, f"icecompact: MINOR {len(left)} partitions changed since the group read: reading again")
            pending = left
            prepared = {**prepared, **_prepare_minor_group(spark, plan, pending, progress)}
        for task in tasks:
            if task.partition in settled:
                reported.append(settled[task.partition])
                continue
            part = run_task(spark, plan.table.catalog, plan, task, level=level, max_retries=max_retries,
                            progress=progress, prepared=prepared.get(task.partition), group=group)
            if task.partition in conflicts:
                part.conflicts = conflicts[task.partition] + part.conflicts
                part.attempts += len(conflicts[task.partition])
            settled[task.partition] = combine_rewrite_and_conversion(rewrites.get(task.partition), part)
            reported.append(settled[task.partition])
            announce_final()
            save_progress()
    finally:
        if group is not None:
            group.close()
    return reported


def error_result(plan_id: str, group_id: int, table: str, error: CompactionError) -> GroupResult:
    return GroupResult(plan_id, group_id, table, status="failed", error=str(error), exit_code=error.exit_code)
