"""Task body of the ``iceberg_maintenance`` DAG: ``icecompact maintain`` for one table (see docs/maintenance.md).

Kept out of the DAG file so parsing imports no pyspark/pyiceberg. The worker plans (metadata reads, the ledger) and
records; Iceberg's actions run in a spark-submit job to the Spark connection's master (``spark_default``, else the
embedded default ``$ICECOMPACT_SPARK_MASTER`` or ``local[2]``), never in the worker process."""

from __future__ import annotations

from typing import Any, Mapping


def maintain(table: str, params: Mapping[str, Any], echo: Any = print) -> dict[str, Any]:
    from icecompact_airflow.connections import resolve_catalog

    from icecompact_airflow.hooks import spark_settings

    from compaction.ops.maintenance import maintain_table

    report = maintain_table(resolve_catalog(params.get("catalog")), table, overrides=dict(params.get("overrides") or {}),
                            dry_run=bool(params.get("dry_run")), progress=echo, spark_settings=spark_settings())
    for d in report.plan.decisions:
        echo(f"{report.plan.table} {d.action.value}: {'RUN' if d.run else '-'} {d.reason}")
    for r in report.results:
        echo(f"{report.plan.table} {r.action.value}: {r.status}, {r.files_removed} file(s), {r.bytes_removed} byte(s)"
             + (f" ({r.error})" if r.error else ""))
    if report.exit_code:
        from compaction.core.errors import MaintenanceError

        raise MaintenanceError(f"maintenance of {table} {report.status}: "
                               + "; ".join(r.error or "" for r in report.results if r.error))
    return {"table": table, "run_id": report.run_id, "status": report.status,
            "results": [r.to_dict() for r in report.results]}
