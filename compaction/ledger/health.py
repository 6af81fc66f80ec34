"""Health samples: one row per inspection of a table, kept for a bounded time."""

from __future__ import annotations

import datetime as _dt
import json
import os
from dataclasses import dataclass
from typing import Mapping

from sqlalchemy import BigInteger, Boolean, Float, Index, Integer, String, Text, func, select
from sqlalchemy import delete as sa_delete
from sqlalchemy.orm import Mapped, defer, mapped_column

from compaction.core.health import HealthSample, PartitionHealth
from compaction.ledger.base import LedgerMixin
from compaction.ledger.errors import LedgerError
from compaction.ledger.records import RunRecord, _limit, _utc
from compaction.ledger.schema import Base, RunRow, UTCDateTime, _run_record

# ==============================================================================================================
# Health samples: one row per inspection of a table, kept for a bounded time. Everything about them -
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
    # Metadata size (migration 0004): NULL in samples recorded before it, or where it could not be read.
    snapshots: Mapped[int | None] = mapped_column(BigInteger)
    metadata_file_bytes: Mapped[int | None] = mapped_column(BigInteger)
    manifests: Mapped[int | None] = mapped_column(BigInteger)
    manifest_bytes: Mapped[int | None] = mapped_column(BigInteger)


_SAMPLE_METADATA = ("snapshots", "metadata_file_bytes", "manifests", "manifest_bytes")
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
        **{name: None if getattr(row, name) is None else int(getattr(row, name)) for name in _SAMPLE_METADATA},
    )


class _HealthSamples(LedgerMixin):
    """The health-sample methods of :class:`Ledger` (kept together here; Ledger provides the sessions)."""

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
                **{name: getattr(sample, name) for name in _SAMPLE_METADATA},
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
