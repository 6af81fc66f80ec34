"""The ledger's tables (SQLAlchemy 2.x declarative) of plans, runs, outcomes and conflicts, and row -> record.

Every table of every module of this package hangs off :data:`Base.metadata`; compaction/migrations/env.py compares
it with the migrations (tests/test_ledger.py checks that head matches the models)."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from typing import Any

from sqlalchemy import BigInteger, Boolean, DateTime, ForeignKey, Index, Integer, MetaData, String, Text, UniqueConstraint
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

from compaction.core.plan import CompactionKind, CompactionMode, partition_key_from_dict
from compaction.ledger.records import (
    ConflictRecord,
    OutcomeRecord,
    OutcomeStatus,
    PartitionOutcome,
    PlanRecord,
    RunRecord,
    RunStatus,
    RunTrigger,
    _utc,
)

# Schema (SQLAlchemy 2.x declarative). Keep compaction/migrations/versions in sync: tests compare them.


class UTCDateTime(TypeDecorator[_dt.datetime]):
    """Timezone-aware UTC datetimes on every backend.

    PostgreSQL stores ``timestamp with time zone``; SQLite stores naive UTC text (SQLite has no time zone type).
    Reads always return aware UTC datetimes; writing a naive datetime is refused."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: _dt.datetime | None, dialect: Dialect) -> _dt.datetime | None:
        if value is None:
            return None
        value = _utc(value)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: Any | None, dialect: Dialect) -> _dt.datetime | None:
        if value is None:
            return None
        if not isinstance(value, _dt.datetime):
            value = _dt.datetime.fromisoformat(str(value))
        if value.tzinfo is None:
            return value.replace(tzinfo=_dt.timezone.utc)
        return value.astimezone(_dt.timezone.utc)


NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class PlanRow(Base):
    __tablename__ = "plans"
    __table_args__ = (Index("ix_plans_table_ref_created_at", "table_ref", "created_at"),)

    plan_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    table_ref: Mapped[str] = mapped_column(String(1024))
    catalog: Mapped[str] = mapped_column(String(255))
    base_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    base_sequence_number: Mapped[int] = mapped_column(BigInteger)
    format_version: Mapped[int] = mapped_column(Integer)
    mode: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    recorded_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    decision_count: Mapped[int] = mapped_column(Integer)
    task_count: Mapped[int] = mapped_column(Integer)
    estimated_cost_bytes: Mapped[int] = mapped_column(BigInteger)
    plan_json: Mapped[str] = mapped_column(Text)


class RunRow(Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_table_ref_started_at", "table_ref", "started_at"),
        Index("ix_runs_started_at", "started_at"),
        Index("ix_runs_plan_id", "plan_id"),
        Index("ix_runs_airflow_dag_id_airflow_run_id", "airflow_dag_id", "airflow_run_id"),
    )

    run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    plan_id: Mapped[str | None] = mapped_column(String(128), ForeignKey("plans.plan_id", ondelete="SET NULL"))
    table_ref: Mapped[str] = mapped_column(String(1024))
    catalog: Mapped[str] = mapped_column(String(255))
    trigger: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))
    dry_run: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    exit_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    attention_reason: Mapped[str | None] = mapped_column(Text)
    airflow_dag_id: Mapped[str | None] = mapped_column(String(250))
    airflow_run_id: Mapped[str | None] = mapped_column(String(250))
    spark_application_id: Mapped[str | None] = mapped_column(String(255))


class PartitionOutcomeRow(Base):
    __tablename__ = "partition_outcomes"
    __table_args__ = (
        UniqueConstraint("run_id", "partition_label"),
        Index("ix_partition_outcomes_table_ref_partition_label", "table_ref", "partition_label"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.run_id", ondelete="CASCADE"))
    #: Denormalised from the run so that "latest outcome per partition of a table" is one indexed query.
    table_ref: Mapped[str] = mapped_column(String(1024))
    catalog: Mapped[str] = mapped_column(String(255))
    partition_label: Mapped[str] = mapped_column(Text)
    partition_json: Mapped[str | None] = mapped_column(Text)
    spec_id: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str | None] = mapped_column(Text)
    status: Mapped[str] = mapped_column(String(32))
    attempts: Mapped[int] = mapped_column(Integer)
    conflicts: Mapped[int] = mapped_column(Integer)
    base_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    commit_snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    data_files_before: Mapped[int | None] = mapped_column(BigInteger)
    data_files_after: Mapped[int | None] = mapped_column(BigInteger)
    data_bytes_before: Mapped[int | None] = mapped_column(BigInteger)
    data_bytes_after: Mapped[int | None] = mapped_column(BigInteger)
    records_before: Mapped[int | None] = mapped_column(BigInteger)
    records_after: Mapped[int | None] = mapped_column(BigInteger)
    delete_files_before: Mapped[int | None] = mapped_column(BigInteger)
    delete_files_after: Mapped[int | None] = mapped_column(BigInteger)
    delete_bytes_before: Mapped[int | None] = mapped_column(BigInteger)
    delete_bytes_after: Mapped[int | None] = mapped_column(BigInteger)
    delete_records_before: Mapped[int | None] = mapped_column(BigInteger)
    delete_records_after: Mapped[int | None] = mapped_column(BigInteger)
    duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    validation_level: Mapped[str | None] = mapped_column(String(32))
    validation_result: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    recorded_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())


class ConflictRow(Base):
    __tablename__ = "conflicts"
    __table_args__ = (Index("ix_conflicts_run_id_occurred_at", "run_id", "occurred_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("runs.run_id", ondelete="CASCADE"))
    partition_label: Mapped[str | None] = mapped_column(Text)
    attempt: Mapped[int] = mapped_column(Integer)
    error_class: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    occurred_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())


_OUTCOME_FIELDS = tuple(
    f.name for f in dataclasses.fields(PartitionOutcome) if f.name not in ("partition", "kind", "status")
)


# ==============================================================================================================
# Row -> record


def _plan_record(row: PlanRow) -> PlanRecord:
    return PlanRecord(
        plan_id=row.plan_id,
        table_ref=row.table_ref,
        catalog=row.catalog,
        base_snapshot_id=row.base_snapshot_id,
        base_sequence_number=row.base_sequence_number,
        format_version=row.format_version,
        mode=CompactionMode(row.mode),
        created_at=row.created_at,
        recorded_at=row.recorded_at,
        decision_count=row.decision_count,
        task_count=row.task_count,
        estimated_cost_bytes=row.estimated_cost_bytes,
        plan_json=row.plan_json,
    )


def _run_record(row: RunRow) -> RunRecord:
    return RunRecord(
        run_id=row.run_id,
        plan_id=row.plan_id,
        table_ref=row.table_ref,
        catalog=row.catalog,
        trigger=RunTrigger(row.trigger),
        mode=CompactionMode(row.mode),
        dry_run=bool(row.dry_run),
        status=RunStatus(row.status),
        started_at=row.started_at,
        finished_at=row.finished_at,
        exit_code=row.exit_code,
        error=row.error,
        attention_reason=row.attention_reason,
        airflow_dag_id=row.airflow_dag_id,
        airflow_run_id=row.airflow_run_id,
        spark_application_id=row.spark_application_id,
    )


def _outcome_record(row: PartitionOutcomeRow) -> OutcomeRecord:
    values = {name: getattr(row, name) for name in _OUTCOME_FIELDS}
    partition = None if row.partition_json is None else partition_key_from_dict(json.loads(row.partition_json))
    return OutcomeRecord(
        kind=CompactionKind(row.kind),
        status=OutcomeStatus(row.status),
        partition=partition,
        id=row.id,
        run_id=row.run_id,
        table_ref=row.table_ref,
        catalog=row.catalog,
        recorded_at=row.recorded_at,
        **values,
    )


def _conflict_record(row: ConflictRow) -> ConflictRecord:
    return ConflictRecord(
        id=row.id,
        run_id=row.run_id,
        partition_label=row.partition_label,
        attempt=row.attempt,
        error_class=row.error_class,
        message=row.message,
        occurred_at=row.occurred_at,
    )
