"""MINOR compaction of one partition: equality deletes converted into position deletes (v2) or deletion vectors
(v3), several position deletes of one data file merged into one, dangling deletes removed. Data files are not
rewritten here: the fragment merge that precedes this step is Iceberg's rewrite action (compaction.spark.job).

Iceberg rules this module relies on (spec, "Scan Planning"; docs/validation.md):

* an equality delete with data sequence number S applies to data files with data sequence < S of its own spec and
  partition, or of every partition when its spec is unpartitioned (a "global" delete); ``decide_work`` applies
  these rules to the partition's metadata;
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

Why a ``RowDelta`` (operation ``delete``) rather than a ``RewriteFiles``: only ``RowDelta`` validates that the
targeted data files still exist within Iceberg's commit retry loop, and a concurrent MAJOR only notices new
position deletes for the files it replaces when they come in a ``delete``/``overwrite`` snapshot.

How rows are found: Spark reads the equality columns of the targeted data files as plain Parquet, by field id,
with ``_metadata.row_index`` as the position (or, where plain Parquet could disagree with Iceberg's reader, through
Iceberg's reader with ``_file``/``_pos``/``_deleted``: see ``raw_read_blocker``), and joins them null-safely with
the equality-delete rows on each file's equality columns, restricted to the (data file, delete file) pairs the
spec's rules say apply.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import tempfile
import uuid
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Iterable, Mapping

from compaction.core.errors import CommitConflictError, CommitValidationError, UnsupportedTableError
from compaction.core.model import DeleteContent, PartitionKey
from compaction.spark import jvm as J
from compaction.spark.compat import read_at_snapshot
from compaction.spark.file_io_reads import read_parquet_through_file_io, spark_can_read
from compaction.spark.major import PLAN_PROPERTY, TASK_PROPERTY, find_tagged_snapshot
from compaction.spark.partition_files import (
    PartitionFiles,
    _iterate,
    added_data_files,
    delete_kind,
    delete_ref,
    scan_partition,
    snapshots_between,
)

KIND_PROPERTY = "icecompact.kind"

_EMPTY_AUTHORITY = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):///")

# Reserved field ids of position delete files (Iceberg spec, "Position Delete Files").
FILE_PATH_FIELD_ID = 2147483546
POS_FIELD_ID = 2147483545

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


DELETE_GRANULARITY = "write.delete.granularity"  # Iceberg's table property (TableProperties.DELETE_GRANULARITY)


def partition_scoped_output(table: Any) -> bool:
    """Whether new v2 position deletes are written one file per partition (``write.delete.granularity=partition``)
    rather than one per data file (Iceberg's default, ``file``). v3 always writes one DV per data file."""
    if int(table.operations().current().formatVersion()) >= 3:
        return False
    return str(table.properties().getOrDefault(DELETE_GRANULARITY, "file")).strip().lower() == "partition"


def decide_work(spark: Any, table: Any, key: PartitionKey, files: PartitionFiles, *, whole_table: bool) -> _Work:
    """Which delete files to convert or merge and which data files get a new position delete / DV.

    * every equality delete of ``key``'s spec and partition (for an unpartitioned key on a table whose scan covers
      the whole table: the global equality deletes) is converted;
    * a position delete / DV of the partition is absorbed unless it is *settled*: file-scoped, the only position
      delete applying to its data file, and that data file receives no converted rows;
    * every data file some converted equality delete applies to, or some absorbed position delete names, gets
      one new position delete file (v2) or DV (v3) holding all its deleted positions.

    Which delete applies to which data file follows the spec ("Scan Planning") from metadata alone, with no column
    statistics (a superset of Iceberg's planning, which may also prune by statistics; the join then simply finds no
    row in the extra pairs):

    * ``files`` comes from a scan filtered on ``key``'s partition: for files of ``key``'s own spec that filter is
      exactly the partition, so "same spec" means "same spec and partition" here;
    * an equality delete with data sequence S applies to data files of its spec and partition with data sequence
      < S, or to every data file with data sequence < S when its spec is unpartitioned;
    * a position delete / DV with data sequence S applies to the data file it names (when metadata tells:
      ``referenced_data_file`` or equal ``file_path`` bounds) if that file's data sequence is <= S, otherwise to
      every data file of its spec and partition with data sequence <= S.
    """
    from compaction.spark.partition_files import position_delete_target

    if key.is_unpartitioned and not whole_table:
        raise UnsupportedTableError("global equality deletes are only converted by a scan of the whole table")
    in_key = {ref: d for ref, d in files.deletes.items() if int(d.specId()) == key.spec_id}
    equality = {ref: d for ref, d in in_key.items() if delete_kind(d) is DeleteContent.EQUALITY}
    positional_in_key = {ref: d for ref, d in in_key.items() if delete_kind(d) is not DeleteContent.EQUALITY}
    seq = files.data_sequence
    same_spec = [p for p, f in files.data.items() if int(f.specId()) == key.spec_id]
    global_scope = key.is_unpartitioned  # whole_table holds here: the scan covered every data file
    eq_targets: dict[str, set[tuple[str, int]]] = {}
    for ref, d in equality.items():
        s_eq = int(d.dataSequenceNumber())
        for path in (files.data if global_scope else same_spec):
            if seq[path] < s_eq:
                eq_targets.setdefault(path, set()).add(ref)
    # Every position delete in the scan, not only the partition's own: a global conversion gives new files to data
    # files of other specs' partitions, and those must fold in their own position deletes (one per data file).
    positional_all = {ref: d for ref, d in files.deletes.items() if delete_kind(d) is not DeleteContent.EQUALITY}
    partition_of: dict[str, tuple[int, tuple[Any, ...]]] = {}

    def partition_key_of(f: Any) -> tuple[int, tuple[Any, ...]]:
        spec_id = int(f.specId())
        return spec_id, J.partition_values(spark, table.specs().get(spec_id), f.partition())

    file_seqs: dict[str, int] = {}

    def file_seq(path: str) -> int:
        if path not in file_seqs:
            value = files.data[path].fileSequenceNumber()
            file_seqs[path] = int(value) if value is not None else -1
        return file_seqs[path]

    positional_applying: dict[str, set[tuple[str, int]]] = {}
    for ref, d in positional_all.items():
        s_pos = int(d.dataSequenceNumber())
        target = position_delete_target(spark, d)
        if target is not None:
            candidates = [target] if target in files.data else []
        elif ref in positional_in_key:
            candidates = same_spec
        else:  # a partition-scoped delete of another spec or partition: compare partitions explicitly
            where = partition_key_of(d)
            for path, f in files.data.items():
                if path not in partition_of:
                    partition_of[path] = partition_key_of(f)
            candidates = [p for p in files.data if partition_of[p] == where]
        # A delete names only files that existed when it was committed (paths are never reused): a file added
        # later by a rewrite that kept its starting (lower) data sequence number is never one of its targets.
        committed_at = d.fileSequenceNumber()
        committed_seq = int(committed_at) if committed_at is not None else s_pos
        for path in candidates:
            if seq[path] <= s_pos and file_seq(path) <= committed_seq:
                positional_applying.setdefault(path, set()).add(ref)

    applied_anywhere = {r for refs in positional_applying.values() for r in refs}
    dangling = {ref: d for ref, d in positional_in_key.items() if ref not in applied_anywhere}
    absorbed: dict[tuple[str, int], Any] = {}
    for ref, d in positional_in_key.items():
        if ref in dangling:
            continue
        targets = [p for p, refs in positional_applying.items() if ref in refs]
        # Settled (as the planner says): the only position delete of every data file it applies to, none of which
        # receives converted rows. File-scoped, or partition-scoped alone in its partition.
        settled = bool(targets) and all(len(positional_applying[t]) == 1 and t not in eq_targets for t in targets)
        if not settled:
            absorbed[ref] = d
    if partition_scoped_output(table) and not key.is_unpartitioned and (equality or absorbed or dangling):
        # One position-delete file for the whole partition: every position delete of the partition goes into it.
        for ref, d in positional_in_key.items():
            if ref not in dangling:
                absorbed.setdefault(ref, d)
    rewritten_paths = set(eq_targets)
    for path, refs in positional_applying.items():
        if refs & set(absorbed):
            rewritten_paths.add(path)
    # A data file that gets a new file must have *all* its position deletes folded into it (one per data file).
    for path in rewritten_paths:
        for ref in positional_applying.get(path, ()):
            absorbed.setdefault(ref, positional_all[ref])
    # Folding may pull in a partition-scoped file that also names other data files: they need new files as well.
    changed = True
    while changed:
        changed = False
        for path, refs in positional_applying.items():
            if path not in rewritten_paths and refs & set(absorbed):
                rewritten_paths.add(path)
                for ref in refs:
                    absorbed.setdefault(ref, positional_all[ref])
                changed = True
    return _Work(
        equality=equality,
        eq_targets=eq_targets,
        positional=absorbed,
        data_files={p: files.data[p] for p in sorted(rewritten_paths)},
        dangling=dangling,
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
    used), or None. Plain Parquet gives the values Iceberg would only when every targeted data file is Parquet,
    the table has no name mapping (files without field ids), no equality column is an identity-partition source
    (Iceberg's reader takes those from the partition tuple, imported files may lack the column), none ever had
    another type (promotion) and none has an ``initial-default`` (v3: Iceberg fills it for older files)."""
    if not spark_can_read(spark, table, work.eq_targets):
        # S3FileIO tables (REST catalogs on S3): Spark's file sources have no file system or credentials for them.
        return "data files on storage Spark's file sources cannot open (read through the table's FileIO)"
    describe_files(spark, table, {p: work.data_files[p] for p in work.eq_targets}, work.described)
    formats = {str(work.described[p].get("file-format", "")).upper() for p in work.eq_targets}
    if formats - {"PARQUET"}:
        return f"data files in {sorted(formats - {'PARQUET'})} format"
    metadata = _table_metadata(spark, table)
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
    promoted = _promoted_field_ids(metadata, ids)
    if promoted:
        return f"equality column {min(promoted)} changed type"
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


# Writing ---------------------------------------------------------------------------------------------------------
def _arrow_position_deletes(path: str, positions: list[int]) -> Any:
    import pyarrow as pa  # type: ignore[import-untyped]

    schema = pa.schema([
        pa.field("file_path", pa.string(), nullable=False,
                 metadata={b"PARQUET:field_id": str(FILE_PATH_FIELD_ID).encode()}),
        pa.field("pos", pa.int64(), nullable=False, metadata={b"PARQUET:field_id": str(POS_FIELD_ID).encode()}),
    ])
    return pa.Table.from_arrays([pa.array([path] * len(positions), pa.string()), pa.array(positions, pa.int64())],
                                schema=schema)


def _pos_delete_metrics(meta: Any, first_path: str, last_path: str, min_pos: int, max_pos: int) -> dict[str, Any]:
    """Iceberg's metrics of a position-delete file as ``ContentFileParser`` JSON, as ``ParquetUtil.fileMetrics`` with
    ``MetricsConfig.forPositionDelete`` computes them from the footer (both columns in ``full`` mode: counts,
    sizes and untruncated bounds); the rows are known here (sorted), so the bounds come from them."""
    ids = [FILE_PATH_FIELD_ID, POS_FIELD_ID]
    sizes = [0, 0]
    counts = [0, 0]
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(2):
            sizes[c] += int(group.column(c).total_compressed_size)
            counts[c] += int(group.column(c).num_values)

    def string_bound(value: str) -> str:
        return value.encode("utf-8").hex().upper()

    def long_bound(value: int) -> str:
        return int(value).to_bytes(8, "little", signed=True).hex().upper()

    return {
        "column-sizes": {"keys": ids, "values": sizes},
        "value-counts": {"keys": ids, "values": counts},
        "null-value-counts": {"keys": ids, "values": [0, 0]},
        "nan-value-counts": {"keys": [], "values": []},
        "lower-bounds": {"keys": ids, "values": [string_bound(first_path), long_bound(min_pos)]},
        "upper-bounds": {"keys": ids, "values": [string_bound(last_path), long_bound(max_pos)]},
    }


def describe_files(spark: Any, table: Any, files: dict[str, Any], into: dict[str, dict[str, Any]]) -> None:
    """``ContentFileParser`` JSON of data files (spec id, partition, format) into ``into``, one py4j call per file
    not described yet (asking each attribute separately would cost several)."""
    import json

    parser = J.jvm(spark).org.apache.iceberg.ContentFileParser
    specs = table.specs()
    for path, f in files.items():
        if path not in into:
            into[path] = json.loads(str(parser.toJson(f, specs.get(int(f.specId())))))


def write_position_delete_files(spark: Any, table: Any, data_files: dict[str, Any], positions: dict[str, list[int]],
                                described: dict[str, dict[str, Any]] | None = None) -> list[Any]:
    """v2: new position-delete files for the data files of ``data_files`` (path -> ``DataFile``) that have positions
    (path -> sorted positions), rows sorted by
    (file_path, pos) as the spec requires, with Iceberg's metrics: one file per data file (``referenced_data_file``
    set; Iceberg's default granularity) or, with ``write.delete.granularity=partition``, one per partition.

    Written by pyarrow and handed to Iceberg as ``ContentFileParser`` JSON parsed in bulk: building each
    ``DeleteFile`` through the Java builder and ``ParquetUtil`` costs dozens of py4j round trips per file, which
    dominated MINOR on tables with many small data files (bench/minor.py). ``described``: a cache of the data files'
    ``ContentFileParser`` JSON (filled here)."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    from compaction.spark.equality_deletes import TableFileWriter

    j = J.jvm(spark)
    targets = {path: f for path, f in data_files.items() if positions.get(path)}
    if not targets:
        return []
    described = {} if described is None else described
    describe_files(spark, table, targets, described)
    per_partition_files = partition_scoped_output(table)
    provider = table.locationProvider()
    # The default provider puts every file of a partition in one directory: ask once per partition.
    same_directory = str(provider.getClass().getName()).endswith("DefaultLocationProvider")
    groups: dict[tuple[int, str, str], list[str]] = {}  # (spec id, partition JSON, data path or "") -> paths
    for path in sorted(targets):
        info = described[path]
        partition = json.dumps(info.get("partition", {}), sort_keys=True)
        groups.setdefault((int(info["spec-id"]), partition, "" if per_partition_files else path), []).append(path)
    directories: dict[tuple[int, str], str] = {}
    writer = TableFileWriter(spark, table)
    entries = []
    for (spec_id, partition, _), paths in groups.items():
        info = described[paths[0]]
        name = f"icecompact-posdel-{uuid.uuid4()}.parquet"
        if not same_directory or (spec_id, partition) not in directories:
            spec = table.specs().get(spec_id)
            if spec.isPartitioned():
                location = str(provider.newDataLocation(spec, targets[paths[0]].partition(), name))
            else:
                location = str(provider.newDataLocation(name))
            directories[(spec_id, partition)] = location[: len(location) - len(name)]
        location = directories[(spec_id, partition)] + name
        parts = [_arrow_position_deletes(path, positions[path]) for path in paths]  # paths sorted, positions too
        rows = pa.concat_tables(parts) if len(parts) > 1 else parts[0]
        buf = io.BytesIO()
        pq.write_table(rows, buf)
        payload = buf.getvalue()
        writer.write(location, payload)
        meta = pq.ParquetFile(io.BytesIO(payload)).metadata
        entry = {
            "spec-id": spec_id,
            "content": "POSITION_DELETES",
            "file-path": location,
            "file-format": "PARQUET",
            "partition": info.get("partition", {}),
            "file-size-in-bytes": len(payload),
            "record-count": rows.num_rows,
            **_pos_delete_metrics(meta, paths[0], paths[-1], min(positions[p][0] for p in paths),
                                  max(positions[p][-1] for p in paths)),
        }
        if not per_partition_files:
            entry["referenced-data-file"] = paths[0]
        entries.append(entry)
    nodes = j.org.apache.iceberg.util.JsonUtil.mapper().readTree(json.dumps(entries))
    parser = j.org.apache.iceberg.ContentFileParser
    specs = table.specs()
    return [parser.fromJson(nodes.get(i), specs) for i in range(len(entries))]


class _InputFiles:
    """``Function<DeleteFile, InputFile>`` for Iceberg's delete loader (py4j callback)."""

    def __init__(self, table: Any) -> None:
        self._table = table

    def apply(self, delete_file: Any) -> Any:
        return self._table.io().newInputFile(str(delete_file.location()))

    class Java:
        implements = ["java.util.function.Function"]


class _NoPreviousDeletes:
    """``Function<String, PositionDeleteIndex>`` for ``BaseDVFileWriter``: previous deletes are merged by us."""

    def apply(self, _path: Any) -> Any:
        return None

    class Java:
        implements = ["java.util.function.Function"]


def previous_deletion_vectors(work: _Work) -> dict[str, list[Any]]:
    """The DVs ``work`` absorbs, by the data file they belong to."""
    by_data: dict[str, list[Any]] = {}
    for d in work.positional.values():
        target = d.referencedDataFile()
        if delete_kind(d) is DeleteContent.DELETION_VECTOR and target is not None:
            by_data.setdefault(str(target), []).append(d)
    return by_data


def write_deletion_vectors(spark: Any, table: Any, data_files: dict[str, Any], positions: dict[str, list[int]],
                           previous: dict[str, list[Any]] | None = None) -> list[Any]:
    """v3: one DV per data file of ``data_files`` (path -> ``DataFile``) holding its ``positions`` merged with its
    ``previous`` DVs (path -> DVs being replaced), all in one Puffin file, written by Iceberg's
    ``BaseDVFileWriter``. The new positions are staged in one local Parquet file that Iceberg turns into one index
    per data file in a single call (``Deletes.toPositionIndexes``); old DVs are read by Iceberg's
    ``BaseDeleteLoader``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    j = J.jvm(spark)
    by_data = previous or {}
    loader = None
    if by_data:
        from pyspark.java_gateway import ensure_callback_server_started

        ensure_callback_server_started(J.gateway(spark))
        loader = j.org.apache.iceberg.data.BaseDeleteLoader(_InputFiles(table))
    collections = j.java.util.Collections
    tmp = tempfile.mkdtemp(prefix="icecompact-minor-")
    try:
        staged_indexes = None
        rows = sorted((p, pos) for p, ps in positions.items() for pos in ps)
        if rows:
            staged_path = os.path.join(tmp, "positions.parquet")
            pq.write_table(pa.Table.from_arrays([pa.array([r[0] for r in rows], pa.string()),
                                                 pa.array([r[1] for r in rows], pa.int64())],
                                                schema=_arrow_position_deletes("", []).schema), staged_path)
            staged = (
                j.org.apache.iceberg.InternalData.read(j.org.apache.iceberg.FileFormat.PARQUET,
                                                       j.org.apache.iceberg.Files.localInput(staged_path))
                .project(j.org.apache.iceberg.io.DeleteSchemaUtil.pathPosSchema()).build()
            )
            staged_indexes = j.org.apache.iceberg.deletes.Deletes.toPositionIndexes(staged)  # path -> index
        factory = (
            j.org.apache.iceberg.io.OutputFileFactory.builderFor(table, 0, 0)
            .format(j.org.apache.iceberg.FileFormat.PUFFIN).operationId(f"icecompact-{uuid.uuid4().hex[:12]}").build()
        )
        writer = j.org.apache.iceberg.deletes.BaseDVFileWriter(factory, _NoPreviousDeletes())
        specs: dict[int, Any] = {}
        for path, data_file in data_files.items():
            # Each index is a fresh object (the staged map's entries are used once; the loader returns new ones),
            # so merging into it is safe.
            index = staged_indexes.get(path) if staged_indexes is not None and positions.get(path) else None
            for dv in by_data.get(path, []):
                assert loader is not None
                old = loader.loadPositionDeletes(collections.singletonList(dv), path)
                if index is None:
                    index = old
                else:
                    index.merge(old)
            if index is None or index.isEmpty():
                continue
            spec_id = int(data_file.specId())
            if spec_id not in specs:
                specs[spec_id] = table.specs().get(spec_id)
            writer.delete(path, index, specs[spec_id], data_file.partition())
        writer.close()
        return list(writer.result().deleteFiles())
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


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

    def still_valid_for(self, files: PartitionFiles) -> bool:
        # Positions depend only on the data files and delete files they were read from (sequence numbers never
        # change), so they stay right while all of those are live: across our own commits on other partitions,
        # and across a writer's commits that only added data files and equality deletes to the partition. An
        # added data file has a higher data sequence number than every delete being converted, which never
        # applies to it (spec: an equality delete applies to data files with a lower sequence number); an added
        # equality delete stays and keeps applying beside ours. A file *removed* since (a rewrite, a writer
        # merging position deletes, a DV replaced), or an added position delete / DV (on v3 a data file may have
        # one DV only, and ours would be a second one; Iceberg checks concurrent DVs only after the commit's own
        # base), invalidates the work: it is read again.
        if not (set(self.files.data) <= set(files.data) and set(self.files.deletes) <= set(files.deletes)):
            return False
        added = (d for ref, d in files.deletes.items() if ref not in self.files.deletes)
        return all(delete_kind(d) is DeleteContent.EQUALITY for d in added)


def prepare_group(spark: Any, table: Any, table_ref: str, keyed: list[tuple[PartitionKey, Any]],
                  row_filter: Any) -> dict[PartitionKey, PreparedMinor]:
    """Decide every partition's work at the current snapshot and read all their positions in one Spark job.
    ``keyed``: (key, partition expression) of partitioned keys; ``row_filter``: the OR of their row predicates."""
    table.refresh()
    current = table.currentSnapshot()
    if current is None or not keyed:
        return {}
    base_id = int(current.snapshotId())
    scans = {key: scan_partition(spark, table, expression, base_id, with_applied=False) for key, expression in keyed}
    works = {key: decide_work(spark, table, key, files, whole_table=False) for key, files in scans.items()}
    merged = merge_works(works.values())
    matched = collect_positions(matched_positions(spark, table, table_ref, base_id, row_filter, merged))
    absorbed = collect_positions(absorbed_positions(spark, merged, table))
    positions = union_positions(matched, absorbed)
    out = {}
    for key, work in works.items():
        work.described.update({p: merged.described[p] for p in work.data_files if p in merged.described})
        mine = {p: positions[p] for p in work.data_files if p in positions}
        converted = sum(len(matched.get(p, ())) for p in work.eq_targets)
        out[key] = PreparedMinor(base_id, scans[key], work, mine, converted)
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
        for f in _iterate(snapshot.removedDataFiles(table.io())):
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
                  prepared: PreparedMinor | None = None, committed: list[int] | None = None) -> MinorOutcome:
    """One attempt: decide, read, write, commit in one RowDelta. Raises py4j errors from Iceberg (the caller
    classifies them) and ``CommitConflictError`` from our own pre-commit check. ``before``: the partition's files
    at the base snapshot. ``committed``: the caller's list of its snapshots, which gets our commit as soon as it is
    on main, before the post-commit checks (so that the caller can undo it when one fails)."""
    base_id = before.snapshot_id
    if base_id is None:
        return MinorOutcome(base_id, [], 0, 0, 0, 0, 0, before.counts(), before.counts())
    if prepared is not None and prepared.still_valid_for(before):
        work, positions, converted_rows = prepared.work, prepared.positions, prepared.converted_rows
    else:
        work = decide_work(spark, table, key, before, whole_table=whole_table)
        matched = collect_positions(matched_positions(spark, table, table_ref, int(base_id), row_filter, work))
        # Position rows of absorbed Parquet files (v2, or a v3 table upgraded from v2); DVs are merged in Java.
        absorbed = collect_positions(absorbed_positions(spark, work, table))
        positions = union_positions(matched, absorbed)
        converted_rows = sum(len(matched.get(p, ())) for p in work.eq_targets)
    change = PartitionChange(key, expression, before, work, positions, converted_rows)
    return commit_changes(spark, table, [change], expression, base_id=int(base_id), plan_id=plan_id, tag=tag,
                          committed=committed)[0]


def commit_changes(spark: Any, table: Any, changes: list[PartitionChange], expression: Any, *, base_id: int,
                   plan_id: str, tag: str, committed: list[int] | None = None) -> list[MinorOutcome]:
    """Write the new position deletes / DVs of every partition of ``changes`` and replace their deletes in one
    RowDelta, validated from ``base_id`` with ``expression`` (the partitions' OR) as the conflict filter; then our
    post-commit checks. One outcome per change, in order. ``committed``: as for :func:`minor_compact`."""
    outcomes = [MinorOutcome(base_id, [], 0, 0, 0, 0, 0, c.before.counts(), c.before.counts()) for c in changes]
    busy = [i for i, c in enumerate(changes) if c.busy]
    if not busy:
        return outcomes
    fmt = int(table.operations().current().formatVersion())
    new_files = {
        i: write_deletion_vectors(spark, table, changes[i].work.data_files, changes[i].positions,
                                  previous_deletion_vectors(changes[i].work))
        if fmt >= 3 else
        write_position_delete_files(spark, table, changes[i].work.data_files, changes[i].positions,
                                    changes[i].work.described)
        for i in busy
    }
    removed = {i: {**changes[i].work.equality, **changes[i].work.positional, **changes[i].work.dangling}
               for i in busy}
    work = merge_works(changes[i].work for i in busy)
    check_no_conflicting_changes(spark, table, expression, base_id, None, work)

    required = sorted(set(work.eq_targets) | set(work.data_files))
    delta = (
        table.newRowDelta()
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
        gone = {delete_ref(d) for d in _iterate(commit.removedDeleteFiles(table.io()))}
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
