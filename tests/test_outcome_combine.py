"""One outcome per partition that tells the truth: a selective task's outcome combines its file rewrite
and its conversion without losing the validation; every path shows the validation its commits passed in the run's
table, the ledger and the UI; the progress stream prints one final line per partition. Pure: no Spark."""

from __future__ import annotations

import dataclasses
import json
import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from compaction.cli import format_before_after
from compaction.core.display import validation_label
from compaction.core.model import PartitionFieldValue, PartitionKey
from compaction.core.plan import CompactionKind, partition_key_to_dict
from compaction.ledger import OutcomeStatus, RunStatus
from compaction.ops.runner import RunReport, _outcome
from compaction.spark import job
from compaction.core.results import PartitionResult, final_line
from compaction.core.results import combine_rewrite_and_conversion as _combine
from compaction.core.results import COMMITTED, FAILED, NO_OP, SKIPPED
from compaction.spark.validation import ValidationLevel
from icecompact_airflow.health import render_table_page

PASSED_AT_COUNT = {"level": "count", "result": "passed"}


def _key(region: str) -> PartitionKey:
    return PartitionKey(1, (PartitionFieldValue("region", "identity", "region", region),))


def _rewrite(key: PartitionKey | None = None, reason: str = "2 small files rewritten") -> PartitionResult:
    key = key or _key("EU")
    return PartitionResult(partition_key_to_dict(key), key.label(), "major", status=COMMITTED, reason=reason,
                           commit_snapshot_ids=[11], rewritten_data_files=2, added_data_files=1,
                           before={"data_files": 3}, after={"data_files": 1},
                           validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 11, "ok": True}]})


def _conversion(status: str, key: PartitionKey | None = None, **fields: Any) -> PartitionResult:
    key = key or _key("EU")
    return PartitionResult(partition_key_to_dict(key), key.label(), "major", status=status, **fields)


def test_rewrite_then_no_conversion_keeps_level_result_and_reason() -> None:
    """The defect: a partition whose conversion had nothing to do was reported `committed` with validation `-`
    and the conversion's skip reason."""
    for status in (NO_OP, SKIPPED):
        part = _conversion(status, reason="no equality deletes left")
        combined = _combine(_rewrite(), part)
        assert combined.status == COMMITTED
        assert combined.validation["level"] == "count" and combined.validation["result"] == "passed"
        assert combined.validation["checks"] == [{"snapshot_id": 11, "ok": True}]
        assert combined.reason == "2 small files rewritten"
        assert combined.commit_snapshot_ids == [11]


def test_both_steps_validated_reports_the_weakest() -> None:
    part = _conversion(COMMITTED, commit_snapshot_ids=[12],
                       validation={"level": "count", "result": "failed", "checks": [{"snapshot_id": 12, "ok": False}]})
    combined = _combine(_rewrite(), part)
    assert combined.validation["result"] == "failed"
    assert len(combined.validation["checks"]) == 2
    assert combined.commit_snapshot_ids == [11, 12]
    ok = _conversion(COMMITTED, commit_snapshot_ids=[12], validation={**PASSED_AT_COUNT, "checks": []})
    assert _combine(_rewrite(), ok).validation["result"] == "passed"


def test_the_final_reason_is_the_deciding_steps_not_a_later_skip() -> None:
    """A group file rewrite (no reason of its own) then a conversion that re-planned and skipped: the partition is
    committed by the rewrite, and says so; "changed since planning" was about our own rewrite."""
    skipped = _conversion(SKIPPED, reason="changed since planning: no deletes left")
    combined = _combine(_rewrite(reason=""), skipped)
    assert combined.status == COMMITTED
    assert "changed since planning" not in combined.reason
    assert combined.reason.startswith("file rewrite committed (snapshot 11, validated)")


# Every path a committed partition can take to its result, as the job reports it (after _combine where the path
# has two steps). Each must reach the ledger, the run's table and the UI with the validation it passed.
PATHS = {
    "MAJOR then MINOR conversion (both committed)": lambda: _combine(_rewrite(), _conversion(
        COMMITTED, commit_snapshot_ids=[12], validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 12}]})),
    "selective MAJOR, nothing left to convert": lambda: _combine(_rewrite(), _conversion(NO_OP)),
    "group commit rewrite, conversion skipped as stale": lambda: _combine(_rewrite(reason=""), _conversion(
        SKIPPED, reason="changed since planning: nothing to do")),
    "catalog outage, validated once it answered": lambda: _conversion(
        COMMITTED, commit_snapshot_ids=[12], validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 12}]},
        reason="the catalog was unavailable after the commit; validated once it answered"),
    "MINOR only (no file rewrite)": lambda: _combine(None, _conversion(  # type: ignore[arg-type]
        COMMITTED, commit_snapshot_ids=[12], validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 12}]})),
    "full MAJOR with its cleanup commit": lambda: _conversion(
        COMMITTED, commit_snapshot_ids=[12, 13],
        validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 12}, {"snapshot_id": 13}]}),
}


def _report(outcomes: list[Any]) -> RunReport:
    state = SimpleNamespace(partitions=())
    return RunReport("run-1", SimpleNamespace(), RunStatus.SUCCEEDED, 0, state, None, outcomes)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", sorted(PATHS))
def test_validated_commits_reported_as_unvalidated(path: str) -> None:
    """The defect: committed partitions showed validation `-` in the run's table, the ledger and the UI although
    their commits were checked at count."""
    part = PATHS[path]()
    assert part.status == COMMITTED
    assert (part.validation["level"], part.validation["result"]) == ("count", "passed")
    assert "[validation passed (count)]" in final_line(part)  # the progress stream

    crossed = PartitionResult.from_dict(json.loads(json.dumps(dataclasses.asdict(part))))  # the result file
    outcome = _outcome(crossed, "count")  # what the ledger records
    assert outcome.status is OutcomeStatus.COMMITTED
    assert (outcome.validation_level, outcome.validation_result) == ("count", "passed")

    table = format_before_after(_report([outcome]))  # `icecompact run`
    row = next(line for line in table.splitlines() if line.startswith(part.label))
    assert row.rstrip().endswith("passed (count)")

    history = {"runs": [{"run_id": "run-1", "started_at": "2026-01-01T00:00:00", "trigger": "cli",
                         "airflow_run_id": None, "mode": "auto", "status": "succeeded", "dry_run": False,
                         "duration_ms": 1, "outcomes": [outcome.to_dict()]}]}
    health = {"table": "db.t", "catalog": "c", "snapshot_id": 1, "format_version": 2, "partitions": [],
              "totals": {"partitions": 0, "data_files": 0, "data_records": 0, "delete_files": 0, "delete_records": 0}}
    page = render_table_page(health, history, "/compaction")  # the Airflow UI
    assert "<td>passed (count)</td>" in page


def test_validation_label() -> None:
    assert validation_label("count", "passed") == "passed (count)"
    assert validation_label("none", "skipped") == "skipped (none)"
    assert validation_label("count", None) == "-"


def test_progress_stream_contradicts_the_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defect: a partition printed `-> committed` by its group file rewrite, then `-> skipped` by its
    conversion. run_group prints one final line per partition, once its outcome is final, with the validation
    and the reason of the step that decided it."""
    rewritten, converted, failed = _key("EU"), _key("US"), _key("APAC")
    tasks = [SimpleNamespace(partition=k, kind=CompactionKind.MAJOR, full_rewrite=False)
             for k in (rewritten, converted, failed)]
    plan = SimpleNamespace(plan_id="p", table=SimpleNamespace(catalog="c", __str__=lambda self: "c.db.t"),
                           groups=[SimpleNamespace(group_id=0, tasks=tuple(tasks))])
    monkeypatch.setattr(job.J, "activate", lambda spark: None)
    monkeypatch.setattr(job, "_group_rows", lambda *a, **k: None)
    monkeypatch.setattr(job, "_prepare_minor_group", lambda *a, **k: {})

    def major_group(spark: Any, plan_: Any, tasks_: Any, *, selective: str | None = None,
                    **kw: Any) -> tuple[dict[Any, PartitionResult], dict[Any, Any]]:
        if selective is None:  # the full MAJORs: one of them failed
            return {failed: _conversion(FAILED, failed, error="boom")}, {}
        if selective == "major":  # the file rewrite of the selective MAJORs, committed and validated
            return {rewritten: _rewrite(rewritten, reason=""), converted: _rewrite(converted, reason="")}, {}
        return {}, {}

    def conversion(spark: Any, catalog: str, plan_: Any, task: Any, **kw: Any) -> PartitionResult:
        if task.partition == rewritten:  # nothing left after our own rewrite: re-planned and skipped
            return _conversion(SKIPPED, rewritten, reason="changed since planning: nothing to do")
        return _conversion(COMMITTED, converted, commit_snapshot_ids=[12],
                           validation={**PASSED_AT_COUNT, "checks": [{"snapshot_id": 12}]})

    monkeypatch.setattr(job, "_run_major_group", major_group)
    monkeypatch.setattr(job, "_run_minor_group", lambda *a, **k: ({}, {}))
    monkeypatch.setattr(job, "run_task", conversion)
    lines: list[str] = []
    result = job.run_group(object(), plan, 0, level=ValidationLevel.COUNT, progress=lines.append)  # type: ignore[arg-type]

    finals = [line for line in lines if " -> " in line]
    assert sorted(finals) == sorted(final_line(p) for p in result.partitions)
    for key in (rewritten, converted, failed):
        assert sum(1 for line in finals if line.startswith(f"icecompact: {key.label()} -> ")) == 1, finals
    by_label = {p.label: p for p in result.partitions}
    assert by_label[rewritten.label()].status == COMMITTED
    line = next(line for line in finals if rewritten.label() in line)
    assert "-> committed [validation passed (count)]: file rewrite committed (snapshot 11" in line
    assert "changed since planning" not in line
    assert f"{converted.label()} -> committed [validation passed (count)]" in " ".join(finals)
    assert f"{failed.label()} -> failed [validation -]: boom" in " ".join(finals)
