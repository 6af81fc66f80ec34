"""An independent merge-on-read reference reader ("oracle"), written from the Iceberg table spec.

The oracle answers "which rows are live in snapshot S?" without Spark and without pyiceberg's scan/read path:
pyiceberg is only used to read *metadata* (table metadata, manifest lists, manifest Avro files); data, delete
and Puffin files are read with pyarrow and the merge-on-read rules are applied here, following the spec
(https://iceberg.apache.org/spec/, sections cited inline as "spec §...").

Main entry point: :func:`read_table` returns an :class:`OracleResult` with the multiset of live rows, live row
counts per partition and, per live data file, the delete files that apply to it. :func:`spark_rows` reads the
same snapshot through Spark (tests only) and normalizes its rows the same way, so that::

    read_table(tbl).rows == spark_rows(spark, "cat.db.t")

Semantics notes:

* Rows are compared as multisets of normalized values (:func:`normalize_value`): timestamps become naive UTC
  ``datetime``, NaN becomes the single object :data:`NAN` (so NaN rows compare equal), structs/lists become tuples,
  maps frozensets of pairs.
* Equality deletes compare normalized values: null equals null (spec) and NaN equals NaN (like Iceberg Java's
  row comparison). Iceberg Java additionally *prunes* an equality delete file whose column bounds do not overlap
  the data file's; bounds exclude NaN, so Spark keeps a NaN row when the delete file's non-NaN values are all out of
  the data file's range. The oracle does not reproduce that pruning.
* Position delete files are applied by the spec's rule (same spec id and partition, data seq <= delete seq,
  referenced_data_file if set, no DV for the data file). Iceberg Java ignores the partition when
  referenced_data_file is set; the two differ only for metadata that violates the spec.

Limitations (deliberate): Parquet data and delete files only (Avro/ORC raise :class:`OracleError`); files must
carry field ids (no name mapping); schema evolution is resolved by field id for top-level columns, nested struct
fields are matched by name; nanosecond timestamps, variant and geo types are not supported.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import struct
import uuid
import zlib
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyiceberg.avro.file import AvroFile
from pyiceberg.manifest import (
    MANIFEST_ENTRY_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
)
from pyiceberg.schema import index_by_id
from pyiceberg.transforms import VoidTransform
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
    UUIDType,
)

if TYPE_CHECKING:
    from pyiceberg.io import FileIO
    from pyiceberg.schema import Schema
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot
    from pyspark.sql import SparkSession

__all__ = [
    "NAN",
    "DeleteKind",
    "FileEntry",
    "OracleError",
    "OracleResult",
    "decode_deletion_vector",
    "live_entries",
    "normalize_row",
    "normalize_value",
    "read_table",
    "rows_diff",
    "spark_rows",
]

# Reserved field ids of position delete files (spec §"Position Delete Files", §"Reserved Field IDs").
POS_DELETE_FILE_PATH_ID = 2147483546
POS_DELETE_POS_ID = 2147483545
PARQUET_FIELD_ID_KEY = b"PARQUET:field_id"
# Puffin blob type "deletion-vector-v1" (Puffin spec): magic bytes that prefix the serialized vector.
DV_MAGIC = bytes([0xD1, 0xD3, 0x39, 0x64])
# Roaring "portable" 32-bit format cookies (RoaringFormatSpec).
_ROARING_SERIAL_COOKIE_NO_RUN = 12346
_ROARING_SERIAL_COOKIE = 12347
_ROARING_NO_OFFSET_THRESHOLD = 4

# One NaN object, so that rows holding NaN compare equal inside tuples/Counters (tuple equality checks identity
# before ==, and every NaN is normalized to this very object).
NAN = float("nan")

_UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class OracleError(Exception):
    """The table's metadata or files violate the spec in a way the oracle refuses to guess about."""


class DeleteKind:
    POSITION = "position"
    DELETION_VECTOR = "deletion_vector"
    EQUALITY = "equality"


# --------------------------------------------------------------------------------------------------------------
# Metadata: live manifest entries
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileEntry:
    """A live (ADDED or EXISTING) manifest entry of a snapshot, with inherited values filled in.

    ``partition`` is the partition tuple as pyiceberg decodes it from the manifest (internal representation,
    e.g. ``days(ts)`` -> int). ``data_sequence_number`` is the entry's ``sequence_number`` (spec: "data sequence
    number"), inherited from the manifest when null.
    """

    path: str
    content: int  # 0 data, 1 position deletes (incl. DVs), 2 equality deletes
    file_format: str  # "PARQUET", "PUFFIN", ...
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    data_sequence_number: int
    file_sequence_number: int | None
    status: str  # "ADDED" | "EXISTING"
    snapshot_id: int | None
    equality_ids: tuple[int, ...] | None = None
    referenced_data_file: str | None = None
    content_offset: int | None = None
    content_size_in_bytes: int | None = None

    @property
    def is_data(self) -> bool:
        return self.content == 0

    @property
    def is_deletion_vector(self) -> bool:
        # spec §"Deletion Vectors": a DV is a position delete "file" stored as a Puffin blob; the manifest entry
        # carries referenced_data_file, content_offset and content_size_in_bytes.
        return self.content == 1 and self.file_format == "PUFFIN"

    @property
    def delete_kind(self) -> str | None:
        if self.content == 2:
            return DeleteKind.EQUALITY
        if self.content == 1:
            return DeleteKind.DELETION_VECTOR if self.is_deletion_vector else DeleteKind.POSITION
        return None

    @property
    def key(self) -> str:
        """Unique id of this content: several DVs share one Puffin file, so they are keyed by offset too."""
        return f"{self.path}#{self.content_offset}" if self.is_deletion_vector else self.path


# Positions in the v3 data_file struct (pyiceberg's DATA_FILE_TYPE[3]) of the fields pyiceberg's DataFile has no
# property for. pyiceberg 0.12 reads manifests with the *v2* schema in ManifestFile.fetch_manifest_entry, which drops
# referenced_data_file / content_offset / content_size_in_bytes, so we read manifests with the v3 schema ourselves.
_V3_DATA_FILE_FIELDS = [f.name for f in MANIFEST_ENTRY_SCHEMAS[3].find_field("data_file").field_type.fields]  # type: ignore[attr-defined]
_POS_REFERENCED_DATA_FILE = _V3_DATA_FILE_FIELDS.index("referenced_data_file")
_POS_CONTENT_OFFSET = _V3_DATA_FILE_FIELDS.index("content_offset")
_POS_CONTENT_SIZE = _V3_DATA_FILE_FIELDS.index("content_size_in_bytes")


def _read_manifest(manifest: ManifestFile, io: FileIO, format_version: int) -> Iterator[tuple[ManifestEntry, DataFile]]:
    if format_version < 2:
        # v1 manifests have no delete files and no sequence numbers (always 0): pyiceberg's reader is enough.
        for entry in manifest.fetch_manifest_entry(io, discard_deleted=False):
            yield entry, entry.data_file
        return
    with AvroFile[ManifestEntry](
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[3],  # superset of v2: the v3-only optional fields read as null from v2 manifests
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        for entry in reader:
            yield entry, entry.data_file


def _inherit_sequence_number(value: int | None, status: ManifestEntryStatus, manifest: ManifestFile, what: str,
                             path: str) -> int | None:
    # spec §"Sequence Number Inheritance": a null (data or file) sequence number of an ADDED entry is inherited
    # from the manifest's sequence_number in the manifest list; v1 metadata has none (treated as 0). An EXISTING
    # entry must carry an explicit one.
    if value is not None:
        return int(value)
    if status == ManifestEntryStatus.ADDED or manifest.sequence_number == 0:
        return int(manifest.sequence_number)
    if what == "file":
        return None  # file sequence numbers were optional in early v2 writers; the oracle never needs them
    raise OracleError(f"{path}: EXISTING entry without a {what} sequence number in {manifest.manifest_path}")


def live_entries(table: Table, snapshot_id: int | None = None) -> list[FileEntry]:
    """All live manifest entries (status ADDED or EXISTING) of the snapshot (spec §"Scan Planning": entries with
    status DELETED are not part of the snapshot). Empty for a table without snapshots."""
    snapshot = _snapshot(table, snapshot_id)
    if snapshot is None:
        return []
    io = table.io
    format_version = int(table.metadata.format_version)
    entries: list[FileEntry] = []
    for manifest in snapshot.manifests(io):
        for entry, data_file in _read_manifest(manifest, io, format_version):
            status = ManifestEntryStatus(entry.status)
            if status == ManifestEntryStatus.DELETED:
                continue
            path = data_file.file_path
            data_seq = _inherit_sequence_number(entry.sequence_number, status, manifest, "data", path)
            file_seq = _inherit_sequence_number(entry.file_sequence_number, status, manifest, "file", path)
            extra = data_file._data if format_version >= 2 else []  # noqa: SLF001 - positional v3 fields
            content = int(data_file.content) if format_version >= 2 else 0
            if (int(manifest.content) == 0) != (content == 0):
                raise OracleError(f"{path}: content {content} in a manifest of content {int(manifest.content)}")
            partition = data_file.partition
            entries.append(
                FileEntry(
                    path=path,
                    content=content,
                    file_format=FileFormat(data_file.file_format).name,
                    spec_id=int(manifest.partition_spec_id),
                    partition=tuple(partition[i] for i in range(len(partition))) if partition is not None else (),
                    record_count=int(data_file.record_count),
                    file_size_in_bytes=int(data_file.file_size_in_bytes),
                    data_sequence_number=data_seq,  # type: ignore[arg-type]
                    file_sequence_number=file_seq,
                    status=status.name,
                    snapshot_id=entry.snapshot_id if entry.snapshot_id is not None else manifest.added_snapshot_id,
                    equality_ids=tuple(int(i) for i in data_file.equality_ids) if content == 2 and data_file.equality_ids else None,
                    referenced_data_file=extra[_POS_REFERENCED_DATA_FILE] if len(extra) > _POS_REFERENCED_DATA_FILE else None,
                    content_offset=extra[_POS_CONTENT_OFFSET] if len(extra) > _POS_CONTENT_OFFSET else None,
                    content_size_in_bytes=extra[_POS_CONTENT_SIZE] if len(extra) > _POS_CONTENT_SIZE else None,
                )
            )
    return entries


def _snapshot(table: Table, snapshot_id: int | None) -> Snapshot | None:
    if snapshot_id is None:
        return table.metadata.current_snapshot()
    snapshot = table.metadata.snapshot_by_id(snapshot_id)
    if snapshot is None:
        raise OracleError(f"snapshot {snapshot_id} not found")
    return snapshot


# --------------------------------------------------------------------------------------------------------------
# Value normalization
# --------------------------------------------------------------------------------------------------------------


def normalize_value(v: Any) -> Any:
    """Normalize one value produced by an engine (Spark ``Row`` values, plain Python) into the oracle's canonical,
    hashable form: timestamps -> naive UTC ``datetime`` (aware ones are converted; naive ones are taken as they
    are), ``bytearray``/``memoryview`` -> ``bytes``, ``UUID`` -> ``str``, NaN -> :data:`NAN`, struct/``Row``/list ->
    tuple, ``dict`` (a map) -> ``frozenset`` of (key, value) pairs. Decimal, date, int, str, None stay as they are.

    This is type-agnostic: a ``dict`` is always read as a *map*. The oracle converts pyarrow values (where structs
    come out as dicts) with the Iceberg type instead (:func:`_from_arrow`)."""
    if v is None:
        return None
    if isinstance(v, float):
        return NAN if math.isnan(v) else v
    if isinstance(v, _dt.datetime):
        return v.astimezone(_UTC).replace(tzinfo=None) if v.tzinfo is not None else v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, (tuple, list)):  # pyspark Row is a tuple
        return tuple(normalize_value(x) for x in v)
    if isinstance(v, dict):
        return frozenset((normalize_value(k), normalize_value(x)) for k, x in v.items())
    return v


def normalize_row(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(normalize_value(v) for v in values)


def _from_arrow(v: Any, t: IcebergType) -> Any:
    """pyarrow ``to_pylist`` value of Iceberg type ``t`` -> canonical form (same as :func:`normalize_value`)."""
    if v is None:
        return None
    if isinstance(t, StructType):
        if isinstance(v, dict):
            return tuple(_from_arrow(v.get(f.name), f.field_type) for f in t.fields)
        return tuple(_from_arrow(x, f.field_type) for x, f in zip(v, t.fields))
    if isinstance(t, ListType):
        return tuple(_from_arrow(x, t.element_type) for x in v)
    if isinstance(t, MapType):
        items = v.items() if isinstance(v, dict) else v
        return frozenset((_from_arrow(k, t.key_type), _from_arrow(x, t.value_type)) for k, x in items)
    if isinstance(t, UUIDType):
        if isinstance(v, (bytes, bytearray)):
            return str(uuid.UUID(bytes=bytes(v)))
        return str(v)
    if isinstance(t, (TimestampType, TimestamptzType)) and isinstance(v, int):
        v = _EPOCH + _dt.timedelta(microseconds=v)  # e.g. an initial-default in micros
    if isinstance(t, DateType) and isinstance(v, int):
        v = _dt.date(1970, 1, 1) + _dt.timedelta(days=v)
    if isinstance(t, DecimalType) and not isinstance(v, Decimal):
        v = Decimal(str(v))
    return normalize_value(v)


# --------------------------------------------------------------------------------------------------------------
# Reading files
# --------------------------------------------------------------------------------------------------------------


def _open_parquet(io: FileIO, path: str) -> pq.ParquetFile:
    return pq.ParquetFile(io.new_input(path).open())


def _columns_by_field_id(pf: pq.ParquetFile) -> dict[int, str]:
    out: dict[int, str] = {}
    for f in pf.schema_arrow:
        fid = (f.metadata or {}).get(PARQUET_FIELD_ID_KEY)
        if fid is not None:
            out[int(fid)] = f.name
    return out


def _read_columns(io: FileIO, path: str, field_ids: Sequence[int]) -> tuple[dict[int, pa.ChunkedArray | None], int]:
    """Read the given top-level field ids of a Parquet file (spec §"Column Projection": columns are resolved by
    field id; a field id missing from the file reads as its initial-default, i.e. null unless one is set).
    Returns {field id: column or None if missing} and the file's row count."""
    pf = _open_parquet(io, path)
    by_id = _columns_by_field_id(pf)
    if not by_id and pf.schema_arrow.names:
        raise OracleError(f"{path}: Parquet file without field ids (name mapping is not supported by the oracle)")
    wanted = [by_id[i] for i in dict.fromkeys(field_ids) if i in by_id]
    tbl = pf.read(columns=wanted, use_threads=False)
    num_rows = pf.metadata.num_rows
    return {i: (tbl.column(by_id[i]) if i in by_id else None) for i in field_ids}, num_rows


# Types whose pyarrow Python values are already canonical.
_AS_IS_TYPES = (BooleanType, IntegerType, LongType, StringType, DateType, DecimalType, BinaryType)


def _pylist(column: pa.ChunkedArray | None, t: IcebergType, n: int, default: Any = None) -> list[Any]:
    if column is None:
        value = _from_arrow(default, t)
        return [value] * n
    values: list[Any] = column.to_pylist()
    if isinstance(t, _AS_IS_TYPES) and not pa.types.is_dictionary(column.type):
        return values
    return [_from_arrow(v, t) for v in values]


def _read_position_deletes(io: FileIO, entry: FileEntry) -> dict[str, pa.Array]:
    """spec §"Position Delete Files": rows (file_path, pos) with the reserved field ids 2147483546 / 2147483545."""
    if entry.file_format != "PARQUET":
        raise OracleError(f"{entry.path}: position delete files in {entry.file_format} are not supported")
    pf = _open_parquet(io, entry.path)
    by_id = _columns_by_field_id(pf)
    path_col = by_id.get(POS_DELETE_FILE_PATH_ID, "file_path")
    pos_col = by_id.get(POS_DELETE_POS_ID, "pos")
    tbl = pf.read(columns=[path_col, pos_col], use_threads=False)
    paths, positions = tbl.column(path_col), tbl.column(pos_col).cast(pa.int64())
    if entry.referenced_data_file is not None:
        # spec: when referenced_data_file is set, every row of the file references that one data file.
        return {entry.referenced_data_file: positions.combine_chunks()}
    out: dict[str, pa.Array] = {}
    for p in pc.unique(paths).to_pylist():
        out[p] = pc.filter(positions, pc.equal(paths, p)).combine_chunks()
    return out


def _roaring32_size(buf: bytes, start: int) -> int:
    """Byte length of one serialized 32-bit Roaring bitmap in the portable format (RoaringFormatSpec), so that
    consecutive bitmaps of a 64-bit portable bitmap can be split without re-serializing."""
    (cookie,) = struct.unpack_from("<I", buf, start)
    pos = start + 4
    if cookie & 0xFFFF == _ROARING_SERIAL_COOKIE:
        n = (cookie >> 16) + 1
        run_flags = buf[pos : pos + (n + 7) // 8]
        pos += (n + 7) // 8
        has_offsets = n >= _ROARING_NO_OFFSET_THRESHOLD
    elif cookie == _ROARING_SERIAL_COOKIE_NO_RUN:
        (n,) = struct.unpack_from("<I", buf, pos)
        pos += 4
        run_flags = b"\x00" * ((n + 7) // 8)
        has_offsets = True
    else:
        raise OracleError(f"invalid Roaring cookie {cookie}")
    cards = [struct.unpack_from("<HH", buf, pos + 4 * i)[1] + 1 for i in range(n)]
    pos += 4 * n
    if has_offsets:
        pos += 4 * n
    for i, card in enumerate(cards):
        if run_flags[i // 8] >> (i % 8) & 1:
            (runs,) = struct.unpack_from("<H", buf, pos)
            pos += 2 + 4 * runs
        elif card <= 4096:
            pos += 2 * card
        else:
            pos += 8192
    return int(pos - start)


def decode_deletion_vector(blob: bytes) -> pa.Array:
    """Decode a Puffin "deletion-vector-v1" blob into sorted int64 positions.

    Layout (Puffin spec): 4-byte big-endian length of (magic + vector), magic D1 D3 39 64, the vector as a 64-bit
    Roaring bitmap in the portable format (8-byte little-endian count of 32-bit bitmaps; then per bitmap a 4-byte
    little-endian key = high 32 bits, followed by a portable 32-bit Roaring bitmap), then a 4-byte big-endian
    CRC-32 of magic + vector."""
    from pyroaring import BitMap

    if len(blob) < 12:
        raise OracleError("deletion vector blob too short")
    (length,) = struct.unpack_from(">I", blob, 0)
    if length + 8 != len(blob):
        raise OracleError(f"deletion vector length {length} does not match blob size {len(blob)}")
    body = blob[4 : 4 + length]
    if body[:4] != DV_MAGIC:
        raise OracleError("deletion vector magic mismatch")
    (crc,) = struct.unpack_from(">I", blob, 4 + length)
    if zlib.crc32(body) & 0xFFFFFFFF != crc:
        raise OracleError("deletion vector CRC mismatch")
    vector = body[4:]
    (count,) = struct.unpack_from("<Q", vector, 0)
    pos = 8
    chunks: list[pa.Array] = []
    last_key = -1
    for _ in range(count):
        (key,) = struct.unpack_from("<I", vector, pos)
        pos += 4
        if key <= last_key:
            raise OracleError("deletion vector keys are not strictly ascending")
        last_key = key
        size = _roaring32_size(vector, pos)
        bitmap = BitMap.deserialize(vector[pos : pos + size])
        pos += size
        low = pa.array(bitmap.to_array(), type=pa.uint32()).cast(pa.int64())
        chunks.append(pc.add(low, pa.scalar(key << 32, pa.int64())) if key else low)
    if pos != len(vector):
        raise OracleError(f"deletion vector has {len(vector) - pos} trailing bytes")
    return pa.concat_arrays(chunks) if chunks else pa.array([], pa.int64())


def _read_deletion_vector(io: FileIO, entry: FileEntry) -> pa.Array:
    if entry.referenced_data_file is None or entry.content_offset is None or entry.content_size_in_bytes is None:
        raise OracleError(f"{entry.path}: DV entry without referenced_data_file/content_offset/content_size_in_bytes")
    with io.new_input(entry.path).open() as stream:
        stream.seek(entry.content_offset)
        blob = stream.read(entry.content_size_in_bytes)
    positions = decode_deletion_vector(blob)
    # spec §"Deletion Vectors": the entry's record_count is the DV's cardinality.
    if len(positions) != entry.record_count:
        raise OracleError(f"{entry.key}: DV has {len(positions)} positions, manifest says {entry.record_count}")
    return positions


# --------------------------------------------------------------------------------------------------------------
# Merge-on-read
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OracleResult:
    snapshot_id: int | None
    schema_id: int
    columns: tuple[str, ...]
    #: Multiset of live rows, values normalized (see :func:`normalize_value`), in the snapshot schema's order.
    rows: Counter[tuple[Any, ...]]
    #: Live rows per (spec_id, partition tuple) for every partition that has a live data file (0 included).
    live_rows_by_partition: dict[tuple[int, tuple[Any, ...]], int]
    data_files: tuple[FileEntry, ...]
    delete_files: tuple[FileEntry, ...]
    #: data file path -> the delete files that apply to it (only files with at least one). Position delete files
    #: and DVs count only when they name the data file; equality deletes count by the scope rule alone
    #: (sequence number + partition), whether or not a row matches.
    applicable_deletes: dict[str, frozenset[FileEntry]] = field(default_factory=dict)
    #: data file path -> number of its rows removed by deletes (only files with at least one).
    deleted_rows_by_data_file: dict[str, int] = field(default_factory=dict)

    @property
    def data_files_with_applicable_deletes(self) -> set[str]:
        return set(self.applicable_deletes)

    @property
    def data_files_with_deleted_rows(self) -> set[str]:
        return set(self.deleted_rows_by_data_file)

    @property
    def dangling_delete_files(self) -> tuple[FileEntry, ...]:
        """Live delete files that apply to no live data file."""
        used = {d.key for ds in self.applicable_deletes.values() for d in ds}
        return tuple(d for d in self.delete_files if d.key not in used)

    @property
    def row_count(self) -> int:
        return sum(self.rows.values())


def _is_unpartitioned(table: Table, spec_id: int) -> bool:
    # Java's PartitionSpec.isUnpartitioned(): no fields, or only void transforms.
    spec = table.metadata.specs()[spec_id]
    return all(isinstance(f.transform, VoidTransform) for f in spec.fields)


def _types_by_field_id(table: Table) -> dict[int, NestedField]:
    """Every top-level-or-nested field id ever defined, newest schema wins (equality ids may name a column that a
    later schema dropped)."""
    out: dict[int, NestedField] = {}
    for schema in sorted(table.metadata.schemas, key=lambda s: s.schema_id):
        out.update(index_by_id(schema))
    return out


def read_table(table: Table, snapshot_id: int | None = None) -> OracleResult:
    """Live rows of ``table`` at ``snapshot_id`` (default: current snapshot), merge-on-read per the spec."""
    snapshot = _snapshot(table, snapshot_id)
    schema: Schema
    if snapshot is not None and snapshot.schema_id is not None:
        schema = table.metadata.schema_by_id(snapshot.schema_id) or table.schema()
    else:
        schema = table.schema()
    columns = tuple(f.name for f in schema.fields)
    if snapshot is None:
        return OracleResult(None, schema.schema_id, columns, Counter(), {}, (), ())
    io = table.io

    entries = live_entries(table, snapshot.snapshot_id)
    data_files = tuple(e for e in entries if e.is_data)
    delete_files = tuple(e for e in entries if not e.is_data)
    for d in data_files:
        if d.file_format != "PARQUET":
            raise OracleError(f"{d.path}: data files in {d.file_format} are not supported")

    # Index deletes (spec §"Scan Planning", "Delete File Application").
    by_partition_pos: dict[tuple[int, tuple[Any, ...]], list[FileEntry]] = defaultdict(list)
    dv_by_path: dict[str, list[FileEntry]] = defaultdict(list)
    eq_by_partition: dict[tuple[int, tuple[Any, ...]], list[FileEntry]] = defaultdict(list)
    eq_global: list[FileEntry] = []
    for d in delete_files:
        kind = d.delete_kind
        if kind == DeleteKind.DELETION_VECTOR:
            if d.referenced_data_file is None:
                raise OracleError(f"{d.key}: deletion vector without referenced_data_file")
            dv_by_path[d.referenced_data_file].append(d)
        elif kind == DeleteKind.POSITION:
            by_partition_pos[(d.spec_id, d.partition)].append(d)
        else:
            if not d.equality_ids:
                raise OracleError(f"{d.path}: equality delete file without equality_ids")
            if _is_unpartitioned(table, d.spec_id):
                eq_global.append(d)
            else:
                eq_by_partition[(d.spec_id, d.partition)].append(d)

    # Lazily loaded delete contents.
    pos_cache: dict[str, dict[str, pa.Array]] = {}
    dv_cache: dict[str, pa.Array] = {}
    eq_cache: dict[str, frozenset[tuple[Any, ...]]] = {}
    fields_by_id = _types_by_field_id(table)

    def field_by_id(fid: int) -> NestedField:
        if fid not in fields_by_id:
            raise OracleError(f"equality field id {fid} is not defined by any schema of the table")
        return fields_by_id[fid]

    def eq_keys(d: FileEntry) -> frozenset[tuple[Any, ...]]:
        if d.key not in eq_cache:
            if d.file_format != "PARQUET":
                raise OracleError(f"{d.path}: equality delete files in {d.file_format} are not supported")
            ids = d.equality_ids or ()
            cols, n = _read_columns(io, d.path, ids)
            lists = [_pylist(cols[i], field_by_id(i).field_type, n) for i in ids]
            # Null equals null for equality deletes (spec §"Equality Delete Files"): tuples containing None match.
            eq_cache[d.key] = frozenset(zip(*lists)) if lists else frozenset()
        return eq_cache[d.key]

    rows: Counter[tuple[Any, ...]] = Counter()
    live_by_partition: dict[tuple[int, tuple[Any, ...]], int] = {}
    applicable: dict[str, frozenset[FileEntry]] = {}
    deleted_counts: dict[str, int] = {}

    for data in data_files:
        seq = data.data_sequence_number
        part_key = (data.spec_id, data.partition)
        applied: set[FileEntry] = set()

        # Deletion vectors: referenced_data_file == data path, data seq <= DV seq, same partition.
        dvs = [d for d in dv_by_path.get(data.path, ()) if seq <= d.data_sequence_number and (d.spec_id, d.partition) == part_key]
        if len(dvs) > 1:
            raise OracleError(f"{data.path}: {len(dvs)} deletion vectors apply (the spec allows at most one)")
        deleted_positions: list[pa.Array] = []
        if dvs:
            dv = dvs[0]
            if dv.key not in dv_cache:
                dv_cache[dv.key] = _read_deletion_vector(io, dv)
            deleted_positions.append(dv_cache[dv.key])
            applied.add(dv)
        else:
            # Position delete files: same partition (spec and values), data seq <= delete seq, referenced_data_file
            # (if set) equals the data path, and no DV applies to the data file (spec §"Scan Planning": a DV must
            # contain all earlier position deletes of its data file, so position delete files are then ignored).
            for d in by_partition_pos.get(part_key, ()):
                if seq > d.data_sequence_number:
                    continue
                if d.referenced_data_file is not None and d.referenced_data_file != data.path:
                    continue
                if d.path not in pos_cache:
                    pos_cache[d.path] = _read_position_deletes(io, d)
                positions = pos_cache[d.path].get(data.path)
                if positions is not None and len(positions):
                    deleted_positions.append(positions)
                    applied.add(d)

        # Equality deletes: data seq < delete seq (strictly), and same partition or a global (unpartitioned) delete.
        eqs = [d for d in (*eq_by_partition.get(part_key, ()), *eq_global) if seq < d.data_sequence_number]
        applied.update(eqs)

        eq_groups: dict[tuple[int, ...], set[tuple[Any, ...]]] = defaultdict(set)
        for d in eqs:
            eq_groups[d.equality_ids or ()].update(eq_keys(d))

        # Read the data file: snapshot schema columns + equality key columns, resolved by field id.
        needed = [f.field_id for f in schema.fields]
        needed += [i for ids in eq_groups for i in ids if i not in needed]
        cols, n = _read_columns(io, data.path, needed)
        if n != data.record_count:
            raise OracleError(f"{data.path}: {n} rows in the file, manifest says {data.record_count}")

        keep: pa.Array | None = None
        if deleted_positions:
            positions = pa.chunked_array(deleted_positions, type=pa.int64())
            keep = pc.invert(pc.is_in(pa.array(range(n), pa.int64()), value_set=positions.combine_chunks()))
        keep_list = keep.to_pylist() if keep is not None else [True] * n

        if eq_groups:
            for ids, keys in eq_groups.items():
                if not keys:
                    continue
                key_fields = [field_by_id(i) for i in ids]
                key_lists = [_pylist(cols[f.field_id], f.field_type, n, f.initial_default) for f in key_fields]
                for idx, key in enumerate(zip(*key_lists)):
                    if keep_list[idx] and key in keys:
                        keep_list[idx] = False

        value_lists = [_pylist(cols[f.field_id], f.field_type, n, f.initial_default) for f in schema.fields]
        live = 0
        for idx, row in enumerate(zip(*value_lists)) if value_lists else enumerate([()] * n):
            if keep_list[idx]:
                rows[row] += 1
                live += 1
        live_by_partition[part_key] = live_by_partition.get(part_key, 0) + live
        if live != n:
            deleted_counts[data.path] = n - live
        if applied:
            applicable[data.path] = frozenset(applied)

    return OracleResult(
        snapshot_id=snapshot.snapshot_id,
        schema_id=schema.schema_id,
        columns=columns,
        rows=rows,
        live_rows_by_partition=live_by_partition,
        data_files=data_files,
        delete_files=delete_files,
        applicable_deletes=applicable,
        deleted_rows_by_data_file=deleted_counts,
    )


# --------------------------------------------------------------------------------------------------------------
# Spark side (tests only)
# --------------------------------------------------------------------------------------------------------------


def _quote_identifier(part: str) -> str:
    if not _IDENTIFIER.match(part):
        raise ValueError(f"invalid identifier {part!r}")
    return f"`{part}`"


def _from_spark(v: Any, data_type: Any) -> Any:
    from pyspark.sql import types as T

    if v is None:
        return None
    if isinstance(data_type, T.TimestampType) and isinstance(v, _dt.datetime) and v.tzinfo is None:
        # pyspark turns TimestampType into a naive datetime in the *Python process's* local zone; make it UTC.
        return v.astimezone(_UTC).replace(tzinfo=None)
    if isinstance(data_type, T.StructType):
        return tuple(_from_spark(x, f.dataType) for x, f in zip(v, data_type.fields))
    if isinstance(data_type, T.ArrayType):
        return tuple(_from_spark(x, data_type.elementType) for x in v)
    if isinstance(data_type, T.MapType):
        return frozenset((_from_spark(k, data_type.keyType), _from_spark(x, data_type.valueType)) for k, x in v.items())
    return normalize_value(v)


def spark_rows(
    spark: SparkSession,
    table_ref: str,
    snapshot_id: int | None = None,
    columns: Sequence[str] | None = None,
) -> Counter[tuple[Any, ...]]:
    """Rows of ``table_ref`` (``catalog.db.table``) read by Spark, as a multiset normalized like the oracle's.
    ``snapshot_id`` reads ``VERSION AS OF`` that snapshot (Spark then uses the snapshot's schema)."""
    ref = ".".join(_quote_identifier(p) for p in table_ref.split("."))
    select = ", ".join(_quote_identifier(c) for c in columns) if columns else "*"
    sql = f"SELECT {select} FROM {ref}"
    if snapshot_id is not None:
        sql += f" VERSION AS OF {int(snapshot_id)}"
    df = spark.sql(sql)
    fields = df.schema.fields
    return Counter(tuple(_from_spark(v, f.dataType) for v, f in zip(row, fields)) for row in df.collect())


def rows_diff(expected: Mapping[tuple[Any, ...], int], actual: Mapping[tuple[Any, ...], int], limit: int = 10) -> str:
    """Short human-readable multiset difference, for assertion messages."""
    missing = Counter(expected) - Counter(actual)
    extra = Counter(actual) - Counter(expected)
    lines = [f"missing {sum(missing.values())} row(s), extra {sum(extra.values())} row(s)"]
    lines += [f"  - {r!r} x{c}" for r, c in list(missing.items())[:limit]]
    lines += [f"  + {r!r} x{c}" for r, c in list(extra.items())[:limit]]
    return "\n".join(lines)


def ancestor_ids(table: Any, snapshot_id: int) -> list[int]:
    """``snapshot_id`` and its ancestors, newest first (pyiceberg's ``ancestors_of``)."""
    from pyiceberg.table.snapshots import ancestors_of

    return [s.snapshot_id for s in ancestors_of(table.snapshot_by_id(snapshot_id), table.metadata)]
