from __future__ import annotations

import dataclasses
import datetime as dt
import math
import hashlib
import json
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.errors import ConfigError, PlanningError, UnsupportedTableError
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
from compaction.core.partition_filter import PartitionFilter, PartitionPredicate, SpecProjection
from compaction.core.plan import CompactionPlan
from compaction.core.planner import (
    CONVERSION_READ_FRACTION,
    CompactionKind,
    CompactionMode,
    PartitionDecision,
    evaluate_partition,
    plan,
    PlanCache,
    plan_tasks,
)
from compaction.core.policy import CompactionPolicy

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.timezone.utc)
IDENT = TableIdentity("cat", ("db",), "events")
K = 1000
# Small numbers keep tests readable: target 1000 bytes -> files < 750 bytes are small.
# The count rules on their own; the read-cost model is tested in tests/core/test_read_cost.py.
POL = CompactionPolicy(target_file_size_bytes=1000, min_job_group_bytes=1, read_cost_max_overhead=0)

NONE, MINOR, MAJOR = CompactionKind.NONE, CompactionKind.MINOR, CompactionKind.MAJOR


def key(region: str | None = "EU", spec: int = 1) -> PartitionKey:
    return PartitionKey(spec, (PartitionFieldValue("region", "identity", "region", region),))


def data(path: str, size: int = 10 * K, records: int = 1000, seq: int = 1) -> DataFileInfo:
    return DataFileInfo(path, size, records, seq)


def pos(path: str, ref: str | None = None, seq: int = 2, records: int = 1, size: int = 100) -> DeleteFileInfo:
    return DeleteFileInfo(path, DeleteContent.POSITION, size, records, seq, referenced_data_file=ref)


def eq(path: str, seq: int = 2, records: int = 1, size: int = 100) -> DeleteFileInfo:
    return DeleteFileInfo(path, DeleteContent.EQUALITY, size, records, seq, equality_ids=(1,))


def dv(path: str, ref: str, seq: int = 2, records: int = 1, offset: int = 4, length: int = 50) -> DeleteFileInfo:
    return DeleteFileInfo(
        path, DeleteContent.DELETION_VECTOR, 10 * K, records, seq, referenced_data_file=ref,
        content_offset=offset, content_size_bytes=length,
    )  # fmt: skip


def part(k: PartitionKey, datas: list[DataFileInfo], deletes: list[DeleteFileInfo] | None = None) -> PartitionState:
    return PartitionState(k, tuple(datas), tuple(deletes or ()))


def table(*parts: PartitionState, fv: int = 2, props: dict[str, str] | None = None) -> TableState:
    return TableState(IDENT, fv, 42, 9, props or {}, tuple(parts))


def ev(p: PartitionState, policy: CompactionPolicy = POL, mode: str = "auto", fv: int = 2) -> PartitionDecision:
    return evaluate_partition(p, policy, mode, fv)


# --------------------------------------------------------------------------------------------------------------
# Decisions


def test_clean_partition_is_none_with_reason() -> None:
    d = ev(part(key(), [data("a"), data("b")]))
    assert d.kind is NONE
    assert d.reason.startswith(
        "no rule matched: delete ratio 0.00 < 0.30; no delete-heavy segment; 0 small segment files < 10; "
        "0 fragment + 0 equality delete files < 12")
    assert d.metrics["estimated_cost_bytes"] == 0
    assert d.metrics["data_files"] == 2 and d.metrics["data_bytes"] == 20 * K


def test_rule1_delete_ratio_major_with_boundary() -> None:
    files = [data("a", records=1000), data("b", records=1000)]
    d = ev(part(key(), files, [pos("p", records=680)]))
    assert (d.kind, d.reason) == (MAJOR, "delete ratio 0.34 >= 0.30 -> MAJOR")
    assert d.metrics["delete_ratio"] == pytest.approx(0.34)
    assert ev(part(key(), files, [pos("p", records=600)])).kind is MAJOR  # exactly 0.30
    below = ev(part(key(), files, [pos("p", records=599)]))
    assert below.kind is NONE and "delete ratio 0.30 < 0.30" in below.reason


def test_rule1_ratio_beats_minor_rules() -> None:
    d = ev(part(key(), [data("a", records=10)], [eq("e", records=5)]))
    assert d.kind is MAJOR and d.reason.startswith("delete ratio 0.50")


def test_rule2_small_files_major() -> None:
    files = [data(f"s{i}", size=700) for i in range(10)] + [data("big", size=5000)]
    d = ev(part(key(), files))
    assert d.kind is MAJOR
    assert d.reason == "10 small segment files (< 750 B) >= 10 -> MAJOR"
    assert d.metrics["full_rewrite"] == 0 and d.metrics["rewritten_data_files"] == 10
    nine = ev(part(key(), files[1:]))
    assert nine.kind is NONE
    # exactly-at-threshold file is not small
    assert ev(part(key(), [data(f"s{i}", size=750) for i in range(10)])).kind is NONE


def test_rule3_equality_deletes_minor_and_switch() -> None:
    p = part(key(), [data("a")], [eq("e")])
    d = ev(p)
    assert (d.kind, d.reason) == (MINOR, "1 equality delete files present -> MINOR")
    off = ev(p, dataclasses.replace(POL, minor_on_equality_deletes=False))
    assert off.kind is NONE and "equality delete files (trigger off)" in off.reason


def test_rule4_mergeable_delete_file_count() -> None:
    files = [data(f"d{i}") for i in range(10)]
    # partition-scoped position deletes all apply to every older data file -> mergeable
    five = ev(part(key(), files, [pos(f"p{i}") for i in range(5)]), dataclasses.replace(POL, minor_max_position_deletes_per_file=9))
    assert (five.kind, five.reason) == (MINOR, "5 mergeable delete files >= 5 -> MINOR")
    four = ev(part(key(), files, [pos(f"p{i}") for i in range(4)]), dataclasses.replace(POL, minor_max_position_deletes_per_file=9))
    assert four.kind is NONE


def test_settled_deletes_do_not_retrigger_minor() -> None:
    """One file-scoped position delete per data file is what a MINOR produces; it must not trigger again."""
    files = [data(f"d{i}") for i in range(10)]
    settled = [pos(f"p{i}", ref=f"d{i}") for i in range(10)]
    d = ev(part(key(), files, settled))
    assert d.kind is NONE
    assert d.metrics["mergeable_delete_files"] == 0 and d.metrics["delete_files"] == 10
    assert ev(part(key(), files, settled), mode="minor").kind is NONE
    # A partition-scoped position delete alone in its partition (MINOR's output under
    # write.delete.granularity=partition) is settled; a second one makes both mergeable.
    lone = ev(part(key(), files, [pos("p-all")]), mode="minor")
    assert lone.kind is NONE and lone.metrics["mergeable_delete_files"] == 0
    two = ev(part(key(), files, [pos("p-all"), pos("p-more")]), mode="minor")
    assert two.kind is MINOR and two.metrics["mergeable_delete_files"] == 2
    # v3: one DV per data file is settled too
    dvs = [dv("puffin-1", ref=f"d{i}", offset=i * 100) for i in range(10)]
    assert ev(part(key(), files, dvs), fv=3).kind is NONE


def test_dangling_deletes_are_mergeable() -> None:
    files = [data("d0")]
    dangling = [pos(f"p{i}", ref=f"gone{i}") for i in range(5)]
    d = ev(part(key(), files, dangling))
    assert d.kind is MINOR and d.metrics["dangling_delete_files"] == 5
    # a position delete older than its data file does not apply either
    old = ev(part(key(), [data("d0", seq=5)], [pos("p", ref="d0", seq=4)]), mode="minor")
    assert old.kind is MINOR and old.metrics["dangling_delete_files"] == 1


@pytest.mark.parametrize("mode", ["auto", "minor", "major"])
def test_position_delete_naming_a_file_of_another_partition_holds_both(mode: str) -> None:
    # Dangling to the spec (a position delete applies within its partition only), live to Java readers (by path):
    # compacting either partition would change what one kind of reader sees.
    eu, us, asia = key("EU"), key("US"), key("ASIA")
    t = table(part(eu, [data("eu/d0", size=100), data("eu/d1", size=100)], [pos("eu/p0", ref="us/d0"),
                                                                               pos("eu/p1", ref="gone")]),
              part(us, [data("us/d0", size=100), data("us/d1", size=100)], [pos("us/p0", ref="us/d0")]),
              part(asia, [data("asia/d0", size=100), data("asia/d1", size=100)], [pos(f"asia/p{i}", ref="gone") for i in range(5)]))
    result = plan(t, POL, mode, NOW)
    by_key = {d.partition: d for d in result.decisions}
    for held in (eu, us):
        assert by_key[held].kind is NONE
        assert by_key[held].reason.startswith("held: position delete eu/p0 of partition spec=1/region=EU names data "
                                              "file us/d0 of partition spec=1/region=US")
    assert by_key[asia].kind is not NONE  # a delete naming a removed file is only dangling: compacted as before
    planned = {t.partition for g in result.groups for t in g.tasks}
    assert planned == {asia}


def test_rule5_several_position_deletes_for_one_file() -> None:
    d = ev(part(key(), [data("a"), data("b")], [pos("p1", ref="a"), pos("p2", ref="a")]))
    assert (d.kind, d.reason) == (MINOR, "a data file has 2 position delete files > 1 -> MINOR")
    # v3: a DV plus a legacy position delete on the same file
    d3 = ev(part(key(), [data("a")], [dv("pf", ref="a"), pos("p", ref="a")]), fv=3)
    assert d3.kind is MINOR and d3.metrics["max_position_deletes_per_data_file"] == 2
    # position deletes older than the data file do not count for it
    newer = ev(part(key(), [data("a", seq=3)], [pos("p1", seq=2), pos("p2", seq=2)]))
    assert newer.metrics["max_position_deletes_per_data_file"] == 0


def test_forced_major() -> None:
    clean = part(key(), [data("a", size=100)])
    d = ev(clean, mode="major")
    assert d.kind is NONE and d.reason.startswith("mode=major: nothing to rewrite")
    assert ev(part(key(), [data("a", size=100), data("b", size=100)]), mode="major").kind is MAJOR
    settled_only = ev(part(key(), [data("a")], [pos("p", ref="a")]), mode="major")
    assert settled_only.kind is MAJOR and settled_only.reason == "mode=major: 1 delete files, 0 small files -> MAJOR"


def test_forced_minor() -> None:
    assert ev(part(key(), [data("a"), data("b")]), mode="minor").kind is NONE
    assert ev(part(key(), [data("a", size=1), data("b")]), mode="minor").kind is NONE  # one fragment: nothing to merge
    fragments = ev(part(key(), [data("a", size=1), data("b", size=1)]), mode="minor")
    assert (fragments.kind, fragments.reason) == (MINOR, "mode=minor: 2 fragment files -> MINOR")
    d = ev(part(key(), [data("a")], [eq("e")]), mode=CompactionMode.MINOR)
    assert (d.kind, d.reason) == (MINOR, "mode=minor: 1 mergeable delete files -> MINOR")
    # forced minor never turns a MAJOR-worthy partition into MAJOR
    assert ev(part(key(), [data("a", records=1)], [eq("e", records=1)]), mode="minor").kind is MINOR


def test_format_version_and_mode_errors() -> None:
    p = part(key(), [data("a")])
    with pytest.raises(UnsupportedTableError) as exc:
        ev(p, fv=1)
    assert str(exc.value) == "format v1 table has no delete files; merge-on-read compaction needs v2+"
    with pytest.raises(UnsupportedTableError):
        ev(p, fv=4)
    with pytest.raises(ConfigError, match="'full'"):
        ev(p, mode="full")
    with pytest.raises(UnsupportedTableError, match="format v1"):
        plan(table(p, fv=1), POL, "auto", NOW)


def test_costs_and_selected_files() -> None:
    big_clean = data("big", size=5000, seq=5)  # newer than the eq delete, no deletes, not small
    old_big = data("old", size=4000, seq=1)  # touched by the eq delete
    small = data("small", size=300, seq=5)
    p = part(key(), [big_clean, old_big, small], [eq("e", seq=3, size=100, records=1000)])
    d = ev(p)
    assert d.kind is MAJOR
    assert d.metrics["estimated_cost_bytes"] == 4000 + 300 + 100
    pl = plan(table(p), POL, "auto", NOW)
    (task,) = pl.tasks
    assert task.data_files == ("old", "small")
    assert task.delete_files == ("e",)
    minor = ev(part(key(), [big_clean, old_big, small], [eq("e", seq=3)]), mode="minor")
    # "old" is only read for the conversion (its equality column): a fraction of its bytes
    assert minor.metrics["estimated_cost_bytes"] == int(CONVERSION_READ_FRACTION * 4000) + 100
    pl = plan(table(part(key(), [big_clean, old_big, small], [eq("e", seq=3)])), POL, "minor", NOW)
    (task,) = pl.tasks
    assert (task.kind, task.data_files, task.delete_files) == (MINOR, ("old",), ("e",))


def test_dv_cost_uses_blob_length_and_shared_puffin_listed_once() -> None:
    p = part(key(), [data("a", records=10), data("b", records=10)], [dv("pf", "a", records=5, offset=4), dv("pf", "b", records=5, offset=60)])
    pl = plan(table(p, fv=3), POL, "auto", NOW)
    assert [(t.data_files, t.delete_files, t.estimated_cost_bytes) for t in pl.tasks] == [
        (("a",), ("pf",), 10 * K + 2 * 50),
        (("b",), ("pf",), 10 * K + 2 * 50),
    ]
    unsplit = plan(table(p, fv=3), dataclasses.replace(POL, target_file_size_bytes=11 * K), "auto", NOW)
    (task,) = unsplit.tasks
    assert task.delete_files == ("pf",)
    assert task.estimated_cost_bytes == 20 * K + 2 * 50


# --------------------------------------------------------------------------------------------------------------
# Plan-level behaviour


def test_disabled_by_table_property() -> None:
    p = part(key(), [data("a", records=1)], [eq("e", records=1)])
    t = table(p, props={"compaction.enabled": "false"})
    pl = plan(t, CompactionPolicy.resolve(t.properties), "major", NOW)
    assert [(d.kind, d.reason) for d in pl.decisions] == [(NONE, "compaction disabled by table property")]
    assert pl.groups == () and pl.deferred == ()
    assert pl.decisions[0].metrics["delete_files"] == 1
    # policy=None resolves from the table properties
    assert plan(t, None, "auto", NOW).decisions[0].reason == "compaction disabled by table property"
    # a run parameter overrides the table property
    forced = plan(t, CompactionPolicy.resolve(t.properties, {"enabled": True}), "auto", NOW)
    assert forced.decisions[0].kind is MAJOR and len(forced.tasks) == 1
    by_param = plan(table(p), CompactionPolicy.resolve({}, {"enabled": "false"}), "auto", NOW)
    assert by_param.decisions[0].reason == "compaction disabled by run parameter"


def test_split_heavy_major_by_whole_files() -> None:
    heavy = part(key("EU"), [data(f"eu{i}", size=1000 + i) for i in range(8)], [eq("e", size=100, records=8000)])
    light = part(key("US"), [data("us0", size=500)], [eq("f", size=10, records=1000)])
    pl = plan(table(heavy, light), POL, "auto", NOW)
    eu = [t for t in pl.tasks if t.partition == key("EU")]
    # total = 8028 + 100 + 510 = 8638; average = 8638 / 4 = 2159.5; ceil(8128 / 2159.5) = 4 pieces
    assert len(eu) == 4
    assert all(t.piece_count == 4 and t.delete_files == ("e",) for t in eu)
    assert [t.piece_index for t in eu] == [0, 1, 2, 3]
    paths = [p for t in eu for p in t.data_files]
    assert sorted(paths) == sorted(f"eu{i}" for i in range(8)) and len(paths) == len(set(paths))
    assert all(len(t.data_files) == 2 for t in eu)
    assert all(t.estimated_cost_bytes == sum(1000 + int(p[2:]) for p in t.data_files) + 100 for t in eu)
    # all pieces of a partition are in one group
    assert len({g.group_id for g in pl.groups for t in g.tasks if t.partition == key("EU")}) == 1


def test_no_split_when_weight_ratio_too_low_single_file_or_minor() -> None:
    # data bytes / delete bytes = 8000 / 5000 = 1.6 < 2.0
    delete_heavy = part(key("EU"), [data(f"eu{i}", size=1000) for i in range(8)], [eq("e", size=5000, records=8000)])
    light = part(key("US"), [data("us0", size=500)], [eq("f", size=10, records=1000)])
    pl = plan(table(delete_heavy, light), POL, "auto", NOW)
    assert len([t for t in pl.tasks if t.partition == key("EU")]) == 1
    lowered = plan(table(delete_heavy, light), dataclasses.replace(POL, weight_ratio=1.5), "auto", NOW)
    assert len([t for t in lowered.tasks if t.partition == key("EU")]) == 4
    single = part(key("EU"), [data("eu0", size=9000)], [eq("e", size=10, records=8000)])
    assert len(plan(table(single, light), POL, "auto", NOW).tasks) == 2
    minor_heavy = part(key("EU"), [data(f"eu{i}", size=1000) for i in range(8)], [eq("e", seq=2, size=10, records=1)])
    pl = plan(table(minor_heavy, light), POL, "minor", NOW)
    eu = [t for t in pl.tasks if t.partition == key("EU")]
    assert len(eu) == 1 and eu[0].kind is MINOR and len(eu[0].data_files) == 8


def _major_part(name: str, size: int) -> PartitionState:
    return part(key(name), [data(f"{name}-d", size=size, records=10)], [eq(f"{name}-e", size=0, records=10)])


def test_grouping_consolidates_within_capacity() -> None:
    # costs 4,1,1,1,1 (x1000) with 4 groups: capacity = max(4000, 8000/4) = 4000 -> [4000], [1000 x 4]
    parts = [_major_part("a", 4000)] + [_major_part(f"b{i}", 1000) for i in range(4)]
    pl = plan(table(*parts), POL, "auto", NOW)
    assert [g.estimated_cost_bytes for g in pl.groups] == [4000, 4000]
    assert [len(g.tasks) for g in pl.groups] == [1, 4]
    # equal partitions spread over all groups
    pl = plan(table(*[_major_part(f"c{i}", 1000) for i in range(4)]), POL, "auto", NOW)
    assert [g.estimated_cost_bytes for g in pl.groups] == [1000] * 4
    # more partitions than groups: never more than parallelism * parallel_multiple groups
    pl = plan(table(*[_major_part(f"d{i}", 1000 + i) for i in range(11)]), POL, "auto", NOW)
    assert len(pl.groups) == 4
    costs = [g.estimated_cost_bytes for g in pl.groups]
    assert max(costs) - min(costs) <= 1010
    one = dataclasses.replace(POL, parallelism=1, parallel_multiple=1)
    assert len(plan(table(*[_major_part(f"d{i}", 1000) for i in range(5)]), one, "auto", NOW).groups) == 1


def test_cap_max_partitions_priority_and_deferred_reason() -> None:
    major_hi = part(key("A"), [data("a", records=10)], [pos("pa", records=9)])  # ratio 0.9
    major_lo = part(key("B"), [data("b", records=10)], [pos("pb", records=4)])  # ratio 0.4
    minor = part(key("C"), [data("c", records=100)], [eq("ec", records=1)])
    pol = dataclasses.replace(POL, max_partitions_per_run=2)
    pl = plan(table(minor, major_lo, major_hi), pol, "auto", NOW)
    assert set(pl.scheduled_partitions) == {key("A"), key("B")}
    (deferred,) = pl.deferred
    assert deferred.partition == key("C") and deferred.kind is MINOR
    assert deferred.reason == "max partitions per run (2) reached"
    pol1 = dataclasses.replace(POL, max_partitions_per_run=1)
    assert plan(table(minor, major_lo, major_hi), pol1, "auto", NOW).scheduled_partitions == (key("A"),)
    # the decision of a deferred partition is unchanged
    assert pl.decision_for(key("C")) is not None and pl.decision_for(key("C")).kind is MINOR  # type: ignore[union-attr]


def test_cap_max_bytes_skips_too_big_and_continues() -> None:
    big = part(key("A"), [data("a", size=5000, records=10)], [pos("pa", size=0, records=9)])
    mid = part(key("B"), [data("b", size=3000, records=10)], [pos("pb", size=0, records=5)])
    small = part(key("C"), [data("c", size=1000, records=10)], [pos("pc", size=0, records=4)])
    pl = plan(table(big, mid, small), dataclasses.replace(POL, max_bytes_per_run=4500), "auto", NOW)
    assert set(pl.scheduled_partitions) == {key("B"), key("C")}
    assert [d.partition for d in pl.deferred] == [key("A")]
    assert "would exceed max bytes per run 4500" in pl.deferred[0].reason
    assert pl.deferred[0].estimated_cost_bytes == 5000
    assert sum(t.estimated_cost_bytes for t in pl.tasks) == 4000


def test_partition_filter_and_custom_callable() -> None:
    a = part(key("EU"), [data("a", records=1)], [eq("e", records=1)])
    b = part(key("US"), [data("b", records=1)], [eq("f", records=1)])
    flt = PartitionFilter("region = 'EU'", (SpecProjection(1, PartitionPredicate("region", "eq", "string", ("EU",))),))
    pl = plan(table(a, b), POL, "auto", NOW, flt)
    assert [d.partition for d in pl.decisions] == [key("EU")]
    assert pl.partition_filter == flt and not pl.custom_partition_filter
    pl = plan(table(a, b), POL, "auto", NOW, lambda k: k == key("US"))
    assert [d.partition for d in pl.decisions] == [key("US")]
    assert pl.partition_filter is None and pl.custom_partition_filter


def test_inconsistent_state_is_rejected() -> None:
    with pytest.raises(PlanningError, match="appears twice"):
        plan(table(part(key(), [data("a")]), part(key(), [data("b")])), POL, "auto", NOW)
    with pytest.raises(PlanningError, match="data file x listed twice"):
        plan(table(part(key("A"), [data("x")]), part(key("B"), [data("x")])), POL, "auto", NOW)
    with pytest.raises(PlanningError, match="paired"):
        plan_tasks([(part(key("A"), [data("x")]), ev(part(key("B"), [data("y")])))], POL)
    # With a cache: on the first plan, and on a re-plan in place whose new partition lists another's file.
    cache = PlanCache()
    with pytest.raises(PlanningError, match="data file x listed twice"):
        plan(table(part(key("A"), [data("x")]), part(key("B"), [data("x")])), POL, "auto", NOW, cache=cache)
    a, b = part(key("A"), [data("x")]), part(key("B"), [data("y")], [pos("d", ref="y")])
    plan(table(a, b), POL, "auto", NOW, cache=cache)
    with pytest.raises(PlanningError, match="data file x listed twice"):
        plan(table(a, part(key("B"), [data("x")])), POL, "auto", NOW, cache=cache)
    plan(table(a, b), POL, "auto", NOW, cache=cache)
    with pytest.raises(PlanningError, match="delete file d listed twice"):
        plan(table(part(key("A"), [data("x")], [pos("d", ref="x")]), b), POL, "auto", NOW, cache=cache)


def test_empty_table_and_plan_metadata() -> None:
    empty = TableState(IDENT, 2, None, 0)
    pl = plan(empty, POL, "auto", NOW)
    assert pl.decisions == () and pl.groups == () and pl.base_snapshot_id is None and pl.is_empty
    p = part(key(), [data("a", records=1)], [eq("e", records=1)])
    pl = plan(table(p), POL, "auto", NOW)
    assert (pl.created_at, pl.base_snapshot_id, pl.base_sequence_number, pl.format_version) == (NOW, 42, 9, 2)
    assert pl.mode is CompactionMode.AUTO and pl.policy == POL and pl.table == IDENT
    assert pl.plan_id == pl.content_id() and len(pl.plan_id) == 20
    assert plan(table(p), POL, "auto", NOW, plan_id="run-7").plan_id == "run-7"
    later = plan(table(p), POL, "auto", NOW + dt.timedelta(seconds=1))
    assert later.plan_id != pl.plan_id


def test_plan_tasks_directly() -> None:
    p = part(key(), [data("a", records=1)], [eq("e", records=1)])
    q = part(key("US"), [data("b")])
    result = plan_tasks([(p, ev(p)), (q, ev(q))], POL)
    assert [t.partition for g in result.groups for t in g.tasks] == [key()]
    assert result.deferred == ()


# --------------------------------------------------------------------------------------------------------------
# Hypothesis


# The specs of the generated tables, each with one field list (as in Iceberg, a spec id never changes its fields):
# 0 unpartitioned, 1 identity(region), 2 identity(region) + day(ts), 3 void(region) (unpartitioned too, a dropped
# field of a v1 table). An unpartitioned spec has one partition: spec 0 only at index 0, spec 3 only at index 3.
# Spec 2's regions are drawn from spec 1's, so partitions of the two specs may overlap.
def _spec_key(draw: st.DrawFn, spec: int, index: int) -> PartitionKey:
    if spec == 0:
        return PartitionKey(0, ())
    if spec == 3:
        return PartitionKey(3, (PartitionFieldValue("region", "void", "region", None),))
    if spec == 2:
        region = PartitionFieldValue("region", "identity", "region", f"r{draw(st.integers(0, 7))}")
        return PartitionKey(2, (region, PartitionFieldValue("ts_day", "day", "ts", index)))
    return key(f"r{index}", spec)


@st.composite
def partition_states(draw: st.DrawFn, index: int, fv: int) -> PartitionState:
    if index == 0:
        spec = draw(st.sampled_from([0, 1]))
    elif index == 3:
        spec = draw(st.sampled_from([1, 2, 3]))
    elif index % 3 == 0:
        spec = draw(st.sampled_from([1, 2]))
    else:
        spec = 1
    k = _spec_key(draw, spec, index)
    n_data = draw(st.integers(0, 8))
    sizes = st.one_of(st.integers(0, 800), st.integers(1000, 5000))
    datas = [
        data(f"p{index}/d{i}", size=draw(sizes), records=draw(st.integers(0, 50)), seq=draw(st.integers(1, 5)))
        for i in range(n_data)
    ]
    deletes: list[DeleteFileInfo] = []
    for i in range(draw(st.integers(0, 6))):
        content = draw(st.sampled_from([DeleteContent.POSITION, DeleteContent.EQUALITY] + ([DeleteContent.DELETION_VECTOR] if fv == 3 else [])))
        seq = draw(st.integers(1, 6))
        size = draw(st.integers(0, 500))
        records = draw(st.integers(0, 30))
        refs = [f.path for f in datas] + [f"p{index}/gone"]
        if content is DeleteContent.EQUALITY:
            deletes.append(eq(f"p{index}/eq{i}", seq=seq, size=size, records=records))
        elif content is DeleteContent.POSITION:
            ref = draw(st.one_of(st.none(), st.sampled_from(refs)))
            deletes.append(pos(f"p{index}/pos{i}", ref=ref, seq=seq, size=size, records=records))
        else:
            deletes.append(dv(f"p{index}/puffin", draw(st.sampled_from(refs)), seq=seq, records=records, offset=i * 64, length=size))
    return part(k, datas, deletes)


@st.composite
def tables(draw: st.DrawFn) -> TableState:
    fv = draw(st.sampled_from([2, 3]))
    n = draw(st.integers(0, 8))
    parts = [draw(partition_states(i, fv)) for i in range(n)]
    return table(*parts, fv=fv)


policies = st.builds(
    CompactionPolicy,
    major_delete_ratio=st.sampled_from([0.1, 0.3, 0.9]),
    major_small_file_count=st.integers(2, 6),
    minor_delete_file_count=st.integers(1, 5),
    minor_on_equality_deletes=st.booleans(),
    target_file_size_bytes=st.sampled_from([1000, 2000]),
    max_bytes_per_run=st.sampled_from([1, 5000, 20000, 10**9]),
    max_partitions_per_run=st.integers(1, 8),
    weight_ratio=st.sampled_from([0.5, 2.0, 10.0]),
    parallel_multiple=st.integers(1, 3),
    parallelism=st.integers(1, 3),
    min_job_group_bytes=st.sampled_from([1, 3000, 256 * 1024 * 1024]),
)
modes = st.sampled_from(["auto", "minor", "major"])


def shuffled(t: TableState, rnd: random.Random) -> TableState:
    parts = []
    for p in t.partitions:
        d, x = list(p.data_files), list(p.delete_files)
        rnd.shuffle(d)
        rnd.shuffle(x)
        parts.append(dataclasses.replace(p, data_files=tuple(d), delete_files=tuple(x)))
    rnd.shuffle(parts)
    return dataclasses.replace(t, partitions=tuple(parts))


@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))  # max_examples: the profile
@given(t=tables(), pol=policies, mode=modes, rnd=st.randoms(use_true_random=False))
def test_property_deterministic_under_input_order(t: TableState, pol: CompactionPolicy, mode: str, rnd: random.Random) -> None:
    a = plan(t, pol, mode, NOW)
    b = plan(shuffled(t, rnd), pol, mode, NOW)
    assert a.to_json() == b.to_json()
    assert a == b


def _overlap(a: PartitionKey, b: PartitionKey) -> bool:
    """Whether the files of two partitions overlap (Iceberg projects a partition filter onto every spec): never for
    one spec; for two specs unless a field both have (source column and transform, not void) differs."""
    if a.spec_id == b.spec_id:
        return False
    va = {(f.source_column, f.transform): f.value for f in a.fields if f.transform != "void"}
    vb = {(f.source_column, f.transform): f.value for f in b.fields if f.transform != "void"}
    return all(va[c] == vb[c] for c in va.keys() & vb.keys())


def _overlap_units(keys: list[PartitionKey]) -> list[set[PartitionKey]]:
    """The partitions that are planned as one unit: connected components of :func:`_overlap`."""
    units: list[set[PartitionKey]] = []
    for k in keys:
        touching = [u for u in units if any(_overlap(k, o) for o in u)]
        merged = {k}.union(*touching)
        units = [u for u in units if u not in touching] + [merged]
    return units


def _elsewhere_bytes(t: TableState, k: PartitionKey) -> int:
    """docs/policy.md: the data bytes of the *other* partitions (any spec) that the partition's own global equality
    deletes (written under an unpartitioned spec) apply to, i.e. files with a lower data sequence number than its
    highest one; its full MAJOR rewrites them, its MINOR / selective MAJOR reads them for the table-wide conversion."""
    (p,) = [q for q in t.partitions if q.key == k]
    seqs = [d.data_sequence_number for d in p.delete_files if d.content is DeleteContent.EQUALITY]
    if not k.is_unpartitioned or not seqs:
        return 0
    return sum(f.size_bytes for q in t.partitions if q.key != k for f in q.data_files
               if f.data_sequence_number < max(seqs))


@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))  # max_examples: the profile
@given(t=tables(), pol=policies, mode=modes)
def test_property_plan_invariants(t: TableState, pol: CompactionPolicy, mode: str) -> None:
    pl = plan(t, pol, mode, NOW)
    states = {p.key: p for p in t.partitions}
    decisions = {d.partition: d for d in pl.decisions}
    assert list(decisions) == sorted(decisions, key=lambda k: (k.sort_key(), tuple((f.transform, f.source_column) for f in k.fields)))
    assert set(decisions) == set(states)

    # no file path in two groups; no data file in two tasks
    owner: dict[str, int] = {}
    for gid, path in pl.iter_files():
        assert owner.setdefault(path, gid) == gid, path
    data_paths = [p for task in pl.tasks for p in task.data_files]
    assert len(data_paths) == len(set(data_paths))

    # group count and group balance
    assert len(pl.groups) <= pol.parallelism * pol.parallel_multiple
    assert [g.group_id for g in pl.groups] == list(range(len(pl.groups)))
    assert all(g.tasks for g in pl.groups)
    units: dict[PartitionKey, int] = {}
    for task in pl.tasks:
        units[task.partition] = units.get(task.partition, 0) + task.estimated_cost_bytes
    if units:
        # Overlapping partitions of different specs are packed as one unit (one group): balance is over those units.
        merged = _overlap_units(sorted(units, key=lambda k: k.sort_key()))
        unit_costs = [sum(units[k] for k in u) for u in merged]
        group_of = {task.partition: g.group_id for g in pl.groups for task in g.tasks}
        assert all(len({group_of[k] for k in u}) == 1 for u in merged)
        k = min(pol.max_groups, len(unit_costs), max(1, math.ceil(sum(unit_costs) / pol.min_job_group_bytes)))
        assert len(pl.groups) <= k
        capacity = max(max(unit_costs), math.ceil(sum(unit_costs) / k))
        assert max(g.estimated_cost_bytes for g in pl.groups) <= 2 * capacity

    # caps: count and bytes (bytes = distinct files each partition reads, i.e. its decision cost)
    scheduled = pl.scheduled_partitions
    assert len(scheduled) <= pol.max_partitions_per_run
    assert sum(decisions[k].metrics["estimated_cost_bytes"] for k in scheduled) <= pol.max_bytes_per_run
    candidates = {k for k, d in decisions.items() if d.kind is not NONE}
    deferred = {d.partition for d in pl.deferred}
    assert set(scheduled) | deferred == candidates and not set(scheduled) & deferred
    if pol.enabled and candidates - set(scheduled) and len(scheduled) < pol.max_partitions_per_run:
        # anything deferred while the count cap was not hit must have been too big to fit the byte cap
        used = sum(decisions[k].metrics["estimated_cost_bytes"] for k in scheduled)
        for d in pl.deferred:
            assert used + d.estimated_cost_bytes > pol.max_bytes_per_run

    # split only by whole files of the partition; pieces carry all deletes; MINOR never split
    by_partition: dict[PartitionKey, list[object]] = {}
    for task in pl.tasks:
        by_partition.setdefault(task.partition, []).append(task)
    for pk, tasks in by_partition.items():
        st_ = states[pk]
        own_data = {f.path for f in st_.data_files}
        own_deletes = {d.path for d in st_.delete_files}
        pieces = [tk for tk in pl.tasks if tk.partition == pk]
        assert len({g.group_id for g in pl.groups for tk in g.tasks if tk.partition == pk}) == 1
        assert all(set(tk.data_files) <= own_data for tk in pieces)
        assert all(set(tk.delete_files) == own_deletes for tk in pieces)
        assert all(tk.kind is decisions[pk].kind for tk in pieces)
        assert [tk.piece_index for tk in pieces] == list(range(len(pieces)))
        assert all(tk.piece_count == len(pieces) for tk in pieces)
        if len(pieces) > 1:
            assert decisions[pk].kind is MAJOR
            sizes = {f.path: f.size_bytes for f in st_.data_files}
            assert all(sum(sizes[p] for p in tk.data_files) >= pol.target_file_size_bytes for tk in pieces)
        union = sorted(p for tk in pieces for p in tk.data_files)
        task_bytes = sum(f.size_bytes for f in st_.data_files if f.path in union)
        delete_bytes = len(pieces) * decisions[pk].metrics["delete_bytes"]
        elsewhere = _elsewhere_bytes(t, pk)  # other partitions' files its own global deletes reach (not task files)
        cost = sum(tk.estimated_cost_bytes for tk in pieces)
        # the pieces add up to the decision's cost, every further piece reading the delete files again
        per_piece = decisions[pk].metrics["delete_bytes"]
        assert cost == decisions[pk].metrics["estimated_cost_bytes"] + (len(pieces) - 1) * per_piece
        assert all(tk.full_rewrite == bool(decisions[pk].metrics["full_rewrite"]) for tk in pieces)
        if pieces[0].full_rewrite:  # every task file is rewritten, and the files elsewhere too
            assert task_bytes + elsewhere + delete_bytes == cost
        else:  # files only read for a conversion (elsewhere: all of them) cost a fraction of their bytes
            assert delete_bytes + int(CONVERSION_READ_FRACTION * (task_bytes + elsewhere)) <= cost
            assert cost <= task_bytes + elsewhere + delete_bytes
            if not decisions[pk].metrics["rewritten_data_files"]:  # a pure conversion: exactly
                assert cost == delete_bytes + int(CONVERSION_READ_FRACTION * (task_bytes + elsewhere))
        if len(pieces) > 1:
            assert pieces[0].full_rewrite

    # round trip
    assert CompactionPlan.from_json(pl.to_json()) == pl


@st.composite
def extra_deletes(draw: st.DrawFn, p: PartitionState, fv: int) -> list[DeleteFileInfo]:
    out = []
    refs = [f.path for f in p.data_files] + ["elsewhere"]
    for i in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["pos", "eq", "dv"] if fv == 3 else ["pos", "eq"]))
        seq, recs = draw(st.integers(1, 7)), draw(st.integers(0, 40))
        if kind == "eq":
            out.append(eq(f"extra-eq{i}", seq=seq, records=recs))
        elif kind == "pos":
            out.append(pos(f"extra-pos{i}", ref=draw(st.one_of(st.none(), st.sampled_from(refs))), seq=seq, records=recs))
        else:
            out.append(dv("extra-puffin", draw(st.sampled_from(refs)), seq=seq, records=recs, offset=1000 + i))
    return out


@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))  # max_examples: the profile
@given(data_=st.data(), fv=st.sampled_from([2, 3]), pol=policies, mode=modes)
def test_property_adding_deletes_never_lowers_decision(data_: st.DataObject, fv: int, pol: CompactionPolicy, mode: str) -> None:
    p = data_.draw(partition_states(1, fv))
    more = data_.draw(extra_deletes(p, fv))
    before = evaluate_partition(p, pol, mode, fv)
    after = evaluate_partition(dataclasses.replace(p, delete_files=p.delete_files + tuple(more)), pol, mode, fv)
    assert after.kind.rank >= before.kind.rank, (before.reason, after.reason)


@st.composite
def split_tables(draw: st.DrawFn) -> TableState:
    parts = []
    for i in range(draw(st.integers(1, 3))):
        n = draw(st.integers(2, 10))
        datas = [data(f"s{i}/d{j}", size=draw(st.integers(200, 5000)), seq=1) for j in range(n)]
        deletes = [eq(f"s{i}/e{j}", seq=2, size=draw(st.integers(0, 300))) for j in range(draw(st.integers(0, 2)))]
        parts.append(part(key(f"s{i}"), datas, deletes))
    return table(*parts)


@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))  # max_examples: the profile
@given(t=split_tables(), pol=policies)
def test_property_split_only_by_whole_files(t: TableState, pol: CompactionPolicy) -> None:
    pol = dataclasses.replace(pol, max_bytes_per_run=10**9, max_partitions_per_run=10)
    pl = plan(t, pol, "major", NOW)
    total = sum(d.metrics["estimated_cost_bytes"] for d in pl.decisions)
    average = total / pol.max_groups
    for p in t.partitions:
        pieces = [tk for tk in pl.tasks if tk.partition == p.key]
        decision = pl.decision_for(p.key)
        assert decision is not None
        if decision.kind is NONE:
            assert pieces == [] and "nothing to rewrite" in decision.reason
            continue
        selected = {f.path for f in p.data_files if f.size_bytes < pol.small_file_threshold_bytes or p.delete_files}
        # pieces partition exactly the selected whole files, no file is cut or duplicated
        got = [path for tk in pieces for path in tk.data_files]
        assert sorted(got) == sorted(selected)
        if len(pieces) > 1:
            data_bytes = sum(f.size_bytes for f in p.data_files if f.path in selected)
            delete_bytes = sum(d.size_bytes for d in p.delete_files)
            assert decision.metrics["estimated_cost_bytes"] > average
            assert delete_bytes == 0 or data_bytes / delete_bytes >= pol.weight_ratio
            assert len(pieces) <= math.ceil(decision.metrics["estimated_cost_bytes"] / average)
            assert all(tk.delete_files == tuple(sorted(d.path for d in p.delete_files)) for tk in pieces)


def test_evaluate_partition_disabled_policy_and_split_never_isolates_small_file() -> None:
    p = part(key(), [data("a", records=1)], [eq("e", records=1)])
    d = ev(p, dataclasses.replace(POL, enabled=False))
    assert (d.kind, d.reason) == (NONE, "compaction disabled by policy")
    # 4000 + 300 bytes in one heavy partition: a 2-way split would leave the 300-byte file alone -> no split
    lopsided = part(key(), [data("big", size=4000, seq=1), data("tiny", size=300, seq=1)], [eq("e", seq=2, size=10)])
    full = dataclasses.replace(POL, major_full_rewrite=True)
    (task,) = plan(table(lopsided), full, "major", NOW).tasks
    assert task.data_files == ("big", "tiny") and task.piece_count == 1 and task.full_rewrite
    # lower the target so both pieces are big enough -> split into 2
    split = plan(table(lopsided), dataclasses.replace(full, target_file_size_bytes=300), "major", NOW).tasks
    assert [t.data_files for t in split] == [("big",), ("tiny",)]


def test_small_runs_are_packed_into_fewer_job_groups() -> None:
    """Each job group is a spark-submit with a large fixed cost: do not split a small run into many."""
    parts = [_major_part(f"p{i}", 1000) for i in range(6)]
    many = plan(table(*parts), POL, "auto", NOW)
    assert len(many.groups) == POL.max_groups
    small = plan(table(*parts), dataclasses.replace(POL, min_job_group_bytes=2500), "auto", NOW)
    total = sum(g.estimated_cost_bytes for g in small.groups)
    assert len(small.groups) == -(-total // 2500) < POL.max_groups
    assert {t.partition for g in small.groups for t in g.tasks} == {t.partition for g in many.groups for t in g.tasks}


# --------------------------------------------------------------------------------------------------------------
# Fragments and segments (Amoro's split)

# target 1000 -> fragments < 125 bytes, small files < 750 bytes.


def test_fragments_plus_equality_deletes_trigger_minor_that_merges_the_fragments() -> None:
    segments = [data(f"seg{i}", size=900, records=1000, seq=1) for i in range(3)]
    fragments = [data(f"frag{i}", size=50, records=10, seq=2 + i) for i in range(6)]
    eqs = [eq(f"eq{i}", seq=3 + i, records=1, size=10) for i in range(6)]
    d = ev(part(key(), segments + fragments, eqs))
    assert (d.kind, d.reason) == (MINOR, "6 fragment files + 6 equality delete files >= 12 -> MINOR")
    assert d.metrics["fragment_files"] == 6 and d.metrics["rewritten_data_files"] == 6
    (task,) = plan(table(part(key(), segments + fragments, eqs)), POL, "auto", NOW).tasks
    # the fragments are merged; the segments are read (equality column only) for the conversion
    assert set(task.data_files) == {f.path for f in segments + fragments} and not task.full_rewrite
    assert task.estimated_cost_bytes == 6 * 50 + int(CONVERSION_READ_FRACTION * 3 * 900) + 6 * 10
    # one less fragment: the equality-delete rule still gives MINOR, with its own reason
    fewer = ev(part(key(), segments + fragments[1:], eqs))
    assert (fewer.kind, fewer.reason) == (MINOR, "6 equality delete files present -> MINOR")
    # fragments alone, no delete: MINOR only at the count
    assert ev(part(key(), [data(f"f{i}", size=10) for i in range(12)])).kind is MINOR
    assert ev(part(key(), [data(f"f{i}", size=10) for i in range(11)])).kind is NONE


def test_fragment_ratio_moves_the_fragment_threshold() -> None:
    files = [data(f"f{i}", size=200) for i in range(12)]  # >= 125: not fragments at the default ratio 8
    assert ev(part(key(), files)).metrics["fragment_files"] == 0
    assert ev(part(key(), files), dataclasses.replace(POL, fragment_ratio=4)).metrics["fragment_files"] == 12
    assert ev(part(key(), files), dataclasses.replace(POL, fragment_ratio=4)).kind is MINOR


def test_delete_heavy_segment_gets_a_selective_major() -> None:
    heavy, light = data("heavy", size=900, records=100), data("light", size=900, records=100)
    frag = data("frag", size=50, records=10)
    deletes = [pos("ph", ref="heavy", records=10), pos("pl", ref="light", records=9)]
    d = ev(part(key(), [heavy, light, frag], deletes))
    assert (d.kind, d.reason) == (MAJOR, "1 segment files with own delete ratio >= 0.10 -> MAJOR")
    assert d.metrics["full_rewrite"] == 0
    (task,) = plan(table(part(key(), [heavy, light, frag], deletes)), POL, "auto", NOW).tasks
    # the heavy segment and the small fragment are rewritten; the light segment (9 %) is left alone
    assert task.data_files == ("frag", "heavy") and not task.full_rewrite
    assert task.estimated_cost_bytes == 950 + 2 * 100
    # a position delete that names no single file is not a known per-file ratio (Iceberg's planner ignores it too)
    unscoped = ev(part(key(), [heavy, light], [pos("p", ref=None, records=15)]))
    assert unscoped.kind is NONE and unscoped.metrics["delete_heavy_segment_files"] == 0
    # below the ratio by one row
    assert ev(part(key(), [heavy], [pos("ph", ref="heavy", records=9)])).kind is NONE
    stricter = dataclasses.replace(POL, major_segment_delete_ratio=0.05)
    assert ev(part(key(), [heavy], [pos("ph", ref="heavy", records=9)]), stricter).kind is MAJOR


def test_partition_delete_ratio_and_full_switch_give_a_full_rewrite() -> None:
    files = [data("a", size=900, records=10), data("b", size=900, records=10)]
    ratio = plan(table(part(key(), files, [eq("e", records=10)])), POL, "auto", NOW)
    (task,) = ratio.tasks
    assert task.full_rewrite and task.data_files == ("a", "b")
    assert ratio.decisions[0].reason.startswith("delete ratio 0.50")
    light = part(key(), files, [eq("e", records=1)])
    (forced,) = plan(table(light), POL, "major", NOW).tasks
    assert not forced.full_rewrite and forced.data_files == ("a", "b")  # read for the conversion only
    assert forced.estimated_cost_bytes == int(CONVERSION_READ_FRACTION * 1800) + 100
    (full,) = plan(table(light), dataclasses.replace(POL, major_full_rewrite=True), "major", NOW).tasks
    assert full.full_rewrite and full.estimated_cost_bytes == 1800 + 100
    # the full switch also counts fragments as small files for the small-file trigger
    frags = [data(f"f{i}", size=10) for i in range(10)]
    assert ev(part(key(), frags)).kind is NONE
    d = ev(part(key(), frags), dataclasses.replace(POL, major_full_rewrite=True))
    assert (d.kind, d.reason) == (MAJOR, "10 small files (< 750 B) >= 10 -> MAJOR")


def test_minor_interval_uses_the_last_minor_time() -> None:
    p = part(key(), [data("f0", size=10), data("f1", size=10), data("seg", size=900)])
    pol = dataclasses.replace(POL, minor_interval_seconds=3600)
    assert plan(table(p), POL, "auto", NOW).decisions[0].kind is NONE  # interval off by default
    never = plan(table(p), pol, "auto", NOW).decisions[0]
    assert (never.kind, never.reason) == (MINOR, "no MINOR recorded >= interval 3600 s, 2 fragment files -> MINOR")
    recent = plan(table(p), pol, "auto", NOW, last_minor_at={key(): NOW - dt.timedelta(minutes=30)}).decisions[0]
    assert recent.kind is NONE
    old = plan(table(p), pol, "auto", NOW, last_minor_at={key(): NOW - dt.timedelta(hours=2)}).decisions[0]
    assert (old.kind, old.reason) == (MINOR, "last MINOR 7200 s ago >= interval 3600 s, 2 fragment files -> MINOR")
    # nothing to merge: the interval alone does not trigger
    lone = part(key(), [data("f0", size=10), data("seg", size=900)])
    assert plan(table(lone), pol, "auto", NOW).decisions[0].kind is NONE


# --------------------------------------------------------------------------------------------------------------
# Evolved specs: overlapping partitions of different specs are planned in one job group


def day_key(day: int, spec: int = 2, region: str | None = None) -> PartitionKey:
    fields = [PartitionFieldValue("ts_day", "day", "ts", day)]
    if region is not None:
        fields.append(PartitionFieldValue("region", "identity", "region", region))
    return PartitionKey(spec, tuple(fields))


def _groups_of(pl: CompactionPlan) -> dict[PartitionKey, int]:
    return {t.partition: g.group_id for g in pl.groups for t in g.tasks}


def test_unpartitioned_spec_partition_is_planned_with_every_partition_it_overlaps() -> None:
    """A rewrite filtered on the unpartitioned spec's partition (alwaysTrue) selects every file of the table: planned
    in another group than the current spec's partitions, their files were rewritten twice."""
    unpartitioned = PartitionKey(0, ())
    parts = [part(unpartitioned, [data(f"u{i}", 400) for i in range(3)])]
    parts += [part(day_key(d), [data(f"d{d}-{i}", 400) for i in range(3)]) for d in range(6)]
    spread = dataclasses.replace(POL, parallelism=3, parallel_multiple=2)
    single_spec = plan(table(*parts[1:]), spread, "major", NOW)
    assert len(single_spec.groups) > 1, "the current spec's partitions alone are spread over several groups"
    pl = plan(table(*parts), spread, "major", NOW)
    assert set(_groups_of(pl).values()) == {0} and len(_groups_of(pl)) == 7


def test_partitions_of_two_specs_overlap_only_where_their_shared_fields_agree() -> None:
    """``days(ts)`` -> ``days(ts), region``: spec 1's day=1 overlaps spec 2's day=1/region=*, never day=2."""
    parts = [part(day_key(d, spec=1), [data(f"a{d}-{i}", 400) for i in range(3)]) for d in (1, 2)]
    parts += [part(day_key(d, spec=2, region=r), [data(f"b{d}{r}-{i}", 400) for i in range(3)])
              for d in (1, 2) for r in ("EU", "US")]
    pl = plan(table(*parts), dataclasses.replace(POL, parallelism=4, parallel_multiple=2), "major", NOW)
    groups = _groups_of(pl)
    assert len(groups) == 6
    for d in (1, 2):
        assert groups[day_key(d, spec=1)] == groups[day_key(d, 2, "EU")] == groups[day_key(d, 2, "US")]
    assert groups[day_key(1, spec=1)] != groups[day_key(2, spec=1)]


def test_split_unpartitioned_full_major_pieces_carry_the_files_its_global_deletes_reach() -> None:
    """A full MAJOR of the unpartitioned spec's partition also rewrites the other partitions' files its global
    equality deletes apply to (docs/policy.md). Split by its own files, its first piece carries those bytes, so the
    pieces add up to its cost (and the job group packing sees them)."""
    unpartitioned = part(PartitionKey(0, ()), [data("a", 2000, seq=1), data("b", 2000, seq=1)],
                         [eq("e", seq=2, records=1000, size=10)])
    other = part(key("EU"), [data("x", 3000, seq=1)])
    pol = dataclasses.replace(POL, major_full_rewrite=True, parallelism=2, parallel_multiple=2)
    pl = plan(table(unpartitioned, other), pol, "major", NOW)
    d = pl.decision_for(PartitionKey(0, ()))
    assert d is not None and d.metrics["estimated_cost_bytes"] == 2000 + 2000 + 3000 + 10
    pieces = [t for t in pl.tasks if t.partition == PartitionKey(0, ())]
    assert [(t.data_files, t.estimated_cost_bytes) for t in pieces] == [(("a",), 2000 + 10 + 3000), (("b",), 2000 + 10)]
    assert len(pl.groups) == 1  # the unpartitioned partition overlaps every other partition


def test_clustering_strategy_major_rewrites_every_file_and_says_so() -> None:
    """Under sort / zorder a MAJOR rewrites every data file of the partition, large clean ones too (a file left out
    would overlap the clustered ones), and its cost counts them; MINOR is unchanged."""
    files = [data("big", size=5000), data("clean", size=4000)] + [data(f"s{i}", size=700) for i in range(10)]
    zorder = dataclasses.replace(POL, major_strategy="zorder", major_sort_columns="a, b")
    d = ev(part(key(), files), zorder)
    assert d.kind is MAJOR and d.metrics["full_rewrite"] == 1
    assert d.reason == ("10 small segment files (< 750 B) >= 10 -> MAJOR; zorder by a, b: every data file of the "
                        "partition rewritten")
    assert d.metrics["rewritten_data_files"] == 12 and d.metrics["estimated_cost_bytes"] == 5000 + 4000 + 7000
    binpack = ev(part(key(), files))
    assert binpack.metrics["rewritten_data_files"] == 10 and binpack.metrics["full_rewrite"] == 0
    eq_only = ev(part(key(), [data("a")], [eq("e")]), zorder)
    assert eq_only.kind is MINOR and eq_only.metrics["full_rewrite"] == 0
    tasks = plan(table(part(key(), files)), zorder, CompactionMode.AUTO, NOW).tasks  # pieces of one partition
    assert {p for t in tasks for p in t.data_files} == {f.path for f in files} and all(t.full_rewrite for t in tasks)


# --------------------------------------------------------------------------------------------------------------
# Re-planning with a PlanCache gives the plan planning from scratch gives


def _canonical_id(p: CompactionPlan) -> str:
    """The content id as defined: SHA-256 of the canonical JSON (json.dumps, indent None) of the content, each
    decision replaced by the hex SHA-256 of its own canonical JSON."""
    def dumps(value: object) -> str:
        return json.dumps(value, indent=None, sort_keys=False, allow_nan=False, ensure_ascii=False)

    content = p._content_dict()
    content["decisions"] = [hashlib.sha256(dumps(d).encode("utf-8")).hexdigest()
                            for d in content["decisions"]]  # type: ignore[union-attr]
    return hashlib.sha256(dumps(content).encode("utf-8")).hexdigest()[:20]


def _renamed(p: PartitionState, prefix: str) -> PartitionState:
    """``p`` with every file path (and named data file) under ``prefix``: unique across the table."""
    def rename(path: str | None) -> str | None:
        return None if path is None else f"{prefix}/{path}"

    return dataclasses.replace(
        p,
        data_files=tuple(dataclasses.replace(f, path=rename(f.path)) for f in p.data_files),
        delete_files=tuple(dataclasses.replace(d, path=rename(d.path), referenced_data_file=rename(d.referenced_data_file))
                           for d in p.delete_files))


@st.composite
def table_sequences(draw: st.DrawFn) -> list[TableState]:
    """A table, then states after commits: each keeps some partition objects as they are (untouched by the commit),
    rebuilds some as equal copies, replaces some with new content, drops or adds some (or, as most commits do,
    neither drops nor adds)."""
    first = draw(tables())
    states = [first]
    for step in range(draw(st.integers(1, 3))):
        parts: list[PartitionState] = []
        in_place = draw(st.booleans())
        for j, p in enumerate(states[-1].partitions):
            what = draw(st.sampled_from(["keep", "keep", "copy", "new"] if in_place else
                                        ["keep", "keep", "copy", "new", "drop"]))
            if what == "keep":
                parts.append(p)
            elif what == "copy":
                parts.append(dataclasses.replace(p))
            elif what == "new":
                fresh = _renamed(draw(partition_states(8, first.format_version)), f"s{step}n{j}")
                parts.append(dataclasses.replace(fresh, key=p.key))
        if not in_place and draw(st.booleans()):
            extra = _renamed(draw(partition_states(20 + step, first.format_version)), f"s{step}x")
            if extra.key not in {p.key for p in parts}:
                parts.append(extra)
        states.append(dataclasses.replace(states[-1], partitions=tuple(parts), snapshot_id=100 + step))
    return states


@settings(deadline=None, database=None, suppress_health_check=list(HealthCheck))  # max_examples: the profile
@given(seq=table_sequences(), pol=policies, mode=modes, interval=st.sampled_from([0, 60]),
       change_policy=st.booleans())
def test_property_plan_cache_gives_the_plan_from_scratch(seq: list[TableState], pol: CompactionPolicy, mode: str,
                                                          interval: int, change_policy: bool) -> None:
    pol = dataclasses.replace(pol, minor_interval_seconds=interval)
    cache = PlanCache()
    for i, t in enumerate(seq):
        policy = dataclasses.replace(pol, major_small_file_count=pol.major_small_file_count + (i % 2)) \
            if change_policy else pol
        # Some partitions had a MINOR a while ago (the interval rule reads the clock, never the cache).
        last_minor = {p.key: NOW - dt.timedelta(seconds=30 * (j % 4)) for j, p in enumerate(t.partitions) if j % 2}
        cached = plan(t, policy, mode, NOW, last_minor_at=last_minor, cache=cache)
        fresh = plan(t, policy, mode, NOW, last_minor_at=last_minor)
        assert cached.to_json() == fresh.to_json()
        assert cached == fresh
        assert cached.plan_id == _canonical_id(fresh)
    kept = [p for p in seq[-1].partitions if any(p is q for q in seq[-2].partitions)]
    global_deletes = any(p.key.is_unpartitioned and p.equality_delete_files for t in seq[-2:] for p in t.partitions)
    if len(seq) > 1 and not change_policy and kept and pol.enabled and not global_deletes:
        assert cache.reused == len(kept)


def test_plan_cache_reuses_unchanged_partitions_only(monkeypatch: pytest.MonkeyPatch) -> None:
    import compaction.core.planner as planner_module

    decided: list[PartitionKey] = []
    real_decide = planner_module._decide
    monkeypatch.setattr(planner_module, "_decide", lambda a, *rest: (decided.append(a.key), real_decide(a, *rest))[1])
    a = part(key("EU"), [data("a1"), data("a2")], [eq("ea", records=3)])
    b = part(key("US"), [data("b1", records=1)], [pos("pb", ref="b1")])
    c = part(key("AP"), [data("c1", size=100), data("c2", size=100), data("c3", size=100)])
    cache = PlanCache()
    first = plan(table(a, b, c), POL, "auto", NOW, cache=cache)
    assert cache.reused == 0 and len(decided) == 3
    b2 = part(key("US"), [data("b1", records=1), data("b2")], [pos("pb", ref="b1")])
    decided.clear()
    second = plan(table(a, b2, c), POL, "auto", NOW, cache=cache)
    assert cache.reused == 2  # a and c: the same objects
    assert decided == [key("US")]  # the same keys in the same places: only the new object is decided
    assert second == plan(table(a, b2, c), POL, "auto", NOW)
    assert first.decision_for(key("EU")) is second.decision_for(key("EU"))
    # A partition added: every partition is visited again, the unchanged ones keep their decisions.
    d = part(key("SA"), [data("d1")])
    decided.clear()
    third = plan(table(a, b2, c, d), POL, "auto", NOW, cache=cache)
    assert cache.reused == 3 and decided == [key("SA")]
    assert third == plan(table(a, b2, c, d), POL, "auto", NOW)
    # Another policy: nothing is reused.
    plan(table(a, b2, c), dataclasses.replace(POL, major_small_file_count=9), "auto", NOW, cache=cache)
    assert cache.reused == 0
