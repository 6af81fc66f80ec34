"""Spark lines benchmark: ``bench/scale.py`` at one size on the default Spark line (4.1) and on Spark 3.5 in one run,
our contenders and Iceberg's ``CALL system.rewrite_data_files`` on each line, and the ratios compared across lines.

Each line runs in its own venv (``.venv``, ``.venv-spark3.5``; ``make install`` / ``make install SPARK=3.5``) with
that line's default Iceberg release (docs/compatibility.md). The lines alternate (4.1, 3.5, 3.5, 4.1, ... for
``--rounds``): a drift of the shared machine over the run then hits both alike. Every ``scale.py`` run builds its
own table from the same seed (the generator is deterministic), checks every clone against the base's rows and fails
otherwise, so a line that computed a wrong result cannot report a time.

What is compared: per line, the median over its rounds of each ratio ``scale.py`` reports (ours over the CALL at
validation none / count / checksum, MINOR over MAJOR, scans), and the goal: our MAJOR over the CALL
within 10 % of itself across the two lines. Absolute times per line are reported too (Spark 4.1 against 3.5 on the
same work), with the caveat that each line's table is its own build.

Usage::

    .venv/bin/python bench/spark_lines.py                 # size m, 2 rounds (4 scale runs, ~12 min on 2 cores)
    .venv/bin/python bench/spark_lines.py --size s --rounds 1

Results: ``bench/results/spark_lines.{txt,json}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import BENCH_DIR, RESULTS_DIR, ROOT  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)

LINES = {"4.1": ROOT / ".venv", "3.5": ROOT / ".venv-spark3.5"}
#: Ratios of scale.py compared across lines (name in its "ratios" -> label).
COMPARED = (
    "major_none_over_call", "major_count_over_call", "major_checksum_over_call",
    "minor_none_over_major_none", "minor_count_over_major_count", "minor_convert_none_over_major_none",
    "call_over_parquet", "major_none_over_parquet", "scan_before_over_after_major", "scan_after_minor_over_floor",
)
GOAL_RATIO = "major_none_over_call"
GOAL_TOLERANCE = 0.10


def line_order(rounds: int) -> list[str]:
    first, second = list(LINES)
    order: list[str] = []
    for i in range(rounds):
        order += [first, second] if i % 2 == 0 else [second, first]
    return order


def run_scale(line: str, size: str, format_version: int, stem: Path) -> dict[str, Any]:
    python = LINES[line] / "bin" / "python"
    if not python.exists():
        raise SystemExit(f"no venv for Spark {line} at {LINES[line]}: run `make install SPARK={line}`")
    env = {k: v for k, v in os.environ.items() if k != "ICECOMPACT_ICEBERG_VERSION"}  # each line's default release
    cmd = [str(python), str(BENCH_DIR / "scale.py"), "--sizes", size, "--format-version", str(format_version),
           "--output", str(stem)]
    print(f">> Spark {line}: {' '.join(cmd[1:])}", flush=True)
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"scale.py on Spark {line} failed (exit {proc.returncode})")
    result = json.loads(stem.with_suffix(".json").read_text())
    result["_wall_s"] = round(time.perf_counter() - started, 1)
    return result


def versions(line: str) -> dict[str, str]:
    python = LINES[line] / "bin" / "python"
    out = subprocess.run([str(python), "-c", "from compaction.spark import artifacts as a; l = a.spark_line(); "
                          "print(a.installed_pyspark_version(), l.scala, a.iceberg_release(l).version)"],
                         cwd=ROOT, capture_output=True, text=True, check=True,
                         env={k: v for k, v in os.environ.items() if k != "ICECOMPACT_ICEBERG_VERSION"}).stdout.split()
    return {"pyspark": out[0], "scala": out[1], "iceberg": out[2]}


def summarize(runs: dict[str, list[dict[str, Any]]], size: str) -> dict[str, Any]:
    per_line: dict[str, Any] = {}
    for line, results in runs.items():
        sized = [r["sizes"][size] for r in results]
        times = {c: statistics.median(s["times"][c]["median_s"] for s in sized) for c in sized[0]["times"]}
        ratios = {k: statistics.median(s["ratios"][k] for s in sized) for k in COMPARED if k in sized[0]["ratios"]}
        per_line[line] = {"rounds": len(sized), "times_median_s": times, "ratios_median": ratios,
                          "ratios_each": {k: [s["ratios"][k] for s in sized] for k in ratios}}
    first, second = list(runs)
    a, b = per_line[first]["ratios_median"][GOAL_RATIO], per_line[second]["ratios_median"][GOAL_RATIO]
    spread = abs(a - b) / min(a, b)
    common = sorted(set(per_line[first]["times_median_s"]) & set(per_line[second]["times_median_s"]))
    return {"per_line": per_line,
            "time_ratio_first_over_second": {c: per_line[first]["times_median_s"][c] / per_line[second]["times_median_s"][c]
                                             for c in common if per_line[second]["times_median_s"][c] > 0},
            "goal": {"ratio": GOAL_RATIO, first: a, second: b, "relative_difference": spread,
                     "tolerance": GOAL_TOLERANCE, "met": spread <= GOAL_TOLERANCE}}


def report(summary: dict[str, Any], meta: dict[str, Any]) -> list[str]:
    first, second = list(summary["per_line"])
    vf, vs = meta["versions"][first], meta["versions"][second]
    lines = [f"spark_lines  {meta['created_at']}  (2 cores shared, Spark local[2]; size {meta['size']}, format "
             f"v{meta['format_version']}; {meta['rounds']} round(s), lines alternating: {' '.join(meta['order'])})",
             f"Spark {first}: pyspark {vf['pyspark']}, Scala {vf['scala']}, Iceberg {vf['iceberg']}   |   "
             f"Spark {second}: pyspark {vs['pyspark']}, Scala {vs['scala']}, Iceberg {vs['iceberg']}",
             f"whole benchmark {meta['wall_s'] / 60:.1f} min; medians over each line's rounds", "",
             f"{'ratio (median)':38} {'Spark ' + first:>12} {'Spark ' + second:>12}   each round ({first} | {second})"]
    for key in COMPARED:
        a = summary["per_line"][first]["ratios_median"].get(key)
        b = summary["per_line"][second]["ratios_median"].get(key)
        if a is None or b is None:
            continue
        each_a = " ".join(f"{x:.2f}" for x in summary["per_line"][first]["ratios_each"][key])
        each_b = " ".join(f"{x:.2f}" for x in summary["per_line"][second]["ratios_each"][key])
        lines.append(f"{key:38} {a:11.2f}x {b:11.2f}x   {each_a} | {each_b}")
    lines += ["", f"{'contender time (median)':38} {'Spark ' + first:>12} {'Spark ' + second:>12}   {first} / {second}"]
    for c, r in summary["time_ratio_first_over_second"].items():
        ta = summary["per_line"][first]["times_median_s"][c]
        tb = summary["per_line"][second]["times_median_s"][c]
        lines.append(f"{c:38} {ta:11.2f}s {tb:11.2f}s   {r:.2f}x")
    g = summary["goal"]
    lines += ["", f"goal: {g['ratio']} within {g['tolerance']:.0%} of itself across lines: {g[first]:.2f}x on "
                  f"{first}, {g[second]:.2f}x on {second}, difference {g['relative_difference']:.1%} -> "
                  f"{'met' if g['met'] else 'NOT met'}"]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="m")
    ap.add_argument("--format-version", type=int, choices=(2, 3), default=2)
    ap.add_argument("--rounds", type=int, default=2, help="rounds of both lines (alternating order)")
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "spark_lines")
    ap.add_argument("--from-json", type=Path, default=None,
                    help="report again from a stored spark_lines.json (its runs), running nothing")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds >= 1")
    runs: dict[str, list[dict[str, Any]]] = {line: [] for line in LINES}
    if args.from_json:
        stored = json.loads(args.from_json.read_text())
        meta = {k: stored[k] for k in ("created_at", "size", "format_version", "rounds", "order", "wall_s", "versions",
                                       "machine", "command")}
        args.size = meta["size"]
        runs = {line: [{"sizes": {args.size: r["size"]}, "_wall_s": r["wall_s"]} for r in rs]
                for line, rs in stored["runs"].items()}
    else:
        order = line_order(args.rounds)
        started = time.perf_counter()
        work = Path(tempfile.mkdtemp(prefix="spark-lines-"))  # kept: each scale run's own report (time per phase)
        for i, line in enumerate(order):
            stem = work / f"scale_spark{line.replace('.', '')}_{i}"
            runs[line].append(run_scale(line, args.size, args.format_version, stem))
        print(f"scale reports of each run: {work}", flush=True)
        meta = {"created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "size": args.size,
                "format_version": args.format_version, "rounds": args.rounds, "order": order,
                "wall_s": round(time.perf_counter() - started, 1), "versions": {line: versions(line) for line in LINES},
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "command": " ".join([".venv/bin/python", "bench/spark_lines.py",
                                     *(argv if argv is not None else sys.argv[1:])])}
    summary = summarize(runs, args.size)
    text = report(summary, meta)
    print("\n".join(text))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.with_suffix(".txt").write_text("\n".join(text) + "\n")
    args.output.with_suffix(".json").write_text(json.dumps(
        {"benchmark": "spark_lines", **meta, **summary,
         "runs": {line: [{"wall_s": r["_wall_s"], "size": r["sizes"][args.size]} for r in rs] for line, rs in runs.items()}},
        indent=1, default=str) + "\n")
    return 0 if summary["goal"]["met"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
