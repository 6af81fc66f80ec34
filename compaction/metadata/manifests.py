"""Reading live manifest entries with pyiceberg's Avro reader, including the v3 fields.

pyiceberg 0.12 reads manifests with its v2 read schema (``DEFAULT_READ_VERSION``), which drops the v3 fields
``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes`` that deletion vectors need, and its
``inspect.entries()`` crashes on files with null ``column_sizes`` (hand-made deletes, every DV). So we read the
manifest Avro files ourselves and apply the spec's inheritance rules (snapshot id and sequence numbers of ADDED
entries come from the manifest), exactly as pyiceberg's ``_inherit_from_manifest`` does.

Speed (metadata-only inspect of 100k-file tables; :func:`live_rows` is the fast path, :func:`live_entries` is
built on it): decoding is driven by pyiceberg - its Avro container reader (header, codecs, blocks), its schema
conversion and its reader tree for the file's own schema, its binary decoder (Cython when built) - but instead
of materialising every entry as ``ManifestEntry``/``DataFile`` records (~40 Python objects per entry, most of
them column statistics), the reader tree of each manifest schema is turned once into the source of one Python
function that decodes a whole Avro block (generated from the schema's layout only; cached by schema text) and

* reads only the fields compaction needs (status, snapshot id, sequence numbers; content, path, format, partition,
  record count, size, equality ids, referenced data file, DV offset/size; the lower/upper bounds only when asked,
  they are needed for position deletes) into locals, applies the inheritance rules and appends one tuple, and
* *skips* everything else (column sizes, value/null/NaN counts, bounds, key metadata, split offsets, sort order,
  unknown future fields) without building Python objects: int->long maps and long lists with the decoder's bulk
  ``read_ints``, int->binary maps with ``read_int_bytes_dict`` into a scratch dict, anything else with
  pyiceberg's own ``Reader.skip``.

Leaf values are read with the same decoder calls as pyiceberg's primitive readers (``read_int``, ``read_utf8``,
...); anything not recognised (decimal, uuid, fixed, nested types, ...) is read by pyiceberg's reader object for
it, so values are identical to what pyiceberg returns. Fields missing from an older file schema get the v3 read
schema's initial default (``content`` = 0 in v1 manifests) or null, as pyiceberg's schema resolution gives them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:
    from pyiceberg.avro.reader import Reader
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


@dataclass(frozen=True)
class LiveEntry:
    """One live (ADDED or EXISTING) manifest entry with the fields compaction needs."""

    content: int  # 0 data, 1 position deletes (incl. DVs), 2 equality deletes (Iceberg spec content ids)
    file_path: str
    file_format: str  # "PARQUET", "AVRO", "ORC", "PUFFIN"
    spec_id: int
    partition: tuple[Any, ...]
    record_count: int
    file_size_in_bytes: int
    data_sequence_number: int
    file_sequence_number: int | None
    snapshot_id: int | None
    equality_ids: tuple[int, ...]
    referenced_data_file: str | None
    content_offset: int | None
    content_size_in_bytes: int | None
    lower_bounds: dict[int, bytes] | None
    upper_bounds: dict[int, bytes] | None

    @property
    def is_deletion_vector(self) -> bool:
        return self.content == 1 and self.file_format == "PUFFIN"


def live_entries(table: Table, snapshot: Snapshot | None = None, *, with_bounds: bool = False) -> Iterator[LiveEntry]:
    """Yield every live manifest entry of ``snapshot`` (default: the current one)."""
    for spec_id, rows in live_rows(table, snapshot, bounds=BOUNDS_ALL if with_bounds else BOUNDS_NONE):
        for (content, path, file_format, partition, records, size, seq, fseq, snapshot_id, equality_ids, referenced,
             offset, content_size, lower, upper) in rows:
            yield LiveEntry(
                content=content,
                file_path=path,
                file_format=file_format,
                spec_id=spec_id,
                partition=partition,
                record_count=records,
                file_size_in_bytes=size,
                data_sequence_number=seq,
                file_sequence_number=fseq,
                snapshot_id=snapshot_id,
                equality_ids=tuple(equality_ids or ()),
                referenced_data_file=referenced,
                content_offset=offset,
                content_size_in_bytes=content_size,
                lower_bounds=lower,
                upper_bounds=upper,
            )


# ---------------------------------------------------------------------------------------------------------------
# Fast path: manifest entries as plain tuples

#: ``bounds`` modes of :func:`live_rows`: no bounds, bounds of every entry, bounds of delete files only.
BOUNDS_NONE, BOUNDS_ALL, BOUNDS_DELETES = "none", "all", "deletes"

#: Layout of the row tuples of :func:`live_rows` (one live entry, inheritance applied).
ROW_FIELDS = (
    "content",  # int: 0 data, 1 position deletes / DVs, 2 equality deletes
    "file_path",  # str
    "file_format",  # str, FileFormat name: "PARQUET", "AVRO", "ORC", "PUFFIN"
    "partition",  # tuple of partition values (pyiceberg's Avro representation), () when unpartitioned
    "record_count",  # int
    "file_size_in_bytes",  # int
    "data_sequence_number",  # int (inherited; 0 when unknown, as LiveEntry)
    "file_sequence_number",  # int | None (inherited)
    "snapshot_id",  # int | None (inherited)
    "equality_ids",  # list[int] | None (as read)
    "referenced_data_file",  # str | None
    "content_offset",  # int | None
    "content_size_in_bytes",  # int | None
    "lower_bounds",  # dict[int, bytes] | None (None unless requested by ``bounds``)
    "upper_bounds",  # dict[int, bytes] | None
)
Row = tuple[int, str, str, tuple[Any, ...], int, int, int, "int | None", "int | None", "list[int] | None",
            "str | None", "int | None", "int | None", "dict[int, bytes] | None", "dict[int, bytes] | None"]


class ManifestCache:
    """The live rows of manifests already read, by manifest path: a manifest file is never rewritten in place (the
    spec: every commit writes new manifests and a new manifest list; a manifest kept by a later snapshot is listed
    with the same sequence number and adding snapshot), so a watcher that re-reads a table after each commit decodes
    only the manifests that commit wrote. Least recently used entries go beyond ``max_rows`` rows. Not thread-safe."""

    def __init__(self, max_rows: int = 2_000_000) -> None:
        from collections import OrderedDict

        self.max_rows = max_rows
        self._rows: OrderedDict[tuple[str, str], list[Row]] = OrderedDict()
        self._size = 0
        self.hits = 0
        self.misses = 0

    def get(self, path: str, bounds: str) -> list[Row] | None:
        rows = self._rows.get((path, bounds))
        if rows is not None:
            self._rows.move_to_end((path, bounds))
            self.hits += 1
        return rows

    def put(self, path: str, bounds: str, rows: list[Row]) -> None:
        self.misses += 1
        key = (path, bounds)
        if key in self._rows:
            return
        self._rows[key] = rows
        self._size += len(rows) + 1
        while self._size > self.max_rows and len(self._rows) > 1:
            _, dropped = self._rows.popitem(last=False)
            self._size -= len(dropped) + 1


def live_rows(table: Table, snapshot: Snapshot | None = None, *, bounds: str = BOUNDS_NONE,
              cache: ManifestCache | None = None) -> Iterator[tuple[int, list[Row]]]:
    """``(partition spec id, rows)`` per manifest of ``snapshot`` (default: the current one), in manifest order; the
    rows (layout :data:`ROW_FIELDS`) are the live (ADDED / EXISTING) entries in file order, with the spec's
    inheritance applied - the same values, in the same order, as :func:`live_entries`.

    ``bounds``: :data:`BOUNDS_NONE` (lower/upper bounds are None), :data:`BOUNDS_ALL`, or :data:`BOUNDS_DELETES`
    (bounds of delete files only; data manifests are decoded without them, and re-decoded with them should a data
    manifest hold a delete file, which the spec does not allow). ``cache``: rows of manifests read before (the
    rows are shared: callers must not modify them).
    """
    if bounds not in (BOUNDS_NONE, BOUNDS_ALL, BOUNDS_DELETES):
        raise ValueError(f"bounds must be one of {BOUNDS_NONE!r}, {BOUNDS_ALL!r}, {BOUNDS_DELETES!r}, got {bounds!r}")
    snapshot = snapshot if snapshot is not None else table.current_snapshot()
    if snapshot is None:
        return
    for manifest in snapshot.manifests(table.io):
        yield manifest.partition_spec_id, rows_of(table, manifest, bounds=bounds, cache=cache)


def rows_of(table: Table, manifest: Any, *, bounds: str = BOUNDS_NONE, cache: ManifestCache | None = None) -> list[Row]:
    """The live rows of one manifest (a ``ManifestFile`` of ``table``'s manifest lists), as :func:`live_rows`."""
    from pyiceberg.manifest import ManifestContent

    cached = None if cache is None else cache.get(manifest.manifest_path, bounds)
    if cached is not None:
        return cached
    input_file = table.io.new_input(manifest.manifest_path)
    if bounds == BOUNDS_DELETES and manifest.content == ManifestContent.DATA:
        rows, has_deletes = _read_manifest(input_file, manifest, with_bounds=False)
        if has_deletes:  # pragma: no cover - not a valid table (spec: data manifests hold data files only)
            rows, _ = _read_manifest(input_file, manifest, with_bounds=True)
    else:
        rows, _ = _read_manifest(input_file, manifest, with_bounds=bounds != BOUNDS_NONE)
    if cache is not None:
        cache.put(manifest.manifest_path, bounds, rows)
    return rows


def _read_manifest(input_file: Any, manifest: Any, *, with_bounds: bool) -> tuple[list[Row], bool]:
    """The live rows of one manifest, and whether one of them is a delete file."""
    from pyiceberg.avro.file import AvroFile

    rows: list[Row] = []
    has_deletes = False
    with AvroFile[Any](input_file) as avro:
        read_block = _block_reader(avro.header.meta.get("avro.schema", ""), avro.schema, with_bounds)
        # The container's blocks, as AvroFile.__next__ walks them (pyiceberg==0.12.0 is pinned): _read_block
        # checks the sync marker and decompresses; like __next__, stop at end of file or at an empty block.
        while True:
            try:
                count = avro._read_block()
            except EOFError:
                break
            if count <= 0:
                break
            assert avro.block is not None
            if read_block(avro.block.block_decoder, count, rows.append, manifest.sequence_number,
                          manifest.added_snapshot_id):
                has_deletes = True
    return rows, has_deletes


# ---------------------------------------------------------------------------------------------------------------
# Compiling a manifest file schema into one block-reading function

# Row fields read from the entry struct and from its data_file struct (see ROW_FIELDS; the sequence numbers are
# the raw ones, before inheritance).
_ENTRY_FIELDS = ("status", "snapshot_id", "sequence_number", "file_sequence_number")
_DATA_FILE_FIELDS = ("content", "file_path", "file_format", "partition", "record_count", "file_size_in_bytes",
                     "equality_ids", "referenced_data_file", "content_offset", "content_size_in_bytes")
_BOUNDS_FIELDS = ("lower_bounds", "upper_bounds")

# After reading an entry's fields into the variables named like them: skip DELETED entries, apply inheritance
# (spec "Sequence Number Inheritance", as pyiceberg's _inherit_from_manifest: null sequence numbers of ADDED
# entries, and all of them in v1 manifests - manifest sequence number 0 - come from the manifest; a null snapshot
# id is the manifest's), reject invalid status/content values like pyiceberg's enum readers, append the row.
_ENTRY_EPILOGUE = """\
if status == 2:
    continue
if status != 1 and status != 0:
    ManifestEntryStatus(status)
if status == 1 or manifest_sequence_number == 0:
    if sequence_number is None:
        sequence_number = manifest_sequence_number
    if file_sequence_number is None:
        file_sequence_number = manifest_sequence_number
if snapshot_id is None:
    snapshot_id = manifest_snapshot_id
if content != 0:
    if content != 1 and content != 2:
        DataFileContent(content)
    has_deletes = True
format_name = FORMAT_NAMES.get(file_format)
if format_name is None:
    format_name = FORMAT_NAMES[file_format] = FileFormat(file_format).name
append((content, file_path, format_name, partition, record_count, file_size_in_bytes,
        0 if sequence_number is None else sequence_number, file_sequence_number, snapshot_id, equality_ids,
        referenced_data_file, content_offset, content_size_in_bytes, lower_bounds, upper_bounds))
"""

BlockReader = Callable[[Any, int, Callable[[Row], None], int, "int | None"], bool]

_COMPILED: dict[tuple[str, bool], BlockReader] = {}
_COMPILED_MAX = 64


def _block_reader(schema_json: str, schema: Any, with_bounds: bool) -> BlockReader:
    """``read_block(decoder, count, append, manifest_sequence_number, manifest_snapshot_id) -> has_deletes`` for
    manifests whose Avro schema text is ``schema_json`` (``schema``: its Iceberg form): decodes ``count`` entries
    and appends the rows of the live ones. Cached by schema text: a table's manifests share a handful."""
    key = (schema_json, with_bounds)
    compiled = _COMPILED.get(key)
    if compiled is None:
        compiled = _compile_block_reader(schema, with_bounds)
        if len(_COMPILED) >= _COMPILED_MAX:
            _COMPILED.clear()
        _COMPILED[key] = compiled
    return compiled


# Primitive readers of pyiceberg whose values are one decoder call: (reader class, read method, skip method).
_LEAVES = (
    ("IntegerReader", "read_int", "skip_int"),  # int, long, date, time, timestamp(tz)(_ns): Avro long/int
    ("StringReader", "read_utf8", "skip_utf8"),
    ("BinaryReader", "read_bytes", "skip_bytes"),
    ("BooleanReader", "read_boolean", "skip_boolean"),
    ("FloatReader", "read_float", "skip_float"),
    ("DoubleReader", "read_double", "skip_double"),
)
_INT = ("d.read_int()", "d.skip_int()")
_BYTES = ("d.read_bytes()", "d.skip_bytes()")


class _Codegen:
    """Emits the statements reading one entry; leaf reads are inlined decoder calls, anything else calls the
    pyiceberg reader object (bound in the generated function's namespace)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.namespace: dict[str, Any] = {}
        self._n = 0

    def name(self, prefix: str) -> str:
        self._n += 1
        return f"{prefix}{self._n}"

    def bind(self, obj: Any) -> str:
        ref = self.name("r")
        self.namespace[ref] = obj
        return ref

    @staticmethod
    def leaf(reader: Reader) -> tuple[str, str] | None:
        """(decoder read call, decoder skip call) of a plain primitive reader, else None."""
        from pyiceberg.avro import reader as R

        kind = type(reader)
        for cls, read, skip in _LEAVES:
            reader_cls = getattr(R, cls)
            if issubclass(kind, reader_cls) and kind.read is reader_cls.read and kind.skip is reader_cls.skip:
                return f"d.{read}()", f"d.{skip}()"
        return None

    def read(self, reader: Reader, target: str) -> None:
        """Emit statements reading ``reader``'s value into the variable ``target``."""
        from pyiceberg.avro import reader as R

        leaf = self.leaf(reader)
        if leaf is not None:
            expr = leaf[0]
        elif type(reader) is R.OptionReader:  # union [null, T]: index 0 is null (pyiceberg's OptionReader.read)
            inner = self.leaf(reader.option)
            inner_expr = inner[0] if inner is not None else f"{self.bind(reader.option.read)}(d)"
            expr = f"({inner_expr} if d.read_int() > 0 else None)"
        elif type(reader) is R.StructReader and _is_identity_struct(reader):  # a tuple (partition values)
            parts = []
            for _, field_reader in reader.field_readers:
                parts.append(self.name("v"))
                self.read(field_reader, parts[-1])
            expr = f"({', '.join(parts)}{',' if len(parts) == 1 else ''})"
        else:
            expr = f"{self.bind(reader.read)}(d)"
        self.lines.append(f"{target} = {expr}")

    def skip(self, reader: Reader) -> None:
        """Emit statements skipping ``reader``'s value."""
        from pyiceberg.avro import reader as R

        if type(reader) is R.OptionReader:
            inner = reader.option
            leaf = self.leaf(inner)
            if leaf is not None:
                self.lines += ["if d.read_int() > 0:", f"    {leaf[1]}"]
                return
            # Avro map/array: blocks of a count (a long; < 0: -count, then the block's byte size) and the items;
            # a zero count ends it.
            items = None
            if type(inner) is R.MapReader and self.leaf(inner.key) == _INT:
                if self.leaf(inner.value) == _INT:
                    items = "d.read_ints(n * 2)"
                elif self.leaf(inner.value) == _BYTES:  # into a scratch dict: int keys (column ids), bounded
                    items = f"d.read_int_bytes_dict(n, {self.bind({})})"
            elif type(inner) is R.ListReader and self.leaf(inner.element) == _INT:
                items = "d.read_ints(n)"
            if items is not None:
                self.lines += [
                    "if d.read_int() > 0:",
                    "    n = d.read_int()",
                    "    while n != 0:",
                    "        if n < 0:",
                    "            d.skip(d.read_int())",
                    "        else:",
                    f"            {items}",
                    "        n = d.read_int()",
                ]
                return
        leaf = self.leaf(reader)
        self.lines.append(leaf[1] if leaf is not None else f"{self.bind(reader.skip)}(d)")


def _is_identity_struct(reader: Any) -> bool:
    return all(pos == i for i, (pos, _) in enumerate(reader.field_readers)) and len(reader.field_readers) == len(
        reader.struct.fields
    )


def _compile_block_reader(file_schema: Any, with_bounds: bool) -> BlockReader:
    from pyiceberg.avro import reader as R
    from pyiceberg.avro.resolver import construct_reader
    from pyiceberg.manifest import (
        DATA_FILE_TYPE,
        MANIFEST_ENTRY_SCHEMAS,
        DataFileContent,
        FileFormat,
        ManifestEntryStatus,
    )

    read_entry = MANIFEST_ENTRY_SCHEMAS[3].as_struct()
    read_file = DATA_FILE_TYPE[3]
    entry_ids = {read_entry.field_by_name(n).field_id: n for n in _ENTRY_FIELDS}  # type: ignore[union-attr]
    data_file_id = read_entry.field_by_name("data_file").field_id  # type: ignore[union-attr]
    wanted = _DATA_FILE_FIELDS + (_BOUNDS_FIELDS if with_bounds else ())
    file_ids = {read_file.field_by_name(n).field_id: n for n in wanted}  # type: ignore[union-attr]

    root = construct_reader(file_schema)  # pyiceberg's reader tree of the file's own schema
    if type(root) is not R.StructReader or not _is_identity_struct(root):  # pragma: no cover - defensive
        raise ValueError(f"unsupported manifest entry schema: {file_schema}")
    gen = _Codegen()
    got: set[str] = set()
    for field, (_, reader) in zip(root.struct.fields, root.field_readers):
        if field.field_id == data_file_id:
            if type(reader) is not R.StructReader or not _is_identity_struct(reader):  # pragma: no cover
                raise ValueError(f"unsupported manifest data_file schema: {field}")
            for sub, (_, sub_reader) in zip(reader.struct.fields, reader.field_readers):
                if sub.field_id in file_ids:
                    gen.read(sub_reader, file_ids[sub.field_id])
                    got.add(file_ids[sub.field_id])
                else:
                    gen.skip(sub_reader)
        elif field.field_id in entry_ids:
            gen.read(reader, entry_ids[field.field_id])
            got.add(entry_ids[field.field_id])
        else:
            gen.skip(reader)
    for name in _ENTRY_FIELDS + _DATA_FILE_FIELDS + _BOUNDS_FIELDS:
        if name in got:
            continue
        # Not in this file (older format version, or not wanted): the read schema's initial default, as
        # pyiceberg's schema resolution gives (content = 0 in v1 manifests), else null.
        read_field = read_entry.field_by_name(name) if name in _ENTRY_FIELDS else read_file.field_by_name(name)
        default = None if read_field is None or name in _BOUNDS_FIELDS else read_field.initial_default
        if default is None and read_field is not None and read_field.required and name not in _BOUNDS_FIELDS:
            raise ValueError(f"manifest file schema lacks required field {name!r}: {file_schema}")
        gen.lines.append(f"{name} = {gen.bind(default)}")

    gen.namespace.update(
        ManifestEntryStatus=ManifestEntryStatus, DataFileContent=DataFileContent, FileFormat=FileFormat,
        FORMAT_NAMES=_FORMAT_NAMES,
    )
    body = "".join(f"        {line}\n" for line in gen.lines + _ENTRY_EPILOGUE.splitlines())
    source = (
        "def read_block(d, count, append, manifest_sequence_number, manifest_snapshot_id):\n"
        "    has_deletes = False\n"
        "    for _ in range(count):\n"
        f"{body}"
        "    return has_deletes\n"
    )
    # Generated from the schema's field layout only (names are ours, values come from the decoder at run time).
    exec(compile(source, "<compaction.metadata.manifests block reader>", "exec"), gen.namespace)  # noqa: S102
    fn: BlockReader = gen.namespace["read_block"]
    return fn


#: FileFormat names by the format string found in manifests ("PARQUET", "parquet", ...).
_FORMAT_NAMES: dict[str, str] = {}
