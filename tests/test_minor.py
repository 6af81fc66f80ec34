"""MINOR compaction (equality deletes -> position deletes / DVs, position-delete merging) preserves content on
randomized CDC tables, judged by the independent oracle and by Spark's read."""

from __future__ import annotations

import datetime as dt

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionKind, CompactionMode
from compaction.core.planner import plan
from compaction.core.policy import CompactionPolicy
from compaction.inspect import inspect_table
from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, run_group
from compaction.spark.validation import ValidationLevel
from compaction.testing.oracle import read_table
from compaction.testing.workload import WorkloadSpec, generate, spark_rows

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
# 20 random shapes that all have equality deletes (the generator's random specs sometimes turn them off).
SEEDS = list(range(300, 320))


def _compact(spark, catalog: CatalogConfig, table_name: str, mode: CompactionMode, level: ValidationLevel):  # type: ignore[no-untyped-def]
    state = inspect_table(catalog, table_name)
    compaction_plan = plan(state, CompactionPolicy.resolve(state.properties), mode, NOW)
    results = [run_group(spark, compaction_plan, g.group_id, level=level) for g in compaction_plan.groups]
    return compaction_plan, results


@pytest.mark.parametrize("seed", SEEDS)
def test_minor_preserves_rows_and_removes_equality_deletes(spark, request, seed: int) -> None:  # type: ignore[no-untyped-def]
    catalog: CatalogConfig = request.getfixturevalue("postgres_catalog" if seed % 2 else "sqlite_catalog")
    spec = WorkloadSpec.random(seed, use_equality_deletes=True, eq_delete_fraction=0.7, reinsert_fraction=0.5)
    workload = generate(spark, catalog, "cdc.m", spec)
    pyiceberg_catalog = catalog.load()
    before = read_table(pyiceberg_catalog.load_table(workload.identifier))
    assert before.rows == workload.expected_rows, "oracle and generator model disagree before compaction"
    n_eq_before = sum(1 for d in before.delete_files if d.delete_kind == "equality")
    assert n_eq_before > 0, f"scenario without equality deletes (spec {spec})"

    level = [ValidationLevel.CHECKSUM, ValidationLevel.COUNT, ValidationLevel.NONE][seed % 3]
    compaction_plan, results = _compact(spark, catalog, "cdc.m", CompactionMode.MINOR, level)
    outcomes = [p for r in results for p in r.partitions]
    assert all(p.kind == "minor" for p in outcomes)
    assert all(p.status in (COMMITTED, NO_OP, SKIPPED) for p in outcomes), \
        "\n".join(f"{p.label} {p.status} {p.error}" for p in outcomes)
    assert any(p.status == COMMITTED for p in outcomes)

    table = pyiceberg_catalog.load_table(workload.identifier)
    after = read_table(table)
    assert after.rows == before.rows, f"rows changed by MINOR (spec {spec})"
    assert spark_rows(spark, workload.table) == before.rows, "Spark disagrees with the oracle after MINOR"
    # MINOR rewrote no data file.
    assert {d.path for d in after.data_files} == {d.path for d in before.data_files}
    # Every partition that was compacted has no equality-delete file left, and each of its data files has at
    # most one position delete / DV applying.
    compacted = {(p.partition["spec_id"], tuple(f["value"] for f in p.partition["fields"]))
                 for p in outcomes if p.status == COMMITTED}
    for d in after.delete_files:
        if d.delete_kind == "equality":
            assert (d.spec_id, tuple(d.partition)) not in compacted, f"equality delete left in a compacted partition: {d.path}"
    for path, deletes in after.applicable_deletes.items():
        positional = [d for d in deletes if d.delete_kind != "equality"]
        assert len(positional) <= 1, (path, positional)

    # A second MINOR finds nothing to do in the compacted partitions.
    state = inspect_table(catalog, "cdc.m")
    replan = plan(state, CompactionPolicy.resolve(state.properties), CompactionMode.MINOR, NOW)
    again = {d.partition.label() for d in replan.decisions if d.kind is CompactionKind.MINOR}
    assert not again & {p.label for p in outcomes if p.status == COMMITTED}, again
