"""Bodies of the DAG's tasks, as plain functions of plain values (the DAG file passes Airflow's context in).

Payloads between tasks are small dicts of names, ids and paths: the plan lives in a JSON file under
``$ICECOMPACT_HOME/runs/<run_id>/`` and in the ledger, the job results next to it. Heavy modules (pyiceberg,
SQLAlchemy, the runner) are imported inside the functions, never when the DAG file is parsed.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import logging
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

from icecompact_airflow.params import RunParams, parse_params

log = logging.getLogger(__name__)


@contextlib.contextmanager
def fail_fast() -> Iterator[None]:
    """Errors a retry cannot fix (bad input, an unsupported table, a compaction run that failed and is recorded so)
    fail the task at once; anything else, e.g. the catalog or ledger database restarting, is left to the DAG's
    retries."""
    from compaction.core.errors import (
        CommitValidationError,
        ConfigError,
        PlanningError,
        RewriteJobError,
        UnsupportedTableError,
    )

    try:
        yield
    except (ConfigError, PlanningError, UnsupportedTableError, RewriteJobError, CommitValidationError) as e:
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(f"{type(e).__name__}: {e}") from e


def _catalog(params: RunParams):  # type: ignore[no-untyped-def]
    from icecompact_airflow.connections import resolve_catalog

    return resolve_catalog(params.catalog)


def result_path(plan_path: str | Path, group_id: int) -> Path:
    """Where job group ``group_id`` of the plan at ``plan_path`` writes its result (as ``icecompact run`` does)."""
    return Path(plan_path).parent / f"result-g{int(group_id)}.json"


# ------------------------------------------------------------------------------------------------ discover
def discover(raw_params: Mapping[str, Any]) -> list[str]:
    """Validate every param (fail fast, before any work), then list the catalog's tables that the ``tables``
    names/patterns select. A plain name that does not exist is an error; a pattern may match nothing."""
    params = parse_params(raw_params)
    catalog = _catalog(params)
    from compaction.core.errors import CatalogError, CompactionError

    loaded = catalog.load()
    try:
        existing: list[str] = []
        for namespace in loaded.list_namespaces():
            for identifier in loaded.list_tables(namespace):
                existing.append(".".join(identifier))
    except Exception as e:
        raise CatalogError(f"cannot list the tables of catalog {catalog.name!r}: {e}") from e
    missing = [t for t in params.explicit_tables if t not in existing]
    if missing:
        raise CatalogError(f"table(s) {', '.join(missing)} not found in catalog {catalog.name!r}"
                           f" (it has: {', '.join(sorted(existing)) or 'no tables'})")
    selected = sorted(t for t in existing if params.matches(t))
    log.info("catalog %s: %d table(s) selected by %s: %s", catalog.name, len(selected), list(params.tables),
             ", ".join(selected) or "none")
    if params.partition_filter is not None:  # bind and project it on every selected table now: fail fast
        from compaction.metadata.filters import compile_partition_filter
        from compaction.metadata.inspect import load_table

        for table_name in selected:
            identity, table = load_table(catalog, table_name)
            try:
                compiled = compile_partition_filter(table, params.partition_filter, table_name=identity.dotted)
            except CompactionError as e:
                raise type(e)(f"invalid DAG param partition_filter={params.partition_filter!r}: {e.message}") from e
            log.info("%s: partition filter %s", table_name, compiled.describe() if compiled else "none")
    return selected


# ------------------------------------------------------------------------------------------------ inspect
def inspect(table_name: str, raw_params: Mapping[str, Any], echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Metadata-only health of one table (printed to the task log); returns its snapshot id and totals."""
    params = parse_params(raw_params)
    catalog = _catalog(params)
    from compaction.cli import format_health
    from compaction.ops.fleet import record_sample, sample_table

    sample, state = sample_table(catalog, table_name)
    echo(f"{catalog.name}.{table_name} at snapshot {state.snapshot_id}:\n{format_health(state)}")
    record_sample(sample, "airflow", warn=log.warning)  # health over time (best effort)
    return {
        "table": table_name,
        "snapshot_id": state.snapshot_id,
        "partitions": len(state.partitions),
        "data_files": sum(p.data_file_count for p in state.partitions),
        "delete_files": sum(len(p.delete_files) for p in state.partitions),
    }


# ------------------------------------------------------------------------------------------------ plan
def spec_fields(table: Any) -> list[Any]:
    """The default partition spec of a pyiceberg table as :class:`~compaction.core.intervals.SpecField` values."""
    from compaction.core.intervals import SpecField

    schema = table.schema()
    out = []
    for pf in table.spec().fields:
        try:
            source_type = str(schema.find_field(pf.source_id).field_type)
        except ValueError:
            source_type = "unknown"
        try:
            source_column = schema.find_column_name(pf.source_id) or ""
        except ValueError:
            source_column = ""
        out.append(SpecField(pf.name, str(pf.transform), source_type, source_column))
    return out


def plan(inspection: Mapping[str, Any], raw_params: Mapping[str, Any], *, run_type: str,
         data_interval_start: _dt.datetime | None, data_interval_end: _dt.datetime | None,
         dag_id: str | None = None, dag_run_id: str | None = None, now: _dt.datetime | None = None,
         echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Plan one table at the inspected snapshot: the run's data interval (for time-partitioned tables, see
    :mod:`compaction.core.intervals`) and the user's partition filter select partitions; record the run and
    plan in the ledger; write the plan JSON when there is work. Dry runs and empty plans finish the ledger run."""
    params = parse_params(raw_params)
    catalog = _catalog(params)
    from compaction.cli import format_plan
    from compaction.core.intervals import partition_window_for
    from compaction.core.planner import plan as make_plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.filters import compile_partition_filter
    from compaction.metadata.inspect import load_table, table_state
    from compaction.ledger import Ledger, RunStatus, RunTrigger
    from compaction.ops.runner import is_single_writer, last_minor_times, write_plan

    table_name = str(inspection["table"])
    identity, table = load_table(catalog, table_name, progress=echo)
    window = partition_window_for(spec_fields(table), params.window, run_type, data_interval_start,
                                  data_interval_end)
    # The user's row filter and the data interval (a row filter on the time column), bound and projected together.
    partition_filter = compile_partition_filter(table, params.partition_filter, window, table_name=identity.dotted)
    now = now or _dt.datetime.now(_dt.timezone.utc)
    with Ledger.open() as ledger:
        from compaction.ops.runner import settle_queued_runs

        settle_queued_runs(ledger, identity.dotted, catalog.name, progress=echo)  # runs whose waiter died
        snapshot_id = inspection.get("snapshot_id")
        if not params.dry_run:
            from compaction.ops.runner import check_unchecked_snapshots
            from icecompact_airflow.hooks import spark_settings

            # Our commits no check covered (a job killed between commit and check) are checked first; when one
            # is undone the inspected snapshot is gone from main, so the plan starts from the current one.
            if check_unchecked_snapshots(catalog, identity, table, ledger, validation=params.validation,
                                         spark_settings=spark_settings(), progress=echo, now=now):
                identity, table = load_table(catalog, table_name)
                snapshot_id = None
        state = table_state(table, identity, snapshot_id, progress=echo)
        policy = CompactionPolicy.resolve(state.properties, params.policy)
        compaction_plan = make_plan(state, policy, params.mode, now, partition_filter=partition_filter,
                                    last_minor_at=last_minor_times(ledger, state, policy))
        echo(f"{catalog.name}.{table_name}: run type {run_type}, window {params.window.value}, "
             f"partition filter: {partition_filter.to_text() if partition_filter else 'none'}")
        echo(format_plan(compaction_plan))
        run_id = ledger.start_run(plan=compaction_plan, trigger=RunTrigger.AIRFLOW, dry_run=params.dry_run, now=now,
                                  airflow_dag_id=dag_id, airflow_run_id=dag_run_id)
        plan_path: str | None = None
        if params.dry_run or not compaction_plan.groups:
            ledger.finish_run(run_id, RunStatus.SUCCEEDED, exit_code=0)
            echo(f"run {run_id}: {'dry run, nothing submitted' if params.dry_run else 'nothing to do'}")
        else:
            plan_path = str(write_plan(run_id, compaction_plan))
    return {
        "table": table_name,
        "catalog": catalog.name,
        "run_id": run_id,
        "plan_id": compaction_plan.plan_id,
        "plan_path": plan_path,
        "groups": [] if plan_path is None else [g.group_id for g in compaction_plan.groups],
        "single_writer": is_single_writer(catalog),
        "dry_run": params.dry_run,
        "partition_filter": partition_filter.to_text() if partition_filter else None,
        "partitions_planned": len(compaction_plan.scheduled_partitions),
    }


# ------------------------------------------------------------------------------------------------ jobs
def job_groups(plans: Sequence[Mapping[str, Any]], raw_params: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One ``CompactionSubmitOperator`` kwargs dict per job group of every plan (empty: no Spark job at all)."""
    params = parse_params(raw_params)
    if params.dry_run or params.executor == "resident":  # resident: compact_resident queues the work instead
        return []
    from compaction.ops.submit import make_app_name

    jobs = []
    for p in plans:
        if not p or not p.get("plan_path"):
            continue
        for group_id in p["groups"]:
            jobs.append({
                "plan_path": p["plan_path"],
                "group_id": int(group_id),
                "result_path": str(result_path(p["plan_path"], group_id)),
                "catalog_name": p["catalog"],
                "app_name": make_app_name(p["table"], p["plan_id"], int(group_id)),
            })
    log.info("%d Spark job group(s) to submit", len(jobs))
    return jobs


# ------------------------------------------------------------------------------------------------ record
def record(plans: Sequence[Mapping[str, Any]], raw_params: Mapping[str, Any],
           echo: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Read each job group's result JSON and record the outcomes in the ledger (the runner's own recording code);
    a group without a result (spark-submit failed or was killed) records FAILED outcomes for its partitions.
    Raises after recording when a run did not succeed."""
    params = parse_params(raw_params)
    from compaction.core.errors import RewriteJobError
    from compaction.core.plan import CompactionPlan
    from compaction.ops.executor import group_results
    from compaction.ledger import Ledger
    from compaction.ops.runner import record_run

    records: list[dict[str, Any]] = []
    failures: list[str] = []
    with Ledger.open() as ledger:
        for p in plans:
            if not p or not p.get("plan_path"):
                continue
            run_id = str(p["run_id"])
            existing = ledger.run(run_id)
            if existing is not None and existing.status.is_terminal:  # a retry of this task: already recorded
                records.append({"table": p["table"], "run_id": run_id, "status": existing.status.value,
                                "exit_code": existing.exit_code or 0})
                if existing.exit_code:  # the retry reports the failure again (it is not a new success)
                    failures.append(f"{p['table']} (run {run_id}): {existing.status.value} (recorded before)")
                continue
            compaction_plan = CompactionPlan.from_json(Path(p["plan_path"]).read_text())
            items = ledger.work_items(run_id=run_id)  # the resident path's results are in the queue
            results = (group_results(items, [int(g) for g in p["groups"]]) if items
                       else [_result_file(p["plan_path"], int(g)) for g in p["groups"]])
            recorded = record_run(ledger, run_id, compaction_plan, results, params.validation, progress=echo)
            status, exit_code, errors = recorded.status, recorded.exit_code, recorded.errors
            echo(f"{p['table']}: run {run_id} {status.value} (exit code {exit_code})")
            records.append({"table": p["table"], "run_id": run_id, "status": status.value, "exit_code": exit_code})
            if exit_code:
                failures.append(f"{p['table']} (run {run_id}): {status.value}; {'; '.join(errors) or 'see outcomes'}")
    if failures:
        raise RewriteJobError("compaction failed for " + " | ".join(failures))
    return records


def _result_file(plan_path: str, group_id: int) -> tuple[int, dict[str, Any] | None, str | None]:
    """(group, result, error) from a spark-submit job's result file (or its checkpoint)."""
    from compaction.ops.submit import read_group_result

    result, error = read_group_result(result_path(plan_path, group_id))
    if result is None:
        error = (f"job group {group_id} wrote no result (spark-submit failed or was killed: see the compact task "
                 "log)")
    return group_id, result, error


# ------------------------------------------------------------------------------------------------ summary
def summary(plans: Sequence[Mapping[str, Any]] | None, raw_params: Mapping[str, Any],
            echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Before/after per compacted partition (from the ledger) and each table's health now (from metadata)."""
    params = parse_params(raw_params)
    catalog = _catalog(params)
    from types import SimpleNamespace

    from compaction.cli import format_before_after, format_health
    from compaction.ops.fleet import record_sample, sample_table
    from compaction.ledger import Ledger

    out: dict[str, Any] = {}
    with Ledger.open() as ledger:
        for p in plans or ():
            if not p:
                continue
            run = ledger.run(str(p["run_id"]))
            outcomes = ledger.outcomes(str(p["run_id"]))
            sample, state = sample_table(catalog, str(p["table"]), ledger=ledger)
            record_sample(sample, "airflow", ledger=ledger, warn=log.warning)  # the health after the run
            echo(f"== {catalog.name}.{p['table']}: run {p['run_id']} {run.status.value if run else '?'}"
                 f"{' (dry run)' if p.get('dry_run') else ''}")
            # No inspection from before the run here: the table shows the job's own counts (after=None).
            echo(format_before_after(SimpleNamespace(outcomes=outcomes, before=SimpleNamespace(partitions=()),
                                                     after=None)))
            echo(f"health now (snapshot {state.snapshot_id}):\n{format_health(state)}")
            out[str(p["table"])] = {
                "run_id": p["run_id"],
                "status": run.status.value if run else None,
                "compacted": sum(1 for o in outcomes if o.status.value == "committed"),
                "delete_files_now": sum(len(x.delete_files) for x in state.partitions),
            }
    return out
