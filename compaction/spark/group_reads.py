"""What a job group reads to validate its commits: partition predicates (built once per process), the group's
rows at its base snapshot read in one Spark job (:class:`GroupRows`), the checks of a commit against its parent at the
chosen level (:func:`validate`), and the per-partition counts from metadata that decide when reading is needed."""

from __future__ import annotations

import collections
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Mapping

from compaction.core.errors import CommitValidationError
from compaction.core.model import PartitionKey
from compaction.core.plan import CompactionKind, CompactionPlan
from compaction.core.results import (
    COMMITTED,
    NO_OP,
    PartitionResult,
)
from compaction.spark import jvm as J
from compaction.spark.compat import snapshot_changes
from compaction.spark.expressions import spark_partition_predicate
from compaction.spark.file_io_reads import spark_can_read, static_table_frame
from compaction.spark.partition_files import (
    PartitionFiles,
    PartitionKeys,
    _iterate,
    delete_ref,
    live_rows_from_metadata,
    scan_partition,
    scans_at,
    touched_partitions,
)
from compaction.spark.validation import (
    FingerprintCache,
    ValidationLevel,
    Fingerprint,
    combine_fingerprints,
    fingerprint,
    partition_fingerprints_query,
    read_ahead_allowed,
    snapshot_fingerprints,
)


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
        #: (snapshot id, partition keys) -> fingerprint, shared by the group's checks (see fingerprint_cache).
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


def _touched(spark: Any, table: Any, snapshot_id: int, group: GroupRows | None) -> frozenset[Any]:
    """The partitions a commit touched (the group's cached answer where there is a group)."""
    return group.touched(table, snapshot_id) if group is not None else frozenset(
        touched_partitions(spark, table, snapshot_id))


def validate(spark: Any, table: Any, ref: str, catalog_name: str, key: Any, commits: list[int],
              level: ValidationLevel, base_sequence_number: int | None, expression: Any,
              result: PartitionResult, after_files: Any = None,
              fingerprints: FingerprintCache | None = None, group: GroupRows | None = None,
              own_rows: bool = False, counted: Mapping[int, int] | None = None, collapse: bool = False) -> None:
    """Layer (c): rows equal in every compaction snapshot and its parent; no pre-existing delete still applies.

    ``after_files``: the partition's files at ``commits[-1]`` scanned with applied deletes, when the caller has
    them (``MajorOutcome.after_files``); otherwise they are scanned here. ``fingerprints``: the caller's cache,
    possibly holding a read-ahead of the base snapshot (see run_task). ``group``: the job group's shared state
    (touched partitions of each snapshot, the group's base rows read in one Spark job; see :class:`GroupRows`).
    ``own_rows``: compare only ``key``'s rows even where a commit touched other partitions too (a group rewrite),
    when that is provably the same test, only stricter: the table has a single partition spec, so a rewrite writes
    every row back into the partition it came from and no other partition holds or deletes rows of ``key``.
    ``counted``: ``key``'s live rows at some of ``commits``, exact from metadata (:func:`counted_from_metadata`),
    taken as the commit's side at ``count`` instead of a read, where the commit touched ``key`` alone.
    ``collapse``: commits of ours directly on top of each other (no other commit between them) are compared as one
    step, the last one's rows against the first one's parent (:func:`own_steps`): a fragment merge and the
    conversion committed right after it are checked once, without reading the rows in between."""
    checks: list[dict[str, Any]] = []
    exact = counted if level is ValidationLevel.COUNT and counted else {}
    from_metadata: set[int] = set()
    # A snapshot never changes, so the rows of (snapshot, touched partitions) are read once: our cleanup commit's
    # parent is our rewrite commit, whose rows were just read as the rewrite's "after".
    cache = fingerprints if fingerprints is not None else fingerprint_cache(spark, ref, level, group)
    rows_at = cache.get

    pairs: list[tuple[int, int, Fingerprint | None, Any, Any]] = []  # (commit, parent, before, keys, predicate)
    # A commit that only removes delete files (our dangling-delete cleanup) can change no value and lose no row:
    # removing a delete can only make rows live again, which raises the count. Count proves it, from metadata when
    # no delete is left, instead of a checksum pass over every column (bench/scale.py: one of ~5 full reads).
    steps = own_steps(table, commits, collapse)
    runs = {sid: run for sid, _, run in steps}
    by_count = {sid for sid, _, run in steps if all(compared_by_count(table, s, level) for s in run)}
    count_cache = fingerprint_cache(spark, ref, ValidationLevel.COUNT) if by_count else None
    for sid, parent, run in steps:
        if level is ValidationLevel.NONE:
            pairs.append((sid, parent, None, None, None))  # nothing is compared: touched partitions not needed
            continue
        # The rows that can have moved: every partition whose files the commit added or removed. A rewrite
        # filtered on one partition may also select files of other specs (Iceberg projects the filter onto
        # every spec) and write their rows into other partitions of the current spec.
        keys = frozenset().union(*(_touched(spark, table, s, group) for s in run))
        if own_rows and key in keys and single_spec(table):
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
                       **({"commits": list(runs[sid])} if len(runs[sid]) > 1 else {}),
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


def own_steps(table: Any, commits: list[int], collapse: bool) -> list[tuple[int, int, tuple[int, ...]]]:
    """The steps :func:`validate` compares: (last commit, the parent of the step's first commit, the step's commits).
    One step per commit; with ``collapse``, a commit whose parent is the commit before it in ``commits`` joins that
    commit's step (nothing but our own commits happened in between, so the rows after the last one must equal the
    rows before the first one)."""
    steps: list[tuple[int, int, tuple[int, ...]]] = []
    for sid in commits:
        parent = int(table.snapshot(int(sid)).parentId())
        if collapse and steps and steps[-1][0] == parent:
            _, first_parent, run = steps[-1]
            steps[-1] = (int(sid), first_parent, (*run, int(sid)))
        else:
            steps.append((int(sid), parent, (int(sid),)))
    return steps


def counted_from_metadata(spark: Any, table: Any, expressions: Mapping[Any, Any], commits: list[int],
                           level: ValidationLevel) -> dict[Any, dict[int, int]]:
    """Each partition's (``expressions``: key -> partition expression) live rows at each of our conversion commits
    where metadata tells them exactly (see :func:`live_rows_from_metadata`): after a MINOR, each data file with
    deletes usually has exactly one, the DV or position-delete file just written, so the commit's side of a
    ``count`` check needs no read of the data (bench/scale.py: ~1 s of a MINOR at ``l``). The files the commit added
    are ours, their positions distinct. Only at ``count`` and on a single-spec table (where the scan selects
    exactly the partition's files)."""
    out: dict[Any, dict[int, int]] = {key: {} for key in expressions}
    if level is not ValidationLevel.COUNT or not single_spec(table):
        return out
    for sid in commits:
        snapshot = table.snapshot(int(sid))
        if snapshot is None:
            continue
        added = snapshot_changes(table, snapshot).addedDeleteFiles()
        ours = {delete_ref(d) for d in _iterate(added)}  # once for the group
        for key, scan in scans_at(spark, table, int(sid), list(expressions.items())).items():
            live = live_rows_from_metadata(scan.result(), ours)
            if live is not None:
                out[key][int(sid)] = live
    return out


def compared_by_count(table: Any, snapshot_id: int, level: ValidationLevel) -> bool:
    """At checksum, a commit that only removes delete files is compared by row count (see validate)."""
    return level is ValidationLevel.CHECKSUM and only_removes_deletes(table, snapshot_id)


def only_removes_deletes(table: Any, snapshot_id: int) -> bool:
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


def single_spec(table: Any) -> bool:
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
    if table is None or single_spec(table):
        return files.counts()
    keys = partition_keys or PartitionKeys(spark)
    own = PartitionFiles(files.snapshot_id, has_applied=False)
    own.data = {path: f for path, f in files.data.items() if keys.key_of(table, f) == key}
    own.deletes = {ref: d for ref, d in files.deletes.items() if keys.key_of(table, d) == key}
    return own.counts()


def own_counts_at(spark: Any, table: Any, expression: Any, key: PartitionKey, snapshot_id: int) -> dict[str, int]:
    """:func:`own_counts` of ``key`` at ``snapshot_id`` (metadata scan)."""
    return own_counts(spark, table, scan_partition(spark, table, expression, snapshot_id, with_applied=False), key)


def settle_after_counts(spark: Any, table: Any, expression: Any, key: PartitionKey, result: PartitionResult) -> None:
    """The after counts of a settled partition, its own files only. The compaction steps count every file their
    scan selected; on a multi-spec table that includes other specs' files (see :func:`own_counts`), so the partition
    is counted again at its last commit. A partition that committed nothing is as it was."""
    if result.status == NO_OP:
        result.after = dict(result.before)
    elif result.status == COMMITTED and result.commit_snapshot_ids and (not result.after or not single_spec(table)):
        result.after = own_counts_at(spark, table, expression, key, int(result.commit_snapshot_ids[-1]))


def fingerprint_cache(spark: Any, ref: str, level: ValidationLevel,
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


def read_rows_before(spark: Any, table: Any, catalog_name: str, fingerprints: FingerprintCache, commit_id: int,
                     keys: list[Any], group: GroupRows | None) -> None:
    """Each of ``keys``' own rows at the parent of our commit ``commit_id``, in one Spark job (none that ``group``'s
    base read gives): the side before a selective rewrite that the check of the conversion committed on top of it
    compares (validate's ``collapse``), read while the conversion's positions are. Only on a single-spec table,
    where a partition's own rows are what validate compares."""
    if not keys or not single_spec(table):
        return
    snapshot = table.snapshot(int(commit_id))
    parent = snapshot.parentId() if snapshot is not None else None
    if parent is None:
        return
    fingerprints.get_many([
        (int(parent), frozenset({k}), rows_predicate(spark, table, catalog_name, {k})) for k in keys
        if group is None or group.base(table, int(parent), frozenset({k})) is None])


def read_own_rows(spark: Any, table: Any, plan: CompactionPlan, level: ValidationLevel,
                   fingerprints: FingerprintCache, commits: list[int], keys: list[Any],
                   counted: Mapping[Any, Mapping[int, int]] | None = None, group: GroupRows | None = None,
                   collapse: bool = False) -> None:
    """Each partition's rows at each commit of a group and at the commit's parent (compared one partition at a
    time, see validate's ``own_rows``), all in one Spark job: none at a commit where ``counted`` (key -> commit ->
    rows) has them from metadata, none at a parent whose rows ``group``'s base read gives (:meth:`GroupRows.base`).
    Read by :func:`validate` one partition at a time instead, the parents cost a Spark job each whenever a writer
    committed to the group's partitions since its base (a streaming table: every run). ``collapse``: as for
    :func:`validate` (a step of several commits of ours: its last commit and its first one's parent)."""
    if not commits or level is ValidationLevel.NONE or not single_spec(table):
        return
    steps = own_steps(table, commits, collapse)
    # Not a commit that only removes delete files at checksum: validate compares its rows by count.
    read = {sid for sid, _, run in steps if not all(compared_by_count(table, s, level) for s in run)}
    known = counted or {}
    predicates = {k: rows_predicate(spark, table, plan.table.catalog, {k}) for k in keys}
    requests = []
    for sid, parent, run in steps:
        # validate compares a partition's own rows only where the commit touched it (otherwise every touched one).
        touched = frozenset().union(*(_touched(spark, table, s, group) for s in run))
        for k, predicate in predicates.items():
            if int(sid) in read and int(sid) not in known.get(k, {}):
                requests.append((int(sid), frozenset({k}), predicate))
            if (parent is not None and k in touched
                    and (group is None or group.base(table, int(parent), frozenset({k})) is None)):
                requests.append((int(parent), frozenset({k}), predicate))
    fingerprints.get_many(requests)
