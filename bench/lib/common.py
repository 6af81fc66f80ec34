"""What every benchmark script shares: where it lives, where results go, a ready ``sys.path``, and the small
measurements and report lines the scripts have in common.

Imported first by each ``bench/*.py`` script (``from lib.common import ...``: the script's folder, ``bench/``, is on
``sys.path`` when it runs). Importing it puts the repository (``compaction``) and ``bench/`` on ``sys.path`` and
sets ``SPARK_LOCAL_IP`` unless it is set."""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
from pathlib import Path
from typing import Any, Iterator

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

BENCH_DIR = Path(__file__).resolve().parents[1]
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
for _path in (str(ROOT), str(BENCH_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def rss_bytes(pid: int) -> int:
    """Resident set size of a process in bytes (Linux ``/proc``), 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def summary(samples: list[float]) -> dict[str, Any]:
    """A contender's seconds over its repeats: median, min, max (rounded) and every sample."""
    return {"median_s": round(statistics.median(samples), 4), "min_s": round(min(samples), 4),
            "max_s": round(max(samples), 4), "samples_s": [round(s, 4) for s in samples]}


def timing_line(label: str, stats: dict[str, float], width: int) -> str:
    """One row of a results table: median and (min-max) of a contender's seconds."""
    return f"  {label:<{width}} {stats['median_s']:8.2f} s   ({stats['min_s']:.2f}-{stats['max_s']:.2f})"


def table_files(spark: Any, table_ref: str) -> dict[str, int]:
    """Live files of an Iceberg table by kind (its ``files`` metadata table): data files and bytes, equality-delete
    files, position-delete files, deletion vectors (position deletes in Puffin files)."""
    rows = spark.sql(f"SELECT content, file_format, count(*) AS n, sum(file_size_in_bytes) AS b "
                     f"FROM {table_ref}.files GROUP BY content, file_format").collect()
    out = {"data_files": 0, "data_bytes": 0, "equality_delete_files": 0, "position_delete_files": 0, "dvs": 0}
    for r in rows:
        if r["content"] == 0:
            out["data_files"] += int(r["n"])
            out["data_bytes"] += int(r["b"])
        elif r["content"] == 2:
            out["equality_delete_files"] += int(r["n"])
        elif r["file_format"] == "PUFFIN":
            out["dvs"] += int(r["n"])
        else:
            out["position_delete_files"] += int(r["n"])
    return out


@contextlib.contextmanager
def embedded_spark(catalog_name: str, app_name: str, namespace: str | None = None) -> Iterator[tuple[Any, Any]]:
    """(spark, catalog config) on a throwaway embedded catalog (SQLite + a local warehouse in a temporary folder),
    with ``namespace`` created; the session stopped and the folder removed on exit."""
    import shutil
    import tempfile

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix=f"{app_name}-"))
    catalog_cfg = CatalogConfig.sqlite(catalog_name, workdir / "catalog.db", workdir / "warehouse")
    try:
        spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name=app_name))
        try:
            if namespace:
                spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {catalog_name}.{namespace}")
            yield spark, catalog_cfg
        finally:
            spark.stop()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
