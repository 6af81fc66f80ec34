"""``icecompact maintain``: read the table's metadata and what is in flight -> plan -> record -> execute -> record.

The edges live here: pyiceberg reads the metadata (snapshots, refs, the current snapshot's manifest list, the
metadata file's size; no data file, no manifest content), the ledger says what is in flight (compaction runs in
state planned/running, writers' leases), Spark runs Iceberg's actions (compaction/spark/maintenance.py). Deciding is
the pure planner's job (compaction/core/maintenance.py). Planning happens right before executing, so what is in
flight is as fresh as it can be. The plan executes as a spark-submit job (``python -m compaction.spark maintain``,
like a compaction job, to any master), or on a session the caller hands over (:func:`maintain_table`).
"""

from __future__ import annotations

import datetime as _dt
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from compaction.catalog import CatalogConfig
from compaction.core.errors import CatalogError, MaintenanceError
from compaction.core.maintenance import (
    InFlight,
    MaintenancePlan,
    MaintenanceState,
    RefInfo,
    SnapshotInfo,
    plan_maintenance,
)
from compaction.core.maintenance_policy import MaintenancePolicy
from compaction.core.model import TableIdentity
from compaction.metadata.inspect import load_table
from compaction.ledger import Ledger

if TYPE_CHECKING:
    from pyiceberg.table import Table
    from pyspark.sql import SparkSession

    from compaction.spark.maintenance import ActionResult
    from compaction.spark.session import SparkSettings

__all__ = ["MaintenanceReport", "maintenance_state", "state_from_metadata_json", "read_state", "in_flight", "plan_table",
           "maintain_table", "submit_plan", "IncompleteMaintenance"]


def maintenance_state(table: Table, identity: TableIdentity, in_flight_work: tuple[InFlight, ...] = ()) -> MaintenanceState:
    """The planner's view of ``table`` from its metadata (one read of the current manifest list)."""
    md = table.metadata
    snapshots = tuple(SnapshotInfo(int(s.snapshot_id), None if s.parent_snapshot_id is None else int(s.parent_snapshot_id),
                                   int(s.timestamp_ms)) for s in md.snapshots)
    refs = tuple(RefInfo(name, int(r.snapshot_id), str(getattr(r.snapshot_ref_type, "value", r.snapshot_ref_type)) == "branch",
                         r.max_ref_age_ms, r.max_snapshot_age_ms, r.min_snapshots_to_keep) for name, r in md.refs.items())
    current = table.current_snapshot()
    try:
        manifests = tuple(int(m.manifest_length) for m in current.manifests(table.io)) if current else ()
        size: int | None = len(table.io.new_input(table.metadata_location)) if table.metadata_location else None
    except Exception as e:  # noqa: BLE001 - pyiceberg FileIO errors (OSError, botocore, ...)
        raise CatalogError(f"cannot read the metadata of {identity.dotted!r}: {type(e).__name__}: {e}") from e
    return MaintenanceState(
        table=identity, location=str(md.location), format_version=int(md.format_version),
        properties=dict(md.properties), current_snapshot_id=None if current is None else int(current.snapshot_id),
        snapshots=snapshots, refs=refs, manifest_sizes=manifests, metadata_location=table.metadata_location,
        metadata_file_bytes=size, metadata_log_entries=len(md.metadata_log), in_flight=in_flight_work)


def _sql_metadata_location(catalog: CatalogConfig, loaded: Any, identity: TableIdentity) -> str | None:
    """The table's current metadata file from a SQL catalog's database: the one row pyiceberg's ``load_table`` reads
    first (``None`` if the table is not there: the caller's ``load_table`` then says why)."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import select
    from sqlalchemy.orm import Session

    t = IcebergTables
    stmt = select(t.metadata_location).where(t.catalog_name == catalog.name,
                                             t.table_namespace == ".".join(identity.namespace),
                                             t.table_name == identity.name)
    type_filter = getattr(loaded, "_iceberg_type_filter", None)
    condition = type_filter() if callable(type_filter) else None
    if condition is not None:  # never a view's row
        stmt = stmt.where(condition)
    try:
        with Session(loaded.engine) as session:
            return session.execute(stmt).scalar_one_or_none()
    except Exception as e:  # the catalog database's own errors
        raise CatalogError(f"cannot read the metadata location of {identity.dotted!r}: {e}") from e


def state_from_metadata_json(md: Mapping[str, Any], identity: TableIdentity, *, metadata_location: str | None,
                             metadata_file_bytes: int | None, manifest_sizes: tuple[int, ...],
                             in_flight_work: tuple[InFlight, ...] = ()) -> MaintenanceState:
    """The planner's view from the metadata file's JSON as parsed (the spec's field names), without building
    pyiceberg's models: at 100,000 snapshots their validation is most of the read (bench/expire_scale.py)."""
    current = md.get("current-snapshot-id")
    current_id = None if current is None or int(current) == -1 else int(current)
    snapshots = tuple(SnapshotInfo(int(s["snapshot-id"]),
                                   None if s.get("parent-snapshot-id") is None else int(s["parent-snapshot-id"]),
                                   int(s["timestamp-ms"])) for s in md.get("snapshots") or ())
    raw_refs = dict(md.get("refs") or {})
    if "main" not in raw_refs and current_id is not None:  # v1 metadata without refs: main is implied
        raw_refs["main"] = {"snapshot-id": current_id, "type": "branch"}

    def _opt(v: object) -> int | None:
        return None if v is None else int(v)  # type: ignore[call-overload]

    refs = tuple(RefInfo(name, int(r["snapshot-id"]), str(r.get("type", "branch")).lower() == "branch",
                         _opt(r.get("max-ref-age-ms")), _opt(r.get("max-snapshot-age-ms")),
                         _opt(r.get("min-snapshots-to-keep"))) for name, r in raw_refs.items())
    return MaintenanceState(
        table=identity, location=str(md["location"]), format_version=int(md.get("format-version", 1)),
        properties={str(k): str(v) for k, v in (md.get("properties") or {}).items()}, current_snapshot_id=current_id,
        snapshots=snapshots, refs=refs, manifest_sizes=manifest_sizes, metadata_location=metadata_location,
        metadata_file_bytes=metadata_file_bytes, metadata_log_entries=len(md.get("metadata-log") or ()),
        in_flight=in_flight_work)


def read_state(catalog: CatalogConfig, table_name: str,
               in_flight_work: Callable[[TableIdentity], tuple[InFlight, ...]] = lambda _i: ()) -> MaintenanceState:
    """The planner's view of the table. On a SQL catalog the metadata file is read directly (its location from the
    catalog database, its JSON parsed with the standard library, the current manifest list read by pyiceberg): a
    100,000-snapshot metadata file of ~90 MB is read in a fraction of what pyiceberg's ``load_table`` takes. Other
    catalogs (REST: the metadata comes in the load response) go through ``load_table``."""
    import gzip
    import json

    from compaction.core.identifiers import parse_table_identifier

    identity = parse_table_identifier(table_name, catalog.name)
    location = None
    loaded = None
    if catalog.is_sql:
        loaded = catalog.load()
        location = _sql_metadata_location(catalog, loaded, identity)
    if loaded is None or location is None:
        identity, table = load_table(catalog, table_name)
        return maintenance_state(table, identity, in_flight_work(identity))
    from pyiceberg.io import load_file_io
    from pyiceberg.manifest import read_manifest_list

    try:
        io = load_file_io(dict(loaded.properties), location)
        with io.new_input(location).open() as fh:
            raw = fh.read()
        size = len(raw)
        if raw[:2] == b"\x1f\x8b":  # write.metadata.compression-codec=gzip
            raw = gzip.decompress(raw)
        md = json.loads(raw)
        current = md.get("current-snapshot-id")
        manifest_list = next((s.get("manifest-list") for s in md.get("snapshots") or ()
                              if current is not None and int(s["snapshot-id"]) == int(current)), None)
        manifests = (tuple(int(m.manifest_length) for m in read_manifest_list(io.new_input(manifest_list)))
                     if manifest_list else ())
    except Exception as e:  # noqa: BLE001 - FileIO errors (OSError, botocore, ...), a malformed file
        raise CatalogError(f"cannot read the metadata of {identity.dotted!r}: {type(e).__name__}: {e}") from e
    return state_from_metadata_json(md, identity, metadata_location=location, metadata_file_bytes=size,
                                    manifest_sizes=manifests, in_flight_work=in_flight_work(identity))


def in_flight(ledger: Ledger, identity: TableIdentity, now: _dt.datetime) -> tuple[InFlight, ...]:
    """Compaction runs of the table the ledger holds as planned/running, and writers' live leases."""
    runs = [InFlight("run", r.run_id, r.started_at, r.snapshot_ids)
            for r in ledger.in_flight_runs(identity.dotted, catalog=identity.catalog)]
    leases = [InFlight("lease", f"{w.holder} ({w.lease_id})", w.started_at)
              for w in ledger.active_write_leases(identity.dotted, catalog=identity.catalog, now=now)]
    return tuple(runs + leases)


def plan_table(catalog: CatalogConfig, table_name: str, ledger: Ledger, *, overrides: Mapping[str, object] | None = None,
               now: _dt.datetime | None = None) -> MaintenancePlan:
    now = now or _dt.datetime.now(_dt.timezone.utc)
    at = now
    state = read_state(catalog, table_name, lambda identity: in_flight(ledger, identity, at))
    return plan_maintenance(state, MaintenancePolicy.resolve(state.properties, overrides), now)


@dataclass
class MaintenanceReport:
    run_id: str | None
    plan: MaintenancePlan
    results: list[ActionResult] = field(default_factory=list)

    @property
    def status(self) -> str:
        if not self.results:
            return "succeeded"
        # A deferred action (a manifest rewrite that raced concurrent commits every time) changed nothing and is
        # retried by the next run: the run still did what it could.
        if all(r.ok for r in self.results):
            return "succeeded"
        return "failed" if not any(r.ok for r in self.results) else "partial"

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "succeeded" else MaintenanceError.exit_code

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "plan": self.plan.to_dict(),
                "results": [r.to_dict() for r in self.results]}


def maintain_table(catalog: CatalogConfig, table_name: str, *, spark: SparkSession | None = None,
                   spark_settings: SparkSettings | None = None, timeout_s: float | None = None,
                   overrides: Mapping[str, object] | None = None, dry_run: bool = False, ledger: Ledger | None = None,
                   progress: Callable[[str], None] = lambda _m: None, now: _dt.datetime | None = None) -> MaintenanceReport:
    """Plan the table's maintenance and (unless ``dry_run`` or nothing to do) execute it, recording the run, its plan
    and every action's removals.

    Where the plan runs: on ``spark`` when the caller hands over a session it owns (tests, soaks, benchmarks that
    keep one JVM); otherwise always as a spark-submit job (``python -m compaction.spark maintain``) to the master of
    ``spark_settings`` (default ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``), like a compaction job: a 100,000-
    snapshot expiry or an orphan listing of millions of objects runs where the cluster is, never in the caller's
    process (an Airflow worker). On ``local[2]`` the job costs about what an in-process session costs (both start
    one JVM), so there is no second path for the embedded default."""
    own_ledger = ledger is None
    ledger = ledger or Ledger.open()
    try:
        plan = plan_table(catalog, table_name, ledger, overrides=overrides, now=now)
        run_id = ledger.start_maintenance(plan.table.dotted, plan.table.catalog, plan.plan_id, plan.to_json(indent=None),
                                          dry_run=dry_run)
        report = MaintenanceReport(run_id, plan)
        if dry_run or not plan.actions:
            ledger.finish_maintenance(run_id, "succeeded")
            return report
        try:
            if spark is not None:
                from compaction.spark.maintenance import execute_plan

                report.results = execute_plan(spark, plan, progress=progress)
            else:
                report.results = submit_plan(catalog, plan, spark_settings, progress=progress, timeout_s=timeout_s)
        except IncompleteMaintenance as e:
            # The job ended mid-plan: what its checkpoint says it did (and removed) is recorded before the failure.
            _record_results(ledger, run_id, plan, e.results)
            ledger.finish_maintenance(run_id, "failed", error=str(e))
            raise
        except BaseException as e:
            ledger.finish_maintenance(run_id, "failed", error=f"{type(e).__name__}: {e}")
            raise
        _record_results(ledger, run_id, plan, report.results)
        ledger.finish_maintenance(run_id, report.status,
                                  error="; ".join(r.error for r in report.results if r.error) or None)
        return report
    finally:
        if own_ledger:
            ledger.close()


def _record_results(ledger: Ledger, run_id: str, plan: MaintenancePlan, results: Sequence[ActionResult]) -> None:
    for r in results:
        reason = plan.decision(r.action).reason if r.error is None else f"{plan.decision(r.action).reason}; {r.error}"
        ledger.record_maintenance_action(run_id, r.action.value, r.status, reason=reason,
                                         files_removed=r.files_removed, bytes_removed=r.bytes_removed,
                                         duration_ms=r.duration_ms, detail=r.detail)


class IncompleteMaintenance(MaintenanceError):
    """The maintenance job ended before writing its result; ``results`` are the actions its checkpoint reports
    done (their removals happened: they are recorded)."""

    def __init__(self, message: str, results: Sequence[ActionResult]) -> None:
        super().__init__(message)
        self.results = list(results)


def submit_plan(catalog: CatalogConfig, plan: MaintenancePlan, spark_settings: SparkSettings | None = None, *,
                progress: Callable[[str], None] = lambda _m: None, timeout_s: float | None = None,
                entry_script: Path | None = None) -> list[ActionResult]:
    """Execute ``plan`` as a spark-submit job (``python -m compaction.spark maintain``) and return its action
    results. The plan goes to the job as a file (versioned JSON, checked on read), the results come back as one;
    the catalog's secrets go through run_submit's private properties file, never argv. Raises
    :class:`IncompleteMaintenance` when the job died mid-plan (with what it reported done), MaintenanceError when
    it could not execute the plan, SparkSubmitError when it wrote nothing."""
    from compaction.ops.submit import SparkSubmitError, SubmitRequest, read_group_result, run_submit
    from compaction.spark.contract import maintain_command
    from compaction.spark.maintenance import results_from_payload
    from compaction.spark.session import SparkSettings as _Settings

    settings_ = spark_settings or _Settings.from_environment()
    with tempfile.TemporaryDirectory(prefix="icecompact-maintain-") as tmp:
        plan_path, result_path = Path(tmp) / "maintenance-plan.json", Path(tmp) / "maintenance-result.json"
        plan_path.write_text(plan.to_json(), encoding="utf-8")
        request = SubmitRequest(plan_path=plan_path, group_id=0, result_path=result_path, catalog=catalog,
                                settings=settings_, app_name=f"icecompact-maintain-{plan.table.dotted}"[:200],
                                command=maintain_command(plan_path, result_path, catalog.name))
        progress(f"maintenance {plan.plan_id}: spark-submit ({settings_.master})")
        try:
            outcome = run_submit(request, on_output=progress, timeout_s=timeout_s, entry_script=entry_script)
        except SparkSubmitError as e:
            checkpoint, _ = read_group_result(result_path)  # the result, else the job's last checkpoint
            done = results_from_payload(checkpoint, plan.plan_id) if checkpoint else []
            if checkpoint is not None and checkpoint.get("complete") and not checkpoint.get("error"):
                return done  # killed (a timeout, a signal) after writing its whole result: the result stands
            raise IncompleteMaintenance(f"the maintenance job ended after {len(done)} of {len(plan.actions)} "
                                        f"action(s) without its result: {e}", done) from e
        payload = outcome.result
        if payload is None:
            raise MaintenanceError(f"the maintenance job exited {outcome.returncode} without a result")
        results = results_from_payload(payload, plan.plan_id)
        if payload.get("error"):
            raise MaintenanceError(f"the maintenance job could not execute plan {plan.plan_id}: {payload['error']}")
        if not payload.get("complete", True):
            raise IncompleteMaintenance("the maintenance job's result is incomplete", results)
        return results
