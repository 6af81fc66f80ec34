"""Per-partition health of an Iceberg table from metadata only (pyiceberg; no Spark, no data reads)."""

from __future__ import annotations

import datetime as _dt
import decimal
import gc
import itertools
import operator
import uuid
from typing import TYPE_CHECKING, Any, Callable

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogError, CompactionError
from compaction.core.identifiers import parse_table_identifier
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionScalar,
    PartitionState,
    TableIdentity,
    TableState,
)
from compaction.metadata.manifests import BOUNDS_DELETES, ManifestCache, rows_of
from compaction.metadata.storage_retry import with_storage_retries

if TYPE_CHECKING:
    from pyiceberg.table import Table

# Reserved field id of ``file_path`` in position delete files (Iceberg spec, "Position Delete Files").
POSITION_DELETE_FILE_PATH_FIELD_ID = 2147483546
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_TZ = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_PATH = operator.attrgetter("path")
_RAW_PARTITION = operator.itemgetter(3)  # the partition tuple of a manifest row (manifests.ROW_FIELDS)


def to_internal(value: Any) -> PartitionScalar:
    """Partition value -> Iceberg internal representation (JSON-safe), see compaction.core.model."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, _dt.datetime):
        base = _EPOCH_TZ if value.tzinfo else _EPOCH
        delta = value - base
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, _dt.date):
        return (value - _dt.date(1970, 1, 1)).days
    if isinstance(value, _dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return str(value)
    return str(value)


def load_table(catalog: CatalogConfig, table_name: str, *,
               progress: Callable[[str], None] | None = None) -> tuple[TableIdentity, Table]:
    """The table, waiting out a catalog or store that is briefly unavailable (``progress`` says so)."""
    identity = parse_table_identifier(table_name, catalog.name)
    # Opening a REST catalog asks for an OAuth token and the catalog's config, a SQL catalog connects to its
    # database: a reset or refused connection there is retried as the table's load is (a CatalogError wrapping a
    # transient error is transient).
    pyiceberg_catalog = with_storage_retries(catalog.load, what=f"open catalog {catalog.name!r}", progress=progress)
    try:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    except ImportError:  # pragma: no cover
        raise
    try:
        return identity, with_storage_retries(lambda: pyiceberg_catalog.load_table((*identity.namespace, identity.name)),
                                              what=f"load {identity.dotted}", progress=progress)
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise CatalogError(f"table {identity.dotted!r} not found in catalog {catalog.name!r}") from e
    except CompactionError:
        raise
    except Exception as e:
        raise CatalogError(f"cannot load table {identity.dotted!r} from catalog {catalog.name!r}: {e}") from e


def table_state(table: Table, identity: TableIdentity, snapshot_id: int | None = None, *,
                manifest_cache: ManifestCache | None = None, state_cache: TableStateCache | None = None,
                progress: Callable[[str], None] | None = None) -> TableState:
    """Build the planner's view of ``table`` at ``snapshot_id`` (default: current); transient errors of the object
    store are retried (:func:`compaction.metadata.storage_retry.with_storage_retries`: metadata files never change, so the
    reads can always be repeated).

    ``manifest_cache``: manifests read by an earlier call are not decoded again. ``state_cache``: the state of the
    previous call for the same table (see :class:`TableStateCache`); only the partitions whose manifests changed are
    rebuilt, the others are the previous state's :class:`PartitionState` objects (which lets
    :class:`compaction.core.planner.PlanCache` reuse their decisions)."""
    return with_storage_retries(lambda: _table_state(table, identity, snapshot_id, manifest_cache=manifest_cache,
                                                     state_cache=state_cache),
                                what=f"inspect {identity.dotted}", progress=progress)


def _table_state(table: Table, identity: TableIdentity, snapshot_id: int | None, *,
                 manifest_cache: ManifestCache | None, state_cache: TableStateCache | None = None) -> TableState:
    """The planner's view of ``table`` at ``snapshot_id``.

    Reads the live manifest entries as plain tuples (:func:`compaction.metadata.manifests.live_rows`; column statistics of
    data files are skipped, bounds are read for delete files only) and builds the partitions directly, with the
    cyclic garbage collector paused while the ~one object per file is created. ``manifest_cache``: manifests read
    by an earlier call are not decoded again (a health watcher reads only what each commit added).
    """
    metadata = table.metadata
    snapshot = table.snapshot_by_id(snapshot_id) if snapshot_id is not None else table.current_snapshot()
    if snapshot_id is not None and snapshot is None:
        raise CatalogError(f"snapshot {snapshot_id} not found in {identity}")
    base = dict(
        identity=identity,
        format_version=int(metadata.format_version),
        properties=dict(metadata.properties),
        default_spec_id=metadata.default_spec_id,
    )
    if snapshot is None:
        return TableState(snapshot_id=None, sequence_number=int(metadata.last_sequence_number or 0), **base)  # type: ignore[arg-type,union-attr]

    schema = table.schema()
    spec_fields: dict[int, list[tuple[str, str, str]]] = {}
    for spec in metadata.partition_specs:
        fields = []
        for pf in spec.fields:
            try:
                source = schema.find_column_name(pf.source_id) or str(pf.source_id)
            except ValueError:
                source = str(pf.source_id)
            fields.append((pf.name, str(pf.transform), source))
        spec_fields[spec.spec_id] = fields
    snapshot_times = {s.snapshot_id: s.timestamp_ms for s in metadata.snapshots}

    gc_was_enabled = gc.isenabled()
    gc.disable()  # ~10^5 small immutable objects are created and all stay alive: cyclic GC passes are pure cost
    try:
        if state_cache is not None:
            partitions = state_cache.partitions(table, snapshot, spec_fields, snapshot_times, manifest_cache)
        else:
            partitions = _build(table, snapshot.manifests(table.io), spec_fields, snapshot_times, manifest_cache)
    finally:
        if gc_was_enabled:
            gc.enable()
    return TableState(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=int(snapshot.sequence_number or 0),
        partitions=partitions,
        **base,  # type: ignore[arg-type]
    )


RawPartition = tuple[int, tuple[Any, ...]]  # (spec id, partition tuple as read from the manifest)


class _Builder:
    """Partitions from manifest rows: one accumulator per distinct PartitionKey, ``[key, data files, delete files,
    last update ms, its snapshot id]``. Entries are looked up by their raw (spec id, partition tuple); a PartitionKey
    is made once per raw tuple (several raw tuples may give one key). Rows must be added in manifest-list order and
    file order (the partition's last update is the first entry with the latest snapshot time)."""

    def __init__(self, spec_fields: dict[int, list[tuple[str, str, str]]], snapshot_times: dict[int, int],
                 keys: dict[RawPartition, PartitionKey] | None = None) -> None:
        self.spec_fields = spec_fields
        self.snapshot_times = snapshot_times
        self.keys = keys if keys is not None else {}
        self.by_key: dict[PartitionKey, list[Any]] = {}
        self.raw_accs: dict[RawPartition, list[Any]] = {}

    def key(self, spec_id: int, partition: tuple[Any, ...]) -> PartitionKey:
        key = self.keys.get((spec_id, partition))
        if key is None:
            key = self.keys[(spec_id, partition)] = PartitionKey(
                spec_id,
                tuple(
                    PartitionFieldValue(name, transform, source, to_internal(value))
                    for (name, transform, source), value in zip(self.spec_fields.get(spec_id, []), partition)
                ),
            )
        return key

    def add(self, spec_id: int, rows: list[Any], only: set[tuple[Any, ...]] | None = None) -> dict[tuple[Any, ...], Any]:
        """Add one manifest's rows (``only``: of these raw partitions alone); returns the raw partitions seen."""
        snapshot_times = self.snapshot_times
        by_key, raw_accs = self.by_key, self.raw_accs
        accs: dict[tuple[Any, ...], list[Any]] = {}
        for (content, path, file_format, partition, records, size, seq, fseq, entry_snapshot, equality_ids,
             referenced, offset, content_size, lower, upper) in rows:
            acc = accs.get(partition)
            if acc is None:
                if only is not None and partition not in only:
                    continue
                acc = raw_accs.get((spec_id, partition))
                if acc is None:
                    key = self.key(spec_id, partition)
                    acc = by_key.get(key)
                    if acc is None:
                        acc = by_key[key] = [key, [], [], None, None]
                    raw_accs[(spec_id, partition)] = acc
                accs[partition] = acc
            if entry_snapshot is not None:
                ts = snapshot_times.get(entry_snapshot, 0)
                if acc[3] is None or ts > acc[3]:
                    acc[3] = ts
                    acc[4] = entry_snapshot
            if content == 0:
                acc[1].append(DataFileInfo(path, size, records, seq, fseq))
                continue
            if content == 2:
                kind = DeleteContent.EQUALITY
            elif content == 1 and file_format == "PUFFIN":
                kind = DeleteContent.DELETION_VECTOR
            else:
                kind = DeleteContent.POSITION
            acc[2].append(
                DeleteFileInfo(
                    path=path,
                    content=kind,
                    size_bytes=size,
                    record_count=records,
                    data_sequence_number=seq,
                    file_sequence_number=fseq,
                    referenced_data_file=referenced or _single_referenced_file(lower, upper),
                    equality_ids=tuple(equality_ids or ()),
                    content_offset=offset,
                    content_size_bytes=content_size,
                )
            )
        return accs

    def states(self) -> list[PartitionState]:
        """The partitions built, in no particular order."""
        return [
            PartitionState(
                key=key,
                data_files=tuple(sorted(data, key=_PATH)) if len(data) > 1 else tuple(data),
                delete_files=tuple(sorted(deletes, key=_delete_order)) if len(deletes) > 1 else tuple(deletes),
                last_updated_ms=last_ms,
                last_updated_snapshot_id=last_snapshot,
            )
            for key, data, deletes, last_ms, last_snapshot in self.by_key.values()
        ]

    def partitions(self) -> tuple[PartitionState, ...]:
        return tuple(sorted(self.states(), key=_state_order))


class TableStateCache:
    """The previous :func:`table_state` of one table, to rebuild only what a later snapshot changed.

    Manifests are immutable and a snapshot lists every live one (Iceberg spec, "Manifest Lists"), so between two
    snapshots the partitions whose live files can differ are exactly those with an entry in a manifest one list has
    and the other has not. For each such partition the rows of its live entries, in list order, are compared with
    the previous snapshot's: when a commit rewrote a manifest keeping most of its entries (a rewrite writes them
    again as EXISTING, with their sequence numbers and snapshot ids), those partitions' rows are equal and they keep
    their previous state object. The others are rebuilt from every manifest of the new list that holds them (in list
    order, as a full build reads them). Everything else is the previous state's objects. A full build is done
    instead when the table, its schema's column names, its partition specs, or its snapshots (one expired: entry
    times come from the snapshot list) changed. Not thread-safe; one table per cache.
    """

    def __init__(self) -> None:
        self.full_builds = 0
        self.rebuilt_partitions = 0  # partitions rebuilt by the last build that was not a full one
        self._reset()

    def _reset(self) -> None:
        self._context: tuple[Any, ...] | None = None
        self._manifests: dict[str, tuple[int, frozenset[tuple[Any, ...]]]] = {}  # path -> (spec id, raw partitions)
        self._rows: dict[str, dict[tuple[Any, ...], list[Any]]] = {}  # path -> raw partition -> its rows
        self._positions: dict[str, int] = {}  # path -> place in the manifest list
        self._holders: dict[RawPartition, set[str]] = {}  # raw partition -> manifest paths holding it
        self._keys: dict[RawPartition, PartitionKey] = {}
        self._raws: dict[PartitionKey, set[RawPartition]] = {}
        self._states: dict[PartitionKey, PartitionState] = {}
        self._ordered: tuple[PartitionState, ...] = ()
        self._places: dict[PartitionKey, int] | None = None  # key -> index in _ordered, built when needed
        self._snapshot_ids: frozenset[int] = frozenset()

    def partitions(self, table: Table, snapshot: Any, spec_fields: dict[int, list[tuple[str, str, str]]],
                   snapshot_times: dict[int, int], manifest_cache: ManifestCache | None) -> tuple[PartitionState, ...]:
        context = (getattr(table.metadata, "table_uuid", None), repr(sorted(spec_fields.items())))
        snapshot_ids = frozenset(snapshot_times)
        listed = [(m.manifest_path, m) for m in snapshot.manifests(table.io)]
        positions = {path: i for i, (path, _) in enumerate(listed)}
        if len(positions) != len(listed):  # a manifest listed twice: not a valid manifest list, never cached
            self._context = None
            return _build(table, [m for _, m in listed], spec_fields, snapshot_times, manifest_cache)
        if context != self._context or not self._snapshot_ids <= snapshot_ids:
            return self._full(table, listed, spec_fields, snapshot_times, manifest_cache, context, snapshot_ids)

        removed = [p for p in self._manifests if p not in positions]
        added = [(p, m) for p, m in listed if p not in self._manifests]
        builder = _Builder(spec_fields, snapshot_times, self._keys)
        new_rows: dict[str, list[Any]] = {}
        for path, manifest in added:
            new_rows[path] = rows_of(table, manifest, bounds=BOUNDS_DELETES, cache=manifest_cache)
        touched_raws = {(self._manifests[path][0], raw) for path in removed for raw in self._manifests[path][1]}
        touched_raws.update((m.partition_spec_id, row[3]) for path, m in added for row in new_rows[path])
        # Each touched partition's rows as the previous snapshot listed them, before the bookkeeping changes.
        before = {raw: [self._rows[path].get(raw[1], ()) for path in
                        sorted(self._holders.get(raw, ()), key=self._positions.__getitem__)] for raw in touched_raws}
        for path in removed:
            spec_id, raws = self._manifests.pop(path)
            del self._rows[path]
            for raw in raws:
                self._holders[(spec_id, raw)].discard(path)
        for path, manifest in added:
            grouped = _by_partition(new_rows[path])
            self._register(path, manifest.partition_spec_id, grouped, builder)
        self._positions = positions
        self._snapshot_ids = snapshot_ids
        if not touched_raws:
            return self._ordered

        # A partition of one raw tuple whose rows, in list order, are the previous snapshot's is unchanged.
        touched = {self._keys[raw] for raw in touched_raws}
        rebuild: set[PartitionKey] = set()
        for key in touched:
            raws = self._raws.get(key, ())
            if len(raws) == 1 and key in self._states:
                (raw,) = raws
                now = [self._rows[path].get(raw[1], ()) for path in
                       sorted(self._holders.get(raw, ()), key=positions.__getitem__)]
                if now == before.get(raw):
                    continue
            rebuild.add(key)

        # Which raw partitions to read from which manifest, read in list order.
        wanted: dict[str, set[tuple[Any, ...]]] = {}
        for key in rebuild:
            for spec_id, raw in self._raws.get(key, ()):
                for path in self._holders.get((spec_id, raw), ()):
                    wanted.setdefault(path, set()).add(raw)
        for path in sorted(wanted, key=positions.__getitem__):
            grouped = self._rows[path]
            builder.add(self._manifests[path][0], [row for raw in wanted[path] for row in grouped.get(raw, ())])
        rebuilt = {s.key: s for s in builder.states()}
        keys_changed = False
        changed: list[PartitionState] = []
        for key in rebuild:
            new = rebuilt.get(key)
            old = self._states.get(key)
            if new is None:
                if old is not None:
                    del self._states[key]
                    keys_changed = True
                for raw in self._raws.pop(key, ()):
                    if not self._holders.get(raw):
                        self._holders.pop(raw, None)
                continue
            if old is None:
                keys_changed = True
                self._states[key] = new
            elif old != new:
                self._states[key] = new
                changed.append(new)
        self.rebuilt_partitions = len(rebuild)
        if keys_changed:
            self._ordered = tuple(sorted(self._states.values(), key=_state_order))
            self._places = None
        elif changed:
            if self._places is None:
                self._places = {s.key: i for i, s in enumerate(self._ordered)}
            ordered = list(self._ordered)
            for state in changed:
                ordered[self._places[state.key]] = state
            self._ordered = tuple(ordered)
        return self._ordered

    def _register(self, path: str, spec_id: int, grouped: dict[tuple[Any, ...], list[Any]], builder: _Builder) -> None:
        """Record that manifest ``path`` holds ``grouped``: its live rows by raw partition of spec ``spec_id``."""
        self._manifests[path] = (spec_id, frozenset(grouped))
        self._rows[path] = grouped
        for raw in grouped:
            self._holders.setdefault((spec_id, raw), set()).add(path)
            self._raws.setdefault(builder.key(spec_id, raw), set()).add((spec_id, raw))

    def _full(self, table: Table, listed: list[tuple[str, Any]], spec_fields: dict[int, list[tuple[str, str, str]]],
              snapshot_times: dict[int, int], manifest_cache: ManifestCache | None, context: tuple[Any, ...],
              snapshot_ids: frozenset[int]) -> tuple[PartitionState, ...]:
        self._reset()
        self.full_builds += 1
        builder = _Builder(spec_fields, snapshot_times, self._keys)
        for path, manifest in listed:
            rows = rows_of(table, manifest, bounds=BOUNDS_DELETES, cache=manifest_cache)
            spec_id = manifest.partition_spec_id
            builder.add(spec_id, rows)
            self._register(path, spec_id, _by_partition(rows), builder)
        self._positions = {path: i for i, (path, _) in enumerate(listed)}
        self._ordered = builder.partitions()
        self._states = {s.key: s for s in self._ordered}
        self._context = context
        self._snapshot_ids = snapshot_ids
        return self._ordered


def _by_partition(rows: list[Any]) -> dict[tuple[Any, ...], list[Any]]:
    """A manifest's rows by raw partition tuple, each in file order (writers cluster a manifest by partition)."""
    grouped: dict[tuple[Any, ...], list[Any]] = {}
    for raw, run in itertools.groupby(rows, key=_RAW_PARTITION):
        got = grouped.get(raw)
        if got is None:
            grouped[raw] = list(run)
        else:
            got.extend(run)
    return grouped


def _build(table: Table, manifests: Any, spec_fields: dict[int, list[tuple[str, str, str]]],
           snapshot_times: dict[int, int], manifest_cache: ManifestCache | None) -> tuple[PartitionState, ...]:
    """The partitions of ``manifests`` (in list order), built in one pass."""
    builder = _Builder(spec_fields, snapshot_times)
    for manifest in manifests:
        builder.add(manifest.partition_spec_id, rows_of(table, manifest, bounds=BOUNDS_DELETES, cache=manifest_cache))
    return builder.partitions()


def _delete_order(f: DeleteFileInfo) -> tuple[str, int]:
    return (f.path, f.content_offset or 0)


def _state_order(state: PartitionState) -> tuple[object, ...]:
    return state.key.sort_key()


def _single_referenced_file(lower: dict[int, bytes] | None, upper: dict[int, bytes] | None) -> str | None:
    """A v2 position delete file names one data file when the bounds of ``file_path`` are equal (spec:
    ``referenced_data_file`` is derived the same way by writers that track it)."""
    if not lower or not upper:
        return None
    lo = lower.get(POSITION_DELETE_FILE_PATH_FIELD_ID)
    hi = upper.get(POSITION_DELETE_FILE_PATH_FIELD_ID)
    if lo is None or lo != hi:
        return None
    return bytes(lo).decode("utf-8", errors="replace")


def inspect_table(catalog: CatalogConfig, table_name: str, snapshot_id: int | None = None) -> TableState:
    identity, table = load_table(catalog, table_name)
    return table_state(table, identity, snapshot_id)
