"""The table history as the commit gate reads it (compaction.spark.gate, compaction.core.dml_history): real Spark
merge-on-read DML, a streaming append and our own compaction commit on a real Iceberg table; only the DML of other
writers makes the table's cadence."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from types import SimpleNamespace

from compaction.catalog import CatalogConfig
from compaction.core.dml_history import dml_cadence, fails_dml_in_flight, is_validating_dml
from compaction.core.plan import CompactionMode
from compaction.core.policy import CompactionPolicy
from compaction.core.posthoc import PLAN_PROPERTY
from compaction.demo.workload import WorkloadSpec, generate
from compaction.spark import jvm as J
from compaction.spark.gate import (
    LANDING_DEFAULT_S,
    LANDING_SAMPLES,
    _History,
    _history_of,
    commit_window,
    gated,
    wait_before_work,
)
from icecompact_testing.inprocess import compact_in_process

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def test_history_counts_the_dml_of_other_writers_not_appends_or_ours(  # type: ignore[no-untyped-def]
        spark, sqlite_catalog: CatalogConfig) -> None:
    workload = generate(spark, sqlite_catalog, "cdc.dml_history", WorkloadSpec(
        seed=61, format_version=2, partitioning="days_ts", days_span=2, commits=2, rows_per_commit=40,
        use_equality_deletes=True, eq_delete_fraction=0.5))
    table = workload.table
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('write.delete.mode' = 'merge-on-read', "
              "'write.update.mode' = 'merge-on-read')")
    history = _History()
    jtable = J.load_table(spark, table)
    # The workload's own DELETE / UPDATE commits.
    workload_dml = sum(is_validating_dml(v) for v in history.recent(jtable, refresh=True))
    ids = [int(r[0]) for r in spark.sql(f"SELECT id FROM {table} WHERE id IS NOT NULL ORDER BY id LIMIT 3").collect()]
    for i in ids[:2]:
        spark.sql(f"DELETE FROM {table} WHERE id = {i}")
    spark.sql(f"UPDATE {table} SET id = id WHERE id = {ids[2]}")
    views = history.recent(jtable, refresh=True)
    dml = [v for v in views if is_validating_dml(v)]
    assert len(dml) == workload_dml + 3, [(v.operation, dict(v.summary)) for v in views]
    assert [v.operation for v in dml[:3]] == ["overwrite", "delete", "delete"]  # newest first
    assert all(int(v.summary["added-position-delete-files"]) > 0 for v in dml[:3])
    cadence = dml_cadence(views)
    assert cadence is not None and cadence.commits == min(12, len(dml)) and cadence.last_at == dml[0].committed_at

    compact_in_process(spark, sqlite_catalog, "cdc.dml_history", CompactionMode.MINOR, now=NOW, clean=True)
    spark.sql(f"INSERT INTO {table} SELECT * FROM {table} LIMIT 1")
    again = history.recent(jtable, refresh=True)
    new = again[:len(again) - len(views)]
    assert again[len(new):] == views  # the snapshots read before come from the cache, unchanged
    assert {v.operation for v in new} >= {"append"}
    assert any(v.summary.get(PLAN_PROPERTY) for v in new), "our MINOR's snapshot"
    assert not any(is_validating_dml(v) for v in new)
    # A DML running across our commit would have failed: the gap it falls in says nothing about the DML's rhythm.
    assert any(fails_dml_in_flight(v) for v in new) and not any(fails_dml_in_flight(v) for v in dml)
    # The same cadence; the append after the last DML shows the table is written to (a lone DML would be waited for).
    assert not cadence.written_after
    assert dml_cadence(again) == dataclasses.replace(cadence, written_after=True)


def test_a_commit_is_expected_to_land_as_slowly_as_the_slowest_recent_one() -> None:
    history = _History()
    assert history.landing_s() == LANDING_DEFAULT_S
    history.landed(6.5)
    history.landed(1.2)
    assert history.landing_s() == 6.5
    for _ in range(LANDING_SAMPLES):
        history.landed(0.8)
    assert history.landing_s() == 0.8  # only the recent ones count


def test_a_rewrite_is_expected_to_work_as_long_as_the_recent_ones_of_its_kind_typically_did() -> None:
    history = _History()
    assert history.work_s("minor file rewrite") is None  # none measured yet: the work starts without waiting
    for seconds in (1.2, 9.0, 1.0):
        history.worked("minor file rewrite", seconds)
    history.worked("major", 7.0)
    assert history.work_s("minor file rewrite") == 1.2  # one slow merge does not make every later one wait
    assert history.work_s("major") == 7.0  # a MAJOR's work is not a fragment merge's
    for _ in range(LANDING_SAMPLES):
        history.worked("minor file rewrite", 2.0)
    assert history.work_s("minor file rewrite") == 2.0  # only the recent ones count


def test_a_rewrites_work_is_timed_from_its_start_decision_to_its_commit_window() -> None:
    # What the start decision needs is everything between it and the commit window: the scans and the action's
    # planning before the rewrite count as much as the writing.
    plan = SimpleNamespace(table=SimpleNamespace(dotted="db.work_timing"), policy=CompactionPolicy())
    with gated(None, plan):  # type: ignore[arg-type]
        history = _history_of("db.work_timing")
        assert not wait_before_work("major", table=None)  # nothing measured yet: starts at once
        time.sleep(0.2)
        with commit_window("a conversion", table=None, work_of=None):
            pass
        assert history.work_s("major") is None  # not a rewrite's commit
        with commit_window("file rewrite", table=None, work_of="minor file rewrite"):
            pass
        assert history.work_s("minor file rewrite") is None  # not the rewrite that started
        with commit_window("file rewrite", table=None, work_of="major"):
            pass
        measured = history.work_s("major")
        assert measured is not None and measured >= 0.2
        with commit_window("file rewrite", table=None, work_of="major"):
            pass
        assert history.work_s("major") == measured  # one start, one measure
    off = SimpleNamespace(table=SimpleNamespace(dotted="db.work_timing_off"),
                          policy=CompactionPolicy.resolve({"compaction.yield.dml-history": "false"}))
    with gated(None, off):  # type: ignore[arg-type]
        assert not wait_before_work("major", table=None)
        with commit_window("file rewrite", table=None, work_of="major"):
            pass
        assert _history_of("db.work_timing_off").work_s("major") is None
