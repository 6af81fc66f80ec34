"""`icecompact run` end to end through real spark-submit: content preserved, ledger written, faults, bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compaction.catalog import CatalogConfig
from compaction.cli import main as cli_main
from compaction.core.errors import CatalogError, ConfigError, PlanningError, UnsupportedTableError
from compaction.core.plan import CompactionMode
from compaction.ledger import Ledger, OutcomeStatus, RunStatus
from compaction.ops.runner import run_table
from icecompact_testing.oracle import read_table
from icecompact_testing.processes import SparkSubmitKiller
from compaction.demo.workload import WorkloadSpec, generate


@pytest.fixture()
def ledger(tmp_path: Path):  # type: ignore[no-untyped-def]
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as led:
        yield led


def _snapshot(catalog: CatalogConfig, identifier: tuple[str, str]) -> int | None:
    snap = catalog.load().load_table(identifier).current_snapshot()
    return snap.snapshot_id if snap else None


def test_run_end_to_end_then_nothing_to_do(spark, sqlite_catalog: CatalogConfig, ledger: Ledger,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    workload = generate(spark, sqlite_catalog, "e2e.t", WorkloadSpec(seed=11, partitioning="days_ts", commits=3))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert before.applicable_deletes, "the scenario must start with deletes"
    lines: list[str] = []
    report = run_table(sqlite_catalog, "e2e.t", mode=CompactionMode.AUTO, ledger=ledger, progress=lines.append,
                       overrides={"major.delete-ratio": 0.01})
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
    assert report.exit_code == 0
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows == workload.expected_rows
    assert not after.applicable_deletes
    assert any(line.startswith("icecompact: MAJOR") for line in lines), "progress from the Spark job is streamed"

    run = ledger.run(report.run_id)
    assert run is not None and run.status is RunStatus.SUCCEEDED and run.plan_id == report.plan.plan_id
    outcomes = ledger.outcomes(report.run_id)
    assert outcomes and all(o.status is OutcomeStatus.COMMITTED for o in outcomes)
    assert all(o.commit_snapshot_id and o.delete_files_before and o.delete_files_after == 0 for o in outcomes)
    assert all(o.validation_result == "passed" for o in outcomes)

    # Every commit the job checked is in the ledger, so the next plan has nothing to check post hoc.
    checks = ledger.snapshot_checks("e2e.t", sqlite_catalog.name)
    assert {c.snapshot_id for c in checks} >= {o.commit_snapshot_id for o in outcomes}
    assert all(c.source == "job" and c.result == "passed" and c.run_id == report.run_id for c in checks)

    # Freshness replayed from the history and the ledger (the soak's measure): the workload's commits gave
    # partitions work, and the run, planned after all of them, served the ones it compacted.
    from icecompact_testing.freshness import crossings

    fresh = crossings(sqlite_catalog, "e2e.t", ledger)
    age = fresh["work_age"]
    assert fresh["crossings"] >= 1 and fresh["served"] >= 1, fresh
    assert age["changes"] >= fresh["crossings"] and age["served"] >= fresh["served"], age
    assert age["served"] + age["unserved"] == age["changes"]
    assert 0 < age["to_validated_p50_s"] <= age["to_validated_p95_s"], age

    # Second run: nothing to do, no Spark job started (metadata only), no post-hoc check either.
    def no_submit(*_a: object, **_k: object) -> None:
        raise AssertionError("spark-submit started by a run with nothing to do")

    monkeypatch.setattr("compaction.ops.runner.run_submit", no_submit)
    monkeypatch.setattr("compaction.ops.submit.run_submit", no_submit)
    second = run_table(sqlite_catalog, "e2e.t", ledger=ledger, progress=lines.append,
                       overrides={"major.delete-ratio": 0.01})
    assert not second.plan.groups
    assert second.status is RunStatus.SUCCEEDED and not ledger.outcomes(second.run_id)
    assert not (Path(os.environ["ICECOMPACT_HOME"]) / "runs" / second.run_id).exists()


def test_dry_run_changes_nothing(spark, sqlite_catalog: CatalogConfig, ledger: Ledger) -> None:
    workload = generate(spark, sqlite_catalog, "dry.t", WorkloadSpec(seed=12, partitioning="identity", commits=2))
    head = _snapshot(sqlite_catalog, workload.identifier)
    report = run_table(sqlite_catalog, "dry.t", mode=CompactionMode.MAJOR, dry_run=True, ledger=ledger)
    assert report.plan.groups and report.status is RunStatus.SUCCEEDED
    assert _snapshot(sqlite_catalog, workload.identifier) == head
    run = ledger.run(report.run_id)
    assert run is not None and run.dry_run


def test_kill_9_mid_rewrite_leaves_table_unchanged(spark, sqlite_catalog: CatalogConfig, ledger: Ledger,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    workload = generate(spark, sqlite_catalog, "kill.t", WorkloadSpec(seed=13, partitioning="days_ts", commits=2))
    head = _snapshot(sqlite_catalog, workload.identifier)
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    monkeypatch.setenv("ICECOMPACT_FAULT_INJECT", "sleep:before-rewrite:600")
    on_output = SparkSubmitKiller("kill.t")

    report = run_table(sqlite_catalog, "kill.t", mode=CompactionMode.MAJOR, ledger=ledger, progress=on_output,
                       max_parallel_jobs=1)
    assert on_output.killed, "the job never reached the rewrite"
    assert report.status is RunStatus.FAILED and report.exit_code == 8
    assert any("SIGKILL" in e or "signal" in e.lower() for e in report.errors), report.errors
    assert _snapshot(sqlite_catalog, workload.identifier) == head
    assert read_table(sqlite_catalog.load().load_table(workload.identifier)).rows == before.rows
    run = ledger.run(report.run_id)
    assert run is not None and run.status is RunStatus.FAILED
    assert all(o.status is OutcomeStatus.FAILED for o in ledger.outcomes(report.run_id))

    monkeypatch.delenv("ICECOMPACT_FAULT_INJECT")
    again = run_table(sqlite_catalog, "kill.t", mode=CompactionMode.MAJOR, ledger=ledger)
    assert again.status is RunStatus.SUCCEEDED, again.errors
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows and not after.applicable_deletes


def test_bad_input_changes_nothing(spark, sqlite_catalog: CatalogConfig, ledger: Ledger, tmp_path: Path) -> None:
    workload = generate(spark, sqlite_catalog, "bad.t", WorkloadSpec(seed=14, partitioning="identity", commits=2))
    head = _snapshot(sqlite_catalog, workload.identifier)
    spark.sql(f"CREATE TABLE {sqlite_catalog.name}.bad.v1 (id BIGINT) USING iceberg TBLPROPERTIES ('format-version'='1')")
    spark.sql(f"INSERT INTO {sqlite_catalog.name}.bad.v1 VALUES (1)")

    with pytest.raises(CatalogError, match="unknown catalog"):
        run_table(CatalogConfig.resolve("no_such_catalog"), "bad.t", ledger=ledger)
    with pytest.raises(CatalogError, match="not found"):
        run_table(sqlite_catalog, "bad.missing", ledger=ledger)
    with pytest.raises(UnsupportedTableError, match="v1"):
        run_table(sqlite_catalog, "bad.v1", ledger=ledger)
    for crafted in ("bad.t; DROP TABLE bad.t", "bad.`t`", "bad.t--", "bad.t' OR '1'='1"):
        with pytest.raises(ConfigError):
            run_table(sqlite_catalog, crafted, ledger=ledger)
    for bad_filter, error in [("region = 'EU' or 1=1", ConfigError), ("region;", ConfigError),
                              ("region = 'EU", ConfigError), ("nosuchop ~ 3", ConfigError), ("", ConfigError),
                              ("nosuch = 1", ConfigError), ("region = 1", ConfigError),
                              ("note = 'x'", PlanningError)]:
        with pytest.raises(error):
            run_table(sqlite_catalog, "bad.t", partition_filter=bad_filter, ledger=ledger)
    with pytest.raises(ConfigError, match="major.delete-ratio"):
        run_table(sqlite_catalog, "bad.t", overrides={"major.delete-ratio": "lots"}, ledger=ledger)
    assert _snapshot(sqlite_catalog, workload.identifier) == head
    assert ledger.runs() == [], "nothing is recorded for a run that never started"
    # The CLI maps each error to its exit code with one clear line.
    assert cli_main(["--catalog", sqlite_catalog.name, "plan", "bad.t"]) == 3  # catalog not in pyiceberg config
    proc = subprocess.run([sys.executable, "-m", "compaction.cli", "run", "bad.t; DROP TABLE x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: invalid table name part")


def test_a_runs_groups_share_one_spark_submit_on_one_machine(spark, sqlite_catalog: CatalogConfig,
                                                             ledger: Ledger) -> None:
    """Local master: every job group of the plan runs in one spark-submit (one JVM, one rewrite action for all of
    them); each group is still reported and recorded on its own."""
    workload = generate(spark, sqlite_catalog, "groups.t", WorkloadSpec(seed=14, partitioning="identity", commits=3))
    before = read_table(sqlite_catalog.load().load_table(workload.identifier))
    lines: list[str] = []
    report = run_table(sqlite_catalog, "groups.t", mode=CompactionMode.MAJOR, ledger=ledger, progress=lines.append,
                       overrides={"min_job_group_bytes": 1, "major_full_rewrite": True})
    group_ids = [g.group_id for g in report.plan.groups]
    assert len(group_ids) >= 2, "the scenario must plan several job groups"
    assert report.status is RunStatus.SUCCEEDED, (report.errors, lines)
    submits = [line for line in lines if "spark-submit (" in line]
    assert len(submits) == 1 and submits[0].startswith(f"groups {', '.join(map(str, group_ids))}: one spark-submit"), \
        lines
    assert sum(1 for line in lines if "partitions in one Iceberg action" in line) == 1, lines
    recorded = [line for line in lines if line.startswith("group ") and " recorded: " in line]
    assert len(recorded) == len(group_ids), lines
    outcomes = ledger.outcomes(report.run_id)
    assert len(outcomes) == len(report.plan.scheduled_partitions)
    assert all(o.status is OutcomeStatus.COMMITTED and o.validation_result == "passed" for o in outcomes)
    after = read_table(sqlite_catalog.load().load_table(workload.identifier))
    assert after.rows == before.rows and not after.applicable_deletes
