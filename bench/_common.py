"""What every benchmark script shares: where it lives, where results go, and a ready ``sys.path``.

Imported first by each ``bench/*.py`` script (the script's folder is on ``sys.path`` when it runs)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
for _path in (str(ROOT), str(BENCH_DIR)):
    if _path not in sys.path:
        sys.path.insert(0, _path)


def timing_line(label: str, stats: dict[str, float], width: int) -> str:
    """One row of a results table: median and (min-max) of a contender's seconds."""
    return f"  {label:<{width}} {stats['median_s']:8.2f} s   ({stats['min_s']:.2f}-{stats['max_s']:.2f})"
