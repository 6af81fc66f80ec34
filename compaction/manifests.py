"""Reading live manifest entries with pyiceberg's Avro reader, including the v3 fields.

pyiceberg 0.12 reads manifests with its v2 read schema (``DEFAULT_READ_VERSION``), which drops the v3 fields
``referenced_data_file``, ``content_offset`` and ``content_size_in_bytes`` that deletion vectors need, and its
``inspect.entries()`` crashes on files with null ``column_sizes`` (hand-made deletes, every DV). So we read the
manifest Avro files ourselves with the v3 entry schema (a superset: absent fields read as null) and let pyiceberg
apply the spec's inheritance rules (snapshot id and sequence numbers of ADDED entries come from the manifest).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot


def _field_positions() -> dict[str, int]:
    from pyiceberg.manifest import DATA_FILE_TYPE

    return {f.name: i for i, f in enumerate(DATA_FILE_TYPE[3].fields)}


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
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.manifest import (
        MANIFEST_ENTRY_SCHEMAS,
        DataFile,
        DataFileContent,
        FileFormat,
        ManifestEntry,
        ManifestEntryStatus,
        _inherit_from_manifest,
    )

    snapshot = snapshot if snapshot is not None else table.current_snapshot()
    if snapshot is None:
        return
    pos = _field_positions()
    io = table.io
    for manifest in snapshot.manifests(io):
        with AvroFile[ManifestEntry](
            io.new_input(manifest.manifest_path),
            MANIFEST_ENTRY_SCHEMAS[3],
            read_types={-1: ManifestEntry, 2: DataFile},
            read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
        ) as reader:
            for raw in reader:
                if raw.status == ManifestEntryStatus.DELETED:
                    continue
                entry = _inherit_from_manifest(raw, manifest)
                df = entry.data_file
                partition = df.partition
                yield LiveEntry(
                    content=int(df.content),
                    file_path=df.file_path,
                    file_format=df.file_format.name if hasattr(df.file_format, "name") else str(df.file_format),
                    spec_id=manifest.partition_spec_id,
                    partition=tuple(partition[i] for i in range(len(partition))) if partition is not None else (),
                    record_count=df.record_count,
                    file_size_in_bytes=df.file_size_in_bytes,
                    data_sequence_number=entry.sequence_number if entry.sequence_number is not None else 0,
                    file_sequence_number=entry.file_sequence_number,
                    snapshot_id=entry.snapshot_id,
                    equality_ids=tuple(df.equality_ids or ()),
                    referenced_data_file=df[pos["referenced_data_file"]],
                    content_offset=df[pos["content_offset"]],
                    content_size_in_bytes=df[pos["content_size_in_bytes"]],
                    lower_bounds=df.lower_bounds if with_bounds else None,
                    upper_bounds=df.upper_bounds if with_bounds else None,
                )
