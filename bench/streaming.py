"""Write amplification over a streaming run: the bulk generator's CDC stream
(``icecompact_testing.bulk``, one fragment file + one equality delete per partition per round, no position-delete
commits) with a compaction every ``--every`` rounds, twice from the same seed, side by side in one process:

* ``auto``: our ``--mode auto`` with the default policy (MINOR merges fragments and converts equality deletes;
  a MAJOR rewrites only small and delete-heavy segments);
* ``auto_counts``: the same with the read-cost model off (``compaction.read-cost.max-overhead=0``: the count
  thresholds alone, as before the model);
* ``full``: a full rewrite of every partition with deletes (our MAJOR with ``compaction.major.full-rewrite=true``,
  what ``rewrite_data_files`` with ``delete-file-threshold=1`` does).

Reported per contender: bytes written by the compaction commits (data + delete files, from the snapshot summaries'
``added-files-size`` of every snapshot carrying our plan id), bytes of data files rewritten, compaction time, and at
the end a full scan (median of ``--repeat``) and the files left. Correctness: both tables hold the same rows
(count + checksum) as the generator's model.

Goals: bytes written by ``auto`` <= 0.3x ``full``; final scan of ``auto`` within 1.3x of ``full``'s; bytes written
by ``auto`` <= 1.5x ``auto_counts`` (what the read-cost model may spend for its scans).

Usage::

    .venv/bin/python bench/streaming.py                 # size m, format v2, compaction every 4 rounds
    .venv/bin/python bench/streaming.py --size s --every 2

Results: ``bench/results/streaming.{txt,json}``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lib.common import RESULTS_DIR, table_files  # noqa: E402  (sets sys.path, SPARK_LOCAL_IP)
from lib.scans import full_scan  # noqa: E402

CATALOG_NAME = "stream"
NAMESPACE = "ns"
MIB = 1024 * 1024
CONTENDERS = {"auto": ("auto", {}), "auto_counts": ("auto", {"read_cost_max_overhead": 0}),
              "full": ("major", {"major_full_rewrite": True})}


class BenchmarkError(RuntimeError):
    pass


def compaction_bytes(spark: Any, table_ref: str) -> dict[str, int]:
    """Bytes added by our compaction commits (their summaries carry our plan id) and bytes of data files removed."""
    from compaction.spark import jvm as J
    from compaction.spark.major import PLAN_PROPERTY

    table = J.load_table(spark, table_ref)
    table.refresh()
    out = {"commits": 0, "added_bytes": 0, "removed_data_bytes": 0, "rewritten_data_files": 0}
    for snapshot in table.snapshots():
        summary = snapshot.summary()
        if summary is None or summary.get(PLAN_PROPERTY) is None:
            continue
        out["commits"] += 1
        out["added_bytes"] += int(summary.getOrDefault("added-files-size", "0"))
        out["removed_data_bytes"] += int(summary.getOrDefault("removed-files-size", "0"))
        out["rewritten_data_files"] += int(summary.getOrDefault("deleted-data-files", "0"))
    return out


def run_contender(spark: Any, catalog_cfg: Any, name: str, args: argparse.Namespace) -> dict[str, Any]:
    from compaction.core.planner import plan
    from compaction.core.policy import CompactionPolicy
    from compaction.metadata.inspect import inspect_table
    from compaction.spark.job import run_group
    from compaction.spark.validation import ValidationLevel
    from icecompact_testing.bulk import BulkSpec, generate_bulk

    mode, overrides = CONTENDERS[name]
    table_name = f"{NAMESPACE}.t_{name}"
    ref = f"{CATALOG_NAME}.{table_name}"
    spec = BulkSpec.named(args.size, args.format_version, seed=args.seed, position_delete_every=0)
    runs: list[dict[str, Any]] = []

    def compact(round_: int) -> None:
        if round_ % args.every and round_ != spec.rounds:
            return
        t0 = time.perf_counter()
        now = _dt.datetime.now(_dt.timezone.utc)
        state = inspect_table(catalog_cfg, table_name)
        the_plan = plan(state, CompactionPolicy.resolve(state.properties, overrides), mode, now)
        parts = []
        for group in the_plan.groups:
            parts += run_group(spark, the_plan, group.group_id, level=ValidationLevel.parse(args.validation)).partitions
        bad = [f"{p.label}: {p.status} {p.error or ''}" for p in parts if p.status not in ("committed", "no_op", "skipped")]
        if bad:
            raise BenchmarkError(f"{name} after round {round_}: {bad[:3]}")
        kinds = sorted({d.kind.value for d in the_plan.decisions if d.kind.value != "none"})
        runs.append({"round": round_, "seconds": round(time.perf_counter() - t0, 2), "kinds": kinds,
                     "partitions": len(parts), "rewritten_data_files": sum(p.rewritten_data_files for p in parts)})
        print(f"[{name}] round {round_}: {'/'.join(kinds) or 'nothing'} on {len(parts)} partitions, "
              f"{runs[-1]['rewritten_data_files']} data files rewritten, {runs[-1]['seconds']:.1f} s", flush=True)

    built = generate_bulk(spark, catalog_cfg, table_name, spec, replace=True, after_round=compact,
                          log=lambda m: print(f"[{name}] {m}", flush=True))
    samples, fp = [], None
    for _ in range(args.repeat):
        elapsed, fp = full_scan(spark, ref)
        samples.append(elapsed)
    assert fp is not None
    if fp[0] != built.live_rows:
        raise BenchmarkError(f"{name}: Spark counts {fp[0]} rows, the generator's model {built.live_rows}")
    return {"contender": name, "mode": mode, "overrides": overrides, "runs": runs,
            "compaction_seconds": round(sum(r["seconds"] for r in runs), 2), "bytes": compaction_bytes(spark, ref),
            "scan_s": round(statistics.median(samples), 3), "fingerprint": list(fp), "files": table_files(spark, ref),
            "live_rows": built.live_rows, "generator_stats": dict(built.stats)}


def render(r: dict[str, Any]) -> str:
    auto, full = r["contenders"]["auto"], r["contenders"]["full"]
    counts = r["contenders"].get("auto_counts")
    lines = [f"streaming  {r['created_at']}  ({r['machine']['cpus']} cores shared; size {r['config']['size']}, "
             f"v{r['config']['format_version']}, {r['config']['rounds']} rounds, compaction every "
             f"{r['config']['every']} rounds, validation {r['config']['validation']}; absolute times are noisy)",
             "",
             f"   {'contender':<12}{'written MiB':>13}{'data MiB rewritten':>20}{'data files rewritten':>22}"
             f"{'compaction s':>14}{'final scan s':>14}   files data/eq/pos/dv"]
    for c in (auto, counts, full):
        if c is None:
            continue
        f = c["files"]
        lines.append(f"   {c['contender']:<12}{c['bytes']['added_bytes'] / MIB:>13.1f}"
                     f"{c['bytes']['removed_data_bytes'] / MIB:>20.1f}{c['bytes']['rewritten_data_files']:>22}"
                     f"{c['compaction_seconds']:>14.1f}{c['scan_s']:>14.2f}   "
                     f"{f['data_files']}/{f['equality_delete_files']}/{f['position_delete_files']}/{f['dvs']}")
    g = r["goals"]
    lines += ["", f"   bytes written auto / full = {g['bytes_ratio']:.3f}  (goal <= 0.3: "
                  f"{'met' if g['bytes_met'] else 'NOT met'})",
              f"   final scan auto / full    = {g['scan_ratio']:.2f}x  (goal <= 1.3: "
              f"{'met' if g['scan_met'] else 'NOT met'})",
              f"   bytes written auto / auto_counts = {g.get('model_bytes_ratio', float('nan')):.2f}  (goal <= 1.5: "
              f"{'met' if g.get('model_bytes_met') else 'NOT met'}); final scan auto_counts / full = "
              f"{g.get('counts_scan_ratio', float('nan')):.2f}x",
              f"   same rows in every table as the generator's model: {g['same_rows']}",
              "", "   per compaction (auto): " + "; ".join(
                  f"r{x['round']} {'/'.join(x['kinds']) or '-'} {x['rewritten_data_files']}f {x['seconds']:.1f}s"
                  for x in auto["runs"]),
              "   per compaction (auto_counts): " + "; ".join(
                  f"r{x['round']} {'/'.join(x['kinds']) or '-'} {x['rewritten_data_files']}f {x['seconds']:.1f}s"
                  for x in (counts or {}).get("runs", [])),
              "   per compaction (full): " + "; ".join(
                  f"r{x['round']} {'/'.join(x['kinds']) or '-'} {x['rewritten_data_files']}f {x['seconds']:.1f}s"
                  for x in full["runs"])]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", default="m", help="bulk size (default m)")
    ap.add_argument("--format-version", type=int, default=2, choices=(2, 3))
    ap.add_argument("--every", type=int, default=4, help="compact after every N-th round (default 4)")
    ap.add_argument("--validation", default="none", choices=("none", "count", "checksum"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--output", type=Path, default=RESULTS_DIR / "streaming", help="result stem")
    args = ap.parse_args(argv)
    from icecompact_testing.bulk import SIZES, BulkSpec

    if args.size not in SIZES or args.every < 1 or args.repeat < 1:
        ap.error(f"--size must be one of {sorted(SIZES)}; --every and --repeat >= 1")

    from compaction.catalog import CatalogConfig
    from compaction.spark.session import SparkSettings, build_session

    workdir = Path(tempfile.mkdtemp(prefix="streaming-bench-"))
    catalog_cfg = CatalogConfig.sqlite(CATALOG_NAME, workdir / "catalog.db", workdir / "warehouse")
    spark = build_session([catalog_cfg], SparkSettings.from_environment(app_name="streaming-bench"))
    load_start = os.getloadavg()
    try:
        contenders = {name: run_contender(spark, catalog_cfg, name, args) for name in CONTENDERS}
        auto, full, counts = contenders["auto"], contenders["full"], contenders["auto_counts"]
        model_bytes_ratio = auto["bytes"]["added_bytes"] / max(counts["bytes"]["added_bytes"], 1)
        bytes_ratio = auto["bytes"]["added_bytes"] / max(full["bytes"]["added_bytes"], 1)
        scan_ratio = auto["scan_s"] / max(full["scan_s"], 1e-9)
        result = {
            "benchmark": "streaming",
            "created_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "command": " ".join([".venv/bin/python", "bench/streaming.py", *(argv if argv is not None else sys.argv[1:])]),
            "config": {"size": args.size, "format_version": args.format_version, "every": args.every,
                       "rounds": BulkSpec.named(args.size).rounds, "validation": args.validation,
                       "repeat": args.repeat, "seed": args.seed},
            "machine": {"cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load_start],
                        "loadavg_end": [round(x, 2) for x in os.getloadavg()]},
            "contenders": contenders,
            "goals": {"bytes_ratio": round(bytes_ratio, 4), "bytes_met": bytes_ratio <= 0.3,
                      "scan_ratio": round(scan_ratio, 3), "scan_met": scan_ratio <= 1.3,
                      "model_bytes_ratio": round(model_bytes_ratio, 3), "model_bytes_met": model_bytes_ratio <= 1.5,
                      "counts_scan_ratio": round(counts["scan_s"] / max(full["scan_s"], 1e-9), 3),
                      "same_rows": auto["fingerprint"] == full["fingerprint"] == counts["fingerprint"]},
        }
        text = render(result)
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.with_suffix(".json").write_text(json.dumps(result, indent=2, default=str) + "\n")
        args.output.with_suffix(".txt").write_text(text + "\n")
        print("\n" + text)
        print(f"wrote {args.output}.{{txt,json}}")
        return 0 if result["goals"]["same_rows"] else 1
    finally:
        spark.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
