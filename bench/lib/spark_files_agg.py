"""Per-partition file statistics of an Iceberg table through Spark's ``<table>.files`` metadata table.

This is what the alternative to ``compaction.metadata.inspect`` costs: Spark loads the table, reads every manifest through
the ``files`` metadata table and aggregates per (spec_id, partition, content): file count, bytes, records.

Used two ways by ``bench/inspect_scale.py``:

* in-session: ``aggregate(spark, "cat.ns.t")`` in an already-running SparkSession;
* spark-submit: this file is copied into a temp folder and run as the application
  (``spark-submit ... spark_files_agg.py <cat.ns.t> <out.json>``); it writes the rows as JSON and prints
  ``ROWS <n>``. Everything Spark needs (catalog, jars) comes from the spark-submit command line, so this file
  imports nothing of the project (it runs alone).

Rows are normalised to JSON-safe tuples ``(spec_id, [partition values...], content, files, bytes, records)`` with
partition values in Iceberg's internal representation (``days(ts)`` -> int days since epoch), which is how
``compaction.core.model`` keys partitions, so the three measured paths can be compared value by value.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
from typing import Any

QUERY = (
    "SELECT spec_id, partition, content, COUNT(*) AS file_count, "
    "SUM(file_size_in_bytes) AS total_bytes, SUM(record_count) AS total_records "
    "FROM {table}.files GROUP BY spec_id, partition, content"
)

_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH_TS = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _internal(value: Any) -> Any:
    if isinstance(value, _dt.datetime):
        base = _EPOCH_TS if value.tzinfo else _EPOCH_TS.replace(tzinfo=None)
        delta = value - base
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    return value


def aggregate(spark: Any, table: str) -> list[tuple[Any, ...]]:
    rows = spark.sql(QUERY.format(table=table)).collect()
    out = []
    for r in rows:
        part = r["partition"]
        values = [_internal(v) for v in part] if part is not None else []
        out.append((int(r["spec_id"]), values, int(r["content"]), int(r["file_count"]),
                    int(r["total_bytes"]), int(r["total_records"])))
    return out


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    table, out_path = argv[1], argv[2]
    spark = SparkSession.builder.getOrCreate()
    try:
        rows = aggregate(spark, table)
    finally:
        spark.stop()
    with open(out_path, "w") as fh:
        json.dump(rows, fh)
    print(f"ROWS {len(rows)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
