"""Table health as a value: one sample per inspection, and what needs attention first (pure; no I/O).

A :class:`HealthSample` condenses a :class:`~compaction.core.model.TableState` (file counts by kind, delete ratio,
fragment files, bytes) plus the planner's decision for it under the table's own policy in ``auto`` mode. The ledger
stores samples over time (``health_samples``); the UI draws them and orders tables by :func:`attention_key`.

Deletes are counted per partition where they *apply* (:mod:`compaction.core.attribution`): an equality delete
written under an unpartitioned spec is global and also counts in every other partition with an older live data
file (``global_equality_delete_files``), its records pro rata. The table totals count each file once.

*Fragment files* are the planner's: data files smaller than ``CompactionPolicy.fragment_threshold_bytes`` (target file
size / ``compaction.fragment-ratio``; 16 MiB at the default 128 MiB target and ratio 8).
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Mapping, Sequence

from compaction.core.attribution import GlobalDeleteIndex, PartitionDeletes
from compaction.core.model import DeleteContent, PartitionState, TableState
from compaction.core.plan import CompactionKind, CompactionPlan
from compaction.core.policy import CompactionPolicy

#: Per-partition detail kept in a sample: every partition up to this many, else the ones with most deletes.
MAX_PARTITIONS_PER_SAMPLE = 256
#: Run statuses that put a table at the top of the overview (a human should look).
PROBLEM_RUN_STATUSES = frozenset({"failed", "needs_attention", "partial"})


def fragment_threshold_bytes(policy: CompactionPolicy) -> int:
    """Data files strictly smaller than this are fragment files (the planner's own threshold)."""
    return policy.fragment_threshold_bytes


@dataclass(frozen=True)
class PartitionHealth:
    """Health of one partition in a sample."""

    label: str
    data_files: int
    data_bytes: int
    data_records: int
    position_delete_files: int
    equality_delete_files: int
    deletion_vectors: int
    delete_records: int
    fragment_files: int
    decision: str | None = None
    #: Of ``equality_delete_files``, the global ones (written under an unpartitioned spec; they apply here too).
    global_equality_delete_files: int = 0

    @property
    def delete_files(self) -> int:
        return self.position_delete_files + self.equality_delete_files + self.deletion_vectors

    @property
    def delete_ratio(self) -> float:
        return round(self.delete_records / self.data_records, 4) if self.data_records else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"label": self.label, "data_files": self.data_files, "data_bytes": self.data_bytes,
                "data_records": self.data_records, "position_delete_files": self.position_delete_files,
                "equality_delete_files": self.equality_delete_files, "deletion_vectors": self.deletion_vectors,
                "delete_files": self.delete_files, "delete_records": self.delete_records,
                "delete_ratio": self.delete_ratio, "fragment_files": self.fragment_files, "decision": self.decision,
                "global_equality_delete_files": self.global_equality_delete_files}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> PartitionHealth:
        def num(key: str) -> int:
            value = data.get(key, 0)
            return int(value) if isinstance(value, (int, float)) else 0

        decision = data.get("decision")
        return cls(str(data["label"]), num("data_files"), num("data_bytes"), num("data_records"),
                   num("position_delete_files"), num("equality_delete_files"), num("deletion_vectors"),
                   num("delete_records"), num("fragment_files"), None if decision is None else str(decision),
                   num("global_equality_delete_files"))


@dataclass(frozen=True)
class HealthSample:
    """A table's health at one snapshot, with the planner's decision (``auto``, the table's own policy).

    ``decision`` is ``none``/``minor``/``major`` (the strongest kind over the partitions), ``decision_reason`` the
    planner's reason for one partition of that kind. ``partitions_detail`` holds at most
    :data:`MAX_PARTITIONS_PER_SAMPLE` partitions (``partitions_truncated`` says whether some were left out)."""

    catalog: str
    table_ref: str
    snapshot_id: int | None
    metadata_location: str | None
    partitions: int
    data_files: int
    data_bytes: int
    data_records: int
    position_delete_files: int
    equality_delete_files: int
    deletion_vectors: int
    delete_records: int
    delete_bytes: int
    fragment_files: int
    decision: str | None = None
    decision_reason: str | None = None
    partitions_minor: int = 0
    partitions_major: int = 0
    partitions_detail: tuple[PartitionHealth, ...] = field(default=(), compare=False)
    partitions_truncated: bool = False
    #: Metadata size (``None`` where it was not read, e.g. samples recorded before it was): snapshots in
    #: the metadata file, the metadata file's bytes, the current snapshot's manifests and their bytes. With
    #: ``data_bytes + delete_bytes`` they make the bytes the current snapshot references.
    snapshots: int | None = None
    metadata_file_bytes: int | None = None
    manifests: int | None = None
    manifest_bytes: int | None = None

    @property
    def delete_files(self) -> int:
        return self.position_delete_files + self.equality_delete_files + self.deletion_vectors

    @property
    def referenced_bytes(self) -> int | None:
        """Bytes the current snapshot references: data and delete files, its manifests and the metadata file
        (``None`` when the manifests or the metadata file were not measured)."""
        if self.manifest_bytes is None or self.metadata_file_bytes is None:
            return None
        return self.data_bytes + self.delete_bytes + self.manifest_bytes + self.metadata_file_bytes

    @property
    def delete_ratio(self) -> float:
        """Delete records / data records (0 when the table has no data rows)."""
        return round(self.delete_records / self.data_records, 4) if self.data_records else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "catalog": self.catalog, "table_ref": self.table_ref, "snapshot_id": self.snapshot_id,
            "metadata_location": self.metadata_location, "partitions": self.partitions,
            "data_files": self.data_files, "data_bytes": self.data_bytes, "data_records": self.data_records,
            "position_delete_files": self.position_delete_files, "equality_delete_files": self.equality_delete_files,
            "deletion_vectors": self.deletion_vectors, "delete_files": self.delete_files,
            "delete_records": self.delete_records, "delete_bytes": self.delete_bytes,
            "delete_ratio": self.delete_ratio, "fragment_files": self.fragment_files, "decision": self.decision,
            "decision_reason": self.decision_reason, "partitions_minor": self.partitions_minor,
            "partitions_major": self.partitions_major,
            "partitions_detail": [p.to_dict() for p in self.partitions_detail],
            "partitions_truncated": self.partitions_truncated,
            "snapshots": self.snapshots, "metadata_file_bytes": self.metadata_file_bytes,
            "manifests": self.manifests, "manifest_bytes": self.manifest_bytes,
            "referenced_bytes": self.referenced_bytes,
        }


def partition_health(p: PartitionState, fragment_limit: int, decision: str | None = None,
                     attributed: PartitionDeletes | None = None) -> PartitionHealth:
    """``attributed``: the deletes that count in ``p`` (``GlobalDeleteIndex.attribute``); default: its own."""
    deletes = attributed if attributed is not None else PartitionDeletes(p.key, p.delete_files)
    position = dvs = 0
    equality = deletes.global_count_elsewhere  # all equality deletes; counted, not listed (see attribution)
    for d in deletes.own:
        if d.content is DeleteContent.POSITION:
            position += 1
        elif d.content is DeleteContent.EQUALITY:
            equality += 1
        else:
            dvs += 1
    return PartitionHealth(
        label=p.key.label(), data_files=len(p.data_files), data_bytes=p.data_bytes, data_records=p.data_records,
        position_delete_files=position, equality_delete_files=equality, deletion_vectors=dvs,
        delete_records=deletes.delete_records,
        fragment_files=sum(1 for f in p.data_files if f.size_bytes < fragment_limit), decision=decision,
        global_equality_delete_files=deletes.global_equality_delete_files)


def summarize_decisions(plan: CompactionPlan | None) -> tuple[str | None, str | None, int, int]:
    """(decision, reason, partitions MINOR, partitions MAJOR) of a plan: the strongest kind and one reason for it."""
    if plan is None:
        return None, None, 0, 0
    minor = [d for d in plan.decisions if d.kind is CompactionKind.MINOR]
    major = [d for d in plan.decisions if d.kind is CompactionKind.MAJOR]
    if major:
        kind, chosen = CompactionKind.MAJOR, major
    elif minor:
        kind, chosen = CompactionKind.MINOR, minor
    else:
        kind, chosen = CompactionKind.NONE, list(plan.decisions)
    if not chosen:
        return kind.value, "no live files", 0, 0
    if kind is CompactionKind.NONE:  # the partition closest to a trigger: the one with most delete files
        first = max(chosen, key=lambda d: (float(d.metrics.get("delete_files", 0) or 0), d.partition.label()))
    else:
        first = chosen[0]
    reason = f"{first.partition.label()}: {first.reason}"
    if kind is not CompactionKind.NONE and len(chosen) > 1:
        reason += f" (and {len(chosen) - 1} more partition(s) {kind.value.upper()})"
    if plan.deferred:
        reason += f"; {len(plan.deferred)} partition(s) deferred by run caps"
    return kind.value, reason, len(minor), len(major)


def sample_from_state(state: TableState, policy: CompactionPolicy, plan: CompactionPlan | None = None,
                      metadata_location: str | None = None,
                      max_partitions: int = MAX_PARTITIONS_PER_SAMPLE) -> HealthSample:
    """The sample of ``state``; ``plan`` is the planner's ``auto`` plan of the same state (its decisions)."""
    limit = fragment_threshold_bytes(policy)
    kinds: dict[str, str] = {}
    if plan is not None:
        kinds = {d.partition.label(): d.kind.value for d in plan.decisions}
    global_deletes = GlobalDeleteIndex.of(state.partitions)
    parts = [partition_health(p, limit, kinds.get(p.key.label()), global_deletes.attribute(p))
             for p in state.partitions]
    detail = parts
    if len(parts) > max_partitions:
        ranked = sorted(parts, key=lambda h: (-h.delete_files, -h.delete_records, -h.fragment_files, h.label))
        keep = {h.label for h in ranked[:max_partitions]}
        detail = [h for h in parts if h.label in keep]
    decision, reason, n_minor, n_major = summarize_decisions(plan)
    return HealthSample(
        catalog=state.identity.catalog, table_ref=state.identity.dotted, snapshot_id=state.snapshot_id,
        metadata_location=metadata_location, partitions=len(parts),
        data_files=sum(h.data_files for h in parts), data_bytes=sum(h.data_bytes for h in parts),
        data_records=sum(h.data_records for h in parts),
        # Table totals count every file once, where it lives (a global delete counts in several partitions).
        position_delete_files=sum(len(p.position_delete_files) for p in state.partitions),
        equality_delete_files=sum(len(p.equality_delete_files) for p in state.partitions),
        deletion_vectors=sum(len(p.deletion_vectors) for p in state.partitions),
        delete_records=sum(p.delete_records for p in state.partitions),
        delete_bytes=sum(p.delete_bytes for p in state.partitions),
        fragment_files=sum(h.fragment_files for h in parts),
        decision=decision, decision_reason=reason, partitions_minor=n_minor, partitions_major=n_major,
        partitions_detail=tuple(detail), partitions_truncated=len(detail) < len(parts),
    )


# ------------------------------------------------------------------------------------------------ attention
_DECISION_RANK = {"major": 3, "minor": 2, None: 1, "none": 0}


@dataclass(frozen=True)
class Attention:
    """Why a table is where it is in the overview: higher ``level`` first, then more delete files, etc."""

    level: int
    label: str


def attention(decision: str | None, last_run_status: str | None, inspected: bool = True) -> Attention:
    """Attention level of a table: a problem run (failed, partial, needs attention) first, then MAJOR, MINOR,
    not inspected yet, and last healthy tables."""
    problem = last_run_status in PROBLEM_RUN_STATUSES
    rank = _DECISION_RANK.get(decision if inspected else None, 0)
    label = {3: "major compaction due", 2: "minor compaction due", 1: "not inspected yet", 0: "healthy"}[rank]
    if problem:
        label = f"last run {last_run_status}" + ("" if rank == 0 else f"; {label}")
    return Attention(level=rank + (10 if problem else 0), label=label)


def attention_key(level: int, delete_files: int, delete_ratio: float, fragment_files: int,
                  table_ref: str) -> tuple[object, ...]:
    """Sort key, most urgent first."""
    return (-level, -delete_files, -delete_ratio, -fragment_files, table_ref)


def sparkline_points(values: Sequence[tuple[_dt.datetime, float]], width: float, height: float,
                     start: _dt.datetime | None = None, end: _dt.datetime | None = None) -> list[tuple[float, float]]:
    """Scale (time, value) pairs into a ``width`` x ``height`` box (y grows downwards, 0 at the bottom)."""
    if not values:
        return []
    t0 = start or values[0][0]
    t1 = end or values[-1][0]
    span = max((t1 - t0).total_seconds(), 1e-9)
    top = max(max(v for _, v in values), 1e-9)
    out = []
    for at, value in values:
        x = (at - t0).total_seconds() / span * width if len(values) > 1 or end is not None else width
        out.append((round(min(max(x, 0.0), width), 1), round(height - value / top * height, 1)))
    return out
