"""``icecompact run``: inspect -> plan -> record -> spark-submit each job group -> record outcomes -> summary.

The edges (catalog, ledger, spark-submit) live here; deciding is the pure planner's job and compacting the Spark
job's. Used by the CLI and by the Airflow DAG.
"""

from __future__ import annotations

import datetime as _dt
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from compaction import settings
from compaction.catalog import CatalogConfig
from compaction.core.errors import CompactionError, ConfigError, RewriteJobError
from compaction.core.model import PartitionKey, TableIdentity, TableState
from compaction.core.partition_filter import PartitionFilter
from compaction.core.plan import CompactionKind, CompactionMode, CompactionPlan, partition_key_from_dict
from compaction.core.planner import plan as make_plan
from compaction.core.policy import CompactionPolicy
from compaction.core.results import (
    BAD_OUTCOMES,
    UNSUPPORTED_PREFIX,
    GroupResult,
    PartitionResult,
    outcome_status,
)
from compaction.core.run_options import MAX_PARALLEL_JOBS_DEFAULT, MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT
from compaction.ops.executor import ensure_executor, group_results, wait_for_work
from compaction.metadata.inspect import TableStateCache, load_table, table_state
from compaction.metadata.manifests import ManifestCache
from compaction.ledger import LEDGER_URL_ENV, Ledger, OutcomeStatus, PartitionOutcome, RunStatus, RunTrigger
from compaction.spark.session import SparkSettings
from compaction.spark.contract import progress_path
from compaction.ops.submit import (
    SubmitRequest,
    is_local_master,
    make_app_name,
    read_group_result,
    run_submit,
)

@dataclass
class RunReport:
    run_id: str
    plan: CompactionPlan
    status: RunStatus
    exit_code: int
    before: TableState
    after: TableState | None
    outcomes: list[PartitionOutcome] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _outcome(partition: PartitionResult, level: str) -> PartitionOutcome:
    before, after = partition.before, partition.after
    commits = partition.commit_snapshot_ids
    return PartitionOutcome.for_partition(
        partition_key_from_dict(partition.partition),
        CompactionKind(partition.kind),
        outcome_status(partition.status),
        reason=partition.reason or None,
        attempts=partition.attempts,
        conflicts=len(partition.conflicts),
        base_snapshot_id=partition.base_snapshot_id,
        commit_snapshot_id=commits[-1] if commits else None,
        data_files_before=before.get("data_files"),
        data_files_after=after.get("data_files"),
        data_bytes_before=before.get("data_bytes"),
        data_bytes_after=after.get("data_bytes"),
        records_before=before.get("records"),
        records_after=after.get("records"),
        delete_files_before=before.get("delete_files"),
        delete_files_after=after.get("delete_files"),
        delete_records_before=before.get("delete_records"),
        delete_records_after=after.get("delete_records"),
        duration_ms=partition.duration_ms,
        # The level the job checked at (a partition that checked nothing reports no result: shown as "-").
        validation_level=partition.validation.get("level") or level,
        validation_result=partition.validation.get("result"),
        error=partition.error,
    )


def run_table(
    catalog: CatalogConfig,
    table_name: str,
    *,
    mode: CompactionMode = CompactionMode.AUTO,
    partition_filter: str | PartitionFilter | None = None,
    overrides: Mapping[str, object] | None = None,
    dry_run: bool = False,
    validation: str = VALIDATION_DEFAULT,
    max_retries: int = MAX_RETRIES_DEFAULT,
    max_parallel_jobs: int = MAX_PARALLEL_JOBS_DEFAULT,
    spark_settings: SparkSettings | None = None,
    ledger: Ledger | None = None,
    trigger: RunTrigger = RunTrigger.CLI,
    progress: Callable[[str], None] = lambda _m: None,
    now: _dt.datetime | None = None,
    timeout_s: float | None = None,
    airflow_dag_id: str | None = None,
    airflow_run_id: str | None = None,
    executor: str = "submit",
) -> RunReport:
    """Plan ``table_name`` and compact it: ``executor`` ``submit`` runs the groups with spark-submit (one per group,
    or one for all of them on a local master or an SQLite catalog); ``resident`` queues them for the catalog's
    long-running executor (compaction.ops.executor), started when none is alive, and waits."""
    from compaction.core.queue import EXECUTOR_CHOICES

    if executor not in EXECUTOR_CHOICES:
        raise ConfigError(f"invalid executor {executor!r}: use one of {', '.join(EXECUTOR_CHOICES)}")
    now = now or _dt.datetime.now(_dt.timezone.utc)
    identity, table = load_table(catalog, table_name)
    if isinstance(partition_filter, str):  # a row filter on source columns (compaction.metadata.filters), checked first
        from compaction.metadata.filters import compile_partition_filter

        partition_filter = compile_partition_filter(table, partition_filter, table_name=identity.dotted)
    own_ledger = ledger is None
    ledger = ledger or Ledger.open()
    try:

        settle_queued_runs(ledger, identity.dotted, catalog.name, progress=progress)  # runs whose waiter died
        if not dry_run:
            spark_settings = spark_settings or SparkSettings.from_environment()
            if check_unchecked_snapshots(catalog, identity, table, ledger, validation=validation,
                                         spark_settings=spark_settings, progress=progress, now=now,
                                         timeout_s=timeout_s):
                identity, table = load_table(catalog, table_name)  # a commit of ours was undone: plan what is
        # Kept for the inspection after the run: it re-reads only what the run's commits changed.
        manifests, states = ManifestCache(), TableStateCache()
        state = table_state(table, identity, progress=progress, manifest_cache=manifests, state_cache=states)
        policy = CompactionPolicy.resolve(state.properties, overrides)
        compaction_plan = make_plan(state, policy, mode, now, partition_filter=partition_filter,
                                    last_minor_at=last_minor_times(ledger, state, policy))
        run_id = ledger.start_run(plan=compaction_plan, trigger=trigger, dry_run=dry_run, now=now,
                                  airflow_dag_id=airflow_dag_id, airflow_run_id=airflow_run_id)
        report = RunReport(run_id, compaction_plan, RunStatus.RUNNING, 0, state, None)
        progress(f"plan {compaction_plan.plan_id}: {sum(1 for d in compaction_plan.decisions if d.kind is not CompactionKind.NONE)}"
                 f" partition(s) to compact in {len(compaction_plan.groups)} job group(s)")
        if dry_run or not compaction_plan.groups:
            status = RunStatus.SUCCEEDED
            ledger.finish_run(run_id, status, exit_code=0)
            report.status = status
            return report
        report = _execute(catalog, compaction_plan, report, ledger, validation=validation, max_retries=max_retries,
                          max_parallel_jobs=max_parallel_jobs, spark_settings=spark_settings or SparkSettings.from_environment(),
                          progress=progress, timeout_s=timeout_s, executor=executor)
        identity, table = load_table(catalog, table_name)
        report.after = table_state(table, identity, progress=progress, manifest_cache=manifests, state_cache=states)
        return report
    finally:
        if own_ledger:
            ledger.close()


def _execute(catalog: CatalogConfig, compaction_plan: CompactionPlan, report: RunReport, ledger: Ledger, *,
             validation: str, max_retries: int, max_parallel_jobs: int, spark_settings: SparkSettings,
             progress: Callable[[str], None], timeout_s: float | None, executor: str = "submit") -> RunReport:
    plan_path = write_plan(report.run_id, compaction_plan)
    run_dir = plan_path.parent
    workers = 1 if is_single_writer(catalog) else max(1, max_parallel_jobs)
    # The job's commits yield to writers' leases in this ledger (compaction.spark.gate); the URL may hold a password,
    # so it goes through the environment, never argv.
    job_env = {**os.environ, LEDGER_URL_ENV: ledger.connection_url()}

    def submit(group_id: int) -> tuple[int, dict[str, Any] | None, str | None]:
        request = SubmitRequest(
            plan_path=plan_path, group_id=group_id, result_path=run_dir / f"result-g{group_id}.json",
            catalog=catalog, settings=spark_settings, validation=validation, max_retries=max_retries,
            app_name=make_app_name(compaction_plan.table.dotted, compaction_plan.plan_id, group_id),
        )
        progress(f"group {group_id}: spark-submit ({spark_settings.master})")
        try:
            outcome = run_submit(request, on_output=progress, timeout_s=timeout_s, env=job_env)
        except CompactionError as e:
            result = getattr(e, "result", None)
            if result is None:  # what a job that ended early had committed and validated
                result, _ = read_group_result(request.result_path)
            return group_id, result, str(e)
        if outcome.result is None:
            return group_id, None, f"job group {group_id} exited {outcome.returncode} without a result"
        return group_id, outcome.result, None

    def submit_together(group_ids: list[int]) -> list[tuple[int, dict[str, Any] | None, str | None]]:
        """Every group in one spark-submit (``run --group G --result R`` repeated: one JVM, one rewrite action for
        all of them, compaction.spark.job.run_groups)."""
        paths = {gid: run_dir / f"result-g{gid}.json" for gid in group_ids}
        command: tuple[str, ...] = ("run", "--plan", str(plan_path))
        for gid, path in paths.items():
            path.unlink(missing_ok=True)
            progress_path(path).unlink(missing_ok=True)
            command += ("--group", str(gid), "--result", str(path))
        command += ("--catalog", catalog.name, "--validation", validation, "--max-retries", str(max_retries))
        first = group_ids[0]
        request = SubmitRequest(
            plan_path=plan_path, group_id=first, result_path=paths[first], catalog=catalog, settings=spark_settings,
            validation=validation, max_retries=max_retries, command=command,
            app_name=make_app_name(compaction_plan.table.dotted, compaction_plan.plan_id, first),
        )
        progress(f"groups {', '.join(map(str, group_ids))}: one spark-submit ({spark_settings.master})")
        error: str | None = None
        try:
            run_submit(request, on_output=progress, timeout_s=timeout_s, env=job_env)
        except CompactionError as e:
            error = str(e)
        out = []
        for gid, path in paths.items():
            result, partial = read_group_result(path)  # a job that ended early: what it committed and validated
            if result is None:
                out.append((gid, None, error or f"job group {gid} exited without a result"))
            else:
                out.append((gid, result, error or partial))
        return out

    group_ids = [g.group_id for g in compaction_plan.groups]
    together = len(group_ids) > 1 and (workers == 1 or is_local_master(spark_settings.master))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        if executor == "resident":
            outcomes: Any = run_resident(catalog, compaction_plan, report.run_id, ledger, validation=validation,
                                         max_retries=max_retries, spark_settings=spark_settings, progress=progress,
                                         timeout_s=timeout_s)
        else:
            outcomes = submit_together(group_ids) if together else pool.map(submit, group_ids)
        recorded = record_run(ledger, report.run_id, compaction_plan, outcomes, validation, progress=progress)
    report.outcomes.extend(recorded.outcomes)
    report.errors.extend(recorded.errors)
    report.status, report.exit_code = recorded.status, recorded.exit_code
    return report


def run_resident(catalog: CatalogConfig, compaction_plan: CompactionPlan, run_id: str, ledger: Ledger, *,
                 validation: str, max_retries: int, spark_settings: SparkSettings,
                 progress: Callable[[str], None], timeout_s: float | None = None,
                 ) -> list[tuple[int, dict[str, Any] | None, str | None]]:
    """Queue the plan's groups as one work item (one rewrite action, as ``submit_together``) for the catalog's
    resident executor, start one when none is alive, wait; (group, result, error) per group."""

    group_ids = [g.group_id for g in compaction_plan.groups]
    item = ledger.enqueue_work(compaction_plan.to_json(), plan_id=compaction_plan.plan_id,
                               table_ref=compaction_plan.table.dotted, catalog=catalog.name, group_ids=group_ids,
                               run_id=run_id, validation=validation, max_retries=max_retries,
                               exclusive=is_single_writer(catalog))
    progress(f"groups {', '.join(map(str, group_ids))}: queued as work item {item.item_id}")

    def keep_alive() -> None:
        ensure_executor(catalog, ledger, spark_settings=spark_settings, ledger_url=ledger.connection_url(),
                        progress=progress)

    keep_alive()
    items = wait_for_work(ledger, [item.item_id], timeout_s=timeout_s, keep_alive=keep_alive, progress=progress)
    return group_results(items, group_ids)


def check_unchecked_snapshots(catalog: CatalogConfig, identity: TableIdentity, table: Any, ledger: Ledger, *,
                              validation: str, spark_settings: SparkSettings, progress: Callable[[str], None],
                              now: _dt.datetime, timeout_s: float | None = None) -> bool:
    """The post-hoc check of our snapshots no check covered (compaction.ops.posthoc), before planning. Returns whether
    one was rolled back (the table changed). A check that cannot run is reported and left for the next plan: it
    never blocks compaction, whose own commits are checked as always."""
    from compaction.ops.posthoc import run_posthoc_checks, submit_checker

    checker = submit_checker(catalog, spark_settings, progress=progress, timeout_s=timeout_s)
    try:
        results = run_posthoc_checks(ledger, identity, table, checker, validation=validation, progress=progress,
                                     now=now)
    except CompactionError as e:
        progress(f"post-hoc check could not run ({e}); it is retried at the next plan")
        return False
    return any(r.get("result") == "rolled_back" for r in results)


def is_single_writer(catalog: CatalogConfig) -> bool:
    """SQLite cannot take concurrent commits (see docs/operations.md, "Catalogs"): one job at a time on an SQLite catalog."""
    return str(catalog.properties.get("uri", "")).startswith("sqlite")


def last_minor_times(ledger: Ledger, state: TableState, policy: CompactionPolicy) -> dict[PartitionKey, _dt.datetime] | None:
    """When each partition's last committed MINOR was recorded, for ``compaction.minor.interval`` (None when the
    interval is off: no ledger read)."""
    if policy.minor_interval_seconds <= 0:
        return None
    by_label = ledger.last_committed(state.identity.dotted, "minor", catalog=state.identity.catalog)
    return {p.key: by_label[p.key.label()] for p in state.partitions if p.key.label() in by_label}


def write_plan(run_id: str, compaction_plan: CompactionPlan) -> Path:
    """Write the plan JSON into the run's folder ``$ICECOMPACT_HOME/runs/<run_id>/plan.json``; the job groups'
    result files go next to it."""
    run_dir = settings.home() / "runs" / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    plan_path = run_dir / "plan.json"
    plan_path.write_text(compaction_plan.to_json())
    return plan_path


@dataclass(frozen=True)
class GroupRecord:
    """What :func:`record_group_result` wrote for one job group: its outcomes and, if the group failed, an error
    line and the exit code it contributes."""

    outcomes: tuple[PartitionOutcome, ...]
    error: str | None = None
    exit_code: int = 0


def record_group_result(ledger: Ledger, run_id: str, compaction_plan: CompactionPlan, group_id: int,
                        result: Mapping[str, Any] | None, error: str | None, validation: str, *,
                        progress: Callable[[str], None] = lambda _m: None) -> GroupRecord:
    """Record one job group's result (the JSON the Spark job wrote, or ``None``) in the ledger: an outcome per
    reported partition, its conflicts, and a FAILED outcome for every planned partition the job never reported
    (killed, crashed). Used by ``icecompact run`` and by the Airflow DAG's record task.

    Progress: a job that finished printed one final line per partition itself (``icecompact: <partition> ->
    <status> ...``, compaction.spark.job.final_line); repeating it here would give a partition two lines. Only
    what the job's stream cannot have said is printed: the outcomes of a job that ended early (its checkpoint, or
    nothing) as recorded, and a count per status."""
    parsed = GroupResult.from_dict(result) if result is not None else None  # refuses a result format it cannot read
    partitions = parsed.partitions if parsed is not None else []
    job_finished = parsed is not None and parsed.status != "incomplete"
    from compaction.ops.posthoc import job_checks

    # Every commit the job checked, so that the next plan can tell which of ours were never checked.
    ledger.record_snapshot_checks(compaction_plan.table.dotted, compaction_plan.table.catalog,
                                  job_checks(result, plan_id=compaction_plan.plan_id, run_id=run_id, level=validation))
    recorded: set[str] = set()
    outcomes: list[PartitionOutcome] = []
    for partition in partitions:
        outcome = _outcome(partition, validation)
        ledger.record_partition_outcome(run_id, outcome)
        recorded.add(outcome.partition_label)
        outcomes.append(outcome)
        for conflict in partition.conflicts:
            ledger.record_conflict(run_id, outcome.partition_label, int(conflict["attempt"]),
                                   str(conflict["error_class"]), str(conflict["message"]))
        if not job_finished:
            progress(_recorded_line(outcome))
    group_error: str | None = None
    exit_code = 0
    if error or (parsed is not None and parsed.error):
        message = error or str(parsed.error if parsed is not None else "")
        group_error = f"group {group_id}: {message}"
        exit_code = (parsed.exit_code if parsed is not None else 0) or RewriteJobError.exit_code
    group = next(g for g in compaction_plan.groups if g.group_id == group_id)
    for key in group.partitions:  # partitions the job never reported (killed, crashed)
        if key.label() not in recorded:
            kind = next(t.kind for t in group.tasks if t.partition == key)
            failed = PartitionOutcome.for_partition(key, kind, OutcomeStatus.FAILED, validation_level=validation,
                                                    error=error or "no result for this partition")
            ledger.record_partition_outcome(run_id, failed)
            outcomes.append(failed)
            progress(_recorded_line(failed))
    counts: dict[str, int] = {}
    for outcome in outcomes:
        counts[outcome.status.value] = counts.get(outcome.status.value, 0) + 1
    progress(f"group {group_id} recorded: " + (", ".join(f"{n} {status}" for status, n in counts.items()) or "nothing"))
    return GroupRecord(tuple(outcomes), group_error, exit_code)


def _recorded_line(outcome: PartitionOutcome) -> str:
    """A partition's outcome as recorded, for the partitions whose final line the job did not print."""
    from compaction.core.display import validation_label

    detail = outcome.reason or outcome.error or ""
    return (f"  {outcome.partition_label}: {outcome.status.value} (recorded) "
            f"[validation {validation_label(outcome.validation_level, outcome.validation_result)}]"
            + (f": {detail[:500]}" if detail else ""))


@dataclass(frozen=True)
class RecordedRun:
    """What :func:`record_run` recorded: the run's status and exit code, its outcomes and group errors."""

    status: RunStatus
    exit_code: int
    outcomes: tuple[PartitionOutcome, ...]
    errors: tuple[str, ...]


def settle_queued_runs(ledger: Ledger, table_ref: str, catalog: str, *, grace_s: float = 30.0,
                       now: Any = None, progress: Callable[[str], None] = lambda _m: None) -> list[str]:
    """Finish the runs of the table that are still ``running`` although every work item of theirs ended more than
    ``grace_s`` ago: their waiter died (an Airflow task failed or was killed, a CLI was interrupted). Their items'
    results are recorded and the runs finished, as the waiter would have done; returns their ids. Runs without work
    items (spark-submit) are not touched."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    settled = []
    for run in ledger.in_flight_runs(table_ref, catalog=catalog):
        items = ledger.work_items(run_id=run.run_id)
        if not items or not all(i.status.is_terminal for i in items):
            continue
        if any(i.finished_at is not None and (now - i.finished_at).total_seconds() < grace_s for i in items):
            continue
        existing = ledger.run(run.run_id)
        if existing is None or existing.status.is_terminal:
            continue
        plan = CompactionPlan.from_json(items[0].plan_json)
        status = record_run(ledger, run.run_id, plan, group_results(items, [g.group_id for g in plan.groups]),
                            items[0].validation, progress=progress).status
        progress(f"run {run.run_id}: its waiter is gone; recorded from its work items: {status.value}")
        settled.append(run.run_id)
    return settled


def record_run(ledger: Ledger, run_id: str, compaction_plan: CompactionPlan,
               group_results: Iterable[tuple[int, Mapping[str, Any] | None, str | None]], validation: str, *,
               progress: Callable[[str], None] = lambda _m: None) -> RecordedRun:
    """Record every group's (result, error) with :func:`record_group_result`, then finish the run
    (:func:`finish_recorded_run`). Used by ``icecompact run``, the DAG's record task and the settling of runs whose
    waiter died."""
    outcomes: list[PartitionOutcome] = []
    errors: list[str] = []
    exit_codes: list[int] = []
    for group_id, result, error in group_results:
        recorded = record_group_result(ledger, run_id, compaction_plan, int(group_id), result, error, validation,
                                       progress=progress)
        outcomes.extend(recorded.outcomes)
        if recorded.error is not None:
            errors.append(recorded.error)
            exit_codes.append(recorded.exit_code)
    status, exit_code = finish_recorded_run(ledger, run_id, outcomes, errors, exit_codes)
    return RecordedRun(status, exit_code, tuple(outcomes), tuple(errors))


def finish_recorded_run(ledger: Ledger, run_id: str, outcomes: Sequence[PartitionOutcome], errors: Sequence[str],
                        exit_codes: Sequence[int]) -> tuple[RunStatus, int]:
    """Derive the run's status and exit code from its recorded outcomes and group errors; finish it in the ledger."""
    bad = [o for o in outcomes if o.status in BAD_OUTCOMES]
    # Work the job could not do (e.g. MINOR on ORC delete files) leaves the run partial; a partition skipped
    # because it no longer needed work (changed since planning) does not.
    not_done = [o for o in outcomes if o.status is OutcomeStatus.SKIPPED and (o.reason or "").startswith(UNSUPPORTED_PREFIX)]
    if any(o.status is OutcomeStatus.NEEDS_ATTENTION for o in outcomes):
        status = RunStatus.NEEDS_ATTENTION
    elif not bad and not errors:
        status = RunStatus.PARTIAL if not_done else RunStatus.SUCCEEDED
    elif len(bad) < len(outcomes):
        status = RunStatus.PARTIAL
    else:
        status = RunStatus.FAILED
    exit_code = max(exit_codes, default=0)
    if bad and not exit_code:
        exit_code = RewriteJobError.exit_code
    ledger.finish_run(run_id, status, exit_code=exit_code, error="; ".join(errors) or None)
    return status, exit_code
