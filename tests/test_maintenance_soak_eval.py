"""The maintenance soak's goals (icecompact_testing.maintenance_soak.evaluate) on hand-made reports: no Spark, no
soak run (a real run does not fit the test budget; bench/soak.py --maintenance runs it)."""

from __future__ import annotations

from icecompact_testing.maintenance_soak import MaintenanceSoakConfig, MaintenanceSoakReport, evaluate


def _report(snapshots: list[int], storage: int, live: int) -> MaintenanceSoakReport:
    report = MaintenanceSoakReport(MaintenanceSoakConfig(duration_s=90))
    report.samples = [{"t": float(i), "snapshots": n, "metadata_file_bytes": 1000 * n, "manifests": n,
                       "storage_bytes": storage, "live_bytes": live} for i, n in enumerate(snapshots)]
    report.checks["rows"] = {"expected": 10, "got": 10, "missing": 0, "extra": 0, "changed": 0, "duplicates": 0}
    report.checks["retained_snapshots"] = {"in_table": 5, "reread": 5, "mismatches": [], "oldest_retained": "x"}
    report.maintenance = [{"status": "succeeded", "actions": []}]
    return report


def test_a_plateau_and_bounded_storage_meet_every_goal() -> None:
    goals = evaluate(_report([0, 50, 100, 110, 105, 100, 112, 108, 100], storage=150, live=100))
    assert all(g["met"] for g in goals.values()), goals
    assert goals["plateau_snapshots"]["first_third_max"] == 100 and goals["plateau_snapshots"]["last_third_max"] == 112


def test_growth_storage_and_lost_rows_fail_their_goals() -> None:
    report = _report([10, 20, 30, 40, 50, 60], storage=300, live=100)
    report.checks["rows"]["missing"] = 1
    report.checks["retained_snapshots"]["mismatches"] = [42]
    report.maintenance.append({"status": "partial", "actions": [{"error": "boom"}]})
    goals = evaluate(report)
    assert {k for k, g in goals.items() if not g["met"]} == {
        "plateau_snapshots", "plateau_metadata_file_bytes", "plateau_manifests", "storage_within_2x_live",
        "no_rows_lost_or_resurrected", "retained_snapshots_read_what_they_read", "maintenance_runs_succeed"}
    assert "3.00x" in goals["storage_within_2x_live"]["text"]
