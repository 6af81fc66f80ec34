"""Enums and frozen value objects of the ledger (what every query returns; never ORM objects), time helpers."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import enum
import json
from dataclasses import dataclass
from typing import Any, TypeVar

from compaction.core.model import PartitionKey, PartitionState
from compaction.core.plan import CompactionKind, CompactionMode, CompactionPlan, partition_key_to_dict
from compaction.core.results import OutcomeStatus  # the ledger's vocabulary is the reports' (one home)
from compaction.ledger.errors import redact_text

#: Stored free texts (errors, conflict messages, reasons) are cut to this many characters.
MAX_TEXT_CHARS = 65_536



class RunStatus(str, enum.Enum):
    PLANNED = "planned"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    FAILED = "failed"
    NEEDS_ATTENTION = "needs_attention"

    @property
    def is_terminal(self) -> bool:
        return self not in (RunStatus.PLANNED, RunStatus.RUNNING)


class RunTrigger(str, enum.Enum):
    CLI = "cli"
    AIRFLOW = "airflow"
    TEST = "test"


_E = TypeVar("_E", bound=enum.Enum)


def _enum(cls: type[_E], value: object, what: str) -> _E:
    if isinstance(value, cls):
        return value
    try:
        return cls(value)
    except ValueError:
        allowed = ", ".join(str(m.value) for m in cls)
        raise ValueError(f"invalid {what} {value!r}; expected one of: {allowed}") from None


def utcnow() -> _dt.datetime:
    return _dt.datetime.now(_dt.timezone.utc)


def _utc(value: _dt.datetime | None, what: str = "timestamp") -> _dt.datetime:
    """``None`` -> now; aware -> converted to UTC; naive -> ValueError (the ledger never guesses a time zone)."""
    if value is None:
        return utcnow()
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware (got naive {value.isoformat()})")
    return value.astimezone(_dt.timezone.utc)


def _opt_utc(value: _dt.datetime | None, what: str) -> _dt.datetime | None:
    return None if value is None else _utc(value, what)


def _jsonable(value: object) -> object:
    if isinstance(value, _dt.datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, PartitionKey):
        return partition_key_to_dict(value)
    return value


def _clip(text: str | None, secrets: tuple[str, ...] = ()) -> str | None:
    if text is None:
        return None
    text = redact_text(text, secrets)
    if len(text) > MAX_TEXT_CHARS:
        text = text[: MAX_TEXT_CHARS - 16] + " ... [truncated]"
    return text


def _duration_ms(start: _dt.datetime | None, end: _dt.datetime | None) -> int | None:
    if start is None or end is None:
        return None
    return int(round((end - start).total_seconds() * 1000))


def partition_stats(state: PartitionState) -> dict[str, int]:
    """File/byte/record counts of a partition, keyed like the ``*_before`` / ``*_after`` outcome fields."""
    return {
        "data_files": state.data_file_count,
        "data_bytes": state.data_bytes,
        "records": state.data_records,
        "delete_files": len(state.delete_files),
        "delete_bytes": state.delete_bytes,
        "delete_records": state.delete_records,
    }


_STAT_NAMES = ("data_files", "data_bytes", "records", "delete_files", "delete_bytes", "delete_records")


@dataclass(frozen=True)
class PartitionOutcome:
    """What happened to one partition in one run (input of :meth:`Ledger.record_partition_outcome`).

    ``attempts`` counts commit attempts, ``conflicts`` the attempts that failed with a commit conflict (each one
    is also worth a :meth:`Ledger.record_conflict` row). Counts left ``None`` are unknown (e.g. ``*_after`` of a
    failed partition). ``duration_ms`` defaults to ``finished_at - started_at`` when both are set.
    """

    partition_label: str
    kind: CompactionKind
    status: OutcomeStatus
    reason: str | None = None
    partition: PartitionKey | None = None
    spec_id: int | None = None
    attempts: int = 0
    conflicts: int = 0
    base_snapshot_id: int | None = None
    commit_snapshot_id: int | None = None
    data_files_before: int | None = None
    data_files_after: int | None = None
    data_bytes_before: int | None = None
    data_bytes_after: int | None = None
    records_before: int | None = None
    records_after: int | None = None
    delete_files_before: int | None = None
    delete_files_after: int | None = None
    delete_bytes_before: int | None = None
    delete_bytes_after: int | None = None
    delete_records_before: int | None = None
    delete_records_after: int | None = None
    duration_ms: int | None = None
    validation_level: str | None = None
    validation_result: str | None = None
    error: str | None = None
    started_at: _dt.datetime | None = None
    finished_at: _dt.datetime | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", _enum(CompactionKind, self.kind, "compaction kind"))
        object.__setattr__(self, "status", _enum(OutcomeStatus, self.status, "outcome status"))
        if not self.partition_label:
            raise ValueError("partition_label must not be empty")
        if self.partition is not None:
            if self.partition.label() != self.partition_label:
                raise ValueError(
                    f"partition_label {self.partition_label!r} does not match the partition key {self.partition.label()!r}"
                )
            if self.spec_id is None:
                object.__setattr__(self, "spec_id", self.partition.spec_id)
            elif self.spec_id != self.partition.spec_id:
                raise ValueError(f"spec_id {self.spec_id} does not match the partition key (spec {self.partition.spec_id})")
        if self.attempts < 0 or self.conflicts < 0:
            raise ValueError("attempts and conflicts must be >= 0")
        object.__setattr__(self, "started_at", _opt_utc(self.started_at, "started_at"))
        object.__setattr__(self, "finished_at", _opt_utc(self.finished_at, "finished_at"))

    @classmethod
    def for_partition(
        cls, key: PartitionKey, kind: CompactionKind | str, status: OutcomeStatus | str, **fields: Any
    ) -> PartitionOutcome:
        """An outcome for ``key`` (label, spec id and partition tuple taken from the key)."""
        return cls(key.label(), kind, status, partition=key, **fields)  # type: ignore[arg-type]

    def with_before(self, state: PartitionState) -> PartitionOutcome:
        """A copy with every ``*_before`` count taken from ``state``."""
        changes: dict[str, Any] = {f"{k}_before": v for k, v in partition_stats(state).items()}
        return dataclasses.replace(self, **changes)

    def with_after(self, state: PartitionState) -> PartitionOutcome:
        """A copy with every ``*_after`` count taken from ``state``."""
        changes: dict[str, Any] = {f"{k}_after": v for k, v in partition_stats(state).items()}
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, object]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True, kw_only=True)
class OutcomeRecord(PartitionOutcome):
    """A stored :class:`PartitionOutcome` with its row id, run and table, and the time it was last written."""

    id: int
    run_id: str
    table_ref: str
    catalog: str
    recorded_at: _dt.datetime


@dataclass(frozen=True)
class PlanRecord:
    plan_id: str
    table_ref: str
    catalog: str
    base_snapshot_id: int | None
    base_sequence_number: int
    format_version: int
    mode: CompactionMode
    created_at: _dt.datetime
    recorded_at: _dt.datetime
    decision_count: int
    task_count: int
    estimated_cost_bytes: int
    plan_json: str

    def plan(self) -> CompactionPlan:
        return CompactionPlan.from_json(self.plan_json)

    def to_dict(self, include_plan: bool = True) -> dict[str, object]:
        out = {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self) if f.name != "plan_json"}
        if include_plan:
            out["plan"] = json.loads(self.plan_json)
        return out


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    plan_id: str | None
    table_ref: str
    catalog: str
    trigger: RunTrigger
    mode: CompactionMode
    dry_run: bool
    status: RunStatus
    started_at: _dt.datetime
    finished_at: _dt.datetime | None
    exit_code: int | None
    error: str | None
    attention_reason: str | None
    airflow_dag_id: str | None
    airflow_run_id: str | None
    spark_application_id: str | None

    @property
    def duration_ms(self) -> int | None:
        return _duration_ms(self.started_at, self.finished_at)

    def to_dict(self) -> dict[str, object]:
        out = {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}
        out["duration_ms"] = self.duration_ms
        return out


@dataclass(frozen=True)
class ConflictRecord:
    id: int
    run_id: str
    partition_label: str | None
    attempt: int
    error_class: str
    message: str
    occurred_at: _dt.datetime

    def to_dict(self) -> dict[str, object]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}")
    return limit
