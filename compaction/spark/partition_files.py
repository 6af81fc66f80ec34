"""What Iceberg itself says about one partition's files at a snapshot (Java API over py4j).

The source of truth inside the Spark job: data files selected by the partition expression, the delete files
Iceberg's own scan planning applies to each of them (``FileScanTask.deletes()``, i.e. the spec's sequence-number and
partition rules plus statistics pruning), and every live delete file of the partition (including dangling ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from compaction.core.model import DataFileInfo, DeleteContent, DeleteFileInfo, PartitionKey, PartitionState

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

    def refine_position_deletes(self, spark: Any) -> None:
        """Replace Iceberg's bounds-based guess with the real targets of multi-file position delete files.

        Iceberg plans a position delete file that names several data files (no ``referenced_data_file``) against
        every data file whose path falls between the file's ``file_path`` bounds and whose data sequence number is
        <= the delete's. After a rewrite that kept the starting sequence number, such a file can look "applied" to
        a new file it never names. Reading the distinct ``file_path`` values of the delete file tells the truth."""
        pending = [
            ref for ref, d in self.deletes.items()
            if delete_kind(d) is DeleteContent.POSITION and d.referencedDataFile() is None
        ]
        if not pending:
            return
        targets = _position_delete_targets(spark, [self.deletes[ref] for ref in pending])
        for path, refs in self.applied.items():
            for ref in [r for r in refs if r in targets and path not in targets[r]]:
                refs.discard(ref)

    def counts(self) -> dict[str, int]:
        return {
            "data_files": len(self.data),
            "data_bytes": sum(int(f.fileSizeInBytes()) for f in self.data.values()),
            "records": sum(int(f.recordCount()) for f in self.data.values()),
            "delete_files": len(self.deletes),
            "delete_records": sum(int(f.recordCount()) for f in self.deletes.values()),
            "equality_delete_files": sum(1 for f in self.deletes.values() if delete_kind(f) is DeleteContent.EQUALITY),
        }

    def to_state(self, key: PartitionKey) -> PartitionState:
        """The planner's view of these files (for re-evaluating a stale plan inside the job)."""
        data = tuple(
            DataFileInfo(path, int(f.fileSizeInBytes()), int(f.recordCount()), self.data_sequence[path])
            for path, f in sorted(self.data.items())
        )
        deletes = []
        for ref, f in sorted(self.deletes.items()):
            referenced = f.referencedDataFile()
            deletes.append(
                DeleteFileInfo(
                    path=ref[0],
                    content=delete_kind(f),
                    size_bytes=int(f.contentSizeInBytes()) if f.contentSizeInBytes() is not None else int(f.fileSizeInBytes()),
                    record_count=int(f.recordCount()),
                    data_sequence_number=int(f.dataSequenceNumber()),
                    referenced_data_file=str(referenced) if referenced is not None else None,
                    equality_ids=tuple(int(i) for i in (f.equalityFieldIds() or [])),
                    content_offset=ref[1] if ref[1] >= 0 else None,
                )
            )
        return PartitionState(key=key, data_files=data, delete_files=tuple(deletes))


def scan_partition(spark: Any, table: Any, expression: Any, snapshot_id: int | None) -> PartitionFiles:
    """Files of the partition selected by ``expression`` at ``snapshot_id`` (None: table has no snapshot)."""
    result = PartitionFiles(snapshot_id)
    if snapshot_id is None:
        return result
    scan = table.newScan().useSnapshot(int(snapshot_id)).filter(expression).ignoreResiduals()
    for task in _iterate(scan.planFiles()):
        f = task.file()
        path = str(f.location())
        result.data[path] = f
        result.data_sequence[path] = int(f.dataSequenceNumber())
        refs = result.applied.setdefault(path, set())
        for d in task.deletes():
            ref = delete_ref(d)
            refs.add(ref)
            result.deletes[ref] = d
    j = spark.sparkContext._jvm
    snapshot = table.snapshot(int(snapshot_id))
    specs = table.specs()
    for manifest in snapshot.deleteManifests(table.io()):
        reader = j.org.apache.iceberg.ManifestFiles.readDeleteManifest(manifest, table.io(), specs).filterRows(expression)
        for d in _iterate(reader):
            ref = delete_ref(d)
            result.deletes.setdefault(ref, d.copy())
    return result


def added_data_files(table: Any, snapshot_id: int) -> Iterator[Any]:
    return _iterate(table.snapshot(int(snapshot_id)).addedDataFiles(table.io()))


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
def _partition_filtered(reader: Any, table: Any, spec_id: int, expression: Any, j: Any) -> Any:
    """Filter a manifest by partition only. ``filterRows`` would also prune by column statistics, which is right
    for reading rows but wrong for deciding whether a delete file still has a data file to apply to."""
    spec = table.specs().get(int(spec_id))
    return reader.filterPartitions(j.org.apache.iceberg.expressions.Projections.inclusive(spec).project(expression))


def find_dangling_deletes(spark: Any, table: Any, snapshot_id: int, expression: Any, *,
                          covers_whole_table: bool) -> list[Any]:
    """Live delete files in the partitions selected by ``expression`` that can no longer apply to any live data file,
    by the spec's rules (DESIGN.md §2), ignoring column statistics (so the answer errs on the side of keeping):

    * a DV or position delete applies only to the data files it names, in its own spec and partition, with data
      seq <= its own; if none of them is live it is dangling forever (paths are never reused);
    * an equality delete of a partitioned spec applies to data files of the same spec and partition with data
      seq < its own; with none live it is dangling;
    * an equality delete of an unpartitioned spec applies to every data file of the table; it is only judged when
      the scan covers the whole table.
    """
    j = spark.sparkContext._jvm
    io, specs = table.io(), table.specs()
    snapshot = table.snapshot(int(snapshot_id))
    from compaction.spark.jvm import partition_values

    data_by_partition: dict[tuple[int, tuple[Any, ...]], list[tuple[str, int]]] = {}
    for manifest in snapshot.dataManifests(io):
        spec_id = int(manifest.partitionSpecId())
        reader = j.org.apache.iceberg.ManifestFiles.read(manifest, io, specs)
        if not covers_whole_table:
            reader = _partition_filtered(reader, table, spec_id, expression, j)
        spec = specs.get(spec_id)
        for f in _iterate(reader):
            key = (spec_id, partition_values(spark, spec, f.partition()))
            data_by_partition.setdefault(key, []).append((str(f.location()), int(f.dataSequenceNumber())))
    candidates: list[tuple[Any, tuple[int, tuple[Any, ...]]]] = []
    for manifest in snapshot.deleteManifests(io):
        spec_id = int(manifest.partitionSpecId())
        reader = _partition_filtered(j.org.apache.iceberg.ManifestFiles.readDeleteManifest(manifest, io, specs),
                                     table, spec_id, expression, j)
        spec = specs.get(spec_id)
        for d in _iterate(reader):
            candidates.append((d.copy(), (spec_id, partition_values(spark, spec, d.partition()))))

    multi_file = [d for d, _ in candidates
                  if delete_kind(d) is DeleteContent.POSITION and d.referencedDataFile() is None]
    targets = _position_delete_targets(spark, multi_file)
    all_data = [entry for files in data_by_partition.values() for entry in files]
    dangling = []
    for d, key in candidates:
        seq = int(d.dataSequenceNumber())
        kind = delete_kind(d)
        if kind is DeleteContent.EQUALITY:
            if specs.get(key[0]).isUnpartitioned():
                if not covers_whole_table:
                    continue
                scope = all_data
            else:
                scope = data_by_partition.get(key, [])
            if not any(data_seq < seq for _, data_seq in scope):
                dangling.append(d)
            continue
        referenced = d.referencedDataFile()
        named = {str(referenced)} if referenced is not None else targets.get(delete_ref(d), set())
        scope = data_by_partition.get(key, [])
        if not any(path in named and data_seq <= seq for path, data_seq in scope):
            dangling.append(d)
    return dangling


def _position_delete_targets(spark: Any, delete_files: list[Any]) -> dict[tuple[str, int], set[str]]:
    """Distinct ``file_path`` values of position delete files (one Spark job for all of them)."""
    if not delete_files:
        return {}
    from functools import reduce

    from pyspark.sql import functions as F

    refs = [delete_ref(d) for d in delete_files]
    frames = [spark.read.parquet(ref[0]).select(F.lit(i).alias("i"), F.col("file_path")).distinct()
              for i, ref in enumerate(refs)]
    out: dict[tuple[str, int], set[str]] = {ref: set() for ref in refs}
    for row in reduce(lambda a, b: a.unionByName(b), frames).collect():
        out[refs[int(row["i"])]].add(str(row["file_path"]))
    return out


def touched_partitions(spark: Any, table: Any, snapshot_id: int) -> set[PartitionKey]:
    """Every (spec, partition) whose files a snapshot added or removed (data and delete files)."""
    from compaction.core.model import PartitionFieldValue
    from compaction.spark.jvm import partition_fields, partition_values

    io, specs = table.io(), table.specs()
    snapshot = table.snapshot(int(snapshot_id))
    keys: set[PartitionKey] = set()
    fields_by_spec: dict[int, Any] = {}
    for files in (snapshot.addedDataFiles(io), snapshot.removedDataFiles(io),
                  snapshot.addedDeleteFiles(io), snapshot.removedDeleteFiles(io)):
        for f in _iterate(files):
            spec_id = int(f.specId())
            spec = specs.get(spec_id)
            if spec_id not in fields_by_spec:
                fields_by_spec[spec_id] = partition_fields(table, spec)
            values = partition_values(spark, spec, f.partition())
            keys.add(PartitionKey(spec_id, tuple(
                PartitionFieldValue(fd.name, fd.transform, fd.source_column, v)
                for fd, v in zip(fields_by_spec[spec_id], values)
            )))
    return keys
