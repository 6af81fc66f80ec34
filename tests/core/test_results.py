"""The job's result crosses the process boundary as versioned JSON, read back with its version checked; the job's
statuses map onto the ledger's in one place."""

from __future__ import annotations

import json

import pytest

from compaction.core.errors import RewriteJobError
from compaction.core.results import (
    RESULT_FORMAT_VERSION,
    GroupResult,
    OutcomeStatus,
    PartitionResult,
    PartitionStatus,
    outcome_status,
)


def _group() -> GroupResult:
    part = PartitionResult({"spec_id": 0, "fields": []}, "spec=0", "minor", status=PartitionStatus.COMMITTED,
                           commit_snapshot_ids=[7], before={"data_files": 3}, validation={"level": "count"})
    return GroupResult("plan-1", 2, "db.t", partitions=[part])


def test_a_result_round_trips_through_json() -> None:
    written = json.dumps(_group().to_dict())
    read = GroupResult.from_dict(json.loads(written))
    assert read == _group() and read.partitions[0].status == "committed"
    assert json.loads(written)["partitions"][0]["status"] == "committed"  # plain strings in the file


@pytest.mark.parametrize("version", [RESULT_FORMAT_VERSION + 1, 0, None, "1", True])
def test_a_result_of_another_format_is_refused(version: object) -> None:
    data = _group().to_dict()
    data["result_format_version"] = version
    with pytest.raises(RewriteJobError, match="result_format_version|format version"):
        GroupResult.from_dict(data)


def test_a_partition_without_its_identity_is_refused_and_unknown_keys_are_ignored() -> None:
    data = _group().to_dict()
    data["partitions"][0]["from_a_later_patch"] = 1
    assert GroupResult.from_dict(data).partitions[0].label == "spec=0"
    del data["partitions"][0]["label"]
    with pytest.raises(RewriteJobError, match="label"):
        GroupResult.from_dict(data)


def test_every_job_status_has_one_ledger_status() -> None:
    assert {s: outcome_status(s) for s in PartitionStatus} == {
        PartitionStatus.COMMITTED: OutcomeStatus.COMMITTED, PartitionStatus.NO_OP: OutcomeStatus.NO_OP,
        PartitionStatus.SKIPPED: OutcomeStatus.SKIPPED, PartitionStatus.CONFLICT: OutcomeStatus.CONFLICT,
        PartitionStatus.FAILED: OutcomeStatus.FAILED, PartitionStatus.ROLLED_BACK: OutcomeStatus.ROLLED_BACK,
        PartitionStatus.NEEDS_ATTENTION: OutcomeStatus.NEEDS_ATTENTION,
        PartitionStatus.UNSUPPORTED: OutcomeStatus.SKIPPED,
    }
    assert outcome_status("a-status-of-a-newer-job") is OutcomeStatus.FAILED  # never read as a success
