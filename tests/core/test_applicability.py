"""The delete-applicability rule shared by the planner and MINOR (compaction.core.applicability).

Random tables of several specs (unpartitioned, identity, two fields, a void field; overlapping partitions), data
files with random data and file sequence numbers, equality deletes (partition-scoped, and global ones under the
unpartitioned specs), position deletes naming one file or a whole partition (sometimes a file that is gone, or a
file of another partition) and DVs. Each property compares the planner's view of a partition
(:func:`evaluate_partition`, :class:`GlobalDeleteIndex`) and MINOR's decision on the same files (:func:`decide_minor`)
with a brute-force reading of the spec's "Scan Planning" rules written here, pair by pair."""

from __future__ import annotations

import dataclasses
from typing import Iterable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from compaction.core.applicability import (
    MinorScope,
    PlacedData,
    PlacedDelete,
    decide_minor,
    delete_ref,
    positional_applicability,
    scope_applicability,
)
from compaction.core.attribution import GlobalDeleteIndex
from compaction.core.errors import UnsupportedTableError
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionState,
)
from compaction.core.planner import evaluate_partition
from compaction.core.policy import CompactionPolicy

POLICY = CompactionPolicy(target_file_size_bytes=1000, min_job_group_bytes=1)
EQ, POS, DV = DeleteContent.EQUALITY, DeleteContent.POSITION, DeleteContent.DELETION_VECTOR


def _key(spec: int, region: int, day: int) -> PartitionKey:
    if spec == 0:
        return PartitionKey(0, ())
    if spec == 3:  # a void field only: unpartitioned in Iceberg's sense too (PartitionSpec.isUnpartitioned)
        return PartitionKey(3, (PartitionFieldValue("region", "void", "region", None),))
    fields = [PartitionFieldValue("region", "identity", "region", f"r{region}")]
    if spec == 2:
        fields.append(PartitionFieldValue("ts_day", "day", "ts", day))
    return PartitionKey(spec, tuple(fields))


@dataclasses.dataclass(frozen=True)
class Table:
    format_version: int
    partitions: tuple[PartitionState, ...]

    def files(self) -> Iterable[tuple[PartitionKey, DataFileInfo]]:
        return ((p.key, f) for p in self.partitions for f in p.data_files)

    def deletes(self) -> Iterable[tuple[PartitionKey, DeleteFileInfo]]:
        return ((p.key, d) for p in self.partitions for d in p.delete_files)


@st.composite
def tables(draw: st.DrawFn) -> Table:
    fv = draw(st.sampled_from([2, 3]))
    keys = sorted(set(draw(st.lists(st.builds(_key, st.sampled_from([0, 1, 1, 2, 2, 3]), st.integers(0, 1),
                                              st.integers(0, 1)), min_size=1, max_size=5))),
                  key=lambda k: k.sort_key())
    data: dict[PartitionKey, list[DataFileInfo]] = {k: [] for k in keys}
    n = 0
    for k in keys:
        for _ in range(draw(st.integers(0, 4))):
            seq = draw(st.integers(1, 6))
            # A file's file sequence number is the one of the commit that added it: >= its data sequence number
            # (equal for an append, above it for a rewrite that kept the starting sequence number); None: unknown.
            fseq = draw(st.one_of(st.none(), st.integers(seq, seq + 3)))
            data[k].append(DataFileInfo(f"d{n}", 10_000, 100, seq, fseq))
            n += 1
    all_paths = [f.path for fs in data.values() for f in fs]
    deletes: dict[PartitionKey, list[DeleteFileInfo]] = {k: [] for k in keys}
    kinds = [EQ, POS] + ([DV] if fv == 3 else [])
    for i in range(draw(st.integers(0, 8))):
        k = draw(st.sampled_from(keys))
        kind = draw(st.sampled_from(kinds))
        seq = draw(st.integers(1, 7))
        fseq = draw(st.one_of(st.none(), st.integers(seq, seq + 2)))
        own = [f.path for f in data[k]]
        # Mostly a file of its own partition; sometimes a gone one or (no writer does that) another partition's.
        named = st.sampled_from(own + ["gone"]) if own else st.just("gone")
        named = st.one_of(named, named, st.sampled_from(all_paths)) if all_paths else named
        if kind is EQ:
            deletes[k].append(DeleteFileInfo(f"e{i}", EQ, 100, 3, seq, fseq, equality_ids=(1,)))
        elif kind is POS:
            ref = draw(st.one_of(st.none(), named))
            deletes[k].append(DeleteFileInfo(f"p{i}", POS, 100, 3, seq, fseq, referenced_data_file=ref))
        else:
            deletes[k].append(DeleteFileInfo("puffin", DV, 100, 3, seq, fseq, referenced_data_file=draw(named),
                                             content_offset=4 + 64 * i, content_size_bytes=40))
    return Table(fv, tuple(PartitionState(k, tuple(data[k]), tuple(deletes[k])) for k in keys))


# The spec's rules, pair by pair ---------------------------------------------------------------------------------
def spec_applies(dk: PartitionKey, d: DeleteFileInfo, fk: PartitionKey, f: DataFileInfo) -> bool:
    """Iceberg spec, "Scan Planning", for delete ``d`` of partition ``dk`` and data file ``f`` of partition ``fk``
    (a partition key is the spec id and the partition values), plus the rule that a position delete never names a
    file committed after it."""
    if d.content is EQ:
        return f.data_sequence_number < d.data_sequence_number and (dk == fk or dk.is_unpartitioned)
    committed = d.file_sequence_number if d.file_sequence_number is not None else d.data_sequence_number
    return (dk == fk and f.data_sequence_number <= d.data_sequence_number
            and (d.referenced_data_file is None or d.referenced_data_file == f.path)
            and (f.file_sequence_number is None or f.file_sequence_number <= committed))


def spec_targets(t: Table, dk: PartitionKey, d: DeleteFileInfo) -> set[str]:
    return {f.path for fk, f in t.files() if spec_applies(dk, d, fk, f)}


def spec_positional_count(t: Table, path: str) -> int:
    fk = next(k for k, f in t.files() if f.path == path)
    f = next(f for k, f in t.files() if f.path == path)
    return sum(1 for dk, d in t.deletes() if d.content is not EQ and spec_applies(dk, d, fk, f))


def scope_of(t: Table, key: PartitionKey, *, partition_scoped_output: bool = False) -> MinorScope:
    """The most a scan filtered on ``key``'s partition can hold: that partition, and every partition of the other
    specs (Iceberg projects the filter onto each spec; the unpartitioned ones always match)."""
    def values(k: PartitionKey) -> tuple[object, ...]:
        return tuple(f.value for f in k.fields)

    def seen(k: PartitionKey) -> bool:
        return k == key or k.spec_id != key.spec_id

    return MinorScope(
        key,
        tuple(PlacedData(f, k.spec_id, values(k)) for k, f in t.files() if seen(k)),  # type: ignore[arg-type]
        tuple(PlacedDelete(d, k.spec_id, values(k)) for k, d in t.deletes() if seen(k)),  # type: ignore[arg-type]
        whole_table=True,
        partition_scoped_output=partition_scoped_output,
    )


# Properties -----------------------------------------------------------------------------------------------------
@given(tables())
def test_positional_rule_is_the_specs(t: Table) -> None:
    for p in t.partitions:
        positional = [d for d in p.delete_files if d.content is not EQ]
        live = {f.path: f for f in p.data_files}
        app = positional_applicability(positional, lambda _: live)
        for i, d in enumerate(positional):
            assert set(app.targets[i]) == spec_targets(t, p.key, d), d


@given(tables())
def test_what_minor_finds_applying_is_the_specs(t: Table) -> None:
    """scope_applicability (what decide_minor decides from; the Spark test compares it with Iceberg's planFiles)."""
    for p in t.partitions:
        found = scope_applicability(scope_of(t, p.key))
        scope = {f.path for k, f in t.files() if k == p.key or k.spec_id != p.key.spec_id}
        for k, f in t.files():
            if f.path not in scope:
                continue
            applying = {(delete_ref(d), d.content is EQ) for dk, d in t.deletes() if spec_applies(dk, d, k, f)}
            assert found.positional.get(f.path, frozenset()) == {ref for ref, is_eq in applying if not is_eq}
            own_eq = {delete_ref(d) for d in p.delete_files if d.content is EQ}
            assert found.equality.get(f.path, frozenset()) == {ref for ref, is_eq in applying if is_eq} & own_eq


@given(tables(), st.booleans())
def test_minor_decides_by_the_specs_rules(t: Table, partition_scoped_output: bool) -> None:
    """decide_minor on a whole-table scope, for every partition, against the spec's pairs: what it converts, which
    data files it gives new files, which deletes it leaves (the settled ones) and which it removes as dangling."""
    for p in t.partitions:
        key = p.key
        decision = decide_minor(scope_of(t, key, partition_scoped_output=partition_scoped_output))
        own_eq = [d for d in p.delete_files if d.content is EQ]
        own_pos = [d for d in p.delete_files if d.content is not EQ]
        assert set(decision.equality) == {delete_ref(d) for d in own_eq}
        expected_eq: dict[str, set[tuple[str, int]]] = {}
        for d in own_eq:
            for path in spec_targets(t, key, d):
                expected_eq.setdefault(path, set()).add(delete_ref(d))
        assert {path: set(refs) for path, refs in decision.eq_targets.items()} == expected_eq

        targets = {delete_ref(d): spec_targets(t, key, d) for d in own_pos}
        dangling = {ref for ref, ts in targets.items() if not ts}
        assert set(decision.dangling) == dangling
        settled = {ref for ref, ts in targets.items()
                   if ts and all(spec_positional_count(t, path) == 1 and path not in expected_eq for path in ts)}
        if partition_scoped_output and not key.is_unpartitioned and (own_eq or dangling or len(settled) < len(own_pos)):
            settled = set()  # one new file for the whole partition holds all its positions
        assert {ref for ref in targets if ref not in decision.absorbed} - dangling == settled

        # Every data file that gets a new file has all its position deletes folded in, and only those do.
        applying: dict[str, set[tuple[str, int]]] = {}
        for dk, d in t.deletes():
            if d.content is not EQ:
                for path in spec_targets(t, dk, d):
                    applying.setdefault(path, set()).add(delete_ref(d))
        absorbed = set(decision.absorbed)
        for path in decision.data_files:
            assert applying.get(path, set()) <= absorbed, path
        assert set(decision.data_files) == set(expected_eq) | {p for p, refs in applying.items() if refs & absorbed}


@given(tables())
def test_the_planner_counts_what_minor_does(t: Table) -> None:
    """Per partition: the planner's dangling and mergeable counts and per-file maximum are what MINOR's decision on
    the same files shows; a partition the planner sees nothing mergeable in gives MINOR nothing to do."""
    index = GlobalDeleteIndex.of(t.partitions)
    all_data = [f for _, f in t.files()]
    for p in t.partitions:
        metrics = evaluate_partition(p, POLICY, "minor", t.format_version, index).metrics
        decision = decide_minor(scope_of(t, p.key))
        own_eq = [d for d in p.delete_files if d.content is EQ]
        # Equality deletes: dangling when nothing older is in their scope (the partition; the table when global).
        scope = all_data if p.key.is_unpartitioned else list(p.data_files)
        eq_dangling = sum(1 for d in own_eq if not any(f.data_sequence_number < d.data_sequence_number for f in scope))
        assert metrics["dangling_delete_files"] == len(decision.dangling) + eq_dangling
        left = len(p.delete_files) - len(own_eq) - len(decision.dangling) \
            - sum(1 for ref in decision.absorbed if ref in {delete_ref(d) for d in p.delete_files})
        settled = len(p.delete_files) - metrics["mergeable_delete_files"]
        if own_eq:
            assert left <= settled  # a settled file whose data file receives converted rows is folded in
        else:
            assert left == settled
        if metrics["mergeable_delete_files"] == 0:
            assert not (decision.equality or decision.absorbed or decision.dangling or decision.data_files)
        assert metrics["max_position_deletes_per_data_file"] == max(
            (spec_positional_count(t, f.path) for f in p.data_files), default=0)


@given(tables())
def test_a_global_conversion_reaches_the_partitions_attribution_counts_it_in(t: Table) -> None:
    """The global equality deletes MINOR converts for an unpartitioned partition apply to a partition's data files
    exactly when the planner's attribution counts them there (GlobalDeleteIndex: Iceberg's DeleteFileIndex puts them
    in its global index, consulted for every data file)."""
    index = GlobalDeleteIndex.of(t.partitions)
    for owner in (p for p in t.partitions if p.key.is_unpartitioned):
        decision = decide_minor(scope_of(t, owner.key))
        for q in t.partitions:
            if q.key == owner.key:
                continue
            reached = {ref for f in q.data_files for ref in decision.eq_targets.get(f.path, ())}
            counted = {delete_ref(d) for d in index.attribute(q).global_from_elsewhere}
            assert reached == counted & set(decision.equality), q.key.label()


def test_a_delete_naming_a_file_of_another_partition_is_dangling() -> None:
    """The spec's partition condition holds for a delete that names its file too (the one disagreement found
    between the planner, which said dangling, and the former decide_work, which applied it by path as Iceberg
    Java's DeleteFileIndex does, left it in place and so left the planner's MINOR trigger firing forever)."""
    old = PartitionKey(0, ())
    new = _key(2, 0, 0)
    t = Table(2, (
        PartitionState(old, (DataFileInfo("d1", 10, 10, 4, 4),)),
        PartitionState(new, (DataFileInfo("d0", 10, 10, 3, 3),),
                       (DeleteFileInfo("p4", POS, 10, 1, 7, 7, referenced_data_file="d1"),)),
    ))
    decision = decide_minor(scope_of(t, new))
    assert decision.dangling == (("p4", -1),) and not decision.data_files
    metrics = evaluate_partition(t.partitions[1], POLICY, "minor", 2).metrics
    assert metrics["dangling_delete_files"] == 1


def test_a_global_conversion_needs_the_whole_table() -> None:
    t = Table(2, (PartitionState(PartitionKey(0, ()), (DataFileInfo("d", 10, 10, 1),),
                                 (DeleteFileInfo("e", EQ, 10, 1, 2, equality_ids=(1,)),)),))
    with pytest.raises(UnsupportedTableError):
        decide_minor(dataclasses.replace(scope_of(t, PartitionKey(0, ())), whole_table=False))


def test_an_undecoded_partition_is_refused_where_the_rule_needs_it() -> None:
    key = _key(1, 0, 0)
    other = PlacedData(DataFileInfo("d", 10, 10, 1), 2, None)
    pd = PlacedDelete(DeleteFileInfo("p", POS, 10, 1, 2), 2, None)
    with pytest.raises(ValueError):
        decide_minor(MinorScope(key, (other,), (pd,)))
    # No data file of the delete's spec in the scope: nothing to compare, nothing applies.
    assert decide_minor(MinorScope(key, (), (pd,))).absorbed == ()


def test_folding_reaches_every_file_a_folded_delete_applies_to() -> None:
    """A global conversion gives d1 (spec 1) a new file; d1's partition-scoped position delete also applies to d2,
    which no equality delete reaches: folded into d1's new file, it must be replaced for d2 as well."""
    unpartitioned, region = PartitionKey(0, ()), _key(1, 0, 0)
    t = Table(2, (
        PartitionState(unpartitioned, (), (DeleteFileInfo("e", EQ, 10, 1, 3, 3, equality_ids=(1,)),)),
        PartitionState(region, (DataFileInfo("d1", 10, 10, 1, 1), DataFileInfo("d2", 10, 10, 4, 4)),
                       (DeleteFileInfo("p", POS, 10, 2, 5, 5),)),
    ))
    decision = decide_minor(scope_of(t, unpartitioned))
    assert decision.eq_targets == {"d1": frozenset({("e", -1)})}
    assert decision.absorbed == (("p", -1),) and decision.data_files == ("d1", "d2")
