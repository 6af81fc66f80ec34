"""Which delete files count in which partition, across partition specs (pure; no I/O).

Inspection groups every live file by the (spec id, partition values) it was written in. That is where a delete file
*lives*, not always where it *applies*. The Iceberg table spec ("Scan Planning") says:

* an **equality delete** applies to a data file when the data file's data sequence number is strictly lower than
  the delete's, and the data file's partition (spec id and values) equals the delete's, **or the delete file's
  partition spec is unpartitioned**;
* a **position delete / DV** applies to data files of its own spec and partition with data sequence number
  <= its own (and a DV, or a position delete naming one file, to that one data file only).

So an equality delete written under an unpartitioned spec is *global*: on a table that started unpartitioned and
later gained e.g. ``identity(region)``, it applies to the data files of every partition of every spec. Iceberg Java
does exactly this: ``DeleteFileIndex.Builder.add`` (core, 1.10) puts an equality delete whose spec
``isUnpartitioned()`` into the index of global deletes, consulted for every data file (``findGlobalDeletes``), and
``PartitionSpec.isUnpartitioned()`` is ``!isPartitioned()`` where ``isPartitioned()`` is "has a field whose
transform is not void": a spec whose fields are all ``void`` counts as unpartitioned too
(:attr:`compaction.core.model.PartitionKey.is_unpartitioned`).

What counts where (:meth:`GlobalDeleteIndex.attribute`):

* every delete file counts in the partition it was written in, as inspected (position deletes and DVs apply only
  there; an equality delete of a partitioned spec too);
* a global equality delete also counts in every *other* partition holding a live data file with a lower data
  sequence number, i.e. whose minimum data sequence number is below the delete's. The global deletes are sorted by
  sequence number once, so the ones applying to a partition are a suffix of that order: one binary search per
  partition gives their count, bytes and highest sequence number from suffix sums (the list itself is only built
  when asked for, see :attr:`PartitionDeletes.global_from_elsewhere`), so attribution stays O(log n) per partition
  however many partitions and global deletes a table has;
* its records are keys, not rows of one partition: metadata cannot tell which partition's rows they match, so a
  partition's deleted-row estimate gets a *pro rata* share of them: ``records x (the partition's data records / the
  data records of all partitions the delete applies to)``. The shares of one delete over the partitions add up to
  its records, so the table's totals are unchanged.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from compaction.core.model import DeleteContent, DeleteFileInfo, PartitionKey, PartitionState

__all__ = ["GlobalEqualityDelete", "PartitionDeletes", "GlobalDeleteIndex", "NO_GLOBAL_DELETES"]


@dataclass(frozen=True)
class GlobalEqualityDelete:
    """An equality delete written under an unpartitioned spec, and the partition (of that spec) it lives in."""

    owner: PartitionKey
    delete: DeleteFileInfo


@dataclass(frozen=True)
class PartitionDeletes:
    """The delete files that count in one partition.

    ``own``: the delete files written in the partition (as inspected). ``global_from_elsewhere``: global equality
    deletes written in another partition (of an unpartitioned spec) that apply to a live data file here.
    ``global_equality_delete_files``: the global equality deletes counted here (``global_from_elsewhere``, plus
    the partition's own equality deletes when its spec is unpartitioned). ``global_equality_delete_records``: the
    estimated rows of this partition they remove (pro rata, module docstring), which replaces the own global
    deletes' records in :attr:`delete_records`."""

    key: PartitionKey
    own: tuple[DeleteFileInfo, ...] = ()
    #: How many global equality deletes written elsewhere apply here, their bytes and highest data sequence number.
    global_count_elsewhere: int = 0
    global_bytes_elsewhere: int = 0
    global_max_sequence_number_elsewhere: int | None = None
    global_equality_delete_files: int = 0
    global_equality_delete_records: int = 0
    #: Labels of the partitions the global deletes from elsewhere were written in (sorted).
    global_owner_labels: tuple[str, ...] = ()
    #: Records of the partition's own global equality deletes (0 unless its spec is unpartitioned).
    own_global_records: int = 0
    #: Where :attr:`global_from_elsewhere` comes from: the index and the first entry applying here.
    source: GlobalDeleteIndex | None = field(default=None, repr=False, compare=False)
    first_entry: int = 0

    @property
    def global_from_elsewhere(self) -> tuple[DeleteFileInfo, ...]:
        """The global equality deletes written elsewhere that apply here (built on demand: O(their number))."""
        if not self.global_count_elsewhere or self.source is None:
            return ()
        return tuple(g.delete for g in self.source.entries[self.first_entry:] if g.owner != self.key)

    @property
    def delete_files(self) -> tuple[DeleteFileInfo, ...]:
        return self.own + self.global_from_elsewhere

    def _count_own(self, content: DeleteContent) -> int:
        return sum(1 for d in self.own if d.content is content)

    @property
    def position_delete_files(self) -> int:
        return self._count_own(DeleteContent.POSITION)

    @property
    def equality_delete_files(self) -> int:
        return self._count_own(DeleteContent.EQUALITY) + self.global_count_elsewhere

    @property
    def deletion_vectors(self) -> int:
        return self._count_own(DeleteContent.DELETION_VECTOR)

    def records(self, content: DeleteContent) -> int:
        """Deleted records of one kind counted here; equality: the local ones plus the global estimate."""
        local = sum(d.record_count for d in self.own if d.content is content)
        if content is DeleteContent.EQUALITY:
            return local - self.own_global_records + self.global_equality_delete_records
        return local

    @property
    def delete_records(self) -> int:
        return sum(d.record_count for d in self.own) - self.own_global_records + self.global_equality_delete_records

    def describe_global(self) -> str:
        """E.g. ``3 global equality-delete files (written unpartitioned, in spec=0/<unpartitioned>) apply``; empty
        when no global delete from elsewhere applies here."""
        n = self.global_count_elsewhere
        if not n:
            return ""
        where = ", ".join(self.global_owner_labels)
        return f"{n} global equality-delete file{'s' if n != 1 else ''} (written unpartitioned, in {where}) apply"


@dataclass(frozen=True)
class GlobalDeleteIndex:
    """The table's global equality deletes sorted by data sequence number, with what :meth:`attribute` needs to
    place them in O(log n) per partition. Build it with :meth:`of` from *all* partitions of a table state (before
    any partition filter: a global delete applies to partitions a filter leaves out too)."""

    entries: tuple[GlobalEqualityDelete, ...] = ()  # ascending (data sequence number, path, offset)
    sequence_numbers: tuple[int, ...] = ()  # of ``entries``
    #: ``share_suffix[i]`` = sum over ``entries[i:]`` of record count / data records of the partitions it applies
    #: to; a partition's pro rata estimate is its data records x ``share_suffix[first entry applying to it]``.
    share_suffix: tuple[float, ...] = (0.0,)
    #: (minimum data sequence number, data records) of each partition with a live data file.
    partition_stats: Mapping[PartitionKey, tuple[int, int]] = field(default_factory=dict)
    #: Lowest data sequence number of any live data file of the table (None: no data file).
    table_min_data_sequence_number: int | None = None
    #: Per owner partition: bytes of the data files of *other* partitions that its global deletes apply to (what a
    #: whole-table conversion of them reads besides the owner's own files).
    elsewhere_scope_bytes: Mapping[PartitionKey, int] = field(default_factory=dict)
    #: ``bytes_suffix[i]``: summed file bytes of ``entries[i:]``.
    bytes_suffix: tuple[int, ...] = (0,)
    #: Highest data sequence number of the global deletes of each owner partition.
    owner_max_sequence_numbers: Mapping[PartitionKey, int] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.entries)

    @classmethod
    def of(cls, partitions: Iterable[PartitionState]) -> GlobalDeleteIndex:
        parts = tuple(partitions)
        found = [GlobalEqualityDelete(p.key, d) for p in parts if p.delete_files and p.key.is_unpartitioned
                 for d in p.delete_files if d.content is DeleteContent.EQUALITY]
        if not found:  # the common case: no per-partition work at all
            return NO_GLOBAL_DELETES
        found.sort(key=lambda g: (g.delete.data_sequence_number, g.delete.path, g.delete.content_offset or 0))
        seqs = tuple(g.delete.data_sequence_number for g in found)

        stats: dict[PartitionKey, tuple[int, int]] = {}
        for p in parts:
            if p.data_files:
                stats[p.key] = (min(f.data_sequence_number for f in p.data_files),
                                sum(f.record_count for f in p.data_files))
        # Rows a delete with sequence S may apply to: the records of the partitions whose minimum data sequence
        # number is below S (prefix sums over the partitions sorted by that minimum).
        by_min = sorted(stats.values())
        mins = [m for m, _ in by_min]
        prefix = [0]
        for _, records in by_min:
            prefix.append(prefix[-1] + records)
        shares = [0.0] * (len(found) + 1)
        sizes = [0] * (len(found) + 1)
        for i in range(len(found) - 1, -1, -1):
            eligible = prefix[bisect.bisect_left(mins, seqs[i])]
            own_share = found[i].delete.record_count / eligible if eligible > 0 else 0.0
            shares[i] = shares[i + 1] + own_share
            sizes[i] = sizes[i + 1] + found[i].delete.size_bytes

        max_seq_by_owner: dict[PartitionKey, int] = {}
        for g in found:
            max_seq_by_owner[g.owner] = max(max_seq_by_owner.get(g.owner, 0), g.delete.data_sequence_number)
        elsewhere: dict[PartitionKey, int] = {}
        for owner, max_seq in max_seq_by_owner.items():
            elsewhere[owner] = sum(f.size_bytes for p in parts if p.key != owner and p.key in stats
                                   and stats[p.key][0] < max_seq
                                   for f in p.data_files if f.data_sequence_number < max_seq)
        return cls(
            entries=tuple(found),
            sequence_numbers=seqs,
            share_suffix=tuple(shares),
            partition_stats=stats,
            table_min_data_sequence_number=min(mins) if mins else None,
            elsewhere_scope_bytes=elsewhere,
            bytes_suffix=tuple(sizes),
            owner_max_sequence_numbers=max_seq_by_owner,
        )

    def is_dangling(self, delete: DeleteFileInfo) -> bool:
        """Whether a global equality delete applies to no live data file of the table (none has a lower data
        sequence number)."""
        lowest = self.table_min_data_sequence_number
        return lowest is None or lowest >= delete.data_sequence_number

    def attribute(self, partition: PartitionState) -> PartitionDeletes:
        """The delete files that count in ``partition`` (module docstring)."""
        own = partition.delete_files
        if not self.entries:
            return PartitionDeletes(partition.key, own)
        key = partition.key
        own_global_records = sum(d.record_count for d in own if d.content is DeleteContent.EQUALITY) \
            if key.is_unpartitioned else 0
        own_globals = sum(1 for d in own if d.content is DeleteContent.EQUALITY) if key.is_unpartitioned else 0
        stats = self.partition_stats.get(key)
        if stats is None:  # no live data file: nothing applies here, only the partition's own files count
            return PartitionDeletes(key, own, global_equality_delete_files=own_globals,
                                    own_global_records=own_global_records)
        min_seq, records = stats
        first = bisect.bisect_right(self.sequence_numbers, min_seq)  # entries with sequence > min_seq apply
        count = len(self.entries) - first
        size = self.bytes_suffix[first]
        highest = self.sequence_numbers[-1] if count else None
        owners = [o for o, top in self.owner_max_sequence_numbers.items() if top > min_seq and o != key]
        if key in self.owner_max_sequence_numbers and count:
            # An unpartitioned partition: its own global deletes are in ``own`` already (few partitions do this).
            elsewhere = [g.delete for g in self.entries[first:] if g.owner != key]
            count, size = len(elsewhere), sum(d.size_bytes for d in elsewhere)
            highest = max((d.data_sequence_number for d in elsewhere), default=None)
        return PartitionDeletes(
            key=key,
            own=own,
            global_count_elsewhere=count,
            global_bytes_elsewhere=size,
            global_max_sequence_number_elsewhere=highest,
            global_equality_delete_files=own_globals + count,
            global_equality_delete_records=round(records * self.share_suffix[first]),
            global_owner_labels=tuple(sorted(o.label() for o in owners)),
            own_global_records=own_global_records,
            source=self,
            first_entry=first,
        )


#: The index of a table without global equality deletes.
NO_GLOBAL_DELETES = GlobalDeleteIndex()
