"""Reading a table's Parquet delete files when Spark's file sources cannot open them: through the table's FileIO.

``spark.read.parquet`` opens files through the Hadoop ``FileSystem`` of the location's scheme, with the Hadoop
configuration's credentials. Iceberg tables need neither: a REST catalog on S3 gives its tables ``S3FileIO``
(``s3://`` locations; Spark 3.5 ships no Hadoop S3 file system, and S3A would need credentials of its own, while the
table's FileIO holds the catalog's, vended ones included). MINOR and the dangling-delete cleanup read delete files
as plain Parquet (equality-delete rows, position-delete ``file_path``/``pos``); on such tables those files are read
here instead, on the driver, through ``table.io()`` (the bytes cross py4j in chunks, pyarrow decodes them) and handed
to Spark as a small DataFrame. Delete files only: they are the broadcast side of MINOR's joins already, so they are
meant to fit on the driver. Data files are read through Iceberg's own reader (``_file``/``_pos``) in that case, see
:func:`compaction.spark.minor.matched_positions`.
"""

from __future__ import annotations

import io
from typing import Any, Iterable, Sequence

from compaction.spark.compat import dataframe_of_table, iceberg_spark_table_at

#: FileIOs that read every location through the Hadoop FileSystem of its scheme, as Spark's file sources do.
_HADOOP_FILE_IO = "org.apache.iceberg.hadoop.HadoopFileIO"
#: ResolvingFileIO hands these schemes to S3FileIO / GCSFileIO / ADLSFileIO, the rest to HadoopFileIO.
_RESOLVING_FILE_IO = "org.apache.iceberg.io.ResolvingFileIO"
_RESOLVED_ELSEWHERE = frozenset({"s3", "s3a", "s3n", "gs", "abfs", "abfss", "wasb", "wasbs"})
#: Bytes per py4j call (``InputStream.readNBytes`` returns a ``byte[]``, which py4j hands over as Python bytes).
_CHUNK = 8 << 20


def _scheme(location: str) -> str:
    head, sep, _ = location.partition(":")
    return head.lower() if sep and "/" not in head else "file"


def spark_can_read(spark: Any, table: Any, locations: Iterable[str]) -> bool:
    """Whether Spark's file sources open ``locations`` the way the table's FileIO does: the FileIO is Hadoop's for
    their schemes, and Hadoop has a FileSystem for each scheme."""
    io_class = str(table.io().getClass().getName())
    schemes = {_scheme(loc) for loc in locations}
    if io_class == _RESOLVING_FILE_IO:
        if schemes & _RESOLVED_ELSEWHERE:
            return False
    elif io_class != _HADOOP_FILE_IO:
        return False
    j = spark.sparkContext._jvm
    conf = spark._jsc.hadoopConfiguration()
    for scheme in schemes:
        try:
            j.org.apache.hadoop.fs.FileSystem.getFileSystemClass(scheme, conf)
        except Exception:  # noqa: BLE001 - py4j wraps UnsupportedFileSystemException
            return False
    return True


def _read_n(stream: Any, size: int) -> bytes:
    """Up to ``size`` bytes from a Java ``InputStream``, fewer only at its end, in py4j calls of at most ``_CHUNK``."""
    parts = []
    while size > 0:
        chunk = stream.readNBytes(min(size, _CHUNK))
        if not chunk:
            break
        parts.append(bytes(chunk))
        size -= len(chunk)
    return b"".join(parts)


def read_bytes(table: Any, location: str) -> bytes:
    """The whole file at ``location``, read through the table's FileIO."""
    input_file = table.io().newInputFile(location)
    stream = input_file.newStream()
    try:
        return _read_n(stream, int(input_file.getLength()))
    finally:
        stream.close()


class FileIOInput(io.RawIOBase):
    """A seekable, read-only Python file over a file of the table's FileIO (Iceberg's ``SeekableInputStream``):
    pyarrow's Parquet reader then fetches the footer and the column chunks it needs, not the whole file."""

    def __init__(self, table: Any, location: str) -> None:
        super().__init__()
        input_file = table.io().newInputFile(location)
        self._length = int(input_file.getLength())
        self._stream = input_file.newStream()
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._length}[whence]
        position = base + offset
        if position < 0:
            raise ValueError(f"negative seek position {position}")
        self._stream.seek(position)
        self._position = position
        return position

    def read(self, size: int = -1) -> bytes:  # type: ignore[override]
        wanted = self._length - self._position if size is None or size < 0 else size
        data = _read_n(self._stream, max(0, min(wanted, self._length - self._position)))
        self._position += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        if not self.closed:
            self._stream.close()
        super().close()


def _file_columns(arrow_schema: Any, spark_schema: Any) -> list[str | None]:
    """For each field of ``spark_schema``, the name of the Parquet column that holds it, or None (read as nulls):
    by the field's ``parquet.field.id`` when it has one and the file carries field ids (as Spark does with
    ``spark.sql.parquet.fieldId.read.enabled``), else by name."""
    ids: dict[int, str] = {}
    for f in arrow_schema:
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if raw is not None:
            ids[int(raw)] = f.name
    names = set(arrow_schema.names)
    out: list[str | None] = []
    for field in spark_schema.fields:
        field_id = (field.metadata or {}).get("parquet.field.id")
        if field_id is not None and ids:
            out.append(ids.get(int(field_id)))
        else:
            out.append(field.name if field.name in names else None)
    return out


def read_parquet_rows(table: Any, spark_schema: Any, location: str) -> list[tuple[Any, ...]]:
    """The rows of one Parquet file read through the table's FileIO, as tuples of ``spark_schema``'s fields."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(io.BytesIO(read_bytes(table, location)))
    columns = _file_columns(parquet.schema_arrow, spark_schema)
    wanted = sorted({c for c in columns if c is not None})
    arrow = parquet.read(columns=wanted)
    values = {name: arrow.column(name).to_pylist() for name in wanted}
    nulls = [None] * arrow.num_rows
    return list(zip(*[values[c] if c is not None else nulls for c in columns])) if columns else []


def read_parquet_through_file_io(spark: Any, table: Any, spark_schema: Any, files: Sequence[tuple[str, int]] |
                                 Sequence[str], *, tag_column: str | None = None) -> Any:
    """One DataFrame of the rows of ``files`` (locations, or (location, tag) pairs with ``tag_column`` set: the tag
    of the file each row came from), read through the table's FileIO. The counterpart of
    ``spark.read.schema(spark_schema).parquet(*files)`` for storage Spark cannot open (module doc)."""
    from pyspark.sql.types import LongType, StructField, StructType

    rows: list[tuple[Any, ...]] = []
    for entry in files:
        location, tag = (entry, None) if isinstance(entry, str) else entry
        file_rows = read_parquet_rows(table, spark_schema, location)
        rows.extend(file_rows if tag_column is None else [(*r, tag) for r in file_rows])
    schema = spark_schema if tag_column is None else StructType(
        [*spark_schema.fields, StructField(tag_column, LongType(), False)])
    return spark.createDataFrame(rows, schema)


def static_table_frame(spark: Any, table: Any, metadata_file: str, snapshot_id: int) -> Any:
    """The rows of the table as of ``metadata_file`` at ``snapshot_id``, loaded with the table's FileIO and without
    any catalog: Iceberg's static table (``StaticTableOperations``), as ``spark.read.format("iceberg").load(
    <metadata.json>)`` loads it, except that Spark's path loading reads the metadata through Hadoop, which cannot
    open ``s3://`` (see the module doc). A table apart from the catalog's shared instance: any thread may read it."""
    j = spark.sparkContext._jvm
    operations = j.org.apache.iceberg.StaticTableOperations(metadata_file, table.io())
    static = j.org.apache.iceberg.BaseTable(operations, metadata_file)
    return dataframe_of_table(spark, iceberg_spark_table_at(spark, static, snapshot_id))
