"""Delete attribution across partition specs: global equality deletes (written unpartitioned) count wherever they
apply (Iceberg spec, "Scan Planning"); health and the planner follow it."""

from __future__ import annotations

import datetime as dt

from compaction.core.attribution import GlobalDeleteIndex
from compaction.core.health import PartitionHealth, sample_from_state
from compaction.core.model import (
    DataFileInfo,
    DeleteContent,
    DeleteFileInfo,
    PartitionFieldValue,
    PartitionKey,
    PartitionState,
    TableIdentity,
    TableState,
)
from compaction.core.plan import CompactionKind
from compaction.core.planner import evaluate_partition, plan
from compaction.core.policy import CompactionPolicy

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
POL = CompactionPolicy(target_file_size_bytes=1000, min_job_group_bytes=1)
UNPARTITIONED = PartitionKey(0, ())


def region(value: str, spec: int = 1) -> PartitionKey:
    return PartitionKey(spec, (PartitionFieldValue("region", "identity", "region", value),))


def data(path: str, seq: int, records: int = 100, size: int = 5000) -> DataFileInfo:
    return DataFileInfo(path, size, records, seq)


def eq(path: str, seq: int, records: int = 10) -> DeleteFileInfo:
    return DeleteFileInfo(path, DeleteContent.EQUALITY, 100, records, seq, equality_ids=(1,))


def dv(path: str, ref: str, seq: int) -> DeleteFileInfo:
    return DeleteFileInfo(path, DeleteContent.DELETION_VECTOR, 1000, 1, seq, referenced_data_file=ref,
                          content_offset=4, content_size_bytes=40)


def evolved_table() -> TableState:
    """Unpartitioned at first (seq 1-2, global equality deletes at seq 2 and 5), then ``identity(region)``: EU
    written at seq 3 (both globals apply), US at seq 6 (none applies), APAC at 4 with its own DV."""
    return TableState(
        TableIdentity("cat", ("db",), "evolved"), 2, 99, 6, {},
        (
            PartitionState(UNPARTITIONED, (data("old/a", 1), data("old/b", 1)),
                           (eq("old/eq-2", 2), eq("old/eq-5", 5), eq("old/eq-6", 6))),
            PartitionState(region("EU"), (data("eu/a", 3), data("eu/b", 3))),
            PartitionState(region("US"), (data("us/a", 6),)),
            PartitionState(region("APAC"), (data("apac/a", 4),), (dv("apac/dv.puffin", "apac/a", 5),)),
        ),
    )


def test_global_equality_deletes_count_where_they_apply() -> None:
    state = evolved_table()
    index = GlobalDeleteIndex.of(state.partitions)
    by_key = {p.key: index.attribute(p) for p in state.partitions}

    eu = by_key[region("EU")]
    assert [d.path for d in eu.global_from_elsewhere] == ["old/eq-5", "old/eq-6"]  # seq 2 is not > 3
    assert eu.global_equality_delete_files == 2 and eu.equality_delete_files == 2
    assert eu.describe_global() == ("2 global equality-delete files (written unpartitioned, in "
                                    "spec=0/<unpartitioned>) apply")
    assert by_key[region("US")].global_from_elsewhere == ()  # written after every global delete
    apac = by_key[region("APAC")]
    assert [d.path for d in apac.global_from_elsewhere] == ["old/eq-5", "old/eq-6"]
    assert apac.deletion_vectors == 1 and apac.equality_delete_files == 2
    # The owner keeps its own three; all three are global.
    owner = by_key[UNPARTITIONED]
    assert owner.global_from_elsewhere == () and owner.global_equality_delete_files == 3

    # Records are keys: each global delete's records are shared pro rata over the rows it may apply to, so the
    # shares add up to the deletes' records (here 30, none dangling: old files are at seq 1).
    assert sum(a.delete_records for a in by_key.values()) == 30 + 1  # + APAC's DV
    # eq-2 applies to the old files only (200 rows), eq-5 and eq-6 to old, EU and APAC (500 rows).
    assert owner.global_equality_delete_records == round(200 * (10 / 200 + 10 / 500 + 10 / 500))
    assert eu.global_equality_delete_records == round(200 * (10 / 500 + 10 / 500))


def test_table_without_global_deletes_is_unchanged() -> None:
    state = TableState(TableIdentity("cat", ("db",), "t"), 2, 1, 3, {},
                       (PartitionState(region("EU"), (data("a", 1),), (eq("e", 2),)),))
    index = GlobalDeleteIndex.of(state.partitions)
    assert not index
    attributed = index.attribute(state.partitions[0])
    assert attributed.delete_files == state.partitions[0].delete_files and attributed.delete_records == 10


def test_void_only_spec_is_unpartitioned() -> None:
    # Iceberg Java: PartitionSpec.isUnpartitioned() is true when every field's transform is void.
    void_key = PartitionKey(2, (PartitionFieldValue("region_null", "void", "region", None),))
    assert void_key.is_unpartitioned
    assert not region("EU").is_unpartitioned
    state = (PartitionState(void_key, (), (eq("void/eq", 5),)), PartitionState(region("EU"), (data("eu/a", 3),)))
    eu = GlobalDeleteIndex.of(state).attribute(state[1])
    assert [d.path for d in eu.global_from_elsewhere] == ["void/eq"]


def test_counts_from_suffix_sums_equal_the_listed_deletes() -> None:
    # Two unpartitioned specs (0: no fields, 2: void only), each with its own global deletes, and partitions of
    # every age: the O(log n) counts agree with the deletes listed one by one, for owners and the others.
    void_key = PartitionKey(2, (PartitionFieldValue("region_null", "void", "region", None),))
    parts = (
        PartitionState(UNPARTITIONED, (data("u/a", 1),), (eq("u/eq3", 3), eq("u/eq7", 7))),
        PartitionState(void_key, (data("v/a", 4),), (eq("v/eq5", 5), eq("v/eq8", 8))),
        *(PartitionState(region(f"r{i}"), (data(f"r{i}/a", i),)) for i in range(1, 10)),
    )
    index = GlobalDeleteIndex.of(parts)
    for p in parts:
        a = index.attribute(p)
        listed = a.global_from_elsewhere
        assert a.global_count_elsewhere == len(listed), p.key.label()
        assert a.global_bytes_elsewhere == sum(d.size_bytes for d in listed)
        assert a.global_max_sequence_number_elsewhere == max((d.data_sequence_number for d in listed), default=None)
        owners = {"u/": UNPARTITIONED.label(), "v/": void_key.label()}
        assert a.global_owner_labels == tuple(sorted({owners[d.path[:2]] for d in listed}))
        assert all(d.data_sequence_number > min(f.data_sequence_number for f in p.data_files) for d in listed)
    assert [d.path for d in index.attribute(parts[0]).global_from_elsewhere] == ["v/eq5", "v/eq8"]
    assert [d.path for d in index.attribute(parts[1]).global_from_elsewhere] == ["u/eq7"]
    # The shares of each delete add up to its records over the partitions it applies to (each partition's estimate
    # is rounded to whole rows).
    shares = sum(index.attribute(p).global_equality_delete_records for p in parts)
    assert abs(shares - 40) <= len(parts) / 2


def test_major_plans_every_partition_a_global_delete_applies_to() -> None:
    state = evolved_table()
    p = plan(state, POL, "major", NOW)
    kinds = {d.partition: d for d in p.decisions}
    eu = kinds[region("EU")]
    assert eu.kind is CompactionKind.MAJOR
    assert "2 global equality-delete files (written unpartitioned, in spec=0/<unpartitioned>) apply" in eu.reason
    assert eu.metrics["full_rewrite"] == 1 and eu.metrics["global_equality_delete_files"] == 2
    assert "full rewrite" in eu.reason
    assert kinds[region("US")].kind is CompactionKind.NONE  # nothing applies to its files
    assert kinds[UNPARTITIONED].kind is CompactionKind.MAJOR
    # EU's full rewrite covers both its files (the globals apply to them); the task lists only its own deletes
    # (the global files live in, and are dropped with, the unpartitioned partition: no path in two groups).
    eu_tasks = [t for t in p.tasks if t.partition == region("EU")]
    assert sorted(f for t in eu_tasks for f in t.data_files) == ["eu/a", "eu/b"]
    assert all(t.delete_files == () and t.full_rewrite for t in eu_tasks)


def test_minor_of_global_deletes_belongs_to_their_partition() -> None:
    state = evolved_table()
    p = plan(state, POL, "minor", NOW)
    kinds = {d.partition: d for d in p.decisions}
    # The unpartitioned partition's MINOR converts its global deletes table-wide (compaction.spark.minor); the
    # other partitions' MINOR could not, so they are NONE and say why.
    assert kinds[UNPARTITIONED].kind is CompactionKind.MINOR
    eu = kinds[region("EU")]
    assert eu.kind is CompactionKind.NONE
    assert "2 global equality-delete files" in eu.reason and "converted by the MINOR of their partition" in eu.reason
    # Its cost counts reading the files of the other partitions the conversion scans (EU and APAC: 3 files).
    owner = kinds[UNPARTITIONED]
    assert owner.metrics["estimated_cost_bytes"] >= int(0.125 * 3 * 5000)


def test_dangling_global_deletes_are_judged_table_wide() -> None:
    # Every data file is newer than the global delete: it applies nowhere, and counts as dangling in its partition.
    parts = (
        PartitionState(UNPARTITIONED, (), (eq("old/eq", 2),)),
        PartitionState(region("EU"), (data("eu/a", 3),)),
    )
    state = TableState(TableIdentity("cat", ("db",), "t"), 2, 1, 3, {}, parts)
    p = plan(state, POL, "auto", NOW)
    owner = next(d for d in p.decisions if d.partition == UNPARTITIONED)
    assert owner.metrics["dangling_delete_files"] == 1
    eu = next(d for d in p.decisions if d.partition == region("EU"))
    assert eu.metrics["global_equality_delete_files"] == 0 and eu.metrics["delete_files"] == 0


def test_evaluate_partition_with_the_index_and_health_counts() -> None:
    state = evolved_table()
    index = GlobalDeleteIndex.of(state.partitions)
    eu_state = state.partitions[1]
    assert evaluate_partition(eu_state, POL, "major", 2).kind is CompactionKind.NONE  # own files only
    assert evaluate_partition(eu_state, POL, "major", 2, index).kind is CompactionKind.MAJOR

    sample = sample_from_state(state, POL, plan(state, POL, "auto", NOW))
    detail = {h.label: h for h in sample.partitions_detail}
    assert detail["spec=1/region=EU"].equality_delete_files == 2
    assert detail["spec=1/region=EU"].global_equality_delete_files == 2
    assert detail["spec=1/region=US"].equality_delete_files == 0
    assert detail["spec=0/<unpartitioned>"].global_equality_delete_files == 3
    # Table totals count each file once.
    assert sample.equality_delete_files == 3 and sample.deletion_vectors == 1
    assert sample.delete_records == 31
    assert "spec=1/region=EU" in sample.decision_reason or sample.partitions_major + sample.partitions_minor >= 1
    assert PartitionHealth.from_dict(detail["spec=1/region=EU"].to_dict()) == detail["spec=1/region=EU"]
