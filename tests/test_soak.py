"""A short soak (icecompact_testing.soak; bench/soak.py runs the 15-minute one): a writer process committing every 2 s
(fragments + equality deletes, a Spark DELETE / MERGE every 30 s), Airflow's scheduler running the compaction DAG
every minute on a PostgreSQL catalog and ledger, and the three faults: a compaction job SIGKILLed mid-rewrite, the
scheduler SIGKILLed and restarted, PostgreSQL stopped for a few seconds. The invariants, not the timings, are
asserted: the table holds exactly the writer's rows, every ledger run is terminal, the killed run is failed and left
nothing unvalidated (a kill that lands just after one of its commits leaves that commit to the next plan's post-hoc
check), no snapshot of ours is unvalidated, the writer's streaming commits never failed but for the outage."""

from __future__ import annotations

from pathlib import Path

import pytest

from icecompact_testing.soak import (
    SoakConfig,
    evaluate,
    minor_trigger,
    run_soak,
    samples_after_first_compaction,
    writer_summary,
)


@pytest.mark.timeout(1500)  # 130 s of soak plus setup and the final checks: 6-12 min beside the rest of the suite
def test_short_soak_with_faults_loses_nothing_and_never_blocks_the_writer(spark, tmp_path: Path) -> None:
    config = SoakConfig(duration_s=130, size="xs", format_version=3, kill_job_at=0.1, kill_scheduler_at=0.45,
                        postgres_outage_at=0.7, postgres_outage_s=8, sample_interval_s=15, scan_every=1,
                        quiet_rescans=2)
    report = run_soak(config, tmp_path / "soak", spark=spark)
    goals = evaluate(report, minor_trigger(config))
    summary = "\n".join(f"{'met' if g['met'] else 'NOT MET'} {k}: {g['figure']}" for k, g in goals.items())
    checks = report.checks

    # Content: Spark and the reference reader both hold exactly the writer's model.
    assert checks["expected_rows"] > 20_000
    assert (checks["spark_missing_rows"], checks["spark_extra_rows"]) == (0, 0), summary
    assert (checks["oracle_missing_rows"], checks["oracle_extra_rows"]) == (0, 0), summary
    assert (checks["spark_missing_rows_after_full"], checks["spark_extra_rows_after_full"]) == (0, 0)

    # The writer was never blocked: streaming commits failed only while PostgreSQL was down, and it kept committing.
    writer = writer_summary(report.writer_events, report.faults)
    assert writer["stream"]["failed_attempts_otherwise"] == 0, writer
    assert writer["stream"]["commits"] >= 30, writer
    assert writer["delete"]["commits"] + writer["merge"]["commits"] >= 2, writer

    # Faults: all three happened; the killed job's run is failed and left nothing unchecked; the next runs succeeded.
    kinds = {f["kind"]: f for f in report.faults}
    assert set(kinds) == {"kill_job", "kill_scheduler", "postgres_outage"}, report.faults
    assert kinds["kill_job"].get("t") is not None, report.faults
    assert goals["killed_run_failed_and_table_unchanged"]["met"], summary
    assert goals["run_after_each_fault_succeeds"]["met"], summary
    assert report.checks["final_dag_run"]["state"] == "success", report.checks

    # The ledger: every run terminal, none failed but the killed one; no snapshot of ours left unvalidated.
    assert goals["every_run_terminal_and_succeeded"]["met"], summary
    assert goals["no_snapshot_of_ours_unvalidated"]["met"], summary
    assert sum(1 for r in report.runs if r["outcomes"].get("committed")) >= 2, report.runs

    # Scans: sampled snapshots were rescanned quietly against a compacted copy of their own rows (same row count, or
    # the rescan raises), and the scan goals are judged on those.
    quiet = [s for s in report.samples if "quiet_scan_ratio" in s]
    assert 1 <= len(quiet) <= 2, quiet
    assert all(s["quiet_scan_s"] > 0 and s["quiet_reference_scan_s"] > 0 for s in quiet), quiet
    assert all(s["quiet_unpartitioned_reference_scan_s"] > 0 for s in quiet), quiet
    judged = [s for s in samples_after_first_compaction(report) if "quiet_scan_ratio" in s]
    if judged:  # a slow machine may scan nothing after the first compaction: the samples before it are rescanned
        assert f"quiet rescans of {len(judged)} sampled snapshots" in goals[
            "scan_within_1_5x_of_after_full_compaction"]["figure"]


def test_the_scan_yardstick_is_a_compacted_copy_in_the_tables_own_layout(spark, sqlite_catalog) -> None:
    from compaction.spark import jvm as J
    from icecompact_testing.soak import compacted_copy

    ns = f"{sqlite_catalog.name}.yard"
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {ns}")
    spark.sql(f"CREATE TABLE {ns}.t (id BIGINT, ts TIMESTAMP, payload STRING) USING iceberg PARTITIONED BY (days(ts)) "
              "TBLPROPERTIES ('format-version' = '2', 'write.delete.mode' = 'merge-on-read', "
              "'write.target-file-size-bytes' = '262144')")
    spark.range(80_000).selectExpr("id", "timestamp_seconds(1704067200 + (id % 4) * 86400) AS ts",
                                   "sha2(cast(id AS string), 256) AS payload").writeTo(f"{ns}.t").append()
    before_delete = int(J.load_table(spark, f"{ns}.t").currentSnapshot().snapshotId())
    spark.sql(f"DELETE FROM {ns}.t WHERE id % 10 = 0")
    assert spark.sql(f"SELECT count(*) FROM {ns}.t.delete_files").collect()[0][0] > 0

    compacted_copy(spark, f"{ns}.t", f"{ns}.copy", 2)
    compacted_copy(spark, f"{ns}.t", f"{ns}.flat", 2, before_delete, keep_layout=False)

    source, copy, flat = (J.load_table(spark, f"{ns}.{n}") for n in ("t", "copy", "flat"))
    assert copy.spec().fields().size() == 1
    assert str(copy.spec().fields().get(0).transform()) == str(source.spec().fields().get(0).transform()) == "day"
    assert dict(copy.properties())["write.target-file-size-bytes"] == "262144"
    assert flat.spec().isUnpartitioned()
    assert spark.table(f"{ns}.copy").count() == 72_000 and spark.table(f"{ns}.flat").count() == 80_000
    files = spark.sql(f"SELECT partition, content, file_size_in_bytes FROM {ns}.copy.files").collect()
    assert {f["content"] for f in files} == {0}  # no delete file
    per_partition: dict[object, int] = {}
    for f in files:
        per_partition[f["partition"]] = per_partition.get(f["partition"], 0) + 1
    # ~1.1 MiB of rows per day at a 256 KiB target: several files per partition, none far above the target
    assert len(per_partition) == 4 and min(per_partition.values()) >= 2, per_partition
    assert max(f["file_size_in_bytes"] for f in files) < 2 * 262144
