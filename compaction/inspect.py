"""Per-partition health of an Iceberg table from metadata only (pyiceberg; no Spark, no data reads)."""

from __future__ import annotations

import datetime as _dt
import decimal
import uuid
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogError
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
from compaction.manifests import live_entries

if TYPE_CHECKING:
    from pyiceberg.table import Table

# Reserved field id of ``file_path`` in position delete files (Iceberg spec, "Position Delete Files").
POSITION_DELETE_FILE_PATH_FIELD_ID = 2147483546
_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_TZ = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


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
    pyiceberg_catalog = catalog.load()
    try:
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError
    except ImportError:  # pragma: no cover
        raise
    try:
        return identity, pyiceberg_catalog.load_table((*identity.namespace, identity.name))
    except (NoSuchTableError, NoSuchNamespaceError) as e:
        raise CatalogError(f"table {identity.dotted!r} not found in catalog {catalog.name!r}") from e
    except Exception as e:
        raise CatalogError(f"cannot load table {identity.dotted!r} from catalog {catalog.name!r}: {e}") from e


def table_state(table: Table, identity: TableIdentity, snapshot_id: int | None = None) -> TableState:
    """Build the planner's view of ``table`` at ``snapshot_id`` (default: current)."""
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
        return TableState(snapshot_id=None, sequence_number=int(metadata.last_sequence_number or 0), **base)  # type: ignore[arg-type]

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

    data: dict[PartitionKey, list[DataFileInfo]] = defaultdict(list)
    deletes: dict[PartitionKey, list[DeleteFileInfo]] = defaultdict(list)
    last_update: dict[PartitionKey, tuple[int, int]] = {}
    keys: dict[tuple[int, tuple[Any, ...]], PartitionKey] = {}

    for entry in live_entries(table, snapshot, with_bounds=True):
        raw_key = (entry.spec_id, entry.partition)
        key = keys.get(raw_key)
        if key is None:
            names = spec_fields.get(entry.spec_id, [])
            key = PartitionKey(
                entry.spec_id,
                tuple(
                    PartitionFieldValue(name, transform, source, to_internal(value))
                    for (name, transform, source), value in zip(names, entry.partition)
                ),
            )
            keys[raw_key] = key
        if entry.snapshot_id is not None:
            ts = snapshot_times.get(entry.snapshot_id, 0)
            if key not in last_update or ts > last_update[key][0]:
                last_update[key] = (ts, entry.snapshot_id)
        if entry.content == 0:
            data[key].append(
                DataFileInfo(entry.file_path, entry.file_size_in_bytes, entry.record_count,
                             entry.data_sequence_number, entry.file_sequence_number)
            )
            continue
        if entry.content == 2:
            kind = DeleteContent.EQUALITY
        elif entry.is_deletion_vector:
            kind = DeleteContent.DELETION_VECTOR
        else:
            kind = DeleteContent.POSITION
        deletes[key].append(
            DeleteFileInfo(
                path=entry.file_path,
                content=kind,
                size_bytes=entry.file_size_in_bytes,
                record_count=entry.record_count,
                data_sequence_number=entry.data_sequence_number,
                file_sequence_number=entry.file_sequence_number,
                referenced_data_file=entry.referenced_data_file or _single_referenced_file(entry.lower_bounds, entry.upper_bounds),
                equality_ids=entry.equality_ids,
                content_offset=entry.content_offset,
                content_size_bytes=entry.content_size_in_bytes,
            )
        )

    partitions = tuple(
        PartitionState(
            key=key,
            data_files=tuple(sorted(data.get(key, ()), key=lambda f: f.path)),
            delete_files=tuple(sorted(deletes.get(key, ()), key=lambda f: (f.path, f.content_offset or 0))),
            last_updated_ms=last_update.get(key, (None, None))[0],
            last_updated_snapshot_id=last_update.get(key, (None, None))[1],
        )
        for key in sorted(set(data) | set(deletes), key=PartitionKey.sort_key)
    )
    return TableState(
        snapshot_id=snapshot.snapshot_id,
        sequence_number=int(snapshot.sequence_number or 0),
        partitions=partitions,
        **base,  # type: ignore[arg-type]
    )


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
