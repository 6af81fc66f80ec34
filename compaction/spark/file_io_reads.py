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

For the driver-side MINOR read (:mod:`compaction.spark.driver_match`), :func:`sparse_local_copy` fetches only a file's
footer and the column chunks read, data files included, into a sparse local file, copied inside the JVM.
"""

from __future__ import annotations

import io
from typing import Any, Collection, Iterable, Sequence

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


class NotParquetError(ValueError):
    """A file that does not end in Parquet's magic bytes."""


def sparse_local_copy(spark: Any, table: Any, location: str, target: str, *, field_ids: Collection[int] = (),
                      names: Collection[str] = ()) -> str:
    """A local copy of the Parquet file at ``location`` (read through the table's FileIO) at ``target``, holding
    the footer and the column chunks of the top-level columns with one of ``field_ids`` (Parquet field ids) or
    ``names``; the rest of the file is a hole of the same length, so pyarrow reads those columns from it as from the
    original. The bytes are copied inside the JVM (Iceberg's ``SeekableInputStream`` into a ``RandomAccessFile``):
    bytes handed to Python over py4j cross at a few MB/s, and only the needed ranges are fetched from an object
    store. Returns ``target``."""
    import pyarrow.parquet as pq

    j = spark.sparkContext._jvm
    input_file = table.io().newInputFile(location)
    length = int(input_file.getLength())
    stream = input_file.newStream()
    copy_file = j.java.io.RandomAccessFile(target, "rw")
    try:
        copy_file.setLength(length)
        # FileChannel.transferFrom loops in the JVM; a byte[] would not do: py4j passes arrays by value.
        source, sink = j.java.nio.channels.Channels.newChannel(stream), copy_file.getChannel()

        def copy(start: int, size: int) -> None:
            stream.seek(start)
            while size > 0:
                moved = int(sink.transferFrom(source, start, size))
                if moved <= 0:
                    raise NotParquetError(f"{location} ended before byte {start + size}")
                start += moved
                size -= moved

        if length < 12:
            raise NotParquetError(f"{location} is too short for a Parquet file")
        stream.seek(length - 8)
        tail = _read_n(stream, 8)
        footer = int.from_bytes(tail[:4], "little")
        if tail[4:] != b"PAR1" or footer + 12 > length:
            raise NotParquetError(f"{location} is not a Parquet file")
        copy(0, 4)
        copy(length - 8 - footer, footer + 8)
        metadata = pq.read_metadata(target)
        for start, size in _merged(column_chunk_ranges(metadata, set(field_ids), set(names))):
            copy(start, size)
    finally:
        copy_file.close()
        stream.close()
    return target


def _leaf_count(arrow_type: Any) -> int:
    import pyarrow.types as t

    if t.is_struct(arrow_type):
        return sum(_leaf_count(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if t.is_map(arrow_type):
        return _leaf_count(arrow_type.key_type) + _leaf_count(arrow_type.item_type)
    if t.is_list(arrow_type) or t.is_large_list(arrow_type) or t.is_fixed_size_list(arrow_type):
        return _leaf_count(arrow_type.value_type)
    return 1


def column_chunk_ranges(metadata: Any, field_ids: set[int], names: set[str]) -> list[tuple[int, int]]:
    """(offset, length) of every column chunk, in every row group, of the top-level columns of the Parquet file
    ``metadata`` (pyarrow's ``FileMetaData``) whose field id is in ``field_ids`` or name in ``names``. Leaves are
    assigned to top-level columns by their order (a dotted leaf path cannot tell ``a.b`` the column from ``b`` in
    ``a``)."""
    schema = metadata.schema.to_arrow_schema()
    leaves: list[int] = []
    first = 0
    for f in schema:
        count = _leaf_count(f.type)
        raw = (f.metadata or {}).get(b"PARQUET:field_id")
        if f.name in names or (raw is not None and int(raw) in field_ids):
            leaves.extend(range(first, first + count))
        first += count
    out = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for leaf in leaves:
            chunk = row_group.column(leaf)
            start = chunk.data_page_offset
            if chunk.has_dictionary_page and chunk.dictionary_page_offset:
                start = min(start, chunk.dictionary_page_offset)
            out.append((int(start), int(chunk.total_compressed_size)))
    return out


def _merged(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for start, size in sorted(ranges):
        if out and start <= out[-1][0] + out[-1][1]:
            last_start, last_size = out[-1]
            out[-1] = (last_start, max(last_size, start + size - last_start))
        else:
            out.append((start, size))
    return out


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
