"""Per-partition health of an Iceberg table from metadata only (pyiceberg; no Spark, no data reads)."""

from __future__ import annotations

import datetime as _dt
import decimal
import gc
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
from compaction.metadata.manifests import BOUNDS_DELETES, ManifestCache, live_rows
from compaction.metadata.storage_retry import with_storage_retries

if TYPE_CHECKING:
    from pyiceberg.table import Table

# Reserved field id of ``file_path`` in position delete files (Iceberg spec, "Position Delete Files").
POSITION_DELETE_FILE_PATH_FIELD_ID = 2147483546
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_TZ = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_PATH = operator.attrgetter("path")


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


def load_table(catalog: CatalogConfig, table_name: str) -> tuple[TableIdentity, Table]:
    identity = parse_table_identifier(table_name, catalog.name)
    # Opening a REST catalog asks for an OAuth token and the catalog's config: a reset connection there is retried
    # as the table's load is (a CatalogError wrapping a transient error is transient).
    pyiceberg_catalog = with_storage_retries(catalog.load, what=f"open catalog {catalog.name!r}")
    try:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    except ImportError:  # pragma: no cover
        raise
    try:
        return identity, with_storage_retries(lambda: pyiceberg_catalog.load_table((*identity.namespace, identity.name)),
                                              what=f"load {identity.dotted}")
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise CatalogError(f"table {identity.dotted!r} not found in catalog {catalog.name!r}") from e
    except CompactionError:
        raise
    except Exception as e:
        raise CatalogError(f"cannot load table {identity.dotted!r} from catalog {catalog.name!r}: {e}") from e


def table_state(table: Table, identity: TableIdentity, snapshot_id: int | None = None, *,
                manifest_cache: ManifestCache | None = None,
                progress: Callable[[str], None] | None = None) -> TableState:
    """Build the planner's view of ``table`` at ``snapshot_id`` (default: current); transient errors of the object
    store are retried (:func:`compaction.metadata.storage_retry.with_storage_retries`: metadata files never change, so the
    reads can always be repeated)."""
    return with_storage_retries(lambda: _table_state(table, identity, snapshot_id, manifest_cache=manifest_cache),
                                what=f"inspect {identity.dotted}", progress=progress)


def _table_state(table: Table, identity: TableIdentity, snapshot_id: int | None, *,
                 manifest_cache: ManifestCache | None) -> TableState:
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

    # One accumulator per distinct PartitionKey: [key, data files, delete files, last update ms, its snapshot id].
    # Entries are looked up by their raw (spec id, partition tuple); a PartitionKey is made once per raw tuple.
    by_key: dict[PartitionKey, list[Any]] = {}
    raw_accs: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # ~10^5 small immutable objects are created and all stay alive: cyclic GC passes are pure cost
    try:
        for spec_id, rows in live_rows(table, snapshot, bounds=BOUNDS_DELETES, cache=manifest_cache):
            names = spec_fields.get(spec_id, [])
            accs: dict[tuple[Any, ...], list[Any]] = {}
            for (content, path, file_format, partition, records, size, seq, fseq, entry_snapshot, equality_ids,
                 referenced, offset, content_size, lower, upper) in rows:
                acc = accs.get(partition)
                if acc is None:
                    acc = raw_accs.get((spec_id, partition))
                    if acc is None:
                        key = PartitionKey(
                            spec_id,
                            tuple(
                                PartitionFieldValue(name, transform, source, to_internal(value))
                                for (name, transform, source), value in zip(names, partition)
                            ),
                        )
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

        partitions = tuple(
            PartitionState(
                key=key,
                data_files=tuple(sorted(data, key=_PATH)) if len(data) > 1 else tuple(data),
                delete_files=tuple(sorted(deletes, key=_delete_order)) if len(deletes) > 1 else tuple(deletes),
                last_updated_ms=last_ms,
                last_updated_snapshot_id=last_snapshot,
            )
            for key, data, deletes, last_ms, last_snapshot in sorted(by_key.values(), key=_partition_order)
        )
    finally:
        if gc_was_enabled:
            gc.enable()
    return TableState(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=int(snapshot.sequence_number or 0),
        partitions=partitions,
        **base,  # type: ignore[arg-type]
    )


def _delete_order(f: DeleteFileInfo) -> tuple[str, int]:
    return (f.path, f.content_offset or 0)


def _partition_order(acc: list[Any]) -> tuple[object, ...]:
    key: PartitionKey = acc[0]
    return key.sort_key()


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
