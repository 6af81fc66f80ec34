"""Task planning: from the planner's per-partition decisions to job groups (run caps, splits, bin-packing).

Pure functions over :mod:`compaction.core.model` / :mod:`compaction.core.plan` values; no I/O, and every iteration
is over sorted data, so the groups do not depend on the order of the input.

After the seed design of Amoro/Arctic (entry point: :func:`plan_candidates`; the planner's ``plan_tasks``).

* Files of a full MAJOR task: every data file some delete may apply to, plus every small data file (large data
  files no delete applies to are left alone), and all delete files of the partition. Cost = those data bytes +
  delete bytes. Other MAJOR and MINOR tasks: the files they rewrite (small and delete-heavy segments; fragments)
  plus the files an equality delete may apply to (read for the conversion), and all delete files. Cost = rewritten
  bytes + ``CONVERSION_READ_FRACTION`` of the bytes only read + delete bytes. A DV's
  delete bytes are its blob length when known (several DVs may share one Puffin file). A partition of an
  unpartitioned spec with equality deletes of its own (global: they apply to every partition) also reaches the
  *elsewhere bytes*: the other partitions' data files with a data sequence number below its highest equality
  delete's. They are not task files (they live in their own partitions), but a full MAJOR rewrites them (cost +
  elsewhere bytes) and a MINOR or selective MAJOR reads them for the table-wide conversion (cost +
  ``CONVERSION_READ_FRACTION`` of them, added to the bytes only read).
* Run caps: candidates (decision != NONE) are ranked MAJOR before MINOR, then by delete ratio (desc), cost (desc),
  partition sort key. Walking that ranking, a partition is taken if fewer than ``max_partitions_per_run`` are
  taken and the taken cost plus its cost stays <= ``max_bytes_per_run``; otherwise it is *deferred* with the
  reason (a too-big partition does not stop smaller, lower-ranked partitions from being taken). The byte cap
  counts each partition's cost once (before any split). Deferred partitions are listed in ranking order.
* Split: ``average = total cost of taken partitions / (parallelism * parallel_multiple)``. A MAJOR partition
  whose cost > average, with >= 2 data files to rewrite and data bytes / delete bytes >= ``weight_ratio``
  (infinite without deletes), is split into ``n`` pieces by whole data files (largest file first into the lightest
  piece), ``n`` being the largest number <= ``min(#data files, ceil(cost / average), data bytes // target file
  size)`` for which every piece gets >= ``target_file_size_bytes`` of data (so a split never leaves a small file
  to be rewritten on its own, and adds at most one partial output file per target size of data); no such
  ``n >= 2`` means no split. Every piece carries all delete files of the partition and costs its data bytes + all
  delete bytes; the first piece also costs the other partitions' data bytes the partition's full rewrite reaches
  (an unpartitioned spec's partition with global equality deletes), so the pieces add up to its cost + (n - 1) x
  delete bytes. MINOR partitions are never split.
* Group: all pieces of one partition always stay in one group (they share the delete files, and the partition
  can be committed - and its deletes dropped - only once every piece is written), so no file path appears in two
  groups. On a table whose spec evolved, partitions of different specs whose files overlap (Iceberg projects a
  partition filter onto every spec: the unpartitioned spec's partition overlaps every partition) are packed as one
  unit, so that one job group rewrites their files once (see :func:`_merge_overlapping`). Partitions are placed
  largest first (cost desc, then sort key). With ``k = min(parallelism *
  parallel_multiple, #partitions)`` and capacity ``C = max(largest partition cost, ceil(total cost / k))`` (a
  lower bound of the best achievable largest-group cost), a partition joins the lightest already-open group that
  stays <= C (this keeps a table's partitions together in as few groups as balance allows); if none fits it opens
  a new group while fewer than ``k`` are open; otherwise it joins the lightest group (ties: lowest group id).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from compaction.core.display import format_bytes
from compaction.core.model import DataFileInfo, PartitionKey
from compaction.core.plan import CompactionKind, CompactionTask, DeferredPartition, JobGroup
from compaction.core.policy import CompactionPolicy

__all__ = ["Candidate", "TaskPlan", "plan_candidates"]


@dataclass(frozen=True)
class TaskPlan:
    """Result of :func:`plan_tasks`: the job groups and the partitions deferred by the run caps."""

    groups: tuple[JobGroup, ...]
    deferred: tuple[DeferredPartition, ...]


@dataclass(frozen=True)
class Candidate:
    """A partition the planner decided to compact, with what packing needs to know about it."""

    partition: PartitionKey
    kind: CompactionKind
    full: bool  # a full-rewrite MAJOR
    cost: int  # estimated bytes read and written (module docstring)
    delete_ratio: float
    order_key: tuple[object, ...]  # partition_order_key(partition)
    data_files: tuple[DataFileInfo, ...]  # the data files its task(s) rewrite or read
    delete_paths: tuple[str, ...]  # sorted
    delete_bytes: int
    elsewhere_bytes: int  # other partitions' data a full MAJOR of it rewrites too (its global equality deletes)

    def priority(self) -> tuple[object, ...]:
        return (-self.kind.rank, -self.delete_ratio, -self.cost, self.order_key)


def _select(cands: Sequence[Candidate], policy: CompactionPolicy) -> tuple[list[Candidate], list[DeferredPartition]]:
    taken: list[Candidate] = []
    deferred: list[DeferredPartition] = []
    used = 0
    for c in sorted(cands, key=lambda c: c.priority()):
        if len(taken) >= policy.max_partitions_per_run:
            reason = f"max partitions per run ({policy.max_partitions_per_run}) reached"
        elif used + c.cost > policy.max_bytes_per_run:
            reason = (
                f"estimated cost {c.cost} bytes ({format_bytes(c.cost)}) would exceed max bytes per run "
                f"{policy.max_bytes_per_run} ({format_bytes(policy.max_bytes_per_run)}); {used} bytes already taken"
            )
        else:
            taken.append(c)
            used += c.cost
            continue
        deferred.append(DeferredPartition(c.partition, c.kind, c.cost, reason))
    return taken, deferred


def _task_id(key: PartitionKey, kind: CompactionKind, index: int, count: int) -> str:
    return f"{kind.value}:{key.label()}:{index + 1}/{count}"


def _split_files(files: Sequence[DataFileInfo], pieces: int) -> list[list[DataFileInfo]]:
    """Largest file first into the lightest piece (ties: lowest index); whole files only."""
    bins: list[list[DataFileInfo]] = [[] for _ in range(pieces)]
    loads = [0] * pieces
    for f in sorted(files, key=lambda f: (-f.size_bytes, f.path)):
        i = min(range(pieces), key=lambda j: (loads[j], j))
        bins[i].append(f)
        loads[i] += f.size_bytes
    return [sorted(b, key=lambda f: f.path) for b in bins if b]


def _tasks_for(c: Candidate, average: float, policy: CompactionPolicy) -> list[CompactionTask]:
    files = c.data_files
    delete_paths = c.delete_paths
    data_bytes = sum(f.size_bytes for f in files)
    weight = data_bytes / c.delete_bytes if c.delete_bytes > 0 else math.inf
    split: list[list[DataFileInfo]] = []
    if (c.kind is CompactionKind.MAJOR and c.full and len(files) >= 2 and c.cost > average
            and weight >= policy.weight_ratio):
        most = min(len(files), math.ceil(c.cost / average), data_bytes // policy.target_file_size_bytes)
        for pieces in range(most, 1, -1):
            candidate = _split_files(files, pieces)
            if min(sum(f.size_bytes for f in b) for b in candidate) >= policy.target_file_size_bytes:
                split = candidate
                break
    if not split:
        return [
            CompactionTask(
                task_id=_task_id(c.partition, c.kind, 0, 1),
                partition=c.partition,
                kind=c.kind,
                data_files=tuple(f.path for f in files),
                delete_files=delete_paths,
                estimated_cost_bytes=c.cost,
                full_rewrite=c.full,
            )
        ]
    # The other partitions' files a full MAJOR of an unpartitioned spec's partition rewrites too (its global
    # equality deletes apply to them) are part of its work however its own files are split: the first piece carries
    # them, so the pieces add up to the partition's cost (plus the delete bytes every further piece reads again).
    return [
        CompactionTask(
            task_id=_task_id(c.partition, c.kind, i, len(split)),
            partition=c.partition,
            kind=c.kind,
            data_files=tuple(f.path for f in part),
            delete_files=delete_paths,
            estimated_cost_bytes=(sum(f.size_bytes for f in part) + c.delete_bytes
                                  + (c.elsewhere_bytes if i == 0 else 0)),
            piece_index=i,
            piece_count=len(split),
            full_rewrite=True,
        )
        for i, part in enumerate(split)
    ]


# A partition's tasks for packing: (partition, its tasks, partition_order_key(partition)).
_Unit = tuple[PartitionKey, list[CompactionTask], tuple[object, ...]]


def _pack(units: Sequence[_Unit], max_groups: int) -> tuple[JobGroup, ...]:
    if not units:
        return ()

    def unit_cost(u: _Unit) -> int:
        return sum(t.estimated_cost_bytes for t in u[1])

    ordered = sorted(units, key=lambda u: (-unit_cost(u), u[2]))
    k = min(max_groups, len(ordered))
    total = sum(unit_cost(u) for u in ordered)
    capacity = max(unit_cost(ordered[0]), -(-total // k))
    members: list[list[_Unit]] = []
    loads: list[int] = []
    for u in ordered:
        cost = unit_cost(u)
        fitting = [i for i in range(len(members)) if loads[i] + cost <= capacity]
        if fitting:
            i = min(fitting, key=lambda j: (loads[j], j))
        elif len(members) < k:
            members.append([])
            loads.append(0)
            i = len(members) - 1
        else:
            i = min(range(len(members)), key=lambda j: (loads[j], j))
        members[i].append(u)
        loads[i] += cost
    groups = []
    for gid, member in enumerate(members):
        tasks = [t for _, ts, _ in sorted(member, key=lambda u: u[2]) for t in ts]
        groups.append(JobGroup(gid, tuple(tasks)))
    return tuple(groups)


def _field_signature(key: PartitionKey) -> dict[tuple[str, str], object]:
    """The partition values of ``key`` by (source column, transform); void fields constrain nothing."""
    return {(f.source_column, f.transform): f.value for f in key.fields if f.transform != "void"}


def _merge_overlapping(units: Sequence[_Unit]) -> list[_Unit]:
    """Units whose partitions' files overlap become one unit (so one job group, and one rewrite in the job).

    Iceberg projects a partition's filter onto every spec (``Projections.inclusive``, spec "Scan Planning"), so a
    rewrite filtered on a partition of one spec also selects the files of another spec whose partition satisfies the
    projection: the unpartitioned spec's partition (filter ``alwaysTrue``) selects every file of the table, spec 0's
    ``day=1`` every file of spec 1's ``day=1/region=*``, and each of those selects spec 0's ``day=1`` files. Planned
    in separate units (or groups), the same files were rewritten by one and then again by the other ("changed since
    planning, re-evaluated"). Two partitions of different specs are disjoint only when a field both specs have (same
    source column and transform) holds different values in them; otherwise (no shared field, or equal values) they
    overlap. Partitions of one spec never overlap. Single-spec plans are returned as given."""
    if len({u[0].spec_id for u in units}) < 2:
        return list(units)
    parent = list(range(len(units)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        ri, rj = find(i), find(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    signatures = [_field_signature(u[0]) for u in units]
    by_spec: dict[int, list[int]] = {}
    for i, u in enumerate(units):
        by_spec.setdefault(u[0].spec_id, []).append(i)
    specs = sorted(by_spec)
    for a_pos, a in enumerate(specs):
        for b in specs[a_pos + 1:]:
            common = sorted(set(signatures[by_spec[a][0]]) & set(signatures[by_spec[b][0]]))
            buckets: dict[tuple[object, ...], list[int]] = {}
            for i in by_spec[a] + by_spec[b]:
                buckets.setdefault(tuple(repr(signatures[i][c]) for c in common), []).append(i)
            for members in buckets.values():
                sides = {units[i][0].spec_id for i in members}
                if len(sides) == 2:  # partitions of both specs with the same shared values: all one unit
                    for i in members[1:]:
                        union(members[0], i)
    merged: dict[int, list[int]] = {}
    for i in range(len(units)):
        merged.setdefault(find(i), []).append(i)
    out: list[_Unit] = []
    for members in merged.values():
        ordered = sorted(members, key=lambda i: units[i][2])
        first = units[ordered[0]]
        out.append((first[0], [t for i in ordered for t in units[i][1]], first[2]))
    return out


def plan_candidates(cands: Sequence[Candidate], policy: CompactionPolicy) -> TaskPlan:
    """Run caps, splits and bin-packing of the decided partitions (module docstring)."""
    taken, deferred = _select(cands, policy)
    total = sum(c.cost for c in taken)
    average = total / policy.max_groups
    units = _merge_overlapping([
        (c.partition, _tasks_for(c, average, policy), c.order_key)
        for c in sorted(taken, key=lambda c: c.order_key)
    ])
    # Fewer groups for small runs: each group is a spark-submit with a large fixed cost.
    wanted = max(1, -(-total // policy.min_job_group_bytes))
    return TaskPlan(_pack(units, min(policy.max_groups, wanted)), tuple(deferred))
