"""MINOR against concurrent commits on the PostgreSQL catalog, with deterministic interleavings.

The racing commit is made at a chosen point of the MINOR attempt (between reading and committing), by wrapping
the module function that runs there; the same holds the other way round for a MAJOR whose rewrite is overtaken by
a MINOR. Nothing is mocked: every commit is a real Iceberg commit on a real catalog.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from typing import Any, Callable

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.metadata.inspect import inspect_table
from compaction.spark import jvm as J
from compaction.spark import major as major_module
from compaction.spark import job as job_module
from compaction.spark import task as task_module
from compaction.spark import minor as minor_module
from compaction.spark.equality_deletes import EqualityDeleteSpec, write_and_commit
from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, run_group
from compaction.spark.validation import ValidationLevel
from icecompact_testing.oracle import read_table
from compaction.demo.workload import BASE_TS_US, WorkloadSpec, generate, spark_rows, ts_from_micros

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
TABLE = "race.t"
NO_FRAGMENTS = {"fragment_ratio": 1 << 40}  # MINOR converts and merges deletes only (no data file is a fragment)
FULL = {"major_full_rewrite": True}


def _run(spark, catalog: CatalogConfig, mode: CompactionMode,  # type: ignore[no-untyped-def]
         overrides: dict[str, Any] | None = None) -> list[Any]:
    state = inspect_table(catalog, TABLE)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), mode, NOW)
    assert compaction_plan.groups, f"nothing planned for {mode}"
    results = [run_group(spark, compaction_plan, g.group_id, level=ValidationLevel.COUNT, max_retries=3)
               for g in compaction_plan.groups]
    return [p for r in results for p in r.partitions]


def _workload(spark, catalog: CatalogConfig, format_version: int):  # type: ignore[no-untyped-def]
    # One day partition, CDC with equality deletes, no nulls: the racing writer's model stays exact.
    spec = WorkloadSpec(seed=41, format_version=format_version, partitioning="days_ts", days_span=1, commits=3,
                        rows_per_commit=40, eq_delete_fraction=0.8, null_key_fraction=0.0, use_equality_deletes=True)
    return generate(spark, catalog, TABLE, spec)


def _once(action: Callable[[], None]) -> Callable[[], None]:
    done = {"n": 0}

    def run() -> None:
        if done["n"] == 0:
            done["n"] += 1
            action()
    return run


@pytest.mark.parametrize("race_point", ["before-own-check", "after-own-check"])
def test_minor_racing_a_major_never_resurrects_rows(spark, postgres_catalog: CatalogConfig, monkeypatch,
                                                     race_point: str) -> None:  # type: ignore[no-untyped-def]
    workload = _workload(spark, postgres_catalog, format_version=2)
    expected = read_table(postgres_catalog.load().load_table(workload.identifier)).rows
    assert expected == workload.expected_rows
    original = minor_module.check_no_conflicting_changes
    majors: list[Any] = []
    race = _once(lambda: majors.extend(_run(spark, postgres_catalog, CompactionMode.MAJOR, FULL)))

    def racing_check(spark_, table, expression, base_id, commit_id, work):  # type: ignore[no-untyped-def]
        # "before": the MAJOR commits before our own check (it must refuse); "after": between our check and our
        # commit (Iceberg's validateDataFilesExist inside the commit must refuse).
        if commit_id is None and race_point == "before-own-check":
            race()
        original(spark_, table, expression, base_id, commit_id, work)
        if commit_id is None and race_point == "after-own-check":
            race()

    monkeypatch.setattr(minor_module, "check_no_conflicting_changes", racing_check)
    minors = _run(spark, postgres_catalog, CompactionMode.MINOR, NO_FRAGMENTS)

    assert majors and all(p.status == COMMITTED for p in majors), [(p.label, p.status, p.error) for p in majors]
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in minors), [(p.label, p.status, p.error) for p in minors]
    raced = minors[0]
    assert raced.conflicts, "the MINOR overtaken by a MAJOR must have failed validation and retried"
    message = raced.conflicts[0]["message"]
    if race_point == "before-own-check":
        assert "removed data file" in message, message
    else:
        assert "ValidationException" in raced.conflicts[0]["error_class"] + message, message
    final = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected


def test_major_overtaken_by_a_minor_fails_validation_and_retries(spark, postgres_catalog: CatalogConfig,
                                                                  monkeypatch) -> None:  # type: ignore[no-untyped-def]
    workload = _workload(spark, postgres_catalog, format_version=3)
    expected = read_table(postgres_catalog.load().load_table(workload.identifier)).rows
    original = major_module.rewrite_partition
    minors: list[Any] = []
    race = _once(lambda: minors.extend(_run(spark, postgres_catalog, CompactionMode.MINOR, NO_FRAGMENTS)))

    def overtaken_rewrite(spark_, table, *args, **kwargs):  # type: ignore[no-untyped-def]
        race()  # commits through its own table instance; the MAJOR's instance still plans from the old snapshot
        return original(spark_, table, *args, **kwargs)

    monkeypatch.setattr(major_module, "rewrite_partition", overtaken_rewrite)
    majors = _run(spark, postgres_catalog, CompactionMode.MAJOR, FULL)

    assert minors and all(p.status == COMMITTED for p in minors), [(p.label, p.status, p.error) for p in minors]
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in majors), [(p.label, p.status, p.error) for p in majors]
    assert majors[0].conflicts, "the MAJOR overtaken by a MINOR must have failed validation and retried"
    final = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert not final.applicable_deletes


@pytest.mark.parametrize("format_version", [2, 3])
def test_minor_racing_appends_and_new_equality_deletes_succeeds(spark, postgres_catalog: CatalogConfig, monkeypatch,
                                                                 format_version: int) -> None:  # type: ignore[no-untyped-def]
    workload = _workload(spark, postgres_catalog, format_version=format_version)
    expected: Counter = Counter(read_table(postgres_catalog.load().load_table(workload.identifier)).rows)
    live_ids = sorted({row[0] for row in expected})

    def writer() -> None:
        ts_us = BASE_TS_US + 3_600_000_000
        spark.sql(f"INSERT INTO {workload.table} VALUES (9000001, 'EU', timestamp_micros({ts_us}), 7, 'concurrent')")
        expected[(9000001, "EU", ts_from_micros(ts_us), 7, "concurrent")] += 1
        victim = live_ids[len(live_ids) // 2]
        table = J.load_table(spark, workload.table)
        write_and_commit(spark, table, [EqualityDeleteSpec(("id",), ((victim,),), partition=(19723,))])
        for row in [r for r in expected if r[0] == victim]:
            del expected[row]

    original = minor_module.check_no_conflicting_changes
    race = _once(writer)

    def racing_check(spark_, table, expression, base_id, commit_id, work):  # type: ignore[no-untyped-def]
        original(spark_, table, expression, base_id, commit_id, work)
        if commit_id is None:
            race()

    monkeypatch.setattr(minor_module, "check_no_conflicting_changes", racing_check)
    minors = _run(spark, postgres_catalog, CompactionMode.MINOR)
    assert [p.status for p in minors] == [COMMITTED], [(p.label, p.status, p.error) for p in minors]
    assert not minors[0].conflicts, minors[0].conflicts
    final = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    # The writer's equality delete (newer than the MINOR's base) is still there and still applies.
    assert sum(1 for d in final.delete_files if d.delete_kind == "equality") == 1


@pytest.mark.parametrize("format_version", [2, 3])
def test_equality_delete_committed_while_minor_merges_fragments_still_applies(  # type: ignore[no-untyped-def]
        spark, postgres_catalog: CatalogConfig, monkeypatch, format_version: int) -> None:
    """A writer commits an equality delete of a key whose row is in a fragment file while MINOR's rewrite of the
    fragments runs: the rewrite keeps its starting sequence number, so the delete still applies to the merged
    file (and the conversion that follows turns it into a position delete / DV): the row stays deleted."""
    workload = _workload(spark, postgres_catalog, format_version=format_version)
    expected: Counter = Counter(read_table(postgres_catalog.load().load_table(workload.identifier)).rows)
    live_ids = sorted({row[0] for row in expected})
    victims = [live_ids[0], live_ids[-1]]  # the newest key is in the newest fragment

    def writer() -> None:
        table = J.load_table(spark, workload.table)
        write_and_commit(spark, table, [EqualityDeleteSpec(("id",), tuple((v,) for v in victims), partition=(19723,))])
        for row in [r for r in expected if r[0] in victims]:
            del expected[row]

    original = job_module.rewrite_partition
    race = _once(writer)
    rewrites: list[int] = []

    def racing_rewrite(spark_, table, *args, **kwargs):  # type: ignore[no-untyped-def]
        race()  # committed through another table instance: the rewrite plans from the older snapshot
        out = original(spark_, table, *args, **kwargs)
        rewrites.append(out[0])
        return out

    for module in (job_module, task_module):
        monkeypatch.setattr(module, "rewrite_partition", racing_rewrite)
    minors = _run(spark, postgres_catalog, CompactionMode.MINOR)
    assert all(p.status in (COMMITTED, NO_OP) for p in minors), [(p.label, p.status, p.error) for p in minors]
    assert sum(rewrites) > 0, "no fragment was merged"
    assert sum(p.rewritten_data_files for p in minors) > 0
    final = read_table(postgres_catalog.load().load_table(workload.identifier))
    assert final.rows == expected, "rows lost or resurrected"
    assert spark_rows(spark, workload.table) == expected
    assert not any(r[0] in victims for r in final.rows)
