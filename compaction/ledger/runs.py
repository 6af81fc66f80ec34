"""Plans, runs, per-partition outcomes and commit conflicts: the write and query methods of the ledger."""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from typing import Any, Mapping

from sqlalchemy import func, select
from sqlalchemy import insert as sa_insert
from sqlalchemy.orm import Session

from compaction.core.plan import CompactionMode, CompactionPlan, partition_key_to_dict
from compaction.ledger.base import LedgerMixin
from compaction.ledger.errors import LedgerError, UnknownRunError
from compaction.ledger.records import (
    ConflictRecord,
    OutcomeRecord,
    OutcomeStatus,
    PartitionOutcome,
    PlanRecord,
    RunRecord,
    RunStatus,
    RunTrigger,
    _duration_ms,
    _enum,
    _limit,
    _utc,
)
from compaction.ledger.schema import (
    _OUTCOME_FIELDS,
    Base,
    ConflictRow,
    PartitionOutcomeRow,
    PlanRow,
    RunRow,
    _conflict_record,
    _outcome_record,
    _plan_record,
    _run_record,
)


class _Runs(LedgerMixin):
    """The plan/run/outcome/conflict methods of :class:`Ledger` (Ledger provides the sessions)."""

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


def _get_run(session: Session, run_id: str) -> RunRow:
    row = session.get(RunRow, run_id)
    if row is None:
        raise UnknownRunError(f"unknown run {run_id!r}")
    return row


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
