"""MINOR compaction of one partition: equality deletes converted into position deletes (v2) or deletion vectors
(v3), several position deletes of one data file merged into one, dangling deletes removed. Data files are not
rewritten here: the fragment merge that precedes this step is Iceberg's rewrite action (compaction.spark.job).

Iceberg rules this module relies on (spec, "Scan Planning"; docs/validation.md):

* an equality delete with data sequence number S applies to data files with data sequence < S of its own spec and
  partition, or of every partition when its spec is unpartitioned (a "global" delete); ``decide_work`` applies
  these rules to the partition's metadata through :mod:`compaction.core.applicability`, the planner's rule too;
* a position delete / DV names its data file, so once written for a data file it keeps applying to exactly that
  file: the new files are committed in a ``RowDelta``, whose sequence number is above every targeted data file's
  (a position delete applies to data files with sequence <= its own);
* v3 allows one DV per data file: a data file's new DV is the union of its old DV, its old position deletes and
  the converted rows, and replaces them in the same commit;
* removing an equality delete is only safe while every data file it applied to is still live and no data file
  with a lower sequence number was added to its scope since the start. Iceberg checks the first inside the
  commit (``validateDataFilesExist`` over every targeted file, so a concurrent MAJOR makes our commit fail and
  retry); we check the second ourselves after the commit (a concurrent rewrite that kept its starting sequence
  number) and roll back if it ever happens.

Writing the new files: :mod:`compaction.spark.minor_write`.

Why a ``RowDelta`` (operation ``delete``) rather than a ``RewriteFiles``: only ``RowDelta`` validates that the
targeted data files still exist within Iceberg's commit retry loop, and a concurrent MAJOR only notices new
position deletes for the files it replaces when they come in a ``delete``/``overwrite`` snapshot.

How rows are found: small work (``compaction.minor.driver-match-max-rows``) is matched on the driver with pyarrow
(:mod:`compaction.spark.driver_match`: a Spark job's fixed cost is most of a small MINOR); otherwise Spark reads the
equality columns of the targeted data files as plain Parquet, by field id,
with ``_metadata.row_index`` as the position (or, where plain Parquet could disagree with Iceberg's reader, through
Iceberg's reader with ``_file``/``_pos``/``_deleted``: see ``raw_read_blocker``), and joins them null-safely with
the equality-delete rows on each file's equality columns, restricted to the (data file, delete file) pairs the
spec's rules say apply.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

from compaction.core.applicability import MinorScope, PlacedData, PlacedDelete, decide_minor
from compaction.core.errors import CommitConflictError, CommitValidationError, UnsupportedTableError
from compaction.core.model import DataFileInfo, DeleteContent, DeleteFileInfo, PartitionKey
from compaction.core.policy import MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT
from compaction.spark import jvm as J
from compaction.spark.compat import read_at_snapshot, snapshot_changes
from compaction.spark.driver_match import (
    DriverMatchUnsupported,
    KeyColumns,
    OpenFile,
    equality_reads,
    match_equality_deletes,
    read_position_deletes,
)
from compaction.spark.equality_deletes import arrow_type
from compaction.spark.file_io_reads import (
    NotParquetError,
    read_parquet_through_file_io,
    sparse_local_copy,
    spark_can_read,
)
from compaction.spark.major import PLAN_PROPERTY, TASK_PROPERTY, find_tagged_snapshot
from compaction.spark.minor_write import (  # noqa: F401  (writers re-exported: the test rig imports them from here)
    describe_files,
    partition_scoped_output,
    write_deletion_vectors,
    write_position_delete_files,
)
from compaction.spark.gate import commit_window, warm_history
from compaction.spark.partition_files import (
    PartitionFiles,
    _iterate,
    added_data_files,
    delete_kind,
    delete_ref,
    position_delete_target,
    scan_partition,
    snapshots_between,
)

KIND_PROPERTY = "icecompact.kind"

_EMPTY_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):///")

# Spark types the raw Parquet read of an equality-delete file can match by field id. UUID columns are stored as
# fixed[16] while Iceberg's Spark reader shows them as strings, so they cannot be joined without a conversion.
_UNSUPPORTED_EQUALITY_TYPES = ("UUID", "STRUCT", "LIST", "MAP", "VARIANT", "GEOMETRY", "GEOGRAPHY", "UNKNOWN")


@dataclass
class MinorOutcome:
    base_snapshot_id: int | None
    commit_snapshot_ids: list[int]
    converted_equality_deletes: int
    converted_rows: int
    merged_position_deletes: int
    removed_delete_files: int
    added_delete_files: int
    before: dict[str, int]
    after: dict[str, int]
    rewritten_data_files: int = 0  # the conversion never rewrites data files (the fragment merge before it does)
    added_data_files: int = 0


@dataclass
class _Work:
    """What one attempt will replace, decided from the partition's files at the base snapshot."""

    equality: dict[tuple[str, int], Any]  # refs of the equality deletes to convert -> DeleteFile
    eq_targets: dict[str, set[tuple[str, int]]]  # data path -> equality deletes (of ``equality``) applying to it
    positional: dict[tuple[str, int], Any]  # position deletes / DVs to absorb -> DeleteFile
    data_files: dict[str, Any]  # data files that get a new position delete / DV (path -> DataFile)
    dangling: dict[tuple[str, int], Any]  # position deletes naming no live data file
    described: dict[str, dict[str, Any]] = field(default_factory=dict)  # data path -> ContentFileParser JSON


def minor_scope(spark: Any, table: Any, key: PartitionKey, files: PartitionFiles, *,
                whole_table: bool) -> MinorScope:
    """``files`` (Iceberg's Java files of a scan filtered on ``key``'s partition) in the core's file model, with what
    the applicability rule reads (:mod:`compaction.core.applicability`) and nothing else: every field is a py4j round
    trip per file, so sizes and record counts are left at 0 and an equality delete's file sequence number at None
    (the rule never looks at them).

    Partitions: files of ``key``'s own spec are the partition's (the scan filter is exactly the partition for its
    own spec), so they get ``key``'s values without decoding. Another spec's files are decoded only when the scope
    holds both data files and position deletes / DVs of that spec: no other rule compares partitions."""
    key_values = tuple(f.value for f in key.fields)
    spec_of_data = {path: int(f.specId()) for path, f in files.data.items()}
    deletes: list[tuple[tuple[str, int], Any, int, DeleteContent, str | None]] = []
    for ref, d in files.deletes.items():
        kind = delete_kind(d)
        target = position_delete_target(spark, d) if kind is not DeleteContent.EQUALITY else None
        deletes.append((ref, d, int(d.specId()), kind, target))
    decode = {spec for _, _, spec, kind, _ in deletes if spec != key.spec_id and kind is not DeleteContent.EQUALITY}
    decode &= set(spec_of_data.values())
    decoder = J.PartitionDecoder(spark, table.specs()) if decode else None

    def partition(spec_id: int, f: Any) -> tuple[Any, ...] | None:
        if spec_id == key.spec_id:
            return key_values
        if decoder is not None and spec_id in decode:
            return decoder.values(spec_id, f.partition())
        return None

    data = tuple(
        PlacedData(DataFileInfo(path, 0, 0, files.data_sequence[path], _opt_int(f.fileSequenceNumber())),
                   spec_of_data[path], partition(spec_of_data[path], f))
        for path, f in files.data.items()
    )
    placed = tuple(
        PlacedDelete(
            DeleteFileInfo(
                path=ref[0], content=kind, size_bytes=0, record_count=0,
                data_sequence_number=int(d.dataSequenceNumber()),
                file_sequence_number=_opt_int(d.fileSequenceNumber()) if kind is not DeleteContent.EQUALITY else None,
                referenced_data_file=target, content_offset=ref[1] if ref[1] >= 0 else None,
            ),
            spec_id, partition(spec_id, d))
        for ref, d, spec_id, kind, target in deletes
    )
    return MinorScope(key, data, placed, whole_table=whole_table,
                      partition_scoped_output=partition_scoped_output(table))


def _opt_int(value: Any) -> int | None:
    return int(value) if value is not None else None


def decide_work(spark: Any, table: Any, key: PartitionKey, files: PartitionFiles, *, whole_table: bool) -> _Work:
    """Which delete files to convert or merge and which data files get a new position delete / DV: the files in the
    core's model (:func:`minor_scope`), decided by :func:`compaction.core.applicability.decide_minor` (the rule the
    planner applies too, so both decide the same on the same files), mapped back to Iceberg's Java files."""
    decision = decide_minor(minor_scope(spark, table, key, files, whole_table=whole_table))
    return _Work(
        equality={ref: files.deletes[ref] for ref in decision.equality},
        eq_targets={path: set(refs) for path, refs in decision.eq_targets.items()},
        positional={ref: files.deletes[ref] for ref in decision.absorbed},
        data_files={path: files.data[path] for path in decision.data_files},
        dangling={ref: files.deletes[ref] for ref in decision.dangling},
    )


# Reading -----------------------------------------------------------------------------------------------------------
def _glob_escape(path: str) -> str:
    # spark.read.parquet globs its paths; Iceberg's URL-encoding of partition values leaves '*' unescaped.
    out = []
    for ch in path:
        if ch in "*?[]{}\\":
            out.append("\\")
        out.append(ch)
    return "".join(out)


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def merge_works(works: Iterable[_Work]) -> _Work:
    """One work over several partitions (their files are disjoint), for one Spark job per job group."""
    merged = _Work({}, {}, {}, {}, {})
    for w in works:
        merged.equality.update(w.equality)
        merged.positional.update(w.positional)
        merged.data_files.update(w.data_files)
        merged.dangling.update(w.dangling)
        for path, refs in w.eq_targets.items():
            merged.eq_targets.setdefault(path, set()).update(refs)
    return merged


def equality_ids(d: Any) -> tuple[int, ...]:
    # One py4j call: iterating the Java list would cost a round trip per element.
    text = str(d.equalityFieldIds().toString()).strip("[] ")
    return tuple(int(part) for part in text.split(",") if part.strip())


def _equality_columns(table: Any, d: Any) -> tuple[tuple[int, str], ...]:
    schema = table.schema()
    out = []
    for fid in equality_ids(d):
        column = schema.findColumnName(int(fid))
        if column is None:
            raise UnsupportedTableError(f"equality delete {d.location()} uses field id {fid}, which is no longer in the "
                                        "table schema")
        ftype = str(schema.findType(int(fid)).typeId().toString())
        if ftype in _UNSUPPORTED_EQUALITY_TYPES:
            raise UnsupportedTableError(f"equality deletes on a {ftype.lower()} column ({column}) are not converted")
        out.append((int(fid), str(column)))
    return tuple(out)


def _check_formats(files: Iterable[Any], what: str) -> None:
    for f in files:
        fmt = str(f.format().toString()).upper()
        if fmt != "PARQUET":
            raise UnsupportedTableError(f"{what} {f.location()} is {fmt}: MINOR reads Parquet delete files only")


def _table_metadata(spark: Any, table: Any) -> dict[str, Any]:
    """The table's current metadata as JSON (schemas with their field ids and types, specs, properties)."""
    import json

    return dict(json.loads(str(J.jvm(spark).org.apache.iceberg.TableMetadataParser.toJson(
        table.operations().current()))))


def raw_read_blocker(spark: Any, table: Any, work: _Work, field_ids: Iterable[int]) -> str | None:
    """Why the data files' equality columns cannot be read as plain Parquet by field id (then Iceberg's reader is
    used), or None: see :func:`_field_id_read_blocker`; besides, Spark's file sources must open the files, and no
    equality column may ever have had another type (promotion)."""
    if not spark_can_read(spark, table, work.eq_targets):
        # S3FileIO tables (REST catalogs on S3): Spark's file sources have no file system or credentials for them.
        return "data files on storage Spark's file sources cannot open (read through the table's FileIO)"
    metadata = _table_metadata(spark, table)
    blocker = _field_id_read_blocker(spark, table, work, field_ids, metadata)
    if blocker is not None:
        return blocker
    promoted = _promoted_field_ids(metadata, field_ids)
    if promoted:
        return f"equality column {min(promoted)} changed type"
    return None


def _field_id_read_blocker(spark: Any, table: Any, work: _Work, field_ids: Iterable[int],
                           metadata: Mapping[str, Any]) -> str | None:
    """Why reading the data files' Parquet columns by field id could give other values than Iceberg's reader, or
    None. The same values need every targeted data file to be Parquet, the table to have no name mapping (files
    without field ids), no equality column to be an identity-partition source (Iceberg's reader takes those from the
    partition tuple, imported files may lack the column) and none to have an ``initial-default`` (v3: Iceberg fills
    it for older files)."""
    describe_files(spark, table, {p: work.data_files[p] for p in work.eq_targets}, work.described)
    formats = {str(work.described[p].get("file-format", "")).upper() for p in work.eq_targets}
    if formats - {"PARQUET"}:
        return f"data files in {sorted(formats - {'PARQUET'})} format"
    if "schema.name-mapping.default" in (metadata.get("properties") or {}):
        return "the table has a name mapping"
    ids = {int(i) for i in field_ids}
    for spec in metadata.get("partition-specs", []):
        for f in spec.get("fields", []):
            if f.get("transform") == "identity" and int(f.get("source-id", -1)) in ids:
                return f"equality column {f.get('source-id')} is an identity partition source"
    for schema in metadata.get("schemas", []):
        for f in schema.get("fields", []):
            if int(f.get("id", -1)) in ids and f.get("initial-default") is not None:
                return f"equality column {f.get('id')} has an initial default"
    return None


def _promoted_field_ids(metadata: Mapping[str, Any], field_ids: Iterable[int]) -> set[int]:
    """The top-level fields among ``field_ids`` whose type differs between the table's schemas: a promotion
    (int -> long, float -> double, decimal(P,S) -> decimal(P',S)), so files written before it hold the narrower
    physical type. Iceberg's readers widen on read; Spark 3.5's plain Parquet reader cannot (an int32 column read
    as bigint fails in dictionary decoding)."""
    import json

    ids = {int(i) for i in field_ids}
    seen: dict[int, str] = {}
    promoted: set[int] = set()
    for schema in metadata.get("schemas", []):
        for f in schema.get("fields", []):
            fid = int(f.get("id", -1))
            if fid in ids and seen.setdefault(fid, json.dumps(f.get("type"), sort_keys=True)) != json.dumps(
                    f.get("type"), sort_keys=True):
                promoted.add(fid)
    return promoted


# Iceberg types whose values the driver compares exactly as Iceberg's readers do. Floats are left to Spark: Iceberg
# compares them as Java's Float.equals does (NaN equal to NaN, -0.0 unequal to 0.0), which the driver's Arrow hash
# set is not checked against.
_DRIVER_MATCH_TYPES = frozenset({"BOOLEAN", "INTEGER", "LONG", "DATE", "TIME", "TIMESTAMP", "TIMESTAMP_NANO",
                                 "STRING", "BINARY", "DECIMAL", "FIXED"})


def equality_matched_positions(spark: Any, table: Any, table_ref: str, base_snapshot_id: int, row_filter: Any,
                               work: _Work, *, driver_max_rows: int) -> dict[str, set[int]]:
    """Positions (data path -> positions) of the rows the converted equality deletes delete: matched on the driver
    when the work is small (:func:`driver_matched_positions`), else by :func:`matched_positions`' Spark job."""
    if not work.eq_targets:
        return {}
    driven = driver_matched_positions(spark, table, work, max_rows=driver_max_rows)
    if driven is not None:
        return driven
    return collect_positions(matched_positions(spark, table, table_ref, base_snapshot_id, row_filter, work))


def driver_matched_positions(spark: Any, table: Any, work: _Work, *, max_rows: int,
                             through_file_io: bool = False) -> dict[str, set[int]] | None:
    """:func:`compaction.spark.driver_match.match_equality_deletes` over ``work``, or None when the Spark job must
    do it: more than ``max_rows`` rows in the data files and equality deletes read, a key column nested or of a type
    the driver does not compare (``_DRIVER_MATCH_TYPES``), or data files whose columns a field-id read could get
    wrong (:func:`_field_id_read_blocker`). Files are read by local path, or through the table's FileIO (only the
    key columns' chunks are fetched, see :func:`_driver_files`; ``through_file_io``: even where a local path would
    do)."""
    import logging

    if max_rows <= 0 or not work.eq_targets:
        return None
    _check_formats(work.equality.values(), "equality delete file")
    struct = table.schema().asStruct()
    keys: dict[tuple[int, ...], KeyColumns | None] = {}
    key_of: dict[tuple[str, int], KeyColumns] = {}
    for ref in sorted(work.equality):
        ids = equality_ids(work.equality[ref])
        if ids not in keys:
            types = []
            for fid in ids:
                top = struct.field(int(fid))  # top-level fields only: a nested one is None
                if top is None or str(top.type().typeId().toString()) not in _DRIVER_MATCH_TYPES:
                    types = None
                    break
                types.append(arrow_type(top.type()))
            keys[ids] = KeyColumns(ids, tuple(types)) if types else None
        key = keys[ids]
        if key is None:
            return None
        key_of[ref] = key
    describe_files(spark, table, {p: work.data_files[p] for p in work.eq_targets}, work.described)
    rows = sum(int(work.described[p].get("record-count", 0)) for p in work.eq_targets)
    rows += sum(int(work.equality[ref].recordCount()) for ref in key_of)
    if rows > max_rows:
        return None
    field_ids = {fid for key in key_of.values() for fid in key.field_ids}
    if _field_id_read_blocker(spark, table, work, field_ids, _table_metadata(spark, table)) is not None:
        return None
    columns = {location: (ids, frozenset[str]()) for location, ids in equality_reads(work.eq_targets, key_of).items()}
    try:
        with _driver_files(spark, table, columns, through_file_io) as open_file:
            return match_equality_deletes(open_file, work.eq_targets, key_of)
    except DriverMatchUnsupported as e:
        logging.getLogger(__name__).info("equality deletes matched in Spark, not on the driver: %s", e)
        return None


#: Files fetched at once through the table's FileIO for a driver-side read: an object store's latency is per
#: request, and each file takes a few (footer, column chunks).
_DRIVER_FETCH_THREADS = 8


@contextmanager
def _driver_files(spark: Any, table: Any, columns: Mapping[str, tuple[frozenset[int], frozenset[str]]],
                  through_file_io: bool) -> Iterator[OpenFile]:
    """How the driver opens the files of ``columns`` (location -> field ids and names of the columns read): by local
    path where Spark's file sources would open them on a local file system, else (``through_file_io`` always) a
    sparse local copy of those columns (:func:`compaction.spark.file_io_reads.sparse_local_copy`), all fetched ahead
    in parallel through the table's FileIO into a temporary directory that lives as long as the context."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    local = not through_file_io and spark_can_read(spark, table, list(columns)) and all(
        _local_path(loc) is not None for loc in columns)
    if local:
        yield lambda location, field_ids, names: _local_path(location)
        return
    with tempfile.TemporaryDirectory(prefix="icecompact-minor-") as directory:
        targets = {location: f"{directory}/{i}.parquet" for i, location in enumerate(sorted(columns))}

        def fetch(location: str) -> str:
            ids, names = columns[location]
            try:
                return sparse_local_copy(spark, table, location, targets[location], field_ids=ids, names=names)
            except NotParquetError as e:
                raise DriverMatchUnsupported(str(e)) from e

        with ThreadPoolExecutor(max_workers=min(_DRIVER_FETCH_THREADS, max(1, len(columns)))) as pool:
            fetched = dict(zip(targets, pool.map(fetch, targets)))

        def open_file(location: str, field_ids: frozenset[int], names: frozenset[str]) -> str:
            wanted_ids, wanted_names = columns[location]
            if not (field_ids <= wanted_ids and names <= wanted_names):
                raise ValueError(f"{location}: columns {sorted(field_ids)} {sorted(names)} were not fetched")
            return fetched[location]

        yield open_file


def _local_path(location: str) -> str | None:
    """The local file system path of ``location`` (``/x``, ``file:/x``, ``file:///x``), or None."""
    if location.startswith("/"):
        return location
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("///"):
            return rest[2:]
        if rest.startswith("/") and not rest.startswith("//"):
            return rest
    return None


def matched_positions(spark: Any, table: Any, table_ref: str, base_snapshot_id: int, row_filter: Any,
                      work: _Work, *, raw: bool = True) -> _TaggedPositions | None:
    """Positions (data file tag, pos) of the rows the converted equality deletes delete, or None.

    The data files' equality columns are read as plain Parquet by field id with Spark's ``_metadata.row_index``
    as the position. No delete is applied, so already-deleted rows may match too: they end up in the same
    position set as the deletes that removed them. See :func:`raw_read_blocker` for when Iceberg's reader (``_file``,
    ``_pos``) is used instead (``raw=False`` forces it)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructField, StructType

    if not work.eq_targets:
        return None
    # Delete and data files read as plain Parquet are matched to the table's columns by field id (names may have
    # changed since they were written). Only reads whose schema carries field ids are affected.
    spark.conf.set("spark.sql.parquet.fieldId.read.enabled", "true")
    refs = sorted(work.equality)
    index = {ref: i for i, ref in enumerate(refs)}
    _check_formats(work.equality.values(), "equality delete file")
    by_ids: dict[tuple[int, ...], tuple[tuple[int, str], ...]] = {}
    columns_of = {}
    for ref in refs:
        ids = equality_ids(work.equality[ref])
        if ids not in by_ids:
            by_ids[ids] = _equality_columns(table, work.equality[ref])
        columns_of[ref] = by_ids[ids]
    all_columns = sorted({c for cols in columns_of.values() for c in cols})
    data_paths = sorted(work.eq_targets)
    data_tag = {path: i for i, path in enumerate(data_paths)}
    pairs = [(data_tag[path], index[r]) for path in data_paths for r in sorted(work.eq_targets[path])]

    def applicability() -> Any:
        return spark.createDataFrame(pairs, "__at long, __e long")

    iceberg = read_at_snapshot(spark, table_ref, base_snapshot_id)
    spark_types = {f"c{fid}": iceberg.schema[c].dataType for fid, c in all_columns}
    blocker = raw_read_blocker(spark, table, work, [fid for fid, _ in all_columns]) if raw else "asked for"
    if blocker is None:
        schema = StructType([StructField(f"c{fid}", spark_types[f"c{fid}"], True, {"parquet.field.id": fid})
                             for fid, _ in all_columns])
        # Tagged after the key join (see below): of the rows read, only those an equality delete matches are
        # mapped from their path to their file's tag.
        rows, path_tags = read_parquet_with_paths(spark, schema, [(p, data_tag[p]) for p in data_paths],
                                                  row_index=True, position_column="__pos")
    else:
        path_tags = None
        tags = spark.createDataFrame(sorted(data_tag.items()), "__file string, __t long")
        rows = (
            iceberg.where(row_filter)
            # _deleted: Iceberg returns rows its deletes remove, flagged, instead of dropping them; the flag itself
            # is not needed (already-deleted rows end up in the same position set), but it must stay in the output:
            # were it pruned, Iceberg would drop deleted rows instead of flagging them.
            .select(F.col("_file"), F.col("_pos").alias("__pos"), F.col("_deleted").alias("__deleted"),
                    *[F.col(_quote(c)).alias(f"c{fid}") for fid, c in all_columns])
            .join(F.broadcast(tags), F.col("_file") == F.col("__file"))
        )
    matched = None
    by_columns: dict[tuple[tuple[int, str], ...], list[tuple[str, int]]] = {}
    for ref in refs:
        by_columns.setdefault(columns_of[ref], []).append(ref)
    keep = [F.col("r.__pos").alias("pos"), F.col("d.__d").alias("__d"),
            F.col("r.__path") if path_tags is not None else F.col("r.__t")]
    if blocker is not None:
        keep.append(F.col("r.__deleted"))
    promoted = _promoted_field_ids(_table_metadata(spark, table), [fid for fid, _ in all_columns])
    for cols, group in by_columns.items():
        schema = StructType([
            StructField(f"c{fid}", spark_types[f"c{fid}"], True, {"parquet.field.id": fid}) for fid, _ in cols
        ])
        files = [(ref[0], index[ref]) for ref in group]
        if promoted & {fid for fid, _ in cols}:
            # Delete files written before a type promotion hold the narrower type, which Spark's Parquet reader
            # cannot widen: pyarrow decodes each file at its own type and Spark widens the values (equality values
            # compare by value, so a widened key matches as Iceberg's reader would match it).
            deletes = read_parquet_through_file_io(spark, table, schema, files, tag_column="__d").alias("d")
        else:
            deletes = read_tagged_parquet(spark, schema, files, table=table).alias("d")
        condition = None
        for fid, _ in cols:
            equal = F.col(f"r.c{fid}").eqNullSafe(F.col(f"d.c{fid}"))
            condition = equal if condition is None else condition & equal
        # Rows are matched on the key first, then each match is kept when its (data file, delete file) pair is one
        # the spec's rules allow (applicability()). Pairing every row with each applicable delete file before the
        # key join, as before, multiplied the rows read by the number of delete files (16x on bench/scale.py's
        # streaming tables, where it made MINOR as slow as a full rewrite).
        keyed = rows.alias("r").join(F.broadcast(deletes), condition).select(*keep)
        if path_tags is not None:
            keyed = tag_rows(keyed, path_tags, "__t")
        allowed = (F.col("__t") == F.col("__at")) & (F.col("__d") == F.col("__e"))
        hit = keyed.join(F.broadcast(applicability()), allowed).drop("__d", "__at", "__e")
        matched = hit if matched is None else matched.unionByName(hit)
    return _TaggedPositions(matched, data_paths)


@dataclass
class _TaggedPositions:
    """Positions whose data file is a tag (an index into ``paths``): ints travel to the driver, not path strings."""

    frame: Any
    paths: list[str]


_PLAIN_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def spark_paths(spark: Any, locations: Iterable[str]) -> dict[str, str]:
    """Iceberg location -> the form Spark gives it in ``_metadata.file_path``: the listed ``FileStatus`` path as a
    URI (``FileSystem.listStatus`` of the leaf file; a literal ``%`` or a space in a name is escaped), an empty
    authority written ``file:/x`` rather than ``file:///x``. A directory's form is learnt from one listed file;
    its other files whose names need no escaping reuse it (listing each file costs several py4j round trips)."""
    j = J.jvm(spark)
    conf = spark._jsc.hadoopConfiguration()
    directories: dict[str, str] = {}
    out: dict[str, str] = {}
    for location in locations:
        directory, _, name = location.rpartition("/")
        plain = bool(_PLAIN_NAME.match(name))
        if plain and directory in directories:
            out[location] = directories[directory] + "/" + name
            continue
        path = j.org.apache.hadoop.fs.Path(location)
        listed = [_EMPTY_AUTHORITY.sub(r"\1:/", str(status.getPath().toUri().toString()))
                  for status in path.getFileSystem(conf).listStatus(path)]  # as Spark's file index lists a leaf
        if len(listed) != 1:
            raise UnsupportedTableError(f"{location} does not list as one file")
        out[location] = listed[0]
        if plain and listed[0].endswith("/" + name):
            directories[directory] = listed[0][: -len(name) - 1]
    return out


_LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"


def _read_parquet(spark: Any, schema: Any, locations: list[str]) -> Any:
    """``spark.read.parquet`` of explicit files. Above 32 paths Spark lists them in a distributed Spark job, which
    costs more than the listing itself on a local file system: there, list on the driver."""
    paths = [_glob_escape(loc) for loc in locations]
    if not all(loc.startswith("file:") for loc in locations):
        return spark.read.schema(schema).parquet(*paths)
    previous = spark.conf.get(_LISTING_THRESHOLD, None)
    spark.conf.set(_LISTING_THRESHOLD, str(max(32, len(paths) + 1)))
    try:
        return spark.read.schema(schema).parquet(*paths)  # lists now, while the setting holds
    finally:
        if previous is None:
            spark.conf.unset(_LISTING_THRESHOLD)
        else:
            spark.conf.set(_LISTING_THRESHOLD, previous)


def read_tagged_parquet(spark: Any, schema: Any, files: list[tuple[str, int]], *, row_index: bool = False,
                        tag_column: str = "__d", position_column: str = "__pos", table: Any = None) -> Any:
    """One read of several Parquet files with a ``tag_column`` telling which file (its tag) each row came from, and
    with ``row_index`` the row's position in its file (Spark's ``_metadata.row_index``) as ``position_column``.

    With ``table`` given, files Spark's file sources cannot open (an S3FileIO table) are read through the table's
    FileIO (:mod:`compaction.spark.file_io_reads`; no ``row_index`` there: data files take Iceberg's reader)."""
    if table is not None and not spark_can_read(spark, table, [location for location, _ in files]):
        if row_index:
            raise ValueError("row positions of files read through the FileIO are not available")
        return read_parquet_through_file_io(spark, table, schema, files, tag_column=tag_column)
    frame, mapping = read_parquet_with_paths(spark, schema, files, row_index=row_index,
                                             position_column=position_column)
    return tag_rows(frame, mapping, tag_column)


def read_parquet_with_paths(spark: Any, schema: Any, files: list[tuple[str, int]], *, row_index: bool = False,
                            position_column: str = "__pos") -> tuple[Any, Any]:
    """One read of several Parquet files whose rows carry their file's path as Spark names it (``__path``), and
    the mapping (``__path``, ``__tag``) that :func:`tag_rows` turns into each file's tag. Kept apart so that a
    caller can filter the rows first and tag only those left (a join on a path string costs per row).

    Spark's and Iceberg's names of a file differ (see :func:`spark_paths`); Spark names a file with an empty
    authority either ``file:/x`` or ``file:///x``, so the mapping holds both forms and the rows' path is compared
    as Spark gives it (no per-row rewrite)."""
    from pyspark.sql import functions as F

    forms = spark_paths(spark, [location for location, _ in files])
    tags = {forms[location]: tag for location, tag in files}
    if len(tags) != len(files):
        raise UnsupportedTableError("two files resolve to the same file")
    both_forms = dict(tags)
    for form, tag in tags.items():
        scheme, sep, rest = form.partition(":/")
        if sep and not rest.startswith("/") and "/" not in scheme:
            both_forms[f"{scheme}:///{rest}"] = tag  # the empty-authority spelling of the same file
    mapping = spark.createDataFrame(sorted(both_forms.items()), "__path string, __tag long")
    frame = _read_parquet(spark, schema, [loc for loc, _ in files])
    if row_index:
        frame = frame.withColumn(position_column, F.col("_metadata.row_index"))
    return frame.withColumn("__path", F.col("_metadata.file_path")), mapping


def tag_rows(frame: Any, mapping: Any, tag_column: str) -> Any:
    """Rows of :func:`read_parquet_with_paths` with their file's tag as ``tag_column``. A row whose file is not in
    the mapping fails the job (``raise_error``) rather than being dropped: a dropped delete row would silently
    resurrect rows."""
    from pyspark.sql import functions as F

    tagged = frame.join(F.broadcast(mapping), "__path", "left")
    guard = F.when(F.col("__tag").isNull(), F.raise_error(F.concat(F.lit("icecompact: unmapped file "),
                                                                    F.col("__path"))))
    return tagged.withColumn(tag_column, F.coalesce(F.col("__tag"), guard.cast("long"))).drop("__path", "__tag")


def absorbed_positions(spark: Any, work: _Work, table: Any = None) -> Any:
    """DataFrame (file_path, pos) of the rows named by the absorbed Parquet position-delete files, restricted to the
    data files that get a new file (rows naming files that are gone are dropped: they can never apply again)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    parquet = [d for d in work.positional.values() if delete_kind(d) is DeleteContent.POSITION]
    if not parquet:
        return None
    _check_formats(parquet, "position delete file")
    paths = sorted({str(d.location()) for d in parquet})
    live = spark.createDataFrame([(p,) for p in work.data_files], StructType([StructField("__file", StringType())]))
    schema = StructType([StructField("file_path", StringType()), StructField("pos", LongType())])
    if table is not None and not spark_can_read(spark, table, paths):
        raw = read_parquet_through_file_io(spark, table, schema, paths)  # e.g. S3FileIO: see file_io_reads
    else:
        raw = _read_parquet(spark, schema, paths)  # the spec's fixed column names; no schema inference
    return raw.join(F.broadcast(live), F.col("file_path") == F.col("__file")).select("file_path", "pos")


def absorbed_position_rows(spark: Any, work: _Work, table: Any, *, driver_max_rows: int,
                           through_file_io: bool = False) -> dict[str, set[int]]:
    """:func:`absorbed_positions` collected: read on the driver when the Parquet position-delete files hold at most
    ``driver_max_rows`` rows (a Spark job's fixed cost is most of reading a few small files), else in Spark."""
    parquet = [d for d in work.positional.values() if delete_kind(d) is DeleteContent.POSITION]
    if not parquet:
        return {}
    if 0 < sum(int(d.recordCount()) for d in parquet) <= driver_max_rows:
        _check_formats(parquet, "position delete file")
        locations = sorted({str(d.location()) for d in parquet})
        columns = {location: (frozenset[int](), frozenset({"file_path", "pos"})) for location in locations}
        with _driver_files(spark, table, columns, through_file_io) as open_file:
            return read_position_deletes(open_file, locations, work.data_files)
    return collect_positions(absorbed_positions(spark, work, table))


def collect_positions(frame: Any) -> dict[str, set[int]]:
    """(data path -> positions) of a (file_path, pos) DataFrame or of :func:`matched_positions`' tagged result."""
    out: dict[str, set[int]] = {}
    if frame is None:
        return out
    # Arrow record batches, not Row objects: at bench/scale.py's size l (~400k positions) building a Python Row per
    # position took ~10 s of a 15 s MINOR; the columns arrive as arrays (pyarrow only, no pandas).
    if isinstance(frame, _TaggedPositions):
        if frame.frame is None:
            return out
        # Every column is collected, a ``__deleted`` included (see matched_positions).
        for batch in frame.frame._collect_as_arrow():
            tags = batch.column(batch.schema.get_field_index("__t")).to_numpy()
            positions = batch.column(batch.schema.get_field_index("pos")).to_numpy()
            for tag in set(tags.tolist()):
                out.setdefault(frame.paths[int(tag)], set()).update(positions[tags == tag].tolist())
        return out
    for batch in frame._collect_as_arrow():  # sets dedupe
        paths = batch.column(batch.schema.get_field_index("file_path")).to_pylist()
        positions = batch.column(batch.schema.get_field_index("pos")).to_pylist()
        for path, pos in zip(paths, positions):
            out.setdefault(str(path), set()).add(int(pos))
    return out


def union_positions(*parts: dict[str, set[int]]) -> dict[str, list[int]]:
    merged: dict[str, set[int]] = {}
    for part in parts:
        for path, positions in part.items():
            merged.setdefault(path, set()).update(positions)
    return {path: sorted(positions) for path, positions in merged.items()}


def previous_deletion_vectors(work: _Work) -> dict[str, list[Any]]:
    """The DVs ``work`` absorbs, by the data file they belong to."""
    by_data: dict[str, list[Any]] = {}
    for d in work.positional.values():
        target = d.referencedDataFile()
        if delete_kind(d) is DeleteContent.DELETION_VECTOR and target is not None:
            by_data.setdefault(str(target), []).append(d)
    return by_data


def _java_list(spark: Any, items: Iterable[Any]) -> Any:
    values = list(items)
    if values and all(isinstance(v, str) and "\0" not in v for v in values):
        # Strings in one round trip, split in the JVM (an ArrayList filled from Python costs one call per element).
        splitter = J.jvm(spark).org.apache.iceberg.relocated.com.google.common.base.Splitter
        return splitter.on("\0").splitToList("\0".join(values))
    out = J.jvm(spark).java.util.ArrayList()
    for item in values:
        out.add(item)
    return out


# Preparing a whole job group at once -----------------------------------------------------------------------------
@dataclass
class PreparedMinor:
    """One partition's work and positions, computed in one Spark job together with the other MINOR partitions of the
    job group (each Spark job has a fixed cost that would otherwise be paid per partition)."""

    snapshot_id: int
    files: PartitionFiles
    work: _Work
    positions: dict[str, list[int]]
    converted_rows: int
    driver_max_rows: int = MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT  # the policy's, for the rows read when rebased

    def still_valid_for(self, files: PartitionFiles, target_of: Callable[[Any], str | None]) -> bool:
        """``target_of``: the one data file a position delete / DV names, or None when metadata cannot tell
        (:func:`compaction.spark.partition_files.position_delete_target`)."""
        # Positions depend only on the data files and delete files they were read from (sequence numbers never
        # change), so they stay right while all of those are live: across our own commits on other partitions,
        # and across a writer's commits that only added data files, equality deletes, and position deletes / DVs
        # naming only data files added since the read. An added data file has a higher data sequence number than
        # every delete being converted, which never applies to it (spec: an equality delete applies to data files
        # with a lower sequence number); an added equality delete stays and keeps applying beside ours; a position
        # delete / DV on an added data file (a streaming upsert writer's key updated twice in one checkpoint) names
        # no file our positions, DVs or removals touch, so ours is never a second DV for its data file. A file
        # *removed* since (a rewrite, a writer merging position deletes, a DV replaced), or an added position
        # delete / DV that names a data file of the read or cannot be placed (on v3 a data file may have one DV
        # only, and ours would be a second one; Iceberg checks concurrent DVs only after the commit's own base),
        # invalidates the work: it is read again.
        if not (set(self.files.data) <= set(files.data) and set(self.files.deletes) <= set(files.deletes)):
            return False
        added_data = set(files.data) - set(self.files.data)

        def harmless(delete_file: Any) -> bool:
            if delete_kind(delete_file) is DeleteContent.EQUALITY:
                return True
            return target_of(delete_file) in added_data

        return all(harmless(d) for ref, d in files.deletes.items() if ref not in self.files.deletes)

    def still_valid_in(self, spark: Any, files: PartitionFiles) -> bool:
        """:meth:`still_valid_for` with Iceberg's own placement of position deletes."""
        return self.still_valid_for(files, lambda d: position_delete_target(spark, d))

    def rebased_work(self, files: PartitionFiles, target_of: Callable[[Any], str | None]) -> tuple[_Work, list[Any]] | None:
        """The work moved onto ``files`` (the partition at a later snapshot), when a writer's DML since the read only
        added or replaced position deletes / DVs: returns the new work and the Parquet position delete files whose
        rows must be added to the positions, or None when the partition must be read again.

        The converted positions stay right while every data file of the read and every equality delete being
        converted is live (see :meth:`still_valid_for`). A DML deleting rows of a data file that gets our new
        position delete / DV adds one for it, on v3 replacing the file's DV (one DV per data file), on v2 often
        replacing its file-scoped position delete: that file is absorbed too (its rows join ours; a DV is merged
        in Java like any absorbed DV), and a delete file of the work removed since is no longer ours to remove.
        Its rows stay covered: a v2 position delete's rows are already in the positions, and a removed DV must have
        a replacing DV for its data file (a data file's deleted rows are never undeleted), or the work is read
        again. A position delete / DV whose data file cannot be told from metadata, or names a data file not live
        in the partition, is read again as before."""
        old_data, old_deletes = set(self.files.data), set(self.files.deletes)
        if not old_data <= set(files.data) or not set(self.work.equality) <= set(files.deletes):
            return None
        added_data = set(files.data) - old_data
        absorbed: dict[tuple[str, int], Any] = {}
        for ref, d in files.deletes.items():
            if ref in old_deletes or delete_kind(d) is DeleteContent.EQUALITY:
                continue
            target = target_of(d)
            if target in self.work.data_files:
                absorbed[ref] = d
            elif target is None or target not in files.data:
                return None
            # else: it names a data file added since, or one of the read that gets no file of ours: untouched
        gone = {ref: d for ref, d in self.work.positional.items() if ref not in files.deletes}
        replaced_dv_targets = {target_of(d) for d in absorbed.values()
                               if delete_kind(d) is DeleteContent.DELETION_VECTOR}
        if any(delete_kind(d) is DeleteContent.DELETION_VECTOR and target_of(d) not in replaced_dv_targets
               for d in gone.values()):
            return None
        work = _Work(
            equality=dict(self.work.equality),
            eq_targets={path: set(refs) for path, refs in self.work.eq_targets.items()},
            positional={**{ref: d for ref, d in self.work.positional.items() if ref not in gone}, **absorbed},
            data_files=dict(self.work.data_files),
            dangling={ref: d for ref, d in self.work.dangling.items() if ref in files.deletes},
            described=dict(self.work.described),
        )
        return work, [d for d in absorbed.values() if delete_kind(d) is DeleteContent.POSITION]

    def rebased_in(self, spark: Any, table: Any, files: PartitionFiles) -> PreparedMinor | None:
        """:meth:`rebased_work` with Iceberg's placement of position deletes, the new Parquet position deletes' rows
        read (a small read, instead of matching the equality deletes against the data again)."""
        moved = self.rebased_work(files, lambda d: position_delete_target(spark, d))
        if moved is None:
            return None
        work, parquet = moved
        positions = {path: set(rows) for path, rows in self.positions.items()}
        if parquet:
            new_rows = _Work({}, {}, {delete_ref(d): d for d in parquet}, work.data_files, {})
            new_positions = absorbed_position_rows(spark, new_rows, table, driver_max_rows=self.driver_max_rows)
            positions = {path: set(rows) for path, rows in union_positions(positions, new_positions).items()}
        return PreparedMinor(files.snapshot_id or self.snapshot_id, files, work,
                             {path: sorted(rows) for path, rows in positions.items()}, self.converted_rows,
                             self.driver_max_rows)

    def usable_in(self, spark: Any, table: Any, files: PartitionFiles) -> PreparedMinor | None:
        """This read as it is, or moved onto ``files`` (:meth:`rebased_in`), or None: read again."""
        if self.still_valid_in(spark, files):
            return self
        return self.rebased_in(spark, table, files)


def prepare_group(spark: Any, table: Any, table_ref: str, keyed: list[tuple[PartitionKey, Any]],
                  row_filter: Any, *, driver_max_rows: int = MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT,
                  ) -> dict[PartitionKey, PreparedMinor]:
    """Decide every partition's work at the current snapshot and read all their positions in one Spark job (or on
    the driver, see :func:`equality_matched_positions`). ``keyed``: (key, partition expression) of partitioned keys;
    ``row_filter``: the OR of their row predicates; ``driver_max_rows``: the policy's
    ``compaction.minor.driver-match-max-rows``."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None or not keyed:
        return {}
    base_id = int(current.snapshotId())
    scans = {key: scan_partition(spark, table, expression, base_id, with_applied=False) for key, expression in keyed}
    works = {key: decide_work(spark, table, key, files, whole_table=False) for key, files in scans.items()}
    merged = merge_works(works.values())
    matched = equality_matched_positions(spark, table, table_ref, base_id, row_filter, merged,
                                         driver_max_rows=driver_max_rows)
    absorbed = absorbed_position_rows(spark, merged, table, driver_max_rows=driver_max_rows)
    positions = union_positions(matched, absorbed)
    out = {}
    for key, work in works.items():
        work.described.update({p: merged.described[p] for p in work.data_files if p in merged.described})
        mine = {p: positions[p] for p in work.data_files if p in positions}
        converted = sum(len(matched.get(p, ())) for p in work.eq_targets)
        out[key] = PreparedMinor(base_id, scans[key], work, mine, converted, driver_max_rows)
    return out


# Committing ------------------------------------------------------------------------------------------------------
def check_no_conflicting_changes(spark: Any, table: Any, expression: Any, base_id: int, commit_id: int | None,
                                 work: _Work) -> None:
    """Our own check, which Iceberg does not make for removed equality deletes: no snapshot after our base (up to,
    not including, our commit) added to the converted deletes' scope a data file with a data sequence number below
    theirs (a concurrent rewrite that kept its starting sequence number), or removed a data file they applied to."""
    if not work.equality:
        return
    max_seq = max(int(d.dataSequenceNumber()) for d in work.equality.values())
    targets = set(work.eq_targets) | set(work.data_files)
    expressions = J.jvm(spark).org.apache.iceberg.expressions
    table.refresh()
    until = commit_id if commit_id is not None else int(table.currentSnapshot().snapshotId())
    chain = snapshots_between(table, base_id, until)
    if commit_id is not None:
        chain = chain[:-1]
    for sid in chain:
        snapshot = table.snapshot(sid)
        for f in _iterate(snapshot_changes(table, snapshot).removedDataFiles()):
            if str(f.location()) in targets:
                raise CommitConflictError(f"snapshot {sid} removed data file {f.location()}, which converted "
                                          "equality deletes apply to")
        for f in added_data_files(table, sid):
            seq = f.dataSequenceNumber()
            if seq is None or int(seq) >= max_seq:
                continue
            spec = table.specs().get(int(f.specId()))
            in_scope = expressions.Projections.inclusive(spec).project(expression)
            if expressions.Evaluator(spec.partitionType(), in_scope).eval(f.partition()):
                raise CommitConflictError(
                    f"snapshot {sid} added data file {f.location()} with data sequence number {int(seq)} below "
                    f"{max_seq} of an equality delete being converted (a concurrent rewrite)")


@dataclass
class PartitionChange:
    """One partition's share of a MINOR commit: its files at the base and what replaces its deletes."""

    key: PartitionKey
    expression: Any  # the partition's Iceberg expression
    before: PartitionFiles  # the partition's files at the base snapshot
    work: _Work
    positions: dict[str, list[int]]
    converted_rows: int

    @property
    def busy(self) -> bool:
        return bool(self.work.equality or self.work.positional or self.work.dangling)


def minor_compact(spark: Any, table: Any, expression: Any, row_filter: Any, key: PartitionKey, *, table_ref: str,
                  plan_id: str, tag: str, whole_table: bool, before: PartitionFiles,
                  prepared: PreparedMinor | None = None, committed: list[int] | None = None,
                  one_dv_per_puffin_file: bool = False,
                  driver_max_rows: int = MINOR_DRIVER_MATCH_MAX_ROWS_DEFAULT) -> MinorOutcome:
    """One attempt: decide, read, write, commit in one RowDelta. Raises py4j errors from Iceberg (the caller
    classifies them) and ``CommitConflictError`` from our own pre-commit check. ``before``: the partition's files
    at the base snapshot. ``committed``: the caller's list of its snapshots, which gets our commit as soon as it is
    on main, before the post-commit checks (so that the caller can undo it when one fails).
    ``one_dv_per_puffin_file``: the policy's ``compaction.one-dv-per-puffin-file`` (v3); ``driver_max_rows``: its
    ``compaction.minor.driver-match-max-rows``."""
    base_id = before.snapshot_id
    if base_id is None:
        return MinorOutcome(base_id, [], 0, 0, 0, 0, 0, before.counts(), before.counts())
    usable = None if prepared is None else prepared.usable_in(spark, table, before)
    if usable is not None:
        work, positions, converted_rows = usable.work, usable.positions, usable.converted_rows
    else:
        work = decide_work(spark, table, key, before, whole_table=whole_table)
        matched = equality_matched_positions(spark, table, table_ref, int(base_id), row_filter, work,
                                             driver_max_rows=driver_max_rows)
        # Position rows of absorbed Parquet files (v2, or a v3 table upgraded from v2); DVs are merged in Java.
        absorbed = absorbed_position_rows(spark, work, table, driver_max_rows=driver_max_rows)
        positions = union_positions(matched, absorbed)
        converted_rows = sum(len(matched.get(p, ())) for p in work.eq_targets)
    change = PartitionChange(key, expression, before, work, positions, converted_rows)
    return commit_changes(spark, table, [change], expression, base_id=int(base_id), plan_id=plan_id, tag=tag,
                          committed=committed, one_dv_per_puffin_file=one_dv_per_puffin_file)[0]


def commit_changes(spark: Any, table: Any, changes: list[PartitionChange], expression: Any, *, base_id: int,
                   plan_id: str, tag: str, committed: list[int] | None = None,
                   one_dv_per_puffin_file: bool = False) -> list[MinorOutcome]:
    """Write the new position deletes / DVs of every partition of ``changes`` and replace their deletes in one
    RowDelta, validated from ``base_id`` with ``expression`` (the partitions' OR) as the conflict filter; then our
    post-commit checks. One outcome per change, in order. ``committed``, ``one_dv_per_puffin_file``: as for
    :func:`minor_compact` (v3: each partition's DVs share one Puffin file, or each DV has its own)."""
    outcomes = [MinorOutcome(base_id, [], 0, 0, 0, 0, 0, c.before.counts(), c.before.counts()) for c in changes]
    busy = [i for i, c in enumerate(changes) if c.busy]
    if not busy:
        return outcomes
    warm_history(table)  # read while the delete files are written
    fmt = int(table.operations().current().formatVersion())
    new_files = {
        i: write_deletion_vectors(spark, table, changes[i].work.data_files, changes[i].positions,
                                  previous_deletion_vectors(changes[i].work),
                                  one_per_puffin_file=one_dv_per_puffin_file)
        if fmt >= 3 else
        write_position_delete_files(spark, table, changes[i].work.data_files, changes[i].positions,
                                    changes[i].work.described)
        for i in busy
    }
    removed = {i: {**changes[i].work.equality, **changes[i].work.positional, **changes[i].work.dangling}
               for i in busy}
    work = merge_works(changes[i].work for i in busy)
    # A writer holding a lease on the table goes first (compaction.core.yielding): its DML would fail on our commit.
    with commit_window(f"MINOR of {len(busy)} partition(s)", table=table):
        check_no_conflicting_changes(spark, table, expression, base_id, None, work)

        required = sorted(set(work.eq_targets) | set(work.data_files))
        cleanup = J.DeferredCleanup(spark)
        delta = (
            cleanup.attach(table.newRowDelta())
            .validateFromSnapshot(base_id)
            .conflictDetectionFilter(expression)
            .validateDeletedFiles()
            .set(TASK_PROPERTY, tag)
            .set(PLAN_PROPERTY, plan_id)
            .set(KIND_PROPERTY, "minor")
        )
        if required:
            delta = delta.validateDataFilesExist(_java_list(spark, required))
        for i in busy:
            for f in new_files[i]:
                delta = delta.addDeletes(f)
            for d in removed[i].values():
                delta = delta.removeDeletes(d)
        delta.commit()
    commit_id = find_tagged_snapshot(table, base_id, tag)
    if commit_id is None:
        raise CommitConflictError("MINOR committed but its snapshot was not found on main")
    cleanup.committed(table, commit_id)
    for i in busy:
        outcomes[i].commit_snapshot_ids = [commit_id]
    if committed is not None:
        committed.append(commit_id)
    try:
        check_no_conflicting_changes(spark, table, expression, base_id, commit_id, work)
    except CommitConflictError as e:
        raise CommitValidationError(str(e)) from e
    commit = table.snapshot(int(commit_id))
    gone: set[tuple[str, int]] | None = None
    if (commit.parentId() is not None and int(commit.parentId()) == base_id
            and (len(busy) == 1 or int(table.specs().size()) == 1)):
        # Nothing committed in between: the live files at our snapshot are the base's minus what our commit
        # removed plus what it added, so reading our commit's own manifest entries is enough (no partition scan).
        # (Not for several partitions on an evolved table: a partition's scan also holds the files of the other
        # specs' partitions that the filter projects onto, and the commit changed some of those too.)
        gone = {delete_ref(d) for d in _iterate(snapshot_changes(table, commit).removedDeleteFiles())}
    base_seq = int(table.snapshot(base_id).sequenceNumber())
    for i in busy:
        change, outcome = changes[i], outcomes[i]
        if gone is not None:
            left = [ref[0] for ref in change.work.equality if ref not in gone]
            after_counts = change.before.counts()
            after_counts["delete_files"] += len(new_files[i]) - len(removed[i])
            after_counts["delete_records"] += (sum(int(f.recordCount()) for f in new_files[i])
                                               - sum(int(d.recordCount()) for d in removed[i].values()))
            after_counts["equality_delete_files"] -= len(change.work.equality)
        else:
            after = scan_partition(spark, table, change.expression, commit_id, with_applied=False)
            left = [
                str(d.location()) for d in after.deletes.values()
                if delete_kind(d) is DeleteContent.EQUALITY and int(d.dataSequenceNumber()) <= base_seq
                and delete_ref(d) in change.work.equality
            ]
            after_counts = after.counts()
        if left:
            raise CommitValidationError(f"partition {change.key.label()}: equality deletes still live after MINOR: "
                                        f"{left[:5]}")
        outcome.converted_equality_deletes = len(change.work.equality)
        outcome.converted_rows = change.converted_rows
        outcome.merged_position_deletes = len(change.work.positional)
        outcome.removed_delete_files = len(removed[i])
        outcome.added_delete_files = len(new_files[i])
        outcome.after = after_counts
    return outcomes
