"""Write and commit real equality-delete files through the Iceberg Java API (py4j).

Neither Spark nor pyiceberg writes equality deletes (Spark writes position deletes; pyiceberg writes no deletes), so fixtures and the eq->pos conversion job use
this module. The recipe:

1. the Parquet file is written with pyarrow; every column carries ``PARQUET:field_id`` metadata equal to the table
   schema's field id of that equality column (Iceberg projects delete files by field id);
2. it is placed where the table writes its data (``table.locationProvider().newDataLocation(spec, partition, name)``),
   through ``table.io()`` (bytes over py4j, in 1 MiB chunks);
3. metrics come from Iceberg itself (``ParquetUtil.fileMetrics(io.newInputFile(loc), MetricsConfig.forTable(t))``),
   never built by hand;
4. the ``DeleteFile`` is built with ``FileMetadata.deleteFileBuilder(spec).ofEqualityDeletes(int[])`` and a typed
   ``PartitionData`` (``withPartition``; never ``withPartitionPath``, which reads a null string partition as
   ``'null'``);
5. all files of one logical change are committed in one ``RowDelta``.

Semantics to keep in mind (Iceberg spec, "Scan Planning"): an equality delete with data sequence number S applies to
data files with data sequence number < S of the *same spec and partition*, or of every partition when the delete
file's spec is unpartitioned ("global" delete). Null equals null.
"""

from __future__ import annotations

import io
import os
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from compaction.core.errors import UnsupportedTableError
from compaction.core.model import PartitionScalar
from compaction.spark.compat import snapshot_changes
from compaction.spark.jvm import (
    JavaObject,
    int_array,
    jvm,
    partition_data,
    spec_for,
)

if TYPE_CHECKING:
    import pyarrow as pa  # type: ignore[import-untyped]
    from pyspark.sql import SparkSession


@dataclass(frozen=True)
class EqualityDeleteSpec:
    """What to write: rows of equality-column values for one (spec, partition)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Any, ...], ...]
    spec_id: int | None = None  # None: the table's current spec
    partition: tuple[PartitionScalar, ...] = ()


@dataclass(frozen=True)
class CommittedDeletes:
    snapshot_id: int
    sequence_number: int
    paths: tuple[str, ...]


def arrow_type(iceberg_type: JavaObject) -> pa.DataType:
    """The Arrow type Iceberg expects in Parquet for a primitive Iceberg type."""
    import pyarrow as pa

    type_id = str(iceberg_type.typeId().toString())
    simple = {
        "BOOLEAN": pa.bool_(),
        "INTEGER": pa.int32(),
        "LONG": pa.int64(),
        "FLOAT": pa.float32(),
        "DOUBLE": pa.float64(),
        "DATE": pa.date32(),
        "STRING": pa.string(),
        "BINARY": pa.binary(),
        "TIME": pa.time64("us"),
    }
    if type_id in simple:
        return simple[type_id]
    if type_id == "TIMESTAMP":
        return pa.timestamp("us", tz="UTC") if iceberg_type.shouldAdjustToUTC() else pa.timestamp("us")
    if type_id == "TIMESTAMP_NANO":
        return pa.timestamp("ns", tz="UTC") if iceberg_type.shouldAdjustToUTC() else pa.timestamp("ns")
    if type_id == "DECIMAL":
        return pa.decimal128(int(iceberg_type.precision()), int(iceberg_type.scale()))
    if type_id == "FIXED":
        return pa.binary(int(iceberg_type.length()))
    if type_id == "UUID":
        return pa.binary(16)
    raise UnsupportedTableError(f"equality delete column of type {type_id} is not supported")


def equality_field_ids(table: JavaObject, columns: Sequence[str]) -> list[int]:
    schema = table.schema()
    ids = []
    for c in columns:
        field = schema.findField(c)
        if field is None:
            raise UnsupportedTableError(f"table {table.name()} has no column {c!r}")
        ids.append(int(field.fieldId()))
    return ids


def arrow_schema(table: JavaObject, columns: Sequence[str]) -> pa.Schema:
    """Arrow schema of an equality-delete file on ``columns``, with Iceberg field ids."""
    import pyarrow as pa

    schema = table.schema()
    fields = []
    for c in columns:
        f = schema.findField(c)
        if f is None:
            raise UnsupportedTableError(f"table {table.name()} has no column {c!r}")
        if not f.type().isPrimitiveType():
            raise UnsupportedTableError(f"equality column {c!r} is not primitive")
        if schema.asStruct().field(int(f.fieldId())) is None:
            # Iceberg projects a file by field id through its struct layout: a nested field written as a top-level
            # column is not found there, and Iceberg's reader would apply no delete of such a file.
            raise UnsupportedTableError(f"column {c!r} is nested: this writer writes top-level columns only")
        fields.append(
            pa.field(c, arrow_type(f.type()), nullable=bool(f.isOptional()),
                     metadata={b"PARQUET:field_id": str(int(f.fieldId())).encode()})
        )
    return pa.schema(fields)


def _to_arrow(table: JavaObject, columns: Sequence[str], rows: Sequence[Sequence[Any]] | pa.Table) -> pa.Table:
    import pyarrow as pa

    schema = arrow_schema(table, columns)
    if isinstance(rows, pa.Table):
        return rows.select(list(columns)).cast(schema)
    arrays = [pa.array([r[i] for r in rows], type=schema.field(i).type) for i in range(len(columns))]
    return pa.Table.from_arrays(arrays, schema=schema)


def write_bytes(table: JavaObject, location: str, payload: bytes) -> None:
    # Always through the table's FileIO: Iceberg locations are not URIs (partition values are URL-encoded into the
    # name and the file on disk keeps the '%3A'), so decoding them into local paths would write the wrong file.
    out = table.io().newOutputFile(location).create()
    try:
        chunk = 1 << 20
        for start in range(0, len(payload), chunk):
            out.write(bytearray(payload[start:start + chunk]))
    finally:
        out.close()


_LOCAL_FILE_IOS = ("org.apache.iceberg.hadoop.HadoopFileIO", "org.apache.iceberg.io.ResolvingFileIO")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


class TableFileWriter:
    """Writes new files of a table (delete files we build ourselves): through the table's FileIO (``write_bytes``),
    or, on a local warehouse, straight to the local file.

    Creating a file through Hadoop's local file system costs ~10 ms here (it forks ``chmod`` for the file and its
    ``.crc`` when no native library is loaded), which dominated MINOR's write of many small delete files; readers do
    not need the ``.crc``. Hadoop itself maps each directory to its local path (``RawLocalFileSystem.pathToFile``:
    Iceberg locations are not URIs, so a ``%3A`` in a partition directory stays literal on disk), asked once per
    directory; only names that need no escaping are appended to it, anything else goes through the FileIO."""

    def __init__(self, spark: SparkSession, table: JavaObject) -> None:
        self._spark, self._table = spark, table
        self._local: dict[str, str | None] = {}

    def write(self, location: str, payload: bytes) -> None:
        directory, _, name = location.rpartition("/")
        if directory not in self._local:
            self._local[directory] = self._local_directory(directory)
        local = self._local[directory]
        if local is None or not _PLAIN_NAME.match(name):
            write_bytes(self._table, location, payload)
            return
        os.makedirs(local, exist_ok=True)
        with open(os.path.join(local, name), "xb") as out:  # never overwrite, like FileIO's create()
            out.write(payload)

    def _local_directory(self, directory: str) -> str | None:
        if not directory.startswith("file:") or str(self._table.io().getClass().getName()) not in _LOCAL_FILE_IOS:
            return None
        j = jvm(self._spark)
        path = j.org.apache.hadoop.fs.Path(directory)
        fs = path.getFileSystem(self._spark._jsc.hadoopConfiguration())
        if str(fs.getScheme()) != "file":
            return None
        # LocalFileSystem, or a subclass such as Hive's ProxyLocalFileSystem that Spark's Hive jars register for file:
        filtering = j.java.lang.Class.forName("org.apache.hadoop.fs.FilterFileSystem").isInstance(fs)
        raw = fs.getRawFileSystem() if filtering else fs
        if str(raw.getClass().getName()) != "org.apache.hadoop.fs.RawLocalFileSystem":
            return None
        return str(raw.pathToFile(path).getAbsolutePath())


def write_equality_delete_file(
    spark: SparkSession,
    table: JavaObject,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]] | pa.Table,
    *,
    spec_id: int | None = None,
    partition: Sequence[PartitionScalar] = (),
    file_name: str | None = None,
    partition_struct: JavaObject | None = None,
    writer: TableFileWriter | None = None,
) -> JavaObject:
    """Write one equality-delete Parquet file and return the (uncommitted) Java ``DeleteFile``.

    ``rows`` are tuples of values of ``columns`` (Python values: int, str, None; timestamps as int micros or
    aware datetimes) or a pyarrow Table. ``spec_id``/``partition`` name the partition the delete applies to, in
    internal representation (see :mod:`compaction.spark.jvm`); use an unpartitioned spec for a global delete.
    Callers writing many files may pass the partition's ``PartitionData`` (``partition_struct``) and a ``writer``
    they keep: building either costs dozens of py4j round trips.
    """
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    j = jvm(spark)
    spec = spec_for(table, spec_id)
    pdata = partition_struct if partition_struct is not None else partition_data(spark, spec, tuple(partition))
    arrow = _to_arrow(table, columns, rows)
    name = file_name or f"eqdel-{uuid.uuid4()}.parquet"
    if spec.isPartitioned():
        location = str(table.locationProvider().newDataLocation(spec, pdata, name))
    else:
        location = str(table.locationProvider().newDataLocation(name))
    buf = io.BytesIO()
    pq.write_table(arrow, buf)
    payload = buf.getvalue()
    (writer or TableFileWriter(spark, table)).write(location, payload)

    input_file = table.io().newInputFile(location)
    metrics = j.org.apache.iceberg.parquet.ParquetUtil.fileMetrics(
        input_file, j.org.apache.iceberg.MetricsConfig.forTable(table)
    )
    builder = (
        j.org.apache.iceberg.FileMetadata.deleteFileBuilder(spec)
        .ofEqualityDeletes(int_array(spark, equality_field_ids(table, columns)))
        .withPath(location)
        .withFormat("parquet")
        .withFileSizeInBytes(len(payload))
        .withRecordCount(arrow.num_rows)
        .withMetrics(metrics)
    )
    if spec.isPartitioned():
        builder = builder.withPartition(pdata)
    return builder.build()


def commit_delete_files(
    table: JavaObject, delete_files: Iterable[JavaObject], *, row_delta: JavaObject | None = None
) -> CommittedDeletes:
    """Commit delete files in one ``RowDelta`` (``row_delta``: one the caller configured, e.g. with
    ``validateFromSnapshot``/``conflictDetectionFilter``; a plain ``table.newRowDelta()`` by default) and return the
    snapshot it created with its sequence number."""
    delta = row_delta if row_delta is not None else table.newRowDelta()
    paths = []
    for f in delete_files:
        delta = delta.addDeletes(f)
        paths.append(str(f.location()))
    delta.commit()
    snapshot = _snapshot_adding(table, paths[0]) if paths else table.currentSnapshot()
    return CommittedDeletes(int(snapshot.snapshotId()), int(snapshot.sequenceNumber()), tuple(paths))


def _snapshot_adding(table: JavaObject, path: str, max_depth: int = 20) -> JavaObject:
    """Our snapshot: the current one unless another writer committed right after us (then walk the parents)."""
    snapshot = table.currentSnapshot()
    current = snapshot
    for _ in range(max_depth):
        if current is None:
            break
        it = snapshot_changes(table, current).addedDeleteFiles().iterator()
        while it.hasNext():
            if str(it.next().location()) == path:
                return current
        parent = current.parentId()
        current = table.snapshot(parent) if parent is not None else None
    return snapshot


def write_and_commit(
    spark: SparkSession, table: JavaObject, deletes: Iterable[EqualityDeleteSpec]
) -> CommittedDeletes | None:
    """Write one equality-delete file per :class:`EqualityDeleteSpec` and commit them all in one RowDelta.
    Empty specs are skipped; returns None when nothing was written."""
    table.refresh()
    files = [
        write_equality_delete_file(spark, table, d.columns, d.rows, spec_id=d.spec_id, partition=d.partition)
        for d in deletes
        if d.rows
    ]
    if not files:
        return None
    return commit_delete_files(table, files)
