"""Which delete file applies to which data file, and what a MINOR replaces (pure; no I/O).

One implementation of the Iceberg rule, used by the planner (:mod:`compaction.core.planner`, on a partition's
model values) and by MINOR (:func:`compaction.spark.minor.decide_work`, on Iceberg's Java files converted to the
same model), so that both decide the same on the same files.

Iceberg spec, "Scan Planning" (https://iceberg.apache.org/spec/#scan-planning), from metadata alone (no column
statistics: a superset of what Iceberg's planning applies after its statistics pruning):

* an **equality delete** with data sequence number S applies to a data file with data sequence number < S
  (strictly) of its own spec and partition, or of every partition of every spec when the delete's spec is
  unpartitioned (a *global* delete, :mod:`compaction.core.attribution`);
* a **position delete / DV** with data sequence number S applies to data files of its own spec and partition with
  data sequence number <= S: only the one it names when metadata tells (``referenced_data_file``, always set on a
  DV, or equal ``file_path`` bounds: :attr:`DeleteFileInfo.referenced_data_file`), otherwise every one of them.
  The partition condition holds for a delete naming its file too, as the spec says (Iceberg Java's
  ``DeleteFileIndex`` finds a named file by path alone, which differs only for a delete written in another
  partition than the file it names: no writer does that, and the planner holds both partitions if one did,
  :func:`compaction.core.planner.cross_partition_position_deletes`);
* and (ours, not the spec's) a position delete never applies to a data file committed after it (file sequence
  number above the delete's): a delete names only files that existed when it was written and paths are never
  reused, so a file that a rewrite added later with its starting, lower, data sequence number is not a target.

Both implementations count a position-delete file and a DV that name the same data file as two deletes applying
to it. The v3 spec says the position delete is then *not* applied (the DV must contain its positions); counting
it makes the planner call the pair mergeable and MINOR fold both into one new DV (the same positions), which is
safe and only does work the spec would have let us skip.

A position delete / DV is **settled** when it applies to some live data file and is the only position delete /
DV applying to each of them: the form a MINOR writes (one file per data file; or, with
``write.delete.granularity=partition``, one per partition). The planner never triggers MINOR for settled files;
MINOR leaves them in place unless a data file they apply to gets a new file anyway (converted equality-delete
rows), see :func:`decide_minor`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Collection, Iterable, Mapping, Sequence

from compaction.core.errors import UnsupportedTableError
from compaction.core.model import DataFileInfo, DeleteContent, DeleteFileInfo, PartitionKey, PartitionScalar

__all__ = [
    "DeleteRef",
    "MinorDecision",
    "MinorScope",
    "PlacedData",
    "PlacedDelete",
    "PositionalApplicability",
    "ScopeApplicability",
    "decide_minor",
    "delete_ref",
    "equality_delete_applies",
    "position_delete_applies",
    "positional_applicability",
    "scope_applicability",
]

#: Identity of a delete file: several DVs share one Puffin file, so the blob offset is part of it (-1: none).
DeleteRef = tuple[str, int]
PartitionValues = tuple[PartitionScalar, ...]


def delete_ref(d: DeleteFileInfo) -> DeleteRef:
    return d.path, d.content_offset if d.content_offset is not None else -1


def position_delete_applies(d: DeleteFileInfo, f: DataFileInfo) -> bool:
    """Whether position delete / DV ``d`` applies to data file ``f`` of its spec and partition (module docstring:
    data sequence <= the delete's, the named file if any, and never a file committed after the delete)."""
    committed = d.file_sequence_number if d.file_sequence_number is not None else d.data_sequence_number
    return (
        f.data_sequence_number <= d.data_sequence_number
        and (f.file_sequence_number is None or f.file_sequence_number <= committed)
        and (d.referenced_data_file is None or d.referenced_data_file == f.path)
    )


def equality_delete_applies(d: DeleteFileInfo, f: DataFileInfo) -> bool:
    """Whether equality delete ``d`` applies to data file ``f`` in its scope (its spec and partition, or every
    partition when global): the data file's data sequence number is strictly lower (spec, "Scan Planning")."""
    return f.data_sequence_number < d.data_sequence_number


@dataclass
class PositionalApplicability:
    """Which position deletes / DVs apply to which data files. Deletes are numbered in the order given to
    :func:`positional_applicability`."""

    #: Per delete: the paths of the data files it applies to.
    targets: list[list[str]]
    #: Data path -> the deletes applying to it (only paths with at least one).
    applying: dict[str, list[int]] = field(default_factory=dict)

    def count(self, path: str) -> int:
        return len(self.applying.get(path, ()))

    def is_dangling(self, i: int) -> bool:
        """Applies to no live data file: it can only be removed."""
        return not self.targets[i]

    def is_settled(self, i: int, receiving: Collection[str] = ()) -> bool:
        """The only position delete / DV of every data file it applies to (module docstring), none of which is in
        ``receiving`` (data files that get a new position delete / DV anyway)."""
        targets = self.targets[i]
        return bool(targets) and all(len(self.applying[t]) == 1 and t not in receiving for t in targets)


def positional_applicability(deletes: Sequence[DeleteFileInfo],
                             partition_data: Callable[[int], Mapping[str, DataFileInfo]]) -> PositionalApplicability:
    """Apply the position-delete rule (module docstring) to ``deletes`` (position deletes / DVs).
    ``partition_data(i)``: the live data files (by path) of delete ``i``'s own spec and partition."""
    out = PositionalApplicability([[] for _ in deletes])
    for i, d in enumerate(deletes):
        data = partition_data(i)
        named = d.referenced_data_file
        if named is not None:
            f = data.get(named)
            candidates: Iterable[DataFileInfo] = (f,) if f is not None else ()
        else:
            candidates = data.values()
        for f in candidates:
            if position_delete_applies(d, f):
                out.targets[i].append(f.path)
                out.applying.setdefault(f.path, []).append(i)
    return out


# MINOR -------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlacedData:
    """A data file with the spec and partition it was written in. ``partition`` is None when it was not decoded:
    :func:`decide_minor` needs it only for files of a spec that has a position delete / DV in the scope."""

    file: DataFileInfo
    spec_id: int
    partition: PartitionValues | None


@dataclass(frozen=True)
class PlacedDelete:
    file: DeleteFileInfo
    spec_id: int
    partition: PartitionValues | None

    @property
    def ref(self) -> DeleteRef:
        return delete_ref(self.file)


@dataclass(frozen=True)
class MinorScope:
    """What a MINOR of ``key`` sees: the files of a scan filtered on ``key``'s partition. Iceberg projects that filter
    onto every spec, so the scan also holds files of other specs' partitions that may overlap it (for an
    unpartitioned ``key``, a scan of the whole table: ``whole_table``). Files of ``key``'s own spec are exactly the
    partition's: their ``partition`` is ``key``'s values. ``partition_scoped_output``: new v2 position deletes are
    written one file per partition (``write.delete.granularity=partition``)."""

    key: PartitionKey
    data: tuple[PlacedData, ...]
    deletes: tuple[PlacedDelete, ...]
    whole_table: bool = False
    partition_scoped_output: bool = False


@dataclass(frozen=True)
class MinorDecision:
    """What one MINOR replaces (refs in the order decided)."""

    #: Equality deletes of ``key``'s spec and partition, all converted (a dangling one simply goes).
    equality: tuple[DeleteRef, ...]
    #: Data path -> the converted equality deletes applying to it.
    eq_targets: Mapping[str, frozenset[DeleteRef]]
    #: Position deletes / DVs folded into new files (any spec: see :func:`decide_minor`).
    absorbed: tuple[DeleteRef, ...]
    #: Data files that get one new position delete file (v2) / DV (v3) holding all their deleted positions, sorted.
    data_files: tuple[str, ...]
    #: Position deletes / DVs of ``key``'s spec and partition that apply to no live data file.
    dangling: tuple[DeleteRef, ...]


@dataclass(frozen=True)
class ScopeApplicability:
    """What applies to which data file of a MINOR scope, by the rules of the module docstring."""

    #: Data path -> the equality deletes of ``key``'s spec and partition applying to it (the ones MINOR converts).
    equality: Mapping[str, frozenset[DeleteRef]]
    #: Data path -> the position deletes / DVs of the scope applying to it (any spec).
    positional: Mapping[str, frozenset[DeleteRef]]


def scope_applicability(scope: MinorScope) -> ScopeApplicability:
    """Which deletes :func:`decide_minor` finds applying to which data files of ``scope``."""
    _, _, eq_targets, positional, app = _apply(scope)
    refs = [scope.deletes[i].ref for i in positional]
    return ScopeApplicability(
        equality={p: frozenset(rs) for p, rs in eq_targets.items()},
        positional={p: frozenset(refs[j] for j in js) for p, js in app.applying.items()},
    )


def _apply(scope: MinorScope) -> tuple[list[DeleteRef], list[int], dict[str, set[DeleteRef]], list[int],
                                       PositionalApplicability]:
    """(refs of the scope's deletes, the converted equality deletes, data path -> the converted equality deletes
    applying to it, the position deletes / DVs, their applicability); deletes by index in ``scope.deletes``."""
    key = scope.key
    if key.is_unpartitioned and not scope.whole_table:
        raise UnsupportedTableError("global equality deletes are only converted by a scan of the whole table")
    key_values = tuple(f.value for f in key.fields)
    placed: Iterable[tuple[int, PartitionValues | None, str]] = (
        *((p.spec_id, p.partition, p.file.path) for p in scope.data),
        *((p.spec_id, p.partition, p.file.path) for p in scope.deletes),
    )
    for spec_id, values, path in placed:
        if spec_id == key.spec_id and values != key_values:
            raise ValueError(f"a file of spec {key.spec_id} outside {key.label()} in its MINOR scope: {path}")
    deletes = scope.deletes
    refs = [d.ref for d in deletes]
    equality = [i for i, d in enumerate(deletes)
                if d.spec_id == key.spec_id and d.file.content is DeleteContent.EQUALITY]
    # Global (unpartitioned spec): every data file of the table; otherwise the partition's own.
    eq_scope = [f.file for f in scope.data if key.is_unpartitioned or f.spec_id == key.spec_id]
    eq_targets: dict[str, set[DeleteRef]] = {}
    for i in equality:
        for f in eq_scope:
            if equality_delete_applies(deletes[i].file, f):
                eq_targets.setdefault(f.path, set()).add(refs[i])

    # Every position delete in the scope, not only the partition's own: a global conversion gives new files to data
    # files of other specs' partitions, and those must fold in their own position deletes (one per data file).
    positional = [i for i, d in enumerate(deletes) if d.file.content is not DeleteContent.EQUALITY]
    by_partition: dict[tuple[int, PartitionValues | None], dict[str, DataFileInfo]] = {}
    specs_with_data: set[int] = set()
    for placed_data in scope.data:
        by_partition.setdefault((placed_data.spec_id, placed_data.partition), {})[placed_data.file.path] = \
            placed_data.file
        specs_with_data.add(placed_data.spec_id)

    def partition_data(j: int) -> Mapping[str, DataFileInfo]:
        d = deletes[positional[j]]
        if d.spec_id not in specs_with_data:
            return {}  # no data file of its spec in the scope: whatever its partition, nothing to apply to
        if d.partition is None or (d.spec_id, None) in by_partition:
            raise ValueError(f"partition of spec {d.spec_id} not decoded for position delete {d.file.path}")
        return by_partition.get((d.spec_id, d.partition), {})

    app = positional_applicability([deletes[i].file for i in positional], partition_data)
    return refs, equality, eq_targets, positional, app


def decide_minor(scope: MinorScope) -> MinorDecision:
    """Which delete files a MINOR of ``scope.key`` converts or merges, and which data files get a new file:

    * every equality delete of ``key``'s spec and partition is converted (for an unpartitioned ``key``: the global
      equality deletes, over the whole table, which requires ``whole_table``);
    * a position delete / DV of the partition is absorbed unless it is settled (module docstring) with no data file
      it applies to receiving converted rows; a dangling one is removed; with partition-scoped output, any work in
      the partition absorbs all its live position deletes (they all go into the one new file of the partition);
    * every data file some converted equality delete applies to, or some absorbed position delete applies to, gets
      one new file holding all its deleted positions, so *every* position delete applying to it is absorbed too
      (also other specs' ones, met by a global conversion), which may reach further data files, and so on.
    """
    key = scope.key
    refs, equality, eq_targets, positional, app = _apply(scope)
    deletes = scope.deletes
    ref_of = [refs[i] for i in positional]
    own = [j for j, i in enumerate(positional) if deletes[i].spec_id == key.spec_id]
    dangling = [j for j in own if app.is_dangling(j)]
    absorbed: dict[int, None] = {j: None for j in own if not app.is_dangling(j) and not app.is_settled(j, eq_targets)}
    if scope.partition_scoped_output and not key.is_unpartitioned and (equality or absorbed or dangling):
        # One position-delete file for the whole partition: every position delete of the partition goes into it.
        for j in own:
            if not app.is_dangling(j):
                absorbed.setdefault(j, None)
    rewritten = set(eq_targets) | {p for p, js in app.applying.items() if any(j in absorbed for j in js)}
    # A data file that gets a new file must have *all* its position deletes folded into it (one per data file);
    # folding may pull in a partition-scoped file that also names other data files: they need new files as well.
    pending = sorted(rewritten)
    while pending:
        newly: set[str] = set()
        for path in pending:
            for j in app.applying.get(path, ()):
                if j not in absorbed:
                    absorbed[j] = None
                    newly.update(p for p in app.targets[j] if p not in rewritten)
        rewritten |= newly
        pending = sorted(newly)
    return MinorDecision(
        equality=tuple(refs[i] for i in equality),
        eq_targets={p: frozenset(rs) for p, rs in eq_targets.items()},
        absorbed=tuple(ref_of[j] for j in absorbed),
        data_files=tuple(sorted(rewritten)),
        dangling=tuple(ref_of[j] for j in dangling),
    )
