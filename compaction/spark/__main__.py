"""spark-submit entry point: ``python -m compaction.spark run --plan P --group G --result R --catalog NAME``, and
``python -m compaction.spark check --catalog C --namespace N --name T --snapshot S [--snapshot S2] --result R``
(the post-hoc check of snapshots whose job never checked them, compaction.spark.posthoc), and
``python -m compaction.spark serve --catalog C --executor-id X --result R [options]`` (a resident executor taking work
from the ledger's queue, compaction.spark.executor; the ledger URL comes from ``$ICECOMPACT_LEDGER_URL``), and
``python -m compaction.spark maintain --plan P --result R --catalog NAME`` (a maintenance plan of
compaction.core.maintenance executed by compaction.spark.maintenance; the host records it, compaction.ops.maintenance).

The Spark conf (catalog, jars, secrets from a private properties file) comes from spark-submit; nothing secret is
passed in argv. Writes a JSON :class:`~compaction.spark.job.GroupResult` to ``--result`` and exits with its code.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable, Iterator

from compaction.core.errors import CompactionError, ConfigError
from compaction.core.identifiers import validate_identifier_part
from compaction.core.plan import CompactionPlan
from compaction.core.run_options import MAX_RETRIES_DEFAULT, VALIDATION_DEFAULT, VALIDATION_LEVELS
from compaction.ledger.engine import LEDGER_URL_ENV
from compaction.spark.gate import gated


def _timestamped(message: str) -> None:
    """A resident executor's log line, led by its UTC time (the executor serves for hours; its items' steps are
    read from the log)."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
    print(f"{stamp}Z {message}", file=sys.stderr, flush=True)


def _write(path: Path, payload: dict) -> None:  # type: ignore[type-arg]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compaction.spark")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run job groups of a plan (--group G --result R, repeated: one process, one "
                                     "rewrite action for all of them)")
    run.add_argument("--plan", required=True, type=Path)
    run.add_argument("--group", required=True, type=int, action="append")
    run.add_argument("--result", required=True, type=Path, action="append")
    run.add_argument("--catalog", required=True)
    run.add_argument("--validation", choices=VALIDATION_LEVELS, default=VALIDATION_DEFAULT)
    run.add_argument("--max-retries", type=int, default=MAX_RETRIES_DEFAULT)
    check = sub.add_parser("check", help="post-hoc check of snapshots whose job never checked them")
    check.add_argument("--catalog", required=True)
    check.add_argument("--namespace", required=True, action="append")
    check.add_argument("--name", required=True)
    check.add_argument("--snapshot", required=True, action="append", type=int)
    check.add_argument("--result", required=True, type=Path)
    check.add_argument("--validation", choices=VALIDATION_LEVELS, default=VALIDATION_DEFAULT)
    maintain = sub.add_parser("maintain", help="execute a maintenance plan (expire snapshots, rewrite manifests, "
                                               "delete orphan files, old metadata versions)")
    maintain.add_argument("--plan", required=True, type=Path)
    maintain.add_argument("--result", required=True, type=Path)
    maintain.add_argument("--catalog", required=True)
    serve = sub.add_parser("serve", help="resident executor: run work items from the ledger's queue")
    serve.add_argument("--catalog", required=True)
    serve.add_argument("--executor-id", required=True)
    serve.add_argument("--generation", type=int, default=1)
    serve.add_argument("--result", required=True, type=Path)
    from compaction.spark.contract import add_option_args

    add_option_args(serve)
    args = parser.parse_args(argv)
    if args.command == "check":
        return _check(args)
    if args.command == "serve":
        return _serve(args)
    if args.command == "maintain":
        return _maintain(args)

    from compaction.spark.job import error_result, run_groups
    from compaction.spark.contract import progress_path
    from compaction.spark.validation import ValidationLevel

    if len(args.group) != len(args.result):
        parser.error("give one --result per --group")
    paths = dict(zip(args.group, args.result))
    plan_id, table = "?", "?"
    try:
        validate_identifier_part(args.catalog, "catalog name")
        level = ValidationLevel.parse(args.validation)
        if args.max_retries < 0:
            raise ConfigError(f"invalid --max-retries {args.max_retries}: must be >= 0")
        try:
            plan = CompactionPlan.from_json(args.plan.read_text())
        except OSError as e:
            raise ConfigError(f"cannot read plan file {args.plan}: {e}") from e
        plan_id, table = plan.plan_id, str(plan.table)
        if plan.table.catalog != args.catalog:
            raise ConfigError(f"plan is for catalog {plan.table.catalog!r}, job was started for {args.catalog!r}")
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()
        progress = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
        with _commit_gate(plan, progress) as gate, gated(gate, plan, progress):
            results = run_groups(spark, plan, list(paths), level=level, max_retries=args.max_retries,
                                 progress=progress,
                                 checkpoint=lambda gid, incomplete: _write(progress_path(paths[gid]), incomplete))
    except CompactionError as e:
        results = [error_result(plan_id, gid, table, e) for gid in paths]
    for result in results:
        _write(paths[result.group_id], result.to_dict())
        progress_path(paths[result.group_id]).unlink(missing_ok=True)
        print(f"icecompact: group {result.group_id} {result.status}", file=sys.stderr, flush=True)
    return max(result.exit_code for result in results)


@contextlib.contextmanager
def _commit_gate(plan: CompactionPlan, progress: Callable[[str], None]) -> Iterator[Any]:
    """The ledger's commit gate when the host handed the job its ledger (``$ICECOMPACT_LEDGER_URL``, set by
    ``icecompact run``): every commit then yields to the writers' leases (compaction.core.yielding). Without it
    (a job started by other means, a cluster-mode driver without the host's environment) commits are not gated."""
    if not os.environ.get(LEDGER_URL_ENV):
        yield None
        return
    from compaction.ledger import Ledger, LedgerCommitGate

    # Opened at the first commit: a ledger that is down when the job starts (a database restart) is waited for there.
    gate = LedgerCommitGate(lambda: Ledger.open(upgrade=False), plan.table.catalog, f"plan {plan.plan_id}",
                            progress=progress)
    try:
        yield gate
    finally:
        gate.close()


def _serve(args: argparse.Namespace) -> int:
    """``serve``: writes ``{"exit", "reason"}`` to ``--result`` when it leaves; exit code 0 (stop) or
    compaction.spark.executor.EXIT_RESTART (replace me with a fresh executor)."""
    from compaction.spark.contract import options_from_args
    from compaction.ledger import Ledger

    try:
        validate_identifier_part(args.catalog, "catalog name")
        options = options_from_args(args)
        from pyspark.sql import SparkSession

        from compaction.spark.executor import serve

        spark = SparkSession.builder.getOrCreate()
        # Its supervisor (the installed package) migrated the schema; on a cluster master this runs from the
        # --py-files zip, from which Alembic cannot migrate.
        with Ledger.open(upgrade=False) as ledger:
            code, reason = serve(spark, ledger, args.executor_id, args.catalog, options=options,
                                 generation=args.generation, progress=_timestamped)
    except CompactionError as e:
        code, reason = e.exit_code, str(e)
    _write(args.result, {"exit": code, "reason": reason})
    return code


def _maintain(args: argparse.Namespace) -> int:
    """``maintain``: writes the action results (compaction.spark.maintenance.result_payload) to ``--result``, and
    after each action a checkpoint of the results so far next to it (a job killed mid-plan leaves what it removed);
    exit code 0 when every action succeeded or was deferred, else MaintenanceError's (a result is written either
    way: the host records it)."""
    from compaction.core.errors import MaintenanceError
    from compaction.core.maintenance import MaintenancePlan
    from compaction.spark.contract import progress_path
    from compaction.spark.maintenance import result_payload

    plan_id = "?"
    checkpoint = progress_path(args.result)
    try:
        validate_identifier_part(args.catalog, "catalog name")
        try:
            plan = MaintenancePlan.from_json(args.plan.read_text())  # checks maintenance_plan_format_version
        except OSError as e:
            raise ConfigError(f"cannot read maintenance plan file {args.plan}: {e}") from e
        plan_id = plan.plan_id
        if plan.table.catalog != args.catalog:
            raise ConfigError(f"plan is for catalog {plan.table.catalog!r}, job was started for {args.catalog!r}")
        from pyspark.sql import SparkSession

        from compaction.spark.maintenance import execute_plan

        spark = SparkSession.builder.getOrCreate()
        results = execute_plan(spark, plan, progress=lambda m: print(m, file=sys.stderr, flush=True),
                               on_result=lambda done: _write(checkpoint, result_payload(plan_id, done, complete=False)))
        payload, code = result_payload(plan_id, results), 0 if all(r.ok for r in results) else MaintenanceError.exit_code
    except CompactionError as e:
        payload, code = result_payload(plan_id, [], error=str(e)), e.exit_code
    except Exception as e:  # noqa: BLE001 - py4j: the table cannot be loaded, ...; the host records why
        payload, code = result_payload(plan_id, [], error=f"{type(e).__name__}: {str(e)[:2000]}"), 1
    _write(args.result, payload)
    checkpoint.unlink(missing_ok=True)
    return code


def _check(args: argparse.Namespace) -> int:
    """``check``: writes ``{"status", "checks": [...], "error"}`` to ``--result``; exit code 0 when every snapshot
    passed or was undone, else the CompactionError's."""
    from compaction.core.model import TableIdentity
    from compaction.spark.validation import ValidationLevel

    payload: dict = {"status": "failed", "checks": [], "error": None}  # type: ignore[type-arg]
    code = 0
    try:
        for part in (args.catalog, *args.namespace, args.name):
            validate_identifier_part(part, "table name part")
        level = ValidationLevel.parse(args.validation)
        if level is ValidationLevel.NONE:
            raise ConfigError("a post-hoc check needs validation count or checksum")
        from pyspark.sql import SparkSession

        from compaction.spark.posthoc import check_snapshots

        spark = SparkSession.builder.getOrCreate()
        identity = TableIdentity(args.catalog, tuple(args.namespace), args.name)
        checks = check_snapshots(spark, identity, list(args.snapshot), level,
                                 progress=lambda m: print(m, file=sys.stderr, flush=True))
        payload["checks"] = checks
        attention = [c for c in checks if c["result"] == "needs_attention"]
        payload["status"] = "needs_attention" if attention else "succeeded"
    except CompactionError as e:
        payload["error"], code = str(e), e.exit_code
    _write(args.result, payload)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
