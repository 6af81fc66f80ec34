"""What a compaction job reports, one vocabulary for the job, the ledger and the reports.

A job group's result crosses the process boundary (spark-submit's result file, a resident executor's work item) as
versioned JSON: :data:`RESULT_FORMAT_VERSION` is written with every :class:`GroupResult` and checked by
:meth:`GroupResult.from_dict`, as the plan's ``plan_format_version`` is, so a host never misreads the result of a job
built from other code. The partition statuses the job writes (:class:`PartitionStatus`) map onto the ledger's
:class:`OutcomeStatus` in one place (:func:`outcome_status`). The pure rules about results live beside them: how a
selective task's file rewrite and conversion combine (:func:`combine_rewrite_and_conversion`) and the one final line
a partition prints (:func:`final_line`).

The result objects are filled in while the job runs (attempt by attempt), so they are mutable dataclasses; what
leaves the job is their JSON.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

from compaction.core.display import validation_label
from compaction.core.errors import RewriteJobError

__all__ = [
    "RESULT_FORMAT_VERSION", "PartitionStatus", "OutcomeStatus", "BAD_OUTCOMES", "UNSUPPORTED_PREFIX", "outcome_status",
    "PartitionResult", "GroupResult", "combine_rewrite_and_conversion", "combined_validation", "final_line",
    "rewrite_decided_reason", "BAD_PARTITION_STATUSES", "COMMITTED", "NO_OP", "SKIPPED", "CONFLICT", "FAILED",
    "ROLLED_BACK", "NEEDS_ATTENTION", "UNSUPPORTED",
]

RESULT_FORMAT_VERSION = 1
#: The reason of a partition the job does not support starts with this (recorded as skipped, reported apart).
UNSUPPORTED_PREFIX = "unsupported: "


class PartitionStatus(str, enum.Enum):
    """A partition's status in a job's result."""

    COMMITTED = "committed"
    NO_OP = "no_op"
    SKIPPED = "skipped"
    CONFLICT = "conflict"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    NEEDS_ATTENTION = "needs_attention"
    UNSUPPORTED = "unsupported"

    def __str__(self) -> str:
        return self.value


class OutcomeStatus(str, enum.Enum):
    """A partition's status in the ledger (``PENDING`` until its job reported)."""

    PENDING = "pending"
    COMMITTED = "committed"
    SKIPPED = "skipped"
    NO_OP = "no_op"
    CONFLICT = "conflict"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    NEEDS_ATTENTION = "needs_attention"


# The statuses by name, for the job's code.
COMMITTED = PartitionStatus.COMMITTED
NO_OP = PartitionStatus.NO_OP
SKIPPED = PartitionStatus.SKIPPED
CONFLICT = PartitionStatus.CONFLICT
FAILED = PartitionStatus.FAILED
ROLLED_BACK = PartitionStatus.ROLLED_BACK
NEEDS_ATTENTION = PartitionStatus.NEEDS_ATTENTION
UNSUPPORTED = PartitionStatus.UNSUPPORTED

#: Outcomes that make a run not succeed.
BAD_OUTCOMES = frozenset({OutcomeStatus.CONFLICT, OutcomeStatus.FAILED, OutcomeStatus.ROLLED_BACK,
                          OutcomeStatus.NEEDS_ATTENTION})
#: Job statuses that make a group fail.
BAD_PARTITION_STATUSES = frozenset({PartitionStatus.FAILED, PartitionStatus.CONFLICT, PartitionStatus.ROLLED_BACK,
                                    PartitionStatus.NEEDS_ATTENTION, PartitionStatus.UNSUPPORTED})


def outcome_status(status: str) -> OutcomeStatus:
    """The ledger's status of a partition the job reported as ``status``: an unsupported partition is skipped (its
    reason says why, :data:`UNSUPPORTED_PREFIX`); a status this code does not know is a failure, never a success."""
    try:
        job_status = PartitionStatus(status)
    except ValueError:
        return OutcomeStatus.FAILED
    if job_status is PartitionStatus.UNSUPPORTED:
        return OutcomeStatus.SKIPPED
    return OutcomeStatus(job_status.value)


@dataclass
class PartitionResult:
    partition: dict[str, Any]
    label: str
    kind: str
    status: str = PartitionStatus.FAILED
    reason: str = ""
    attempts: int = 0
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    base_snapshot_id: int | None = None
    commit_snapshot_ids: list[int] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    rewritten_data_files: int = 0
    added_data_files: int = 0
    removed_delete_files: int = 0
    added_delete_files: int = 0
    converted_rows: int = 0
    duration_ms: int = 0
    validation: dict[str, Any] = field(default_factory=dict)
    #: Snapshots of a selective compaction's file rewrite that were validated on their own and are kept even when
    #: its conversion later fails or conflicts (also listed in ``commit_snapshot_ids``).
    kept_snapshot_ids: list[int] = field(default_factory=list)
    error: str | None = None
    error_class: str | None = None
    exit_code: int = 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PartitionResult:
        known = {f.name for f in dataclasses.fields(cls)}
        missing = {"partition", "label", "kind"} - set(data)
        if missing:
            raise RewriteJobError(f"invalid job result: a partition lacks {', '.join(sorted(missing))}")
        return cls(**{key: value for key, value in data.items() if key in known})


@dataclass
class GroupResult:
    plan_id: str
    group_id: int
    table: str
    #: ``succeeded`` / ``failed``, or ``incomplete`` in the checkpoint a job keeps while it runs.
    status: str = "succeeded"
    partitions: list[PartitionResult] = field(default_factory=list)
    error: str | None = None
    exit_code: int = 0
    result_format_version: int = RESULT_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GroupResult:
        """The result a job wrote, refusing a format version this code does not read (like the plan's)."""
        version = data.get("result_format_version")
        if not isinstance(version, int) or isinstance(version, bool):
            raise RewriteJobError(f"invalid job result: missing or bad result_format_version {version!r}")
        if version != RESULT_FORMAT_VERSION:
            raise RewriteJobError(f"unsupported job result format version {version} (this code reads version "
                                  f"{RESULT_FORMAT_VERSION}): the job ran other icecompact code than its host")
        try:
            return cls(plan_id=str(data["plan_id"]), group_id=int(data["group_id"]), table=str(data["table"]),
                       status=str(data.get("status") or "failed"),
                       partitions=[PartitionResult.from_dict(p) for p in data.get("partitions") or []],
                       error=data.get("error"), exit_code=int(data.get("exit_code") or 0), result_format_version=version)
        except (KeyError, TypeError, ValueError) as e:
            raise RewriteJobError(f"invalid job result: {e}") from e


def rewrite_decided_reason(snapshot_ids: list[int]) -> str:
    """The reason of a partition whose validated file rewrite is its outcome: the conversion after it found
    nothing left to do (its own skip reason, e.g. "changed since planning", is about the rewrite we just made)."""
    return (f"file rewrite committed (snapshot {', '.join(map(str, snapshot_ids))}, validated); "
            "nothing left to convert after it")


def combine_rewrite_and_conversion(rewrite: PartitionResult | None, part: PartitionResult) -> PartitionResult:
    """A selective task's result: its group file rewrite (validated and kept on its own) then its conversion.
    When the conversion failed, the reason says that the rewrite holds."""
    if rewrite is None or not rewrite.commit_snapshot_ids:
        return part
    kept = list(rewrite.commit_snapshot_ids)
    part.commit_snapshot_ids = kept + [sid for sid in part.commit_snapshot_ids if sid not in kept]
    part.rewritten_data_files += rewrite.rewritten_data_files
    part.added_data_files += rewrite.added_data_files
    part.base_snapshot_id, part.before = rewrite.base_snapshot_id, rewrite.before
    part.duration_ms += rewrite.duration_ms
    part.validation = combined_validation(rewrite.validation, part.validation)
    if part.status in (PartitionStatus.NO_OP, PartitionStatus.SKIPPED):
        # The rewrite committed and was validated; the conversion had nothing left to do. The partition's outcome is
        # the rewrite's, with its reason: the conversion's skip reason ("changed since planning: ...", caused by
        # the rewrite itself) under "committed" contradicted the status.
        part.status = PartitionStatus.COMMITTED
        part.reason = rewrite.reason or rewrite_decided_reason(kept)
    elif part.status != PartitionStatus.COMMITTED:
        note = f"the file rewrite (snapshot {', '.join(map(str, kept))}, validated) holds; the conversion did not"
        part.reason = f"{part.reason}; {note}" if part.reason else note
    return part


_RESULT_SEVERITY = {"passed": 0, "skipped": 1, "failed": 2}


def combined_validation(rewrite: Mapping[str, Any], conversion: Mapping[str, Any]) -> dict[str, Any]:
    """The validation of a partition touched by a file rewrite and a conversion: every check of both, and the level
    and result of the weakest step that validated a commit. A conversion that committed nothing has no result of
    its own; dropping the rewrite's then reported a checked commit as unvalidated (``-``)."""
    checks = list(rewrite.get("checks", [])) + list(conversion.get("checks", []))
    results = [v for v in (rewrite, conversion) if v.get("result") is not None]
    if not results:
        return {**conversion, "checks": checks}
    weakest = max(results, key=lambda v: _RESULT_SEVERITY.get(str(v.get("result")), 2))
    return {**conversion, "level": weakest.get("level"), "result": weakest.get("result"), "checks": checks}


def final_line(part: PartitionResult) -> str:
    """The partition's one line in the progress stream, printed when its outcome is final: status, the validation
    its commits passed (``passed (count)``; ``-`` when nothing was checked) and the reason of the step that decided
    the status (or the error). Earlier steps print what they do, never a partition's status."""
    validation = validation_label(part.validation.get("level"), part.validation.get("result"))
    detail = part.reason or (part.error or "")
    if part.error and part.reason and part.status not in (PartitionStatus.COMMITTED, PartitionStatus.NO_OP,
                                                          PartitionStatus.SKIPPED):
        detail = f"{part.reason}; {part.error}"
    line = f"icecompact: {part.label} -> {PartitionStatus(part.status).value} [validation {validation}]"
    return f"{line}: {detail[:500]}" if detail else line
