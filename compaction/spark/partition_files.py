"""What Iceberg itself says about one partition's files at a snapshot (Java API over py4j).

The source of truth inside the Spark job: data files selected by the partition expression, the delete files
Iceberg's own scan planning applies to each of them (``FileScanTask.deletes()``, i.e. the spec's sequence-number and
partition rules plus statistics pruning), and every live delete file of the partition (including dangling ones).
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from typing import Any, Iterator

from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionState,
)
from compaction.spark import jvm as J
from compaction.spark.compat import snapshot_changes
from compaction.spark.file_io_reads import read_parquet_rows, spark_can_read

# Reserved field id of ``file_path`` in position delete files (Iceberg spec, "Position Delete Files").
FILE_PATH_FIELD_ID = 2147483546


def _iterate(iterable: Any) -> Iterator[Any]:
    it = iterable.iterator()
    try:
        while it.hasNext():
            yield it.next()
    finally:
        close = getattr(iterable, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # closing a metadata iterator must not mask the real outcome
                pass


def java_list(items: Any) -> list[Any]:
    """A Java ``List`` as a Python list by index. Iterating it with Python's ``for`` ends on a Java
    ``NoSuchElementException`` that PySpark converts at the cost of a dozen py4j round trips (tens of ms)."""
    return [items.get(i) for i in range(int(items.size()))]


def delete_ref(f: Any) -> tuple[str, int]:
    """Identity of a delete file; DVs share one Puffin file, so the blob offset is part of it."""
    offset = f.contentOffset()
    return str(f.location()), int(offset) if offset is not None else -1


def delete_kind(f: Any) -> DeleteContent:
    content = str(f.content().toString())
    if content == "EQUALITY_DELETES":
        return DeleteContent.EQUALITY
    if str(f.format().toString()).upper() == "PUFFIN":
        return DeleteContent.DELETION_VECTOR
    return DeleteContent.POSITION


@dataclass
class PartitionFiles:
    snapshot_id: int | None
    data: dict[str, Any] = field(default_factory=dict)  # path -> Java DataFile
    data_sequence: dict[str, int] = field(default_factory=dict)
    deletes: dict[tuple[str, int], Any] = field(default_factory=dict)  # every live delete file in scope
    applied: dict[str, set[tuple[str, int]]] = field(default_factory=dict)  # data path -> applied deletes
    #: False when scanned with ``with_applied=False``: ``applied`` was not collected and must not be read.
    has_applied: bool = True
    _counts: dict[str, int] | None = field(default=None, repr=False, compare=False)

    def refine_position_deletes(self, spark: Any, table: Any = None) -> None:
        """Replace Iceberg's bounds-based guess with the real targets of multi-file position delete files.

        Iceberg plans a position delete file that names several data files (no ``referenced_data_file``) against
        every data file whose path falls between the file's ``file_path`` bounds and whose data sequence number is
        <= the delete's. After a rewrite that kept the starting sequence number, such a file can look "applied" to
        a new file it never names. Reading the distinct ``file_path`` values of the delete file tells the truth
        (through ``table``'s FileIO when Spark cannot open the files, see :func:`_read_position_delete_targets`)."""
        if not self.has_applied:
            raise ValueError("refine_position_deletes needs a scan made with with_applied=True")
        pending = [
            ref for ref, d in self.deletes.items()
            if delete_kind(d) is DeleteContent.POSITION and d.referencedDataFile() is None
        ]
        if not pending:
            return
        targets = _position_delete_targets(spark, [self.deletes[ref] for ref in pending], table)
        for path, refs in self.applied.items():
            for ref in [r for r in refs if r in targets and path not in targets[r]]:
                refs.discard(ref)

    def counts(self) -> dict[str, int]:
        """Totals of the scanned files; computed once (each value is a py4j round trip per file), the files of a
        scan never change."""
        if self._counts is None:
            self._counts = {
                "data_files": len(self.data),
                "data_bytes": sum(int(f.fileSizeInBytes()) for f in self.data.values()),
                "records": sum(int(f.recordCount()) for f in self.data.values()),
                "delete_files": len(self.deletes),
                "delete_records": sum(int(f.recordCount()) for f in self.deletes.values()),
                "equality_delete_files": sum(1 for f in self.deletes.values()
                                             if delete_kind(f) is DeleteContent.EQUALITY),
            }
        return dict(self._counts)

    def before_change(self, snapshot_id: int, rewritten: dict[str, Any],
                      removed_deletes: dict[tuple[str, int], Any], added: frozenset[str]) -> PartitionFiles:
        """These files (scanned at a snapshot whose parent is ``snapshot_id``) as they were at ``snapshot_id``: the
        data files at ``added`` taken out, ``rewritten`` (location -> Java data file) and ``removed_deletes`` put back.
        Exact only when those are every change of the child snapshot within this scan's partition, which is what a
        rewrite's one commit is (a RewriteFiles adds data files and removes data and delete files, nothing else).
        ``added`` may name files of other partitions: only those in this scan are taken out.
        Its counts are derived from these files' (the py4j reads are of the changed files only)."""
        if any(path in self.data for path in rewritten) or any(ref in self.deletes for ref in removed_deletes):
            raise ValueError("a file the change removed is still in the scan: not the change's child snapshot")
        gone = [path for path in added if path in self.data]
        before = PartitionFiles(snapshot_id, has_applied=False)
        before.data = {path: f for path, f in self.data.items() if path not in added}
        before.data_sequence = {path: self.data_sequence[path] for path in before.data}
        for path, f in rewritten.items():
            before.data[path] = f
            before.data_sequence[path] = int(f.dataSequenceNumber())
        before.deletes = {**self.deletes, **removed_deletes}
        counts = self.counts()
        for sign, files in ((-1, [self.data[path] for path in gone]), (1, list(rewritten.values()))):
            counts["data_files"] += sign * len(files)
            counts["data_bytes"] += sign * sum(int(f.fileSizeInBytes()) for f in files)
            counts["records"] += sign * sum(int(f.recordCount()) for f in files)
        counts["delete_files"] += len(removed_deletes)
        counts["delete_records"] += sum(int(d.recordCount()) for d in removed_deletes.values())
        counts["equality_delete_files"] += sum(1 for d in removed_deletes.values()
                                               if delete_kind(d) is DeleteContent.EQUALITY)
        before._counts = counts
        return before

    def to_state(self, key: PartitionKey, spark: Any = None) -> PartitionState:
        """The planner's view of these files (for re-evaluating a stale plan inside the job), as inspect builds it:
        file sequence numbers, and a position delete's single data file from ``referenced_data_file`` or equal
        ``file_path`` bounds (``spark`` given; otherwise the field only)."""
        data = tuple(
            DataFileInfo(path, int(f.fileSizeInBytes()), int(f.recordCount()), self.data_sequence[path],
                         _opt_int(f.fileSequenceNumber()))
            for path, f in sorted(self.data.items())
        )
        deletes = []
        for ref, f in sorted(self.deletes.items()):
            kind = delete_kind(f)
            if kind is DeleteContent.EQUALITY:
                referenced = None
            elif spark is not None:
                referenced = position_delete_target(spark, f)
            else:
                target = f.referencedDataFile()
                referenced = str(target) if target is not None else None
            deletes.append(
                DeleteFileInfo(
                    path=ref[0],
                    content=kind,
                    size_bytes=int(f.contentSizeInBytes()) if f.contentSizeInBytes() is not None else int(f.fileSizeInBytes()),
                    record_count=int(f.recordCount()),
                    data_sequence_number=int(f.dataSequenceNumber()),
                    file_sequence_number=_opt_int(f.fileSequenceNumber()),
                    referenced_data_file=referenced,
                    equality_ids=_equality_ids(f),
                    content_offset=ref[1] if ref[1] >= 0 else None,
                )
            )
        return PartitionState(key=key, data_files=data, delete_files=tuple(deletes))


def live_rows_from_metadata(files: PartitionFiles, distinct: set[tuple[str, int]]) -> int | None:
    """The live rows of ``files`` (scanned with ``applied``) from metadata alone, or None when metadata cannot tell
    them exactly. Exact when no equality delete applies to any data file (which rows it deletes depends on their
    values) and each data file with deletes has exactly one applied, naming that file alone, whose record count is
    the number of rows it deletes: a DV (a bitmap: its cardinality; the spec allows one per data file) or a
    position-delete file of ``distinct`` (refs whose positions are known to be distinct, e.g. the ones we just
    wrote: the spec does not forbid a position-delete file from naming a position twice)."""
    if not files.has_applied:
        raise ValueError("live_rows_from_metadata needs a scan made with with_applied=True")
    live = 0
    for path, f in files.data.items():
        refs = files.applied.get(path, set())
        if len(refs) > 1:
            return None
        live += int(f.recordCount())
        if refs:
            (ref,) = refs
            d = files.deletes[ref]
            kind, target = delete_kind(d), d.referencedDataFile()
            if kind is DeleteContent.EQUALITY or target is None or str(target) != path:
                return None
            if kind is DeleteContent.POSITION and ref not in distinct:
                return None
            live -= int(d.recordCount())
    return live


def _opt_int(value: Any) -> int | None:
    return int(value) if value is not None else None


def _equality_ids(f: Any) -> tuple[int, ...]:
    ids = f.equalityFieldIds()
    return tuple(int(i) for i in java_list(ids)) if ids is not None else ()


def scan_partition(spark: Any, table: Any, expression: Any, snapshot_id: int | None, *,
                   with_applied: bool = True) -> PartitionFiles:
    """Files of the partition selected by ``expression`` at ``snapshot_id`` (None: table has no snapshot).

    ``with_applied=False`` skips collecting which deletes Iceberg applies to each data file (``applied``): that is
    one py4j round trip per (data file, delete) pair, thousands on a partition that needs a MAJOR, and only the
    post-MAJOR check reads it. ``deletes`` (every live delete file in scope) is complete either way."""
    result = PartitionFiles(snapshot_id, has_applied=with_applied)
    if snapshot_id is None:
        return result
    scan = table.newScan().useSnapshot(int(snapshot_id)).filter(expression).ignoreResiduals()
    for task in _iterate(scan.planFiles()):
        f = task.file()
        path = str(f.location())
        result.data[path] = f
        result.data_sequence[path] = int(f.dataSequenceNumber())
        if not with_applied:
            continue
        refs = result.applied.setdefault(path, set())
        for d in java_list(task.deletes()):
            ref = delete_ref(d)
            refs.add(ref)
            result.deletes[ref] = d
    j = spark.sparkContext._jvm
    snapshot = table.snapshot(int(snapshot_id))
    specs = table.specs()
    # By partition only: ``filterRows`` would also prune delete files by their column statistics, and hide an
    # equality delete whose keys match no row of the partition (an identity-partition source column with another
    # value); the planner counts it from the manifests, so it would be left in place and trigger MINOR forever.
    scope = _PartitionScope(spark, table, expression)
    for manifest in java_list(snapshot.deleteManifests(table.io())):
        spec_id = int(manifest.partitionSpecId())
        if not scope.may_match(manifest, spec_id):
            continue
        reader = scope.filtered(j.org.apache.iceberg.ManifestFiles.readDeleteManifest(manifest, table.io(), specs),
                                spec_id)
        for d in _iterate(reader):
            ref = delete_ref(d)
            result.deletes.setdefault(ref, d.copy())
    return result


def added_data_files(table: Any, snapshot_id: int) -> Iterator[Any]:
    return _iterate(snapshot_changes(table, table.snapshot(int(snapshot_id))).addedDataFiles())


def snapshots_between(table: Any, base_snapshot_id: int, until_snapshot_id: int) -> list[int]:
    """Snapshot ids after ``base`` up to and including ``until`` on main's ancestry, oldest first."""
    chain: list[int] = []
    current = table.snapshot(int(until_snapshot_id))
    while current is not None and int(current.snapshotId()) != int(base_snapshot_id):
        chain.append(int(current.snapshotId()))
        parent = current.parentId()
        current = table.snapshot(int(parent)) if parent is not None else None
    return list(reversed(chain))


# Dangling deletes ------------------------------------------------------------------------------------------------
class _PartitionScope:
    """The row filter ``expression`` projected onto each spec's partition tuple (``Projections.inclusive``, as
    Iceberg's scan planning does), with a ``ManifestEvaluator`` on it, made once per spec. Partition values only:
    column statistics are never consulted (see :func:`find_dangling_deletes`)."""

    def __init__(self, spark: Any, table: Any, expression: Any) -> None:
        self._expressions = J.jvm(spark).org.apache.iceberg.expressions
        self._table = table
        self._expression = expression
        self._by_spec: dict[int, tuple[Any, Any]] = {}

    def _get(self, spec_id: int) -> tuple[Any, Any]:
        if spec_id not in self._by_spec:
            spec = self._table.specs().get(int(spec_id))
            projected = self._expressions.Projections.inclusive(spec).project(self._expression)
            evaluator = self._expressions.ManifestEvaluator.forPartitionFilter(projected, spec, True)
            self._by_spec[spec_id] = (projected, evaluator)
        return self._by_spec[spec_id]

    def may_match(self, manifest: Any, spec_id: int) -> bool:
        """False only when the manifest's partition summaries prove no entry's partition matches: skipping it
        saves opening the manifest (one py4j call instead of about eight)."""
        return bool(self._get(spec_id)[1].eval(manifest))

    def filtered(self, reader: Any, spec_id: int) -> Any:
        """Filter a manifest by partition only. ``filterRows`` would also prune by column statistics, which is
        right for reading rows but wrong for deciding whether a delete file still has a data file to apply to."""
        return reader.filterPartitions(self._get(spec_id)[0])


def find_dangling_deletes(spark: Any, table: Any, snapshot_id: int, expression: Any, *,
                          covers_whole_table: bool, removed_data: frozenset[str] = frozenset()) -> list[Any]:
    """Live delete files in the partitions selected by ``expression`` that can no longer apply to any live data file,
    by the spec's rules (Iceberg spec, "Scan Planning"), ignoring column statistics (so the answer errs on the side
    of keeping). ``removed_data``: locations of data files counted as not live (a rewrite about to remove them; the
    files it adds carry the starting data sequence number, so no delete of ``snapshot_id`` applies to them):

    * a DV or position delete applies only to the data files it names, in its own spec and partition, with data
      seq <= its own; if none of them is live it is dangling forever (paths are never reused);
    * an equality delete of a partitioned spec applies to data files of the same spec and partition with data
      seq < its own; with none live it is dangling;
    * an equality delete of an unpartitioned spec (a "global" delete) applies to every data file of the table, of
      every partition of every spec, with data seq < its own: it is dangling only when no live data file of the
      whole table has a lower data seq, so it is always judged against the whole table, whatever ``expression``
      selects (:func:`_lowest_live_data_sequence`).

    The files a position delete names come from metadata when Iceberg can tell them (:func:`position_delete_target`);
    only the others are read (one Spark job for all of them). Returned delete files are copies (safe to keep).
    """
    j = J.jvm(spark)
    io, specs = table.io(), table.specs()
    snapshot = table.snapshot(int(snapshot_id))
    decoder = J.PartitionDecoder(spark, specs)
    scope = _PartitionScope(spark, table, expression)
    target_of = j.org.apache.iceberg.util.ContentFileUtil.referencedDataFileLocation

    data_by_partition: dict[tuple[int, tuple[Any, ...]], list[tuple[str, int]]] = {}
    for manifest in java_list(snapshot.dataManifests(io)):
        spec_id = int(manifest.partitionSpecId())
        if not covers_whole_table and not scope.may_match(manifest, spec_id):
            continue
        reader = j.org.apache.iceberg.ManifestFiles.read(manifest, io, specs)
        if not covers_whole_table:
            reader = scope.filtered(reader, spec_id)
        for f in _iterate(reader):
            location = str(f.location())
            if location in removed_data:
                continue
            key = (spec_id, decoder.values(spec_id, f.partition()))
            data_by_partition.setdefault(key, []).append((location, int(f.dataSequenceNumber())))
    all_data = [entry for files in data_by_partition.values() for entry in files]

    unpartitioned: dict[int, bool] = {}
    lowest_table_seq: int | None = None  # of the whole table's live data files, read once if a global delete is met
    dangling: list[Any] = []
    unresolved: list[tuple[Any, tuple[int, tuple[Any, ...]], int]] = []  # multi-file position deletes
    for manifest in java_list(snapshot.deleteManifests(io)):
        spec_id = int(manifest.partitionSpecId())
        if not scope.may_match(manifest, spec_id):
            continue
        if spec_id not in unpartitioned:
            unpartitioned[spec_id] = bool(specs.get(spec_id).isUnpartitioned())
        reader = scope.filtered(j.org.apache.iceberg.ManifestFiles.readDeleteManifest(manifest, io, specs), spec_id)
        for d in _iterate(reader):
            key = (spec_id, decoder.values(spec_id, d.partition()))
            if not unpartitioned[spec_id] and not data_by_partition.get(key):
                # No live data file in its spec and partition: whatever its kind, sequence number or target, it
                # applies to nothing (an unpartitioned spec's equality delete is global: judged below).
                dangling.append(d.copy())
                continue
            seq = int(d.dataSequenceNumber())
            # Position delete or DV naming exactly one data file (None for equality deletes and for position
            # delete files that name several files).
            target = target_of(d)
            if target is not None:
                if not any(path == target and data_seq <= seq for path, data_seq in data_by_partition.get(key, [])):
                    dangling.append(d.copy())
                continue
            if str(d.content().toString()) == "EQUALITY_DELETES":
                if unpartitioned[spec_id]:
                    if lowest_table_seq is None:
                        lowest_table_seq = (min((s for _, s in all_data), default=None) if covers_whole_table
                                            else _lowest_live_data_sequence(spark, table, snapshot, removed_data))
                    still_applies = lowest_table_seq is not None and lowest_table_seq < seq
                else:
                    still_applies = any(data_seq < seq for _, data_seq in data_by_partition.get(key, []))
                if not still_applies:
                    dangling.append(d.copy())
                continue
            unresolved.append((d.copy(), key, seq))

    targets = _read_position_delete_targets(spark, [d for d, _, _ in unresolved], table)
    for d, key, seq in unresolved:
        named = targets.get(delete_ref(d), set())
        if not any(path in named and data_seq <= seq for path, data_seq in data_by_partition.get(key, [])):
            dangling.append(d)
    return dangling


def _lowest_live_data_sequence(spark: Any, table: Any, snapshot: Any,
                               removed_data: frozenset[str] = frozenset()) -> int | None:
    """The lowest data sequence number of the live data files of the whole table at ``snapshot`` (None: no data
    file), every spec and partition. A manifest whose ``min_sequence_number`` (spec, "Manifest Lists": the lowest
    data sequence number of its live entries) cannot go below the lowest found so far is not opened."""
    j = J.jvm(spark)
    io, specs = table.io(), table.specs()
    manifests = java_list(snapshot.dataManifests(io))
    lowest: int | None = None
    for manifest in sorted(manifests, key=lambda m: int(m.minSequenceNumber())):
        if lowest is not None and int(manifest.minSequenceNumber()) >= lowest:
            continue
        if not (manifest.hasAddedFiles() or manifest.hasExistingFiles()):
            continue
        for f in _iterate(j.org.apache.iceberg.ManifestFiles.read(manifest, io, specs)):
            if removed_data and str(f.location()) in removed_data:
                continue
            seq = int(f.dataSequenceNumber())
            lowest = seq if lowest is None else min(lowest, seq)
    return lowest


def position_delete_target(spark: Any, delete_file: Any) -> str | None:
    """The one data file a position delete file or DV applies to, from metadata, or None when metadata cannot tell
    (the file may name several data files; equality deletes also give None).

    ``ContentFileUtil.referencedDataFileLocation``: ``referenced_data_file`` when set (always for DVs), else the
    ``file_path`` lower bound when it equals the upper bound. Iceberg's own scan planning (``DeleteFileIndex``)
    uses exactly this to index a position delete by data file path, i.e. to apply it to that file only, so the
    answer is Iceberg's definition of the delete's target, not a guess. Bounds equal means every ``file_path``
    value in the file is that string (a truncated upper bound is incremented, so it never equals a lower bound)."""
    location = J.jvm(spark).org.apache.iceberg.util.ContentFileUtil.referencedDataFileLocation(delete_file)
    return str(location) if location is not None else None


def _position_delete_targets(spark: Any, delete_files: list[Any], table: Any = None) -> dict[tuple[str, int], set[str]]:
    """The data files each position delete file names: from metadata where Iceberg can tell
    (:func:`position_delete_target`: Spark's v2 position deletes are file-scoped by their bounds), otherwise by
    reading the file's distinct ``file_path`` values (one Spark job for all of those)."""
    out: dict[tuple[str, int], set[str]] = {}
    rest = []
    for d in delete_files:
        target = position_delete_target(spark, d)
        if target is not None:
            out[delete_ref(d)] = {target}
        else:
            rest.append(d)
    out.update(_read_position_delete_targets(spark, rest, table))
    return out


def _read_position_delete_targets(spark: Any, delete_files: list[Any],
                                  table: Any = None) -> dict[tuple[str, int], set[str]]:
    """Distinct ``file_path`` values of position delete files, read with Spark (one job for all of them), or, with
    ``table`` given and files Spark's file sources cannot open (an S3FileIO table: no Hadoop file system for
    ``s3://``), through the table's FileIO on the driver."""
    if not delete_files:
        return {}
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    refs = [delete_ref(d) for d in delete_files]
    if table is not None and not spark_can_read(spark, table, [ref[0] for ref in refs]):
        file_path_only = StructType([StructField("file_path", StringType())])
        return {ref: {str(row[0]) for row in read_parquet_rows(table, file_path_only, ref[0])} for ref in refs}
    frames = [spark.read.parquet(ref[0]).select(F.lit(i).alias("i"), F.col("file_path")).distinct()
              for i, ref in enumerate(refs)]
    out: dict[tuple[str, int], set[str]] = {ref: set() for ref in refs}
    for row in reduce(lambda a, b: a.unionByName(b), frames).collect():
        out[refs[int(row["i"])]].add(str(row["file_path"]))
    return out


# SnapshotSummary.CHANGED_PARTITION_COUNT_PROP: distinct partitions (spec.partitionToPath) of the files a commit
# added or removed, data and delete files alike; absent when Iceberg could not count them (appended manifests).
CHANGED_PARTITION_COUNT = "changed-partition-count"


def _changed_partition_count(snapshot: Any) -> int | None:
    summary = snapshot.summary()
    value = summary.get(CHANGED_PARTITION_COUNT) if summary is not None else None
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None


class PartitionKeys:
    """``PartitionKey`` of a file's partition, with the per-spec lookups (field names/transforms from the table's
    schema, field types) made once per spec: share one instance across calls on the same table."""

    def __init__(self, spark: Any) -> None:
        self._spark = spark
        self._by_spec: dict[int, tuple[list[Any], Any]] = {}

    def key_of(self, table: Any, f: Any) -> PartitionKey:
        spec_id = int(f.specId())
        if spec_id not in self._by_spec:
            specs = table.specs()
            decoder = J.PartitionDecoder(self._spark, specs)
            decoder.field_types(spec_id)
            self._by_spec[spec_id] = (J.partition_fields(table, specs.get(spec_id)), decoder)
        fields, decoder = self._by_spec[spec_id]
        values = decoder.values(spec_id, f.partition())
        return PartitionKey(spec_id, tuple(
            PartitionFieldValue(fd.name, fd.transform, fd.source_column, v) for fd, v in zip(fields, values)
        ))


def touched_partitions(spark: Any, table: Any, snapshot_id: int, *,
                       partition_keys: PartitionKeys | None = None) -> set[PartitionKey]:
    """Every (spec, partition) whose files a snapshot added or removed (data and delete files).

    Fast path, single-spec tables only: when Iceberg's snapshot summary counts exactly one changed partition, the
    answer is the partition of the first changed file. Iceberg counts distinct ``spec.partitionToPath`` strings,
    which identify a partition of one spec except that a null and the string ``'null'`` both render as ``null``;
    keys holding either fall back to the walk. With several specs, paths of different specs can collide, so the
    walk (every added/removed file) is always used there. ``partition_keys``: a :class:`PartitionKeys` to reuse
    across calls on the same table (one is made per call otherwise)."""
    specs = table.specs()
    snapshot = table.snapshot(int(snapshot_id))
    keys_of = partition_keys if partition_keys is not None else PartitionKeys(spark)

    def key_of(f: Any) -> PartitionKey:
        return keys_of.key_of(table, f)

    changed = snapshot_changes(table, snapshot)
    changes = (changed.addedDataFiles, changed.removedDataFiles, changed.addedDeleteFiles, changed.removedDeleteFiles)
    if int(specs.size()) == 1 and _changed_partition_count(snapshot) == 1:
        for change in changes:
            it = change().iterator()
            if it.hasNext():
                key = key_of(it.next())
                if not any(f.value is None or f.value == "null" for f in key.fields):
                    return {key}
                break
    keys: set[PartitionKey] = set()
    for change in changes:
        for f in _iterate(change()):
            keys.add(key_of(f))
    return keys


#: Partition scans run side by side (driver-side metadata reads, bound by py4j round trips more than by the CPU; the
#: executors are idle meanwhile).
SCAN_WORKERS = 4


def scans_at(spark: Any, table: Any, snapshot_id: int, items: list[tuple[Any, Any]], *,
             workers: int = SCAN_WORKERS, with_applied: bool = True) -> dict[Any, concurrent.futures.Future[Any]]:
    """Futures of :func:`scan_partition` of each ``(key, expression)`` at ``snapshot_id``, up to ``workers`` at once
    in background threads (a scan of a fixed snapshot reads the same whenever it runs, so it can overlap other
    work)."""
    def scan(expression: Any) -> Any:
        return scan_partition(spark, table, expression, snapshot_id, with_applied=with_applied)

    futures = J.in_pool(spark, scan, [expression for _, expression in items], workers=workers,
                        name="partition-scan")
    return {key: future for (key, _), future in zip(items, futures)}
