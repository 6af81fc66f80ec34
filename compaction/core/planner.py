"""The planner: per-partition decisions (Amoro-style evaluator) and cost-balanced task planning.

Pure functions over :mod:`compaction.core.model` values; no I/O, no clock (``now`` is an argument), and every
iteration is over sorted data so the plan does not depend on the order of partitions or files in the input.

Decisions (:func:`evaluate_partition`)
--------------------------------------
Iceberg application rules (spec, "Scan Planning") are used to relate deletes to data files: an equality delete
with data sequence number ``S`` may apply to every data file of the partition with data sequence ``< S``; a
position delete / DV with sequence ``S`` applies to data files with sequence ``<= S`` and, when it names its data
file (``referenced_data_file``), only to that file. An equality delete written under an unpartitioned spec is
*global*: it applies to older data files of every partition of every spec, and counts in each of them
(:mod:`compaction.core.attribution`, built once per table by :func:`plan`; its records pro rata). A MAJOR of a
partition that global deletes apply to is a full rewrite; their MINOR is the one of the unpartitioned partition
they live in (it converts them table-wide), so they trigger no MINOR elsewhere.

* A delete file is *settled* when it is a DV or a position delete that is the only position delete / DV applying
  to each live data file it applies to (file-scoped, or partition-scoped alone in its partition): that is the form
  a MINOR produces, so settled files never trigger MINOR. Every other delete file is *mergeable* (equality
  deletes, position deletes sharing a data file with another, dangling deletes). Which delete applies to which data
  file, and settled, come from :mod:`compaction.core.applicability`, the rule MINOR decides its work by too
  (``decide_minor``), so a partition the planner sees nothing mergeable in gives MINOR nothing to do.
* ``delete ratio`` = deleted records (all delete files) / data records (``0`` for a partition without data rows).
* A *small* file is a data file strictly smaller than ``policy.small_file_threshold_bytes``.

* *Fragment* files are smaller than ``policy.fragment_threshold_bytes`` (target size / ``fragment_ratio``), the
  others are *segment* files (Amoro's split). A segment's *known* delete ratio counts only the position deletes /
  DVs that name that one file, as Iceberg's rewrite planner does (``BinPackRewriteFilePlanner``).

Mode ``auto`` applies, in order (first match wins):

1. delete ratio >= ``major_delete_ratio``                            -> MAJOR (a full rewrite)
2. a segment with known delete ratio >= ``major_segment_delete_ratio`` -> MAJOR
3. small segment files >= ``major_small_file_count`` (with ``major_full_rewrite``: any small file) -> MAJOR
4. fragment files + equality delete files >= ``minor_fragment_file_count`` -> MINOR
5. any equality delete file (if ``minor_on_equality_deletes``)       -> MINOR
6. mergeable delete files >= ``minor_delete_file_count``             -> MINOR
7. some data file has > ``minor_max_position_deletes_per_file`` position deletes / DVs -> MINOR
8. ``minor_interval_seconds`` > 0, the last MINOR that long ago (or none), and >= 2 fragments or a mergeable
   delete file -> MINOR
9. otherwise NONE, with the reason listing why each rule did not fire.

Mode ``major`` gives MAJOR to every partition with any delete file or >= 2 small files; mode ``minor`` gives MINOR
to every partition with a mergeable delete file or >= 2 fragment files; other partitions get NONE. A MAJOR is a
*full* rewrite (``CompactionTask.full_rewrite``) under ``major_full_rewrite`` or rule 1; otherwise it rewrites the
small files and the delete-heavy segments, and the other files' deletes are converted as in a MINOR. Under the
``sort`` / ``zorder`` strategies (``major_strategy``) every MAJOR is a full rewrite of *every* data file of its
partition, and its reason names the clustering.

Task planning (:func:`plan_tasks`): :mod:`compaction.core.grouping`.
"""

from __future__ import annotations

import datetime as _dt
import gc
import math
import operator
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Sequence

from compaction.core.applicability import equality_delete_applies, positional_applicability
from compaction.core.attribution import NO_GLOBAL_DELETES, GlobalDeleteIndex, PartitionDeletes
from compaction.core.display import format_bytes
from compaction.core.errors import ConfigError, PlanningError, UnsupportedTableError
from compaction.core.grouping import Candidate, TaskPlan, plan_candidates
from compaction.core.model import DataFileInfo, DeleteContent, DeleteFileInfo, PartitionKey, PartitionState, TableState
from compaction.core.partition_filter import PartitionFilter
from compaction.core.plan import (
    CompactionKind,
    CompactionMode,
    CompactionPlan,
    CompactionTask,
    DeferredPartition,
    JobGroup,
    PartitionDecision,
    decision_digest,
)
from compaction.core.policy import ENABLED, CompactionPolicy
from compaction.core.read_cost import MIB, ReadCostEstimate, ReadShape, compacted_shape, rewritten_shape

__all__ = [
    "CompactionKind",
    "CompactionMode",
    "PartitionDecision",
    "SUPPORTED_FORMAT_VERSIONS",
    "TaskPlan",
    "evaluate_partition",
    "plan_tasks",
    "plan",
    "CROSS_PARTITION_POSITION_DELETE",
    "cross_partition_position_deletes",
    "partition_order_key",
    "PlanCache",
    "READ_COST_REASON",
    "read_costs",
]

SUPPORTED_FORMAT_VERSIONS = (2, 3)
DISABLED_BY_TABLE_PROPERTY = "compaction disabled by table property"
DISABLED_BY_RUN_PARAMETER = "compaction disabled by run parameter"
DISABLED_BY_POLICY = "compaction disabled by policy"

_POSITIONAL = (DeleteContent.POSITION, DeleteContent.DELETION_VECTOR)
#: Reason of a partition held because a position delete names a data file of another partition (see
#: :func:`cross_partition_position_deletes`).
CROSS_PARTITION_POSITION_DELETE = (
    "held: position delete {delete} of partition {delete_partition} names data file {data} of partition "
    "{data_partition}; readers disagree whether it applies (Iceberg spec: only within its own partition; Iceberg "
    "Java: by path), so neither partition is compacted until the delete is removed"
)


def partition_order_key(key: PartitionKey) -> tuple[object, ...]:
    """Total, deterministic order of partition keys (``PartitionKey.sort_key`` plus transforms/sources)."""
    return (key.sort_key(), tuple((f.transform, f.source_column) for f in key.fields))


def _check_format_version(format_version: int) -> None:
    if format_version == 1:
        raise UnsupportedTableError("format v1 table has no delete files; merge-on-read compaction needs v2+")
    if format_version not in SUPPORTED_FORMAT_VERSIONS:
        raise UnsupportedTableError(f"unsupported table format version {format_version!r} (supported: 2, 3)")


def _coerce_mode(mode: CompactionMode | str) -> CompactionMode:
    try:
        return CompactionMode(mode)
    except ValueError:
        raise ConfigError(f"invalid compaction mode {mode!r}: expected one of auto, minor, major") from None


def _delete_read_bytes(d: DeleteFileInfo) -> int:
    if d.content is DeleteContent.DELETION_VECTOR and d.content_size_bytes is not None:
        return d.content_size_bytes
    return d.size_bytes


def _delete_sort_key(d: DeleteFileInfo) -> tuple[object, ...]:
    return (d.path, -1 if d.content_offset is None else d.content_offset, d.content.value, d.data_sequence_number)


# --------------------------------------------------------------------------------------------------------------
# Per-partition analysis


_data_order = operator.attrgetter("path", "data_sequence_number", "size_bytes")


@dataclass(slots=True)  # not frozen: internal, never mutated, and a 24-field frozen __init__ is 3x slower
class _Analysis:
    """Everything the rules, metrics and task planning need about one partition, computed once."""

    state: PartitionState
    order_key: tuple[object, ...]  # partition_order_key(state.key)
    data_files: tuple[DataFileInfo, ...]  # sorted by path
    delete_files: tuple[DeleteFileInfo, ...]  # sorted
    small_files: tuple[DataFileInfo, ...]
    fragment_files: tuple[DataFileInfo, ...]  # smaller than target size / fragment ratio
    delete_heavy_segments: tuple[DataFileInfo, ...]  # segments whose known delete ratio >= the segment ratio
    delete_ratio: float
    mergeable: int
    dangling: int
    max_positional_per_file: int
    major_files: tuple[DataFileInfo, ...]  # data files a MAJOR rewrites
    minor_files: tuple[DataFileInfo, ...]  # data files a MINOR rewrites (fragments) or reads (conversion)
    major_rewritten_files: tuple[DataFileInfo, ...]
    minor_rewritten_files: tuple[DataFileInfo, ...]
    full_files: tuple[DataFileInfo, ...]  # data files a full-rewrite MAJOR rewrites
    delete_bytes: int  # bytes read for the deletes (a DV: its blob length when known)
    data_bytes: int
    data_records: int
    delete_records: int
    position_delete_files: int
    position_delete_records: int
    equality_delete_files: int
    equality_delete_records: int
    deletion_vectors: int
    deletion_vector_records: int
    major_data_bytes: int
    minor_data_bytes: int
    full_data_bytes: int
    attributed: PartitionDeletes  # own deletes plus the global equality deletes from elsewhere that apply here
    own_equality_delete_files: int  # equality deletes written in this partition (a MINOR of it converts them)
    elsewhere_bytes: int  # other partitions' data files its own global equality deletes apply to (see _finish)
    read_shape: ReadShape  # what a full scan of the partition reads (compaction.core.read_cost)
    deleted_paths: frozenset[str]  # data files some delete applies to

    @property
    def key(self) -> PartitionKey:
        return self.state.key

    def data_files_for(self, kind: CompactionKind, full: bool = False) -> tuple[DataFileInfo, ...]:
        if kind is CompactionKind.MAJOR:
            return self.full_files if full else self.major_files
        if kind is CompactionKind.MINOR:
            return self.minor_files
        return ()

    def rewritten_files_for(self, kind: CompactionKind, full: bool = False) -> tuple[DataFileInfo, ...]:
        if kind is CompactionKind.MAJOR:
            return self.full_files if full else self.major_rewritten_files
        if kind is CompactionKind.MINOR:
            return self.minor_rewritten_files
        return ()

    def data_bytes_for(self, kind: CompactionKind, full: bool = False) -> int:
        if kind is CompactionKind.MAJOR:
            return self.full_data_bytes if full else self.major_data_bytes
        if kind is CompactionKind.MINOR:
            return self.minor_data_bytes
        return 0

    def cost(self, kind: CompactionKind, full: bool = False) -> int:
        if kind is CompactionKind.NONE:
            return 0
        return self.data_bytes_for(kind, full) + self.delete_bytes


def _sorted_data_files(files: tuple[DataFileInfo, ...]) -> tuple[DataFileInfo, ...]:
    """``files`` sorted by (path, data sequence number, size); as given when the paths already strictly increase
    (table states from inspect are sorted by path)."""
    paths = [f.path for f in files]
    if all(map(operator.lt, paths, paths[1:])):
        return tuple(files)
    return tuple(sorted(files, key=_data_order))


def _analyze(state: PartitionState, policy: CompactionPolicy, order_key: tuple[object, ...] | None = None,
             global_deletes: GlobalDeleteIndex = NO_GLOBAL_DELETES) -> _Analysis:
    data = _sorted_data_files(state.data_files)
    threshold = policy.small_file_threshold_bytes
    data_bytes = 0
    data_records = 0
    small_list: list[DataFileInfo] = []
    for df in data:
        size = df.size_bytes
        data_bytes += size
        data_records += df.record_count
        if size < threshold:
            small_list.append(df)
    small = tuple(small_list)
    if order_key is None:
        order_key = partition_order_key(state.key)

    attributed = global_deletes.attribute(state)
    if not state.delete_files and not attributed.global_count_elsewhere:  # the common case: no delete applies
        return _finish(state, order_key, data, (), small, policy, data_bytes=data_bytes, data_records=data_records,
                       applying={}, known_deleted={}, touched_by_eq=set(), settled=0, dangling=0,
                       attributed=attributed, elsewhere_bytes=0, positional_reads=_NO_POSITIONAL_READS)

    deletes = tuple(sorted(state.delete_files, key=_delete_sort_key))
    live = {f.path: f for f in data}
    positional = [d for d in deletes if d.content in _POSITIONAL]
    equality = [d for d in deletes if d.content is DeleteContent.EQUALITY]

    # The rule MINOR applies too (compaction.core.applicability, shared with compaction.spark.minor.decide_work):
    # all of the state's files are of one spec and partition.
    app = positional_applicability(positional, lambda _: live)
    applying: dict[str, int] = {f.path: app.count(f.path) for f in data}
    dangling = sum(1 for i in range(len(positional)) if app.is_dangling(i))
    # Settled: the form a MINOR writes (one position delete / DV per data file, or one per partition with
    # ``write.delete.granularity=partition``), so it never counts as mergeable.
    settled = sum(1 for i in range(len(positional)) if app.is_settled(i))
    if not state.key.is_unpartitioned:
        for d in equality:
            if not any(equality_delete_applies(d, f) for f in data):
                dangling += 1
    elif global_deletes:
        # Global equality deletes (written unpartitioned) apply to every partition of every spec (Iceberg spec,
        # "Scan Planning"): dangling only when no live data file of the whole table is older.
        dangling += sum(1 for d in equality if global_deletes.is_dangling(d))

    # Global equality deletes written elsewhere also delete rows of this partition's older files.
    max_eq_seq = max((d.data_sequence_number for d in equality), default=None)
    if attributed.global_max_sequence_number_elsewhere is not None:
        max_eq_seq = max(max_eq_seq or 0, attributed.global_max_sequence_number_elsewhere)
    touched_by_eq = {f.path for f in data if max_eq_seq is not None and f.data_sequence_number < max_eq_seq}
    # Iceberg's rewrite planner knows a data file's deleted rows only from file-scoped position deletes / DVs
    # (BinPackRewriteFilePlanner.tooHighDeleteRatio); the planner counts the same, so it picks the files it will.
    known_deleted: dict[str, int] = {}
    for i, d in enumerate(positional):
        if d.referenced_data_file is not None and app.targets[i]:
            known_deleted[d.referenced_data_file] = known_deleted.get(d.referenced_data_file, 0) + d.record_count
    elsewhere_bytes = global_deletes.elsewhere_scope_bytes.get(state.key, 0) if equality else 0
    # A scan reads a position delete file for every data file it may apply to, a DV once for its one file; each data
    # file with any of them is read through a filter of its deleted positions (counted once).
    position_reads = position_rows = dv_reads = 0
    position_filtered: set[str] = set()
    for i, d in enumerate(positional):
        n = len(app.targets[i])
        position_filtered.update(app.targets[i])
        if d.content is DeleteContent.DELETION_VECTOR:
            dv_reads += n
        else:
            position_reads += n
            position_rows += n * d.record_count
    return _finish(state, order_key, data, deletes, small, policy, data_bytes=data_bytes, data_records=data_records,
                   applying=applying, known_deleted=known_deleted, touched_by_eq=touched_by_eq, settled=settled,
                   dangling=dangling, attributed=attributed, elsewhere_bytes=elsewhere_bytes,
                   positional_reads=(position_reads, position_rows, dv_reads, len(position_filtered)))


_NO_POSITIONAL_READS = (0, 0, 0, 0)


#: A conversion of equality deletes reads only the equality columns (and row positions) of a segment file, not
#: its rows: its cost is estimated at this fraction of the file's bytes.
CONVERSION_READ_FRACTION = 0.125


def _finish(state: PartitionState, order_key: tuple[object, ...], data: tuple[DataFileInfo, ...],
            deletes: tuple[DeleteFileInfo, ...], small: tuple[DataFileInfo, ...], policy: CompactionPolicy, *,
            data_bytes: int, data_records: int, applying: dict[str, int], known_deleted: dict[str, int],
            touched_by_eq: set[str], settled: int, dangling: int, attributed: PartitionDeletes,
            elsewhere_bytes: int, positional_reads: tuple[int, int, int, int]) -> _Analysis:
    """``elsewhere_bytes``: for a partition of an unpartitioned spec, the bytes of other partitions' data files its
    (global) equality deletes apply to. Its MINOR (and selective MAJOR) converts them table-wide, reading those
    files too; its full MAJOR rewrites them (compaction.spark.minor.decide_work, compaction.spark.job)."""
    fragment_limit = policy.fragment_threshold_bytes
    fragments = tuple(f for f in data if f.size_bytes < fragment_limit)
    heavy = tuple(
        f for f in data
        if f.path in known_deleted and f.size_bytes >= fragment_limit and f.record_count > 0
        and min(known_deleted[f.path], f.record_count) / f.record_count >= policy.major_segment_delete_ratio
    ) if known_deleted else ()
    small_paths = {f.path for f in small}
    if policy.clusters:
        # sort / zorder: clustering is a property of the whole partition; a file left out would overlap the
        # rewritten ones on every clustering column, so a MAJOR rewrites every data file (Iceberg's rewrite-all).
        full_rewrite = major_rewrite = data
    elif not deletes and not touched_by_eq:
        full_rewrite = major_rewrite = small
    else:
        full_rewrite = tuple(f for f in data if applying.get(f.path, 0) > 0 or f.path in touched_by_eq
                             or f.path in small_paths)
        heavy_paths = {f.path for f in heavy}
        major_rewrite = tuple(f for f in data if f.path in small_paths or f.path in heavy_paths)
    # Iceberg's rewrite merges a partition's selected files only when there are two or more (min-input-files 2),
    # or when one of them is delete-heavy: for a MINOR (delete-ratio-threshold 1) a file whose every row a
    # file-scoped position delete removes, which the rewrite simply drops.
    dead = tuple(f for f in data if f.record_count > 0 and known_deleted.get(f.path, 0) >= f.record_count
                 and f.size_bytes >= fragment_limit) if known_deleted else ()
    if dead:
        dead_paths = {f.path for f in dead}
        picked = tuple(f for f in data if f.size_bytes < fragment_limit or f.path in dead_paths)
    else:
        picked = fragments
    minor_rewrite = picked if len(picked) >= 2 or dead else ()

    def read_only(rewritten: tuple[DataFileInfo, ...]) -> tuple[DataFileInfo, ...]:
        if not touched_by_eq:
            return ()
        done = {f.path for f in rewritten}
        return tuple(f for f in data if f.path in touched_by_eq and f.path not in done)

    major_read = read_only(major_rewrite)
    minor_read = read_only(minor_rewrite)

    def union(a: tuple[DataFileInfo, ...], b: tuple[DataFileInfo, ...]) -> tuple[DataFileInfo, ...]:
        if not b:
            return a
        paths = {f.path for f in a} | {f.path for f in b}
        return tuple(f for f in data if f.path in paths)

    def cost(rewritten: tuple[DataFileInfo, ...], read: tuple[DataFileInfo, ...]) -> int:
        total = sum(f.size_bytes for f in rewritten)
        read_bytes = sum(f.size_bytes for f in read) + elsewhere_bytes
        return total + int(CONVERSION_READ_FRACTION * read_bytes) if read_bytes else total

    delete_records = n_pos = pos_records = n_eq = eq_records = n_dv = dv_records = 0
    for d in deletes:
        delete_records += d.record_count
        if d.content is DeleteContent.POSITION:
            n_pos += 1
            pos_records += d.record_count
        elif d.content is DeleteContent.EQUALITY:
            n_eq += 1
            eq_records += d.record_count
        elif d.content is DeleteContent.DELETION_VECTOR:
            n_dv += 1
            dv_records += d.record_count
    own_eq = n_eq
    # Global equality deletes count here by their pro rata share of rows (compaction.core.attribution): their keys
    # may match rows of any partition they apply to.
    n_eq += attributed.global_count_elsewhere
    global_rows = attributed.global_equality_delete_records - attributed.own_global_records
    delete_records += global_rows
    eq_records += global_rows
    ratio = delete_records / data_records if data_records > 0 else 0.0
    position_reads, position_rows, dv_reads, position_filtered = positional_reads
    deleted_paths = frozenset([p for p, n in applying.items() if n > 0]).union(touched_by_eq)
    read_shape = ReadShape(
        data_files=len(data), data_mib=data_bytes / MIB, position_delete_reads=position_reads,
        position_delete_rows=position_rows, position_filtered_files=position_filtered, dv_reads=dv_reads,
        equality_delete_files=n_eq,
        equality_delete_rows=eq_records,
        equality_probe_mib=sum(f.size_bytes for f in data if f.path in touched_by_eq) / MIB if touched_by_eq else 0.0,
    )
    return _Analysis(
        state=state,
        order_key=order_key,
        data_files=data,
        delete_files=deletes,
        small_files=small,
        fragment_files=fragments,
        delete_heavy_segments=heavy,
        delete_ratio=ratio,
        mergeable=len(deletes) - settled,
        dangling=dangling,
        max_positional_per_file=max(applying.values(), default=0),
        major_files=union(major_rewrite, major_read),
        minor_files=union(minor_rewrite, minor_read),
        major_rewritten_files=major_rewrite,
        minor_rewritten_files=minor_rewrite,
        full_files=full_rewrite,
        delete_bytes=sum(_delete_read_bytes(d) for d in deletes) + attributed.global_bytes_elsewhere,
        data_bytes=data_bytes,
        data_records=data_records,
        delete_records=delete_records,
        position_delete_files=n_pos,
        position_delete_records=pos_records,
        equality_delete_files=n_eq,
        equality_delete_records=eq_records,
        deletion_vectors=n_dv,
        deletion_vector_records=dv_records,
        major_data_bytes=cost(major_rewrite, major_read),
        minor_data_bytes=cost(minor_rewrite, minor_read),
        full_data_bytes=sum(f.size_bytes for f in full_rewrite) + elsewhere_bytes,
        attributed=attributed,
        own_equality_delete_files=own_eq,
        elsewhere_bytes=elsewhere_bytes,
        read_shape=read_shape,
        deleted_paths=deleted_paths,
    )


def _metrics(a: _Analysis, kind: CompactionKind, full: bool = False,
             read_cost: Mapping[str, float] | None = None) -> dict[str, int | float]:
    m: dict[str, int | float] = {
        "data_files": len(a.data_files),
        "data_bytes": a.data_bytes,
        "data_records": a.data_records,
        "delete_files": len(a.delete_files) + a.attributed.global_count_elsewhere,
        "delete_bytes": a.delete_bytes,
        "delete_records": a.delete_records,
        "position_delete_files": a.position_delete_files,
        "position_delete_records": a.position_delete_records,
        "equality_delete_files": a.equality_delete_files,
        "equality_delete_records": a.equality_delete_records,
        "deletion_vectors": a.deletion_vectors,
        "deletion_vector_records": a.deletion_vector_records,
        "global_equality_delete_files": a.attributed.global_equality_delete_files,
        "global_equality_delete_records": a.attributed.global_equality_delete_records,
        "mergeable_delete_files": a.mergeable,
        "dangling_delete_files": a.dangling,
        "max_position_deletes_per_data_file": a.max_positional_per_file,
        "small_files": len(a.small_files),
        "fragment_files": len(a.fragment_files),
        "delete_heavy_segment_files": len(a.delete_heavy_segments),
        "rewritten_data_files": len(a.rewritten_files_for(kind, full)),
        "full_rewrite": int(full),
        "delete_ratio": a.delete_ratio,
        "estimated_cost_bytes": a.cost(kind, full),
        "task_data_files": len(a.data_files_for(kind, full)),
    }
    if kind is not CompactionKind.NONE and a.delete_bytes > 0:
        m["data_delete_weight_ratio"] = a.data_bytes_for(kind, full) / a.delete_bytes
    if read_cost:
        m.update(read_cost)
    return m


def _decide(a: _Analysis, policy: CompactionPolicy, mode: CompactionMode, format_version: int,
            since_minor_s: float | None = None) -> tuple[CompactionKind, str, bool, dict[str, float]]:
    """(kind, reason, full, read-cost metrics): ``full`` when a MAJOR rewrites every file a delete applies to (the
    full-rewrite switch, or a partition whose delete ratio passed ``major_delete_ratio``: with that share of rows
    deleted, every file is worth rewriting)."""
    kind, reason = _decide_kind(a, policy, mode, since_minor_s)
    full = kind is CompactionKind.MAJOR and (policy.major_full_rewrite or reason.startswith(_RATIO_REASON))
    read_cost: dict[str, float] = {}
    if policy.read_cost_enabled and mode is CompactionMode.AUTO:
        kind, reason, full, read_cost = _by_read_cost(a, policy, format_version, kind, reason, full)
    if kind is CompactionKind.MAJOR and policy.clusters:
        full = True
        reason += f"; {policy.describe_strategy()}: every data file of the partition rewritten"
    if kind is CompactionKind.MAJOR and not full and a.attributed.global_count_elsewhere:
        # A selective MAJOR converts the partition's *own* remaining equality deletes afterwards; global ones
        # written elsewhere are converted only by a whole-table MINOR of the unpartitioned partition they live in
        # (compaction.spark.minor.decide_work). So the MAJOR itself rewrites every file a delete applies to.
        full = True
        reason += "; global equality deletes apply: full rewrite"
    return kind, reason, full, read_cost


def _estimate_read_cost(a: _Analysis, policy: CompactionPolicy, format_version: int) -> ReadCostEstimate:
    """The partition's scan now, as a compacted copy, and after each kind of compaction (compaction.core.read_cost)."""
    target = policy.target_file_size_bytes
    deleted = min(1.0, a.delete_ratio)

    def after(rewritten: tuple[DataFileInfo, ...]) -> ReadShape:
        rewritten_bytes = sum(f.size_bytes for f in rewritten)
        paths = {f.path for f in rewritten}
        kept = sum(1 for p in a.deleted_paths if p not in paths)
        kept_share = 1.0 - rewritten_bytes / a.data_bytes if a.data_bytes else 0.0
        return rewritten_shape(
            a.read_shape, rewritten_files=len(rewritten), rewritten_bytes=rewritten_bytes, deleted_fraction=deleted,
            kept_with_deletes=kept, kept_delete_rows=int(a.delete_records * kept_share), target_file_size=target,
            deletion_vectors=format_version >= 3)

    minor_does_work = bool(a.minor_rewritten_files) or a.mergeable > 0
    # Under sort / zorder every MAJOR rewrites the whole partition: there is no selective one.
    selective = a.major_rewritten_files if not policy.clusters else ()
    return ReadCostEstimate(
        coefficients=policy.read_cost_coefficients,
        now=a.read_shape,
        compacted=compacted_shape(a.data_bytes, a.data_records, deleted, target),
        after_minor=after(a.minor_rewritten_files) if minor_does_work else None,
        after_major=after(selective) if selective else None,
        after_full=after(a.full_files) if a.full_files and len(a.data_files) + len(a.delete_files) > 1 else None,
    )


def read_costs(table_state: TableState, policy: CompactionPolicy) -> dict[PartitionKey, tuple[ReadShape, ReadCostEstimate]]:
    """Every partition's :class:`ReadShape` and :class:`ReadCostEstimate` under ``policy``'s coefficients (what the
    planner decides by; the calibration bench fits the coefficients against the shapes)."""
    _check_format_version(table_state.format_version)
    global_deletes = GlobalDeleteIndex.of(table_state.partitions)
    out: dict[PartitionKey, tuple[ReadShape, ReadCostEstimate]] = {}
    for p in table_state.partitions:
        a = _analyze(p, policy, global_deletes=global_deletes)
        out[p.key] = (a.read_shape, _estimate_read_cost(a, policy, table_state.format_version))
    return out


def _read_cost_metrics(now_ms: float, compacted_ms: float) -> dict[str, float]:
    return {"read_cost_ms": round(now_ms, 3), "read_cost_compacted_ms": round(compacted_ms, 3),
            "read_cost_overhead": round(now_ms / compacted_ms, 3)}


#: The compactions in the order of what they do: (kind, full rewrite) -> rank.
_STRENGTH = {(CompactionKind.NONE, False): 0, (CompactionKind.MINOR, False): 1, (CompactionKind.MAJOR, False): 2,
             (CompactionKind.MAJOR, True): 3}


#: How a reason the read-cost model raised starts its part (reports count the model's decisions by it).
READ_COST_REASON = "read cost "


def _by_read_cost(a: _Analysis, policy: CompactionPolicy, format_version: int, kind: CompactionKind, reason: str,
                  full: bool) -> tuple[CompactionKind, str, bool, dict[str, float]]:
    """The count rules' decision, raised to the least rewrite that brings the partition's estimated scan cost under
    ``read_cost_max_overhead`` x a compacted copy's (or, if none does, to the one that comes closest), when that
    saves at least ``read_cost_min_saving_ms`` per scan over what the count rules chose. Never lowered: the count
    thresholds stay guards."""
    if not a.data_files:
        return kind, reason, full, {}
    limit = policy.read_cost_max_overhead
    coefficients = policy.read_cost_coefficients
    if kind is CompactionKind.NONE:
        # Most partitions need nothing: no compaction can save more than the way down to the compacted copy.
        now_ms = coefficients.cost_ms(a.read_shape)
        compacted_ms = coefficients.compacted_ms(compacted_shape(
            a.data_bytes, a.data_records, min(1.0, a.delete_ratio), policy.target_file_size_bytes))
        if now_ms <= limit * compacted_ms or now_ms - compacted_ms < policy.read_cost_min_saving_ms:
            return kind, reason, full, _read_cost_metrics(now_ms, compacted_ms)
    estimate = _estimate_read_cost(a, policy, format_version)
    after_ms = {option: coefficients.cost_ms(shape) for option, shape in (
        ((CompactionKind.MINOR, False), estimate.after_minor), ((CompactionKind.MAJOR, False), estimate.after_major),
        ((CompactionKind.MAJOR, True), estimate.after_full)) if shape is not None}
    chosen_ms = after_ms.get((kind, full), estimate.now_ms)
    metrics = _read_cost_metrics(estimate.now_ms, estimate.compacted_ms)
    over = estimate.overhead(chosen_ms)
    if over > limit:
        # In the order of bytes rewritten: the least rewrite that fits wins.
        stronger = sorted((o for o in after_ms if _STRENGTH[o] > _STRENGTH[(kind, full)]), key=lambda o: a.cost(*o))
        fits = [o for o in stronger if estimate.overhead(after_ms[o]) <= limit]
        pick = fits[0] if fits else min(stronger, key=after_ms.__getitem__, default=None)
        if pick is not None and chosen_ms - after_ms[pick] >= policy.read_cost_min_saving_ms:
            new_kind, new_full = pick
            what = "full MAJOR" if new_full and not policy.clusters else new_kind.value.upper()
            now = (f"{READ_COST_REASON}{estimate.overhead():.2f}x a compacted copy's (est. {estimate.now_ms:.0f} ms per scan "
                   f"vs {estimate.compacted_ms:.0f} ms)")
            leaves = estimate.overhead(after_ms[pick])
            if kind is CompactionKind.NONE:
                reason = f"{now} > {limit:.2f}; {what} leaves {leaves:.2f}x -> {what}"
            else:
                reason = (f"{reason}; {now}: {kind.value.upper()} would leave {over:.2f}x > {limit:.2f}, {what} "
                          f"{leaves:.2f}x -> {what}")
            kind, full, chosen_ms = new_kind, new_full, after_ms[pick]
    if kind is not CompactionKind.NONE:
        metrics["read_cost_after_ms"] = round(chosen_ms, 3)
    return kind, reason, full, metrics


_RATIO_REASON = "delete ratio "


def _decide_kind(a: _Analysis, policy: CompactionPolicy, mode: CompactionMode,
                 since_minor_s: float | None) -> tuple[CompactionKind, str]:
    """``since_minor_s``: seconds since the partition's last successful MINOR (None: never, or not known)."""
    global_note = a.attributed.describe_global()
    n_global = a.attributed.global_count_elsewhere
    n_own_deletes = len(a.delete_files)
    n_deletes = n_own_deletes + n_global
    n_small = len(a.small_files)
    n_fragments = len(a.fragment_files)
    # MINOR triggers count the equality deletes a MINOR of this partition converts: its own. Global ones written
    # elsewhere are converted by the (whole-table) MINOR of the unpartitioned partition they live in.
    n_eq = a.own_equality_delete_files
    converted_elsewhere = f"; {global_note}, converted by the MINOR of their partition" if global_note else ""
    if mode is CompactionMode.MAJOR:
        deletes = f"{n_deletes} delete files" + (f" ({global_note})" if global_note else "")
        if n_deletes > 0 or n_small >= 2:
            return CompactionKind.MAJOR, f"mode=major: {deletes}, {n_small} small files -> MAJOR"
        return CompactionKind.NONE, f"mode=major: nothing to rewrite ({deletes}, {n_small} small files)"
    if mode is CompactionMode.MINOR:
        if a.mergeable > 0:
            return CompactionKind.MINOR, f"mode=minor: {a.mergeable} mergeable delete files -> MINOR"
        if n_fragments >= 2:
            return CompactionKind.MINOR, f"mode=minor: {n_fragments} fragment files -> MINOR"
        if n_own_deletes:
            return CompactionKind.NONE, (f"mode=minor: all {n_own_deletes} delete files already merged (one per data "
                                         f"file){converted_elsewhere}")
        if global_note:
            return CompactionKind.NONE, f"mode=minor: fewer than 2 fragment files{converted_elsewhere}"
        return CompactionKind.NONE, "mode=minor: no delete files, fewer than 2 fragment files"

    ratio, max_ratio = a.delete_ratio, policy.major_delete_ratio
    if ratio >= max_ratio:
        return CompactionKind.MAJOR, f"{_RATIO_REASON}{ratio:.2f} >= {max_ratio:.2f} -> MAJOR"
    if a.delete_heavy_segments:
        return CompactionKind.MAJOR, (
            f"{len(a.delete_heavy_segments)} segment files with own delete ratio >= "
            f"{policy.major_segment_delete_ratio:.2f} -> MAJOR"
        )
    # Fragments are MINOR's to merge; the small-file trigger counts the small *segments* (unless every MAJOR is
    # a full rewrite, the classic behaviour where any small file counts).
    n_small_counted = n_small if policy.major_full_rewrite else n_small - sum(
        1 for f in a.small_files if f.size_bytes < policy.fragment_threshold_bytes)
    what = "small files" if policy.major_full_rewrite else "small segment files"
    if n_small_counted >= policy.major_small_file_count:
        return CompactionKind.MAJOR, (
            f"{n_small_counted} {what} (< {format_bytes(policy.small_file_threshold_bytes)}) >= "
            f"{policy.major_small_file_count} -> MAJOR"
        )
    if n_fragments + n_eq >= policy.minor_fragment_file_count:
        return CompactionKind.MINOR, (
            f"{n_fragments} fragment files + {n_eq} equality delete files >= {policy.minor_fragment_file_count} -> MINOR"
        )
    if policy.minor_on_equality_deletes and n_eq > 0:
        return CompactionKind.MINOR, f"{n_eq} equality delete files present -> MINOR"
    if a.mergeable >= policy.minor_delete_file_count:
        return CompactionKind.MINOR, f"{a.mergeable} mergeable delete files >= {policy.minor_delete_file_count} -> MINOR"
    limit = policy.minor_max_position_deletes_per_file
    if a.max_positional_per_file > limit:
        return CompactionKind.MINOR, f"a data file has {a.max_positional_per_file} position delete files > {limit} -> MINOR"
    interval = policy.minor_interval_seconds
    if interval > 0 and (n_fragments >= 2 or a.mergeable > 0) and (since_minor_s is None or since_minor_s >= interval):
        when = "no MINOR recorded" if since_minor_s is None else f"last MINOR {since_minor_s:.0f} s ago"
        return CompactionKind.MINOR, f"{when} >= interval {interval} s, {n_fragments} fragment files -> MINOR"
    eq_part = (
        f"{n_eq} equality delete files (trigger off)" if n_eq and not policy.minor_on_equality_deletes else "no equality deletes"
    )
    return CompactionKind.NONE, (
        f"no rule matched: delete ratio {ratio:.2f} < {max_ratio:.2f}; no delete-heavy segment; {n_small_counted} "
        f"{what} < {policy.major_small_file_count}; {n_fragments} fragment + {n_eq} equality delete files < "
        f"{policy.minor_fragment_file_count}; {eq_part}; {a.mergeable} mergeable delete files < "
        f"{policy.minor_delete_file_count}; at most {a.max_positional_per_file} position delete files per data file"
        f"{converted_elsewhere}"
    )


def evaluate_partition(
    state: PartitionState,
    policy: CompactionPolicy,
    mode: CompactionMode | str,
    format_version: int,
    global_deletes: GlobalDeleteIndex = NO_GLOBAL_DELETES,
) -> PartitionDecision:
    """Decide NONE / MINOR / MAJOR for one partition (rules in the module docstring). No I/O.

    ``global_deletes``: the table's global equality deletes (``GlobalDeleteIndex.of(table_state.partitions)``),
    which also apply to this partition's older data files; without it only the partition's own files count."""
    _check_format_version(format_version)
    mode = _coerce_mode(mode)
    a = _analyze(state, policy, global_deletes=global_deletes)
    if not policy.enabled:
        return PartitionDecision(state.key, CompactionKind.NONE, DISABLED_BY_POLICY, _metrics(a, CompactionKind.NONE))
    kind, reason, full, read_cost = _decide(a, policy, mode, format_version)
    return PartitionDecision(state.key, kind, reason, _metrics(a, kind, full, read_cost))


# --------------------------------------------------------------------------------------------------------------
# Task planning (compaction.core.grouping does the packing)


def _candidate(a: _Analysis, decision: PartitionDecision) -> Candidate:
    full = bool(decision.metrics.get("full_rewrite", 0))
    return Candidate(
        partition=decision.partition,
        kind=decision.kind,
        full=full,
        cost=a.cost(decision.kind, full),
        delete_ratio=a.delete_ratio,
        order_key=a.order_key,
        data_files=a.data_files_for(decision.kind, full),
        delete_paths=tuple(sorted({d.path for d in a.delete_files})),
        delete_bytes=a.delete_bytes,
        elsewhere_bytes=a.elsewhere_bytes,
    )


def plan_tasks(
    partitions: Iterable[tuple[PartitionState, PartitionDecision]],
    policy: CompactionPolicy,
    global_deletes: GlobalDeleteIndex = NO_GLOBAL_DELETES,
) -> TaskPlan:
    """Turn decisions into job groups: run caps, split of heavy MAJOR partitions, bin-packing
    (:mod:`compaction.core.grouping`).

    ``partitions`` pairs each partition's state with its decision; NONE decisions are ignored. ``global_deletes``:
    as for :func:`evaluate_partition` (the same index the decisions were made with).
    """
    cands = []
    seen: set[PartitionKey] = set()
    for state, decision in partitions:
        if state.key != decision.partition:
            raise PlanningError(f"decision for {decision.partition.label()} paired with state of {state.key.label()}")
        if state.key in seen:
            raise PlanningError(f"partition {state.key.label()} appears twice")
        seen.add(state.key)
        if decision.kind is not CompactionKind.NONE:
            cands.append(_candidate(_analyze(state, policy, global_deletes=global_deletes), decision))
    return plan_candidates(cands, policy)

# --------------------------------------------------------------------------------------------------------------


def cross_partition_position_deletes(partitions: Sequence[PartitionState]) -> dict[PartitionKey, str]:
    """The partitions to hold, each with its reason: a position delete / DV whose named data file
    (``referenced_data_file``) is live in another partition (or spec), and that file's partition.

    The spec applies a position delete only to data files of its own spec and partition ("Scan Planning"), Iceberg
    Java's ``DeleteFileIndex`` finds a named file by path alone. No writer produces such a delete, but if one did,
    the delete is dangling to the spec and live to Java readers: a MINOR would drop it as dangling (resurrecting the
    rows for Java readers) and a MAJOR of the named file's partition would apply it (deleting them for spec
    readers). Either changes what some reader sees, so both partitions are left alone."""
    return _held_for(partitions, _named_elsewhere(partitions))


def _names_elsewhere(p: PartitionState) -> list[DeleteFileInfo]:
    """The position deletes / DVs of ``p`` naming a data file that is not one of ``p``'s own."""
    named = [d for d in p.delete_files if d.content in _POSITIONAL and d.referenced_data_file is not None]
    if not named:
        return named
    own = {f.path for f in p.data_files}
    return [d for d in named if d.referenced_data_file not in own]


def _named_elsewhere(partitions: Sequence[PartitionState]) -> dict[str, tuple[DeleteFileInfo, PartitionKey]]:
    """Data file path -> (the first position delete / DV naming it from another partition, that partition)."""
    named_elsewhere: dict[str, tuple[DeleteFileInfo, PartitionKey]] = {}
    for p in partitions:
        if p.delete_files:
            for d in _names_elsewhere(p):
                assert d.referenced_data_file is not None
                named_elsewhere.setdefault(d.referenced_data_file, (d, p.key))
    return named_elsewhere


def _held_for(partitions: Sequence[PartitionState],
              named_elsewhere: Mapping[str, tuple[DeleteFileInfo, PartitionKey]]) -> dict[PartitionKey, str]:
    if not named_elsewhere:
        return {}
    held: dict[PartitionKey, str] = {}
    for p in partitions:
        for f in p.data_files:
            found = named_elsewhere.get(f.path)
            if found is None or found[1] == p.key:
                continue
            d, delete_key = found
            reason = CROSS_PARTITION_POSITION_DELETE.format(delete=d.path, delete_partition=delete_key.label(),
                                                             data=f.path, data_partition=p.key.label())
            held.setdefault(delete_key, reason)
            held.setdefault(p.key, reason)
    return held


def _validate_state(table: TableState, order_keys: Sequence[tuple[object, ...]] | None = None) -> None:
    """Raise PlanningError for a partition listed twice or a file listed twice. ``order_keys``: the
    partition_order_key of each partition, if known (a fast check that nothing is duplicated)."""
    parts = table.partitions
    if (
        order_keys is not None
        and len(set(order_keys)) == len(parts)  # distinct order keys: distinct partition keys
        and len({f.path for p in parts for f in p.data_files}) == sum(len(p.data_files) for p in parts)
        and len({(d.path, d.content_offset) for p in parts for d in p.delete_files})
        == sum(len(p.delete_files) for p in parts)
    ):
        return
    keys: set[PartitionKey] = set()
    data_paths: dict[str, PartitionKey] = {}
    delete_refs: dict[tuple[str, int | None], PartitionKey] = {}
    for p in table.partitions:
        if p.key in keys:
            raise PlanningError(f"inconsistent table state: partition {p.key.label()} appears twice")
        keys.add(p.key)
        for f in p.data_files:
            if f.path in data_paths:
                raise PlanningError(f"inconsistent table state: data file {f.path} listed twice")
            data_paths[f.path] = p.key
        for d in p.delete_files:
            ref = (d.path, d.content_offset)
            if ref in delete_refs:
                raise PlanningError(f"inconsistent table state: delete file {d.path} listed twice")
            delete_refs[ref] = p.key


@dataclass(slots=True)
class _CachedPartition:
    state: PartitionState
    analysis: _Analysis
    decision: PartitionDecision | None  # None when it depended on more than the state (a hold, the MINOR interval)
    candidate: Candidate | None
    digest: str | None = None  # decision_digest(decision), once written


@dataclass(slots=True)
class _LastPlan:
    """The last plan's per-partition results in plan (sorted) order, for a re-plan of a state with the same
    partition keys in the same places - what most commits give: they change a few partitions and add or drop none.
    Kept only for a plan of the whole table with no position delete naming another partition's file."""

    parts: tuple[PartitionState, ...]  # the state's partitions, as given
    order: list[int]  # plan position -> index in parts
    position: list[int]  # index in parts -> plan position
    entries: list[_CachedPartition]
    decisions: list[PartitionDecision]
    digests: list[str]
    candidates: list[Candidate | None]
    volatile: set[int]  # plan positions decided by more than their state (the MINOR interval's clock)
    positions_by_key: dict[PartitionKey, int] | None = None  # built when first needed


class PlanCache:
    """What :func:`plan` worked out per partition, for the next plan of the same table: a partition whose
    :class:`PartitionState` is the very object planned last time (an incremental table state keeps the objects of
    partitions no commit touched, :class:`compaction.metadata.inspect.TableStateCache`) keeps its analysis, decision,
    candidate and decision digest, and is not checked for duplicate files again (only partitions new to the state
    are checked against the files of the others). When the state has the same partition keys in the same places as
    last time, only the partitions that are not the same objects are visited at all, so a re-plan after a commit
    costs what the commit changed (plus a pass over the partitions comparing object identities, and hashing one
    digest per partition for the plan id).

    Reused only under the same policy, mode and format version, and when the table has no global equality deletes
    (they make every partition's figures depend on every other partition's files). Decisions that depend on more
    than the state (held partitions, the MINOR interval's clock) are decided again. Memory only; not thread-safe;
    one table per cache."""

    def __init__(self) -> None:
        self._context: tuple[object, ...] | None = None
        self._entries: dict[int, _CachedPartition] | None = {}  # None: derive from _last
        self._last: _LastPlan | None = None
        # The last validated state's partitions by id, and who holds each partition key, data path and delete ref.
        self._validated: dict[int, PartitionState] = {}
        self._owners: dict[object, int] = {}
        self.reused = 0  # partitions whose analysis the last plan reused

    def _begin(self, context: tuple[object, ...], usable: bool) -> dict[int, _CachedPartition]:
        previous: dict[int, _CachedPartition] = {}
        if usable and context == self._context:
            if self._entries is not None:
                previous = self._entries
            elif self._last is not None:
                previous = {id(e.state): e for e in self._last.entries}
        self._context = context if usable else None
        self._entries = {}
        self._last = None
        self.reused = 0
        return previous

    def _validate(self, table: TableState) -> None:
        """:func:`_validate_state`, checking only the partitions that are not the previous state's objects."""
        current = {id(p): p for p in table.partitions}
        if len(current) != len(table.partitions) or not self._validated:
            self._revalidate(table)
            return
        removed = [p for pid, p in self._validated.items() if pid not in current]
        added = [p for pid, p in current.items() if pid not in self._validated]
        self._validated = current
        self._exchange(removed, added, table)

    def _exchange(self, removed: Sequence[PartitionState], added: Sequence[PartitionState], table: TableState) -> None:
        """Update the ownership index for ``removed`` partitions replaced by ``added`` ones (``_validated`` is
        already the new state's); a partition or file now listed twice raises via :func:`_validate_state`."""
        owners = self._owners
        for p in removed:
            pid = id(p)
            for item in _identities(p):
                if owners.get(item) == pid:
                    del owners[item]
        for p in added:
            pid = id(p)
            items = list(_identities(p))
            if len(set(items)) != len(items) or any(owners.setdefault(item, pid) != pid for item in items):
                self._revalidate(table)  # raises: a partition or file listed twice
                return  # pragma: no cover - _validate_state found nothing

    def _revalidate(self, table: TableState) -> None:
        """Index every partition's identities (:func:`_identities`); one listed twice raises via
        :func:`_validate_state`."""
        owners: dict[object, int] = {}
        listed = 0
        for p in table.partitions:
            pid = id(p)
            owners[("key", p.key)] = pid
            owners.update(dict.fromkeys([f.path for f in p.data_files], pid))
            if p.delete_files:
                owners.update(dict.fromkeys([(d.path, d.content_offset) for d in p.delete_files], pid))
            listed += 1 + len(p.data_files) + len(p.delete_files)
        if len(owners) != listed:
            self._validated, self._owners = {}, {}
            _validate_state(table)  # raises: a partition or file listed twice
        self._validated = {id(p): p for p in table.partitions}
        self._owners = owners


def _identities(p: PartitionState) -> Iterable[object]:
    """What may appear once only in a table state: the partition key, each data file path, each delete file (path,
    DV offset)."""
    yield ("key", p.key)
    for f in p.data_files:
        yield f.path
    for d in p.delete_files:
        yield (d.path, d.content_offset)


def plan(
    table_state: TableState,
    policy: CompactionPolicy | None,
    mode: CompactionMode | str,
    now: _dt.datetime,
    partition_filter: Callable[[PartitionKey], bool] | None = None,
    *,
    plan_id: str | None = None,
    last_minor_at: Mapping[PartitionKey, _dt.datetime] | None = None,
    cache: PlanCache | None = None,
) -> CompactionPlan:
    """Plan a compaction run of one table.

    ``policy`` should be ``CompactionPolicy.resolve(table_state.properties, run_params)`` and is authoritative
    (``None`` resolves it from the table properties alone). ``now`` is recorded as ``created_at``. Partitions
    rejected by ``partition_filter`` get no decision. ``plan_id`` defaults to the content hash. ``last_minor_at``:
    when each partition's last successful MINOR finished (from the ledger), for ``compaction.minor.interval``.
    ``cache``: reuse what the previous plan of the same table worked out for unchanged partitions (:class:`PlanCache`;
    the plan is the same as without it).

    Raises :class:`UnsupportedTableError` for format v1 (or unknown versions), :class:`ConfigError` for a bad
    mode, :class:`PlanningError` for an inconsistent state (duplicate partitions or files).
    """
    _check_format_version(table_state.format_version)
    mode = _coerce_mode(mode)
    if policy is None:
        policy = CompactionPolicy.resolve(table_state.properties)
    # Planning allocates a few objects per partition and file, all kept alive by the result, while the (large)
    # table state is alive too: cyclic GC passes would only re-scan them (~40% of the time at 100k files).
    # Pausing the collector is invisible to callers; it is restored even on errors.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _plan(table_state, policy, mode, now, partition_filter, plan_id, last_minor_at or {}, cache)
    finally:
        if gc_was_enabled:
            gc.enable()


def _decide_partition(p: PartitionState, a: _Analysis, policy: CompactionPolicy, mode: CompactionMode,
                      since: float | None, held_reason: str | None,
                      format_version: int) -> tuple[PartitionDecision, Candidate | None]:
    if held_reason is not None:
        return PartitionDecision(p.key, CompactionKind.NONE, held_reason, _metrics(a, CompactionKind.NONE)), None
    kind, reason, full, read_cost = _decide(a, policy, mode, format_version, since)
    d = PartitionDecision(p.key, kind, reason, _metrics(a, kind, full, read_cost))
    return d, (_candidate(a, d) if kind is not CompactionKind.NONE else None)


def _seconds_since(key: PartitionKey, by_clock: Mapping[PartitionKey, _dt.datetime], now: _dt.datetime) -> float | None:
    at = by_clock.get(key) if by_clock else None
    return None if at is None else (now - at).total_seconds()


def _has_global_deletes(p: PartitionState) -> bool:
    """Whether ``p`` holds equality deletes that apply table-wide (:class:`GlobalDeleteIndex`)."""
    return bool(p.delete_files) and p.key.is_unpartitioned and any(
        d.content is DeleteContent.EQUALITY for d in p.delete_files)


def _replan_in_place(table_state: TableState, policy: CompactionPolicy, mode: CompactionMode, now: _dt.datetime,
                     by_clock: Mapping[PartitionKey, _dt.datetime], cache: PlanCache) -> _LastPlan | None:
    """The plan's per-partition results when the state has the same partition keys in the same places as the last
    plan's (None otherwise): the partitions that are the last state's objects keep their results; the others, and
    those decided by the clock, are decided again."""
    last = cache._last
    parts = table_state.partitions
    if last is None or len(parts) != len(last.parts) or cache._context != (policy, mode, table_state.format_version):
        return None
    before = last.parts
    changed = [i for i, (p, q) in enumerate(zip(parts, before)) if p is not q]
    for i in changed:
        p = parts[i]
        # Another key here changes the order; global deletes or a delete naming another partition's file make
        # partitions depend on each other: all are planned from scratch.
        if p.key != before[i].key or _has_global_deletes(p) or (p.delete_files and _names_elsewhere(p)):
            return None
    validated = cache._validated
    for i in changed:
        validated.pop(id(before[i]), None)
    for i in changed:
        validated[id(parts[i])] = parts[i]
    try:
        cache._exchange([before[i] for i in changed], [parts[i] for i in changed], table_state)
    except PlanningError:
        cache._last, cache._entries = None, {}  # the next plan starts from scratch
        raise

    position = last.position
    redo = {position[i] for i in changed}
    redo.update(last.volatile)
    if by_clock:
        if last.positions_by_key is None:
            last.positions_by_key = {d.partition: pos for pos, d in enumerate(last.decisions)}
        redo.update(last.positions_by_key[k] for k in by_clock if k in last.positions_by_key)
    entries, decisions = list(last.entries), list(last.decisions)
    digests, candidates = list(last.digests), list(last.candidates)
    volatile: set[int] = set()
    for pos in sorted(redo):
        p = parts[last.order[pos]]
        entry = entries[pos]
        since = _seconds_since(p.key, by_clock, now)
        if entry.state is p and entry.decision is not None and since is None:
            d, cand, digest = entry.decision, entry.candidate, entry.digest
        else:
            a = entry.analysis if entry.state is p else _analyze(p, policy, entry.analysis.order_key)
            d, cand = _decide_partition(p, a, policy, mode, since, None, table_state.format_version)
            digest = None
            if since is None:
                entry = entries[pos] = _CachedPartition(p, a, d, cand)
            else:
                volatile.add(pos)
                if entry.state is not p:
                    entry = entries[pos] = _CachedPartition(p, a, None, None)
        if digest is None:
            digest = decision_digest(d)
            if entry.decision is d:
                entry.digest = digest
        decisions[pos], candidates[pos], digests[pos] = d, cand, digest
    cache.reused = len(parts) - len(changed)
    return _LastPlan(parts, last.order, position, entries, decisions, digests, candidates, volatile,
                     last.positions_by_key)


def _plan(
    table_state: TableState,
    policy: CompactionPolicy,
    mode: CompactionMode,
    now: _dt.datetime,
    partition_filter: Callable[[PartitionKey], bool] | None,
    plan_id: str | None,
    last_minor_at: Mapping[PartitionKey, _dt.datetime],
    cache: PlanCache | None = None,
) -> CompactionPlan:
    by_clock = last_minor_at if policy.minor_interval_seconds > 0 else {}
    last: _LastPlan | None = None
    if cache is not None and partition_filter is None and policy.enabled:
        last = _replan_in_place(table_state, policy, mode, now, by_clock, cache)
    if last is not None:
        assert cache is not None
        cache._last = last
        decisions = last.decisions
        digests: list[str | None] = list(last.digests)
        cands = [c for c in last.candidates if c is not None]
    else:
        decisions, digests, cands = _plan_partitions(table_state, policy, mode, now, partition_filter, by_clock, cache)
    tasks = plan_candidates(cands, policy)

    is_filter = isinstance(partition_filter, PartitionFilter)
    result = CompactionPlan(
        plan_id=plan_id or "",
        created_at=now,
        table=table_state.identity,
        base_snapshot_id=table_state.snapshot_id,
        base_sequence_number=table_state.sequence_number,
        format_version=table_state.format_version,
        mode=mode,
        policy=policy,
        decisions=tuple(decisions),
        groups=tasks.groups,
        deferred=tasks.deferred,
        partition_filter=partition_filter if isinstance(partition_filter, PartitionFilter) else None,
        custom_partition_filter=partition_filter is not None and not is_filter,
    )
    if plan_id:
        return result
    return replace(result, plan_id=result.content_id(decision_digests=digests))


def _plan_partitions(
    table_state: TableState,
    policy: CompactionPolicy,
    mode: CompactionMode,
    now: _dt.datetime,
    partition_filter: Callable[[PartitionKey], bool] | None,
    by_clock: Mapping[PartitionKey, _dt.datetime],
    cache: PlanCache | None,
) -> tuple[list[PartitionDecision], list[str | None], list[Candidate]]:
    """Every partition's decision (in plan order), its digest where known, and the candidates for task planning;
    with a cache, what it kept is reused by object identity and what this plan worked out is kept."""
    # Built from every partition, before the filter: global equality deletes apply to filtered-out partitions too.
    global_deletes = GlobalDeleteIndex.of(table_state.partitions)
    reusable: dict[int, _CachedPartition] = {}
    if cache is not None:
        reusable = cache._begin((policy, mode, table_state.format_version),
                                usable=policy.enabled and not global_deletes)
    keyed: list[tuple[tuple[object, ...], int, PartitionState, _CachedPartition | None]] = []
    for i, p in enumerate(table_state.partitions):
        hit = reusable.get(id(p)) if reusable else None
        if hit is not None and hit.state is p:
            keyed.append((hit.analysis.order_key, i, p, hit))
        else:
            keyed.append((partition_order_key(p.key), i, p, None))
    if cache is not None:
        cache._validate(table_state)
    else:
        _validate_state(table_state, [k for k, _, _, _ in keyed])
    named_elsewhere = _named_elsewhere(table_state.partitions)
    held = _held_for(table_state.partitions, named_elsewhere)

    keyed.sort(key=operator.itemgetter(0))  # stable: as sorted(partitions, key=partition_order_key)
    if partition_filter is not None:
        keyed = [item for item in keyed if partition_filter(item[2].key)]

    decisions: list[PartitionDecision] = []
    digests: list[str | None] = []
    cands: list[Candidate] = []
    if not policy.enabled:
        table_says_off = str(table_state.properties.get(ENABLED, "")).strip().lower() == "false"
        reason = DISABLED_BY_TABLE_PROPERTY if table_says_off else DISABLED_BY_RUN_PARAMETER
        for order_key, _, p, _ in keyed:
            a = _analyze(p, policy, order_key, global_deletes)
            decisions.append(PartitionDecision(p.key, CompactionKind.NONE, reason, _metrics(a, CompactionKind.NONE)))
            digests.append(None)
        return decisions, digests, cands

    # With a cache, what this plan works out is kept (by plan position: the in-place re-plan's record, when the
    # whole table is planned and no partition depends on another's files).
    keep = cache is not None and cache._context is not None
    record = keep and partition_filter is None and not named_elsewhere
    entries: list[_CachedPartition] = []
    candidates_at: list[Candidate | None] = []
    volatile: set[int] = set()
    for pos, (order_key, _, p, hit) in enumerate(keyed):
        since = _seconds_since(p.key, by_clock, now)
        held_reason = held.get(p.key) if held else None
        if hit is not None and hit.decision is not None and since is None and held_reason is None:
            d, cand, digest, entry = hit.decision, hit.candidate, hit.digest, hit
        else:
            a = hit.analysis if hit is not None else _analyze(p, policy, order_key, global_deletes)
            d, cand = _decide_partition(p, a, policy, mode, since, held_reason, table_state.format_version)
            digest = None
            state_only = since is None and held_reason is None
            if not state_only:
                volatile.add(pos)
            entry = _CachedPartition(p, a, d if state_only else None, cand if state_only else None)
        if keep:
            if digest is None:
                digest = decision_digest(d)
                if entry.decision is d:
                    entry.digest = digest
            entries.append(entry)
            candidates_at.append(cand)
        decisions.append(d)
        digests.append(digest)
        if cand is not None:
            cands.append(cand)
    if cache is not None:
        cache.reused = sum(1 for item in keyed if item[3] is not None)
        if keep:
            if record:
                order = [i for _, i, _, _ in keyed]
                position = [0] * len(order)
                for pos, i in enumerate(order):
                    position[i] = pos
                cache._entries = None
                cache._last = _LastPlan(table_state.partitions, order, position, entries, decisions,
                                        [h for h in digests if h is not None], candidates_at, volatile)
            else:
                cache._entries = {id(e.state): e for e in entries}
    return decisions, digests, cands
