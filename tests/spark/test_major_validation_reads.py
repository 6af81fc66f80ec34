"""Validation (c) of a MAJOR reads the rows of every (snapshot, touched partitions) pair exactly once, and the
read-ahead of a single-spec table's partition is what validation then compares (not a second read)."""

from __future__ import annotations

import datetime as dt
import uuid
from pathlib import Path
from typing import Any

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.inspect import inspect_table
from compaction.spark import job
from compaction.spark.validation import ValidationLevel
from compaction.testing.oracle import read_table
from compaction.testing.workload import WorkloadSpec, generate

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def _catalog(spark: Any, folder: Path) -> CatalogConfig:
    from compaction.spark.session import register_catalog

    catalog = CatalogConfig.sqlite(f"vr_{uuid.uuid4().hex[:8]}", folder / "catalog.db", folder / "warehouse")
    register_catalog(spark, catalog)
    spark.conf.set(f"spark.sql.catalog.{catalog.name}.cache-enabled", "false")
    return catalog


def test_each_snapshot_is_read_once_per_partition(spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    catalog = _catalog(spark, tmp_path)
    workload = generate(spark, catalog, "cdc.r", WorkloadSpec(seed=21, partitioning="days_ts", commits=3,
                                                               rows_per_commit=40, days_span=2, evolve_spec=False))
    reads: list[tuple[int, str]] = []
    real = job.fingerprint

    def counting_fingerprint(spark_, ref, snapshot_id, predicate, level):  # type: ignore[no-untyped-def]
        reads.append((int(snapshot_id), str(predicate)))
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
    assert read_table(catalog.load().load_table(workload.identifier)).rows == workload.expected_rows
