"""The work queue of resident executors: job groups waiting for a long-running Spark application.

* ``work_items``: one row per unit of work: one or more job groups of one plan (the plan JSON travels in the row, so
  an executor on another host needs no shared file system). ``queued`` -> ``running`` (claimed by one executor,
  under a lease it renews by heartbeat) -> ``done`` (the groups' results, as the spark-submit job writes them) or
  ``failed`` (with what the executor checkpointed) or ``cancelled`` (never claimed). A lease that runs out is taken
  back by whoever looks next (an executor before claiming, a waiter while waiting): re-queued or failed by
  :func:`compaction.core.queue.on_expired_lease`. No item stays ``running`` without a live executor.
* ``executors``: one row per resident executor (its supervisor): catalog, host, pid, status, heartbeat, groups run,
  heap. :meth:`claim_executor_start` lets exactly one caller start an executor for a catalog that has none alive.

Claims are serialised: PostgreSQL takes a transaction-level advisory lock (claims are a few milliseconds; serialising
them makes the single-writer rule below exact without relying on row locks of rows not yet chosen), SQLite's write
transactions are serial already (``BEGIN IMMEDIATE``). An item marked ``exclusive`` (its catalog takes one commit at
a time, e.g. SQLite) is not claimed while another item of its catalog runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from dataclasses import dataclass, fields
from typing import Any, Iterable, Mapping, Sequence

from sqlalchemy import Boolean, Index, Integer, String, Text, and_, func, or_, select, update
from sqlalchemy.orm import Mapped, Session, mapped_column

from compaction.core.queue import (
    EXECUTOR_STALE_SECONDS_DEFAULT,
    LEASE_SECONDS_DEFAULT,
    MAX_ATTEMPTS_DEFAULT,
    ExpiredLease,
    WorkStatus,
    executor_alive,
    on_expired_lease,
)
from compaction.core.run_options import MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT
from compaction.ledger.base import LedgerMixin
from compaction.ledger.errors import LedgerError
from compaction.ledger.records import _jsonable, _utc
from compaction.ledger.schema import Base, UTCDateTime

#: Key of the PostgreSQL advisory lock that serialises claims ("icecompact queue").
PG_QUEUE_LOCK_KEY = 0x1CEC_0DA1_0E0E
EXECUTOR_STATUSES = ("starting", "idle", "busy", "stopped")


class WorkItemRow(Base):
    __tablename__ = "work_items"
    __table_args__ = (
        Index("ix_work_items_status_catalog_enqueued_at", "status", "catalog", "enqueued_at"),
        Index("ix_work_items_run_id", "run_id"),
    )

    item_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(36))
    plan_id: Mapped[str] = mapped_column(String(128))
    catalog: Mapped[str] = mapped_column(String(255))
    table_ref: Mapped[str] = mapped_column(String(1024))
    group_ids: Mapped[str] = mapped_column(Text)
    plan_json: Mapped[str] = mapped_column(Text)
    validation: Mapped[str] = mapped_column(String(16))
    max_retries: Mapped[int] = mapped_column(Integer)
    exclusive: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    max_attempts: Mapped[int] = mapped_column(Integer)
    executor_id: Mapped[str | None] = mapped_column(String(64))
    lease_expires_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    enqueued_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    claimed_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    results_json: Mapped[str | None] = mapped_column(Text)
    progress_json: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)


class ExecutorRow(Base):
    __tablename__ = "executors"
    __table_args__ = (Index("ix_executors_catalog_heartbeat_at", "catalog", "heartbeat_at"),)

    executor_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    catalog: Mapped[str] = mapped_column(String(255))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int | None] = mapped_column(Integer)
    master: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(16))
    generation: Mapped[int] = mapped_column(Integer)
    groups_run: Mapped[int] = mapped_column(Integer)
    heap_used_mb: Mapped[int | None] = mapped_column(Integer)
    current_item: Mapped[str | None] = mapped_column(String(36))
    started_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[_dt.datetime] = mapped_column(UTCDateTime())
    stopped_at: Mapped[_dt.datetime | None] = mapped_column(UTCDateTime())
    stop_reason: Mapped[str | None] = mapped_column(Text)


@dataclass(frozen=True)
class WorkItem:
    item_id: str
    run_id: str | None
    plan_id: str
    catalog: str
    table_ref: str
    group_ids: tuple[int, ...]
    plan_json: str
    validation: str
    max_retries: int
    exclusive: bool
    status: WorkStatus
    attempts: int
    max_attempts: int
    executor_id: str | None
    lease_expires_at: _dt.datetime | None
    enqueued_at: _dt.datetime
    claimed_at: _dt.datetime | None
    finished_at: _dt.datetime | None
    #: group id -> the group's result (the JSON a spark-submit job writes); absent for a group never finished.
    results: Mapping[int, Mapping[str, Any]]
    #: group id -> its last checkpoint (an ``incomplete`` result: what is committed and validated so far).
    progress: Mapping[int, Mapping[str, Any]]
    error: str | None

    def result_of(self, group_id: int) -> Mapping[str, Any] | None:
        """The group's result, else its checkpoint (a killed executor's progress), else None."""
        return self.results.get(group_id) or self.progress.get(group_id)

    def to_dict(self) -> dict[str, object]:
        out = {f.name: _jsonable(getattr(self, f.name)) for f in fields(self) if f.name != "plan_json"}
        out["group_ids"] = list(self.group_ids)
        out["results"] = {str(k): v for k, v in self.results.items()}
        out["progress"] = {str(k): v for k, v in self.progress.items()}
        return out


@dataclass(frozen=True)
class ExecutorRecord:
    executor_id: str
    catalog: str
    host: str
    pid: int | None
    master: str
    status: str
    generation: int
    groups_run: int
    heap_used_mb: int | None
    current_item: str | None
    started_at: _dt.datetime
    heartbeat_at: _dt.datetime
    stopped_at: _dt.datetime | None
    stop_reason: str | None

    def alive(self, now: _dt.datetime, stale_after_s: float = EXECUTOR_STALE_SECONDS_DEFAULT) -> bool:
        return self.status != "stopped" and executor_alive(self.heartbeat_at, now, stale_after_s)

    def to_dict(self) -> dict[str, object]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)}


def _by_group(text: str | None) -> dict[int, Mapping[str, Any]]:
    return {int(k): v for k, v in json.loads(text).items()} if text else {}


def _item(row: WorkItemRow) -> WorkItem:
    return WorkItem(
        item_id=row.item_id, run_id=row.run_id, plan_id=row.plan_id, catalog=row.catalog, table_ref=row.table_ref,
        group_ids=tuple(int(g) for g in json.loads(row.group_ids)), plan_json=row.plan_json,
        validation=row.validation, max_retries=int(row.max_retries), exclusive=bool(row.exclusive),
        status=WorkStatus(row.status), attempts=int(row.attempts), max_attempts=int(row.max_attempts),
        executor_id=row.executor_id, lease_expires_at=row.lease_expires_at, enqueued_at=_utc(row.enqueued_at),
        claimed_at=row.claimed_at, finished_at=row.finished_at, results=_by_group(row.results_json),
        progress=_by_group(row.progress_json), error=row.error,
    )


def _executor(row: ExecutorRow) -> ExecutorRecord:
    return ExecutorRecord(row.executor_id, row.catalog, row.host, row.pid, row.master, row.status,
                          int(row.generation), int(row.groups_run), row.heap_used_mb, row.current_item,
                          _utc(row.started_at), _utc(row.heartbeat_at), row.stopped_at, row.stop_reason)


def _serialise(session: Session) -> None:
    if session.get_bind().dialect.name == "postgresql":
        session.execute(select(func.pg_advisory_xact_lock(PG_QUEUE_LOCK_KEY)))


def _results_json(results: Mapping[int, Mapping[str, Any]]) -> str:
    return json.dumps({str(k): v for k, v in results.items()}, default=str)


class _Queue(LedgerMixin):
    """The work-queue and executor methods of :class:`Ledger`."""

    # Work items -------------------------------------------------------------------------------------------------
    def enqueue_work(self, plan_json: str, *, plan_id: str, table_ref: str, catalog: str, group_ids: Sequence[int],
                     run_id: str | None = None, validation: str = VALIDATION_DEFAULT, max_retries: int = MAX_RETRIES_DEFAULT,
                     exclusive: bool = False, max_attempts: int = MAX_ATTEMPTS_DEFAULT,
                     now: _dt.datetime | None = None) -> WorkItem:
        if not group_ids:
            raise LedgerError("a work item needs at least one job group")
        if max_attempts < 1:
            raise LedgerError(f"max_attempts must be >= 1, not {max_attempts}")
        row = WorkItemRow(item_id=str(uuid.uuid4()), run_id=run_id, plan_id=plan_id, catalog=catalog,
                          table_ref=table_ref, group_ids=json.dumps([int(g) for g in group_ids]), plan_json=plan_json,
                          validation=validation, max_retries=int(max_retries), exclusive=bool(exclusive),
                          status=WorkStatus.QUEUED.value, attempts=0, max_attempts=int(max_attempts),
                          enqueued_at=_utc(now, "now"))
        with self._write("queueing work") as session:
            session.add(row)
            session.flush()
            return _item(row)

    def claim_work(self, executor_id: str, *, catalogs: Iterable[str], lease_s: float = LEASE_SECONDS_DEFAULT,
                   now: _dt.datetime | None = None) -> WorkItem | None:
        """Take the oldest queued item of ``catalogs`` (expired leases are taken back first), or None. An item of a
        table another item of which is running waits for it: two compactions of one table at once would only fail
        each other's commits (the queued one was planned before the running one commits, and is re-evaluated when
        it starts)."""
        at = _utc(now, "now")
        wanted = sorted(set(catalogs))
        w = WorkItemRow
        with self._write("claiming work") as session:
            _serialise(session)
            self._take_back_expired(session, at)
            running = session.execute(select(w.catalog, w.table_ref).where(
                w.status == WorkStatus.RUNNING.value, w.catalog.in_(wanted)).distinct()).all()
            busy = {catalog for catalog, _ in running}
            busy_tables = {(catalog, table_ref) for catalog, table_ref in running}
            candidates = session.execute(select(w).where(w.status == WorkStatus.QUEUED.value, w.catalog.in_(wanted))
                                         .order_by(w.enqueued_at, w.item_id).limit(50)).scalars()
            for row in candidates:
                if (row.exclusive and row.catalog in busy) or (row.catalog, row.table_ref) in busy_tables:
                    continue
                row.status, row.executor_id = WorkStatus.RUNNING.value, executor_id[:64]
                row.attempts = int(row.attempts) + 1
                row.claimed_at, row.lease_expires_at = at, at + _dt.timedelta(seconds=lease_s)
                session.flush()
                return _item(row)
        return None

    def renew_lease(self, item_id: str, executor_id: str, *, lease_s: float = LEASE_SECONDS_DEFAULT,
                    now: _dt.datetime | None = None) -> bool:
        """Extend the lease of an item the executor still holds; False when it no longer does (taken back)."""
        at = _utc(now, "now")
        w = WorkItemRow
        with self._write("renewing a work lease") as session:
            done = session.execute(update(w).where(w.item_id == item_id, w.executor_id == executor_id,
                                                   w.status == WorkStatus.RUNNING.value)
                                   .values(lease_expires_at=at + _dt.timedelta(seconds=lease_s)))
            return bool(done.rowcount)

    def checkpoint_work(self, item_id: str, executor_id: str, group_id: int, incomplete: Mapping[str, Any]) -> bool:
        """Store a group's progress (an ``incomplete`` result) on an item the executor holds."""
        with self._write("checkpointing work") as session:
            row = session.get(WorkItemRow, item_id)
            if row is None or row.executor_id != executor_id or row.status != WorkStatus.RUNNING.value:
                return False
            progress = _by_group(row.progress_json)
            progress[int(group_id)] = dict(incomplete)
            row.progress_json = _results_json(progress)
            return True

    def complete_work(self, item_id: str, executor_id: str, results: Mapping[int, Mapping[str, Any]], *,
                      error: str | None = None, now: _dt.datetime | None = None) -> bool:
        """Finish an item the executor holds: ``done`` with every group's result, or ``failed`` with ``error``
        when some group has none. False (nothing written) when the item was taken back meanwhile."""
        with self._write("completing work") as session:
            row = session.get(WorkItemRow, item_id)
            if row is None or row.executor_id != executor_id or row.status != WorkStatus.RUNNING.value:
                return False
            missing = [g for g in json.loads(row.group_ids) if int(g) not in results]
            row.results_json = _results_json(results)
            row.status = (WorkStatus.FAILED if missing or error else WorkStatus.DONE).value
            # A done item keeps the note of an earlier attempt taken back (its history), a failed one says why.
            row.error = self._clip(error or (f"no result for group(s) {missing}" if missing else None)) or row.error
            row.finished_at, row.lease_expires_at = _utc(now, "now"), None
            return True

    def has_pending_work(self, catalogs: Iterable[str], *, now: _dt.datetime | None = None) -> bool:
        """Whether a claim could find something (a queued item, or a running one whose lease ran out): a read, so
        that an idle executor polls without taking a write lock."""
        at = _utc(now, "now")
        w = WorkItemRow
        wanted = sorted(set(catalogs))
        stmt = select(w.item_id).where(w.catalog.in_(wanted), or_(
            w.status == WorkStatus.QUEUED.value,
            and_(w.status == WorkStatus.RUNNING.value, w.lease_expires_at <= at))).limit(1)
        with self._read("polling the work queue") as session:
            return session.execute(stmt).first() is not None

    def take_back_expired_work(self, *, now: _dt.datetime | None = None,
                               dead_executor: str | None = None) -> list[WorkItem]:
        """Re-queue or fail every running item whose lease ran out (see the module doc), and, with
        ``dead_executor``, every running item of that executor whatever its lease (a restarted executor knows its
        previous generation is gone). Returns them."""
        with self._write("taking back expired work") as session:
            _serialise(session)
            return self._take_back_expired(session, _utc(now, "now"), dead_executor)

    def _take_back_expired(self, session: Session, at: _dt.datetime,
                           dead_executor: str | None = None) -> list[WorkItem]:
        w = WorkItemRow
        out = []
        gone = w.lease_expires_at <= at if dead_executor is None else or_(w.lease_expires_at <= at,
                                                                          w.executor_id == dead_executor)
        for row in session.execute(select(w).where(w.status == WorkStatus.RUNNING.value, gone)).scalars():
            if row.executor_id == dead_executor:
                note = (f"executor {row.executor_id} restarted (attempt {row.attempts} of {row.max_attempts})")
            else:
                note = (f"the lease of executor {row.executor_id} ran out at "
                        f"{_utc(row.lease_expires_at).isoformat()} (attempt {row.attempts} of {row.max_attempts})")
            if on_expired_lease(int(row.attempts), int(row.max_attempts), bool(row.progress_json)) is ExpiredLease.REQUEUE:
                row.status, row.executor_id, row.lease_expires_at = WorkStatus.QUEUED.value, None, None
                row.error = self._clip(note + "; queued again")
            else:
                row.status, row.finished_at, row.lease_expires_at = WorkStatus.FAILED.value, at, None
                row.error = self._clip(note + ("; what it checkpointed is kept" if row.progress_json else ""))
            session.flush()
            out.append(_item(row))
        return out

    def cancel_queued_work(self, item_ids: Iterable[str], reason: str, *, now: _dt.datetime | None = None) -> int:
        """Cancel items still queued (never claimed); running ones are left to finish. Returns how many."""
        ids = sorted(set(item_ids))
        w = WorkItemRow
        if not ids:
            return 0
        with self._write("cancelling queued work") as session:
            _serialise(session)
            done = session.execute(update(w).where(w.item_id.in_(ids), w.status == WorkStatus.QUEUED.value)
                                   .values(status=WorkStatus.CANCELLED.value, finished_at=_utc(now, "now"),
                                           error=self._clip(reason)))
            return int(done.rowcount or 0)

    def work_items(self, item_ids: Iterable[str] | None = None, *, run_id: str | None = None,
                   status: WorkStatus | None = None, limit: int = 500) -> list[WorkItem]:
        w = WorkItemRow
        stmt = select(w)
        if item_ids is not None:
            stmt = stmt.where(w.item_id.in_(sorted(set(item_ids))))
        if run_id is not None:
            stmt = stmt.where(w.run_id == run_id)
        if status is not None:
            stmt = stmt.where(w.status == status.value)
        with self._read("reading work items") as session:
            return [_item(r) for r in session.execute(stmt.order_by(w.enqueued_at, w.item_id).limit(limit)).scalars()]

    # Executors --------------------------------------------------------------------------------------------------
    def claim_executor_start(self, executor_id: str, *, catalog: str, host: str, master: str,
                             stale_after_s: float = EXECUTOR_STALE_SECONDS_DEFAULT, another: bool = False,
                             now: _dt.datetime | None = None) -> bool:
        """Register ``executor_id`` as ``starting`` for ``catalog`` unless a live executor serves it already
        (``another``: register it anyway, one more executor for the catalog). True: the caller starts it (exactly
        one of concurrent callers gets True)."""
        at = _utc(now, "now")
        e = ExecutorRow
        with self._write("registering an executor") as session:
            _serialise(session)
            rows = session.execute(select(e).where(e.catalog == catalog, e.status != "stopped")).scalars()
            if not another and any(_executor(r).alive(at, stale_after_s) for r in rows):
                return False
            session.add(ExecutorRow(executor_id=executor_id[:64], catalog=catalog, host=host[:255], pid=None,
                                    master=master[:255], status="starting", generation=0, groups_run=0,
                                    started_at=at, heartbeat_at=at))
            return True

    def executor_heartbeat(self, executor_id: str, *, status: str, pid: int | None = None,
                           generation: int | None = None, groups_run: int | None = None,
                           heap_used_mb: int | None = None, current_item: str | None = None,
                           now: _dt.datetime | None = None) -> ExecutorRecord:
        if status not in EXECUTOR_STATUSES:
            raise LedgerError(f"executor status must be one of {EXECUTOR_STATUSES}, not {status!r}")
        with self._write("recording an executor heartbeat") as session:
            row = session.get(ExecutorRow, executor_id)
            if row is None:
                raise LedgerError(f"unknown executor {executor_id!r}")
            row.status, row.heartbeat_at, row.current_item = status, _utc(now, "now"), current_item
            for name, value in (("pid", pid), ("generation", generation), ("groups_run", groups_run),
                                ("heap_used_mb", heap_used_mb)):
                if value is not None:
                    setattr(row, name, int(value))
            session.flush()
            return _executor(row)

    def stop_executor(self, executor_id: str, reason: str, *, now: _dt.datetime | None = None) -> None:
        with self._write("stopping an executor") as session:
            row = session.get(ExecutorRow, executor_id)
            if row is None:
                raise LedgerError(f"unknown executor {executor_id!r}")
            row.status, row.stopped_at, row.stop_reason = "stopped", _utc(now, "now"), self._clip(reason)
            row.current_item = None

    def executors(self, *, catalog: str | None = None, include_stopped: bool = False,
                  limit: int = 100) -> list[ExecutorRecord]:
        e = ExecutorRow
        stmt = select(e)
        if catalog is not None:
            stmt = stmt.where(e.catalog == catalog)
        if not include_stopped:
            stmt = stmt.where(e.status != "stopped")
        with self._read("reading executors") as session:
            return [_executor(r) for r in session.execute(stmt.order_by(e.started_at.desc()).limit(limit)).scalars()]
