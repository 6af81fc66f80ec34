"""The ledger: a durable record of compaction plans, runs and per-partition outcomes.

Storage is a SQL database reached through SQLAlchemy 2.x:

* default: the SQLite file ``ledger.db`` in :func:`compaction.settings.home` (the embedded, single-host setup);
* otherwise the URL in ``$ICECOMPACT_LEDGER_URL`` (or passed to :meth:`Ledger.open`), e.g.
  ``postgresql+psycopg2://user:password@host:5432/icecompact``.

The schema is versioned with Alembic. The migration scripts ship inside the package (``compaction/migrations``)
and are driven by a programmatic :class:`alembic.config.Config` (no ``alembic.ini``); :meth:`Ledger.open`
upgrades an empty or older database to head. That upgrade is safe when several processes open a fresh database
at once: it runs in one transaction that first takes a database-wide lock (SQLite: ``BEGIN IMMEDIATE`` with a
busy timeout; PostgreSQL: ``pg_advisory_xact_lock``), so a late process waits, then finds the schema at head and
does nothing. Opening a database that is already at head takes no write lock at all.

Authoring a new migration (from a source checkout)::

    .venv/bin/python -c "from alembic import command; from compaction.ledger import alembic_config; \\
        command.revision(alembic_config('sqlite:////tmp/ledger-dev.db'), message='add x', autogenerate=True)"

(upgrade that scratch database to head first; review the generated file; keep revisions self-contained, i.e.
never import the models from a revision).

Everything a query returns is a frozen dataclass (:class:`PlanRecord`, :class:`RunRecord`,
:class:`OutcomeRecord`, :class:`ConflictRecord`) with ``to_dict()`` (ISO-8601 UTC timestamps, enum values), so
the CLI, the Airflow plugin and JSON endpoints never see ORM objects or sessions. Timestamps are timezone-aware
UTC in Python; every write that stamps a time takes an optional ``now`` (default: the current UTC time).

Errors: every SQLAlchemy / Alembic failure is wrapped into :class:`LedgerError` (exit code 10) at the public
method boundary. Database passwords never appear in messages, in ``repr`` or in stored error texts (URLs are
rendered with ``***`` in place of the password).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import enum
import functools
import json
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, TypeVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    func,
    select,
)
from sqlalchemy import delete as sa_delete
from sqlalchemy import insert as sa_insert
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import URL, Connection, Dialect, Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, defer, mapped_column
from sqlalchemy.types import TypeDecorator

from compaction import settings
from compaction.core.errors import CompactionError
from compaction.core.health import HealthSample, PartitionHealth
from compaction.core.model import PartitionKey, PartitionState
from compaction.core.plan import CompactionKind, CompactionMode, CompactionPlan, partition_key_from_dict, partition_key_to_dict

if TYPE_CHECKING:
    from alembic.config import Config

__all__ = [
    "LEDGER_URL_ENV",
    "LEDGER_FILENAME",
    "LedgerError",
    "UnknownRunError",
    "RunStatus",
    "RunTrigger",
    "OutcomeStatus",
    "PartitionOutcome",
    "PlanRecord",
    "RunRecord",
    "OutcomeRecord",
    "ConflictRecord",
    "Ledger",
    "Base",
    "PlanRow",
    "RunRow",
    "PartitionOutcomeRow",
    "ConflictRow",
    "UTCDateTime",
    "default_url",
    "resolve_url",
    "redact_url",
    "redact_text",
    "alembic_config",
    "create_ledger_engine",
    "writing",
    "take_migration_lock",
    "partition_stats",
    "HealthRetention",
    "HealthSampleRecord",
    "HealthSampleRow",
]

LEDGER_URL_ENV = "ICECOMPACT_LEDGER_URL"
LEDGER_FILENAME = "ledger.db"
#: Seconds to wait for a SQLite lock (busy timeout) or for a PostgreSQL connection.
DEFAULT_TIMEOUT_S = 30.0
#: Stored free texts (errors, conflict messages, reasons) are cut to this many characters.
MAX_TEXT_CHARS = 65_536
#: Key of the PostgreSQL advisory lock held while migrating (arbitrary constant, "icecompact ledger").
PG_MIGRATION_LOCK_KEY = 0x1CEC_0DA1_1ED6
MIGRATIONS_DIR = Path(__file__).resolve().with_name("migrations")

_WRITE_OPTION = "icecompact_ledger_write"


# ==============================================================================================================
# Errors


class LedgerError(CompactionError):
    """The ledger database cannot be opened, migrated, read or written (the message never carries a password)."""

    exit_code = 10


class UnknownRunError(LedgerError):
    """A write referred to a ``run_id`` that the ledger does not know."""


# ==============================================================================================================
# Redaction

_URL_PASSWORD = re.compile(r"(?P<prefix>\b[A-Za-z][A-Za-z0-9+.\-]*://[^:/@\s]*):(?P<password>[^@\s]*)@")
_KV_PASSWORD = re.compile(r"(?i)\b(?P<key>password|passwd|pwd)(?P<sep>\s*[=:]\s*)(?P<value>'[^']*'|\"[^\"]*\"|[^\s&;,]+)")


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Remove passwords from free text: ``scheme://user:pw@`` userinfo, ``password=...`` pairs, known secrets."""
    out = _URL_PASSWORD.sub(lambda m: f"{m.group('prefix')}:***@", text)
    out = _KV_PASSWORD.sub(lambda m: f"{m.group('key')}{m.group('sep')}***", out)
    for secret in secrets:
        if secret:
            out = out.replace(secret, "***")
    return out


def redact_url(url: str | URL) -> str:
    """The URL as a string with the password replaced by ``***`` (also for strings SQLAlchemy cannot parse)."""
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001 - unparseable: fall back to the textual redaction
        return redact_text(url)


# ==============================================================================================================
# Enums and value objects


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


class OutcomeStatus(str, enum.Enum):
    PENDING = "pending"
    COMMITTED = "committed"
    SKIPPED = "skipped"
    NO_OP = "no_op"
    CONFLICT = "conflict"
    FAILED = "failed"
    ROLLED_BACK = "rolled_back"
    NEEDS_ATTENTION = "needs_attention"


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


# ==============================================================================================================
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


# ==============================================================================================================
# URLs, engines, Alembic


def default_url() -> str:
    """``sqlite:////<ICECOMPACT_HOME>/ledger.db``."""
    return URL.create("sqlite", database=str(settings.home() / LEDGER_FILENAME)).render_as_string(hide_password=False)


def resolve_url(url: str | URL | None = None) -> str:
    """Explicit URL, else ``$ICECOMPACT_LEDGER_URL``, else :func:`default_url`."""
    if url is not None:
        return url.render_as_string(hide_password=False) if isinstance(url, URL) else url
    return os.environ.get(LEDGER_URL_ENV) or default_url()


def create_ledger_engine(url: str | URL, timeout: float = DEFAULT_TIMEOUT_S) -> Engine:
    """A SQLAlchemy engine set up like the store's: SQLite busy timeout, real transactions and foreign keys;
    PostgreSQL connect timeout and pre-ping. Parameters never appear in error messages."""
    url = make_url(url)
    backend = url.get_backend_name()
    kwargs: dict[str, Any] = {"hide_parameters": True}  # keep plan JSON and error texts out of exception messages
    connect_args: dict[str, Any] = {}
    if backend == "sqlite":
        database = url.database or ""
        if database and database != ":memory:" and not database.startswith("file:"):
            Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        connect_args["timeout"] = timeout
    elif backend == "postgresql":
        kwargs["pool_pre_ping"] = True
        if url.get_driver_name() in ("psycopg2", "psycopg") and "connect_timeout" not in url.query:
            connect_args["connect_timeout"] = max(1, int(timeout))
    engine = create_engine(url, connect_args=connect_args, **kwargs)
    if backend == "sqlite":
        _install_sqlite_transactions(engine)
    return engine


def _install_sqlite_transactions(engine: Engine) -> None:
    """Real transactions on SQLite: pysqlite would otherwise not BEGIN before DDL and take the write lock lazily.

    Write transactions start with ``BEGIN IMMEDIATE`` (the write lock is taken up front, waiting up to the busy
    timeout, so two writers never deadlock on a lock upgrade); read transactions with a plain ``BEGIN``."""

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get(_WRITE_OPTION) else "BEGIN")


def writing(engine: Engine) -> Engine:
    """The engine for write transactions (SQLite: ``BEGIN IMMEDIATE``; other backends: unchanged)."""
    return engine.execution_options(**{_WRITE_OPTION: True})


def take_migration_lock(conn: Connection) -> None:
    """Serialise schema migrations across processes, for the rest of ``conn``'s transaction.

    PostgreSQL: a transaction-level advisory lock. SQLite: nothing to do here when the transaction was begun by a
    ledger write engine (``BEGIN IMMEDIATE`` already holds the database write lock)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK_KEY})")


def alembic_config(url: str | URL | None = None, connection: Connection | None = None) -> Config:
    """A programmatic Alembic config for the packaged migrations (no ``alembic.ini`` needed).

    With ``connection`` the migration runs on it (inside its transaction); otherwise ``env.py`` connects to
    ``url`` (resolved by :func:`resolve_url`)."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    if connection is not None:
        cfg.attributes["connection"] = connection
    else:
        # ConfigParser interpolates '%': escape it (URL-encoded passwords contain '%').
        cfg.set_main_option("sqlalchemy.url", resolve_url(url).replace("%", "%%"))
    return cfg


@functools.lru_cache(maxsize=1)
def _script_revisions() -> tuple[frozenset[str], frozenset[str]]:
    """(head revisions, all known revisions) of the packaged migration scripts."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    cfg.set_main_option("path_separator", "os")
    script = ScriptDirectory.from_config(cfg)
    return frozenset(script.get_heads()), frozenset(rev.revision for rev in script.walk_revisions())


# ==============================================================================================================
# Health samples (issue 15): one row per inspection of a table, kept for a bounded time. Everything about them -
# settings, schema row, record, the Ledger methods (mixed into Ledger) - lives in this section.

#: Samples older than this many days are pruned when a sample of the same table is recorded (default 30).
HEALTH_RETENTION_DAYS_ENV = "ICECOMPACT_HEALTH_RETENTION_DAYS"
HEALTH_RETENTION_DAYS_DEFAULT = 30.0
#: At most this many samples are kept per table (the newest; default 1000).
HEALTH_MAX_SAMPLES_ENV = "ICECOMPACT_HEALTH_MAX_SAMPLES"
HEALTH_MAX_SAMPLES_DEFAULT = 1000
#: A sample of an unchanged table (same snapshot, metadata file and decision) younger than this is not repeated.
HEALTH_MIN_INTERVAL_S = 300.0


@dataclass(frozen=True)
class HealthRetention:
    """How long health samples are kept: ``days`` (<= 0: no age limit) and ``max_samples`` per table."""

    days: float = HEALTH_RETENTION_DAYS_DEFAULT
    max_samples: int = HEALTH_MAX_SAMPLES_DEFAULT
    min_interval_s: float = HEALTH_MIN_INTERVAL_S

    def __post_init__(self) -> None:
        if self.max_samples < 1:
            raise ValueError(f"max_samples must be >= 1, not {self.max_samples}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HealthRetention:
        env = os.environ if environ is None else environ
        try:
            days = float(env.get(HEALTH_RETENTION_DAYS_ENV) or HEALTH_RETENTION_DAYS_DEFAULT)
            max_samples = int(env.get(HEALTH_MAX_SAMPLES_ENV) or HEALTH_MAX_SAMPLES_DEFAULT)
        except ValueError:
            raise LedgerError(f"invalid {HEALTH_RETENTION_DAYS_ENV} / {HEALTH_MAX_SAMPLES_ENV}: expected numbers "
                              f"(got {env.get(HEALTH_RETENTION_DAYS_ENV)!r}, {env.get(HEALTH_MAX_SAMPLES_ENV)!r})") from None
        if max_samples < 1:
            raise LedgerError(f"invalid {HEALTH_MAX_SAMPLES_ENV}={max_samples}: expected >= 1")
        return cls(days=days, max_samples=max_samples)


class HealthSampleRow(Base):
    __tablename__ = "health_samples"
    __table_args__ = (Index("ix_health_samples_catalog_table_ref_recorded_at", "catalog", "table_ref", "recorded_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    catalog: Mapped[str] = mapped_column(String(255))
    table_ref: Mapped[str] = mapped_column(String(1024))
    recorded_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    source: Mapped[str] = mapped_column(String(16))
    snapshot_id: Mapped[int | None] = mapped_column(BigInteger)
    metadata_location: Mapped[str | None] = mapped_column(Text)
    partitions: Mapped[int] = mapped_column(BigInteger)
    data_files: Mapped[int] = mapped_column(BigInteger)
    data_bytes: Mapped[int] = mapped_column(BigInteger)
    data_records: Mapped[int] = mapped_column(BigInteger)
    position_delete_files: Mapped[int] = mapped_column(BigInteger)
    equality_delete_files: Mapped[int] = mapped_column(BigInteger)
    deletion_vectors: Mapped[int] = mapped_column(BigInteger)
    delete_records: Mapped[int] = mapped_column(BigInteger)
    delete_bytes: Mapped[int] = mapped_column(BigInteger)
    delete_ratio: Mapped[float] = mapped_column(Float)
    fragment_files: Mapped[int] = mapped_column(BigInteger)
    decision: Mapped[str | None] = mapped_column(String(16))
    decision_reason: Mapped[str | None] = mapped_column(Text)
    partitions_minor: Mapped[int] = mapped_column(Integer)
    partitions_major: Mapped[int] = mapped_column(Integer)
    partitions_truncated: Mapped[bool] = mapped_column(Boolean)
    #: Per-partition detail (JSON list, at most MAX_PARTITIONS_PER_SAMPLE entries); loaded only on request.
    partitions_json: Mapped[str | None] = mapped_column(Text)


_SAMPLE_COUNTS = ("partitions", "data_files", "data_bytes", "data_records", "position_delete_files",
                  "equality_delete_files", "deletion_vectors", "delete_records", "delete_bytes", "fragment_files",
                  "partitions_minor", "partitions_major")


@dataclass(frozen=True, kw_only=True)
class HealthSampleRecord(HealthSample):
    """A stored :class:`~compaction.core.health.HealthSample` with its id, time and source (cli/airflow/ui)."""

    id: int
    recorded_at: _dt.datetime
    source: str

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out.update(id=self.id, recorded_at=self.recorded_at.isoformat(), source=self.source)
        return out


def _sample_record(row: HealthSampleRow, with_partitions: bool) -> HealthSampleRecord:
    detail: tuple[PartitionHealth, ...] = ()
    if with_partitions and row.partitions_json:
        detail = tuple(PartitionHealth.from_dict(d) for d in json.loads(row.partitions_json))
    return HealthSampleRecord(
        catalog=row.catalog, table_ref=row.table_ref, snapshot_id=row.snapshot_id,
        metadata_location=row.metadata_location, decision=row.decision, decision_reason=row.decision_reason,
        partitions_detail=detail, partitions_truncated=bool(row.partitions_truncated),
        id=row.id, recorded_at=row.recorded_at, source=row.source,
        **{name: int(getattr(row, name) or 0) for name in _SAMPLE_COUNTS},
    )


class _HealthSamples:
    """The health-sample methods of :class:`Ledger` (kept together here; Ledger provides the sessions)."""

    def _write(self, action: str) -> contextlib.AbstractContextManager[Session]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _read(self, action: str) -> contextlib.AbstractContextManager[Session]:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def _clip(self, text: str | None) -> str | None:  # pragma: no cover - Ledger's
        raise NotImplementedError

    def record_health_sample(self, sample: HealthSample, *, source: str = "cli", now: _dt.datetime | None = None,
                             retention: HealthRetention | None = None) -> HealthSampleRecord:
        """Store ``sample`` and prune the table's samples beyond ``retention`` (default: from the environment).

        A sample equal in snapshot, metadata file and decision to the table's latest one recorded less than
        ``retention.min_interval_s`` ago is not stored again: that latest record is returned."""
        recorded_at = _utc(now, "now")
        keep = retention or HealthRetention.from_env()
        s = HealthSampleRow
        with self._write("recording a health sample") as session:
            latest = session.execute(
                select(s).where(s.catalog == sample.catalog, s.table_ref == sample.table_ref)
                .order_by(s.recorded_at.desc(), s.id.desc()).limit(1)
            ).scalar_one_or_none()
            if (latest is not None and latest.snapshot_id == sample.snapshot_id
                    and latest.metadata_location == sample.metadata_location and latest.decision == sample.decision
                    and 0 <= (recorded_at - latest.recorded_at).total_seconds() < keep.min_interval_s):
                return _sample_record(latest, with_partitions=True)
            row = HealthSampleRow(
                catalog=sample.catalog, table_ref=sample.table_ref, recorded_at=recorded_at, source=source[:16],
                snapshot_id=sample.snapshot_id, metadata_location=sample.metadata_location,
                delete_ratio=float(sample.delete_ratio), decision=sample.decision,
                decision_reason=self._clip(sample.decision_reason), partitions_truncated=sample.partitions_truncated,
                partitions_json=json.dumps([p.to_dict() for p in sample.partitions_detail], ensure_ascii=False),
                **{name: int(getattr(sample, name)) for name in _SAMPLE_COUNTS},
            )
            session.add(row)
            session.flush()
            mine = (s.catalog == sample.catalog, s.table_ref == sample.table_ref)
            if keep.days > 0:
                cutoff = recorded_at - _dt.timedelta(days=keep.days)
                session.execute(sa_delete(s).where(*mine, s.recorded_at < cutoff))
            beyond = (select(s.id).where(*mine).order_by(s.recorded_at.desc(), s.id.desc())
                      .offset(keep.max_samples).scalar_subquery())
            session.execute(sa_delete(s).where(*mine, s.id.in_(beyond)).execution_options(synchronize_session=False))
            return _sample_record(row, with_partitions=True)

    def health_samples(self, table_ref: str, *, catalog: str | None = None, since: _dt.datetime | None = None,
                       limit: int = 1000, with_partitions: bool = False) -> list[HealthSampleRecord]:
        """The table's samples, oldest first: the newest ``limit`` (recorded at or after ``since``)."""
        s = HealthSampleRow
        stmt = select(s).where(s.table_ref == table_ref)
        if catalog is not None:
            stmt = stmt.where(s.catalog == catalog)
        if since is not None:
            stmt = stmt.where(s.recorded_at >= _utc(since, "since"))
        if not with_partitions:
            stmt = stmt.options(defer(s.partitions_json))
        stmt = stmt.order_by(s.recorded_at.desc(), s.id.desc()).limit(_limit(limit))
        with self._read("reading health samples") as session:
            rows = list(session.execute(stmt).scalars())
            return [_sample_record(r, with_partitions) for r in reversed(rows)]

    def latest_health_samples(self, catalog: str) -> dict[str, HealthSampleRecord]:
        """Per table of ``catalog``, its most recent sample (without partition detail): one query."""
        s = HealthSampleRow
        newest = (select(s.table_ref.label("table_ref"), func.max(s.recorded_at).label("at"))
                  .where(s.catalog == catalog).group_by(s.table_ref).subquery())
        stmt = (select(s).join(newest, (newest.c.table_ref == s.table_ref) & (newest.c.at == s.recorded_at))
                .where(s.catalog == catalog).options(defer(s.partitions_json)).order_by(s.id))
        with self._read("reading the latest health samples") as session:
            return {r.table_ref: _sample_record(r, False) for r in session.execute(stmt).scalars()}

    def health_series(self, catalog: str, *, since: _dt.datetime | None = None,
                      points: int = 40) -> dict[str, list[tuple[_dt.datetime, int]]]:
        """Per table of ``catalog``: (time, delete files) of its newest ``points`` samples, oldest first."""
        s = HealthSampleRow
        rank = func.row_number().over(partition_by=s.table_ref, order_by=(s.recorded_at.desc(), s.id.desc()))
        inner = select(s.table_ref.label("table_ref"), s.recorded_at.label("at"),
                       (s.position_delete_files + s.equality_delete_files + s.deletion_vectors).label("deletes"),
                       rank.label("rank")).where(s.catalog == catalog)
        if since is not None:
            inner = inner.where(s.recorded_at >= _utc(since, "since"))
        ranked = inner.subquery()
        stmt = (select(ranked.c.table_ref, ranked.c.at, ranked.c.deletes).where(ranked.c.rank <= _limit(points))
                .order_by(ranked.c.table_ref, ranked.c.at))
        out: dict[str, list[tuple[_dt.datetime, int]]] = {}
        with self._read("reading health series") as session:
            for table_ref, at, deletes in session.execute(stmt).all():
                out.setdefault(table_ref, []).append((_utc(at), int(deletes or 0)))
        return out

    def latest_runs(self, catalog: str) -> dict[str, RunRecord]:
        """Per table of ``catalog``, its most recently started run (dry runs included): one query."""
        r = RunRow
        rank = func.row_number().over(partition_by=r.table_ref, order_by=(r.started_at.desc(), r.run_id.desc()))
        ranked = select(r.run_id.label("run_id"), rank.label("rank")).where(r.catalog == catalog).subquery()
        stmt = select(r).join(ranked, ranked.c.run_id == r.run_id).where(ranked.c.rank == 1)
        with self._read("reading the latest runs") as session:
            return {row.table_ref: _run_record(row) for row in session.execute(stmt).scalars()}


# ==============================================================================================================
# The store


class Ledger(_HealthSamples):
    """Store of plans, runs, per-partition outcomes and commit conflicts. Open with :meth:`Ledger.open`.

    A ``Ledger`` owns a SQLAlchemy engine (connection pool): close it (or use it as a context manager). It is
    safe to use from several threads; after ``os.fork`` open a new one in the child."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._write_engine = writing(engine)
        password = engine.url.password
        self._secrets: tuple[str, ...] = (str(password),) if password else ()
        self._redacted_url = redact_url(engine.url)

    # Lifecycle ----------------------------------------------------------------------------------------------
    @classmethod
    def open(cls, url: str | URL | None = None, *, upgrade: bool = True, timeout: float = DEFAULT_TIMEOUT_S) -> Ledger:
        """Connect to the ledger at ``url`` (else ``$ICECOMPACT_LEDGER_URL``, else ``<home>/ledger.db``).

        With ``upgrade`` (default) the schema is migrated to head first (concurrency-safe, no-op when already at
        head); without it, a schema that is not at head raises :class:`LedgerError`. ``timeout`` is the SQLite busy
        timeout and the PostgreSQL connect timeout, in seconds."""
        raw = resolve_url(url)
        try:
            parsed = make_url(raw)
        except Exception:  # noqa: BLE001 - ArgumentError, ValueError (their text may quote the URL: not chained)
            raise LedgerError(f"invalid ledger URL {redact_url(raw)}") from None
        try:
            engine = create_ledger_engine(parsed, timeout)
        except Exception as e:  # noqa: BLE001 - missing driver (NoSuchModuleError, ImportError), bad arguments
            raise LedgerError(f"cannot create ledger engine for {redact_url(parsed)}: {redact_text(str(e))}") from None
        ledger = cls(engine)
        try:
            ledger._ensure_schema(upgrade)
        except BaseException:
            engine.dispose()
            raise
        return ledger

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Ledger({self._redacted_url})"

    @property
    def url(self) -> str:
        """The database URL with the password redacted."""
        return self._redacted_url

    @property
    def engine(self) -> Engine:
        return self._engine

    # Schema -------------------------------------------------------------------------------------------------
    def schema_revision(self) -> str | None:
        """The Alembic revision of the database (``None`` for an empty database)."""
        heads = self._current_heads()
        return ",".join(sorted(heads)) if heads else None

    def upgrade(self, revision: str = "head") -> None:
        self._migrate("upgrade", revision)

    def downgrade(self, revision: str) -> None:
        """Downgrade the schema (``"base"`` drops every ledger table: all history is lost)."""
        self._migrate("downgrade", revision)

    def _current_heads(self) -> set[str]:
        from alembic.migration import MigrationContext

        with self._wrap("reading the schema revision"), self._engine.connect() as conn:
            return set(MigrationContext.configure(conn).get_current_heads())

    def _migrate(self, direction: str, revision: str) -> None:
        from alembic import command

        with self._wrap(f"schema {direction} to {revision}"), self._write_engine.begin() as conn:
            take_migration_lock(conn)
            cfg = alembic_config(connection=conn)
            if direction == "upgrade":
                command.upgrade(cfg, revision)
            else:
                command.downgrade(cfg, revision)

    def _ensure_schema(self, upgrade: bool) -> None:
        heads, known = _script_revisions()
        current = self._current_heads()
        if current == heads:
            return
        unknown = current - known
        if unknown:
            raise LedgerError(
                f"ledger {self._redacted_url} is at schema revision {', '.join(sorted(unknown))}, which this version "
                "of icecompact does not know (written by a newer version?)"
            )
        if not upgrade:
            raise LedgerError(
                f"ledger {self._redacted_url} is at schema revision {','.join(sorted(current)) or '<empty>'}, "
                f"expected {','.join(sorted(heads))}; open it with upgrade=True"
            )
        try:
            self._migrate("upgrade", "head")
        except LedgerError:
            # Another process may have won a race we could not serialise (e.g. a backend without a migration
            # lock): being at head is all we need.
            if self._current_heads() == heads:
                return
            raise

    # Error wrapping -----------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _wrap(self, action: str) -> Iterator[None]:
        from alembic.util import CommandError

        try:
            yield
        except LedgerError:
            raise
        except (sa_exc.SQLAlchemyError, CommandError) as e:
            error = LedgerError(f"ledger {action} failed ({self._redacted_url}): {redact_text(_describe(e), self._secrets)}")
            if _leaks(e, *self._secrets):
                raise error from None
            raise error from e

    @contextlib.contextmanager
    def _write(self, action: str) -> Iterator[Session]:
        with self._wrap(action), Session(self._write_engine, expire_on_commit=False) as session, session.begin():
            yield session

    @contextlib.contextmanager
    def _read(self, action: str) -> Iterator[Session]:
        with self._wrap(action), Session(self._engine) as session, session.begin():
            yield session

    def _clip(self, text: str | None) -> str | None:
        return _clip(text, self._secrets)

    # Writes ---------------------------------------------------------------------------------------------------
    def record_plan(self, plan: CompactionPlan, *, now: _dt.datetime | None = None) -> str:
        """Store ``plan`` (idempotent: recording the same plan again is a no-op). Returns its ``plan_id``.

        Raises :class:`LedgerError` if a *different* plan with the same id is already stored."""
        recorded_at = _utc(now, "now")
        with self._write("recording a plan") as session:
            self._record_plan(session, plan, recorded_at)
        return plan.plan_id

    def _record_plan(self, session: Session, plan: CompactionPlan, recorded_at: _dt.datetime) -> None:
        if not plan.plan_id:
            raise ValueError("the plan has no plan_id (use plan.with_content_id())")
        text = plan.to_json(indent=None)
        existing = session.get(PlanRow, plan.plan_id)
        if existing is not None:
            if existing.plan_json != text:
                raise LedgerError(f"a different plan with id {plan.plan_id!r} is already recorded")
            return
        created_at = plan.created_at
        if created_at.tzinfo is None:  # plans are external data: a naive creation time is taken as UTC
            created_at = created_at.replace(tzinfo=_dt.timezone.utc)
        values = dict(
            plan_id=plan.plan_id,
            table_ref=plan.table.dotted,
            catalog=plan.table.catalog,
            base_snapshot_id=plan.base_snapshot_id,
            base_sequence_number=plan.base_sequence_number,
            format_version=plan.format_version,
            mode=plan.mode.value,
            created_at=created_at,
            recorded_at=recorded_at,
            decision_count=len(plan.decisions),
            task_count=len(plan.tasks),
            estimated_cost_bytes=plan.estimated_cost_bytes,
            plan_json=text,
        )
        _insert_ignore(session, PlanRow, values, ("plan_id",))
        stored = session.execute(select(PlanRow.plan_json).where(PlanRow.plan_id == plan.plan_id)).scalar_one()
        if stored != text:  # lost a race against a different plan with the same id
            raise LedgerError(f"a different plan with id {plan.plan_id!r} is already recorded")

    def start_run(
        self,
        table_ref: str | None = None,
        catalog: str | None = None,
        *,
        plan: CompactionPlan | None = None,
        plan_id: str | None = None,
        trigger: RunTrigger | str = RunTrigger.CLI,
        mode: CompactionMode | str | None = None,
        dry_run: bool = False,
        status: RunStatus | str = RunStatus.RUNNING,
        airflow_dag_id: str | None = None,
        airflow_run_id: str | None = None,
        spark_application_id: str | None = None,
        run_id: str | None = None,
        now: _dt.datetime | None = None,
    ) -> str:
        """Create a run (status ``running`` or ``planned``) and return its ``run_id`` (a new UUID unless given).

        ``table_ref`` is ``namespace.table`` and ``catalog`` the catalog name. With ``plan``, the plan is recorded
        too (same transaction) and table, catalog, mode and plan id default to the plan's."""
        started_at = _utc(now, "now")
        start_status = _enum(RunStatus, status, "run status")
        if start_status.is_terminal:
            raise ValueError(f"a run starts as planned or running, not {start_status.value}")
        trigger_value = _enum(RunTrigger, trigger, "run trigger")
        if plan is not None:
            table_ref = table_ref or plan.table.dotted
            catalog = catalog or plan.table.catalog
            plan_id = plan_id or plan.plan_id
            mode = mode if mode is not None else plan.mode
            if (table_ref, catalog, plan_id) != (plan.table.dotted, plan.table.catalog, plan.plan_id):
                raise ValueError("table_ref / catalog / plan_id disagree with the plan")
        if not table_ref or not catalog:
            raise ValueError("start_run needs table_ref and catalog (or a plan)")
        mode_value = _enum(CompactionMode, mode if mode is not None else CompactionMode.AUTO, "compaction mode")
        new_id = run_id or str(uuid.uuid4())
        with self._write("starting a run") as session:
            if plan is not None:
                self._record_plan(session, plan, started_at)
            elif plan_id is not None and session.get(PlanRow, plan_id) is None:
                raise LedgerError(f"unknown plan {plan_id!r}: record_plan() it first")
            session.add(
                RunRow(
                    run_id=new_id,
                    plan_id=plan_id,
                    table_ref=table_ref,
                    catalog=catalog,
                    trigger=trigger_value.value,
                    mode=mode_value.value,
                    dry_run=bool(dry_run),
                    status=start_status.value,
                    started_at=started_at,
                    airflow_dag_id=airflow_dag_id,
                    airflow_run_id=airflow_run_id,
                    spark_application_id=spark_application_id,
                )
            )
        return new_id

    def update_run(
        self,
        run_id: str,
        *,
        status: RunStatus | str | None = None,
        plan_id: str | None = None,
        spark_application_id: str | None = None,
    ) -> RunRecord:
        """Change a live run: move ``planned`` -> ``running``, attach the plan or the Spark application id."""
        new_status = None if status is None else _enum(RunStatus, status, "run status")
        if new_status is not None and new_status.is_terminal:
            raise ValueError("use finish_run() / mark_needs_attention() for terminal statuses")
        with self._write("updating a run") as session:
            row = _get_run(session, run_id)
            if plan_id is not None:
                if session.get(PlanRow, plan_id) is None:
                    raise LedgerError(f"unknown plan {plan_id!r}: record_plan() it first")
                row.plan_id = plan_id
            if spark_application_id is not None:
                row.spark_application_id = spark_application_id
            if new_status is not None and row.status != RunStatus.NEEDS_ATTENTION.value:
                row.status = new_status.value
            session.flush()
            return _run_record(row)

    def record_partition_outcome(
        self, run_id: str, outcome: PartitionOutcome, *, now: _dt.datetime | None = None
    ) -> OutcomeRecord:
        """Insert or replace the outcome of ``outcome.partition_label`` in run ``run_id`` (one row per partition
        and run). Every field is replaced by the new value, except ``started_at`` which is kept when the new
        outcome has none (so ``pending`` -> ``committed`` updates keep the start time)."""
        recorded_at = _utc(now, "now")
        values: dict[str, Any] = {name: getattr(outcome, name) for name in _OUTCOME_FIELDS}
        values["kind"] = outcome.kind.value
        values["status"] = outcome.status.value
        values["partition_json"] = (
            None if outcome.partition is None else json.dumps(partition_key_to_dict(outcome.partition), ensure_ascii=False)
        )
        values["reason"] = self._clip(outcome.reason)
        values["error"] = self._clip(outcome.error)
        values["validation_result"] = self._clip(outcome.validation_result)
        values["recorded_at"] = recorded_at
        with self._write("recording a partition outcome") as session:
            run = _get_run(session, run_id)
            values.update(run_id=run_id, table_ref=run.table_ref, catalog=run.catalog)
            _upsert_outcome(session, values)
            row = session.execute(
                select(PartitionOutcomeRow).where(
                    PartitionOutcomeRow.run_id == run_id, PartitionOutcomeRow.partition_label == outcome.partition_label
                )
            ).scalar_one()
            if outcome.duration_ms is None:  # the start time may come from an earlier write of this outcome
                row.duration_ms = _duration_ms(row.started_at, row.finished_at)
                session.flush()
            return _outcome_record(row)

    def record_conflict(
        self,
        run_id: str,
        partition_label: str | None,
        attempt: int,
        error_class: str,
        message: str,
        *,
        now: _dt.datetime | None = None,
    ) -> ConflictRecord:
        """Record one commit conflict (``partition_label`` ``None`` = the whole job group's commit)."""
        occurred_at = _utc(now, "now")
        with self._write("recording a conflict") as session:
            _get_run(session, run_id)
            row = ConflictRow(
                run_id=run_id,
                partition_label=partition_label,
                attempt=int(attempt),
                error_class=error_class[:255],
                message=self._clip(message) or "",
                occurred_at=occurred_at,
            )
            session.add(row)
            session.flush()
            return _conflict_record(row)

    def finish_run(
        self,
        run_id: str,
        status: RunStatus | str,
        exit_code: int | None = None,
        error: str | None = None,
        *,
        now: _dt.datetime | None = None,
    ) -> RunRecord:
        """Close a run with a terminal status (succeeded, partial, failed, needs_attention).

        ``needs_attention`` is sticky: finishing a run that was marked for attention records the exit code and
        error but keeps the status, so no later success can hide it."""
        finished_at = _utc(now, "now")
        final = _enum(RunStatus, status, "run status")
        if not final.is_terminal:
            raise ValueError(f"finish_run needs a terminal status, not {final.value}")
        with self._write("finishing a run") as session:
            row = _get_run(session, run_id)
            if row.status != RunStatus.NEEDS_ATTENTION.value:
                row.status = final.value
            row.finished_at = finished_at
            row.exit_code = exit_code
            row.error = self._clip(error)
            session.flush()
            return _run_record(row)

    def mark_needs_attention(
        self, run_id: str, reason: str, *, partition_label: str | None = None, now: _dt.datetime | None = None
    ) -> RunRecord:
        """Flag a run (and optionally one of its partition outcomes) for a human. Reasons accumulate, one per
        line; the run's ``error`` and ``finished_at`` are left alone."""
        recorded_at = _utc(now, "now")
        text = self._clip(reason) or ""
        with self._write("marking a run for attention") as session:
            row = _get_run(session, run_id)
            row.status = RunStatus.NEEDS_ATTENTION.value
            row.attention_reason = text if not row.attention_reason else f"{row.attention_reason}\n{text}"
            if partition_label is not None:
                outcome = session.execute(
                    select(PartitionOutcomeRow).where(
                        PartitionOutcomeRow.run_id == run_id, PartitionOutcomeRow.partition_label == partition_label
                    )
                ).scalar_one_or_none()
                if outcome is None:
                    raise LedgerError(f"run {run_id} has no outcome for partition {partition_label!r}")
                outcome.status = OutcomeStatus.NEEDS_ATTENTION.value
                outcome.error = text if not outcome.error else f"{outcome.error}\n{text}"
                outcome.recorded_at = recorded_at
            session.flush()
            return _run_record(row)

    # Queries --------------------------------------------------------------------------------------------------
    def plan(self, plan_id: str) -> PlanRecord | None:
        with self._read("reading a plan") as session:
            row = session.get(PlanRow, plan_id)
            return None if row is None else _plan_record(row)

    def plans(self, table_ref: str | None = None, *, catalog: str | None = None, limit: int = 50) -> list[PlanRecord]:
        """Most recent plans first (by creation time)."""
        stmt = select(PlanRow)
        if table_ref is not None:
            stmt = stmt.where(PlanRow.table_ref == table_ref)
        if catalog is not None:
            stmt = stmt.where(PlanRow.catalog == catalog)
        stmt = stmt.order_by(PlanRow.created_at.desc(), PlanRow.plan_id.desc()).limit(_limit(limit))
        with self._read("listing plans") as session:
            return [_plan_record(r) for r in session.execute(stmt).scalars()]

    def runs(
        self,
        table_ref: str | None = None,
        *,
        catalog: str | None = None,
        status: RunStatus | str | None = None,
        limit: int = 50,
    ) -> list[RunRecord]:
        """Most recent runs first (by start time, then run id)."""
        stmt = select(RunRow)
        if table_ref is not None:
            stmt = stmt.where(RunRow.table_ref == table_ref)
        if catalog is not None:
            stmt = stmt.where(RunRow.catalog == catalog)
        if status is not None:
            stmt = stmt.where(RunRow.status == _enum(RunStatus, status, "run status").value)
        stmt = stmt.order_by(RunRow.started_at.desc(), RunRow.run_id.desc()).limit(_limit(limit))
        with self._read("listing runs") as session:
            return [_run_record(r) for r in session.execute(stmt).scalars()]

    def run(self, run_id: str) -> RunRecord | None:
        with self._read("reading a run") as session:
            row = session.get(RunRow, run_id)
            return None if row is None else _run_record(row)

    def outcomes(self, run_id: str) -> list[OutcomeRecord]:
        """The partition outcomes of a run, ordered by partition label."""
        stmt = (
            select(PartitionOutcomeRow)
            .where(PartitionOutcomeRow.run_id == run_id)
            .order_by(PartitionOutcomeRow.partition_label, PartitionOutcomeRow.id)
        )
        with self._read("reading partition outcomes") as session:
            return [_outcome_record(r) for r in session.execute(stmt).scalars()]

    def latest_outcomes(
        self, table_ref: str, *, catalog: str | None = None, include_dry_runs: bool = False
    ) -> list[OutcomeRecord]:
        """Per partition of the table, the outcome from the most recently started run that has one (ties: the
        later-inserted row). Dry runs are ignored unless ``include_dry_runs``. Ordered by catalog, label."""
        o, r = PartitionOutcomeRow, RunRow
        rank = (
            func.row_number()
            .over(partition_by=(o.catalog, o.partition_label), order_by=(r.started_at.desc(), o.id.desc()))
            .label("rank")
        )
        inner = select(o.id.label("id"), rank).join(r, r.run_id == o.run_id).where(o.table_ref == table_ref)
        if catalog is not None:
            inner = inner.where(o.catalog == catalog)
        if not include_dry_runs:
            inner = inner.where(r.dry_run.is_(False))
        ranked = inner.subquery()
        stmt = (
            select(o)
            .join(ranked, ranked.c.id == o.id)
            .where(ranked.c.rank == 1)
            .order_by(o.catalog, o.partition_label)
        )
        with self._read("reading latest partition outcomes") as session:
            return [_outcome_record(row) for row in session.execute(stmt).scalars()]

    def last_committed(self, table_ref: str, kind: str, *, catalog: str | None = None) -> dict[str, _dt.datetime]:
        """Per partition label, when its last committed outcome of ``kind`` (``minor``/``major``) was recorded, dry
        runs excluded: what ``compaction.minor.interval`` measures from."""
        o, r = PartitionOutcomeRow, RunRow
        stmt = (
            select(o.partition_label, func.max(o.recorded_at))
            .join(r, r.run_id == o.run_id)
            .where(o.table_ref == table_ref, o.kind == kind, o.status == OutcomeStatus.COMMITTED.value,
                   r.dry_run.is_(False))
            .group_by(o.partition_label)
        )
        if catalog is not None:
            stmt = stmt.where(o.catalog == catalog)
        with self._read("reading the last committed outcomes") as session:
            return {label: _utc(at) for label, at in session.execute(stmt).all() if at is not None}

    def conflicts(self, run_id: str) -> list[ConflictRecord]:
        """The conflicts of a run in the order they occurred."""
        stmt = select(ConflictRow).where(ConflictRow.run_id == run_id).order_by(ConflictRow.occurred_at, ConflictRow.id)
        with self._read("reading conflicts") as session:
            return [_conflict_record(r) for r in session.execute(stmt).scalars()]


# ==============================================================================================================
# Helpers


def _limit(limit: int) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit must be a positive integer, not {limit!r}")
    return limit


def _get_run(session: Session, run_id: str) -> RunRow:
    row = session.get(RunRow, run_id)
    if row is None:
        raise UnknownRunError(f"unknown run {run_id!r}")
    return row


def _describe(e: BaseException) -> str:
    """A short description: the DBAPI error (class and message) rather than SQLAlchemy's long rendering."""
    if isinstance(e, sa_exc.DBAPIError) and e.orig is not None:
        kind, orig = type(e).__name__, type(e.orig).__name__
        return f"{kind if kind == orig else f'{kind} ({orig})'}: {str(e.orig).strip()}"
    return f"{type(e).__name__}: {str(e).strip()}"


def _leaks(e: BaseException, *secrets: str) -> bool:
    """Whether chaining ``e`` would carry a secret (then we raise ``from None``)."""
    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if any(s and s in str(cur) for s in secrets) or redact_text(str(cur)) != str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _dialect_insert(session: Session) -> Any:
    name = session.get_bind().dialect.name
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert
    if name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        return sqlite_insert
    return None


def _insert_ignore(session: Session, model: type[Base], values: Mapping[str, Any], keys: tuple[str, ...]) -> None:
    insert = _dialect_insert(session)
    if insert is not None:
        session.execute(insert(model).values(**values).on_conflict_do_nothing(index_elements=list(keys)))
        return
    table = model.__table__
    exists = session.execute(select(*[table.c[k] for k in keys]).where(*[table.c[k] == values[k] for k in keys])).first()
    if exists is None:
        session.execute(sa_insert(model).values(**values))


def _upsert_outcome(session: Session, values: dict[str, Any]) -> None:
    """One row per (run_id, partition_label): atomic ON CONFLICT upsert on PostgreSQL/SQLite, else select+write."""
    table = PartitionOutcomeRow.__table__
    keys = ("run_id", "partition_label")
    insert = _dialect_insert(session)
    if insert is not None:
        stmt = insert(table).values(**values)
        updates: dict[str, Any] = {
            k: stmt.excluded[k] for k in values if k not in keys and k not in ("table_ref", "catalog", "started_at")
        }
        updates["started_at"] = func.coalesce(stmt.excluded.started_at, table.c.started_at)
        session.execute(stmt.on_conflict_do_update(index_elements=list(keys), set_=updates))
        return
    existing = session.execute(
        select(PartitionOutcomeRow)
        .where(*[getattr(PartitionOutcomeRow, k) == values[k] for k in keys])
        .with_for_update()
    ).scalar_one_or_none()
    if existing is None:
        session.add(PartitionOutcomeRow(**values))
    else:
        for k, v in values.items():
            if k == "started_at" and v is None:
                continue
            setattr(existing, k, v)
    session.flush()
