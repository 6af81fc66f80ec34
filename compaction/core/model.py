"""Value objects describing a table's state, as read from Iceberg metadata.

Everything here is engine-agnostic (stdlib only) and immutable. Partition values are kept in Iceberg's
*internal* representation (Iceberg spec, "Partition Transforms" and "Binary single-value serialization"):
``days(ts)`` -> int days since epoch, ``bucket`` -> int, identity ``date`` -> int days, ``timestamp`` -> int
micros, ``decimal`` -> str, ``binary``/``fixed`` -> hex str, ``uuid`` -> str. That keeps them JSON-serializable
and lets the Spark side rebuild an exact ``Expressions`` filter from them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Union

PartitionScalar = Union[int, float, str, bool, None]


class DeleteContent(str, enum.Enum):
    """Kinds of delete files (Iceberg spec: content 1 = position deletes, 2 = equality deletes; v3 DVs are
    position deletes stored as a Puffin blob that reference exactly one data file)."""

    POSITION = "position"
    EQUALITY = "equality"
    DELETION_VECTOR = "deletion_vector"


@dataclass(frozen=True, order=True)
class TableIdentity:
    catalog: str
    namespace: tuple[str, ...]
    name: str

    @property
    def dotted(self) -> str:
        return ".".join((*self.namespace, self.name))

    def __str__(self) -> str:
        return f"{self.catalog}.{self.dotted}"


@dataclass(frozen=True, order=True)
class PartitionFieldValue:
    """One field of a partition tuple: the partition field name, its transform (``identity``, ``day``,
    ``bucket[8]``, ``truncate[4]``, ...), the source column name, and the value in internal representation."""

    name: str
    transform: str
    source_column: str
    value: PartitionScalar


@dataclass(frozen=True, order=True)
class PartitionKey:
    """Identifies one partition: the spec id plus the partition tuple. An unpartitioned spec has ``fields == ()``."""

    spec_id: int
    fields: tuple[PartitionFieldValue, ...] = ()

    @property
    def is_unpartitioned(self) -> bool:
        """Whether the key's spec is unpartitioned in Iceberg's sense: no fields, or only ``void`` fields (Iceberg
        Java 1.10 ``PartitionSpec.isUnpartitioned()`` is ``!isPartitioned()``, and ``isPartitioned()`` is "has a
        field whose transform is not void"). Equality deletes written under such a spec are *global*: they apply
        to data files of every partition of every spec (see :mod:`compaction.core.attribution`)."""
        return all(f.transform == "void" for f in self.fields)

    def label(self) -> str:
        """Human-readable, stable partition label, e.g. ``spec=1/ts_day=19700/region=EU``."""
        if not self.fields:
            return f"spec={self.spec_id}/<unpartitioned>"
        parts = "/".join(f"{f.name}={'null' if f.value is None else f.value}" for f in self.fields)
        return f"spec={self.spec_id}/{parts}"

    def sort_key(self) -> tuple[object, ...]:
        # Deterministic ordering across mixed/None values: compare (is_null, type name, repr).
        return (self.spec_id, tuple((f.name, f.value is None, type(f.value).__name__, repr(f.value)) for f in self.fields))

    # Keys index every per-partition map (the state, the plan, the caches): the hash is computed once per key.
    # String hashes differ between processes, so the cached value is never pickled.
    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.spec_id, self.fields))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state


@dataclass(frozen=True)
class DataFileInfo:
    path: str
    size_bytes: int
    record_count: int
    data_sequence_number: int
    file_sequence_number: int | None = None


@dataclass(frozen=True)
class DeleteFileInfo:
    path: str
    content: DeleteContent
    size_bytes: int
    record_count: int
    data_sequence_number: int
    file_sequence_number: int | None = None
    #: For position deletes / DVs that name exactly one data file (``referenced_data_file`` or equal
    #: lower/upper bounds of ``file_path``); ``None`` when the delete may touch several files.
    referenced_data_file: str | None = None
    #: Field ids of the equality columns (equality deletes only).
    equality_ids: tuple[int, ...] = ()
    #: For DVs stored in Puffin, the blob offset/length; several DVs may share one Puffin file path.
    content_offset: int | None = None
    content_size_bytes: int | None = None


@dataclass(frozen=True)
class PartitionState:
    """All live files of one partition at one snapshot."""

    key: PartitionKey
    data_files: tuple[DataFileInfo, ...] = ()
    delete_files: tuple[DeleteFileInfo, ...] = ()
    last_updated_ms: int | None = None
    last_updated_snapshot_id: int | None = None

    # Derived statistics ---------------------------------------------------------------------------
    @property
    def data_file_count(self) -> int:
        return len(self.data_files)

    @property
    def data_bytes(self) -> int:
        return sum(f.size_bytes for f in self.data_files)

    @property
    def data_records(self) -> int:
        return sum(f.record_count for f in self.data_files)

    def _deletes(self, content: DeleteContent) -> tuple[DeleteFileInfo, ...]:
        return tuple(d for d in self.delete_files if d.content is content)

    @property
    def position_delete_files(self) -> tuple[DeleteFileInfo, ...]:
        return self._deletes(DeleteContent.POSITION)

    @property
    def equality_delete_files(self) -> tuple[DeleteFileInfo, ...]:
        return self._deletes(DeleteContent.EQUALITY)

    @property
    def deletion_vectors(self) -> tuple[DeleteFileInfo, ...]:
        return self._deletes(DeleteContent.DELETION_VECTOR)

    @property
    def position_delete_records(self) -> int:
        return sum(d.record_count for d in self.position_delete_files)

    @property
    def equality_delete_records(self) -> int:
        return sum(d.record_count for d in self.equality_delete_files)

    @property
    def deletion_vector_records(self) -> int:
        return sum(d.record_count for d in self.deletion_vectors)

    @property
    def delete_records(self) -> int:
        return sum(d.record_count for d in self.delete_files)

    @property
    def delete_bytes(self) -> int:
        return sum(d.size_bytes for d in self.delete_files)

    @property
    def equality_delete_sequence_numbers(self) -> tuple[int, ...]:
        return tuple(sorted({d.data_sequence_number for d in self.equality_delete_files}))

    @property
    def min_data_sequence_number(self) -> int | None:
        return min((f.data_sequence_number for f in self.data_files), default=None)

    @property
    def max_data_sequence_number(self) -> int | None:
        return max((f.data_sequence_number for f in self.data_files), default=None)

    def small_files(self, min_size_bytes: int) -> tuple[DataFileInfo, ...]:
        return tuple(f for f in self.data_files if f.size_bytes < min_size_bytes)


@dataclass(frozen=True)
class TableState:
    """A table's metadata at one snapshot, as the planner sees it. ``snapshot_id is None`` for a table with
    no snapshot (then ``partitions == ()``)."""

    identity: TableIdentity
    format_version: int
    snapshot_id: int | None
    sequence_number: int
    properties: Mapping[str, str] = field(default_factory=dict)
    partitions: tuple[PartitionState, ...] = ()
    default_spec_id: int = 0
