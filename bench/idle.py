"""Idle cost of a resident executor: CPU and memory of its whole process tree (supervisor, spark-submit JVM,
Python driver) while it waits for work, sampled every 10 s, after one work item warmed it up.

Goal: < 5 % of one core on average and a steady footprint (the RSS of the last third within 5 % of the first third's)
over ``--minutes`` (15). Writes ``bench/results/idle.{txt,json}``::

    .venv/bin/python bench/idle.py [--minutes 15]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)


def tree(pid: int) -> list:  # type: ignore[type-arg]
    import psutil

    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=15.0)
    ap.add_argument("--out", default=str(RESULTS_DIR / "idle"))
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="icecompact-idle-"))
    os.environ["ICECOMPACT_HOME"] = str(work / "home")
    import psutil

    from compaction.catalog import CatalogConfig
    from compaction.core.plan import CompactionMode
    from compaction.ops.executor import ensure_executor, stop_executors
    from compaction.ledger import Ledger
    from compaction.ops.runner import run_table
    from compaction.spark.session import SparkSettings, build_session
    from compaction.demo.workload import WorkloadSpec, generate

    catalog = CatalogConfig.embedded()
    url = f"sqlite:///{work / 'ledger.db'}"
    os.environ["ICECOMPACT_LEDGER_URL"] = url
    spark = build_session([catalog], SparkSettings(master="local[1]", app_name="icecompact-idle-setup"))
    generate(spark, catalog, "idle.t", WorkloadSpec(seed=5, commits=2))
    spark.stop()
    with Ledger.open(url) as ledger:
        ensure_executor(catalog, ledger, ledger_url=url)
        report = run_table(catalog, "idle.t", mode=CompactionMode.MINOR, ledger=ledger, executor="resident")
        print(f"idle: warm-up run {report.status.value}", flush=True)
        (record,) = ledger.executors()
        pid = int(record.pid or 0)
        samples = []
        known: dict[int, Any] = {}

        def cpu_and_rss() -> tuple[float, float, int]:
            """CPU seconds (user + system) and RSS bytes of the tree now, the same Process objects kept between
            samples (a new psutil.Process reports no CPU percentage on its first call)."""
            for proc in tree(pid):
                known.setdefault(proc.pid, proc)
            cpu = rss = 0.0
            alive = 0
            for proc in list(known.values()):
                try:
                    times = proc.cpu_times()
                    cpu += times.user + times.system
                    rss += proc.memory_info().rss
                    alive += 1
                except psutil.NoSuchProcess:
                    known.pop(proc.pid, None)
            return cpu, rss, alive

        last_cpu, _, _ = cpu_and_rss()
        last_t = time.time()
        end = time.time() + args.minutes * 60
        while time.time() < end:
            time.sleep(10)
            cpu, rss, alive = cpu_and_rss()
            now = time.time()
            samples.append({"t": now, "cpu_percent": round(100 * (cpu - last_cpu) / (now - last_t), 2),
                            "rss_mib": round(rss / 2**20, 1), "processes": alive})
            last_cpu, last_t = cpu, now
        stop_executors(ledger, progress=lambda _m: None)
    n = len(samples)
    mean_cpu = sum(s["cpu_percent"] for s in samples) / max(1, n)
    first = [s["rss_mib"] for s in samples[: max(1, n // 3)]]
    last = [s["rss_mib"] for s in samples[-max(1, n // 3):]]
    drift = (sum(last) / len(last)) / (sum(first) / len(first)) - 1 if first and last else 0.0
    met_cpu, met_mem = mean_cpu < 5.0, abs(drift) <= 0.05
    lines = [f"idle resident executor for {args.minutes:g} min ({n} samples every 10 s, process tree of pid {pid})",
             f"  {'MET    ' if met_cpu else 'NOT MET'}  CPU < 5 % of one core: mean {mean_cpu:.2f} %, max "
             f"{max((s['cpu_percent'] for s in samples), default=0):.2f} %",
             f"  {'MET    ' if met_mem else 'NOT MET'}  steady memory: RSS first third {sum(first) / len(first):.0f} MiB,"
             f" last third {sum(last) / len(last):.0f} MiB ({drift:+.1%})"]
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".txt").write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({"samples": samples, "mean_cpu_percent": mean_cpu,
                                                    "rss_drift": drift}, indent=1))
    print("\n".join(lines), flush=True)
    return 0 if met_cpu and met_mem else 1


if __name__ == "__main__":
    sys.exit(main())
