"""The Flink soak's bookkeeping on hand-made inputs (no Flink, no Spark; bench/soak.py --writer flink runs it):
which Flink snapshot committed each fed batch, and the goals a Flink writer adds."""

from __future__ import annotations

from icecompact_testing.flink_soak import batch_commits
from icecompact_testing.soak import SoakConfig, SoakReport, evaluate


def test_a_batch_is_committed_by_the_first_snapshot_covering_its_inserts() -> None:
    # Batches insert 3, 2, 4 rows; checkpoints cut the stream at 2, 5 (end of batch 1), 9 (end of batch 2).
    assert batch_commits([3, 2, 4], [(10.0, 2), (11.0, 3), (12.0, 4)]) == [11.0, 11.0, 12.0]
    # One checkpoint may commit several batches; a batch of deletes only (no insert) is covered with the one before.
    assert batch_commits([3, 0, 1], [(5.0, 4)]) == [5.0, 5.0, 5.0]
    # Not all committed: the rest is None.
    assert batch_commits([3, 2, 4], [(10.0, 3)]) == [10.0, None, None]
    assert batch_commits([1], []) == [None]


def _report(flink_ok: bool) -> SoakReport:
    report = SoakReport(SoakConfig(duration_s=60, writer="flink", postgres_outage_at=None, path="health"))
    report.started = 0.0
    report.writer_events = [
        {"kind": "stream", "round": 1, "t": 1.0, "ok": True, "latency": 1.5},
        {"kind": "flink_commits", "commits": 7},
        {"kind": "flink_job", "ok": flink_ok, "state": "CANCELED" if flink_ok else "FAILED", "batches": 9,
         "error": "" if flink_ok else "CommitFailedException"},
    ]
    report.runs = [{"run_id": "r1", "status": "succeeded", "dry_run": False, "started_at": 2.0, "finished_at": 5.0,
                    "outcomes": {"committed": 1}, "reasons": [], "kinds": {"minor": 1},
                    "partitions": [{"kind": "minor", "reason": "4 equality-delete files >= 1 -> MINOR"}]}]
    return report


def test_the_flink_job_must_end_cancelled_by_us() -> None:
    good = evaluate(_report(True), minor_trigger=4)
    assert good["flink_job_never_failed"]["met"]
    assert "7 Flink commits" in good["flink_job_never_failed"]["figure"]
    assert "minor x1: 4 equality-delete files >= 1" in good["planner_decisions_on_flink_commits"]["figure"]
    bad = evaluate(_report(False), minor_trigger=4)
    assert not bad["flink_job_never_failed"]["met"] and "CommitFailedException" in bad["flink_job_never_failed"]["figure"]


def _sample(t: float, eq: list[int], positions: list[int]) -> dict[str, object]:
    partitions = [{"partition": f"p{i}", "delete_files": e + p, "eq_delete_files": e} for i, (e, p)
                  in enumerate(zip(eq, positions))]
    return {"t": t, "max_partition_delete_files": max(e + p for e, p in zip(eq, positions)), "partitions": partitions}


def test_the_bound_is_on_equality_deletes_the_file_scoped_ones_are_reported() -> None:
    report = _report(True)
    # One position delete file per data file (what a MINOR leaves) does not count against the bound ...
    report.samples = [_sample(1.0, [30, 0], [0, 0]), _sample(6.0, [3, 8], [20, 12])]
    goal = evaluate(report, minor_trigger=4)["equality_delete_files_per_partition_bounded"]
    assert goal["met"], goal
    assert "equality-delete files of a partition after the first compaction 8" in goal["figure"]
    assert "(position deletes / DVs included) max 23" in goal["figure"]
    # ... equality deletes piling up after the first compaction do; samples of older reports carry only partitions.
    report.samples.append({"t": 7.0, "partitions": [{"eq_delete_files": 9, "delete_files": 9}],
                           "max_partition_delete_files": 9})
    assert not evaluate(report, minor_trigger=4)["equality_delete_files_per_partition_bounded"]["met"]
