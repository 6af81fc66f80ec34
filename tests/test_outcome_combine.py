"""A selective task's outcome combines its file rewrite and its conversion without losing the validation."""

from __future__ import annotations

from compaction.spark.job import COMMITTED, NO_OP, SKIPPED, PartitionResult, _combine


def _rewrite() -> PartitionResult:
    return PartitionResult({}, "p", "MAJOR", status=COMMITTED, reason="2 small files rewritten",
                           commit_snapshot_ids=[11], rewritten_data_files=2, added_data_files=1,
                           validation={"level": "count", "result": "passed", "checks": [{"name": "rows", "ok": True}]})


def test_rewrite_then_no_conversion_keeps_level_result_and_reason() -> None:
    """The defect: a partition whose conversion had nothing to do was reported `committed` with validation `-`
    and the conversion's skip reason."""
    for status in (NO_OP, SKIPPED):
        part = PartitionResult({}, "p", "MAJOR", status=status, reason="no equality deletes left")
        combined = _combine(_rewrite(), part)
        assert combined.status == COMMITTED
        assert combined.validation["level"] == "count" and combined.validation["result"] == "passed"
        assert combined.validation["checks"] == [{"name": "rows", "ok": True}]
        assert combined.reason == "2 small files rewritten"
        assert combined.commit_snapshot_ids == [11]


def test_both_steps_validated_reports_the_weakest() -> None:
    part = PartitionResult({}, "p", "MAJOR", status=COMMITTED, commit_snapshot_ids=[12],
                           validation={"level": "count", "result": "failed", "checks": [{"name": "rows", "ok": False}]})
    combined = _combine(_rewrite(), part)
    assert combined.validation["result"] == "failed"
    assert len(combined.validation["checks"]) == 2
    assert combined.commit_snapshot_ids == [11, 12]
    ok = PartitionResult({}, "p", "MAJOR", status=COMMITTED, commit_snapshot_ids=[12],
                         validation={"level": "count", "result": "passed", "checks": []})
    assert _combine(_rewrite(), ok).validation["result"] == "passed"
