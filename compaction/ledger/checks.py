"""Checks of our own snapshots: what validated each commit a compaction made, so that a commit whose
check never ran (its job was killed between the commit and the check) can be found and checked at the next plan.

* ``snapshot_checks``: one row per check of one snapshot: by its job (``source`` ``job``: recorded with the job's
  result) or by the post-hoc check of a later plan (``post-hoc``), with the level, the result (``passed``,
  ``skipped`` at level none, ``failed``, ``rolled_back``, ``needs_attention``) and a detail text.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, fields
from typing import Iterable, Sequence

from sqlalchemy import BigInteger, Index, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from compaction.core.posthoc import PlanRun
from compaction.ledger.base import LedgerMixin
from compaction.ledger.records import _jsonable, _utc
from compaction.ledger.schema import Base, PartitionOutcomeRow, RunRow, UTCDateTime

SOURCES = ("job", "post-hoc")
RESULTS = ("passed", "skipped", "failed", "rolled_back", "needs_attention")


class SnapshotCheckRow(Base):
    __tablename__ = "snapshot_checks"
    __table_args__ = (Index("ix_snapshot_checks_catalog_table_ref_snapshot_id", "catalog", "table_ref", "snapshot_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    catalog: Mapped[str] = mapped_column(String(255))
    table_ref: Mapped[str] = mapped_column(String(1024))
    snapshot_id: Mapped[int] = mapped_column(BigInteger)
    plan_id: Mapped[str | None] = mapped_column(String(128))
    run_id: Mapped[str | None] = mapped_column(String(36))
    source: Mapped[str] = mapped_column(String(16))
    level: Mapped[str] = mapped_column(String(32))
    result: Mapped[str] = mapped_column(String(32))
    detail: Mapped[str | None] = mapped_column(Text)
    checked_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())


@dataclass(frozen=True)
class SnapshotCheck:
    """One check of one snapshot (input of :meth:`record_snapshot_checks`)."""

    snapshot_id: int
    source: str
    level: str
    result: str
    plan_id: str | None = None
    run_id: str | None = None
    detail: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"source must be one of {SOURCES}, not {self.source!r}")
        if self.result not in RESULTS:
            raise ValueError(f"result must be one of {RESULTS}, not {self.result!r}")


@dataclass(frozen=True)
class SnapshotCheckRecord(SnapshotCheck):
    id: int = 0
    catalog: str = ""
    table_ref: str = ""
    checked_at: _dt.datetime | None = None

    def to_dict(self) -> dict[str, object]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


def _rec(row: SnapshotCheckRow) -> SnapshotCheckRecord:
    return SnapshotCheckRecord(snapshot_id=int(row.snapshot_id), source=row.source, level=row.level,
                               result=row.result, plan_id=row.plan_id, run_id=row.run_id, detail=row.detail,
                               id=row.id, catalog=row.catalog, table_ref=row.table_ref,
                               checked_at=_utc(row.checked_at))


class _SnapshotChecks(LedgerMixin):
    """The snapshot-check methods of :class:`Ledger`."""

    def record_snapshot_checks(self, table_ref: str, catalog: str, checks: Iterable[SnapshotCheck], *,
                               now: _dt.datetime | None = None) -> int:
        at = _utc(now, "now")
        rows = [SnapshotCheckRow(catalog=catalog, table_ref=table_ref, snapshot_id=int(c.snapshot_id),
                                 plan_id=c.plan_id, run_id=c.run_id, source=c.source, level=c.level[:32],
                                 result=c.result, detail=self._clip(c.detail), checked_at=at) for c in checks]
        if not rows:
            return 0
        with self._write("recording snapshot checks") as session:
            session.add_all(rows)
        return len(rows)

    def snapshot_checks(self, table_ref: str, catalog: str,
                        snapshot_ids: Sequence[int] | None = None) -> list[SnapshotCheckRecord]:
        """The checks of the table's snapshots (of ``snapshot_ids`` only, when given), oldest first."""
        s = SnapshotCheckRow
        stmt = select(s).where(s.catalog == catalog, s.table_ref == table_ref)
        ids = None if snapshot_ids is None else sorted({int(i) for i in snapshot_ids})
        out: list[SnapshotCheckRecord] = []
        with self._read("reading snapshot checks") as session:
            # Chunks keep the IN list well below every backend's parameter limit.
            for chunk in ([None] if ids is None else [ids[i:i + 500] for i in range(0, len(ids), 500)]):
                query = stmt if chunk is None else stmt.where(s.snapshot_id.in_(chunk))
                out.extend(_rec(r) for r in session.execute(query.order_by(s.id)).scalars())
        return sorted(out, key=lambda r: r.id)

    def plan_runs(self, plan_ids: Iterable[str]) -> dict[str, list[PlanRun]]:
        """Plan id -> its runs (status, start, the validation level its outcomes were recorded at), dry runs
        excluded."""
        wanted = sorted(set(plan_ids))
        r, o = RunRow, PartitionOutcomeRow
        out: dict[str, list[PlanRun]] = {}
        if not wanted:
            return out
        with self._read("reading the runs of plans") as session:
            for i in range(0, len(wanted), 500):
                stmt = (select(r.run_id, r.plan_id, r.status, r.started_at)
                        .where(r.plan_id.in_(wanted[i:i + 500]), r.dry_run.is_(False)))
                for run_id, plan_id, status, started_at in session.execute(stmt).all():
                    level = session.execute(select(o.validation_level).where(
                        o.run_id == run_id, o.validation_level.is_not(None)).limit(1)).scalar()
                    out.setdefault(str(plan_id), []).append(
                        PlanRun(str(run_id), str(status), _utc(started_at), level))
        return out
