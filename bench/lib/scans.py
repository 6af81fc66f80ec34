"""The full-table scan the benchmarks time and check compacted tables with."""

from __future__ import annotations

import time
from typing import Any


def full_scan(spark: Any, table: str) -> tuple[float, tuple[int, str]]:
    """count(*) and an order-independent checksum over every column: forces reading all columns, applying deletes."""
    from pyspark.sql import functions as F

    t0 = time.perf_counter()
    df = spark.table(table)
    row = df.agg(F.count(F.lit(1)).alias("n"),
                 F.sum(F.xxhash64(*[F.col(c) for c in df.columns]).cast("decimal(38,0)")).alias("h")).collect()[0]
    return time.perf_counter() - t0, (int(row["n"]), str(row["h"]))
