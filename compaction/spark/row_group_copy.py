"""Row-group copy: the files of a planned rewrite whose rows cannot change (compaction.core.row_group_copy) are
concatenated at the Parquet level (column chunks copied byte for byte with their column and offset indexes and bloom
filters, no decoding) into new files of the target size, which the rewrite's commit adds in place of the sources.

Runs in the driver JVM through Iceberg's FileIO (S3FileIO, HadoopFileIO, ...) and the Parquet library Iceberg's
runtime ships (shaded). The copies are plain byte streams; a file's footer is read back before it is committed.
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from compaction.core.row_group_copy import CopyCandidate, CopyPlan, plan_row_group_copies
from compaction.spark import jvm as J
from compaction.spark.partition_files import _iterate


def _java_items(java_iterable: Any) -> list[Any]:
    """A Java ``Iterable`` (a list, a set, a key set) as a Python list."""
    return list(_iterate(java_iterable))

_LOG = logging.getLogger(__name__)

_PARQUET = "org.apache.iceberg.shaded.org.apache.parquet"
_PLAINTEXT_ENCRYPTION = "org.apache.iceberg.encryption.PlaintextEncryptionManager"
#: Iceberg's reserved field ids of the v3 row-lineage columns (MetadataColumns.ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER).
ROW_ID_FIELD_ID = 2147483540
LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID = 2147483539
_LINEAGE_FIELD_IDS = frozenset({ROW_ID_FIELD_ID, LAST_UPDATED_SEQUENCE_NUMBER_FIELD_ID})
_COPY_THREADS = 4


@dataclass(frozen=True)
class RowGroupCopySettings:
    """The policy's ``compaction.row-group-copy.*`` for one rewrite."""

    enabled: bool
    min_row_group_bytes: int


@dataclass
class CopiedFile:
    """One new data file holding the row groups of ``sources`` (Java DataFiles), not yet committed."""

    sources: list[Any]
    added: Any


class _Parquet:
    """The shaded Parquet classes and Iceberg's package-private ``ParquetIO`` adapters, looked up once per call."""

    def __init__(self, spark: Any, table: Any) -> None:
        self.spark = spark
        self.j = J.jvm(spark)
        loader = table.getClass().getClassLoader()
        parquet_io = self.j.java.lang.Class.forName("org.apache.iceberg.parquet.ParquetIO", True, loader)
        self._file_in = self._file_out = None
        for method in parquet_io.getDeclaredMethods():
            params = [str(p.getName()) for p in method.getParameterTypes()]
            if str(method.getName()) != "file" or len(params) != 1:
                continue
            method.setAccessible(True)
            if params[0] == "org.apache.iceberg.io.InputFile":
                self._file_in = method
            elif params[0] == "org.apache.iceberg.io.OutputFile":
                self._file_out = method
        if self._file_in is None or self._file_out is None:
            raise RuntimeError("this Iceberg runtime has no ParquetIO.file adapters")
        self.hadoop = getattr(self.j, _PARQUET).hadoop

    def _invoke(self, method: Any, arg: Any) -> Any:
        argv = J.gateway(self.spark).new_array(self.j.java.lang.Object, 1)
        argv[0] = arg
        return method.invoke(None, argv)

    def input_file(self, iceberg_input: Any) -> Any:
        return self._invoke(self._file_in, iceberg_input)

    def output_file(self, iceberg_output: Any) -> Any:
        return self._invoke(self._file_out, iceberg_output)

    def footer(self, iceberg_input: Any) -> Any:
        no_filter = getattr(self.j, _PARQUET).format.converter.ParquetMetadataConverter.NO_FILTER
        return self.hadoop.ParquetFileReader.readFooter(self.input_file(iceberg_input), no_filter)


class _SchemaCheck:
    """Whether a file's Parquet schema holds exactly the table's current columns (field ids and primitive types),
    cached per distinct Parquet schema."""

    def __init__(self, spark: Any, table: Any) -> None:
        self.j = J.jvm(spark)
        type_util = self.j.org.apache.iceberg.types.TypeUtil
        self._type_util = type_util
        self._table_fields = type_util.indexById(table.schema().asStruct())
        self._table_ids = {int(i) for i in _java_items(self._table_fields.keySet())}
        self._cache: dict[str, bool] = {}

    def matches(self, schema_key: str, message_type: Any) -> bool:
        if schema_key not in self._cache:
            self._cache[schema_key] = self._matches(message_type)
        return self._cache[schema_key]

    def _matches(self, message_type: Any) -> bool:
        parquet_schema_util = self.j.org.apache.iceberg.parquet.ParquetSchemaUtil
        if not parquet_schema_util.hasIds(message_type):
            return False  # read by a name mapping: its columns are not known by id
        fields = self._type_util.indexById(parquet_schema_util.convert(message_type).asStruct())
        ids = {int(i) for i in _java_items(fields.keySet())} - _LINEAGE_FIELD_IDS
        if ids != self._table_ids:
            return False
        for field_id in ids:
            ours, theirs = self._table_fields.get(field_id).type(), fields.get(field_id).type()
            if ours.isPrimitiveType() and not ours.equals(theirs):
                return False
            if ours.isPrimitiveType() != theirs.isPrimitiveType():
                return False
        return True


def _keeps_row_lineage(footer: Any, message_type: Any) -> bool:
    """v3: whether every row group holds ``_row_id`` and ``_last_updated_sequence_number`` for every row (no null:
    a null takes its value from the file, which a copy changes)."""
    names = set()
    for column in _java_items(message_type.getFields()):
        if column.getId() is not None and int(column.getId().intValue()) in _LINEAGE_FIELD_IDS:
            names.add(str(column.getName()))
    if len(names) != 2:
        return False
    for block in _java_items(footer.getBlocks()):
        rows = int(block.getRowCount())
        for chunk in _java_items(block.getColumns()):
            if str(chunk.getPath().toDotString()) not in names:
                continue
            stats = chunk.getStatistics()
            if stats is None or not stats.isNumNullsSet() or int(stats.getNumNulls()) != 0:
                return False
            if int(chunk.getValueCount()) != rows:
                return False
    return True


def _candidates(spark: Any, table: Any, parquet: _Parquet, schema_check: _SchemaCheck, tasks: list[Any],
                output_spec_id: int, format_version: int,
                min_row_group_bytes: int) -> tuple[list[CopyCandidate], dict[str, Any]]:
    """The group's files as copy candidates (their footers read only when nothing else rules them out: a file
    smaller than ``min_row_group_bytes`` cannot hold row groups that large, and is judged by its size alone). The
    footers are read on a few threads: each is a round trip to storage."""
    io = table.io()
    footers: dict[str, Any] = {}

    def candidate(task: Any) -> CopyCandidate:
        f = task.file()
        path, size = str(f.location()), int(f.fileSizeInBytes())
        has_deletes = int(task.deletes().size()) > 0
        on_spec = int(f.specId()) == output_spec_id
        is_parquet = str(f.format().name()) == "PARQUET"
        row_groups = row_group_bytes = 0
        schema_key, matches, lineage = "", False, format_version < 3
        if size < min_row_group_bytes:
            row_groups, row_group_bytes = 1, size  # at most its size per row group: below the minimum anyway
        elif is_parquet and not has_deletes and on_spec:
            try:
                footer = parquet.footer(io.newInputFile(path, size))
            except Exception as e:  # noqa: BLE001 - the decoding rewrite reads the file and reports what fails
                _LOG.info("row-group copy: footer of %s not read (%s); decoding it", path, type(e).__name__)
            else:
                message_type = footer.getFileMetaData().getSchema()
                schema_key = str(message_type.toString())
                blocks = _java_items(footer.getBlocks())
                row_groups = len(blocks)
                row_group_bytes = sum(int(b.getCompressedSize()) for b in blocks)
                matches = schema_check.matches(schema_key, message_type)
                if format_version >= 3:
                    lineage = _keeps_row_lineage(footer, message_type)
                footers[path] = footer
        return CopyCandidate(
            path=path, size_bytes=size, row_groups=row_groups, row_group_bytes=row_group_bytes,
            schema_key=schema_key, has_deletes=has_deletes, on_output_spec=on_spec and is_parquet,
            matches_current_schema=matches, keeps_row_lineage=lineage)

    with concurrent.futures.ThreadPoolExecutor(max_workers=_COPY_THREADS, thread_name_prefix="rg-footer") as pool:
        candidates = list(pool.map(candidate, tasks))
    return candidates, footers


def _copy(spark: Any, table: Any, parquet: _Parquet, sources: list[Any], footers: dict[str, Any]) -> Any:
    """Concatenate the row groups of ``sources`` (same partition, spec and Parquet schema) into one new data file;
    returns its DataFile. The new file is deleted if anything fails before it is returned."""
    j = J.jvm(spark)
    io = table.io()
    first = sources[0]
    spec = table.specs().get(first.specId())
    name = f"00000-0-{uuid.uuid4()}-rgcopy-00001.parquet"
    # As Iceberg's writers name files: no partition path on an unpartitioned spec (it would leave an empty path
    # segment, "data//name", which S3 clients reject).
    provider = table.locationProvider()
    location = str(provider.newDataLocation(name) if spec.isUnpartitioned()
                   else provider.newDataLocation(spec, first.partition(), name))
    first_footer = footers[str(first.location())]
    message_type = first_footer.getFileMetaData().getSchema()
    mode = parquet.hadoop.ParquetFileWriter.Mode.CREATE
    writer = parquet.hadoop.ParquetFileWriter(parquet.output_file(io.newOutputFile(location)), message_type, mode,
                                              j.java.lang.Long.MAX_VALUE, 0)
    try:
        writer.start()
        read_options = getattr(j, _PARQUET).ParquetReadOptions.builder().build()
        expected_rows = expected_groups = 0
        for source in sources:
            source_input = parquet.input_file(io.newInputFile(str(source.location()), int(source.fileSizeInBytes())))
            stream = source_input.newStream()
            reader = parquet.hadoop.ParquetFileReader.open(source_input, footers[str(source.location())],
                                                           read_options, stream)
            try:
                for block in _java_items(reader.getRowGroups()):
                    writer.startBlock(block.getRowCount())
                    for chunk in _java_items(block.getColumns()):
                        descriptor = message_type.getColumnDescription(chunk.getPath().toArray())
                        writer.appendColumnChunk(descriptor, stream, chunk, reader.readBloomFilter(chunk),
                                                 reader.readColumnIndex(chunk), reader.readOffsetIndex(chunk))
                    writer.endBlock()
                    expected_rows += int(block.getRowCount())
                    expected_groups += 1
            finally:
                reader.close()
        writer.end(first_footer.getFileMetaData().getKeyValueMetaData())
        # Read the new file's footer back from storage: what readers will see, and where its metrics come from.
        new_input = io.newInputFile(location)
        length = int(new_input.getLength())
        footer = parquet.footer(io.newInputFile(location, length))
        blocks = _java_items(footer.getBlocks())
        rows = sum(int(b.getRowCount()) for b in blocks)
        if rows != expected_rows or len(blocks) != expected_groups:
            raise RuntimeError(f"row-group copy {location}: read back {rows} rows in {len(blocks)} row groups, "
                               f"wrote {expected_rows} in {expected_groups}")
        iceberg_parquet = j.org.apache.iceberg.parquet.ParquetUtil
        metrics = iceberg_parquet.footerMetrics(footer, j.java.util.stream.Stream.empty(),
                                                j.org.apache.iceberg.MetricsConfig.forTable(table))
        return (j.org.apache.iceberg.DataFiles.builder(spec).withPath(location)
                .withFormat(j.org.apache.iceberg.FileFormat.PARQUET).withPartition(first.partition())
                .withFileSizeInBytes(length).withMetrics(metrics)
                .withSplitOffsets(iceberg_parquet.getSplitOffsets(footer)).build())
    except Exception:
        try:
            writer.abort()
        except Exception:  # noqa: BLE001 - best effort: the file is deleted below
            pass
        delete_quietly(table, [location])
        raise


def delete_quietly(table: Any, locations: list[str]) -> None:
    io = table.io()
    for location in locations:
        try:
            io.deleteFile(location)
        except Exception:  # noqa: BLE001 - a file left is an orphan, never referenced
            pass


class PendingCopies:
    """Row-group copies running on a thread pool of their own while the decoding rewrite runs on the cluster (the
    copies are I/O in the driver, the rewrite works in the executors); each starts as soon as it is added."""

    def __init__(self, spark: Any, table: Any, parquet: _Parquet | None = None) -> None:
        self._spark, self._table, self._parquet = spark, table, parquet
        self._work: list[tuple[list[Any], dict[str, Any]]] = []
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._futures: list[concurrent.futures.Future[Any]] = []
        self._started = time.monotonic()
        self._finished = self._started

    def add(self, sources: list[Any], footers: dict[str, Any]) -> None:
        """Start copying ``sources`` (their ``footers`` read) into one new file."""
        if self._parquet is None:
            raise RuntimeError("row-group copies need the Parquet classes")
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=_COPY_THREADS, thread_name_prefix="rg-copy")
            self._started = time.monotonic()
        self._work.append((sources, footers))
        future = self._pool.submit(_copy, self._spark, self._table, self._parquet, sources, footers)
        future.add_done_callback(self._done)
        self._futures.append(future)

    def _done(self, _future: concurrent.futures.Future[Any]) -> None:
        self._finished = max(self._finished, time.monotonic())

    @property
    def sources(self) -> int:
        return sum(len(sources) for sources, _ in self._work)

    def _wait(self) -> tuple[list[CopiedFile], list[BaseException]]:
        if self._pool is None:
            return [], []
        concurrent.futures.wait(self._futures)
        self._pool.shutdown()
        copies = [CopiedFile(sources=sources, added=f.result())
                  for (sources, _), f in zip(self._work, self._futures) if f.exception() is None]
        return copies, [e for e in (f.exception() for f in self._futures) if e is not None]

    def result(self) -> list[CopiedFile]:
        """The copies once all are written; on any failure every copy written is deleted and the failure raised."""
        copies, failed = self._wait()
        if failed:
            delete_quietly(self._table, [str(c.added.location()) for c in copies])
            raise failed[0]
        if copies:
            _LOG.info("row-group copy: %d files into %d in %.1f s", self.sources, len(copies),
                      self._finished - self._started)
        return copies

    def discard(self) -> None:
        """Wait for the copies and delete every file they wrote (the rewrite they belong to failed)."""
        copies, _ = self._wait()
        delete_quietly(self._table, [str(c.added.location()) for c in copies])


def copy_eligible(spark: Any, table: Any, groups: list[Any], *, settings: RowGroupCopySettings,
                  planner: Any, decode: Callable[[Any], None]) -> PendingCopies:
    """Split the planned rewrite ``groups``, one after the other: each group's files whose row groups are copied
    start copying as soon as the group is split, and what is left to decode (the group, or the group reduced to its
    other files; nothing when none is left) goes to ``decode`` at once, so that the cluster decodes a group while
    the footers of the next are read. Returns the copies under way; if splitting fails they are deleted and the
    failure raised (the groups already given to ``decode`` are the caller's)."""
    if not settings.enabled or not groups:
        return _decode_all(spark, table, groups, decode)
    # A group none of whose files may qualify is decoded at once: the cluster starts on it while the others are
    # looked at.
    splittable: list[tuple[Any, list[Any]]] = []
    qualifying = 0
    for group in groups:
        tasks = _java_items(group.fileScanTasks())
        count = sum(1 for t in tasks if _may_qualify(t, settings.min_row_group_bytes))
        if count:
            splittable.append((group, tasks))
            qualifying += count
        else:
            decode(group)
    groups = [group for group, _ in splittable]
    task_lists = [tasks for _, tasks in splittable]
    if qualifying < 2:
        return _decode_all(spark, table, groups, decode)  # no output could hold two files: no footer to read
    if not J.is_instance(table.encryption(), _PLAINTEXT_ENCRYPTION):
        return _decode_all(spark, table, groups, decode)  # an encrypted table's files are not copied byte for byte
    try:
        parquet = _Parquet(spark, table)
        schema_check = _SchemaCheck(spark, table)
        format_version = int(J.jvm(spark).org.apache.iceberg.TableUtil.formatVersion(table))
    except Exception as e:  # noqa: BLE001 - an Iceberg runtime without these classes: every file is decoded
        _LOG.warning("row-group copy unavailable with this Iceberg runtime (%s); decoding every file", e)
        return _decode_all(spark, table, groups, decode)
    pending = PendingCopies(spark, table, parquet)
    decoded = 0
    try:
        for group, tasks in zip(groups, task_lists):
            candidates, footers = _candidates(spark, table, parquet, schema_check, tasks, int(group.outputSpecId()),
                                              format_version, settings.min_row_group_bytes)
            copy_plan: CopyPlan = plan_row_group_copies(
                candidates, target_file_size_bytes=int(group.maxOutputFileSize()),
                min_row_group_bytes=settings.min_row_group_bytes)
            if not copy_plan.outputs:
                decoded += 1
                decode(group)
                continue
            by_path = {str(t.file().location()): t for t in tasks}
            for output in copy_plan.outputs:
                pending.add([by_path[p].file() for p in output], footers)
            if copy_plan.decoded:
                decoded += 1
                decode(_reduced_group(spark, group, planner, [by_path[p] for p in copy_plan.decoded]))
    except BaseException:
        pending.discard()
        raise
    if pending.sources:
        _LOG.info("row-group copy: %d files into new files (no decoding); %d file groups decoded", pending.sources,
                  decoded)
    return pending


def _decode_all(spark: Any, table: Any, groups: list[Any], decode: Callable[[Any], None]) -> PendingCopies:
    for group in groups:
        decode(group)
    return PendingCopies(spark, table)


def _may_qualify(task: Any, min_row_group_bytes: int) -> bool:
    """What the plan alone says of a file: no delete applies to it and it is large enough to hold row groups of
    ``min_row_group_bytes`` (its footer decides the rest)."""
    return int(task.deletes().size()) == 0 and int(task.file().fileSizeInBytes()) >= min_row_group_bytes


def _reduced_group(spark: Any, group: Any, planner: Any, tasks: list[Any]) -> Any:
    """``group`` with only ``tasks``: the same file group info, output spec and size limit, its input split size
    and expected output file count recomputed by the action's planner for the smaller input."""
    j = J.jvm(spark)
    task_list = j.java.util.ArrayList()
    for t in tasks:
        task_list.add(t)
    input_size = sum(int(t.file().fileSizeInBytes()) for t in tasks)
    boxed = j.java.lang.Long.valueOf(input_size)
    split_size = int(J.call_declared(spark, planner, "inputSplitSize", boxed))
    expected = int(J.call_declared(spark, planner, "expectedOutputFiles", boxed))
    return j.org.apache.iceberg.actions.RewriteFileGroup(group.info(), task_list, int(group.outputSpecId()),
                                                          int(group.maxOutputFileSize()), split_size, expected)
