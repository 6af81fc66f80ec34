"""Maintenance through spark-submit, without a JVM: the ``maintain`` entry point's argument and plan checks, the result
file's format, and the host recording what the job reports (its result, or the checkpoint of a job killed mid-plan).
The job on a real cluster: tests/airflow/test_standalone_maintenance.py."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from compaction.catalog import CatalogConfig
from compaction.core.errors import MaintenanceError
from compaction.core.maintenance import MaintenanceAction as A, MaintenancePlan, MaintenanceState, SnapshotInfo, RefInfo, \
    plan_maintenance
from compaction.core.maintenance_policy import MaintenancePolicy
from compaction.core.model import TableIdentity
from compaction.ledger import Ledger
from compaction.spark.contract import maintain_command, progress_path
from compaction.spark.maintenance import ActionResult, result_payload, results_from_payload

UTC = dt.timezone.utc
NOW = dt.datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
HOUR_MS = 3600 * 1000


def _plan(catalog: str = "cat") -> MaintenancePlan:
    now_ms = int(NOW.timestamp() * 1000)
    snaps = tuple(SnapshotInfo(i + 1, i or None, now_ms - (5 - i) * HOUR_MS) for i in range(5))
    state = MaintenanceState(TableIdentity(catalog, ("db",), "t"), "file:/wh/db/t", 2, {}, 5, snaps,
                             (RefInfo("main", 5),), manifest_sizes=(10,) * 20, metadata_file_bytes=4096)
    return plan_maintenance(state, MaintenancePolicy.resolve({}, {"max_snapshot_age_ms": 1, "orphans_enabled": True}),
                            NOW)


def test_results_round_trip_and_unknown_versions_or_plans_are_refused() -> None:
    results = [ActionResult(A.EXPIRE_SNAPSHOTS, "succeeded", 4, 1234, 50, {"snapshots_expired": 3}),
               ActionResult(A.DELETE_ORPHAN_FILES, "refused", 0, None, 3, {}, "scheme mismatch")]
    payload = json.loads(json.dumps(result_payload("m-1", results)))
    assert results_from_payload(payload, "m-1") == results
    with pytest.raises(MaintenanceError, match="format version"):
        results_from_payload(payload | {"maintenance_result_format_version": 99}, "m-1")
    with pytest.raises(MaintenanceError, match="is for plan"):
        results_from_payload(payload, "m-2")


def test_maintain_entry_point_refuses_a_plan_of_another_catalog_or_version(tmp_path: Path) -> None:
    from compaction.spark.__main__ import main

    plan = _plan("cat")
    plan_path, result_path = tmp_path / "plan.json", tmp_path / "result.json"
    plan_path.write_text(plan.to_json())
    # both are refused before a Spark session is asked for: no JVM starts here
    assert main(list(maintain_command(plan_path, result_path, "other"))) != 0
    written = json.loads(result_path.read_text())
    assert "catalog 'cat'" in written["error"] and written["results"] == [] and written["plan_id"] == plan.plan_id
    plan_path.write_text(json.dumps(plan.to_dict() | {"maintenance_plan_format_version": 99}))
    assert main(list(maintain_command(plan_path, result_path, "cat"))) != 0
    assert "format version" in json.loads(result_path.read_text())["error"]


def _table_with_history(tmp_path: Path) -> CatalogConfig:
    """A SQLite catalog with a table of three snapshots written by pyiceberg (no Spark)."""
    catalog = CatalogConfig.sqlite("msub", tmp_path / "catalog.db", tmp_path / "warehouse")
    cat = catalog.load()
    cat.create_namespace("ns")
    schema = pa.schema([("id", pa.int64())])
    table = cat.create_table("ns.t", schema=schema, properties={"format-version": "2"})
    for i in range(3):
        table.append(pa.table({"id": [i]}, schema=schema))
    return catalog


def test_host_submits_the_plan_and_records_the_jobs_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import compaction.ops.submit as submit
    from compaction.ops.maintenance import maintain_table
    from compaction.spark.session import SparkSettings

    catalog = _table_with_history(tmp_path)
    seen: dict[str, Any] = {}

    def fake_run_submit(request: Any, **_kw: Any) -> submit.SubmitOutcome:
        # what the job would do: read the plan file it was given, write its results
        args = list(request.command)
        assert args[0] == "maintain" and args[args.index("--catalog") + 1] == "msub"
        plan = MaintenancePlan.from_json(Path(args[args.index("--plan") + 1]).read_text())
        seen.update(master=request.settings.master, argv=args, plan=plan)
        results = [ActionResult(a, "succeeded", 2, 200, 10, {"snapshots_expired": 2}) for a in plan.actions]
        payload = result_payload(plan.plan_id, results)
        Path(args[args.index("--result") + 1]).write_text(json.dumps(payload))
        return submit.SubmitOutcome(0, payload, 1.0, ())

    monkeypatch.setattr(submit, "run_submit", fake_run_submit)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        report = maintain_table(catalog, "ns.t", ledger=ledger, overrides={"max_snapshot_age_ms": 1},
                                spark_settings=SparkSettings(master="spark://cluster:7077"))
        assert seen["master"] == "spark://cluster:7077" and seen["plan"] == report.plan
        assert report.status == "succeeded" and [r.action for r in report.results] == [A.EXPIRE_SNAPSHOTS]
        [run] = ledger.maintenance_runs("ns.t", catalog="msub")
        assert run.status == "succeeded"
        [action] = ledger.maintenance_actions(run.run_id)
        assert (action.action, action.files_removed, action.bytes_removed) == ("expire_snapshots", 2, 200)


def test_a_job_killed_mid_plan_has_what_it_did_recorded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import compaction.ops.submit as submit
    from compaction.ops.maintenance import IncompleteMaintenance, maintain_table
    from compaction.spark.session import SparkSettings

    catalog = _table_with_history(tmp_path)

    def killed_after_the_expiry(request: Any, **_kw: Any) -> submit.SubmitOutcome:
        args = list(request.command)
        plan = MaintenancePlan.from_json(Path(args[args.index("--plan") + 1]).read_text())
        done = [ActionResult(A.EXPIRE_SNAPSHOTS, "succeeded", 5, 500, 10, {"snapshots_expired": 2})]
        progress_path(Path(args[args.index("--result") + 1])).write_text(
            json.dumps(result_payload(plan.plan_id, done, complete=False)))
        raise submit.SparkSubmitError("spark-submit was killed by SIGKILL", returncode=-9)

    monkeypatch.setattr(submit, "run_submit", killed_after_the_expiry)
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}") as ledger:
        with pytest.raises(IncompleteMaintenance, match="after 1 of 2 action"):
            maintain_table(catalog, "ns.t", ledger=ledger, spark_settings=SparkSettings(master="local[1]"),
                           overrides={"max_snapshot_age_ms": 1, "rewrite_manifests_small_count": 2})
        [run] = ledger.maintenance_runs("ns.t", catalog="msub")
        assert run.status == "failed" and "SIGKILL" in (run.error or "")
        [action] = ledger.maintenance_actions(run.run_id)
        assert (action.action, action.files_removed, action.bytes_removed) == ("expire_snapshots", 5, 500)
