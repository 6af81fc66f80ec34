"""spark-submit entry point: ``python -m compaction.spark run --plan P --group G --result R --catalog NAME``.

The Spark conf (catalog, jars, secrets from a private properties file) comes from spark-submit; nothing secret is
passed in argv. Writes a JSON :class:`~compaction.spark.job.GroupResult` to ``--result`` and exits with its code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from compaction.core.errors import CompactionError, ConfigError
from compaction.core.identifiers import validate_identifier_part
from compaction.core.plan import CompactionPlan


def _write(path: Path, payload: dict) -> None:  # type: ignore[type-arg]
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=str))
    os.replace(tmp, path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m compaction.spark")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run one job group of a plan")
    run.add_argument("--plan", required=True, type=Path)
    run.add_argument("--group", required=True, type=int)
    run.add_argument("--result", required=True, type=Path)
    run.add_argument("--catalog", required=True)
    run.add_argument("--validation", default="count")
    run.add_argument("--max-retries", type=int, default=3)
    args = parser.parse_args(argv)

    from compaction.spark.job import error_result, run_group
    from compaction.spark.submit import progress_path
    from compaction.spark.validation import ValidationLevel

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
        result = run_group(spark, plan, args.group, level=level, max_retries=args.max_retries,
                           progress=lambda m: print(m, file=sys.stderr, flush=True),
                           checkpoint=lambda incomplete: _write(progress_path(args.result), incomplete))
    except CompactionError as e:
        result = error_result(plan_id, args.group, table, e)
    _write(args.result, result.to_dict())
    progress_path(args.result).unlink(missing_ok=True)
    print(f"icecompact: group {args.group} {result.status}", file=sys.stderr, flush=True)
    return result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
