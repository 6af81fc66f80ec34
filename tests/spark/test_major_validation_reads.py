"""Validation (c) of a MAJOR reads the rows of every (snapshot, touched partitions) pair exactly once; on
PostgreSQL the reads of a single-spec table's partition happen ahead (in a background thread) and are what
validation then compares, not a second read; on SQLite (one writer, no concurrent catalog access) there is no
read-ahead."""

from __future__ import annotations

import datetime as dt
import threading

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.inspect import inspect_table
from compaction.spark import job
from compaction.spark.validation import ValidationLevel, read_ahead_allowed
from compaction.testing.oracle import read_table
from compaction.testing.workload import WorkloadSpec, generate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def test_each_snapshot_is_read_once_per_partition(spark, any_catalog: CatalogConfig, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    catalog = any_catalog
    assert read_ahead_allowed(spark, catalog.name) is (not str(catalog.properties["uri"]).startswith("sqlite"))
    workload = generate(spark, catalog, "cdc.r", WorkloadSpec(seed=21, partitioning="days_ts", commits=3,
                                                               rows_per_commit=40, days_span=2, evolve_spec=False))
    reads: list[tuple[int, str]] = []
    threads: set[str] = set()
    real = job.fingerprint

    def counting_fingerprint(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
        reads.append((int(snapshot_id), str(predicate)))
        threads.add(threading.current_thread().name)
        return real(spark_, ref, snapshot_id, predicate, level)

    monkeypatch.setattr(job, "fingerprint", counting_fingerprint)
    state = inspect_table(catalog, "cdc.r")
    the_plan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MAJOR, NOW)
    parts = [p for g in the_plan.groups
             for p in job.run_group(spark, the_plan, g.group_id, level=ValidationLevel.COUNT).partitions]
    assert parts and all(p.status == job.COMMITTED for p in parts), [(p.label, p.status, p.error) for p in parts]
    for p in parts:
        assert len(p.commit_snapshot_ids) == 2  # rewrite + dangling-delete cleanup
        checks = p.validation["checks"]
        assert [c["ok"] for c in checks] == [True, True]
        # The cleanup's "before" is the rewrite's "after": one read, shared.
        assert checks[1]["parent_id"] == checks[0]["snapshot_id"]
        assert checks[1]["before"] == checks[0]["after"]
    # base + rewrite + cleanup snapshot of each partition, each read once (a cache miss would read one twice).
    assert len(reads) == len(set(reads)) == 3 * len(parts)
    read_ahead = any(name.startswith("icecompact-prefetch") for name in threads)
    assert read_ahead is read_ahead_allowed(spark, catalog.name)
    assert read_table(catalog.load().load_table(workload.identifier)).rows == workload.expected_rows
