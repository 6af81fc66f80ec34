"""Everything on a REST catalog with tables on S3 (SeaweedFS): `icecompact run` end to end through spark-submit."""

from __future__ import annotations

from pathlib import Path

import pytest

from compaction.catalog import CatalogConfig
from compaction.core.plan import CompactionMode
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from icecompact_testing.oracle import read_table
from compaction.demo.workload import WorkloadSpec, generate


@pytest.fixture()
def ledger(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def test_run_end_to_end_on_rest_and_s3(spark, rest_catalog: CatalogConfig, ledger: Ledger) -> None:
    workload = generate(spark, rest_catalog, "e2e.t", WorkloadSpec(seed=11, partitioning="days_ts", commits=3))
    table = rest_catalog.load().load_table(workload.identifier)
    assert table.metadata_location.startswith("s3://")
    before = read_table(table)
    assert before.applicable_deletes, "the scenario must start with deletes"
    lines: list[str] = []
    report = run_table(rest_catalog, "e2e.t", mode=CompactionMode.AUTO, ledger=ledger, progress=lines.append,
                       overrides={"major.delete-ratio": 0.01})
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
    after = read_table(rest_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes
    outcomes = ledger.outcomes(report.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED for o in outcomes)
    assert all(o.validation_result == "passed" for o in outcomes)
