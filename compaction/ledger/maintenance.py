"""Maintenance: maintenance runs with their plan, what each action removed, and writers' leases.

* ``maintenance_runs``: one row per ``icecompact maintain`` (or DAG task): the plan JSON, status, times.
* ``maintenance_actions``: one row per executed (or refused) action of a run: files and bytes it removed, detail.
Writers' leases, which orphan removal also respects, are in compaction/ledger/writers.py.
"""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from dataclasses import dataclass, fields
from typing import Any

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text, select
from sqlalchemy.orm import Mapped, mapped_column

from compaction.ledger.base import LedgerMixin
from compaction.ledger.errors import LedgerError
from compaction.ledger.records import RunStatus, _jsonable, _limit, _utc
from compaction.ledger.schema import Base, PartitionOutcomeRow, PlanRow, RunRow, UTCDateTime


class MaintenanceRunRow(Base):
    __tablename__ = "maintenance_runs"
    __table_args__ = (Index("ix_maintenance_runs_catalog_table_ref_started_at", "catalog", "table_ref", "started_at"),)

    run_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    plan_id: Mapped[str] = mapped_column(String(128))
    catalog: Mapped[str] = mapped_column(String(255))
    table_ref: Mapped[str] = mapped_column(String(1024))
    dry_run: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    finished_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    error: Mapped[str | None] = mapped_column(Text)
    plan_json: Mapped[str] = mapped_column(Text)


class MaintenanceActionRow(Base):
    __tablename__ = "maintenance_actions"
    __table_args__ = (Index("ix_maintenance_actions_run_id", "run_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(String(36), ForeignKey("maintenance_runs.run_id", ondelete="CASCADE"))
    action: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    files_removed: Mapped[int] = mapped_column(BigInteger)
    bytes_removed: Mapped[int | None] = mapped_column(BigInteger)
    duration_ms: Mapped[int | None] = mapped_column(BigInteger)
    detail_json: Mapped[str | None] = mapped_column(Text)
    recorded_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())


@dataclass(frozen=True)
class MaintenanceActionRecord:
    run_id: str
    action: str
    status: str
    reason: str | None
    files_removed: int
    bytes_removed: int | None
    duration_ms: int | None
    detail: dict[str, Any]
    recorded_at: _dt.datetime

    def to_dict(self) -> dict[str, object]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True)
class MaintenanceRunRecord:
    run_id: str
    plan_id: str
    catalog: str
    table_ref: str
    dry_run: bool
    status: str
    started_at: _dt.datetime
    finished_at: _dt.datetime | None
    error: str | None
    plan_json: str

    def to_dict(self) -> dict[str, object]:
        out = {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name != "plan_json"}
        out["plan"] = json.loads(self.plan_json)
        return out


@dataclass(frozen=True)
class InFlightRun:
    """A compaction run in state planned/running, with every snapshot id it named (plan base, per-partition
    base and commit snapshots): what the maintenance planner must not expire."""

    run_id: str
    started_at: _dt.datetime
    snapshot_ids: tuple[int, ...]


def _run_rec(row: MaintenanceRunRow) -> MaintenanceRunRecord:
    return MaintenanceRunRecord(row.run_id, row.plan_id, row.catalog, row.table_ref, bool(row.dry_run), row.status,
                                row.started_at, row.finished_at, row.error, row.plan_json)


def _action_rec(row: MaintenanceActionRow) -> MaintenanceActionRecord:
    return MaintenanceActionRecord(row.run_id, row.action, row.status, row.reason, int(row.files_removed),
                                   None if row.bytes_removed is None else int(row.bytes_removed), row.duration_ms,
                                   json.loads(row.detail_json) if row.detail_json else {}, row.recorded_at)


class _Maintenance(LedgerMixin):
    """The maintenance methods of :class:`Ledger`."""

    def start_maintenance(self, table_ref: str, catalog: str, plan_id: str, plan_json: str, *, dry_run: bool = False,
                          now: _dt.datetime | None = None) -> str:
        run_id = str(uuid.uuid4())
        with self._write("starting a maintenance run") as session:
            session.add(MaintenanceRunRow(run_id=run_id, plan_id=plan_id, catalog=catalog, table_ref=table_ref,
                                          dry_run=dry_run, status="running", started_at=_utc(now, "now"),
                                          plan_json=plan_json))
        return run_id

    def record_maintenance_action(self, run_id: str, action: str, status: str, *, reason: str | None = None,
                                  files_removed: int = 0, bytes_removed: int | None = None,
                                  duration_ms: int | None = None, detail: dict[str, Any] | None = None,
                                  now: _dt.datetime | None = None) -> MaintenanceActionRecord:
        with self._write("recording a maintenance action") as session:
            if session.get(MaintenanceRunRow, run_id) is None:
                raise LedgerError(f"unknown maintenance run {run_id!r}")
            row = MaintenanceActionRow(run_id=run_id, action=action[:32], status=status[:32],
                                       reason=self._clip(reason), files_removed=int(files_removed),
                                       bytes_removed=bytes_removed, duration_ms=duration_ms,
                                       detail_json=self._clip(json.dumps(detail or {}, default=str)),
                                       recorded_at=_utc(now, "now"))
            session.add(row)
            session.flush()
            return _action_rec(row)

    def finish_maintenance(self, run_id: str, status: str, *, error: str | None = None,
                           now: _dt.datetime | None = None) -> MaintenanceRunRecord:
        with self._write("finishing a maintenance run") as session:
            row = session.get(MaintenanceRunRow, run_id)
            if row is None:
                raise LedgerError(f"unknown maintenance run {run_id!r}")
            row.status, row.finished_at, row.error = status[:32], _utc(now, "now"), self._clip(error)
            session.flush()
            return _run_rec(row)

    def maintenance_runs(self, table_ref: str | None = None, *, catalog: str | None = None,
                         limit: int = 50) -> list[MaintenanceRunRecord]:
        m = MaintenanceRunRow
        stmt = select(m)
        if table_ref is not None:
            stmt = stmt.where(m.table_ref == table_ref)
        if catalog is not None:
            stmt = stmt.where(m.catalog == catalog)
        stmt = stmt.order_by(m.started_at.desc(), m.run_id.desc()).limit(_limit(limit))
        with self._read("listing maintenance runs") as session:
            return [_run_rec(r) for r in session.execute(stmt).scalars()]

    def maintenance_actions(self, run_id: str) -> list[MaintenanceActionRecord]:
        a = MaintenanceActionRow
        with self._read("reading maintenance actions") as session:
            return [_action_rec(r) for r in session.execute(select(a).where(a.run_id == run_id).order_by(a.id)).scalars()]

    # In flight ------------------------------------------------------------------------------------------------
    def in_flight_runs(self, table_ref: str, *, catalog: str) -> list[InFlightRun]:
        """Compaction runs of the table in state planned/running (dry runs excluded), with their snapshot ids."""
        r, p, o = RunRow, PlanRow, PartitionOutcomeRow
        live = (RunStatus.PLANNED.value, RunStatus.RUNNING.value)
        stmt = (select(r.run_id, r.started_at, p.base_snapshot_id).outerjoin(p, p.plan_id == r.plan_id)
                .where(r.table_ref == table_ref, r.catalog == catalog, r.status.in_(live), r.dry_run.is_(False)))
        with self._read("reading in-flight runs") as session:
            runs = session.execute(stmt).all()
            out = []
            for run_id, started_at, base in runs:
                ids = {int(base)} if base is not None else set()
                for b, c in session.execute(select(o.base_snapshot_id, o.commit_snapshot_id).where(o.run_id == run_id)):
                    ids |= {int(x) for x in (b, c) if x is not None}
                out.append(InFlightRun(run_id, _utc(started_at), tuple(sorted(ids))))
            return out
