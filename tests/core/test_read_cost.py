"""The read-cost model (compaction.core.read_cost) and how the planner decides by it."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compaction.core.errors import ConfigError
from compaction.core.model import DataFileInfo, DeleteContent, DeleteFileInfo, PartitionFieldValue, PartitionKey
from compaction.core.model import PartitionState, TableIdentity, TableState
from compaction.core.planner import CompactionKind, evaluate_partition, plan, read_costs
from compaction.core.policy import CompactionPolicy
from compaction.core.read_cost import MIB, ReadCostCoefficients, ReadShape, compacted_shape, rewritten_shape

NONE, MINOR, MAJOR = CompactionKind.NONE, CompactionKind.MINOR, CompactionKind.MAJOR
TARGET = 64 * MIB
#: Round coefficients, so that the expected figures can be worked out by hand.
COEFFICIENTS = ReadCostCoefficients(data_file_ms=10.0, data_mib_ms=1.0, position_delete_read_ms=5.0,
                                    position_delete_row_ms=0.0, position_filtered_file_ms=0.0,
                                    dv_read_ms=1.0, equality_delete_file_ms=4.0,
                                    equality_delete_row_ms=0.0, equality_probe_mib_ms=0.5)
POL = CompactionPolicy(
    target_file_size_bytes=TARGET, min_job_group_bytes=1, read_cost_max_overhead=1.5, read_cost_min_saving_ms=20.0,
    # the count rules out of the way, unless a test says otherwise
    major_small_file_count=1000, minor_fragment_file_count=1000, minor_delete_file_count=1000,
    minor_on_equality_deletes=False, minor_max_position_deletes_per_file=1000,
    **{f"read_cost_{f.name}": getattr(COEFFICIENTS, f.name) for f in dataclasses.fields(COEFFICIENTS)},
)
KEY = PartitionKey(1, (PartitionFieldValue("region", "identity", "region", "EU"),))


def data(path: str, mib: float, records: int = 1000, seq: int = 1) -> DataFileInfo:
    return DataFileInfo(path, int(mib * MIB), records, seq)


def part(datas: list[DataFileInfo], deletes: list[DeleteFileInfo] | None = None) -> PartitionState:
    return PartitionState(KEY, tuple(datas), tuple(deletes or ()))


def ev(p: PartitionState, policy: CompactionPolicy = POL, fv: int = 2):  # type: ignore[no-untyped-def]
    return evaluate_partition(p, policy, "auto", fv)


def test_shapes_price_linearly_and_add_up() -> None:
    a = ReadShape(data_files=2, data_mib=3.0, position_delete_reads=1, dv_reads=4, equality_delete_files=1,
                  equality_probe_mib=2.0)
    assert COEFFICIENTS.cost_ms(a) == 2 * 10 + 3 * 1 + 5 + 4 * 1 + 4 + 2 * 0.5
    assert COEFFICIENTS.cost_ms(a + a) == 2 * COEFFICIENTS.cost_ms(a)
    assert ReadCostCoefficients.from_tuple(COEFFICIENTS.as_tuple()) == COEFFICIENTS
    with pytest.raises(ValueError):
        ReadCostCoefficients.from_tuple((1.0,))


def test_compacted_copy_holds_the_live_rows_in_target_size_files() -> None:
    assert compacted_shape(200 * MIB, 10, 0.0, TARGET) == ReadShape(data_files=4, data_mib=200.0)
    assert compacted_shape(200 * MIB, 10, 0.5, TARGET) == ReadShape(data_files=2, data_mib=100.0)
    assert compacted_shape(1 * MIB, 10, 0.0, TARGET) == ReadShape(data_files=1, data_mib=1.0)
    assert compacted_shape(200 * MIB, 0, 0.0, TARGET) == ReadShape()  # no rows: nothing to read
    assert compacted_shape(200 * MIB, 10, 1.0, TARGET) == ReadShape()  # every row deleted


@pytest.mark.parametrize("dvs", [False, True])
def test_a_rewrite_leaves_one_delete_per_kept_file_with_deletes(dvs: bool) -> None:
    now = ReadShape(data_files=10, data_mib=100.0, position_delete_reads=30, position_delete_rows=300,
                    equality_delete_files=5, equality_delete_rows=50, equality_probe_mib=100.0)
    after = rewritten_shape(now, rewritten_files=6, rewritten_bytes=20 * MIB, deleted_fraction=0.0,
                            kept_with_deletes=4, kept_delete_rows=40, target_file_size=TARGET, deletion_vectors=dvs)
    assert after.data_files == 10 - 6 + 1
    assert after.data_mib == pytest.approx(100.0)
    assert (after.dv_reads, after.position_delete_reads) == ((4, 0) if dvs else (0, 4))
    assert after.position_filtered_files == 4  # every kept file with deletes is still filtered by position
    assert after.equality_delete_files == after.equality_delete_rows == 0 and after.equality_probe_mib == 0


def test_many_small_files_below_every_count_threshold_get_a_minor_by_read_cost() -> None:
    # 20 fragments of 1 MiB: 20 opens (200 ms) + 20 ms of bytes vs one 20 MiB file (10 + 20 ms): 7.3x.
    p = part([data(f"f{i:02}", 1) for i in range(20)])
    d = ev(p)
    assert d.kind is MINOR
    assert d.metrics["read_cost_ms"] == pytest.approx(220.0, rel=1e-3)
    assert d.metrics["read_cost_compacted_ms"] == pytest.approx(30.0, rel=1e-3)
    assert d.metrics["read_cost_overhead"] == pytest.approx(220 / 30, rel=1e-3)
    assert d.metrics["read_cost_after_ms"] == pytest.approx(30.0, rel=1e-3)
    assert "read cost 7.33x a compacted copy's" in d.reason and "-> MINOR" in d.reason
    # the model off: the count rules alone, which do not fire
    assert ev(p, dataclasses.replace(POL, read_cost_max_overhead=0)).kind is NONE
    assert "read_cost_ms" not in ev(p, dataclasses.replace(POL, read_cost_max_overhead=0)).metrics


def test_a_saving_below_the_minimum_is_left_alone() -> None:
    p = part([data(f"f{i}", 1) for i in range(3)])  # 3 opens vs 1: 3 x overhead, but 20 ms saved per scan
    assert ev(p).kind is MINOR
    assert ev(p, dataclasses.replace(POL, read_cost_min_saving_ms=25.0)).kind is NONE
    assert ev(p, dataclasses.replace(POL, read_cost_max_overhead=4.0)).kind is NONE  # under the limit


def _segments_with_deletes(dvs: bool) -> PartitionState:
    """4 segments (60 MiB each), each with its own 5 position deletes (or one DV), and 20 fragments with an equality
    delete over all of them."""
    segments = [data(f"s{i}", 60, records=100_000) for i in range(4)]
    fragments = [data(f"f{i:02}", 1, records=1000, seq=3) for i in range(20)]
    deletes: list[DeleteFileInfo] = []
    for i in range(4):
        if dvs:
            deletes.append(DeleteFileInfo(f"dv{i}", DeleteContent.DELETION_VECTOR, 1000, 10, 2,
                                          referenced_data_file=f"s{i}", content_offset=4, content_size_bytes=50))
        else:
            deletes += [DeleteFileInfo(f"p{i}_{j}", DeleteContent.POSITION, 1000, 2, 2, referenced_data_file=f"s{i}")
                        for j in range(5)]
    deletes.append(DeleteFileInfo("e0", DeleteContent.EQUALITY, 1000, 10, 4, equality_ids=(1,)))
    return part(segments + fragments, deletes)


def test_minor_is_raised_to_major_when_it_would_leave_the_partition_over_the_limit() -> None:
    p = _segments_with_deletes(dvs=False)
    by_count = dataclasses.replace(POL, minor_on_equality_deletes=True)
    d = ev(p, by_count)
    # after the MINOR: 4 segments + 1 merged file, 4 position deletes: 50 + 260 + 20 = 330 ms vs the compacted
    # copy's 5 files (50 + 260): 1.06x <= 1.5, so the MINOR the count rule chose stays.
    assert d.kind is MINOR
    strict = dataclasses.replace(by_count, read_cost_max_overhead=1.02, read_cost_min_saving_ms=5.0)
    d = ev(p, strict)
    assert d.kind is MAJOR
    assert "MINOR would leave 1.06x > 1.02" in d.reason
    assert d.metrics["read_cost_after_ms"] < 330


def test_the_count_rules_stay_guards_the_model_never_lowers_a_decision() -> None:
    # delete ratio 0.5 >= 0.3: MAJOR by the count rule, whatever the model says of a 2-file partition
    p = part([data("a", 1, records=10), data("b", 1, records=10)],
             [DeleteFileInfo("p", DeleteContent.POSITION, 100, 10, 2, referenced_data_file="a")])
    d = ev(p, dataclasses.replace(POL, major_delete_ratio=0.3, read_cost_max_overhead=100.0))
    assert d.kind is MAJOR and d.reason.startswith("delete ratio")


def test_v3_prices_the_deletion_vectors_a_minor_leaves() -> None:
    p = _segments_with_deletes(dvs=True)
    (_, estimate), = read_costs(TableState(TableIdentity("c", ("db",), "t"), 3, 1, 1, {}, (p,)), POL).values()
    assert estimate.after_minor is not None and estimate.after_minor.dv_reads == 4
    assert estimate.after_minor.position_delete_reads == 0
    assert estimate.after_full is not None and estimate.after_full.dv_reads == 0


def test_plan_decisions_carry_the_estimates_and_the_mode_switches_keep_their_meaning() -> None:
    state = TableState(TableIdentity("c", ("db",), "t"), 2, 1, 1, {}, (part([data(f"f{i:02}", 1) for i in range(20)]),))
    now = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    (decision,) = plan(state, POL, "auto", now).decisions
    assert decision.kind is MINOR and decision.metrics["read_cost_overhead"] > 1.5
    # explicit modes are the user's choice: no estimate changes them
    (decision,) = plan(state, POL, "major", now).decisions
    assert decision.kind is NONE or "read cost" not in decision.reason


@pytest.mark.parametrize("value", ["0.5", "-1", "abc"])
def test_bad_limits_are_rejected_naming_the_key(value: str) -> None:
    with pytest.raises(ConfigError, match="compaction.read-cost.max-overhead"):
        CompactionPolicy.resolve({"compaction.read-cost.max-overhead": value})
    with pytest.raises(ConfigError, match="compaction.read-cost.dv-read-ms"):
        CompactionPolicy.resolve({"compaction.read-cost.dv-read-ms": "-2" if value != "abc" else value})


def test_coefficients_resolve_from_table_properties() -> None:
    pol = CompactionPolicy.resolve({"compaction.read-cost.data-file-ms": "3.5", "compaction.read-cost.max-overhead": "0"})
    assert pol.read_cost_coefficients.data_file_ms == 3.5 and not pol.read_cost_enabled


_RANK = {(NONE, False): 0, (MINOR, False): 1, (MAJOR, False): 2, (MAJOR, True): 3}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.sampled_from([0.5, 1, 4, 30, 60, 70]), min_size=1, max_size=12),
    n_pos=st.integers(0, 6), n_eq=st.integers(0, 3), limit=st.sampled_from([0.0, 1.2, 1.5, 3.0]),
    fv=st.sampled_from([2, 3]),
)
def test_property_the_model_only_raises_and_only_for_a_predicted_gain(sizes: list[float], n_pos: int, n_eq: int,
                                                                    limit: float, fv: int) -> None:
    files = [data(f"d{i:02}", s, records=1000) for i, s in enumerate(sizes)]
    deletes = [DeleteFileInfo(f"p{j}", DeleteContent.POSITION, 500, 3, 2, referenced_data_file=files[j % len(files)].path)
               for j in range(n_pos)]
    deletes += [DeleteFileInfo(f"e{j}", DeleteContent.EQUALITY, 500, 5, 2, equality_ids=(1,)) for j in range(n_eq)]
    p = part(files, deletes)
    guarded = dataclasses.replace(POL, major_small_file_count=4, minor_fragment_file_count=6,
                                  minor_on_equality_deletes=True, read_cost_max_overhead=limit)
    base = ev(p, dataclasses.replace(guarded, read_cost_max_overhead=0), fv)
    d = ev(p, guarded, fv)
    rank = _RANK[(d.kind, bool(d.metrics.get("full_rewrite", 0)))]
    base_rank = _RANK[(base.kind, bool(base.metrics.get("full_rewrite", 0)))]
    assert rank >= base_rank
    if rank > base_rank:
        assert "read cost" in d.reason
        assert d.metrics["read_cost_overhead"] > limit or d.metrics["read_cost_after_ms"] < d.metrics["read_cost_ms"]
        assert d.metrics["read_cost_after_ms"] <= d.metrics["read_cost_ms"] - guarded.read_cost_min_saving_ms + 1e-6
    else:
        assert d.kind is base.kind


def test_a_data_file_filtered_by_position_counts_once_whatever_the_delete_files_behind_it() -> None:
    segments = [data(f"s{i}", 60, records=100_000) for i in range(4)]
    # one partition-scoped position delete file over 4 segments; one file-scoped delete for each of 2 segments and
    # 3 more for the first; a DV on each of 3 segments (v3)
    partition_scoped = part(segments, [DeleteFileInfo("p", DeleteContent.POSITION, 1000, 8, 2)])
    file_scoped = part(segments, [DeleteFileInfo(f"p{i}_{j}", DeleteContent.POSITION, 1000, 2, 2,
                                                 referenced_data_file=f"s{i}")
                                  for i in range(2) for j in range(4 if i == 0 else 1)])
    dvs = part(segments, [DeleteFileInfo(f"dv{i}", DeleteContent.DELETION_VECTOR, 1000, 2, 2,
                                         referenced_data_file=f"s{i}", content_offset=4, content_size_bytes=50)
                          for i in range(3)])
    table = TableIdentity("c", ("db",), "t")
    (shared, _), = read_costs(TableState(table, 2, 1, 1, {}, (partition_scoped,)), POL).values()
    (own, _), = read_costs(TableState(table, 2, 1, 1, {}, (file_scoped,)), POL).values()
    (vectors, _), = read_costs(TableState(table, 3, 1, 1, {}, (dvs,)), POL).values()
    assert (shared.position_delete_reads, shared.position_filtered_files, shared.position_delete_rows) == (4, 4, 32)
    assert (own.position_delete_reads, own.position_filtered_files, own.position_delete_rows) == (5, 2, 10)
    assert (vectors.dv_reads, vectors.position_filtered_files) == (3, 3)
    priced = dataclasses.replace(POL, read_cost_position_delete_read_ms=0.0,
                                 read_cost_position_filtered_file_ms=3.0).read_cost_coefficients
    assert priced.cost_ms(shared) - priced.cost_ms(own) == pytest.approx((4 - 2) * 3.0)
